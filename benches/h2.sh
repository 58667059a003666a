#!/usr/bin/env bash
# HTTP/2 speed, against peers (issue 43, item 4): `bash benches/h2.sh`.
# A benchmark, not a test: CI never runs it.
#
# One run builds crawlcache (release) and the load client
# (benches/https_load.rs), starts on loopback an nginx origin (static
# 1 KiB / 16 KiB / 256 KiB files, Cache-Control: max-age=3600) with three
# listeners: TLS with HTTP/2 (ALPN h2, http/1.1), TLS with HTTP/1.1 only
# (ALPN http/1.1) and plain HTTP; then, one peer at a time, measures:
#   crawlcache (defaults plus upstream.extra_ca_file; tls.http2 and
#   upstream.http2 on, upstream.max_in_flight_per_origin 64):
#     - HTTPS hits over HTTP/2 in intercepted CONNECT tunnels:
#       H2_CONNECTIONS connections x STREAMS concurrent streams each;
#     - the same objects as plain-HTTP/1.1 hits (absolute-form, CONNECTIONS
#       kept-alive connections): the reference, the goal of issue 43 being
#       h2-in-tunnel hits >= 1.0x these at 1 KiB and 16 KiB;
#     - HTTPS hits over HTTP/1.1 in CONNECTIONS kept-alive tunnels;
#     - misses (a new query each request, so every request goes to the
#       origin) over h2 in tunnels, to the HTTP/2 origin and to the
#       HTTP/1.1-only origin: req/s, and origin connections (distinct
#       $connection in the origin's access log for the cell's requests;
#       crawlcache_origin_h2_connections_total from the proxy's /metrics);
#   mitmproxy (mitmdump from PyPI in a venv under target/; h2 on both sides;
#     it does not cache, so its "hits" are forwarded to the origin):
#     HTTPS over h2 in tunnels, H2_CONNECTIONS x STREAMS;
#   nginx (a second nginx, 2 workers, reverse proxy with proxy_cache to the
#     origin's plain-HTTP listener, TLS + HTTP/2 on its own listener, cache
#     warmed and checked for HIT before measuring): the same client's h2
#     mode straight to it (no CONNECT), H2_CONNECTIONS x STREAMS.
# Each proxy's own CPU per request (user + system from /proc over the cell)
# is given too, and the load client's (from `times`): the client shares the
# two cores, so req/s counts the client's TLS and HTTP/2 work as well.
# It prints one table with req/s per cell and peer, crawlcache's ratios
# (h2 tunnel / plain h1, h2 tunnel / HTTPS h1, / mitmproxy, / nginx h2), the
# miss table and the load average before and after. Everything listens on
# 127.0.0.1, every load client run is bounded (timeout), and everything the
# script starts is stopped on exit.
#
# Knobs (environment): DURATION (per cell, default 8s), H2_CONNECTIONS
# (default 8), STREAMS (default 32), CONNECTIONS (HTTP/1.1 cells, default
# 32), SIZES (default "1k 16k 256k"), MISS_SIZES (default "1k 16k"),
# PEERS (default "crawlcache mitmproxy nginx"), KEEP=1 keeps the work
# folder, CRAWLCACHE_BIN / HTTPS_LOAD_BIN use those binaries instead of
# building, PROFILE=1 adds, after the table, a CPU profile of crawlcache
# (perf record, PROFILE_SECONDS, default 10, on the proxy) during the hit
# cells PROFILE_CELLS (default "h2 plain": h2 in tunnels and plain
# HTTP/1.1; "h1" is HTTPS over HTTP/1.1 tunnels) of each of PROFILE_SIZES
# (default "1k 16k"), written to PROFILE_OUT (default target/h2-profile/):
# self time by object and symbol, and with PROFILE_CALL_GRAPH=dwarf
# (default fp: the release profile has no frame pointers, so fp call
# chains are short) the callers too; symbols need an unstripped binary:
# CRAWLCACHE_BIN=target/profiling/crawlcache after `cargo build --profile
# profiling`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

