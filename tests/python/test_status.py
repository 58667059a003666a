"""`crawlcache.status`: the two fields the proxy adds, parsed, in the forms
the proxy sends (see docs/python.md) and with quoting."""

from __future__ import annotations

import pytest

from crawlcache.status import is_offline_miss, parse_cache_status, parse_robots_status


@pytest.mark.parametrize(
    "field, outcome",
    [
        ("crawlcache; hit; ttl=3599", "hit"),
        ("crawlcache; fwd=uri-miss; fwd-status=200; stored", "miss"),
        ("crawlcache; fwd=stale; fwd-status=304; ttl=3600", "revalidated"),
        # RFC 9211 2.2: a validation the request's no-cache made, of a fresh response.
        ("crawlcache; fwd=request; fwd-status=304; ttl=3600", "revalidated"),
        ("crawlcache; fwd=request; fwd-status=200; stored", "miss"),
        ("crawlcache; fwd=request; fwd-status=304; detail=request-body", "pass"),
        ("crawlcache; hit; ttl=-5; detail=stale-while-revalidate", "stale"),
        ("crawlcache; hit; ttl=3599; detail=offline", "hit"),
        ("crawlcache; fwd=miss; detail=offline", "refused"),
        ("crawlcache; fwd=bypass; detail=robots", "refused"),
        ("crawlcache; fwd=method; fwd-status=201", "pass"),
        ('Other; hit, crawlcache; fwd=uri-miss; fwd-status=200; key="a;b, c"', "miss"),
    ],
)
def test_cache_status_outcomes(field: str, outcome: str) -> None:
    status = parse_cache_status(field)
    assert status is not None and status.outcome == outcome, status


@pytest.mark.parametrize(
    "field, status, outcome",
    [
        # Issue 46: the proxy's own errors apart from its refusals.
        ("crawlcache; fwd=uri-miss; detail=upstream-error", 502, "error"),
        ("crawlcache; fwd=uri-miss; detail=upstream-error", 504, "error"),
        ("crawlcache; fwd=miss; detail=only-if-cached", 504, "refused"),
        ("crawlcache; fwd=miss; detail=offline", 504, "refused"),
        ("crawlcache; fwd=bypass; detail=robots", 403, "refused"),
        ("crawlcache", 503, "refused"),
        ("crawlcache", 500, "error"),
        ("crawlcache; fwd=uri-miss; fwd-status=500", 500, "miss"),
    ],
)
def test_cache_status_outcome_for_tells_errors_from_refusals(field: str, status: int, outcome: str) -> None:
    cache = parse_cache_status(field)
    assert cache is not None and cache.outcome_for(status) == outcome, cache


def test_cache_status_fields_quoted_or_not() -> None:
    quoted = parse_cache_status('crawlcache; fwd=uri-miss; fwd-status=200; key="http://a/?x=1;y"; stored')
    assert quoted is not None and quoted.key == "http://a/?x=1;y" and quoted.stored and quoted.fwd_status == 200
    assert parse_cache_status("other-cache; hit") is None
    assert parse_cache_status(None) is None


def test_the_offline_marker_is_the_proxys_own_504_only() -> None:
    assert is_offline_miss(504, parse_cache_status("crawlcache; fwd=miss; detail=offline"))
    assert not is_offline_miss(504, parse_cache_status("crawlcache; fwd=uri-miss; fwd-status=504; detail=no-store"))
    assert not is_offline_miss(200, parse_cache_status("crawlcache; hit; ttl=1; detail=offline"))


def test_robots_status() -> None:
    r = parse_robots_status('disallowed; rule="Disallow: /private/"; line=2; sha256="ab"; disposition=cached')
    assert r is not None and not r.allowed and r.rule == "Disallow: /private/" and r.line == 2 and r.disposition == "cached"
    a = parse_robots_status('allowed; sha256="ab"; disposition=offline')
    assert a is not None and a.allowed and a.rule is None
    assert parse_robots_status("garbage") is None
