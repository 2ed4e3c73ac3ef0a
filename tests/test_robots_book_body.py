"""The robots.txt book keeps an origin's parsed rules, not its body: the store has the body."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from polite_crawler.store.robots import RobotsBook, SQLiteRobotsStore, read_robots_state
from tests.clock import Clock

if TYPE_CHECKING:
    from pathlib import Path

    from polite_crawler.records import RobotsState

ORIGIN = "http://127.0.0.2:8080"
DAY = 24 * 3600.0
ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 4\n"
NEWER = b"User-agent: *\nDisallow: /other\n"


@pytest.fixture
def clock() -> Clock:
    return Clock()


def make(db: Path | SQLiteRobotsStore, clock: Clock) -> RobotsBook:
    return RobotsBook(db, "PoliteCrawler", ttl=DAY, max_bytes=512 * 1024,
                      retry_min=60.0, retry_max=3600.0, clock=clock)


def stored_body(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        state = read_robots_state(conn, ORIGIN)
    assert state is not None
    return state.body


def test_the_body_is_let_go_once_parsed_and_stored(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite3"
    book = make(db, clock)
    book.record_answer(ORIGIN, 200, ROBOTS)
    assert not book.allowed(ORIGIN + "/private/a") and book.allowed(ORIGIN + "/a")
    assert book.state(ORIGIN).body == b""  # the rules only
    assert stored_body(db) == ROBOTS  # what `scrapy explain` and another job read
    # An outage over the copy writes the entry again: the body stays in the store.
    clock.t += DAY + 5
    book.record_failure(ORIGIN, "timeout")
    assert stored_body(db) == ROBOTS
    assert book.state(ORIGIN).body == b""
    assert not book.allowed(ORIGIN + "/private/a") and book.crawl_delay(ORIGIN) == 4
    book.record_failure(ORIGIN, "timeout")
    assert stored_body(db) == ROBOTS and book.state(ORIGIN).failures == 2
    book.close()
    again = make(db, clock)  # the last good copy across a restart, never allow-all
    assert again.ready(ORIGIN) and not again.allowed(ORIGIN + "/private/a")
    again.close()


def test_a_copy_read_from_the_store_is_let_go_once_parsed(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite3"
    make(db, clock).record_answer(ORIGIN, 200, ROBOTS)
    book = make(db, clock)
    assert not book.allowed(ORIGIN + "/private")
    assert book.state(ORIGIN).body == b""


def test_an_outage_after_another_job_fetched_keeps_that_copy(
        tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite3"
    book, other = make(db, clock), make(db, clock)
    book.record_answer(ORIGIN, 200, ROBOTS)
    assert not book.allowed(ORIGIN + "/private")
    clock.t += 1
    other.record_answer(ORIGIN, 200, NEWER)  # a newer copy, written by another job
    book.record_failure(ORIGIN, "timeout")
    # Neither copy lost: the store's (the newest) is kept whole and now judged here.
    assert stored_body(db) == NEWER
    assert book.allowed(ORIGIN + "/private") and not book.allowed(ORIGIN + "/other")
    assert book.state(ORIGIN).failures == 1


class _Failing(SQLiteRobotsStore):
    """The SQLite store made to fail on demand, as an unreachable Redis does."""

    errors = (ConnectionError,)
    down = False

    def load(self, origin: str) -> RobotsState | None:
        if self.down:
            raise ConnectionError("down")
        return super().load(origin)

    def save(self, state: RobotsState) -> None:
        if self.down:
            raise ConnectionError("down")
        super().save(state)


def test_a_body_the_store_has_not_taken_is_kept_until_it_has(
        tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite3"
    store = _Failing(db)
    book = make(store, clock)
    book.record_answer(ORIGIN, 200, ROBOTS)
    assert not book.allowed(ORIGIN + "/private")
    store.down = True  # an outage recorded while the store is down: nothing to read back
    clock.t += DAY + 5
    book.record_failure(ORIGIN, "timeout")
    assert not book.allowed(ORIGIN + "/private")
    store.down = False
    clock.t += 10
    book.close()  # the unsaved answer is written, with its body
    assert stored_body(db) == ROBOTS
    assert make(db, clock).state(ORIGIN).failures == 1
