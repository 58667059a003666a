#!/usr/bin/env bash
# Fleet benchmark: cache hits through one node with the fleet tier on and
# off (same run), and fleet-tier hits (local miss, fleet hit) per second.
# A benchmark, not a test: CI never runs it.
#
#   bash benches/fleet.sh
#
# Knobs (environment): DURATION (seconds of each hit run, default 10),
# CONNECTIONS (default 32), COUNT (objects for the fleet-tier run, default
# 2000), SIZE (body bytes, default 16384), KEEP=1 keeps the work folder,
# CRAWLCACHE_BIN=path measures that binary instead of building one,
# FLEET_LOAD_BIN=path uses that benches/fleet_load.rs binary.
#
# What it starts, all on 127.0.0.1 and stopped on exit: redis-server,
# Garage (a real S3-compatible object store, `cargo install garage --locked`)
# as one node with a key and one bucket, a Python origin
# answering any path with SIZE bytes and Cache-Control: max-age=3600, and
# three crawlcache nodes: `fleet-a` and `fleet-b` sharing Redis and the
# bucket, `single` with no [fleet] at all. Then:
#   1. hits: /hit warmed on fleet-a and single; fleet_load -cCONNECTIONS for
#      DURATION seconds against fleet-a, then single;
#   2. fleet tier: COUNT distinct objects fetched through fleet-a (origin
#      misses, published in the background; it waits until all are
#      published), then the same COUNT objects through fleet-b: every one a
#      local miss answered from the fleet tier (checked with fleet-b's
#      tier_hits counter).
# Garage runs with its metadata in SQLite and without fsync (what a cache's
# bucket needs); the Redis share is measured by the counters, not the wall
# clock. GARAGE=path uses that garage binary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DURATION=${DURATION:-10}
CONNECTIONS=${CONNECTIONS:-32}
COUNT=${COUNT:-2000}
SIZE=${SIZE:-16384}

say() { printf '[fleet] %s\n' "$*" >&2; }
die() { printf '[fleet] error: %s\n' "$*" >&2; exit 1; }

command -v redis-server >/dev/null || die "redis-server is missing: apt-get install redis-server"
GARAGE=${GARAGE:-$(command -v garage || echo "${CARGO_HOME:-$HOME/.cargo}/bin/garage")}
[[ -x $GARAGE ]] || die "garage is missing: cargo install garage --locked"
command -v curl >/dev/null || die "curl is missing: apt-get install curl"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/crawlcache-fleet.XXXXXX")
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ ${KEEP:-0} == 1 ]]; then say "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() {
    local limit=$1; shift
    local deadline=$((SECONDS + limit))
    until curl -fsS -o /dev/null --max-time 2 "$@" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}
json_counter() { # $1 port, $2 counter name
    curl -fsS --noproxy '*' "http://127.0.0.1:$1/stats" | python3 -c "import json,sys; print(json.load(sys.stdin)['fleet']['counters']['$2'])"
}

# --- binaries ----------------------------------------------------------------
CC_BIN=${CRAWLCACHE_BIN:-}
if [[ -z $CC_BIN ]]; then
    say "cargo build --release ..."
    cargo build --release --quiet --bin crawlcache
    CC_BIN="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')/release/crawlcache"
