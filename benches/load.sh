#!/usr/bin/env bash
# Load benchmark: crawlcache against nginx proxy_cache and Varnish (malloc
# storage) in one run, on loopback, same origin, same load generator, same
# conditions. A benchmark, not a test: CI never runs it.
#
#   bash benches/load.sh                 # full run (release build, ~8 min)
#   bash benches/load.sh --no-https      # skip the HTTPS measurements
#   PEERS="nginx crawlcache" MODES=hit SIZES=1k bash benches/load.sh
#
# Knobs (environment): DURATION (measured time per peer and cell, default
# 8s), ROUNDS (interleaved rounds DURATION is split into, default 4: wrk -d
# of DURATION/ROUNDS each; ROUNDS=1 is one wrk run per peer), WARM (wrk
# warm-up per peer and cell, 2s), CONNECTIONS (-c for hits and revalidations, 32),
# MISS_CONNECTIONS (-c for misses, 16), THREADS (-t, 2), OBJECTS (distinct
# objects per size, 64), SIZES (default "1k 16k 256k 4m"), MISS_SIZES
# (default "1k 16k"), MODES (default "hit reval miss"), PEERS (default
# "nginx varnish crawlcache"), KEEP=1 keeps the work folder (configs, logs,
# caches), CRAWLCACHE_BIN=path measures that binary instead of building one,
# HTTPS_LOAD_BIN=path uses that benches/https_load.rs binary,
# CRAWLCACHE_TOML="..." adds those lines to crawlcache's configuration
# (e.g. $'[server]\nsendfile = true'; not with --https sections twice).
# --nginx-only is PEERS="nginx" (no crawlcache build).
#
# What it starts, all on 127.0.0.1 and stopped on exit:
#   origin       nginx (2 workers) serving, per size, OBJECTS hard links of
#                one random file: /c/SIZE/I.bin with Cache-Control:
#                max-age=3600 (hits), /nc/SIZE/I.bin with Cache-Control:
#                no-cache and an ETag (every request through a cache is a
#                conditional GET answered 304: revalidations), and
#                /m/SIZE/ANYTHING, the same file under unique URLs with
#                max-age=86400 (misses: every request a new entry)
#   nginx        nginx proxy_cache (2 workers, disk cache, keep-alive to the
#                origin, proxy_cache_revalidate on), reverse proxy
#                (origin-form requests); it also serves the files over TLS
#                on a second port ("nginx-tls") for the HTTPS table
#   varnish      varnishd -s malloc,1G, reverse proxy; its VCL keeps
#                no-cache objects (ttl 1 ms, keep 1 h) so that Varnish
#                revalidates them with a conditional GET, as the team's peer
#                script does (the builtin VCL would refetch them in full)
#   crawlcache   `crawlcache serve` on its defaults (robots.mode annotate),
#                forward proxy (absolute-form requests); its config trusts
#                the work folder's CA for the HTTPS table
# For each mode and size: warm every peer (hits and revalidations: every
# object twice with curl, then wrk for WARM), then ROUNDS rounds in which
# each peer in turn gets `wrk -tTHREADS -cCONNECTIONS -d(DURATION/ROUNDS)`
# cycling over the OBJECTS objects (misses: a new URL per request). Peers
# take turns within each cell and round, each round starting with the next
# peer (A B C, B C A, C A B, A B C), so a burst of noise on this shared
# machine, or the disk writes one peer's turn leaves behind, fall on every
# peer of the cell alike rather than on the one measured at that moment
# (the team's peer script repeats its runs for the same reason). The table gives req/s of each peer (all
# its requests over all its measured time), crawlcache's ratio to the best peer of the cell, the 1-minute load
# average when the cell started, and the origin's 200/304 counts per peer
# for revalidations (proof that every request was a conditional GET). A
# second table gives each peer's server CPU per request: user + system time
# of its processes (main process and direct children, every thread) during
# its measured runs over its requests, in microseconds; the figure noise
# disturbs least on a shared machine.
# HTTPS hits: wrk cannot send CONNECT, so benches/https_load.rs (built with
# `cargo bench --no-run`) runs CONNECTIONS keep-alive connections for DURATION
# directly against nginx-tls (trusting the work folder's CA) and through
# crawlcache's CONNECT (trusting crawlcache's CA), for each size; a second
# table gives req/s of each and the ratio crawlcache/nginx-tls.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

