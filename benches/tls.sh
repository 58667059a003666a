#!/usr/bin/env bash
# TLS speed of the interception, against peers: `bash benches/tls.sh`.
#
# One run builds crawlcache (release) and the load client
# (benches/https_load.rs), starts on loopback an nginx origin (TLS and
# plain, static 1 KiB / 16 KiB / 256 KiB files, Cache-Control: max-age),
# then, one peer at a time on the same origin, crawlcache (defaults plus
# upstream.extra_ca_file), Squid with ssl-bump (Debian squid-openssl,
# memory cache, leaves minted by security_file_certgen) and mitmproxy
# (mitmdump from PyPI, in a venv under target/; it does not cache, so its
# "hits" are forwarded), and measures:
#   - HTTPS hits over kept-alive tunnels (1 KiB, 16 KiB, 256 KiB);
#   - new tunnels per second to one host (CONNECT + TLS + one 1 KiB hit);
#   - first tunnels to 1,000 distinct hosts (a TLS server name each, so an
#     intercepting proxy mints a leaf per host; one 1 KiB hit inside);
#   - crawlcache's own plain-HTTP hits (absolute-form, kept-alive, 16 KiB),
#     the reference for the HTTPS-hit ratio;
#   - each proxy's own CPU per hit (user + system from /proc, over each hit
#     cell): the load client shares the two cores, so req/s also counts the
#     client's decryption; this figure is the proxy's part alone.
# It prints one table (req/s, or tunnels/s) with crawlcache's ratio to the
# best peer per cell, the HTTPS/plain ratio, and the load average before
# and after. Everything listens on 127.0.0.1 and is stopped at the end.
#
# Knobs (environment): DURATION (per cell and peer, default 8s),
# CONNECTIONS (kept-alive cells, default 32), TUNNEL_CONNECTIONS (default
# 16), HOSTS (default 1000), PEERS (default "crawlcache squid mitmproxy").
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

DURATION=${DURATION:-8s}
CONNECTIONS=${CONNECTIONS:-32}
TUNNEL_CONNECTIONS=${TUNNEL_CONNECTIONS:-16}
HOSTS=${HOSTS:-1000}
PEERS=${PEERS:-"crawlcache squid mitmproxy"}
SIZES="1k 16k 256k"

