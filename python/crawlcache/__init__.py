"""crawlcache: a caching forward proxy for web crawlers, from Python.

The wheel installs the ``crawlcache`` command (the proxy itself, a native
binary) and this package:

- :func:`serve` / :class:`Proxy`: start a proxy on a free loopback port
  for a script or a test suite, stopped when the block ends or this
  process dies;
- :mod:`crawlcache.client`: requests, httpx and aiohttp clients pointed at
  a proxy and trusting its CA, in one call;
- :mod:`crawlcache.scrapy`: the Scrapy add-on and downloader middleware;
- :mod:`crawlcache.status`: ``Cache-Status`` and ``Robots-Status`` parsed.

See docs/python.md in the source tree.
"""

from __future__ import annotations

from . import client, status
from .server import CrawlcacheError, Proxy, ca_bundle, find_binary, run, serve, version
from .status import CacheStatus, RobotsStatus, is_offline_miss, parse_cache_status, parse_robots_status

try:
    from importlib.metadata import version as _dist_version

    __version__: str = _dist_version("crawlcache")
except Exception:  # not installed as a distribution (a source checkout)
    __version__ = "0+unknown"

__all__ = [
    "CacheStatus",
    "CrawlcacheError",
    "Proxy",
    "RobotsStatus",
    "__version__",
    "ca_bundle",
    "client",
    "find_binary",
    "is_offline_miss",
    "parse_cache_status",
    "parse_robots_status",
    "run",
    "serve",
    "status",
    "version",
]
