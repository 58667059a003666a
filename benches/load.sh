#!/usr/bin/env bash
# Load benchmark: crawlcache against nginx proxy_cache, serving cache hits on
# loopback. A benchmark, not a test: CI never runs it.
#
#   bash benches/load.sh                 # full run (release build, ~2 min)
#   bash benches/load.sh --nginx-only    # only the nginx side (no crawlcache)
#   bash benches/load.sh --no-https      # skip the HTTPS measurements
#
# Knobs (environment): DURATION (wrk -d, default 10s), CONNECTIONS (-c, 32),
# THREADS (-t, 2), SIZES (default "1k 16k 256k 4m"), KEEP=1 keeps the work
# folder (configs, logs, caches) for inspection, CRAWLCACHE_BIN=path measures
# that binary instead of building one, HTTPS_LOAD_BIN=path uses that
# benches/https_load.rs binary instead of building one.
#
# What it starts, all on 127.0.0.1 and stopped on exit:
#   origin       nginx serving generated files of each size, with
#                Cache-Control: max-age=3600
#   nginx-cache  nginx proxy_cache in front of the origin (reverse proxy,
#                origin-form requests), warmed until X-Cache-Status is HIT;
#                the same nginx (2 workers) also serves the files directly
#                over TLS on a second port ("nginx-tls", server certificate
#                for localhost signed by a CA openssl makes in the work folder)
#   crawlcache   `crawlcache serve` (forward proxy, absolute-form requests),
#                warmed with one request per object, then a Cache-Status hit
#                is confirmed; its config trusts the work folder's CA for
#                origins (upstream.extra_ca_file), and it is warmed as well
#                through CONNECT to https://localhost:TLSPORT/ (interception)
# Then, for each size, `wrk -tTHREADS -cCONNECTIONS -dDURATION` against
# nginx-cache and against crawlcache, and a table: size, req/s of each, the
# ratio crawlcache/nginx, and crawlcache's peak RSS so far (VmHWM).
# HTTPS hits: wrk cannot send CONNECT, so benches/https_load.rs (built with
# `cargo bench --no-run`) runs CONNECTIONS keep-alive connections for DURATION
# directly against nginx-tls (trusting the work folder's CA) and through
# crawlcache's CONNECT (trusting crawlcache's CA), for each size; a second
# table gives req/s of each and the ratio crawlcache/nginx-tls.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

DURATION=${DURATION:-10s}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}
SIZES=${SIZES:-"1k 16k 256k 4m"}
NGINX_ONLY=0
HTTPS=1
for arg in "$@"; do
    case $arg in
        --nginx-only) NGINX_ONLY=1 ;;
        --no-https) HTTPS=0 ;;
        -h | --help) sed -n '2,37p' "$0"; exit 0 ;;
        *) echo "benches/load.sh: unknown argument $arg (try --help)" >&2; exit 2 ;;
    esac
done

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

# --- tools ---------------------------------------------------------------
missing=()
for tool in wrk nginx curl python3 openssl; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
    [[ $(id -u) -eq 0 ]] || die "missing ${missing[*]}: install them (apt-get install -y ${missing[*]}) or run as root"
    say "installing ${missing[*]} ..."
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
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
if ((!NGINX_ONLY)) && [[ -z $CC_BIN ]]; then
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
if ((HTTPS)) && [[ -z $HL_BIN ]]; then
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
mkdir -p "$WORK/www" "$WORK/pcache" "$WORK/cc-data"
for size in $SIZES; do
    head -c "$(bytes_of "$size")" /dev/urandom >"$WORK/www/$size.bin"
done

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

# As root, nginx workers would drop to `nobody`, who cannot read $WORK (0700).
USER_LINE=""
[[ $(id -u) -eq 0 ]] && USER_LINE="user root root;"

common_http() { # $1: name
    cat <<EOF
    default_type application/octet-stream;
    access_log "$WORK/$1.access.log";
    client_body_temp_path "$WORK/$1.tmp_body";
    proxy_temp_path "$WORK/$1.tmp_proxy";
    fastcgi_temp_path "$WORK/$1.tmp_fastcgi";
    uwsgi_temp_path "$WORK/$1.tmp_uwsgi";
    scgi_temp_path "$WORK/$1.tmp_scgi";
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
EOF
}