say() { echo "benches/tls.sh: $*" >&2; }
die() { say "$*"; exit 1; }
has_peer() { [[ " $PEERS " == *" $1 "* ]]; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

for tool in nginx curl openssl python3; do
    command -v "$tool" >/dev/null || die "$tool is missing (apt-get install $tool)"
done
if has_peer squid; then
    command -v squid >/dev/null || die "squid is missing (apt-get install squid-openssl)"
    CERTGEN=$(ls /usr/lib/squid/security_file_certgen 2>/dev/null || true)
    [[ -x $CERTGEN ]] || die "security_file_certgen is missing: Squid's ssl-bump needs squid-openssl (apt-get install squid-openssl)"
fi
if has_peer mitmproxy; then
    VENV=target/bench-venv
    if [[ ! -x $VENV/bin/mitmdump ]]; then
        say "installing mitmproxy into $VENV (pip) ..."
        python3 -m venv "$VENV" && "$VENV/bin/pip" install --quiet mitmproxy || die "pip install mitmproxy failed"
    fi
fi

say "cargo build --release ..."
cargo build --release --quiet
CC_BIN=target/release/crawlcache
HL_BIN=$(cargo bench --quiet --bench https_load --no-run --message-format json |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "https_load" and m.get("executable"):
        print(m["executable"])')
[[ -x $HL_BIN ]] || die "no https_load binary"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crawlcache-tls-bench.XXXXXX")
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [[ -n ${KEEP:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT

# --- PKI and origin ----------------------------------------------------------
mkdir -p "$WORK/pki" "$WORK/www"
(
    cd "$WORK/pki"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.pem -days 2 \
        -subj "/CN=crawlcache tls bench origin CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout localhost.key -out localhost.csr -subj "/CN=localhost"
    printf '%s\n' "subjectAltName=DNS:localhost,DNS:*.hosts.localhost" "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >localhost.ext
    openssl x509 -req -in localhost.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile localhost.ext -out localhost.pem
) >"$WORK/pki.log" 2>&1 || die "openssl: $(tail -n 5 "$WORK/pki.log")"
chmod -R a+rX "$WORK/pki"
for size in $SIZES; do
    case $size in 1k) n=1024 ;; 16k) n=16384 ;; 256k) n=262144 ;; esac
    head -c "$n" /dev/urandom >"$WORK/www/$size.bin"
done
chmod -R a+rX "$WORK/www"
TLS_PORT=$(free_port)
HTTP_PORT=$(free_port)
USER_LINE=""
[[ $(id -u) -eq 0 ]] && USER_LINE="user root root;"
cat >"$WORK/nginx.conf" <<CONF
$USER_LINE
worker_processes 1;
daemon off;
error_log $WORK/nginx.error.log warn;
pid $WORK/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $WORK/nginx-tmp;
    proxy_temp_path $WORK/nginx-tmp;
    fastcgi_temp_path $WORK/nginx-tmp;
    uwsgi_temp_path $WORK/nginx-tmp;
    scgi_temp_path $WORK/nginx-tmp;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$HTTP_PORT;
        listen 127.0.0.1:$TLS_PORT ssl;
        server_name localhost;
        ssl_certificate $WORK/pki/localhost.pem;
        ssl_certificate_key $WORK/pki/localhost.key;
        root $WORK/www;
        add_header Cache-Control "max-age=3600";
    }
}
CONF
mkdir -p "$WORK/nginx-tmp"
nginx -c "$WORK/nginx.conf" -p "$WORK" >"$WORK/nginx.out" 2>&1 &
PIDS+=($!)
wait_http() { # URL, curl args...
    local url=$1; shift
    for _ in $(seq 100); do curl -fsS -o /dev/null "$@" "$url" 2>/dev/null && return 0; sleep 0.1; done
    return 1
}
wait_http "https://localhost:$TLS_PORT/1k.bin" --cacert "$WORK/pki/ca.pem" || die "nginx did not start: $(tail -n 5 "$WORK/nginx.error.log")"

# --- peers -------------------------------------------------------------------
start_peer() { # name -> sets PEER_PORT, PEER_CA, PEER_PID
    local name=$1
    PEER_PORT=$(free_port)
    case $name in
    crawlcache)
        printf '[upstream]\nextra_ca_file = "%s"\n' "$WORK/pki/ca.pem" >"$WORK/crawlcache.toml"
        rm -rf "$WORK/cc-data"
        "$CC_BIN" serve --listen "127.0.0.1:$PEER_PORT" --data-dir "$WORK/cc-data" --config "$WORK/crawlcache.toml" >"$WORK/crawlcache.log" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/cc-data/ca/ca.pem"
        ;;
    squid)
        rm -rf "$WORK/squid" && mkdir -p "$WORK/squid"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/squid/ca.key" -out "$WORK/squid/ca.pem" \
            -days 2 -subj "/CN=squid bench CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" >/dev/null 2>&1
        "$CERTGEN" -c -s "$WORK/squid/ssl_db" -M 64MB >/dev/null 2>&1
        chown -R proxy:proxy "$WORK/squid" 2>/dev/null || true
        cat >"$WORK/squid/squid.conf" <<CONF
