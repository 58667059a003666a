"""Reading the fields crawlcache adds to every response it answers.

``Cache-Status`` (RFC 9211) says what the cache did; its member named
``crawlcache`` looks like::

    crawlcache; hit; ttl=120
    crawlcache; fwd=uri-miss; fwd-status=200; ttl=300; stored
    crawlcache; fwd=stale; fwd-status=304; ttl=60
    crawlcache; fwd=miss; detail=offline          (the proxy's own offline 504)

``Robots-Status`` says what robots.txt (RFC 9309) decided::

    allowed; sha256="..."; disposition=cached
    disallowed; rule="/private/"; line=2; sha256="..."; disposition=fetched

These functions parse both into small records, and classify a response the
way the proxy's own metrics do (one class per response: ``hit``,
``stale``, ``revalidated``, ``miss``, ``pass``, ``refused`` or, with the
response's status, ``error``: :meth:`CacheStatus.outcome_for`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Union

#: The name of crawlcache's member in ``Cache-Status``.
CACHE_NAME = "crawlcache"

#: ``detail`` values of a response served stale (RFC 5861, RFC 9111 4.2.4).
STALE_DETAILS = frozenset({"stale-while-revalidate", "stale-if-error", "disconnected"})

#: ``detail`` values of the proxy's own answer when something failed
#: (``CacheStatus::outcome_for`` in the proxy).
FAILURE_DETAILS = frozenset({"upstream-error", "tls", "store-error"})

#: ``detail`` values of the proxy's own answer that declines by policy.
REFUSAL_DETAILS = frozenset({"only-if-cached", "offline", "robots", "loop"})


@dataclass(frozen=True)
class CacheStatus:
    """crawlcache's member of a ``Cache-Status`` field (RFC 9211 section 2).

    ``ttl`` is in seconds (negative when the stored response is stale);
    ``fwd_status`` is the status the origin answered when the request went
    forward. ``raw`` is the member as sent.
    """

    hit: bool = False
    fwd: Optional[str] = None
    fwd_status: Optional[int] = None
    ttl: Optional[int] = None
    stored: bool = False
    collapsed: bool = False
    key: Optional[str] = None
    detail: Optional[str] = None
    raw: str = ""

    @property
    def outcome(self) -> str:
        """The class this response counts in, as in the proxy's metrics.

        ``hit`` (served from the store, fresh, no origin contact),
        ``stale`` (served from the store stale), ``revalidated`` (the origin
        answered 304), ``miss`` (the origin's full response), ``pass`` (a
        method or request the cache does not serve), ``refused`` (answered
        by the proxy itself: a robots refusal, an offline miss, an error).
        """
        if self.hit:
            if self.fwd_status == 304:
                return "revalidated"
            if (self.ttl is not None and self.ttl < 0) or self.detail in STALE_DETAILS:
                return "stale"
            return "hit"
        # A request passed through for its body says fwd=request with
        # detail=request-body; fwd=request alone is a validation the
        # request's own directives made (RFC 9211 section 2.2).
        passed = self.fwd == "method" or (self.fwd == "request" and self.detail == "request-body")
        if self.fwd in ("stale", "request") and self.fwd_status == 304 and not passed:
            return "revalidated"
        if self.fwd_status is not None:
            if passed:
                return "pass"
            if self.detail in STALE_DETAILS:
                return "stale"
            return "miss"
        if self.fwd == "stale" and self.detail in STALE_DETAILS:
            return "stale"
        return "refused"

    def outcome_for(self, status: int) -> str:
        """:attr:`outcome` of a response with HTTP ``status``, with the
        proxy's own answers split as its metrics split them: ``refused``
        (declined by policy: robots.txt, ``only-if-cached`` or offline with
        nothing stored, overload) and ``error`` (something failed: an origin
        unreachable or timing out, TLS, the store, an internal error; any
        other 5xx of the proxy's own but 503)."""
        outcome = self.outcome
        if outcome != "refused":
            return outcome
        if self.detail in FAILURE_DETAILS:
            return "error"
        if self.detail in REFUSAL_DETAILS:
            return "refused"
        return "error" if status >= 500 and status != 503 else "refused"

    @property
    def offline(self) -> bool:
        """The proxy answered in offline mode (``detail=offline``)."""
        return self.detail == "offline"


@dataclass(frozen=True)
class RobotsStatus:
    """A ``Robots-Status`` field: the robots.txt verdict for one request.

    ``rule`` is the matching ``Allow``/``Disallow`` path pattern and
    ``line`` its line in robots.txt (both ``None`` when no rule matched);
    ``disposition`` says where the rules came from (``fetched``,
    ``cached``, ``stale-usable``, ``offline``, ...).
    """

    allowed: bool
    rule: Optional[str] = None
    line: Optional[int] = None
    sha256: Optional[str] = None
    disposition: Optional[str] = None
    raw: str = ""


def _split_params(member: str) -> list[tuple[str, Optional[str]]]:
    """Splits an RFC 8941 list member into ``(name, value)`` pairs, the item
    first (quoted strings unquoted; ``;`` inside quotes kept)."""
    if '"' not in member:
        # The common case (every Cache-Status of a hit or a miss), once per
        # response of a crawl: str.split instead of a walk per character.
        pairs = []
        for part in member.split(";"):
            name, eq, value = part.strip().partition("=")
            if name:
                pairs.append((name.strip(), value.strip() if eq else None))
        return pairs
    out: list[tuple[str, Optional[str]]] = []
    i, n = 0, len(member)
    while i < n:
        while i < n and member[i] in " \t;":
            i += 1
        start = i
        while i < n and member[i] not in "=;":
            i += 1
        name = member[start:i].strip()
        value: Optional[str] = None
        if i < n and member[i] == "=":
            i += 1
            if i < n and member[i] == '"':
                i += 1
                buf = []
                while i < n and member[i] != '"':
                    if member[i] == "\\" and i + 1 < n:
                        i += 1
                    buf.append(member[i])
                    i += 1
                i += 1
                value = "".join(buf)
            else:
                start = i
                while i < n and member[i] != ";":
                    i += 1
                value = member[start:i].strip()
        if name:
            out.append((name, value))
    return out


def _members(field: str) -> list[str]:
    """The members of an RFC 8941 list (commas inside quotes kept)."""
    if '"' not in field:
        return [m.strip() for m in field.split(",") if m.strip()]
    members, buf, quoted, escaped = [], [], False, False
    for ch in field:
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == "," and not quoted:
            members.append("".join(buf).strip())
            buf = []
            continue
        buf.append(ch)
    if buf:
        members.append("".join(buf).strip())
    return [m for m in members if m]


def _int(value: Optional[str]) -> Optional[int]:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_cache_status(field: Union[str, bytes, None]) -> Optional[CacheStatus]:
    """crawlcache's member of a ``Cache-Status`` field value, or ``None`` when
    the field is absent or names only other caches.

    A response that passed through several caches lists one member per
    cache (RFC 9211 section 2); the last member named ``crawlcache`` is
    used.
    """
    if field is None:
        return None
    if isinstance(field, bytes):
        field = field.decode("latin-1")
    found = None
    for member in _members(field):
        params = _split_params(member)
        if params and params[0][0].strip('"') == CACHE_NAME:
            found = (member, dict(params[1:]), {p for p, v in params[1:] if v is None})
    if found is None:
        return None
    member, values, flags = found
    return CacheStatus(
        hit="hit" in flags,
        fwd=values.get("fwd"),
        fwd_status=_int(values.get("fwd-status")),
        ttl=_int(values.get("ttl")),
        stored="stored" in flags,
        collapsed="collapsed" in flags,
        key=values.get("key"),
        detail=values.get("detail"),
        raw=member,
    )


def parse_robots_status(field: Union[str, bytes, None]) -> Optional[RobotsStatus]:
    """A ``Robots-Status`` field value as a record, or ``None`` when absent
    or not understood."""
    if field is None:
        return None
    if isinstance(field, bytes):
        field = field.decode("latin-1")
    params = _split_params(field)
    if not params or params[0][0] not in ("allowed", "disallowed"):
        return None
    values = dict(params[1:])
    return RobotsStatus(
        allowed=params[0][0] == "allowed",
        rule=values.get("rule"),
        line=_int(values.get("line")),
        sha256=values.get("sha256"),
        disposition=values.get("disposition"),
        raw=field,
    )


def is_offline_miss(status: int, cache_status: Optional[CacheStatus]) -> bool:
    """Whether a response is crawlcache's own offline ``504``: the proxy runs
    offline and nothing is stored or recorded for the request, so asking
    again cannot help. An origin's own ``504`` passed through the proxy
    carries ``fwd-status=504`` and no ``detail=offline``, and may be retried.
    """
    return status == 504 and cache_status is not None and cache_status.offline and cache_status.fwd_status is None


def field(headers: Mapping, name: str) -> Optional[str]:
    """The value of header field ``name`` from a mapping whose keys and values
    may be ``str`` or ``bytes`` (Scrapy's ``Headers``, ``requests``' and
    ``httpx``' case-insensitive mappings), or ``None``."""
    value = headers.get(name)
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = value[-1] if value else None
        if value is None:
            return None
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return str(value)