DURATION=${DURATION:-8s}
ROUNDS=${ROUNDS:-4}
WARM=${WARM:-2s}
CONNECTIONS=${CONNECTIONS:-32}
MISS_CONNECTIONS=${MISS_CONNECTIONS:-16}
THREADS=${THREADS:-2}
OBJECTS=${OBJECTS:-64}
SIZES=${SIZES:-"1k 16k 256k 4m"}
MISS_SIZES=${MISS_SIZES:-"1k 16k"}
MODES=${MODES:-"hit reval miss"}
PEERS=${PEERS:-"nginx varnish crawlcache"}
HTTPS=1
for arg in "$@"; do
    case $arg in
        --nginx-only) PEERS="nginx" ;;
        --no-https) HTTPS=0 ;;
        -h | --help) sed -n '2,52p' "$0"; exit 0 ;;
        *) echo "benches/load.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }
CRAWLCACHE=0
has_peer crawlcache && CRAWLCACHE=1
has_peer nginx || { ((HTTPS)) && { echo "benches/load.sh: the HTTPS table needs the nginx peer (or use --no-https)" >&2; exit 2; }; }

say() { printf '[load] %s\n' "$*" >&2; }
die() { printf '[load] error: %s\n' "$*" >&2; exit 1; }

# wrk's duration syntax (plain seconds, or a number with s, m or h) in seconds.
duration_secs() {
    local n=${1%[smh]}
    [[ $n =~ ^[0-9]+$ ]] || die "DURATION=$1: use seconds, or a number with s, m or h"
    case $1 in
        *m) echo $((n * 60)) ;;
        *h) echo $((n * 3600)) ;;
        *) echo "$n" ;;
    esac
}
duration_secs "$DURATION" >/dev/null
duration_secs "$WARM" >/dev/null
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || die "ROUNDS=$ROUNDS: use a whole number >= 1"
ROUND_SECS=$(( $(duration_secs "$DURATION") / ROUNDS ))
((ROUND_SECS >= 1)) || die "DURATION=$DURATION split in ROUNDS=$ROUNDS rounds leaves less than 1 s per round"

# --- tools ---------------------------------------------------------------
missing=()
for tool in wrk nginx curl python3 openssl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
has_peer varnish && ! command -v varnishd >/dev/null 2>&1 && missing+=(varnish)
if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install -y ${missing[*]}) or run as root"
    say "installing ${missing[*]} ..."
    export DEBIAN_FRONTEND=noninteractive
    # Keep the packages from starting system services (they would take ports).
    made_policy=
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [[ -n $made_policy ]] && rm -f /usr/sbin/policy-rc.d
fi

# --- work folder and cleanup ---------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/crawlcache-load.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        # Bounded wait: 10 s, then SIGKILL.
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ ${KEEP:-0} == 1 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Polls `curl ARGS...` until it succeeds, at most $1 seconds.
wait_for() {
    local limit=$1; shift
    local deadline=$((SECONDS + limit))
    until curl -fsS -o /dev/null --max-time 2 "$@" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

bytes_of() {
    case $1 in
        *k) echo $((${1%k} * 1024)) ;;
        *m) echo $((${1%m} * 1024 * 1024)) ;;
        *) echo "$1" ;;
    esac
}

