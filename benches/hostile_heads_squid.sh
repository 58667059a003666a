#!/usr/bin/env bash
# The hostile-head corpus (tests/framing/hostile.rs) through Squid as a
# reference: starts a throw-away Squid on a loopback port (memory cache
# only, every file in a temporary folder), runs the corpus through it and
# through crawlcache (each with its own recording origin), prints per shape
# what each proxy did, and stops Squid. A report, not a test: it asserts
# nothing about Squid.
#
#   bash benches/hostile_heads_squid.sh            # needs squid (apt-get install squid)
#   SQUID=/path/to/squid bash benches/hostile_heads_squid.sh
#
# Per shape: the statuses the client got, the first body's length, whether
# the client connection stayed in sync (`sync`) or was closed, what the
# origin read (method, target, Host, framing, content length), and whether
# a second fetch was a hit with the same bytes. Lines "squid vs
# crawlcache's expectation" list where Squid differs from what the
# crawlcache test asserts (many are legitimate choices, e.g. its own
# Via/X-Forwarded-For or a 400 where crawlcache forwards).
set -euo pipefail
cd "$(dirname "$0")/.."

squid_bin=${SQUID:-$(command -v squid || true)}
[ -n "$squid_bin" ] || squid_bin=/usr/sbin/squid
if [ ! -x "$squid_bin" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get install -y squid >/dev/null
        squid_bin=/usr/sbin/squid
    else
        echo "squid is not installed: apt-get install squid (or set SQUID=path)" >&2
        exit 1
    fi
fi

work=$(mktemp -d /tmp/crawlcache-squid-ref.XXXXXX)
# Squid started as root runs as its own user: it must write here.
chmod 0777 "$work"

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=
for _ in $(seq 1 50); do
    candidate=$((20000 + RANDOM % 40000))
    if port_free "$candidate"; then port=$candidate; break; fi
done
[ -n "$port" ] || { echo "no free loopback port found" >&2; exit 1; }

cat >"$work/squid.conf" <<EOF
http_port 127.0.0.1:$port
http_access allow localhost
http_access deny all
cache_mem 16 MB
maximum_object_size_in_memory 1 MB
pid_filename $work/squid.pid
cache_log $work/cache.log
access_log stdio:$work/access.log
cache_store_log none
coredump_dir $work
visible_hostname squid-reference
shutdown_lifetime 1 seconds
EOF

squid_pid=
stop_squid() {
    if [ -n "$squid_pid" ] && kill -0 "$squid_pid" 2>/dev/null; then
        kill -TERM "$squid_pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$squid_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$squid_pid" 2>/dev/null || true
        wait "$squid_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap stop_squid EXIT

"$squid_bin" -N -f "$work/squid.conf" >"$work/squid.out" 2>&1 &
squid_pid=$!
for _ in $(seq 1 200); do
    if ! port_free "$port"; then break; fi
    if ! kill -0 "$squid_pid" 2>/dev/null; then
        echo "squid exited at start:" >&2
        cat "$work/squid.out" "$work/cache.log" 2>/dev/null | tail -20 >&2
        exit 1
    fi
    sleep 0.1
done
port_free "$port" && { echo "squid did not listen on 127.0.0.1:$port within 20 s" >&2; tail -20 "$work/cache.log" >&2; exit 1; }
echo "$("$squid_bin" -v | head -1) on 127.0.0.1:$port"

HOSTILE_REFERENCE_PROXY=127.0.0.1:$port HOSTILE_REFERENCE_NAME=squid \
    cargo test --test framing -- --ignored squid_reference --nocapture --test-threads=1 2>&1 |
    grep -v -E '^(running|test result|     Running|    Finished|   Compiling)' || true