DURATION=${DURATION:-8s}
H2_CONNECTIONS=${H2_CONNECTIONS:-8}
STREAMS=${STREAMS:-32}
CONNECTIONS=${CONNECTIONS:-32}
SIZES=${SIZES:-"1k 16k 256k"}
MISS_SIZES=${MISS_SIZES-"1k 16k"}
PEERS=${PEERS:-"crawlcache mitmproxy nginx"}
PROFILE=${PROFILE:-0}
PROFILE_SECONDS=${PROFILE_SECONDS:-10}
PROFILE_OUT=${PROFILE_OUT:-target/h2-profile}
PROFILE_SIZES=${PROFILE_SIZES:-"1k 16k"}
PROFILE_CALL_GRAPH=${PROFILE_CALL_GRAPH:-fp}
PROFILE_CELLS=${PROFILE_CELLS:-"h2 plain"}

say() { echo "benches/h2.sh: $*" >&2; }
die() { say "$*"; exit 1; }
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
size_label() { case $1 in 1k) echo "1 KiB" ;; 16k) echo "16 KiB" ;; 256k) echo "256 KiB" ;; *) echo "$1" ;; esac; }

for tool in nginx curl openssl python3 timeout; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install $tool)"
done
if [[ $PROFILE = 1 ]]; then
    command -v perf >/dev/null || die "PROFILE=1 needs perf (apt-get install linux-perf)"
fi
if has_peer mitmproxy; then
    VENV=target/bench-venv
    if [[ ! -x $VENV/bin/mitmdump ]]; then
        say "installing mitmproxy into $VENV (pip) ..."
        python3 -m venv "$VENV" && "$VENV/bin/pip" install --quiet mitmproxy || die "pip install mitmproxy failed"
    fi
fi

# --- binaries ----------------------------------------------------------------
if [[ -n ${CRAWLCACHE_BIN:-} ]]; then
    CC_BIN=$CRAWLCACHE_BIN
elif has_peer crawlcache; then
    say "cargo build --release ..."
    cargo build --release --quiet
    CC_BIN=target/release/crawlcache
fi
if [[ -n ${HTTPS_LOAD_BIN:-} ]]; then
    HL_BIN=$HTTPS_LOAD_BIN
else
    HL_BIN=$(cargo bench --quiet --bench https_load --no-run --message-format json |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "https_load" and m.get("executable"):
        print(m["executable"])')
fi
[[ -x $HL_BIN ]] || die "no https_load binary"
if has_peer crawlcache; then [[ -x $CC_BIN ]] || die "no crawlcache binary at $CC_BIN"; fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crawlcache-h2-bench.XXXXXX")
chmod 755 "$WORK"
PIDS=()
PEER_PID=
cleanup() {
    # The peer under test too: `wait` below would otherwise wait for it.
    for p in "${PIDS[@]}" $PEER_PID; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- PKI and origin ----------------------------------------------------------
mkdir -p "$WORK/pki" "$WORK/www" "$WORK/nginx-tmp"
(
    cd "$WORK/pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=crawlcache h2 bench origin CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout localhost.key -out localhost.csr -subj "/CN=localhost"
    printf '%s\n' "subjectAltName=DNS:localhost" "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >localhost.ext
    openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile localhost.ext -out localhost.pem
) >"$WORK/pki.log" 2>&1 || die "openssl: $(tail -n 5 "$WORK/pki.log")"
chmod -R a+rX "$WORK/pki"
for size in $SIZES $MISS_SIZES; do
    [[ -f $WORK/www/$size.bin ]] && continue
    case $size in 1k) n=1024 ;; 16k) n=16384 ;; 256k) n=262144 ;; *) die "size $size: 1k, 16k or 256k" ;; esac
    head -c "$n" /dev/urandom >"$WORK/www/$size.bin"
done
chmod -R a+rX "$WORK/www"

# nginx spells HTTP/2 on a TLS listener `listen ... ssl http2;` before
# 1.25.1 and `listen ... ssl; http2 on;` from it.
NGINX_VERSION=$(nginx -v 2>&1 | sed -E 's|.*nginx/([0-9.]+).*|\1|')
if python3 -c "import sys; v = tuple(map(int, '$NGINX_VERSION'.split('.'))); sys.exit(0 if v >= (1, 25, 1) else 1)"; then
    h2_listen() { echo "listen 127.0.0.1:$1 ssl; http2 on;"; }
else
    h2_listen() { echo "listen 127.0.0.1:$1 ssl http2;"; }