# --- crawlcache build ----------------------------------------------------
CC_BIN=${CRAWLCACHE_BIN:-}
if ((CRAWLCACHE)) && [[ -z $CC_BIN ]]; then
    say "cargo build --release ..."
    cargo build --release --quiet --bin crawlcache
    target_dir=$(cargo metadata --format-version 1 --no-deps |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
    CC_BIN="$target_dir/release/crawlcache"
    [[ -x $CC_BIN ]] || die "no binary at $CC_BIN after cargo build --release"
fi
# The HTTPS load client: one release build (the bench profile inherits
# release), its path taken from cargo's JSON messages.
HL_BIN=${HTTPS_LOAD_BIN:-}
if ((HTTPS && CRAWLCACHE)) && [[ -z $HL_BIN ]]; then
    say "cargo bench --bench https_load --no-run ..."
    HL_BIN=$(cargo bench --quiet --bench https_load --no-run --message-format json |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "https_load" and m.get("executable"):
        print(m["executable"])')
    [[ -n $HL_BIN && -x $HL_BIN ]] || die "no https_load binary after cargo bench --no-run"
fi

# --- origin --------------------------------------------------------------
mkdir -p "$WORK/www/c" "$WORK/www/nc" "$WORK/pcache" "$WORK/cc-data"
# Varnish's worker drops to its own user: it must reach its -n folder.
chmod 755 "$WORK"
ALL_SIZES=$(printf '%s\n' $SIZES $MISS_SIZES | awk '!seen[$0]++' | tr '\n' ' ')
for size in $ALL_SIZES; do
    mkdir -p "$WORK/www/c/$size" "$WORK/www/nc/$size"
    head -c "$(bytes_of "$size")" /dev/urandom >"$WORK/www/c/$size/0.bin"
    cp -p "$WORK/www/c/$size/0.bin" "$WORK/www/nc/$size/0.bin"
    for ((i = 1; i < OBJECTS; i++)); do
        ln "$WORK/www/c/$size/0.bin" "$WORK/www/c/$size/$i.bin"
        ln "$WORK/www/nc/$size/0.bin" "$WORK/www/nc/$size/$i.bin"
    done
done
chmod -R a+rX "$WORK/www"

# A CA and a server certificate for localhost (ECDSA P-256) for nginx-tls.
TLS_PORT=
if ((HTTPS)); then
    mkdir -p "$WORK/pki"
    (
        cd "$WORK/pki"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout ca.key -out ca.pem -days 2 -subj "/CN=crawlcache load bench CA" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout localhost.key -out localhost.csr -subj "/CN=localhost"
        printf '%s\n' "subjectAltName=DNS:localhost" "basicConstraints=critical,CA:FALSE" \
            "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >localhost.ext
        openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
            -extfile localhost.ext -out localhost.pem
    ) >"$WORK/pki/openssl.log" 2>&1 || die "openssl could not make the test CA: $(tail -n 5 "$WORK/pki/openssl.log")"
    TLS_PORT=$(free_port)
fi

# As root, nginx workers would drop to `nobody`, who cannot read $WORK.
USER_LINE=""
[[ $(id -u) -eq 0 ]] && USER_LINE="user root root;"

common_http() { # $1: name
    cat <<CONF
    default_type application/octet-stream;
    client_body_temp_path "$WORK/$1.tmp_body";
    proxy_temp_path "$WORK/$1.tmp_proxy";
    fastcgi_temp_path "$WORK/$1.tmp_fastcgi";
    uwsgi_temp_path "$WORK/$1.tmp_uwsgi";
    scgi_temp_path "$WORK/$1.tmp_scgi";
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
CONF
}

ORIGIN_PORT=$(free_port)
FIRST_SIZE=$(set -- $ALL_SIZES; echo "$1")
cat >"$WORK/origin.conf" <<CONF
daemon off;
master_process on;
$USER_LINE
worker_processes 2;
pid "$WORK/origin.pid";
error_log "$WORK/origin.error.log" warn;
events { worker_connections 4096; }
http {
$(common_http origin)
    # One line per request: the status and the path, for the origin counts.
    log_format st '\$status \$uri';
    access_log "$WORK/origin.access.log" st buffer=64k flush=250ms;
    etag on;
    gzip off;
    server {
        listen 127.0.0.1:$ORIGIN_PORT backlog=4096;
        root "$WORK/www";
        location /c/ { add_header Cache-Control "max-age=3600" always; }
        location /nc/ { add_header Cache-Control "no-cache" always; }
        location /m/ {
            add_header Cache-Control "max-age=86400" always;
            rewrite "^/m/([^/]+)/" /c/\$1/0.bin break;
        }
    }
}
CONF
nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin.error.log" &
PIDS+=($!)
wait_for 10 "http://127.0.0.1:$ORIGIN_PORT/c/$FIRST_SIZE/0.bin" ||
    die "origin nginx did not start: $(tail -n 5 "$WORK/origin.error.log")"
say "origin on 127.0.0.1:$ORIGIN_PORT"

# origin_counts FROM: "requests 200s 304s" logged since line FROM.
origin_lines() { wc -l <"$WORK/origin.access.log"; }
origin_counts() {
    sleep 0.4 # the access log is flushed every 250 ms
    tail -n +"$(($1 + 1))" "$WORK/origin.access.log" |
        awk '{ n++ } $1 == 200 { ok++ } $1 == 304 { nm++ } END { printf "%d %d %d\n", n, ok, nm }'
}

# --- nginx proxy_cache -----------------------------------------------------
PORT_nginx=
if has_peer nginx; then
    PORT_nginx=$(free_port)
    TLS_SERVER=""
    if ((HTTPS)); then
        TLS_SERVER=$(cat <<CONF
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        server_name localhost;
        ssl_certificate "$WORK/pki/localhost.pem";
        ssl_certificate_key "$WORK/pki/localhost.key";
        ssl_protocols TLSv1.2 TLSv1.3;
        access_log "$WORK/nginx-tls.access.log";
        root "$WORK/www";
        add_header Cache-Control "max-age=3600" always;
    }
CONF
)
    fi
    cat >"$WORK/nginx-cache.conf" <<CONF
daemon off;
master_process on;
$USER_LINE
worker_processes 2;
pid "$WORK/nginx-cache.pid";
error_log "$WORK/nginx-cache.error.log" warn;
events { worker_connections 4096; }
http {
$(common_http nginx-cache)
    access_log off;
    proxy_cache_path "$WORK/pcache" levels=1:2 keys_zone=bench:64m max_size=8g inactive=1d use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 64; }
    server {
        listen 127.0.0.1:$PORT_nginx backlog=4096;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host 127.0.0.1:$ORIGIN_PORT;
            proxy_cache bench;
            proxy_cache_key \$scheme\$proxy_host\$request_uri;
            proxy_cache_revalidate on;
            proxy_cache_use_stale updating;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
$TLS_SERVER
}
CONF
    nginx -p "$WORK" -c "$WORK/nginx-cache.conf" -e "$WORK/nginx-cache.error.log" &
    PIDS+=($!)
    wait_for 10 "http://127.0.0.1:$PORT_nginx/c/$FIRST_SIZE/0.bin" ||
        die "nginx proxy_cache did not start: $(tail -n 5 "$WORK/nginx-cache.error.log")"
    say "nginx proxy_cache on 127.0.0.1:$PORT_nginx"
    if ((HTTPS)); then
        wait_for 10 --cacert "$WORK/pki/ca.pem" "https://localhost:$TLS_PORT/c/$FIRST_SIZE/0.bin" ||
            die "nginx-tls did not answer on https://localhost:$TLS_PORT/: $(tail -n 5 "$WORK/nginx-cache.error.log")"
        say "nginx-tls on https://localhost:$TLS_PORT"
    fi
fi

# --- Varnish -----------------------------------------------------------------
PORT_varnish=
if has_peer varnish; then
    PORT_varnish=$(free_port)
    cat >"$WORK/varnish.vcl" <<CONF
vcl 4.1;
backend origin {
    .host = "127.0.0.1";
    .port = "$ORIGIN_PORT";
}
sub vcl_backend_response {
    # The builtin VCL makes "no-cache" objects hit-for-miss (a full refetch
    # every time). Keep them, stale after 1 ms, so that Varnish revalidates
    # them with a conditional GET the origin answers 304.
    if (beresp.http.Cache-Control ~ "(?i)no-cache") {
        set beresp.ttl = 0.001s;
        set beresp.grace = 0s;
        set beresp.keep = 1h;
        return (deliver);
    }
}
CONF
    varnishd -F -a "127.0.0.1:$PORT_varnish" -T 127.0.0.1:0 -f "$WORK/varnish.vcl" -s malloc,1G \
        -n "$WORK/varnish" -P "$WORK/varnish.pid" >"$WORK/varnish.log" 2>&1 &
    PIDS+=($!)
    wait_for 20 "http://127.0.0.1:$PORT_varnish/c/$FIRST_SIZE/0.bin" ||
        die "varnishd did not start: $(tail -n 5 "$WORK/varnish.log")"
    say "varnish (malloc) on 127.0.0.1:$PORT_varnish"
fi

# --- crawlcache ------------------------------------------------------------
PORT_crawlcache=
CC_PID=
CC_CA=
if ((CRAWLCACHE)); then
    PORT_crawlcache=$(free_port)
    : >"$WORK/crawlcache.toml"
    if ((HTTPS)); then
        printf '[upstream]\nextra_ca_file = "%s"\n' "$WORK/pki/ca.pem" >>"$WORK/crawlcache.toml"
    fi
    printf '%s\n' "${CRAWLCACHE_TOML:-}" >>"$WORK/crawlcache.toml"
    cc_config=(--config "$WORK/crawlcache.toml")
    "$CC_BIN" serve "${cc_config[@]}" --listen "127.0.0.1:$PORT_crawlcache" --data-dir "$WORK/cc-data" \
        >"$WORK/crawlcache.stdout.log" 2>"$WORK/crawlcache.stderr.log" </dev/null &
    CC_PID=$!
    PIDS+=("$CC_PID")
    wait_for 20 --noproxy '*' "http://127.0.0.1:$PORT_crawlcache/stats" ||
        die "crawlcache did not answer GET /stats within 20 s: $(tail -n 20 "$WORK/crawlcache.stderr.log")"
    say "crawlcache on 127.0.0.1:$PORT_crawlcache (pid $CC_PID)"
fi

# --- load ------------------------------------------------------------------
# The same Lua for every peer. Args: PREFIX N [HOST]. N > 0: requests cycle
# over PREFIX0.bin .. PREFIX(N-1).bin, each thread starting at a different
# offset; N = 0: every request is a new URL PREFIX<thread>/<counter>.
# PREFIX is origin-form for the reverse proxies, absolute-form for crawlcache.
cat >"$WORK/request.lua" <<'LUA'
local nthreads = 0
function setup(thread)
    thread:set("tid", nthreads)
    nthreads = nthreads + 1
end
local reqs, n, i, prefix, headers = {}, 0, 0, "/", {}
function init(args)
    prefix = args[1]
    n = tonumber(args[2])
    if args[3] then headers["Host"] = args[3] end
    headers["User-Agent"] = "crawlcache-load-bench"
    for k = 0, n - 1 do
        reqs[k + 1] = wrk.format("GET", prefix .. k .. ".bin", headers)
    end
    if n > 0 then i = ((tid or 0) * math.floor(n / 2)) % n end
end
function request()
    if n == 0 then
        i = i + 1
        return wrk.format("GET", prefix .. (tid or 0) .. "-" .. i, headers)
    end
    i = i % n + 1
    return reqs[i]
end
LUA

# peer_args PEER PATH: "URL PREFIX [HOST]" for wrk and the Lua.
peer_args() {
    local port_var="PORT_$1"
    local port=${!port_var}
    case $1 in
        crawlcache) echo "http://127.0.0.1:$port http://127.0.0.1:$ORIGIN_PORT$2 127.0.0.1:$ORIGIN_PORT" ;;
        *) echo "http://127.0.0.1:$port $2" ;;
    esac
}

