"""The durable robots.txt book: freshness, outages, retries, reopening."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from polite_crawler.policy.robots import ContentSignals, Outcome
from polite_crawler.store.robots import KIND_ALLOW_ALL, KIND_RULES, RobotsBook
from tests.clock import Clock

if TYPE_CHECKING:
    from pathlib import Path

ORIGIN = "http://127.0.0.2:8080"
DAY = 24 * 3600.0
ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 4\nSitemap: http://127.0.0.2:8080/s.xml\n"


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(tmp_path: Path, clock: Clock, **kw: float) -> RobotsBook:
    params = {"ttl": DAY, "max_bytes": 512 * 1024, "retry_min": 60.0, "retry_max": 3600.0, **kw}
    return RobotsBook(tmp_path / "state.sqlite3", "PoliteCrawler", clock=clock, **params)


def test_unknown_origin_needs_a_fetch_and_is_not_ready(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    assert book.needs_fetch(ORIGIN)
    assert not book.ready(ORIGIN)
    assert not book.allowed(ORIGIN + "/")
    assert book.retry_at(ORIGIN) == 0.0
    assert book.crawl_delay(ORIGIN) is None
    assert book.robots_url(ORIGIN) == ORIGIN + "/robots.txt"


def test_a_2xx_answer_is_fresh_for_24_hours_then_fetched_again(
    tmp_path: Path, clock: Clock
) -> None:
    book = make(tmp_path, clock)
    assert book.record_answer(ORIGIN, 200, ROBOTS) is Outcome.PARSE
    assert book.ready(ORIGIN)
    assert not book.needs_fetch(ORIGIN)
    assert book.allowed(ORIGIN + "/page")
    assert not book.allowed(ORIGIN + "/private/x")
    assert book.crawl_delay(ORIGIN) == 4
    assert book.sitemaps(ORIGIN) == ["http://127.0.0.2:8080/s.xml"]
    assert book.retry_at(ORIGIN) == clock.t + DAY
    clock.t += DAY - 1
    assert book.ready(ORIGIN) and not book.needs_fetch(ORIGIN)
    clock.t += 1  # 24 h: stale
    assert book.needs_fetch(ORIGIN)
    assert not book.ready(ORIGIN)  # content waits for the new copy
    assert not book.allowed(ORIGIN + "/page")
    # the site added a Disallow: it applies from the refresh on
    book.record_answer(ORIGIN, 200, b"User-agent: PoliteCrawler\nDisallow: /page\n")
    assert book.ready(ORIGIN)
    assert not book.allowed(ORIGIN + "/page")
    assert book.crawl_delay(ORIGIN) is None


def test_4xx_means_no_restrictions_and_is_cached_like_a_file(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    for status in (404, 410, 401, 403):
        assert book.record_answer(ORIGIN, status, b"<html>not found</html>") is Outcome.ALLOW_ALL
        assert book.state(ORIGIN).kind == KIND_ALLOW_ALL
        assert book.ready(ORIGIN) and book.allowed(ORIGIN + "/anything")
    clock.t += DAY
    assert book.needs_fetch(ORIGIN) and not book.ready(ORIGIN)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_outage_without_a_copy_fetches_nothing_and_retries_with_backoff(
    tmp_path: Path, clock: Clock, status: int
) -> None:
    book = make(tmp_path, clock)
    start = clock.t
    assert book.record_answer(ORIGIN, status, b"User-agent: *\nAllow: /\n") is Outcome.UNREACHABLE
    assert not book.ready(ORIGIN)  # never allow-all because of an outage
    assert not book.allowed(ORIGIN + "/")
    assert not book.needs_fetch(ORIGIN)  # inside its retry wait
    assert book.retry_at(ORIGIN) == start + 60
    clock.t = start + 60
    assert book.needs_fetch(ORIGIN)
    book.record_failure(ORIGIN, "connection refused")
    assert book.retry_at(ORIGIN) == clock.t + 120  # doubled
    assert book.state(ORIGIN).failures == 2
    assert book.state(ORIGIN).outage_since == start
    clock.t = book.retry_at(ORIGIN)
    book.record_answer(ORIGIN, 200, ROBOTS)
    state = book.state(ORIGIN)
    assert state.failures == 0 and state.outage_since is None and state.retry_at == 0
    assert book.ready(ORIGIN) and not book.allowed(ORIGIN + "/private")


def test_retry_after_of_a_429_is_honoured(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    book.record_answer(ORIGIN, 429, retry_after=900)
    assert book.retry_at(ORIGIN) == clock.t + 900


def test_outage_with_a_cached_copy_keeps_using_it(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    book.record_answer(ORIGIN, 200, ROBOTS)
    clock.t += DAY + 5
    assert book.needs_fetch(ORIGIN) and not book.ready(ORIGIN)
    book.record_failure(ORIGIN, "timeout")
    assert book.ready(ORIGIN)  # the last copy, stale, during the outage
    assert book.allowed(ORIGIN + "/page")
    assert not book.allowed(ORIGIN + "/private")
    assert book.crawl_delay(ORIGIN) == 4
    assert not book.needs_fetch(ORIGIN)
    clock.t = book.retry_at(ORIGIN)
    assert book.needs_fetch(ORIGIN)
    assert book.ready(ORIGIN)  # still the old copy while the retry is made
    book.record_answer(ORIGIN, 503)
    assert book.ready(ORIGIN) and book.state(ORIGIN).failures == 2
    # days of outage: the old copy stays in use, never allow-all
    clock.t += 30 * DAY
    assert book.ready(ORIGIN) and not book.allowed(ORIGIN + "/private")


def test_outage_after_a_4xx_keeps_no_restrictions(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    book.record_answer(ORIGIN, 404)
    clock.t += DAY
    book.record_failure(ORIGIN, "reset")
    assert book.ready(ORIGIN) and book.allowed(ORIGIN + "/x")


def test_durable_across_reopen(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    other = "https://example.org"
    book.record_answer(ORIGIN, 200, ROBOTS)
    book.record_failure(other, "dns")
    book.close()
    clock.t += 3600
    again = make(tmp_path, clock)
    assert again.ready(ORIGIN) and not again.needs_fetch(ORIGIN)
    assert not again.allowed(ORIGIN + "/private/a")
    assert again.crawl_delay(ORIGIN) == 4
    assert not again.ready(other)
    assert again.state(other).failures == 1
    assert again.retry_at(other) == clock.t - 3600 + 60
    assert again.needs_fetch(other)  # its retry wait has passed
    again.close()


def test_two_books_share_the_table(tmp_path: Path, clock: Clock) -> None:
    first = make(tmp_path, clock)
    second = make(tmp_path, clock)
    assert second.needs_fetch(ORIGIN)
    first.record_answer(ORIGIN, 200, ROBOTS)
    clock.t += 10  # past the reload interval: the other job's copy is seen
    assert not second.needs_fetch(ORIGIN)
    assert second.ready(ORIGIN)


def test_a_long_file_is_stored_cut(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    body = b"User-agent: *\nDisallow: /early\n" + b"#" * (3 * 1024 * 1024) + b"\nDisallow: /late\n"
    book.record_answer(ORIGIN, 200, body)
    state = book.state(ORIGIN)
    assert state.truncated and len(state.body) <= 512 * 1024
    assert not book.allowed(ORIGIN + "/early")
    assert book.allowed(ORIGIN + "/late")
    rules = book.rules(ORIGIN)
    assert rules is not None and rules.truncated


def test_redirect_in_progress_is_not_fetched_again(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    book.record_redirect(ORIGIN, "http://127.0.0.3:8080/robots.txt")
    assert not book.needs_fetch(ORIGIN)
    assert not book.ready(ORIGIN)
    assert book.retry_at(ORIGIN) == 0.0  # the answer may come any moment: check again soon
    book.record_answer(ORIGIN, 200, ROBOTS)
    assert book.ready(ORIGIN)
    # a hop that never comes back does not block the origin for ever
    book2 = make(tmp_path, clock)
    other = "http://127.0.0.9:8080"
    book2.record_redirect(other, "http://x/robots.txt")
    clock.t += 601
    assert book2.needs_fetch(other)


def test_content_signals_of_robots(tmp_path: Path, clock: Clock) -> None:
    book = make(tmp_path, clock)
    book.record_answer(ORIGIN, 200, b"User-agent: *\nContent-Signal: search=yes, ai-input=no\n")
    assert book.signals(ORIGIN + "/a") == ContentSignals(search=True, ai_input=False)
    assert book.state(ORIGIN).kind == KIND_RULES