fi
[[ -x $CC_BIN ]] || die "no crawlcache binary at $CC_BIN"
FL_BIN=${FLEET_LOAD_BIN:-}
if [[ -z $FL_BIN ]]; then
    say "cargo bench --bench fleet_load --no-run ..."
    FL_BIN=$(cargo bench --quiet --bench fleet_load --no-run --message-format json | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "fleet_load" and m.get("executable"):
        print(m["executable"])')
fi
[[ -n $FL_BIN && -x $FL_BIN ]] || die "no fleet_load binary"

# --- engines and origin ------------------------------------------------------
REDIS_PORT=$(free_port)
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$WORK" >"$WORK/redis.log" 2>&1 </dev/null &
PIDS+=($!)
S3_PORT=$(free_port)
RPC_PORT=$(free_port)
KEY_ID=GK0123456789abcdef01234567
KEY_SECRET=5bb0a6bb4e0f6e4b3fd1c2d7b7e3c5e1c0a9f8e7d6c5b4a39281706f5e4d3c2b
cat >"$WORK/garage.toml" <<TOML
metadata_dir = "$WORK/garage/meta"
data_dir = "$WORK/garage/data"
db_engine = "sqlite"
replication_factor = 1
metadata_fsync = false
data_fsync = false
rpc_bind_addr = "127.0.0.1:$RPC_PORT"
rpc_public_addr = "127.0.0.1:$RPC_PORT"
rpc_secret = "$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
[s3_api]
s3_region = "us-east-1"
api_bind_addr = "127.0.0.1:$S3_PORT"
root_domain = ".s3.garage.localhost"
TOML
RUST_LOG=garage=warn "$GARAGE" -c "$WORK/garage.toml" server >"$WORK/garage.log" 2>&1 </dev/null &
PIDS+=($!)
garage_cli() { RUST_LOG=error "$GARAGE" -c "$WORK/garage.toml" "$@"; }
ORIGIN_PORT=$(free_port)
cat >"$WORK/origin.py" <<PY
import http.server, socketserver
BODY = bytes(i % 251 for i in range($SIZE))
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Cache-Control", "max-age=3600")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *a):
        pass
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
S(("127.0.0.1", $ORIGIN_PORT), H).serve_forever()
PY
python3 "$WORK/origin.py" >"$WORK/origin.log" 2>&1 </dev/null &
PIDS+=($!)
deadline=$((SECONDS + 60))
until NODE=$(garage_cli node id -q 2>/dev/null); do
    ((SECONDS < deadline)) || die "garage did not start: $(tail -n 5 "$WORK/garage.log")"
    sleep 0.2
done
garage_cli layout assign -z dc1 -c 1G "${NODE%%@*}" >/dev/null
garage_cli layout apply --version 1 >/dev/null
garage_cli key import --yes -n bench "$KEY_ID" "$KEY_SECRET" >/dev/null
garage_cli bucket create bench >/dev/null
garage_cli bucket allow --read --write --owner bench --key "$KEY_ID" >/dev/null
until curl -sS -o /dev/null --max-time 2 --noproxy '*' "http://127.0.0.1:$S3_PORT/" 2>/dev/null; do
    ((SECONDS < deadline)) || die "garage's S3 API did not answer: $(tail -n 5 "$WORK/garage.log")"
    sleep 0.1
done
wait_for 10 --noproxy '*' "http://127.0.0.1:$ORIGIN_PORT/x" || die "the origin did not start"

# --- nodes -----------------------------------------------------------------
start_node() { # $1 name, $2 fleet (1/0); prints the port
    local port dir=$WORK/$1
    port=$(free_port)
    mkdir -p "$dir"
    printf '[server]\naccess_log = "off"\n[robots]\nmode = "off"\n' >"$dir/crawlcache.toml"
    if [[ $2 == 1 ]]; then
        printf '[fleet]\nredis_url = "redis://127.0.0.1:%s/0"\ns3_endpoint = "http://127.0.0.1:%s"\ns3_bucket = "bench"\ns3_region = "us-east-1"\nnode = "%s"\n' \
            "$REDIS_PORT" "$S3_PORT" "$1" >>"$dir/crawlcache.toml"
    fi
    AWS_ACCESS_KEY_ID=$KEY_ID AWS_SECRET_ACCESS_KEY=$KEY_SECRET "$CC_BIN" serve --config "$dir/crawlcache.toml" \
        --listen "127.0.0.1:$port" --data-dir "$dir/data" >"$dir/stdout.log" 2>"$dir/stderr.log" </dev/null &
    PIDS+=($!)
    wait_for 20 --noproxy '*' "http://127.0.0.1:$port/stats" || die "node $1 did not start: $(tail -n 5 "$dir/stderr.log")"
    echo "$port"
}
A=$(start_node fleet-a 1)
B=$(start_node fleet-b 1)
S=$(start_node single 0)
say "nodes: fleet-a :$A, fleet-b :$B, single :$S"

rps() { sed -n 's/.*req_per_s=\([0-9]*\).*/\1/p' <<<"$1"; }

# --- 1. hits, fleet tier on vs off ----------------------------------------------
HIT="http://127.0.0.1:$ORIGIN_PORT/hit"
for p in "$A" "$S"; do
    curl -fsS -o /dev/null -x "http://127.0.0.1:$p" "$HIT"
    sleep 0.3
    curl -fsS -D - -o /dev/null -x "http://127.0.0.1:$p" "$HIT" | grep -qi '^cache-status:.*; hit' || die "no hit on :$p"
done
say "hits through fleet-a (fleet tier on), ${DURATION}s ..."
on=$("$FL_BIN" --proxy "127.0.0.1:$A" --url "$HIT" --duration "$DURATION" --connections "$CONNECTIONS")
say "hits through single (no fleet), ${DURATION}s ..."
off=$("$FL_BIN" --proxy "127.0.0.1:$S" --url "$HIT" --duration "$DURATION" --connections "$CONNECTIONS")

# --- 2. fleet-tier hits ----------------------------------------------------------
say "$COUNT misses through fleet-a (published to the fleet tier) ..."
miss=$("$FL_BIN" --proxy "127.0.0.1:$A" --url "http://127.0.0.1:$ORIGIN_PORT/obj" --count "$COUNT" --connections "$CONNECTIONS")
deadline=$((SECONDS + 300))
until (($(json_counter "$A" published) >= COUNT)); do
    ((SECONDS < deadline)) || die "fleet-a published only $(json_counter "$A" published) of $COUNT within 300 s"
    sleep 0.5
done
say "the same $COUNT through fleet-b (local misses, fleet-tier hits) ..."
tier=$("$FL_BIN" --proxy "127.0.0.1:$B" --url "http://127.0.0.1:$ORIGIN_PORT/obj" --count "$COUNT" --connections "$CONNECTIONS")
hits=$(json_counter "$B" tier_hits)
((hits == COUNT)) || die "fleet-b answered $hits of $COUNT from the fleet tier ($tier)"

echo
echo "fleet benchmark: $(nproc) cores shared by the client, 3 nodes, redis-server and Garage $("$GARAGE" --version 2>/dev/null | head -n 1); ${SIZE}-byte bodies, $CONNECTIONS connections; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-44s %12s\n' "run" "req/s"
printf '%-44s %12s\n' "hits, fleet tier on (fleet-a)" "$(rps "$on")"
printf '%-44s %12s\n' "hits, fleet tier off (single)" "$(rps "$off")"
printf '%-44s %12s\n' "origin misses + publish (fleet-a)" "$(rps "$miss")"
printf '%-44s %12s\n' "fleet-tier hits: local miss (fleet-b)" "$(rps "$tier")"
echo "raw: on[$on] off[$off] miss[$miss] tier[$tier]"
