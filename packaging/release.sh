#!/usr/bin/env bash
# Every release artefact from one command:
#
#   bash packaging/release.sh                 # release profile, into target/dist/
#   bash packaging/release.sh --verify-crates # the same, and `cargo package` builds each crate
#
# Writes into the output folder (default target/dist):
#   crawlcache-VERSION-x86_64-linux/crawlcache   the binary (release profile: no
#                                                debug info, stripped), with its man
#                                                pages and shell completions beside it
#   crawlcache-VERSION-*.whl                     the wheel: the binary and the Python
#                                                package (maturin, pyproject.toml)
#   crawlcache_VERSION_ARCH.deb                  the .deb: binary, systemd unit, man
#                                                pages, completions, default configuration
#   crates/*.crate                               `cargo package --workspace`
#   SHA256SUMS
#
# Options:
#   --profile P      cargo profile (release; `dev` for the test command's artefacts)
#   --no-build       package the binary already in target/ (the test command, after
#                    `cargo test` built it); the wheel is then written by
#                    packaging/wheel.py from that binary instead of by maturin,
#                    so nothing is compiled again
#   --out DIR        output folder
#   --verify-crates  `cargo package` without --no-verify: each crate is built from
#                    its packaged sources (several minutes); the default only packs
#   --no-crates      skip `cargo package`
#
# Needs: cargo; maturin for the release wheel (`pip install maturin`; the
# script installs it into target/python/build-venv when it is missing);
# dpkg-deb for the .deb (Debian's dpkg; skipped with a warning elsewhere).
# Nothing is published or installed on this machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

profile=release
build=1
out=target/dist
crates=--no-verify
while (($#)); do
    case $1 in
    --profile) profile=$2; shift 2 ;;
    --no-build) build=; shift ;;
    --out) out=$2; shift 2 ;;
    --verify-crates) crates=--verify; shift ;;
    --no-crates) crates=; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "packaging/release.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