# Prints "req/s errors" for one wrk run: $1 connections, $2 duration, then
# the peer_args words and the object count.
run_wrk() {
    local conns=$1 dur=$2 url=$3 prefix=$4 n=$5 host=${6:-} out secs
    secs=$(( $(duration_secs "$dur") + 60 ))
    out=$(timeout "$secs" wrk -t"$THREADS" -c"$conns" -d"$dur" --timeout 10s \
        -s "$WORK/request.lua" "$url" -- "$prefix" "$n" $host) || die "wrk against $url failed: $out"
    echo "$url $prefix: $out" >>"$WORK/wrk.log"
    local rps errors non2xx requests secs_run
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    # "  123456 requests in 8.00s, 170.09MB read": the exact count and time.
    read -r requests secs_run < <(awk '/ requests in / { sub(",", "", $4); t = $4 + 0; if ($4 ~ /m$/) t *= 60; print $1, t }' <<<"$out")
    errors=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")
    echo "${rps:-0} $((${errors:-0} + ${non2xx:-0})) ${requests:-0} ${secs_run:-0}"
}

# Warms PEER for PATH: every object twice, sequentially, one connection.
warm_objects() {
    local peer=$1 path=$2 url prefix host i args=()
    read -r url prefix host <<<"$(peer_args "$peer" "$path")"
    [[ -n $host ]] || prefix="$url$prefix"
    for ((i = 0; i < OBJECTS; i++)); do args+=(-o /dev/null "$prefix$i.bin" -o /dev/null "$prefix$i.bin"); done
    if [[ -n $host ]]; then
        curl -fsS --max-time 60 -x "$url" "${args[@]}" || die "$peer could not fetch $prefix*.bin"
    else
        curl -fsS --max-time 60 --noproxy '*' "${args[@]}" || die "$peer could not fetch $prefix*.bin"
    fi
}