fi
H2_PORT=$(free_port)  # origin: TLS, ALPN h2 and http/1.1
H1_PORT=$(free_port)  # origin: TLS, ALPN http/1.1 only
HTTP_PORT=$(free_port) # origin: plain HTTP
USER_LINE=""
[[ $(id -u) -eq 0 ]] && USER_LINE="user root root;"
TLS_COMMON="ssl_certificate $WORK/pki/localhost.pem; ssl_certificate_key $WORK/pki/localhost.key; server_name localhost; root $WORK/www; add_header Cache-Control \"max-age=3600\";"
cat >"$WORK/nginx.conf" <<CONF
$USER_LINE
worker_processes 1;
daemon off;
error_log $WORK/nginx.error.log warn;
pid $WORK/nginx.pid;
events { worker_connections 4096; }
http {
    client_body_temp_path $WORK/nginx-tmp;
    proxy_temp_path $WORK/nginx-tmp;
    fastcgi_temp_path $WORK/nginx-tmp;
    uwsgi_temp_path $WORK/nginx-tmp;
    scgi_temp_path $WORK/nginx-tmp;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    log_format conn '\$connection \$server_protocol \$request_uri';
    access_log off;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        server_name localhost;
        root $WORK/www;
        add_header Cache-Control "max-age=3600";
    }
    server {
        $(h2_listen "$H2_PORT")
        $TLS_COMMON
        access_log $WORK/origin-h2.access.log conn buffer=64k flush=1s;
    }
    server {
        listen 127.0.0.1:$H1_PORT ssl;
        $TLS_COMMON
        access_log $WORK/origin-h1.access.log conn buffer=64k flush=1s;
    }
}
CONF
nginx -c "$WORK/nginx.conf" -p "$WORK" >"$WORK/nginx.out" 2>&1 &
PIDS+=($!)
wait_http() { # URL, curl args...
    local url=$1; shift
    for _ in $(seq 100); do curl -fsS -o /dev/null "$@" "$url" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
wait_http "https://localhost:$H2_PORT/1k.bin" --cacert "$WORK/pki/ca.pem" || die "nginx did not start: $(tail -n 5 "$WORK/nginx.error.log")"
# The two TLS origins must differ in what they choose by ALPN.
alpn_of() { curl -sS -o /dev/null -w '%{http_version}' --http2 --cacert "$WORK/pki/ca.pem" "https://localhost:$1/1k.bin"; }
[[ $(alpn_of "$H2_PORT") == 2 ]] || die "the h2 origin did not answer over HTTP/2 (curl without HTTP/2?)"
[[ $(alpn_of "$H1_PORT") == 1.1 ]] || die "the HTTP/1.1 origin answered over HTTP/2"

# --- peers -------------------------------------------------------------------
PEER_ARGS=() # how the load client reaches the peer
start_peer() { # name -> PEER_PORT, PEER_CA, PEER_PID, PEER_ARGS
    local name=$1
    PEER_PORT=$(free_port)
    case $name in
    crawlcache)
        cat >"$WORK/crawlcache.toml" <<CONF
[upstream]
extra_ca_file = "$WORK/pki/ca.pem"
http2 = true
max_in_flight_per_origin = 64

[tls]
http2 = true
CONF
        rm -rf "$WORK/cc-data"
        "$CC_BIN" serve --listen "127.0.0.1:$PEER_PORT" --data-dir "$WORK/cc-data" --config "$WORK/crawlcache.toml" >"$WORK/crawlcache.log" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/cc-data/ca/ca.pem"
        PEER_ARGS=(--proxy "127.0.0.1:$PEER_PORT" --ca "$PEER_CA")
        ;;
    mitmproxy)
        rm -rf "$WORK/mitm" && mkdir -p "$WORK/mitm"
        "$VENV/bin/mitmdump" -q --listen-host 127.0.0.1 --listen-port "$PEER_PORT" --set confdir="$WORK/mitm" \
            --set ssl_verify_upstream_trusted_ca="$WORK/pki/ca.pem" --set http2=true --set flow_detail=0 >"$WORK/mitm.log" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/mitm/mitmproxy-ca-cert.pem"
        PEER_ARGS=(--proxy "127.0.0.1:$PEER_PORT" --ca "$PEER_CA")
        ;;
    nginx)
        rm -rf "$WORK/pcache" && mkdir -p "$WORK/pcache"
        cat >"$WORK/nginx-cache.conf" <<CONF