say() { echo "packaging/release.sh: $*" >&2; }
version=$(sed -n '/^\[package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[[ -n $version ]] || { say "cannot read the version from Cargo.toml"; exit 1; }
profile_dir=$profile
[[ $profile == dev ]] && profile_dir=debug
target_dir=${CARGO_TARGET_DIR:-target}
bin=$target_dir/$profile_dir/crawlcache

if [[ -n $build ]]; then
    say "cargo build --profile $profile --locked --bin crawlcache ..."
    cargo build --profile "$profile" --locked --bin crawlcache
fi
[[ -x $bin ]] || { say "no binary at $bin (build it, or drop --no-build)"; exit 1; }

rm -rf "$out"
stage=$out/crawlcache-$version-$(uname -m)-linux
mkdir -p "$stage/man" "$stage/completions"

# The binary: the release profile's is already stripped; another profile's
# (the dev build the tests ran) loses its debug info here, a few seconds
# instead of hundreds of megabytes through the wheel and the .deb.
if [[ $profile == release ]]; then
    install -m 0755 "$bin" "$stage/crawlcache"
else
    strip --strip-debug -o "$stage/crawlcache" "$bin"
    chmod 0755 "$stage/crawlcache"
fi
"$stage/crawlcache" man --dir "$stage/man" >/dev/null
"$stage/crawlcache" completions bash >"$stage/completions/crawlcache.bash"
"$stage/crawlcache" completions zsh >"$stage/completions/_crawlcache"
"$stage/crawlcache" completions fish >"$stage/completions/crawlcache.fish"
say "binary: $stage/crawlcache ($(stat -c %s "$stage/crawlcache") bytes)"

# The wheel.
started=$SECONDS
if [[ -n $build && $profile == release ]]; then
    maturin=${MATURIN:-$(command -v maturin || true)}
    if [[ -z $maturin ]]; then
        say "installing maturin (pip) into target/python/build-venv ..."
        python3 -m venv target/python/build-venv
        target/python/build-venv/bin/pip install --quiet 'maturin>=1.5,<2'
        maturin=target/python/build-venv/bin/maturin
    fi
    # The same cargo build as above: maturin finds it up to date.
    "$maturin" build --release --locked --out "$out" >&2
else
    python3 packaging/wheel.py --binary "$stage/crawlcache" --out "$out" >/dev/null
fi
say "wheel: $(ls "$out"/*.whl) ($((SECONDS - started)) s)"

# The .deb: built as files in a folder, then `dpkg-deb --build`; no
# maintainer scripts (installing it starts nothing: `systemctl enable --now
# crawlcache` does).
if command -v dpkg-deb >/dev/null 2>&1; then
    arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
    root=$out/deb-root
    install -D -m 0755 "$stage/crawlcache" "$root/usr/bin/crawlcache"
    install -d "$root/lib/systemd/system" "$root/usr/share/man/man1" "$root/usr/share/doc/crawlcache" "$root/DEBIAN"
    sed -e 's|/usr/local/bin/crawlcache|/usr/bin/crawlcache|g' \
        -e 's|^#   install -m 0755 target/release/crawlcache .*|#   (installed by the crawlcache .deb: binary, man pages and this unit are in place)|' \
        packaging/crawlcache.service >"$root/lib/systemd/system/crawlcache.service"
    chmod 0644 "$root/lib/systemd/system/crawlcache.service"
    install -D -m 0644 packaging/crawlcache.toml "$root/etc/crawlcache/crawlcache.toml"
    for page in "$stage"/man/*.1; do
        gzip -9n <"$page" >"$root/usr/share/man/man1/$(basename "$page").gz"
    done
    chmod 0644 "$root"/usr/share/man/man1/*
    install -D -m 0644 "$stage/completions/crawlcache.bash" "$root/usr/share/bash-completion/completions/crawlcache"
    install -D -m 0644 "$stage/completions/_crawlcache" "$root/usr/share/zsh/vendor-completions/_crawlcache"
    install -D -m 0644 "$stage/completions/crawlcache.fish" "$root/usr/share/fish/vendor_completions.d/crawlcache.fish"
    {
        echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
        echo "Upstream-Name: crawlcache"
        echo
        echo "Files: *"
        echo "License: Apache-2.0"
        echo " On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0."
    } >"$root/usr/share/doc/crawlcache/copyright"
    echo /etc/crawlcache/crawlcache.toml >"$root/DEBIAN/conffiles"
    size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
    cat >"$root/DEBIAN/control" <<EOF
Package: crawlcache
Version: $version
Architecture: $arch
Maintainer: crawlcache developers <crawlcache@localhost>
Installed-Size: $size
Depends: libc6 (>= 2.34)
Recommends: ca-certificates
Section: web
Priority: optional
Description: caching forward proxy for web crawlers
 A local caching forward proxy for crawlers: RFC 9111 caching (HTTPS too,
 through a local CA), robots.txt per RFC 9309 checked for every request,
 offline re-runs and WARC export and import. The systemd unit
 crawlcache.service runs it with /etc/crawlcache/crawlcache.toml.
EOF
    dpkg-deb --root-owner-group -Zxz --build "$root" "$out/crawlcache_${version}_${arch}.deb" >/dev/null
    rm -rf "$root"
    say "deb: $out/crawlcache_${version}_${arch}.deb"
else
    say "warning: dpkg-deb not found; no .deb (apt-get install dpkg, or build on Debian)"
fi

# The crates, as crates.io would receive them (`cargo publish` is not run).
if [[ -n $crates ]]; then
    dirty=()
    [[ -n $(git status --porcelain 2>/dev/null || true) ]] && dirty=(--allow-dirty)
    cargo package --workspace --locked "$crates" "${dirty[@]}" >&2
    mkdir -p "$out/crates"
    cp "$target_dir"/package/crawlcache*-"$version".crate "$out/crates/"
    say "crates: $(ls "$out/crates" | tr '\n' ' ')"
fi

(cd "$out" && find . -maxdepth 2 -type f \( -name '*.whl' -o -name '*.deb' -o -name '*.crate' -o -path './crawlcache-*/crawlcache' \) -print0 |
    sort -z | xargs -0 sha256sum >SHA256SUMS)
say "done: $out"