vmhwm() {
    [[ -n $1 && -r /proc/$1/status ]] || { echo "-"; return; }
    awk '/^VmHWM:/ { printf "%.0fMiB", $2 / 1024 }' "/proc/$1/status"
}

# crawlcache's counters (GET /stats) as "requests hits misses revalidations".
cc_counters() {
    curl -fsS --noproxy '*' --max-time 5 "http://127.0.0.1:$PORT_crawlcache/stats" | python3 -c '
import json, sys
p = json.load(sys.stdin)["proxy"]
print(*(p.get(k, 0) for k in ("requests", "hits", "misses", "revalidated")))'
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# CPU ticks (user + system, 1/CLK_TCK s) used so far by a peer's server
# processes: its main process and their direct children (nginx workers,
# Varnish's child); every thread is counted in its process's line.
peer_root_pid() {
    case $1 in
        nginx) cat "$WORK/nginx-cache.pid" 2>/dev/null ;;
        varnish) cat "$WORK/varnish.pid" 2>/dev/null ;;
        crawlcache) echo "$CC_PID" ;;
    esac
}
peer_ticks() {
    local root pids p total=0
    root=$(peer_root_pid "$1")
    [[ -n $root ]] || { echo 0; return; }
    pids="$root $(pgrep -P "$root" | tr '\n' ' ')"
    for p in $pids; do
        [[ -r /proc/$p/stat ]] || continue
        # Fields after the ")" ending the command name: utime is the 12th, stime the 13th.
        total=$((total + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$total"
}
CLK_TCK=$(getconf CLK_TCK)

# One cell: MODE SIZE. Appends a table row to ROWS and origin counts to NOTES.
ROWS=()
CPU_ROWS=()
NOTES=()
measure_cell() {
    local mode=$1 size=$2 path n conns peer load
    case $mode in
        hit) path=/c/$size/ n=$OBJECTS conns=$CONNECTIONS ;;
        reval) path=/nc/$size/ n=$OBJECTS conns=$CONNECTIONS ;;
        miss) path=/m/$size/ n=0 conns=$MISS_CONNECTIONS ;;
    esac
    load=$(loadavg)
    local -A rps=() err=() cpu=() conditional=() reqs=() secs=() ticks=() oreq=() ook=() onm=()
    local counts="" url prefix host round
    # Warm every peer first (hits and revalidations), then measure in
    # interleaved rounds: peer A, B, C, A, B, C, ... so a burst of load
    # from elsewhere on this shared machine falls on every peer alike.
    for peer in $PEERS; do
        reqs[$peer]=0 secs[$peer]=0 ticks[$peer]=0 err[$peer]=0 oreq[$peer]=0 ook[$peer]=0 onm[$peer]=0
        [[ $mode == miss ]] && continue
        read -r url prefix host <<<"$(peer_args "$peer" "$path")"
        warm_objects "$peer" "$path"
        run_wrk "$conns" "$WARM" "$url" "$prefix" "$n" $host >/dev/null
    done
    # The warm-ups' last origin log lines are flushed before counting starts.
    [[ $mode == miss ]] || sleep 0.4
    say "$mode $size: wrk -t$THREADS -c$conns, $ROUNDS round(s) of ${ROUND_SECS}s per peer: $PEERS ..."
    local order=($PEERS)
    for ((round = 1; round <= ROUNDS; round++)); do
        # Each round starts with the next peer (A B C, B C A, C A B, ...), so
        # each peer follows every other one alike: what one peer's turn
        # leaves behind (its writes being flushed to disk) falls on all.
        for peer in "${order[@]:(round - 1) % ${#order[@]}}" "${order[@]:0:(round - 1) % ${#order[@]}}"; do
            read -r url prefix host <<<"$(peer_args "$peer" "$path")"
            # Misses: a new tag per peer and round, so no URL is ever asked twice.
            [[ $mode == miss ]] && prefix="$prefix$peer-$round-"
            local before ticks0 ticks1 r e q t req ok nm
            before=$(origin_lines)
            ticks0=$(peer_ticks "$peer")
            read -r r e q t < <(run_wrk "$conns" "${ROUND_SECS}s" "$url" "$prefix" "$n" $host)
            ticks1=$(peer_ticks "$peer")
            reqs[$peer]=$((reqs[$peer] + q))
            secs[$peer]=$(awk -v a="${secs[$peer]}" -v b="$t" 'BEGIN { print a + b }')
            ticks[$peer]=$((ticks[$peer] + ticks1 - ticks0))
            err[$peer]=$((err[$peer] + e))
            read -r req ok nm < <(origin_counts "$before")
            oreq[$peer]=$((oreq[$peer] + req)) ook[$peer]=$((ook[$peer] + ok)) onm[$peer]=$((onm[$peer] + nm))
        done
    done
    for peer in $PEERS; do
        # req/s over all rounds: every request over the measured time.
        rps[$peer]=$(awk -v q="${reqs[$peer]}" -v t="${secs[$peer]}" 'BEGIN { if (t > 0) printf "%.2f", q / t; else print 0 }')
        # Server CPU per request in microseconds: ticks over requests served.
        cpu[$peer]=$(awk -v t="${ticks[$peer]}" -v hz="$CLK_TCK" -v q="${reqs[$peer]}" \
            'BEGIN { if (q > 0) printf "%.1f", t / hz * 1e6 / q; else print "-" }')
        counts+=" $peer: ${oreq[$peer]} origin requests (${ook[$peer]} x 200, ${onm[$peer]} x 304);"
        # A peer revalidated when at least 90 % of its origin requests were answered 304.
        conditional[$peer]=$(( oreq[$peer] > 0 && onm[$peer] * 10 >= oreq[$peer] * 9 ))
    done
    local best_peer="" best=0 cells="" p
    for peer in $PEERS; do
        cells+=$(printf ' %12s' "${rps[$peer]}")
        [[ ${err[$peer]} == 0 ]] || cells+="(!${err[$peer]})"
        [[ $peer == crawlcache ]] && continue
        # Revalidations are compared with peers that revalidated: nginx does
        # not store no-cache responses and fetches them in full instead.
        [[ $mode == reval && ${conditional[$peer]} == 0 ]] && continue
        if awk -v a="${rps[$peer]}" -v b="$best" 'BEGIN { exit !(a > b) }'; then best=${rps[$peer]} best_peer=$peer; fi
    done
    local ratio="-"
    if ((CRAWLCACHE)) && [[ -n $best_peer ]]; then
        ratio=$(awk -v c="${rps[crawlcache]}" -v b="$best" 'BEGIN { printf "%.2f", c / b }')
    fi
    ROWS+=("$(printf '%-6s %-5s%s %10s %6s %6s %8s' "$mode" "$size" "$cells" "${best_peer:--}" "$ratio" "$load" "$(vmhwm "$CC_PID")")")
    local cpu_cells=""
    for peer in $PEERS; do cpu_cells+=$(printf ' %12s' "${cpu[$peer]}"); done
    CPU_ROWS+=("$(printf '%-6s %-5s%s' "$mode" "$size" "$cpu_cells")")
    NOTES+=("$mode $size:$counts")
}