ORIGIN_PORT=$(free_port)
cat >"$WORK/origin.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid "$WORK/origin.pid";
error_log "$WORK/origin.error.log" warn;
events { worker_connections 1024; }
http {
$(common_http origin)
    server {
        listen 127.0.0.1:$ORIGIN_PORT;
        root "$WORK/www";
        add_header Cache-Control "max-age=3600" always;
    }
}
EOF
nginx -p "$WORK" -c "$WORK/origin.conf" -e "$WORK/origin.error.log" &
PIDS+=($!)
wait_for 10 "http://127.0.0.1:$ORIGIN_PORT/$(set -- $SIZES; echo "$1").bin" ||
    die "origin nginx did not start: $(tail -n 5 "$WORK/origin.error.log")"
say "origin on 127.0.0.1:$ORIGIN_PORT"

# --- nginx proxy_cache -----------------------------------------------------
PC_PORT=$(free_port)
TLS_SERVER=""
if ((HTTPS)); then
    TLS_SERVER=$(cat <<EOF
    server {
        listen 127.0.0.1:$TLS_PORT ssl;
        server_name localhost;
        ssl_certificate "$WORK/pki/localhost.pem";
        ssl_certificate_key "$WORK/pki/localhost.key";
        ssl_protocols TLSv1.2 TLSv1.3;
        root "$WORK/www";
        add_header Cache-Control "max-age=3600" always;
    }
EOF
)
fi
cat >"$WORK/nginx-cache.conf" <<EOF
daemon off;
master_process on;
$USER_LINE
worker_processes 2;
pid "$WORK/nginx-cache.pid";
error_log "$WORK/nginx-cache.error.log" warn;
events { worker_connections 4096; }
http {
$(common_http nginx-cache)
    proxy_cache_path "$WORK/pcache" levels=1:2 keys_zone=bench:16m max_size=4g inactive=1h use_temp_path=off;
    upstream origin { server 127.0.0.1:$ORIGIN_PORT; keepalive 16; }
    server {
        listen 127.0.0.1:$PC_PORT;
        location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_cache bench;
            add_header X-Cache-Status \$upstream_cache_status always;
        }
    }
$TLS_SERVER
}
EOF
nginx -p "$WORK" -c "$WORK/nginx-cache.conf" -e "$WORK/nginx-cache.error.log" &
PIDS+=($!)
wait_for 10 "http://127.0.0.1:$PC_PORT/$(set -- $SIZES; echo "$1").bin" ||
    die "nginx proxy_cache did not start: $(tail -n 5 "$WORK/nginx-cache.error.log")"
