"""Revisit rules: Cache-Control floor (RFC 9111), lastmod, the change-rate interval, decisions."""

from __future__ import annotations

import email.utils

import pytest

from polite_crawler.policy.revisit import (
    Bounds,
    Decision,
    Known,
    decide,
    freshness,
    next_interval,
    parse_cache_control,
    parse_http_date,
    parse_lastmod,
)

T = 1_700_000_000.0


def _date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def test_parse_cache_control() -> None:
    assert parse_cache_control(None) == {}
    assert parse_cache_control('Max-Age=60, no-cache="set-cookie, x", PRIVATE, max-age=5') == {
        "max-age": "60", "no-cache": "set-cookie, x", "private": None}
    assert parse_cache_control(" , ,no-store,, ") == {"no-store": None}


@pytest.mark.parametrize(("headers", "fresh_until"), [
    ({"cache-control": "max-age=600"}, T + 600),
    ({"cache-control": "max-age=600", "age": "100"}, T + 500),
    ({"cache-control": "max-age=600", "date": _date(T - 200)}, T + 400),  # age from Date
    ({"cache-control": "max-age=60", "age": "100"}, None),  # stale on arrival
    ({"expires": _date(T + 300), "date": _date(T)}, T + 300),
    ({"expires": _date(T + 300)}, T + 300),  # no Date: from the fetch time
    ({"cache-control": "max-age=100", "expires": _date(T + 900)}, T + 100),  # max-age first
    ({"expires": "0"}, None),  # invalid Expires: already expired (RFC 9111 5.3)
    ({"cache-control": "no-cache, max-age=600"}, None),  # revalidate every time
    ({"cache-control": 'no-cache="set-cookie", max-age=600'}, T + 600),  # field-scoped only
    ({"cache-control": "max-age=-5"}, None),
    ({"cache-control": "max-age=\u00b2"}, None),  # not ASCII digits
    ({"cache-control": "max-age=" + "9" * 5000}, T + 2**31),  # too large: 2**31 (1.2.2)
    ({"cache-control": "max-age=60", "age": "\u00b2"}, T + 60),  # invalid Age ignored
    ({}, None),
])
def test_freshness_floor(headers: dict[str, str], fresh_until: float | None) -> None:
    f = freshness(headers, T)
    assert f.store and f.fresh_until == fresh_until


def test_no_store_keeps_nothing() -> None:
    f = freshness({"cache-control": "max-age=600, no-store", "expires": _date(T + 900)}, T)
    assert not f.store and f.fresh_until is None


def test_dates() -> None:
    assert parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777.0
    assert parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == 784111777.0  # RFC 850 form
    assert parse_http_date("garbage") is None and parse_http_date(None) is None
    assert parse_lastmod("2024-03-05") == 1709596800.0
    assert parse_lastmod("2024-03-05T10:00Z") == 1709632800.0
    assert parse_lastmod(12.5) == 12.5
    assert parse_lastmod("yesterday") is None and parse_lastmod("") is None


def test_interval_grows_without_change_and_shrinks_with_one() -> None:
    b = Bounds(default=100.0, minimum=30.0, maximum=400.0)
    seq = [b.next(None, None)]
    for _ in range(5):
        seq.append(b.next(seq[-1], False))
    assert seq == [100.0, 150.0, 225.0, 337.5, 400.0, 400.0]  # capped at the maximum
    down = [b.next(400.0, True)]
    for _ in range(4):
        down.append(b.next(down[-1], True))
    assert down == [200.0, 100.0, 50.0, 30.0, 30.0]  # floored at the minimum
    assert next_interval(0, False, default=100, minimum=30, maximum=400) == 100.0


def test_decisions() -> None:
    full = Known(fetched_at=T, due_at=T + 100, fresh_until=T + 50, has_copy=True,
                 has_validators=True)
    assert decide(None, T) is Decision.FETCH
    assert decide(full, T + 10) is Decision.FRESH
    assert decide(full, T + 60) is Decision.NOT_DUE
    assert decide(full, T + 100) is Decision.CONDITIONAL
    # recrawl=all overrides the interval, never the site's floor or its sitemap.
    assert decide(full, T + 60, force=True) is Decision.CONDITIONAL
    assert decide(full, T + 10, force=True) is Decision.FRESH
    assert decide(full, T + 60, lastmod=T - 1, force=True) is Decision.LASTMOD
    assert decide(full, T + 60, lastmod=T - 1) is Decision.LASTMOD
    assert decide(full, T + 60, lastmod=T + 1) is Decision.CONDITIONAL  # changed since
    assert decide(full, T + 500, lastmod=T) is Decision.LASTMOD  # due, but unchanged
    assert decide(full, T + 10, lastmod=T + 5) is Decision.FRESH  # the floor comes first
    no_validators = Known(T, T + 100, None, has_copy=True, has_validators=False)
    assert decide(no_validators, T + 100) is Decision.FETCH
    no_copy = Known(T, T + 100, None, has_copy=False, has_validators=True)  # no-store
    assert decide(no_copy, T + 100) is Decision.FETCH
    assert decide(no_copy, T + 10) is Decision.NOT_DUE
    # The site said no-store: no copy, but its validators still save the body (a 304).
    no_store = Known(T, T + 100, None, has_copy=False, has_validators=True, no_store=True)
    assert decide(no_store, T + 100) is Decision.CONDITIONAL
    assert decide(no_store, T + 10, force=True) is Decision.CONDITIONAL
    assert [d.requests for d in Decision] == [True, True, False, False, False]
