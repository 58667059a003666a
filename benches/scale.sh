#!/usr/bin/env bash
# Scale benchmark (issue 13): fill the store with N distinct ~1 KiB responses
# through the proxy and watch what the store costs as it grows. A benchmark,
# not a test: CI never runs it.
#
#   bash benches/scale.sh                     # 1,000,000 entries (release build)
#   N=200000 bash benches/scale.sh            # a quicker baseline
#
# Knobs (environment): N (entries, default 1000000), STEP (rows every STEP
# entries, default 100000), CONNECTIONS (wrk -c, 16), THREADS (wrk -t, 1),
# BODY (body bytes, default 1024), DUP_PCT (percent of URLs that serve a
# body other URLs serve too, default 30) and DUP_BODIES (how many such
# shared bodies, default 1000: boilerplate pages, error pages, the same
# script or stylesheet on every page), CRAWLCACHE_BIN=path measures that binary
# instead of building one, CONFIG=path lays that configuration over the
# bench's own (robots off), WORK=dir (default /tmp/crawlcache-scale; wiped
# first), KEEP=1 keeps it afterwards, PORT_BASE (origin port; the proxy gets
# the next one; default 18190).
#
# What it starts, all on 127.0.0.1 and stopped on exit (by PID):
#   origin      nginx answering every path with 200, `Cache-Control:
#               max-age=86400` and a BODY-byte body that starts with the
#               request path (a distinct body), except paths /d/<k>/...,
#               whose body starts with k only (DUP_BODIES shared bodies)
#   crawlcache  `crawlcache serve` with robots off and a fresh data directory
# The fill is wrk with a Lua script asking unique URLs
# (/p/<step>/<thread>/<n>, or /d/<k>/<step>/<thread>/<n> for DUP_PCT % of
# them, k = n mod DUP_BODIES); each wrk run ends itself after STEP responses
# (every request is a miss that stores a new entry and a new body). wrk
# itself only ends after its duration, so the script's threads end the
# process (os.exit) once the first of them has its share of responses: one
# thread (the default) makes the count exact.
#
# Printed per STEP entries (one row each):
#   entries         entries in the index (/metrics crawlcache_store_entries)
#   bodies          distinct bodies stored (crawlcache_store_bodies)
#   secs            wall time of the step
#   miss_per_s      new entries per second during the step
#   rss_mib hwm_mib resident memory now and its peak (VmRSS, VmHWM)
#   index_mib       disk used by the sled index (du of <data>/index)
#   idx_B_per_entry index bytes per entry
#   bodies_mib      disk used by body storage (du of <data>/bodies and
#                   <data>/packs: block overhead, entry records and the
#                   not yet compacted included)
#   payload_mib     the bytes of the distinct bodies (crawlcache_store_bytes)
#   ref_mib         the bytes of every entry's body, a shared one counted
#                   per entry (crawlcache_store_referenced_bytes)
#   bodies_ratio    bodies_mib / payload_mib
#   disk_per_ref    bodies_mib / ref_mib: disk per byte the entries serve
#   load1           the machine's 1-minute load average at the end of the step
#   non2xx          responses other than 2xx during the step
# Then: shutdown time, restart to first answer (a hit on the first URL
# stored), RSS after it, `cache verify` time and its verdict; each with the
# load average beside it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

N=${N:-1000000}
STEP=${STEP:-100000}
CONNECTIONS=${CONNECTIONS:-16}
THREADS=${THREADS:-1}
BODY=${BODY:-1024}
DUP_PCT=${DUP_PCT:-30}
DUP_BODIES=${DUP_BODIES:-1000}
WORK=${WORK:-/tmp/crawlcache-scale}
PORT_BASE=${PORT_BASE:-18190}
OP=$PORT_BASE
CP=$((PORT_BASE + 1))

say() { printf '[scale] %s\n' "$*" >&2; }
die() { printf '[scale] error: %s\n' "$*" >&2; exit 1; }
for tool in nginx wrk curl python3; do
    command -v $tool >/dev/null 2>&1 || die "$tool is needed (apt-get install -y $tool)"
done

if [[ -n ${CRAWLCACHE_BIN:-} ]]; then
    BIN=$CRAWLCACHE_BIN
else
    say "building the release binary (cargo build --release) ..."
    CARGO_INCREMENTAL=0 cargo build --release --quiet
    BIN=$PWD/target/release/crawlcache
fi
[[ -x $BIN ]] || die "no binary at $BIN"