START_LOAD=$(cat /proc/loadavg)
((CRAWLCACHE)) && read -r cc_req0 cc_hit0 cc_miss0 cc_reval0 < <(cc_counters)
for mode in $MODES; do
    case $mode in
        hit | reval) sizes=$SIZES ;;
        miss) sizes=$MISS_SIZES ;;
        *) die "MODES: unknown mode $mode (hit, reval, miss)" ;;
    esac
    for size in $sizes; do
        measure_cell "$mode" "$size"
    done
done
cc_line=""
if ((CRAWLCACHE)); then
    read -r cc_req1 cc_hit1 cc_miss1 cc_reval1 < <(cc_counters)
    cc_line="crawlcache during the measurements (warm-ups included): $((cc_req1 - cc_req0)) requests, $((cc_hit1 - cc_hit0)) hits, $((cc_miss1 - cc_miss0)) misses, $((cc_reval1 - cc_reval0)) revalidated (GET /stats)"
fi
END_LOAD=$(cat /proc/loadavg)

# --- HTTPS hits ------------------------------------------------------------
# Prints "req/s errors" for one https_load run: $1 URL, $2 CA file, $3 proxy
# (host:port, or empty for a direct connection).
run_https() {
    local out secs
    secs=$(( $(duration_secs "$DURATION") + 60 ))
    out=$(timeout "$secs" "$HL_BIN" --url "$1" --ca "$2" ${3:+--proxy "$3"} \
        --connections "$CONNECTIONS" --duration "$(duration_secs "$DURATION")s" 2>>"$WORK/https_load.stderr.log") ||
        die "https_load against $1 ${3:+via $3 }failed: $out $(tail -n 5 "$WORK/https_load.stderr.log")"
    echo "$1 ${3:+via $3}: $out" >>"$WORK/https_load.log"
    local rps errors
    rps=$(tr ' ' '\n' <<<"$out" | awk -F= '$1 == "req_per_s" { print $2 }')
    errors=$(tr ' ' '\n' <<<"$out" | awk -F= '$1 == "errors" { print $2 }')
    echo "${rps:-0} ${errors:-0}"
}

