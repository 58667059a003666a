"""`crawlcache.client` and `crawlcache.serve`: real requests, httpx and
aiohttp clients through a proxy started from Python, over HTTP and through
the HTTPS interception; and the proxy's lifetime tied to the process that
started it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import crawlcache
import crawlcache.client
from conftest import CHILD_LIMIT, Origin, Site, proxy_config


def test_serve_listens_on_a_free_port_and_reports_it(tmp_path: Path) -> None:
    """`serve --listen 127.0.0.1:0 --print-address` prints the address the
    system chose; `proxy.addr` in the data directory says the same, and
    is removed when the proxy stops."""
    with crawlcache.serve(data_dir=tmp_path / "data") as proxy:
        assert proxy.url is not None and proxy.url.startswith("http://127.0.0.1:")
        port = int(proxy.url.rsplit(":", 1)[1])
        assert port != 0
        assert (tmp_path / "data" / "proxy.addr").read_text().strip() == f"127.0.0.1:{port}"
    assert not proxy.running()
    assert not (tmp_path / "data" / "proxy.addr").exists()


def test_health_answers_0_while_the_proxy_runs_and_1_after(tmp_path: Path) -> None:
    """`crawlcache health --addr` (the container's HEALTHCHECK): exit 0 while
    the proxy answers, 1 (not Docker's reserved 2) once it is gone."""
    with crawlcache.serve(data_dir=tmp_path / "data") as proxy:
        addr = proxy.url.removeprefix("http://")  # type: ignore[union-attr]
        up = subprocess.run([crawlcache.find_binary(), "health", "--addr", addr], capture_output=True, text=True, timeout=CHILD_LIMIT)
    down = subprocess.run([crawlcache.find_binary(), "health", "--addr", addr], capture_output=True, text=True, timeout=CHILD_LIMIT)
    assert up.returncode == 0, up.stderr
    assert f"crawlcache answers at {addr}" in up.stdout
    assert down.returncode == 1, (down.returncode, down.stderr)
    assert "unhealthy" in down.stderr


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_requests_session_twice_through_the_proxy(tmp_path: Path, site: Site, scheme: str, request: pytest.FixtureRequest) -> None:
    """`crawlcache.client.session(proxy)`: the first GET is stored, the second
    is a hit the origin never sees; over HTTPS it verifies against the
    proxy's CA bundle."""
    origin = request.getfixturevalue("tls_origin" if scheme == "https" else "origin")
    config = proxy_config(tmp_path, origin_ca=getattr(origin, "ca", None))
    with crawlcache.serve(data_dir=tmp_path / "data", config=config) as proxy:
        s = crawlcache.client.session(proxy)
        first = s.get(origin.url("/page/1"), timeout=30)
        second = s.get(origin.url("/page/1"), timeout=30)
    assert first.status_code == second.status_code == 200
    assert crawlcache.parse_cache_status(first.headers.get("Cache-Status")).outcome == "miss"  # type: ignore[union-attr]
    assert crawlcache.parse_cache_status(second.headers.get("Cache-Status")).outcome == "hit"  # type: ignore[union-attr]
    assert second.content == first.content
    assert site.origin_requests() == 1


def test_httpx_and_aiohttp_clients_through_the_proxy(tmp_path: Path, tls_origin: Origin, site: Site) -> None:
    """`httpx_client` then `aiohttp_session` fetch the same HTTPS page: one
    origin request, the second client's answer a hit."""
    config = proxy_config(tmp_path, origin_ca=tls_origin.ca)  # type: ignore[attr-defined]
    url = tls_origin.url("/page/2")
    with crawlcache.serve(data_dir=tmp_path / "data", config=config) as proxy:
        with crawlcache.client.httpx_client(proxy, timeout=30) as c:
            first = c.get(url)

        async def fetch() -> tuple[int, str, bytes]:
            async with crawlcache.client.aiohttp_session(proxy) as a:
                async with a.get(url) as r:
                    return r.status, r.headers.get("Cache-Status", ""), await r.read()

        status, cache_status, body = asyncio.run(fetch())
    assert first.status_code == 200 and status == 200
    assert crawlcache.parse_cache_status(first.headers.get("Cache-Status")).outcome == "miss"  # type: ignore[union-attr]
    assert crawlcache.parse_cache_status(cache_status).outcome == "hit"  # type: ignore[union-attr]
    assert body == first.content
    assert site.origin_requests() == 1


def test_offline_fixture_replays_without_the_origin(tmp_path: Path, site: Site) -> None:
    """A test suite's fixtures: recorded once online, then
    `crawlcache.serve(offline=True, data_dir=...)` replays them with the
    origin gone; a URL never recorded is the proxy's offline 504."""
    origin = Origin(site)
    url = origin.url("/page/5")
    with crawlcache.serve(data_dir=tmp_path / "fixtures") as proxy:
        assert crawlcache.client.session(proxy).get(url, timeout=30).status_code == 200
    origin.stop()
    with crawlcache.serve(data_dir=tmp_path / "fixtures", offline=True) as proxy:
        s = crawlcache.client.session(proxy)
        replayed = s.get(url, timeout=30)
        missing = s.get(url.replace("/page/5", "/page/6"), timeout=30)
    assert replayed.status_code == 200 and b"/page/5" in replayed.content
    assert missing.status_code == 504
    assert crawlcache.is_offline_miss(missing.status_code, crawlcache.parse_cache_status(missing.headers["Cache-Status"]))
    assert site.origin_requests() == 1


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie (exited, not reaped by its dead parent yet) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_the_proxy_stops_when_the_python_process_is_killed(tmp_path: Path) -> None:
    """A process that started a proxy is killed with SIGKILL (no cleanup
    runs): the proxy sees its standard input close and stops by itself."""
    script = (
        "import sys, crawlcache\n"
        "p = crawlcache.Proxy(sys.argv[1]).start()\n"
        "print(p.process.pid, p.url, flush=True)\n"
        "sys.stdin.read()\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "data")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()  # type: ignore[union-attr]
        pid = int(line.split()[0])
        assert not _gone(pid), "the proxy runs while its parent does"
        parent.send_signal(signal.SIGKILL)
        parent.wait(CHILD_LIMIT)
        deadline = time.monotonic() + 30
        while not _gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(pid), f"the proxy (pid {pid}) outlived the process that started it"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