http_port 127.0.0.1:$PEER_PORT ssl-bump tls-cert=$WORK/squid/ca.pem tls-key=$WORK/squid/ca.key generate-host-certificates=on dynamic_cert_mem_cache_size=64MB
sslcrtd_program $CERTGEN -s $WORK/squid/ssl_db -M 64MB
sslcrtd_children 8 startup=4 idle=2
acl step1 at_step SslBump1
ssl_bump peek step1
ssl_bump bump all
tls_outgoing_options cafile=$WORK/pki/ca.pem
http_access allow localhost
http_access deny all
cache_mem 256 MB
maximum_object_size_in_memory 1 MB
cache deny !all
cache allow all
pid_filename $WORK/squid/squid.pid
cache_log $WORK/squid/cache.log
access_log none
coredump_dir $WORK/squid
workers 1
CONF
        squid -N -f "$WORK/squid/squid.conf" >"$WORK/squid/out.log" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/squid/ca.pem"
        ;;
    mitmproxy)
        rm -rf "$WORK/mitm" && mkdir -p "$WORK/mitm"
        "$VENV/bin/mitmdump" -q --listen-host 127.0.0.1 --listen-port "$PEER_PORT" --set confdir="$WORK/mitm" \
            --set ssl_verify_upstream_trusted_ca="$WORK/pki/ca.pem" --set flow_detail=0 >"$WORK/mitm/out.log" 2>&1 &
        PEER_PID=$!
        PEER_CA="$WORK/mitm/mitmproxy-ca-cert.pem"
        ;;
    esac
    for _ in $(seq 200); do [[ -f $PEER_CA ]] && curl -fsS -o /dev/null --proxy "http://127.0.0.1:$PEER_PORT" --cacert "$PEER_CA" "https://localhost:$TLS_PORT/1k.bin" 2>/dev/null && return 0; sleep 0.1; done
    die "$name did not start on 127.0.0.1:$PEER_PORT (see $WORK; KEEP=1 keeps it)"
}
stop_peer() { kill "$PEER_PID" 2>/dev/null || true; wait "$PEER_PID" 2>/dev/null || true; }

# hl MODE URL [extra args]: prints req/s of one https_load run via the peer.
hl() {
    local mode=$1 url=$2; shift 2
    local out
    out=$("$HL_BIN" --mode "$mode" --url "$url" --ca "$PEER_CA" --proxy "127.0.0.1:$PEER_PORT" "$@" 2>>"$WORK/https_load.err") || die "https_load $mode $url failed: $out"
    echo "$PEER_NAME $mode $url $*: $out" >>"$WORK/https_load.log"
    sed -E 's/.*req_per_s=([0-9.]+).*/\1/' <<<"$out"
}

# The proxy's own CPU (user + system, in clock ticks) from /proc, and per
# request over one cell: per_request TICKS_BEFORE TICKS_AFTER REQ_PER_S ->
# microseconds. With the load client on the same two cores, req/s counts
# the client's work too; this is the proxy's part alone.
CLK_TCK=$(getconf CLK_TCK)
case $DURATION in *m) SECONDS_PER_CELL=$((${DURATION%m} * 60)) ;; *) SECONDS_PER_CELL=${DURATION%s} ;; esac
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
per_request() { python3 -c "b, a, r = $1, $2, float('$3' or 0); print(f'{(a - b) / $CLK_TCK * 1e6 / (r * $SECONDS_PER_CELL):.1f}' if r else '-')"; }

