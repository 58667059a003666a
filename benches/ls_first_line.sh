#!/usr/bin/env bash
# Time to the first line of `crawlcache cache ls --host` over a store of
# 100,000 responses (issue 12 item 6; target: under 1 s), plus the time of
# the whole listing and its peak resident memory. Builds in the release
# profile (`cargo bench`), writes the store through the library into a
# temporary directory, and lists it three times.
#
#   bash benches/ls_first_line.sh                          # 100,000 responses
#   LS_BENCH_RESPONSES=1000000 bash benches/ls_first_line.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
exec cargo bench --bench ls_first_line
