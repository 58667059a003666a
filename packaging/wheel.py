#!/usr/bin/env python3
"""Writes the crawlcache wheel around a binary that is already built.

    python3 packaging/wheel.py --binary target/debug/crawlcache --out DIR

The wheel has the layout maturin gives `bindings = "bin"` with
`python-source = "python"` (pyproject.toml): the Python package
`python/crawlcache` at the top, the binary as the script
`crawlcache-VERSION.data/scripts/crawlcache` (pip installs it on PATH),
and the metadata of pyproject.toml with the crate's version (Cargo.toml).
Its tag is `py3-none-linux_x86_64` (this machine's platform), which pip
installs here and which is not meant for an index: the published wheel is
maturin's (`packaging/release.sh --profile release`).

Why not maturin here: maturin always runs cargo, and the test command's
binary was built by `cargo test --workspace`, whose features (unified with
the dev-dependencies) differ from a `cargo build` of the binary alone, so
maturin would compile most of the tree a second time. This writes the
wheel from the binary the tests ran, in seconds. Prints the wheel's path.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import re
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Entries get this time stamp (as maturin's do): the same inputs give the same wheel.
EPOCH = (1980, 1, 1, 0, 0, 0)


def crate_version() -> str:
    """`version` of Cargo.toml's `[package]`."""
    manifest = tomllib.loads((ROOT / "Cargo.toml").read_text())
    return manifest["package"]["version"]


def metadata(project: dict, version: str) -> str:
    """Core metadata 2.1 (PEP 566) from pyproject.toml's `[project]`."""
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}", f"Summary: {project['description']}"]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    for extra, reqs in sorted(project.get("optional-dependencies", {}).items()):
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {r} ; extra == '{extra}'" for r in reqs]
    lines.append(f"Keywords: {','.join(project.get('keywords', []))}")
    lines.append(f"License: {project['license']['text']}")
    lines.append(f"Requires-Python: {project['requires-python']}")
    lines.append("Description-Content-Type: text/markdown; charset=UTF-8; variant=GFM")
    readme = (ROOT / project["readme"]).read_text()
    return "\n".join(lines) + "\n\n" + readme


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", required=True, type=Path, help="the built crawlcache binary")
    parser.add_argument("--out", required=True, type=Path, help="folder to write the wheel into")
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        parser.error(f"{args.binary} is not an executable file (build it first)")

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project, maturin = pyproject["project"], pyproject["tool"]["maturin"]
    version = crate_version()
    name = project["name"]
    package = ROOT / maturin["python-source"] / maturin["module-name"]
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    tag = f"py3-none-{platform}"
    dist_info, data = f"{name}-{version}.dist-info", f"{name}-{version}.data"
    args.out.mkdir(parents=True, exist_ok=True)
    wheel = args.out / f"{name}-{version}-{tag}.whl"
    records: list[str] = []

    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:

        def add(arcname: str, content: bytes, mode: int = 0o644) -> None:
            info = zipfile.ZipInfo(arcname, EPOCH)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, content)
            records.append(f"{arcname},{record_hash(content)},{len(content)}")

        for path in sorted(package.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                add(f"{maturin['module-name']}/{path.relative_to(package).as_posix()}", path.read_bytes())
        add(f"{data}/scripts/crawlcache", args.binary.read_bytes(), 0o755)
        add(f"{dist_info}/METADATA", metadata(project, version).encode())
        add(f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: crawlcache packaging/wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n".encode())
        add(f"{dist_info}/licenses/LICENSE", (ROOT / "LICENSE").read_bytes())
        record = f"{dist_info}/RECORD"
        info = zipfile.ZipInfo(record, EPOCH)
        info.external_attr = (0o100000 | 0o644) << 16
        zf.writestr(info, "\n".join(records + [f"{record},,"]) + "\n", compress_type=zipfile.ZIP_DEFLATED)
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