$USER_LINE
worker_processes 2;
daemon off;
error_log $WORK/nginx-cache.error.log warn;
pid $WORK/nginx-cache.pid;
events { worker_connections 4096; }
http {
    client_body_temp_path $WORK/nginx-tmp;
    proxy_temp_path $WORK/nginx-tmp;
    fastcgi_temp_path $WORK/nginx-tmp;
    uwsgi_temp_path $WORK/nginx-tmp;
    scgi_temp_path $WORK/nginx-tmp;
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
    proxy_cache_path $WORK/pcache levels=1:2 keys_zone=bench:16m max_size=1g inactive=1d use_temp_path=off;
    upstream origin { server 127.0.0.1:$HTTP_PORT; keepalive 16; }
    server {
        $(h2_listen "$PEER_PORT")
        server_name localhost;
        ssl_certificate $WORK/pki/localhost.pem;
        ssl_certificate_key $WORK/pki/localhost.key;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host localhost;
            proxy_cache bench;
            proxy_cache_key \$request_uri;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
}
CONF
        nginx -c "$WORK/nginx-cache.conf" -p "$WORK" >"$WORK/nginx-cache.out" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/pki/ca.pem"
        PEER_ARGS=(--ca "$PEER_CA")
        ;;
    esac
    local probe=(--cacert "$PEER_CA" "https://localhost:$H2_PORT/1k.bin")
    [[ $name == nginx ]] && probe=(--cacert "$PEER_CA" "https://localhost:$PEER_PORT/1k.bin")
    [[ $name != nginx ]] && probe=(--proxy "http://127.0.0.1:$PEER_PORT" "${probe[@]}")
    for _ in $(seq 200); do [[ -f $PEER_CA ]] && curl -fsS -o /dev/null "${probe[@]}" 2>/dev/null && return 0; sleep 0.1; done
    die "$name did not start on 127.0.0.1:$PEER_PORT (see $WORK; KEEP=1 keeps it)"
}
stop_peer() { kill "$PEER_PID" 2>/dev/null || true; wait "$PEER_PID" 2>/dev/null || true; PEER_PID=; }

# The URL the load client asks for through the peer, for object SIZE.
peer_url() { # peer size
    if [[ $1 == nginx ]]; then echo "https://localhost:$PEER_PORT/$2.bin"; else echo "https://localhost:$H2_PORT/$2.bin"; fi
}
# Warms object SIZE in the peer's cache: twice, so a caching peer stores then hits.
warm() { # peer size
    local url
    url=$(peer_url "$1" "$2")
    local args=(--http2 --cacert "$PEER_CA")
    [[ $1 != nginx ]] && args+=(--proxy "http://127.0.0.1:$PEER_PORT")
    for _ in 1 2; do curl -fsS -o /dev/null "${args[@]}" "$url" || die "warming $url through $1 failed"; done
    if [[ $1 == nginx ]]; then
        local st
        st=$(curl -fsS -o /dev/null -D - "${args[@]}" "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-cache-status" {print $2}')
        [[ $st == HIT ]] || die "nginx proxy_cache answers $url with X-Cache-Status: $st, not HIT"
    fi
}

# The CPU ticks (user + system, 1/CLK_TCK s) of a peer: its process and its
# direct children (nginx workers); every thread counts in its process's line.
CLK_TCK=$(getconf CLK_TCK)
case $DURATION in *m) SECONDS_PER_CELL=$((${DURATION%m} * 60)) ;; *) SECONDS_PER_CELL=${DURATION%s} ;; esac
cpu_ticks() {
    local total=0 p
    for p in "$1" $(pgrep -P "$1" || true); do
        [[ -r /proc/$p/stat ]] && total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$total"
}
per_request() { # ticks_before ticks_after requests -> microseconds
    python3 -c "b, a, n = $1, $2, int('$3' or 0); print(f'{(a - b) / $CLK_TCK * 1e6 / n:.1f}' if n else '-')"
}

