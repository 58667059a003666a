"""Fixtures of the Python tests: local origins on 127.0.0.1 that count what
they are asked, a test PKI for an HTTPS origin, and a Scrapy crawl run in
a child process (Scrapy's reactor starts once per process).

These tests run from the virtual environment the wheel was installed into
(`tests/run.sh`); `crawlcache.find_binary()` must find the wheel's binary
there, or `$CRAWLCACHE_BIN`.
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import ssl
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator, Optional

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent

#: Bound of one child process (a crawl, a client script), in seconds.
CHILD_LIMIT = 120

#: Environment variables that would send a client elsewhere than the test says.
PROXY_VARS = (
    "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY",
    "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CRAWLCACHE_URL", "CRAWLCACHE_CA_BUNDLE",
    "CRAWLCACHE_DATA_DIR",
)  # fmt: skip


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA variable of the caller's environment leaks into a test."""
    for v in PROXY_VARS:
        monkeypatch.delenv(v, raising=False)


def page_body(path: str) -> bytes:
    """The HTML of a site page: ~1 kB, links to the next pages."""
    return (f"<html><head><title>{path}</title></head><body><h1>{path}</h1>" + "<p>crawlcache test page</p>" * 30 + "</body></html>").encode()


class Site:
    """What the origins serve, and what they were asked (per path).

    - ``/index``: links to ``/page/0`` .. ``/page/{pages-1}``, fresh an hour;
    - ``/page/N``: a page, fresh an hour, with an ``ETag`` (a conditional
      request with it gets 304);
    - ``/robots.txt``: ``Disallow: /private/``;
    - ``/private/...``: a page robots.txt disallows;
    - ``/origin-504``: the origin's own 504, never stored.
    """

    def __init__(self, pages: int = 20) -> None:
        self.pages = pages
        self.counts: Counter[str] = Counter()
        self.conditional: Counter[str] = Counter()
        self.lock = threading.Lock()

    def answer(self, path: str, request: http.server.BaseHTTPRequestHandler) -> tuple[int, dict, bytes]:
        with self.lock:
            self.counts[path] += 1
            if request.headers.get("If-None-Match"):
                self.conditional[path] += 1
        fresh = {"Cache-Control": "max-age=3600", "Content-Type": "text/html"}
        if path == "/robots.txt":
            return 200, {"Content-Type": "text/plain", "Cache-Control": "max-age=3600"}, b"User-agent: *\nDisallow: /private/\n"
        if path == "/index":
            links = "".join(f'<a href="/page/{i}">page {i}</a>\n' for i in range(self.pages))
            return 200, fresh, f"<html><body>{links}</body></html>".encode()
        if path.startswith("/page/") or path.startswith("/private/"):
            etag = '"v1"'
            if request.headers.get("If-None-Match") == etag:
                return 304, {"ETag": etag, "Cache-Control": "max-age=3600"}, b""
            return 200, {**fresh, "ETag": etag}, page_body(path)
        if path == "/origin-504":
            return 504, {"Cache-Control": "no-store", "Content-Type": "text/plain"}, b"the origin's own gateway timeout\n"
        return 404, {"Content-Type": "text/plain"}, b"not found\n"

    def origin_requests(self, prefix: str = "/") -> int:
        """How many requests reached the origin for paths starting with ``prefix``
        (robots.txt excluded unless asked for)."""
        with self.lock:
            return sum(n for p, n in self.counts.items() if p.startswith(prefix) and (p != "/robots.txt" or prefix == "/robots.txt"))


class Origin:
    """A threaded HTTP/1.1 origin on 127.0.0.1 (TLS when ``context`` is given)
    serving a :class:`Site`."""

    def __init__(self, site: Site, context: Optional[ssl.SSLContext] = None) -> None:
        self.site = site

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 (the library's name)
                status, headers, body = site.answer(self.path.split("?")[0], self)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.scheme = "https" if context is not None else "http"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, path: str) -> str:
        host = "localhost" if self.scheme == "https" else "127.0.0.1"
        return f"{self.scheme}://{host}:{self.port}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Site:
    return Site()


@pytest.fixture
def origin(site: Site) -> Iterator[Origin]:
    o = Origin(site)
    yield o
    o.stop()


def make_pki(directory: Path) -> tuple[Path, Path, Path]:
    """A test CA and a leaf for ``localhost`` and 127.0.0.1 signed by it;
    returns (ca.pem, leaf.pem, leaf.key)."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "crawlcache python tests origin CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem, leaf_pem, leaf_key = directory / "origin-ca.pem", directory / "origin.pem", directory / "origin.key"
    ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    leaf_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    leaf_key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca_pem, leaf_pem, leaf_key


@pytest.fixture
def tls_origin(site: Site, tmp_path: Path) -> Iterator[Origin]:
    """An HTTPS origin for ``localhost``; its CA is ``tls_origin.ca``."""
    ca, cert, key = make_pki(tmp_path)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    o = Origin(site, ctx)
    o.ca = ca  # type: ignore[attr-defined]
    yield o
    o.stop()


def proxy_config(tmp_path: Path, *, robots: str = "off", origin_ca: Optional[Path] = None) -> Path:
    """A configuration file for a test proxy: robots.txt ``robots`` mode,
    the origin's CA trusted upstream, two serving threads."""
    text = f'[server]\nthreads = 2\n\n[robots]\nmode = "{robots}"\n\n[upstream]\nresponse_timeout = "10s"\n'
    if origin_ca is not None:
        text += f"extra_ca_file = {json.dumps(str(origin_ca))}\n"
    path = tmp_path / "crawlcache.toml"
    path.write_text(text)
    return path


def run_crawl(tmp_path: Path, name: str, settings: dict, urls: list[str], follow: bool = False) -> dict:
    """Runs ``tests/python/spider.py`` in a child process and returns what it
    wrote: ``stats`` (Scrapy's), ``responses`` and ``errors`` (one record
    each), ``proxy`` (the proxy URL the requests went to)."""
    out = tmp_path / f"{name}.json"
    job = {"settings": settings, "urls": urls, "follow": follow, "out": str(out)}
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS}
    run = subprocess.run(
        [sys.executable, str(HERE / "spider.py"), json.dumps(job)], capture_output=True, text=True, timeout=CHILD_LIMIT, cwd=tmp_path, env=env
    )
    (tmp_path / f"{name}.log").write_text(run.stderr)
    assert run.returncode == 0, f"crawl {name} failed ({run.returncode}):\n{run.stderr[-4000:]}"
    assert out.exists(), f"crawl {name} wrote nothing:\n{run.stderr[-4000:]}"
    return json.loads(out.read_text())


@pytest.fixture
def crawl(tmp_path: Path) -> Callable[..., dict]:
    """``crawl(name, settings, urls, follow=False)``: see :func:`run_crawl`."""
    return lambda name, settings, urls, follow=False: run_crawl(tmp_path, name, settings, urls, follow)
