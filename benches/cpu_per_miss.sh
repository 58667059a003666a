#!/usr/bin/env bash
# Instructions per cache miss, counted by callgrind, for one or more
# crawlcache binaries run alternately (A B A B ...).
#
#   bash benches/cpu_per_miss.sh BINARY [BINARY ...]
#
# Wall-clock CPU per request moves with the machine's load; instruction
# counts do not, so this tells whether a change costs work per request on
# a busy machine. Each binary runs `serve` on its defaults under
# `valgrind --tool=callgrind` with a fresh data directory; curl sends 50
# warm-up misses, then SMALL (200) or LARGE (1,200) misses of a 1 KiB body
# (unique query strings, one keep-alive connection) to a Python
# http.server origin on loopback. Instructions per miss =
# (Ir at LARGE - Ir at SMALL) / (LARGE - SMALL), so start-up and shutdown
# cancel out. ROUNDS (default 2) rounds. Loopback only; every process is
# stopped on exit. The spread of one binary (about 14k instructions per
# miss in benches/runs/cpu-2026-12-07.md) comes from the background
# threads' timers.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY ...]" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
ROUNDS=${ROUNDS:-2}
SMALL=${SMALL:-200}
LARGE=${LARGE:-1200}
WARM=50

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$work/www"
head -c 1024 /dev/urandom | base64 -w0 | head -c 1024 >"$work/www/body"
oport=$(free_port)
(cd "$work/www" && exec python3 -m http.server "$oport" --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$oport/body" && break; sleep 0.1; done

# Ir of one run of `$1` serving `$2` misses after the warm-up.
instructions() {
    local bin=$1 misses=$2 port data out urls
    port=$(free_port)
    data="$work/data-$RANDOM"
    out="$work/cg.out"
    rm -f "$out"
    valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" serve --listen "$port" --data-dir "$data" >"$work/serve.log" 2>&1 &
    local vg=$!
    pids+=("$vg")
    for _ in $(seq 300); do
        curl -s -o /dev/null -x "http://127.0.0.1:$port" "http://127.0.0.1:$oport/body?ready" && break
        sleep 0.2
    done
    urls="$work/urls"
    : >"$urls"
    for i in $(seq "$((WARM + misses))"); do
        echo "url = \"http://127.0.0.1:$oport/body?$RANDOM-$i\"" >>"$urls"
        echo "output = /dev/null" >>"$urls"
    done
    curl -s -x "http://127.0.0.1:$port" -K "$urls"
    kill -TERM "$vg"
    wait "$vg" 2>/dev/null || true
    rm -rf "$data"
    grep -m1 '^summary:' "$out" | awk '{print $2}'
}

printf '%-40s %6s %16s\n' binary round "instructions/miss"
for round in $(seq "$ROUNDS"); do
    for bin in "$@"; do
        small=$(instructions "$bin" "$SMALL")
        large=$(instructions "$bin" "$LARGE")
        printf '%-40s %6s %16s\n' "$bin" "$round" "$(((large - small) / (LARGE - SMALL)))"
    done
done