# hl CELL_KEY ARGS...: one bounded https_load run against the current peer;
# sets R[key] (req/s), N[key] (requests), E[key] (errors), C[key] (the
# peer's CPU per request, us).
declare -A R N E C L MC MH2C MH2R
# The CPU seconds (user + system) of this shell's finished children, from
# `times` (written to a file: in a command substitution it would be a
# subshell's): the load client's share of the two cores, per cell.
children_cpu() { # call it as `times >"$WORK/times"; x=$(children_cpu)`
    tail -n 1 "$WORK/times" | python3 -c '
import re, sys
print(sum(int(m) * 60 + float(s) for m, s in re.findall(r"([0-9]+)m([0-9.]+)s", sys.stdin.read())))'
}
hl() {
    local key=$1; shift
    local out t0 t1 c0 c1
    times >"$WORK/times"
    c0=$(children_cpu)
    t0=$(cpu_ticks "$PEER_PID")
    out=$(timeout $((SECONDS_PER_CELL + 90)) "$HL_BIN" --duration "$DURATION" "$@" 2>>"$WORK/https_load.err") ||
        die "https_load for $key failed ($*): $out; $(tail -n 3 "$WORK/https_load.err")"
    t1=$(cpu_ticks "$PEER_PID")
    times >"$WORK/times"
    c1=$(children_cpu)
    echo "$key $*: $out" >>"$WORK/https_load.log"
    R[$key]=$(sed -E 's/.*req_per_s=([0-9.]+).*/\1/' <<<"$out")
    N[$key]=$(sed -E 's/^requests=([0-9]+).*/\1/' <<<"$out")
    E[$key]=$(sed -E 's/.* errors=([0-9]+).*/\1/' <<<"$out")
    C[$key]=$(per_request "$t0" "$t1" "${N[$key]}")
    L[$key]=$(python3 -c "n = int('${N[$key]}' or 0); print(f'{($c1 - $c0) * 1e6 / n:.1f}' if n else '-')")
    say "  $key: $out (peer CPU ${C[$key]} us/request, load client ${L[$key]})"
}
H2_ARGS=(--h2 --connections "$H2_CONNECTIONS" --streams "$STREAMS")
H1_ARGS=(--connections "$CONNECTIONS")

