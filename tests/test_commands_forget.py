"""``scrapy forget``: what it deletes, its list, its undo, and bad input."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import TYPE_CHECKING

import pytest

from polite_crawler.backend import page_backend_factory as backend_factory
from polite_crawler.frontier.store import OriginStore, QueueStore, process_owner
from polite_crawler.policy.rest import OriginState
from polite_crawler.store.optout import OptOutList
from polite_crawler.store.pages import PageRecord
from polite_crawler.store.robots import RobotsBook
from polite_crawler.store.sqlite import SQLitePageBackend
from polite_crawler.store.traps import TRAPS_DB, TrapBook
from tests.commands_util import scrapy, scrapy_json
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.robots_numbers import ROBOTS_NUMBERS

if TYPE_CHECKING:
    from pathlib import Path

A, B = "http://a.example", "http://b.example"


def page(url: str, **kw: object) -> PageRecord:
    return PageRecord(canonical_url=url, url=url, final_url=url, status=200,
                      fetched_at=time.time(), text=f"text of {url}", text_hash=url,
                      simhash=12345, words=100, revisit_interval=86400.0,
                      due_at=time.time() + 86400, **kw)  # type: ignore[arg-type]


def make_state(root: Path, store_uri: str = "") -> Path:
    state = root / "state"
    state.mkdir()
    backend = (backend_factory(store_uri, "")() if store_uri
               else SQLitePageBackend(str(state / "polite.sqlite3")))
    backend.migrate()
    backend.begin()
    for rec in (page(f"{A}/"), page(f"{A}/x"), page(f"{B}/"),
                page(f"{B}/copy", near_duplicate_of=f"{A}/x")):
        backend.put(rec)
    backend.add_alias(f"{A}/print/x", f"{A}/x", "duplicate", 1.0)
    backend.add_alias(f"{B}/mirror", f"{A}/", "duplicate", 1.0)
    backend.add_alias(f"{A}/old", f"{B}/", "redirect", 1.0)
    backend.add_alias(f"{B}/old", f"{B}/", "redirect", 1.0)
    backend.commit()
    backend.close()
    origins = OriginStore(state / "polite-origins.sqlite3", "test:1:x", "run")
    origins.save(OriginState(A, next_allowed=time.time() + 3), time.time())
    origins.close()
    book = RobotsBook(state / "polite-origins.sqlite3", "PoliteCrawler", **ROBOTS_NUMBERS)
    book.record_answer(A, 200, b"User-agent: *\nDisallow: /private\n")
    book.close()
    job = state / "jobs" / "site" / "j1"
    job.mkdir(parents=True)
    queue = QueueStore(job / "polite_frontier.sqlite3")
    for i in range(3):
        queue.push(A, 0, f"{A}/q{i}", b"x")
    queue.push(B, 0, f"{B}/q", b"x")
    queue.close()
    traps = TrapBook(state / TRAPS_DB, ttl=86400.0)
    traps.remember([f"{A}/cal?m=1", f"{A}/cal?m=2", f"{B}/cal?m=1"], "max_depth",
                   time.time()).result()
    traps.close()
    return state


def rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_forget_deletes_what_is_stored_of_the_origin_and_nothing_else(tmp_path):
    state = make_state(tmp_path)
    data = scrapy_json("forget", A, "--reason", "mail of 1 Dec", "--state-dir", str(state))
    store = data["removed"]["page_store"]
    assert (store["pages"], store["aliases"], store["near_duplicate_links"]) == (2, 3, 1)
    assert data["removed"]["robots_txt"] == 1
    (frontier, n), = data["removed"]["frontiers"].items()
    assert frontier.endswith("jobs/site/j1/polite_frontier.sqlite3") and n == 3
    db = state / "polite.sqlite3"
    assert rows(db, "SELECT canonical_url, near_duplicate_of FROM pages ORDER BY 1") == [
        (f"{B}/", None), (f"{B}/copy", None)]
    assert rows(db, "SELECT alias_url FROM page_aliases") == [(f"{B}/old",)]
    queue = state / "jobs/site/j1/polite_frontier.sqlite3"
    assert rows(queue, "SELECT origin FROM frontier_queue") == [(B,)]
    assert rows(state / "polite-origins.sqlite3",
                "SELECT origin FROM robots_txt") == []
    assert data["removed"]["trap_memory"] == 2
    assert rows(state / TRAPS_DB, "SELECT url FROM trap_pages") == [(f"{B}/cal?m=1",)]
    listed = scrapy_json("forget", "--list", "--state-dir", str(state))["optout"]
    assert [(e["origin"], e["reason"]) for e in listed] == [(A, "mail of 1 Dec")]
    # The removal is kept with the list's log line.
    log = OptOutList(state / "polite-origins.sqlite3").log(A)
    assert log[0]["action"] == "forget" and log[0]["removed"]["page_store"]["pages"] == 2


def test_a_job_that_does_not_acknowledge_keeps_everything_until_forced(tmp_path):
    state = make_state(tmp_path)
    optout = OptOutList(state / "polite-origins.sqlite3")
    late = process_owner()  # this test's own process: alive, and it never acknowledges
    optout.register(late, "site", None, 0, time.time())
    optout.close()
    done = scrapy("forget", A, "--wait", "0.3", "--json", "--state-dir", str(state))
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert [j["owner"] for j in data["not_acknowledged"]] == [late]
    assert data["removed"] is None
    db = state / "polite.sqlite3"
    assert len(rows(db, f"SELECT 1 FROM pages WHERE origin = '{A}'")) == 2
    assert rows(state / "polite-origins.sqlite3", "SELECT origin FROM robots_txt") == [(A,)]
    queue = state / "jobs/site/j1/polite_frontier.sqlite3"
    assert len(rows(queue, f"SELECT 1 FROM frontier_queue WHERE origin = '{A}'")) == 3
    text = scrapy("forget", A, "--wait", "0.1", "--state-dir", str(state)).stdout
    assert f"NOT acknowledged in time: site {late}" in text and "NOTHING DELETED" in text
    # The origin is on the list all the same: every job stops it at its next check.
    listed = scrapy_json("forget", "--list", "--state-dir", str(state))["optout"]
    assert [e["origin"] for e in listed] == [A]
    forced = scrapy("forget", A, "--wait", "0.1", "--force", "--state-dir", str(state))
    assert forced.returncode == 1
    assert "deleted anyway (--force)" in forced.stdout
    assert rows(db, f"SELECT 1 FROM pages WHERE origin = '{A}'") == []


def test_forget_text_says_what_was_removed(tmp_path):
    state = make_state(tmp_path)
    done = scrapy("forget", f"{A}/some/page", "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    assert f"forgot {A}" in done.stdout
    assert "2 pages deleted" in done.stdout and "3 queued URLs deleted" in done.stdout


def test_undo_takes_it_off_the_list(tmp_path):
    state = make_state(tmp_path)
    scrapy_json("forget", A, "--state-dir", str(state))
    undone = scrapy_json("forget", "--undo", A, "--state-dir", str(state))
    assert undone["undone"] is True
    assert scrapy_json("forget", "--list", "--state-dir", str(state))["optout"] == []
    again = scrapy("forget", "--undo", A, "--state-dir", str(state))
    assert again.returncode == 2
    assert "not on the opt-out list" in again.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["ftp://a.example"], "not an http(s) origin"),
    (["a.example"], "not an http(s) origin"),
    (["http://never.example"], "unknown here"),
    ([], "name one origin"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(tmp_path, args, words):
    state = make_state(tmp_path)
    before = rows(state / "polite.sqlite3", "SELECT COUNT(*) FROM pages")
    done = scrapy("forget", *args, "--state-dir", str(state))
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert rows(state / "polite.sqlite3", "SELECT COUNT(*) FROM pages") == before
    assert OptOutList(state / "polite-origins.sqlite3").entries() == {}


def test_missing_state_dir_is_exit_2(tmp_path):
    done = scrapy("forget", A, "--state-dir", str(tmp_path / "nowhere"))
    assert done.returncode == 2
    assert "no state directory" in done.stderr
    assert not (tmp_path / "nowhere").exists()


def test_locked_store_is_exit_2_and_nothing_changes(tmp_path):
    state = make_state(tmp_path)
    holder = sqlite3.connect(state / "polite-origins.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        done = scrapy("forget", A, "--state-dir", str(state), "--lock-timeout", "0.2")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 2
    assert "locked" in done.stderr and "nothing was changed" in done.stderr
    assert rows(state / "polite.sqlite3", "SELECT COUNT(*) FROM pages") == [(4,)]
    assert OptOutList(state / "polite-origins.sqlite3").entries() == {}


def test_locked_page_store_is_exit_2_and_the_list_is_unchanged(tmp_path):
    state = make_state(tmp_path)
    holder = sqlite3.connect(state / "polite.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        done = scrapy("forget", A, "--state-dir", str(state), "--lock-timeout", "0.2")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert done.returncode == 2, done.stdout
    assert "page store" in done.stderr
    assert OptOutList(state / "polite-origins.sqlite3").entries() == {}


def test_help_describes_the_command():
    done = scrapy("forget", "--help")
    assert done.returncode == 0
    assert "--undo" in done.stdout and "--json" in done.stdout and "--list" in done.stdout


def test_forget_deletes_from_a_postgresql_page_store(tmp_path, request):
    uri = str(request.getfixturevalue("pg_uri"))
    state = make_state(tmp_path, uri)
    data = scrapy_json("forget", A, "--state-dir", str(state), "-s", f"POLITE_STORE={uri}")
    store = data["removed"]["page_store"]
    assert store["where"] == "postgresql"
    assert (store["pages"], store["aliases"], store["near_duplicate_links"]) == (2, 3, 1)
    backend = backend_factory(uri, "")()
    try:
        assert backend.execute("SELECT canonical_url, near_duplicate_of FROM pages "
                               "ORDER BY 1") == [(f"{B}/", None), (f"{B}/copy", None)]
        assert backend.execute("SELECT alias_url FROM page_aliases") == [(f"{B}/old",)]
    finally:
        backend.close()
    explained = scrapy_json("explain", f"{B}/", "--state-dir", str(state),
                            "-s", f"POLITE_STORE={uri}")
    assert explained["store"]["stored"] is True
