#!/usr/bin/env bash
# The Scrapy benchmark: what a Scrapy user asks before adopting crawlcache.
# The same crawl (PAGES local pages of ~10 kB from a private nginx on
# 127.0.0.1, CONCURRENCY requests at once, Scrapy's HTTP/1.1 downloader)
# through the crawlcache add-on (crawlcache.scrapy, a proxy started for the
# crawl) and through Scrapy's own HttpCacheMiddleware with its filesystem
# and dbm storages: a first run filling the cache, ROUNDS re-runs, and an
# offline run with the origin stopped; and directly with no cache. Reports
# pages/s, origin requests, the cache's disk use, and CPU seconds.
#
#   bash benches/scrapy.sh                      # 3,000 pages, 32 concurrent
#   PAGES=1000 ROUNDS=2 bash benches/scrapy.sh
#   CRAWLCACHE_BIN=path/to/crawlcache bash benches/scrapy.sh
#
# Builds the release binary (cargo build --release) unless CRAWLCACHE_BIN
# names one; Scrapy comes from PyPI into target/python/bench-venv; the
# add-on is imported from python/ of this checkout. The work folder is
# target/bench-scrapy (the table in scrapy-bench.md there). Not part of
# the test command. Results: docs/performance.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
say() { echo "benches/scrapy.sh: $*" >&2; }

PAGES=${PAGES:-3000}
CONCURRENCY=${CONCURRENCY:-32}
ROUNDS=${ROUNDS:-1}
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
command -v nginx >/dev/null || { say "needs nginx (apt-get install nginx)"; exit 2; }

if [[ -z ${CRAWLCACHE_BIN:-} ]]; then
    say "cargo build --release ..."
    cargo build --release --quiet --bin crawlcache
    CRAWLCACHE_BIN=$PWD/target/release/crawlcache
fi
export CRAWLCACHE_BIN
say "binary: $CRAWLCACHE_BIN ($("$CRAWLCACHE_BIN" --version))"

venv=target/python/bench-venv
if [[ ! -x $venv/bin/scrapy ]]; then
    say "installing Scrapy (pip) into $venv ..."
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check 'scrapy>=2.10'
fi
say "Scrapy $("$venv/bin/python" -c 'import scrapy; print(scrapy.__version__)')"

work=target/bench-scrapy
rm -rf "$work"
mkdir -p "$work"
PYTHONPATH=$PWD/python "$venv/bin/python" benches/scrapy_bench.py --work "$work" --pages "$PAGES" --concurrency "$CONCURRENCY" --rounds "$ROUNDS"
say "table: $work/scrapy-bench.md"