metric() { curl -fsS --noproxy '*' --max-time 5 "http://127.0.0.1:$PEER_PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
cc_counters() {
    curl -fsS --noproxy '*' --max-time 5 "http://127.0.0.1:$PEER_PORT/stats" | python3 -c '
import json, sys
p = json.load(sys.stdin)["proxy"]
print(*(p.get(k, 0) for k in ("requests", "hits", "misses")))'
}
# Distinct origin connections ($connection) that served the requests whose
# URL carries `tag` (the access logs are flushed every second).
origin_conns() { # log tag
    sleep 1.5
    awk -v t="$2" 'index($3, t) {c[$1] = 1} END {print length(c)}' "$1"
}

RUN_TAG=$(date +%s)
LOAD_BEFORE=$(load)
CC_LINE=""
for PEER_NAME in $PEERS; do
    say "$PEER_NAME ..."
    start_peer "$PEER_NAME"
    for size in $SIZES; do warm "$PEER_NAME" "$size"; done
    if [[ $PEER_NAME == crawlcache ]]; then
        read -r q0 h0 m0 < <(cc_counters)
        for size in $SIZES; do
            hl "crawlcache,h2,$size" --url "$(peer_url crawlcache "$size")" "${PEER_ARGS[@]}" "${H2_ARGS[@]}"
        done
        for size in $SIZES; do
            for _ in 1 2; do curl -fsS -o /dev/null --proxy "http://127.0.0.1:$PEER_PORT" "http://localhost:$HTTP_PORT/$size.bin"; done
            hl "crawlcache,plain,$size" --url "http://localhost:$HTTP_PORT/$size.bin" --proxy "127.0.0.1:$PEER_PORT" "${H1_ARGS[@]}"
        done
        for size in $SIZES; do
            hl "crawlcache,h1,$size" --url "$(peer_url crawlcache "$size")" "${PEER_ARGS[@]}" "${H1_ARGS[@]}"
        done
        read -r q1 h1 m1 < <(cc_counters)
        CC_LINE="crawlcache over the hit cells (with the warm-ups of the plain-HTTP objects): $((q1 - q0)) requests, $((h1 - h0)) hits, $((m1 - m0)) misses (GET /stats)"
        # Misses: a new query each request, over h2 in tunnels.
        for size in $MISS_SIZES; do
            for origin in h2 h1; do
                port=$H2_PORT
                [[ $origin == h1 ]] && port=$H1_PORT
                tag="cell=$RUN_TAG-miss-$origin-$size"
                c0=$(metric crawlcache_origin_h2_connections_total)
                r0=$(metric crawlcache_origin_h2_requests_total)
                hl "crawlcache,miss$origin,$size" --url "https://localhost:$port/$size.bin?$tag" --unique "${PEER_ARGS[@]}" "${H2_ARGS[@]}"
                c1=$(metric crawlcache_origin_h2_connections_total)
                r1=$(metric crawlcache_origin_h2_requests_total)
                MC[$origin,$size]=$(origin_conns "$WORK/origin-$origin.access.log" "$tag")
                MH2C[$origin,$size]=$((c1 - c0))
                MH2R[$origin,$size]=$((r1 - r0))
            done
        done
    else
        for size in $SIZES; do
            hl "$PEER_NAME,h2,$size" --url "$(peer_url "$PEER_NAME" "$size")" "${PEER_ARGS[@]}" "${H2_ARGS[@]}"
        done
    fi
    stop_peer
done
LOAD_AFTER=$(load)

# --- tables ------------------------------------------------------------------
f0() { [[ -n ${1:-} ]] && printf '%.0f' "$1" || echo "-"; }
ratio() { python3 -c "a, b = float('${1:-0}' or 0), float('${2:-0}' or 0); print(f'{a / b:.2f}' if a and b else '-')"; }
echo
echo "HTTP/2, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)) shared by the load client, the origin and the peer; load average before $LOAD_BEFORE, after $LOAD_AFTER"
echo "https_load over loopback, $DURATION per cell: h2 cells ${H2_CONNECTIONS} connections x ${STREAMS} streams (through CONNECT for crawlcache and mitmproxy, straight for nginx); HTTP/1.1 cells $CONNECTIONS kept-alive connections; nginx $NGINX_VERSION"
echo
echo "| hits, req/s | crawlcache h2 in tunnels | crawlcache plain HTTP/1.1 | crawlcache HTTPS HTTP/1.1 tunnels | mitmproxy h2 (forwarding) | nginx h2 proxy_cache (reverse) | h2 tunnel / plain h1 | h2 tunnel / HTTPS h1 | h2 tunnel / mitmproxy | h2 tunnel / nginx h2 |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
for size in $SIZES; do
    h2=${R[crawlcache,h2,$size]:-}
    echo "| $(size_label "$size") | $(f0 "$h2") | $(f0 "${R[crawlcache,plain,$size]:-}") | $(f0 "${R[crawlcache,h1,$size]:-}") | $(f0 "${R[mitmproxy,h2,$size]:-}") | $(f0 "${R[nginx,h2,$size]:-}") | $(ratio "$h2" "${R[crawlcache,plain,$size]:-}") | $(ratio "$h2" "${R[crawlcache,h1,$size]:-}") | $(ratio "$h2" "${R[mitmproxy,h2,$size]:-}") | $(ratio "$h2" "${R[nginx,h2,$size]:-}") |"
done
echo
echo "| peer CPU per hit, us | crawlcache h2 in tunnels | crawlcache plain HTTP/1.1 | crawlcache HTTPS HTTP/1.1 tunnels | mitmproxy h2 (forwarding) | nginx h2 proxy_cache |"
echo "|---|--:|--:|--:|--:|--:|"
for size in $SIZES; do
    echo "| $(size_label "$size") | ${C[crawlcache,h2,$size]:--} | ${C[crawlcache,plain,$size]:--} | ${C[crawlcache,h1,$size]:--} | ${C[mitmproxy,h2,$size]:--} | ${C[nginx,h2,$size]:--} |"
done
echo
echo "| load client CPU per hit, us (same cores) | crawlcache h2 in tunnels | crawlcache plain HTTP/1.1 | crawlcache HTTPS HTTP/1.1 tunnels | mitmproxy h2 (forwarding) | nginx h2 proxy_cache |"
echo "|---|--:|--:|--:|--:|--:|"
for size in $SIZES; do
    echo "| $(size_label "$size") | ${L[crawlcache,h2,$size]:--} | ${L[crawlcache,plain,$size]:--} | ${L[crawlcache,h1,$size]:--} | ${L[mitmproxy,h2,$size]:--} | ${L[nginx,h2,$size]:--} |"
done
if has_peer crawlcache; then
    echo
    echo "| misses through crawlcache (h2 in tunnels, a new URL each request) | h2 origin req/s | origin connections used | h2 connections opened (metric) | HTTP/1.1 origin req/s | origin connections used | h2 / HTTP/1.1 origin | proxy CPU per miss, us (h2 / h1 origin) |"
    echo "|---|--:|--:|--:|--:|--:|--:|--:|"
    for size in $MISS_SIZES; do
        echo "| $(size_label "$size") | $(f0 "${R[crawlcache,missh2,$size]:-}") | ${MC[h2,$size]:--} | ${MH2C[h2,$size]:--} | $(f0 "${R[crawlcache,missh1,$size]:-}") | ${MC[h1,$size]:--} | $(ratio "${R[crawlcache,missh2,$size]:-}" "${R[crawlcache,missh1,$size]:-}") | ${C[crawlcache,missh2,$size]:--} / ${C[crawlcache,missh1,$size]:--} |"
    done
    echo
    echo "$CC_LINE"
    echo "origin requests over h2 in the miss cells (crawlcache_origin_h2_requests_total): $(for size in $MISS_SIZES; do printf '%s to the h2 origin %s, to the HTTP/1.1 origin %s; ' "$(size_label "$size")" "${MH2R[h2,$size]}" "${MH2R[h1,$size]}"; done)"
fi
errs=""
for k in "${!E[@]}"; do [[ ${E[$k]} != 0 ]] && errs+=" $k=${E[$k]}"; done
echo "load client errors:${errs:- none}"

# --- profile -----------------------------------------------------------------
if [[ $PROFILE = 1 ]] && has_peer crawlcache; then
    mkdir -p "$PROFILE_OUT"
    say "profile: crawlcache ($CC_BIN), $PROFILE_SECONDS s per cell into $PROFILE_OUT"
    start_peer crawlcache
    for size in $PROFILE_SIZES; do
        warm crawlcache "$size"
        for _ in 1 2; do curl -fsS -o /dev/null --proxy "http://127.0.0.1:$PEER_PORT" "http://localhost:$HTTP_PORT/$size.bin"; done
    done
    for size in $PROFILE_SIZES; do
        for cell in $PROFILE_CELLS; do
            if [[ $cell == h2 ]]; then
                args=(--url "$(peer_url crawlcache "$size")" "${PEER_ARGS[@]}" "${H2_ARGS[@]}")
            elif [[ $cell == h1 ]]; then
                args=(--url "$(peer_url crawlcache "$size")" "${PEER_ARGS[@]}" "${H1_ARGS[@]}")
            else
                args=(--url "http://localhost:$HTTP_PORT/$size.bin" --proxy "127.0.0.1:$PEER_PORT" "${H1_ARGS[@]}")
            fi
            name=$cell-$size
            timeout $((PROFILE_SECONDS + 90)) "$HL_BIN" --duration "$((PROFILE_SECONDS + 4))s" "${args[@]}" >"$PROFILE_OUT/$name.load" 2>&1 &
            lp=$!
            PIDS+=("$lp")
            sleep 2
            t0=$(cpu_ticks "$PEER_PID")
            perf record -F 499 --call-graph "$PROFILE_CALL_GRAPH" -p "$PEER_PID" -o "$WORK/perf-$name.data" -- sleep "$PROFILE_SECONDS" >/dev/null 2>&1 || true
            t1=$(cpu_ticks "$PEER_PID")
            wait "$lp" || true
            n=$(sed -E 's/^requests=([0-9]+).*/\1/' "$PROFILE_OUT/$name.load")
            {
                echo "# crawlcache, $(size_label "$size") $cell hits: $(cat "$PROFILE_OUT/$name.load")"
                echo "# proxy CPU over the $PROFILE_SECONDS s recorded: $(python3 -c "print(f'{($t1 - $t0) / $CLK_TCK:.2f}')") s; per request over the load run (approx.): $(per_request "$t0" "$t1" "$(python3 -c "print(int(int('${n:-0}' or 0) * $PROFILE_SECONDS / ($PROFILE_SECONDS + 4)))")") us"
                echo "# by shared object (self):"
                perf report -i "$WORK/perf-$name.data" --no-children -g none --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -12 || true
                echo "# by symbol (self):"
                perf report -i "$WORK/perf-$name.data" --no-children -g none --sort symbol --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -60 || true
            } >"$PROFILE_OUT/$name.txt" 2>&1
            if [[ $PROFILE_CALL_GRAPH != fp ]]; then
                # Callers of the hottest symbols (unwound from DWARF).
                perf report -i "$WORK/perf-$name.data" --no-children --sort symbol -g caller,1,callee,function,percent --stdio 2>/dev/null |
                    grep -v '^$' | head -600 >"$PROFILE_OUT/$name-callers.txt" || true
            fi
            say "profile: $PROFILE_OUT/$name.txt"
        done
    done
    stop_peer
fi