https_rows=()
if ((HTTPS && CRAWLCACHE)); then
    CC_CA=$("$CC_BIN" ca "${cc_config[@]}" --data-dir "$WORK/cc-data") || die "crawlcache ca failed"
    [[ -r $CC_CA ]] || die "crawlcache ca printed $CC_CA, which is not readable"
    for size in $SIZES; do
        url="https://localhost:$TLS_PORT/c/$size/0.bin"
        for _ in 1 2; do
            curl -fsS -o /dev/null --max-time 30 --proxy "http://127.0.0.1:$PORT_crawlcache" --cacert "$CC_CA" "$url" ||
                die "crawlcache could not fetch $url through CONNECT: $(tail -n 5 "$WORK/crawlcache.stderr.log")"
        done
        say "https_load -c$CONNECTIONS -d$DURATION: $size direct to nginx-tls ..."
        read -r n_rps n_err < <(run_https "$url" "$WORK/pki/ca.pem" "")
        say "https_load -c$CONNECTIONS -d$DURATION: $size via crawlcache CONNECT ..."
        read -r c_rps c_err < <(run_https "$url" "$CC_CA" "127.0.0.1:$PORT_crawlcache")
        ratio=$(awk -v c="$c_rps" -v n="$n_rps" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print "-" }')
        https_rows+=("$(printf '%-6s %16s %8s %17s %8s %7s %8s' \
            "$size" "$n_rps" "$n_err" "$c_rps" "$c_err" "$ratio" "$(loadavg)")")
    done
