#!/usr/bin/env bash
# The one test command: `bash tests/run.sh [cargo test args...]`.
#
# Installs what the integration tests drive (nginx, wget) when missing, then
# runs `cargo test` in the dev profile, passing any arguments through, e.g.
#   bash tests/run.sh --test crawl_e2e -- --nocapture
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# nginx lives in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx)
command -v wget >/dev/null 2>&1 || missing+=(wget)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# tests/fleet starts its own redis-server (and uses redis-cli, same package
# family) on loopback ports.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)

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
    for m in "${missing[@]}"; do
        command -v "$m" >/dev/null 2>&1 || { echo "tests/run.sh: $m still not found after installing" >&2; exit 1; }
    done
fi

# tests/https_proxy.rs drives Python requests through the proxy.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import requests' >/dev/null 2>&1; then
    echo "tests/run.sh: installing the Python module requests (pip) ..."
    python3 -m pip install --quiet requests ||
        echo "tests/run.sh: warning: pip install requests failed; tests/https_proxy.rs will fail." >&2
fi

# tests/record_replay/scrapy.rs crawls through the proxy with a Scrapy spider.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import scrapy' >/dev/null 2>&1; then
    echo "tests/run.sh: installing Scrapy (pip) ..."
    python3 -m pip install --quiet scrapy ||
        echo "tests/run.sh: warning: pip install scrapy failed; tests/record_replay will fail." >&2
fi

# tests/record_replay/warc.rs reads exported WARC files with Python warcio.
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import warcio' >/dev/null 2>&1; then
    echo "tests/run.sh: installing the Python module warcio (pip) ..."
    python3 -m pip install --quiet warcio ||
        echo "tests/run.sh: warning: pip install warcio failed; tests/record_replay (warc) will fail." >&2
fi

# tests/fleet runs an S3-compatible server: moto's, from PyPI (pure Python,
# installs in seconds; run as `python3 -m moto.server`).
if command -v python3 >/dev/null 2>&1 && ! python3 -c 'import moto.server, flask, werkzeug' >/dev/null 2>&1; then
    echo "tests/run.sh: installing moto[server] (pip) for the fleet tests ..."
    python3 -m pip install --quiet "moto[server]" ||
        echo "tests/run.sh: warning: pip install moto[server] failed; tests/fleet will fail." >&2
fi

# The end-to-end crawl serves the Rust book from the toolchain's rust-docs.
book="$(rustc --print sysroot)/share/doc/rust/html/book/index.html"
if [[ ! -f $book ]]; then
    echo "tests/run.sh: warning: $book is missing; tests/crawl_e2e.rs will fail." >&2
    echo "  Install it with: rustup component add rust-docs" >&2
fi

# --no-fail-fast: one failing test binary must not hide the others.
exec cargo test --no-fail-fast "$@"
