# syntax=docker/dockerfile:1
# crawlcache as a container image.
#
#   docker build -t crawlcache .
#   docker run -d --name crawlcache -p 3128:3128 -v crawlcache-data:/var/lib/crawlcache crawlcache
#
# Two stages: the first builds the release binary and its man pages with
# the Rust toolchain (BuildKit cache mounts keep the crates.io downloads
# and the compiled dependencies between builds); the second is Debian slim with the
# binary, the man pages and CA certificates only, run as the unprivileged user
# `crawlcache` (uid and gid 10001). Everything the proxy keeps (index, bodies,
# its certificate authority, audit logs) is in the volume
# /var/lib/crawlcache. The configuration is packaging/container.toml,
# laid over the built-in defaults: it listens on 0.0.0.0:3128 and serves
# clients from the private networks; mount your own file over
# /etc/crawlcache/crawlcache.toml to change that (and set
# server.admin_token to reach the admin endpoints from outside).

ARG RUST_VERSION=1
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src
COPY . .
# Cache mounts (BuildKit): the crates.io downloads and target/ (the
# compiled dependencies) survive between builds, so a change to the
# sources recompiles the workspace's crates only; the binary and man
# pages are copied out of target/ to /out.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin crawlcache \
    && mkdir -p /out/man \
    && target/release/crawlcache man --dir /out/man \
    && install -m 0755 target/release/crawlcache /out/crawlcache

FROM debian:${DEBIAN_RELEASE}-slim
# ca-certificates: origins' TLS certificates are verified against the
# system roots too (`crawlcache ca bundle`). The health check is the
# binary's own `crawlcache health`: no curl in the image.
# Versions are not pinned: they follow the Debian release's security updates.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 crawlcache \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/crawlcache --shell /usr/sbin/nologin crawlcache \
    && mkdir -p /var/lib/crawlcache /etc/crawlcache \
    && chown crawlcache:crawlcache /var/lib/crawlcache \
    && chmod 0700 /var/lib/crawlcache
COPY --from=build /out/crawlcache /usr/local/bin/crawlcache
COPY --from=build /out/man/ /usr/local/share/man/man1/
COPY packaging/container.toml /etc/crawlcache/crawlcache.toml
USER 10001:10001
WORKDIR /var/lib/crawlcache
VOLUME ["/var/lib/crawlcache"]
EXPOSE 3128
# Healthy while the proxy answers HTTP on its port (`crawlcache health`
# asks GET /stats on loopback and exits 0 on any HTTP answer: 200, or 403
# where the admin endpoints are closed without server.admin_token; 1
# otherwise).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/crawlcache", "health", "--config", "/etc/crawlcache/crawlcache.toml"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/crawlcache"]
CMD ["serve", "--config", "/etc/crawlcache/crawlcache.toml"]