declare -A R
LOAD_BEFORE=$(load)
for PEER_NAME in $PEERS; do
    say "$PEER_NAME ..."
    start_peer "$PEER_NAME"
    for size in $SIZES; do
        # Warm: twice, so a caching peer stores and hits.
        for _ in 1 2; do curl -fsS -o /dev/null --proxy "http://127.0.0.1:$PEER_PORT" --cacert "$PEER_CA" "https://localhost:$TLS_PORT/$size.bin"; done
        t0=$(cpu_ticks "$PEER_PID")
        R[$PEER_NAME,hit$size]=$(hl keepalive "https://localhost:$TLS_PORT/$size.bin" --connections "$CONNECTIONS" --duration "$DURATION")
        R[$PEER_NAME,cpu$size]=$(per_request "$t0" "$(cpu_ticks "$PEER_PID")" "${R[$PEER_NAME,hit$size]}")
    done
    R[$PEER_NAME,tunnels]=$(hl tunnels "https://localhost:$TLS_PORT/1k.bin" --connections "$TUNNEL_CONNECTIONS" --duration "$DURATION")
    R[$PEER_NAME,hosts]=$(hl hosts "https://localhost:$TLS_PORT/1k.bin" --connections "$TUNNEL_CONNECTIONS" --hosts "$HOSTS")
    if [[ $PEER_NAME == crawlcache ]]; then
        for _ in 1 2; do curl -fsS -o /dev/null --proxy "http://127.0.0.1:$PEER_PORT" "http://localhost:$HTTP_PORT/16k.bin"; done
        t0=$(cpu_ticks "$PEER_PID")
        R[crawlcache,plain16k]=$("$HL_BIN" --mode keepalive --url "http://localhost:$HTTP_PORT/16k.bin" --proxy "127.0.0.1:$PEER_PORT" \
            --connections "$CONNECTIONS" --duration "$DURATION" 2>>"$WORK/https_load.err" | sed -E 's/.*req_per_s=([0-9.]+).*/\1/')
        R[crawlcache,cpuplain16k]=$(per_request "$t0" "$(cpu_ticks "$PEER_PID")" "${R[crawlcache,plain16k]}")
    fi
    stop_peer
done
LOAD_AFTER=$(load)

# --- table -------------------------------------------------------------------
echo
echo "TLS interception, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), load average before $LOAD_BEFORE, after $LOAD_AFTER"
echo "https_load over loopback: kept-alive cells -c$CONNECTIONS, tunnel cells -c$TUNNEL_CONNECTIONS, $DURATION per cell and peer; hosts: $HOSTS first tunnels, each its own TLS server name"
echo
header="| cell |"
rule="|---|"
for p in $PEERS; do header+=" $p |"; rule+="--:|"; done
echo "$header crawlcache / best peer |"
echo "$rule--:|"
for cell in hit1k hit16k hit256k tunnels hosts; do
    case $cell in
    hit1k) label="HTTPS hit 1 KiB (req/s)" ;; hit16k) label="HTTPS hit 16 KiB (req/s)" ;; hit256k) label="HTTPS hit 256 KiB (req/s)" ;;
    tunnels) label="new tunnels, one host (tunnels/s)" ;; hosts) label="first tunnels, $HOSTS hosts (tunnels/s)" ;;
    esac
    row="| $label |"
    best=0
    for p in $PEERS; do
        v=${R[$p,$cell]:-0}
        row+=" $(printf '%.0f' "$v") |"
        [[ $p != crawlcache ]] && best=$(python3 -c "print(max($best, $v))")
    done
    ratio=$(python3 -c "c=${R[crawlcache,$cell]:-0}; b=$best; print(f'{c/b:.2f}' if b else '-')")
    echo "$row $ratio |"
done
if has_peer crawlcache; then
    echo
    python3 -c "h=${R[crawlcache,hit16k]}; p=${R[crawlcache,plain16k]}; print(f'crawlcache 16 KiB hits: HTTPS {h:.0f} req/s, plain HTTP {p:.0f} req/s: HTTPS / plain = {h/p:.2f}')"
    python3 -c "h=float('${R[crawlcache,cpu16k]}'); p=float('${R[crawlcache,cpuplain16k]}'); print(f'crawlcache CPU per 16 KiB hit (its own, user + system): HTTPS {h:.1f} us, plain HTTP {p:.1f} us: plain / HTTPS = {p/h:.2f}')"
fi
echo
row="proxy CPU per HTTPS hit, us (1 KiB / 16 KiB / 256 KiB):"
for p in $PEERS; do row+=" $p ${R[$p,cpu1k]} / ${R[$p,cpu16k]} / ${R[$p,cpu256k]};"; done
echo "${row%;}"
