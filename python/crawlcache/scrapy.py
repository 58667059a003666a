"""crawlcache for Scrapy: an add-on (Scrapy 2.10+) and the downloader
middleware it enables.

Three lines of settings::

    ADDONS = {"crawlcache.scrapy.Addon": 500}
    CRAWLCACHE_DATA_DIR = "crawlcache-data"   # a proxy started for the crawl's lifetime
    # or: CRAWLCACHE_URL = "http://127.0.0.1:3128"   # a proxy already running

Without add-ons (Scrapy before 2.10), enable the middleware itself::

    DOWNLOADER_MIDDLEWARES = {"crawlcache.scrapy.CrawlcacheMiddleware": 740}

What it does:

- Routes every request through the proxy (``request.meta["proxy"]``, read
  by Scrapy's own ``HttpProxyMiddleware``), HTTPS included: with
  ``DOWNLOAD_VERIFY_CERTIFICATES = True`` (or, before Scrapy 2.13,
  ``BrowserLikeContextFactory``) the crawl verifies against the
  system roots plus the proxy's CA (``SSL_CERT_FILE`` is set for the
  process to a bundle written by ``crawlcache ca bundle``).
- Puts the parsed ``Cache-Status`` and ``Robots-Status`` into
  ``response.meta["crawlcache_cache_status"]`` and
  ``response.meta["crawlcache_robots_status"]``
  (:class:`crawlcache.status.CacheStatus`, :class:`crawlcache.status.RobotsStatus`)
  and the class of the response into ``response.meta["crawlcache_outcome"]``,
  and counts each response in one of the stats ``crawlcache/hit``,
  ``crawlcache/stale``, ``crawlcache/revalidated``, ``crawlcache/miss``,
  ``crawlcache/pass``, ``crawlcache/refused`` or ``crawlcache/error`` (the
  proxy's own error, such as a 502 for an origin it cannot reach).
- Turns the proxy's robots.txt refusal (``robots.mode = "enforce"``) into
  :class:`scrapy.exceptions.IgnoreRequest` whose message names the rule and
  its line, counted in ``crawlcache/robots_disallowed``.
- Does not retry the proxy's own offline ``504`` (nothing stored for the
  URL: asking again cannot help), counted in ``crawlcache/offline_miss``;
  an origin's ``504`` is retried as usual.
- ``meta={"crawlcache_revalidate": True}`` sends ``Cache-Control:
  no-cache``: the proxy revalidates with the origin before answering.
  ``meta={"crawlcache_skip": True}`` (or a ``proxy`` already in ``meta``)
  leaves a request alone.

Settings: ``CRAWLCACHE_URL``; else a proxy is started with
``CRAWLCACHE_DATA_DIR`` (default ``crawlcache-data``),
``CRAWLCACHE_CONFIG`` (a TOML file), ``CRAWLCACHE_OFFLINE`` (bool) and
``CRAWLCACHE_ARGS`` (more ``serve`` arguments) on a free loopback port, and
stopped when the crawl ends (or the Python process dies).
``CRAWLCACHE_CA_BUNDLE`` names the bundle to verify with against a proxy
given by URL (default: written from ``CRAWLCACHE_DATA_DIR``, that proxy's
data directory, when given; else the system store).
``CRAWLCACHE_ENABLED = False`` turns it all off.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Optional, Union

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured

from .server import Proxy, ca_bundle
from .status import is_offline_miss, parse_cache_status, parse_robots_status

if TYPE_CHECKING:  # pragma: no cover
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

#: The middleware's priority: before ``HttpProxyMiddleware`` (750), which
#: reads ``meta["proxy"]``, so its ``process_response`` runs before
#: ``RetryMiddleware`` (550) and ``RedirectMiddleware`` (600) see a response.
PRIORITY = 740

#: The stats this middleware counts, each under ``crawlcache/``.
OUTCOMES = ("hit", "stale", "revalidated", "miss", "pass", "refused", "error")


class CrawlcacheMiddleware:
    """The downloader middleware (see the module's documentation)."""

    def __init__(self, crawler: "Crawler") -> None:
        settings = crawler.settings
        if not settings.getbool("CRAWLCACHE_ENABLED", True):
            raise NotConfigured("CRAWLCACHE_ENABLED is off")
        self.crawler = crawler
        self.stats = crawler.stats
        self.proxy: Optional[Proxy] = None
        data_dir = settings.get("CRAWLCACHE_DATA_DIR")
        url = settings.get("CRAWLCACHE_URL")
        if url:
            self.url: str = url
        else:
            args = settings.getlist("CRAWLCACHE_ARGS")
            offline, config = settings.getbool("CRAWLCACHE_OFFLINE"), settings.get("CRAWLCACHE_CONFIG")
            self.proxy = Proxy(data_dir or "crawlcache-data", offline=offline, config=config, args=args)
            self.proxy.start()
            self.url = self.proxy.url or ""
            logger.info("crawlcache: started a proxy at %s (data directory %s)", self.url, self.proxy.data_dir, extra={"crawler": crawler})
            crawler.signals.connect(self._stop_proxy, signal=signals.engine_stopped)
        if _verifies(settings):
            bundle = settings.get("CRAWLCACHE_CA_BUNDLE")
            if not bundle and self.proxy is not None:
                bundle = self.proxy.ca_bundle()
            elif not bundle and data_dir:
                bundle = ca_bundle(data_dir)
            if bundle:
                # OpenSSL (Twisted's and the ssl module's contexts alike)
                # reads SSL_CERT_FILE whenever a context loads the default roots.
                os.environ["SSL_CERT_FILE"] = os.fspath(bundle)
                logger.info("crawlcache: verifying certificates against %s (SSL_CERT_FILE)", bundle, extra={"crawler": crawler})
            else:
                logger.info(
                    "crawlcache: verifying certificates against the system store (set CRAWLCACHE_CA_BUNDLE or CRAWLCACHE_DATA_DIR "
                    "unless the proxy's CA was added to it with `crawlcache ca install`)",
                    extra={"crawler": crawler},
                )

    @classmethod
    def from_crawler(cls, crawler: "Crawler") -> "CrawlcacheMiddleware":
        """Scrapy's constructor hook."""
        return cls(crawler)

    def _stop_proxy(self) -> None:
        if self.proxy is not None:
            status = self.proxy.stop()
            logger.info("crawlcache: the proxy at %s stopped (exit status %s)", self.url, status, extra={"crawler": self.crawler})

    def process_request(self, request: "Request", spider: Optional["Spider"] = None) -> None:
        """Sends ``request`` through the proxy (unless ``crawlcache_skip`` or
        a ``proxy`` of its own); ``crawlcache_revalidate`` adds
        ``Cache-Control: no-cache``."""
        meta = request.meta
        if meta.get("crawlcache_skip") or "proxy" in meta:
            return None
        meta["proxy"] = self.url
        if meta.get("crawlcache_revalidate"):
            request.headers[b"Cache-Control"] = b"no-cache"
        return None

    def process_response(self, request: "Request", response: "Response", spider: Optional["Spider"] = None) -> "Response":
        """Reads ``Cache-Status`` and ``Robots-Status`` into ``meta`` and the
        stats; raises :class:`IgnoreRequest` for a robots refusal; marks
        the proxy's offline ``504`` ``dont_retry``."""
        if request.meta.get("proxy") != self.url:
            return response
        cache = parse_cache_status(response.headers.get(b"Cache-Status"))
        robots = parse_robots_status(response.headers.get(b"Robots-Status"))
        request.meta["crawlcache_cache_status"] = cache
        request.meta["crawlcache_robots_status"] = robots
        if cache is None:
            return response
        outcome = cache.outcome_for(response.status)
        request.meta["crawlcache_outcome"] = outcome
        self.stats.inc_value(f"crawlcache/{outcome}")
        if cache.detail == "robots" and outcome == "refused":
            self.stats.inc_value("crawlcache/robots_disallowed")
            raise IgnoreRequest(_refusal_reason(request.url, response.status, robots))
        if is_offline_miss(response.status, cache):
            self.stats.inc_value("crawlcache/offline_miss")
            request.meta["dont_retry"] = True
        return response


def _verifies(settings: "BaseSettings") -> bool:
    """Whether the crawl verifies certificates: ``DOWNLOAD_VERIFY_CERTIFICATES``
    (Scrapy 2.13+), or Twisted's browser-like context factory (before)."""
    factory = settings.get("DOWNLOADER_CLIENTCONTEXTFACTORY")
    return settings.getbool("DOWNLOAD_VERIFY_CERTIFICATES") or "BrowserLikeContextFactory" in str(getattr(factory, "__name__", factory) or "")


def _refusal_reason(url: str, status: int, robots: Any) -> str:
    if robots is not None and robots.rule is not None:
        line = f" (line {robots.line})" if robots.line is not None else ""
        return f"crawlcache: robots.txt disallows {url}: {robots.rule}{line}"
    return f"crawlcache: robots.txt disallows {url} (proxy answered {status})"


class Addon:
    """The Scrapy add-on: ``ADDONS = {"crawlcache.scrapy.Addon": 500}``.

    Enables :class:`CrawlcacheMiddleware` at priority 740 (see
    :data:`PRIORITY`); its settings are the middleware's.
    """

    def update_settings(self, settings: "BaseSettings") -> None:
        """Adds the middleware to ``DOWNLOADER_MIDDLEWARES``."""
        middlewares: Union[dict, Any] = settings["DOWNLOADER_MIDDLEWARES"]
        name = f"{CrawlcacheMiddleware.__module__}.{CrawlcacheMiddleware.__qualname__}"
        if name not in middlewares and CrawlcacheMiddleware not in middlewares:
            middlewares[name] = PRIORITY