rm -rf "$WORK"
mkdir -p "$WORK/ng" "$WORK/data"
DATA=$WORK/data
NGP=
CCP=
cleanup() {
    [[ -n $CCP ]] && kill "$CCP" 2>/dev/null && wait "$CCP" 2>/dev/null
    [[ -n $NGP ]] && kill "$NGP" 2>/dev/null && wait "$NGP" 2>/dev/null
    [[ ${KEEP:-0} = 1 ]] || rm -rf "$WORK"
    true
}
trap cleanup EXIT

# The body: the request path, a newline, then padding up to about BODY bytes
# (paths are about 16 bytes).
pad=$(python3 -c "print('x' * max(0, $BODY - 17))")
cat >"$WORK/ng/nginx.conf" <<NGX
worker_processes 1;
daemon off;
error_log $WORK/ng/error.log;
pid $WORK/ng/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/ng; proxy_temp_path $WORK/ng; fastcgi_temp_path $WORK/ng;
  uwsgi_temp_path $WORK/ng; scgi_temp_path $WORK/ng;
  server {
    listen 127.0.0.1:$OP;
    location / {
      default_type text/plain;
      add_header Cache-Control "max-age=86400";
      return 200 "\$request_uri\n$pad";
    }
    location ~ ^/d/(?<k>[0-9]+)/ {
      default_type text/plain;
      add_header Cache-Control "max-age=86400";
      return 200 "shared body \$k\n$pad";
    }
  }
}
NGX
nginx -c "$WORK/ng/nginx.conf" -p "$WORK/ng" >/dev/null 2>&1 &
NGP=$!

printf '[robots]\nmode = "off"\n' >"$WORK/cc.toml"
[[ -n ${CONFIG:-} ]] && cat "$CONFIG" >>"$WORK/cc.toml"

