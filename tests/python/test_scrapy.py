"""The Scrapy add-on (`crawlcache.scrapy`) in real crawls: Scrapy's
HTTP/1.1 downloader through a proxy the add-on starts for the crawl, to
local origins counting what reaches them.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

from conftest import Origin, Site, proxy_config

ADDON = {"crawlcache.scrapy.Addon": 500}


def addon_settings(data_dir: Path, config: Path, **more: object) -> dict:
    """The three lines of the README, plus the test's configuration file."""
    return {"ADDONS": ADDON, "CRAWLCACHE_DATA_DIR": str(data_dir), "CRAWLCACHE_CONFIG": str(config), **more}


def stat(result: dict, name: str) -> int:
    return int(result["stats"].get(name, 0))


def refused(url: str) -> bool:
    """Whether nothing listens at the proxy URL's address any more."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=2):
            return False
    except OSError:
        return True


def test_scrapy_addon_crawls_online_twice_then_offline(tmp_path: Path, origin: Origin, site: Site, crawl) -> None:
    """Run 1 stores every page (all misses); run 2 is all hits in Scrapy's
    stats with no new origin request; run 3, offline, is all hits again,
    and a URL never stored gets the proxy's offline 504 once: not retried,
    no origin request. Each run's proxy is started by the add-on on a free
    port and is gone when the crawl ends."""
    data, config = tmp_path / "data", proxy_config(tmp_path)
    settings = addon_settings(data, config)
    pages = site.pages + 1  # the index and its pages

    first = crawl("online-1", settings, [origin.url("/index")], follow=True)
    assert len(first["responses"]) == pages, first["errors"]
    assert stat(first, "crawlcache/miss") == pages, first["stats"]
    assert stat(first, "crawlcache/hit") == 0
    assert site.origin_requests() == pages
    assert len(first["proxy"]) == 1 and first["proxy"][0].startswith("http://127.0.0.1:")
    assert not first["proxy"][0].endswith(":0")
    assert refused(first["proxy"][0]), "the proxy the add-on started stopped with the crawl"

    second = crawl("online-2", settings, [origin.url("/index")], follow=True)
    assert len(second["responses"]) == pages
    assert stat(second, "crawlcache/hit") == pages, second["stats"]
    assert stat(second, "crawlcache/miss") == 0
    assert all(r["outcome"] == "hit" for r in second["responses"])
    assert site.origin_requests() == pages, "the second run sent nothing to the origin"

    never_stored = origin.url("/page/never-stored")
    offline = crawl("offline", {**settings, "CRAWLCACHE_OFFLINE": True}, [origin.url("/index"), never_stored], follow=True)
    assert stat(offline, "crawlcache/hit") == pages, offline["stats"]
    assert stat(offline, "crawlcache/offline_miss") == 1
    assert stat(offline, "downloader/response_status_count/504") == 1, "one 504, asked once"
    assert stat(offline, "retry/count") == 0, offline["stats"]
    assert [e["status"] for e in offline["errors"]] == [504]
    assert "detail=offline" in offline["errors"][0]["cache_status"]
    assert site.origin_requests() == pages, "the offline run sent nothing to the origin"


def test_scrapy_addon_still_retries_an_origins_504(tmp_path: Path, origin: Origin, site: Site, crawl) -> None:
    """The origin's own 504 (forwarded by the proxy, `fwd-status=504`) is
    retried by Scrapy as without the add-on: only the proxy's offline 504
    is exempt."""
    settings = addon_settings(tmp_path / "data", proxy_config(tmp_path), RETRY_TIMES=2)
    result = crawl("origin-504", settings, [origin.url("/origin-504")])
    assert stat(result, "retry/count") == 2, result["stats"]
    assert site.origin_requests("/origin-504") == 3
    assert stat(result, "crawlcache/offline_miss") == 0
    assert stat(result, "crawlcache/miss") == 3


def test_scrapy_addon_turns_a_robots_refusal_into_ignore_request(tmp_path: Path, origin: Origin, site: Site, crawl) -> None:
    """Under `robots.mode = "enforce"` the proxy refuses a disallowed URL
    (403, `Cache-Status: ...; detail=robots`); the add-on turns it into
    IgnoreRequest naming the rule and its line, counted in
    `crawlcache/robots_disallowed`, and the origin never sees the URL."""
    settings = addon_settings(tmp_path / "data", proxy_config(tmp_path, robots="enforce"))
    result = crawl("robots", settings, [origin.url("/private/secret"), origin.url("/page/1")])
    assert [r["url"] for r in result["responses"]] == [origin.url("/page/1")]
    assert stat(result, "crawlcache/robots_disallowed") == 1, result["stats"]
    assert len(result["errors"]) == 1, result["errors"]
    error = result["errors"][0]
    assert error["type"] == "IgnoreRequest"
    assert error["message"].endswith("/private/secret: Disallow: /private/ (line 2)"), error["message"]
    assert site.origin_requests("/private/") == 0
    assert (result["responses"][0]["robots_status"] or "").startswith("allowed"), result["responses"]


def test_scrapy_addon_revalidates_on_request(tmp_path: Path, origin: Origin, site: Site, crawl) -> None:
    """`meta={"crawlcache_revalidate": True}` makes the proxy ask the origin
    with its validator (`If-None-Match`) although the page is fresh; the
    304 counts in `crawlcache/revalidated`."""
    settings = addon_settings(tmp_path / "data", proxy_config(tmp_path))
    page = origin.url("/page/3")
    crawl("store", settings, [page])
    again = crawl("revalidate", settings, [page + "#revalidate"])
    assert stat(again, "crawlcache/revalidated") == 1, again["stats"]
    assert site.conditional["/page/3"] == 1
    assert again["responses"][0]["status"] == 200


def test_scrapy_addon_over_https_verifying_or_not(tmp_path: Path, tls_origin: Origin, site: Site, crawl) -> None:
    """HTTPS through the interception: with Scrapy's default (no
    verification) and with `DOWNLOAD_VERIFY_CERTIFICATES = True`, where
    the add-on makes the crawl trust the proxy's CA; the second run is all
    hits."""
    config = proxy_config(tmp_path, origin_ca=tls_origin.ca)  # type: ignore[attr-defined]
    settings = addon_settings(tmp_path / "data", config)
    urls = [tls_origin.url(f"/page/{i}") for i in range(3)]
    plain = crawl("https", settings, urls)
    assert sorted(r["status"] for r in plain["responses"]) == [200, 200, 200], plain["errors"]
    assert stat(plain, "crawlcache/miss") == 3
    verifying = crawl("https-verify", {**settings, "DOWNLOAD_VERIFY_CERTIFICATES": True}, urls)
    assert not verifying["errors"], verifying["errors"]
    assert stat(verifying, "crawlcache/hit") == 3, verifying["stats"]
    assert site.origin_requests() == 3


def test_scrapy_addon_verifying_refuses_an_unknown_ca(tmp_path: Path, tls_origin: Origin, crawl) -> None:
    """The verifying crawl checks certificates for real: given a bundle
    without the proxy's CA it fails the handshake (so the test above can
    fail)."""
    config = proxy_config(tmp_path, origin_ca=tls_origin.ca)  # type: ignore[attr-defined]
    settings = addon_settings(
        tmp_path / "data", config, DOWNLOAD_VERIFY_CERTIFICATES=True, CRAWLCACHE_CA_BUNDLE=str(tls_origin.ca), RETRY_ENABLED=False  # type: ignore[attr-defined]
    )
    result = crawl("https-wrong-ca", settings, [tls_origin.url("/page/1")])
    assert not result["responses"]
    assert len(result["errors"]) == 1 and result["errors"][0]["status"] is None, result["errors"]


def test_scrapy_addon_uses_a_running_proxy_by_url(tmp_path: Path, origin: Origin, site: Site, crawl) -> None:
    """`CRAWLCACHE_URL`: the crawl goes through a proxy that runs already
    (started here) and leaves it running; two crawls, the second all hits."""
    import crawlcache

    with crawlcache.serve(data_dir=tmp_path / "shared", config=proxy_config(tmp_path)) as proxy:
        settings = {"ADDONS": ADDON, "CRAWLCACHE_URL": proxy.url}
        urls = [origin.url(f"/page/{i}") for i in range(4)]
        first = crawl("url-1", settings, urls)
        second = crawl("url-2", settings, urls)
        assert proxy.running(), "the add-on does not stop a proxy it did not start"
    assert first["proxy"] == [proxy.url] and stat(first, "crawlcache/miss") == 4, first["stats"]
    assert stat(second, "crawlcache/hit") == 4, second["stats"]
    assert site.origin_requests() == 4
