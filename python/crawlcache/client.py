"""HTTP clients pointed at a crawlcache proxy, in one call.

Each helper sets the proxy for ``http`` and ``https`` URLs and trusts the
proxy's interception CA (plus the system roots, so hosts the proxy
tunnels untouched still verify)::

    import crawlcache.client

    s = crawlcache.client.session()                       # requests
    c = crawlcache.client.httpx_client()                  # httpx (sync)
    async with crawlcache.client.aiohttp_session() as a:  # aiohttp
        ...

Which proxy: the ``proxy`` argument (a URL, or a :class:`crawlcache.Proxy`
this process started), else ``$CRAWLCACHE_URL``, else
``http://127.0.0.1:3128``. Which CA: ``ca_bundle`` (a PEM file), else the
proxy's own when it is a :class:`crawlcache.Proxy`, else
``$CRAWLCACHE_CA_BUNDLE``, else a bundle written from ``data_dir`` (or
``$CRAWLCACHE_DATA_DIR``) with ``crawlcache ca bundle``; with none of
those, the system store alone (enough when the CA was installed there with
``crawlcache ca install``).

The clients ignore the environment's proxy and CA variables
(``HTTPS_PROXY``, ``NO_PROXY``, ``REQUESTS_CA_BUNDLE``, ``SSL_CERT_FILE``):
requests and httpx would otherwise let them override what is set here.
"""

from __future__ import annotations

import os
import ssl
from typing import TYPE_CHECKING, Any, Optional, Union

from .server import Proxy, StrPath, ca_bundle as _write_bundle

if TYPE_CHECKING:  # pragma: no cover
    import aiohttp
    import httpx
    import requests

#: The proxy's built-in listening address.
DEFAULT_URL = "http://127.0.0.1:3128"

ProxyLike = Union[str, Proxy, None]


def proxy_url(proxy: ProxyLike = None) -> str:
    """The proxy URL for ``proxy``: its ``url`` for a :class:`Proxy`, the
    string itself, else ``$CRAWLCACHE_URL``, else :data:`DEFAULT_URL`."""
    if isinstance(proxy, Proxy):
        if proxy.url is None:
            raise ValueError(f"{proxy!r} is not started: call start() or use crawlcache.serve()")
        return proxy.url
    if proxy:
        return proxy
    return os.environ.get("CRAWLCACHE_URL") or DEFAULT_URL


def ca_bundle_for(proxy: ProxyLike = None, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None) -> Optional[str]:
    """The CA bundle clients of ``proxy`` should verify with (see the
    module's documentation for the order), or ``None`` for the system
    store."""
    if ca_bundle is not None:
        return os.fspath(ca_bundle)
    if isinstance(proxy, Proxy):
        return proxy.ca_bundle()
    env = os.environ.get("CRAWLCACHE_CA_BUNDLE")
    if env:
        return env
    data_dir = data_dir if data_dir is not None else os.environ.get("CRAWLCACHE_DATA_DIR")
    if data_dir is not None:
        return _write_bundle(data_dir)
    return None


def ssl_context(proxy: ProxyLike = None, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None) -> ssl.SSLContext:
    """A verifying :class:`ssl.SSLContext` that trusts what
    :func:`ca_bundle_for` returns (or the system store)."""
    bundle = ca_bundle_for(proxy, ca_bundle, data_dir)
    if bundle is None:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=bundle)


def session(proxy: ProxyLike = None, *, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None) -> "requests.Session":
    """A :class:`requests.Session` whose requests go through the proxy and
    verify HTTPS against its CA bundle (``trust_env`` is off: see the
    module's documentation)."""
    import requests

    url = proxy_url(proxy)
    s = requests.Session()
    s.trust_env = False
    s.proxies = {"http": url, "https": url}
    bundle = ca_bundle_for(proxy, ca_bundle, data_dir)
    if bundle is not None:
        s.verify = bundle
    return s


def httpx_client(proxy: ProxyLike = None, *, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None, **kwargs: Any) -> "httpx.Client":
    """An :class:`httpx.Client` through the proxy, verifying against its CA
    bundle; ``kwargs`` go to the client (``timeout``, ``headers``, ...)."""
    import httpx

    return httpx.Client(proxy=proxy_url(proxy), verify=ssl_context(proxy, ca_bundle, data_dir), trust_env=False, **kwargs)


def httpx_async_client(
    proxy: ProxyLike = None, *, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None, **kwargs: Any
) -> "httpx.AsyncClient":
    """The same as :func:`httpx_client`, as an :class:`httpx.AsyncClient`."""
    import httpx

    return httpx.AsyncClient(proxy=proxy_url(proxy), verify=ssl_context(proxy, ca_bundle, data_dir), trust_env=False, **kwargs)


def aiohttp_session(
    proxy: ProxyLike = None, *, ca_bundle: Optional[StrPath] = None, data_dir: Optional[StrPath] = None, **kwargs: Any
) -> "aiohttp.ClientSession":
    """An :class:`aiohttp.ClientSession` (aiohttp 3.10 or later) whose
    requests go through the proxy, verifying against its CA bundle. Call it
    inside a running event loop; ``kwargs`` go to the session."""
    import aiohttp

    connector = aiohttp.TCPConnector(ssl=ssl_context(proxy, ca_bundle, data_dir))
    return aiohttp.ClientSession(connector=connector, proxy=proxy_url(proxy), trust_env=False, **kwargs)