fi

echo
echo "wrk -t$THREADS, -c$CONNECTIONS (hits, revalidations) / -c$MISS_CONNECTIONS (misses), $((ROUNDS * ROUND_SECS))s per peer and cell in $ROUNDS interleaved round(s) of ${ROUND_SECS}s, $OBJECTS objects per size; $(nproc) cores shared by wrk, the origin and the server"
echo "load average at start: $START_LOAD; at end of the HTTP table: $END_LOAD"
header=$(printf '%-6s %-5s' mode size)
for peer in $PEERS; do header+=$(printf ' %12s' "$peer"); done
header+=$(printf ' %10s %6s %6s %8s' best ratio load "cc RSS")
echo "$header"
printf '%s\n' "${ROWS[@]}"
echo "(req/s; (!N): N socket errors or non-2xx/3xx answers; best: the fastest peer other than crawlcache"
echo " (for reval: among peers whose origin requests were >= 90 % answered 304; nginx proxy_cache does not store no-cache responses);"
echo " ratio: crawlcache / best; load: 1-minute load average when the cell started; cc RSS: crawlcache's VmHWM so far)"
echo
echo "server CPU per request (microseconds of user + system time of the peer's processes during its measured run, over its requests):"
printf '%s\n' "$(printf '%-6s %-5s' mode size)$(for peer in $PEERS; do printf ' %12s' "$peer"; done)"
printf '%s\n' "${CPU_ROWS[@]}"
echo "(the origin's work and wrk's are not included; on loopback the kernel's delivery of a response to wrk is charged to the sender)"
echo "origin requests during each measured run:"
printf '  %s\n' "${NOTES[@]}"
[[ -z $cc_line ]] || echo "$cc_line"
if ((${#https_rows[@]})); then
    echo
    echo "HTTPS hit: https_load -c$CONNECTIONS -d$DURATION (keep-alive HTTP/1.1 over TLS), $(nproc) cores shared with the client"
    printf '%-6s %16s %8s %17s %8s %7s %8s\n' size "nginx-tls req/s" errors "crawlcache req/s" errors ratio load
    printf '%s\n' "${https_rows[@]}"
    echo "(nginx-tls: nginx serving the files over TLS itself; crawlcache: CONNECT, intercepted TLS, cache hit)"
fi