for size in $SIZES; do
    url="http://127.0.0.1:$PC_PORT/$size.bin"
    status=""
    for _ in 1 2 3 4 5; do
        status=$(curl -fsS -o /dev/null -D - "$url" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-cache-status" { print $2 }')
        [[ $status == HIT ]] && break
        sleep 0.2
    done
    [[ $status == HIT ]] || die "nginx proxy_cache never answered $url from cache (X-Cache-Status: $status)"
done
say "nginx proxy_cache on 127.0.0.1:$PC_PORT, warm"
if ((HTTPS)); then
    wait_for 10 --cacert "$WORK/pki/ca.pem" "https://localhost:$TLS_PORT/$(set -- $SIZES; echo "$1").bin" ||
        die "nginx-tls did not answer on https://localhost:$TLS_PORT/: $(tail -n 5 "$WORK/nginx-cache.error.log")"
    say "nginx-tls on https://localhost:$TLS_PORT"
fi

# --- crawlcache ------------------------------------------------------------
CC_PORT=
CC_PID=
if ((!NGINX_ONLY)); then
    CC_PORT=$(free_port)
    cc_config=()
    if ((HTTPS)); then
        printf '[upstream]\nextra_ca_file = "%s"\n' "$WORK/pki/ca.pem" >"$WORK/crawlcache.toml"
        cc_config=(--config "$WORK/crawlcache.toml")
    fi
    "$CC_BIN" serve "${cc_config[@]}" --listen "127.0.0.1:$CC_PORT" --data-dir "$WORK/cc-data" \
        >"$WORK/crawlcache.stdout.log" 2>"$WORK/crawlcache.stderr.log" </dev/null &
    CC_PID=$!
    PIDS+=("$CC_PID")
    wait_for 20 --noproxy '*' "http://127.0.0.1:$CC_PORT/stats" ||
        die "crawlcache did not answer GET /stats within 20 s: $(tail -n 20 "$WORK/crawlcache.stderr.log")"
    for size in $SIZES; do
        url="http://127.0.0.1:$ORIGIN_PORT/$size.bin"
        curl -fsS -o /dev/null --max-time 30 -x "http://127.0.0.1:$CC_PORT" "$url" ||
            die "crawlcache could not fetch $url"
        # The body is published (synced, indexed) after the first response
        # ends: allow a few tries, as for nginx above.
        cs=""
        for _ in 1 2 3 4 5; do
            cs=$(curl -fsS -o /dev/null -D - --max-time 30 -x "http://127.0.0.1:$CC_PORT" "$url" |
                tr -d '\r' | awk -F': ' 'tolower($1) == "cache-status" { print $2 }')
            [[ $cs == *"; hit"* ]] && break
            sleep 0.2
        done
        [[ $cs == *"; hit"* ]] || die "crawlcache did not serve $url from cache (Cache-Status: ${cs:-none})"
    done
    say "crawlcache on 127.0.0.1:$CC_PORT (pid $CC_PID), warm"
    if ((HTTPS)); then
        CC_CA=$("$CC_BIN" ca "${cc_config[@]}" --data-dir "$WORK/cc-data") || die "crawlcache ca failed"
        [[ -r $CC_CA ]] || die "crawlcache ca printed $CC_CA, which is not readable"
        for size in $SIZES; do
            url="https://localhost:$TLS_PORT/$size.bin"
            curl -fsS -o /dev/null --max-time 30 --proxy "http://127.0.0.1:$CC_PORT" --cacert "$CC_CA" "$url" ||
                die "crawlcache could not fetch $url through CONNECT: $(tail -n 5 "$WORK/crawlcache.stderr.log")"
            cs=""
            for _ in 1 2 3 4 5; do
                cs=$(curl -fsS -o /dev/null -D - --max-time 30 --proxy "http://127.0.0.1:$CC_PORT" --cacert "$CC_CA" "$url" |
                    tr -d '\r' | awk -F': ' 'tolower($1) == "cache-status" { print $2 }')
                [[ $cs == *"; hit"* ]] && break
                sleep 0.2
            done
            [[ $cs == *"; hit"* ]] || die "crawlcache did not serve $url from cache through CONNECT (Cache-Status: ${cs:-none})"
        done
        say "crawlcache warm through CONNECT for https://localhost:$TLS_PORT/ (CA $CC_CA)"
    fi
fi

# --- load ------------------------------------------------------------------
# One precomputed request per wrk thread: args are the request target
# (origin-form for nginx, absolute-form for the forward proxy) and the Host.
cat >"$WORK/request.lua" <<'EOF'
local req
function init(args)
    req = wrk.format("GET", args[1], { ["Host"] = args[2] })
end
function request()
    return req
end
EOF

# Prints "req/s errors" for one wrk run against $1 (server URL) sending $2
# (request target) with Host $3.
run_wrk() {
    local out secs
    secs=$(( $(duration_secs "$DURATION") + 60 ))
    out=$(timeout "$secs" wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" --timeout 10s \
        -s "$WORK/request.lua" "$1" -- "$2" "$3") || die "wrk against $1 failed: $out"
    echo "$out" >>"$WORK/wrk.log"
    local rps errors non2xx
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    errors=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $5 }' <<<"$out")
    echo "${rps:-0} $((${errors:-0} + ${non2xx:-0}))"
}

vmhwm() {
    [[ -n $1 && -r /proc/$1/status ]] || { echo "-"; return; }
    awk '/^VmHWM:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$1/status"
}

# crawlcache's counters (GET /stats) as "requests hits misses revalidations".
cc_counters() {
    curl -fsS --noproxy '*' --max-time 5 "http://127.0.0.1:$CC_PORT/stats" | python3 -c '
import json, sys
p = json.load(sys.stdin)["proxy"]
print(*(p.get(k, 0) for k in ("requests", "hits", "misses", "revalidations")))'
}

origin_lines_before=$(wc -l <"$WORK/origin.access.log")
((NGINX_ONLY)) || read -r cc_req0 cc_hit0 cc_miss0 cc_reval0 < <(cc_counters)
rows=()
for size in $SIZES; do
    say "wrk -t$THREADS -c$CONNECTIONS -d$DURATION: $size via nginx proxy_cache ..."
    read -r n_rps n_err < <(run_wrk "http://127.0.0.1:$PC_PORT" "/$size.bin" "127.0.0.1:$PC_PORT")
    c_rps="-" c_err="-" ratio="-"
    if ((!NGINX_ONLY)); then
        say "wrk -t$THREADS -c$CONNECTIONS -d$DURATION: $size via crawlcache ..."
        read -r c_rps c_err < <(run_wrk "http://127.0.0.1:$CC_PORT" \
            "http://127.0.0.1:$ORIGIN_PORT/$size.bin" "127.0.0.1:$ORIGIN_PORT")
        ratio=$(awk -v c="$c_rps" -v n="$n_rps" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print "-" }')
    fi
    rows+=("$(printf '%-6s %14s %8s %17s %8s %7s %14s' \
        "$size" "$n_rps" "$n_err" "$c_rps" "$c_err" "$ratio" "$(vmhwm "$CC_PID")")")
done
origin_hits=$(( $(wc -l <"$WORK/origin.access.log") - origin_lines_before ))
cc_line=""
if ((!NGINX_ONLY)); then
    read -r cc_req1 cc_hit1 cc_miss1 cc_reval1 < <(cc_counters)
    cc_line="crawlcache during the measurements: $((cc_req1 - cc_req0)) requests, $((cc_hit1 - cc_hit0)) hits, $((cc_miss1 - cc_miss0)) misses, $((cc_reval1 - cc_reval0)) revalidations (GET /stats)"
fi

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
tls_line=""
https_cc_line=""
if ((HTTPS)); then
    tls_lines_before=$(wc -l <"$WORK/nginx-cache.access.log")
    origin_lines_before=$(wc -l <"$WORK/origin.access.log")
    ((NGINX_ONLY)) || read -r cc_req0 cc_hit0 cc_miss0 cc_reval0 < <(cc_counters)
    for size in $SIZES; do
        url="https://localhost:$TLS_PORT/$size.bin"
        say "https_load -c$CONNECTIONS -d$DURATION: $size direct to nginx-tls ..."
        read -r n_rps n_err < <(run_https "$url" "$WORK/pki/ca.pem" "")
        c_rps="-" c_err="-" ratio="-"
        if ((!NGINX_ONLY)); then
            say "https_load -c$CONNECTIONS -d$DURATION: $size via crawlcache CONNECT ..."
            read -r c_rps c_err < <(run_https "$url" "$CC_CA" "127.0.0.1:$CC_PORT")
            ratio=$(awk -v c="$c_rps" -v n="$n_rps" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print "-" }')
        fi
        https_rows+=("$(printf '%-6s %16s %8s %17s %8s %7s %14s' \
            "$size" "$n_rps" "$n_err" "$c_rps" "$c_err" "$ratio" "$(vmhwm "$CC_PID")")")
    done
    tls_line="nginx-tls requests logged during the HTTPS measurements: $(( $(wc -l <"$WORK/nginx-cache.access.log") - tls_lines_before )) (direct runs, plus any crawlcache fetches from it)"
    if ((!NGINX_ONLY)); then
        read -r cc_req1 cc_hit1 cc_miss1 cc_reval1 < <(cc_counters)
        https_cc_line="crawlcache during the HTTPS measurements: $((cc_req1 - cc_req0)) requests, $((cc_hit1 - cc_hit0)) hits, $((cc_miss1 - cc_miss0)) misses, $((cc_reval1 - cc_reval0)) revalidations (GET /stats)"
    fi
fi

echo
echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION, cache hits on loopback, $(nproc) cores"
printf '%-6s %14s %8s %17s %8s %7s %14s\n' size "nginx req/s" errors "crawlcache req/s" errors ratio "crawlcache RSS"
printf '%s\n' "${rows[@]}"
echo "(errors: socket errors + non-2xx/3xx responses; RSS: crawlcache's VmHWM, peak so far)"
echo "origin requests during the measurements: $origin_hits (0 means both caches served every request)"
[[ -z $cc_line ]] || echo "$cc_line"
if ((HTTPS)); then
    echo
    echo "HTTPS hit: https_load -c$CONNECTIONS -d$DURATION (keep-alive HTTP/1.1 over TLS), $(nproc) cores shared with the client"
    printf '%-6s %16s %8s %17s %8s %7s %14s\n' size "nginx-tls req/s" errors "crawlcache req/s" errors ratio "crawlcache RSS"
    printf '%s\n' "${https_rows[@]}"
    echo "(nginx-tls: nginx serving the files over TLS itself; crawlcache: CONNECT, intercepted TLS, cache hit)"
    echo "(errors: failed connects/requests, non-2xx responses; RSS: crawlcache's VmHWM, peak so far)"
    echo "$tls_line"
    [[ -z $https_cc_line ]] || echo "$https_cc_line"
fi