start() {
    RUST_LOG=warn "$BIN" serve --config "$WORK/cc.toml" --listen 127.0.0.1:$CP --data-dir "$DATA" >>"$WORK/cc.log" 2>&1 &
    CCP=$!
}
# Polls URL through the proxy until it answers 200 (bounded: 60 s).
wait_answer() {
    local url=$1
    for _ in $(seq 1 6000); do
        [[ $(curl -s -o /dev/null -w '%{http_code}' -x http://127.0.0.1:$CP "$url" 2>/dev/null) = 200 ]] && return 0
        kill -0 "$CCP" 2>/dev/null || return 1
        sleep 0.01
    done
    return 1
}
metric() { curl -s --noproxy '*' http://127.0.0.1:$CP/metrics | awk -v m="$1" '$1 == m {print $2}'; }
status_kib() { awk -v f="$1:" '$1 == f {print $2}' /proc/$CCP/status; }
du_kib() {
    local total=0 d k
    for d in "$@"; do
        [[ -e $d ]] || continue
        k=$(du -sk "$d" | cut -f1)
        total=$((total + k))
    done
    echo $total
}
now() { date +%s.%N; }
calc() { python3 -c "print($1)"; }
load1() { cut -d' ' -f1 /proc/loadavg; }

for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$OP/" && break; sleep 0.05; done
start
wait_answer "http://127.0.0.1:$OP/warmup" || die "the proxy did not start (see $WORK/cc.log)"

cat >"$WORK/fill.lua" <<'LUA'
-- Unique URLs /p/<step>/<thread>/<n>; the process ends once a thread has its
-- quota of responses (wrk would wait for its duration), after writing how
-- many answers were not 2xx.
local threads = 0
setup = function(thread)
  thread:set("tid", threads)
  threads = threads + 1
end
init = function(args)
  base = args[1]; step = args[2]; quota = tonumber(args[3]); report = args[4]
  dup_pct = tonumber(args[5]); dup_bodies = tonumber(args[6])
  host = string.sub(base, 8)
  n = 0; got = 0; bad = 0
end
request = function()
  n = n + 1
  local tail = step .. "/" .. tid .. "/" .. n
  -- A well-mixed pick of the shared ones (Knuth's multiplicative hash).
  if (n * 2654435761) % 100 < dup_pct then
    return wrk.format("GET", base .. "/d/" .. (n % dup_bodies) .. "/" .. tail, { ["Host"] = host })
  end
  return wrk.format("GET", base .. "/p/" .. tail, { ["Host"] = host })
end
response = function(status, headers, body)
  got = got + 1
  if status < 200 or status > 299 then bad = bad + 1 end
  if got >= quota then
    local f = io.open(report, "w")
    f:write(bad, "\n")
    f:close()
    os.exit(0)
  end
end
LUA

say "filling $N entries of ~$BODY bytes in steps of $STEP (wrk -t$THREADS -c$CONNECTIONS), $DUP_PCT % of them one of $DUP_BODIES shared bodies; work folder $WORK"
printf '%-9s %8s %6s %10s %7s %7s %9s %15s %10s %11s %8s %12s %12s %6s %6s\n' \
    entries bodies secs miss_per_s rss_mib hwm_mib index_mib idx_B_per_entry bodies_mib payload_mib ref_mib bodies_ratio disk_per_ref load1 non2xx
step=0
base_entries=$(metric crawlcache_store_entries)
while :; do
    e0=$(metric crawlcache_store_entries)
    target=$((base_entries + (step + 1) * STEP))
    ((target > base_entries + N)) && target=$((base_entries + N))
    want=$((target - e0))
    ((want <= 0)) && break
    quota=$(((want + THREADS - 1) / THREADS))
    t0=$(now)
    wrk -t"$THREADS" -c"$CONNECTIONS" -d3600s -T30s -s "$WORK/fill.lua" http://127.0.0.1:$CP \
        -- "http://127.0.0.1:$OP" "$step" "$quota" "$WORK/non2xx-$step" "$DUP_PCT" "$DUP_BODIES" >"$WORK/wrk-$step.out" 2>&1 ||
        die "wrk failed: $(tail -3 "$WORK/wrk-$step.out")"
    t1=$(now)
    e1=$(metric crawlcache_store_entries)
    payload=$(metric crawlcache_store_bytes)
    referenced=$(metric crawlcache_store_referenced_bytes)
    distinct=$(metric crawlcache_store_bodies)
    idx=$(du_kib "$DATA/index")
    bod=$(du_kib "$DATA/bodies" "$DATA/packs")
    non2xx=$(cat "$WORK/non2xx-$step" 2>/dev/null || echo '?')
    printf '%-9s %8s %6.1f %10.0f %7.0f %7.0f %9.1f %15.0f %10.1f %11.1f %8.1f %12.2f %12.2f %6s %6s\n' \
        "$e1" "$distinct" "$(calc "$t1 - $t0")" "$(calc "($e1 - $e0) / ($t1 - $t0)")" \
        "$(calc "$(status_kib VmRSS) / 1024")" "$(calc "$(status_kib VmHWM) / 1024")" \
        "$(calc "$idx / 1024")" "$(calc "$idx * 1024 / max($e1, 1)")" \
        "$(calc "$bod / 1024")" "$(calc "$payload / 1048576")" "$(calc "$referenced / 1048576")" \
        "$(calc "$bod * 1024 / max($payload, 1)")" "$(calc "$bod * 1024 / max($referenced, 1)")" \
        "$(load1)" "${non2xx:-0}"
    step=$((step + 1))
done

hwm=$(status_kib VmHWM)
t0=$(now)
kill "$CCP"
wait "$CCP" 2>/dev/null || true
t1=$(now)
printf 'shutdown_s %.2f  peak_rss_mib %.0f  load1 %s\n' "$(calc "$t1 - $t0")" "$(calc "$hwm / 1024")" "$(load1)"

first="http://127.0.0.1:$OP/p/0/0/1"
t0=$(now)
start
wait_answer "$first" || die "the proxy did not answer after the restart (see $WORK/cc.log)"
t1=$(now)
cs=$(curl -s -o /dev/null -D - -x http://127.0.0.1:$CP "$first" | tr -d '\r' | awk -F': ' 'tolower($1) == "cache-status" {print $2}')
printf 'restart_to_first_answer_s %.2f  rss_after_mib %.0f  load1 %s  (%s)\n' \
    "$(calc "$t1 - $t0")" "$(calc "$(status_kib VmRSS) / 1024")" "$(load1)" "${cs:-no Cache-Status}"
kill "$CCP"
wait "$CCP" 2>/dev/null || true
CCP=

t0=$(now)
rc=0
"$BIN" cache verify --config "$WORK/cc.toml" --data-dir "$DATA" >"$WORK/verify.txt" 2>&1 || rc=$?
t1=$(now)
printf 'cache_verify_s %.2f  exit %s  load1 %s\n' "$(calc "$t1 - $t0")" "$rc" "$(load1)"
tail -n 3 "$WORK/verify.txt"
