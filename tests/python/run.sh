#!/usr/bin/env bash
# The Python side of the test command (run by tests/run.sh after `cargo
# test`; alone: `bash tests/python/run.sh [pytest args...]`).
#
# 1. Release artefacts from the dev-profile binary `cargo test` built
#    (packaging/release.sh --profile dev --no-build: nothing is compiled
#    again): the wheel, the .deb and the packaged crates, into
#    target/python/dist.
# 2. A fresh virtual environment, target/python/venv, with what the tests
#    drive from PyPI (Scrapy 2.10 or later, requests, httpx, aiohttp,
#    pytest) and the wheel.
# 3. `crawlcache --version` from that environment, with a PATH that has no
#    Rust toolchain, then pytest over tests/python.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

say() { echo "tests/python/run.sh: $*"; }
started=$SECONDS
python=${PYTHON:-python3}

if [[ ! -x target/debug/crawlcache ]]; then
    say "building target/debug/crawlcache (cargo build) ..."
    cargo build --bin crawlcache
fi

# Debian's own Python splits venv and ensurepip into python3-venv.
if ! "$python" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
        say "installing python3-venv (apt-get) ..."
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null ||
            { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
    else
        say "$python has no venv module: install python3-venv (apt-get install python3-venv)" >&2
        exit 1
    fi
fi

t=$SECONDS
bash packaging/release.sh --profile dev --no-build --out target/python/dist
wheel=$(ls target/python/dist/*.whl)
deb=$(ls target/python/dist/*.deb 2>/dev/null || true)
say "artefacts (wheel, .deb, crates) from the dev build in $((SECONDS - t)) s"

t=$SECONDS
rm -rf target/python/venv
"$python" -m venv target/python/venv
venv=$PWD/target/python/venv
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'scrapy>=2.10' 'requests>=2.28' 'httpx>=0.26' 'aiohttp>=3.10' 'pytest>=7' 'h2>=4.1' 'cryptography>=41'
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$wheel"
say "virtual environment with the wheel in $((SECONDS - t)) s"

# The installed command, found on a PATH with no cargo on it.
version=$(env -i PATH="$venv/bin:/usr/bin:/bin" HOME="${HOME:-/tmp}" crawlcache --version)
say "$venv/bin/crawlcache --version: $version"
[[ $(command -v "$venv/bin/crawlcache") == "$venv/bin/crawlcache" ]]

# pytest's summary ("N passed in S s") is the last line on success.
say "packaging and the environment took $((SECONDS - started)) s; pytest over tests/python ..."
status=0
CRAWLCACHE_TEST_DEB=$deb "$venv/bin/python" -m pytest -p no:cacheprovider -o addopts="" tests/python "$@" || status=$?
if ((status == 5)); then
    say "pytest collected no test: tests/python must hold tests" >&2
    status=1
fi
((status == 0)) || say "failed (pytest exit $status)" >&2
exit $status
