"""The artefacts a user installs without compiling: the wheel (these tests
run from the virtual environment it was installed into) and the .deb
(unpacked into a temporary folder, never installed on the machine).

`tests/run.sh` builds both from its dev-profile build with
`packaging/release.sh --profile dev --no-build` and names the .deb in
`$CRAWLCACHE_TEST_DEB`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import crawlcache
from conftest import ROOT


def crate_version() -> str:
    """`version` of the root package in Cargo.toml."""
    text = (ROOT / "Cargo.toml").read_text()
    match = re.search(r'^\[package\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
    assert match, "Cargo.toml has a [package] version"
    return match.group(1)


def test_the_wheel_puts_crawlcache_on_path_with_the_crates_version(tmp_path: Path) -> None:
    """The binary is the wheel's, in the environment's scripts folder; it
    runs with a PATH holding that folder and the system's alone (no Rust
    toolchain), and says the crate's version, as does the package."""
    scripts = sysconfig.get_path("scripts")
    binary = crawlcache.find_binary()
    assert Path(binary).parent == Path(scripts), f"{binary} is the wheel's, in {scripts}"
    assert Path(sys.prefix) in Path(binary).parents, "installed into this virtual environment"
    env = {"PATH": f"{scripts}:/usr/bin:/bin", "HOME": str(tmp_path)}
    out = subprocess.run(["crawlcache", "--version"], capture_output=True, text=True, env=env, timeout=30, check=True).stdout
    assert out.strip() == f"crawlcache {crate_version()}"
    assert crawlcache.version() == crate_version()
    assert crawlcache.__version__ == crate_version()


def test_the_deb_unpacks_with_binary_unit_pages_completions_and_config(tmp_path: Path) -> None:
    """`dpkg-deb -x` of the .deb: the binary runs and says the crate's
    version; the systemd unit, man pages, shell completions and default
    configuration are where Debian looks for them."""
    deb = os.environ.get("CRAWLCACHE_TEST_DEB")
    if not deb:
        pytest.skip("CRAWLCACHE_TEST_DEB is not set (tests/run.sh builds the .deb and sets it)")
    if shutil.which("dpkg-deb") is None:
        pytest.skip("dpkg-deb is missing (not a Debian system)")
    info = subprocess.run(["dpkg-deb", "--field", deb, "Package", "Version", "Architecture"], capture_output=True, text=True, check=True).stdout
    assert "Package: crawlcache" in info and f"Version: {crate_version()}" in info, info
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", deb, str(root)], check=True, timeout=60)
    out = subprocess.run([str(root / "usr/bin/crawlcache"), "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert out.strip() == f"crawlcache {crate_version()}"
    for path in [
        "lib/systemd/system/crawlcache.service",
        "etc/crawlcache/crawlcache.toml",
        "usr/share/man/man1/crawlcache.1.gz",
        "usr/share/man/man1/crawlcache-serve.1.gz",
        "usr/share/bash-completion/completions/crawlcache",
        "usr/share/zsh/vendor-completions/_crawlcache",
        "usr/share/fish/vendor_completions.d/crawlcache.fish",
        "usr/share/doc/crawlcache/copyright",
    ]:
        assert (root / path).is_file(), f"{path} is in the .deb"
    unit = (root / "lib/systemd/system/crawlcache.service").read_text()
    assert "ExecStart=/usr/bin/crawlcache serve" in unit, unit
    conffiles = subprocess.run(["dpkg-deb", "--info", deb, "conffiles"], capture_output=True, text=True, check=True).stdout
    assert "/etc/crawlcache/crawlcache.toml" in conffiles
