"""A job's frontier database in canonical form 2: queue and seen set, on a real file."""

from __future__ import annotations

import pickle
from typing import TYPE_CHECKING

import pytest
from scrapy import Request

from polite_crawler.frontier.dupefilter import canonical_fingerprint
from polite_crawler.frontier.migrate import (
    CANONICAL_FORM,
    FrontierMigration,
    _fingerprint,
    migrate_frontier,
)
from polite_crawler.frontier.serialize import RequestCodec
from polite_crawler.frontier.store import QueueStore
from polite_crawler.policy.urls import canonicalize, origin_of
from polite_crawler.store.paths import connect

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from pathlib import Path

# Requests as the crawler queued them before canonical form 2 (URLs in canonical form 1).
V1_QUEUE = [
    # (origin column, priority, URL, method, body)
    ("http://example.org", 0, "http://example.org/show?article300=", "GET", b""),
    ("http://[::ffff:7f00:1]:8080", 0, "http://[::ffff:7f00:1]:8080/x", "GET", b""),
    ("http://example%2ecom", 0, "http://example%2ecom/a", "GET", b""),
    ("http://example.com", 5, "http://example.com/a", "GET", b""),  # the same request now
    ("http://example%2ecom", 0, "http://example%2ecom/form", "POST", b"q=1"),
    ("http://example.com", 0, "http://example.com/form", "POST", b"q=2"),  # another body
]
# Fetched before the upgrade: in the seen set only.
V1_FETCHED = "http://example.org/r?u=http%3A%2F%2Fx.example%2F"


def _v1_frontier(path: Path) -> None:
    store = QueueStore(path)
    codec = RequestCodec(None)
    for origin, prio, url, method, body in V1_QUEUE:
        meta = {"polite_robots_origin": origin, "polite_sitemap_scope": origin + "/",
                "polite_conditional": url, "other": url}
        request = Request(url, method=method, body=body, meta=meta)
        assert request.url == url
        store.push(origin, prio, url, codec.dumps(request))
        store.add_seen(_fingerprint(url, method, body))
    store.add_seen(_fingerprint(V1_FETCHED, "GET", b""))
    store.stop("http://[::ffff:7f00:1]:8080", "403")
    store.commit()
    # As version 1 left it: no canonical_form in frontier_meta.
    store.conn.execute("DELETE FROM frontier_meta WHERE key='canonical_form'")
    store.close()


def _migrate(path: Path, known_urls: Iterable[str] = ()) -> FrontierMigration | None:
    # Its own connection, as the frontier's open path makes one (QueueStore may migrate
    # by itself once it calls migrate_frontier).
    conn = connect(path)
    try:
        return migrate_frontier(conn, known_urls=known_urls)
    finally:
        conn.close()


def _queue(store: QueueStore) -> list[tuple[str, int, str, Request]]:
    codec = RequestCodec(None)
    rows = store.conn.execute("SELECT origin, prio, url, data FROM frontier_queue ORDER BY id")
    return [(o, p, u, codec.loads(d)) for o, p, u, d in rows]


def test_fingerprint_is_the_dupefilter_s() -> None:
    for url, method, body in [("http://example.org/a?b", "GET", b""),
                              ("http://example.org/f", "POST", b"x=1")]:
        assert _fingerprint(url, method, body) == canonical_fingerprint(
            Request(url, method=method, body=body))


def test_queue_is_rewritten_and_merged(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v1_frontier(path)
    result = _migrate(path, known_urls=[V1_FETCHED])
    assert result is not None
    assert (result.from_version, result.rewritten, result.merged) == (1, 3, 1)
    store = QueueStore(path)
    rows = _queue(store)
    assert [(o, p, u) for o, p, u, _ in rows] == [
        ("http://example.org", 0, "http://example.org/show?article300="),
        ("http://[::ffff:127.0.0.1]:8080", 0, "http://[::ffff:127.0.0.1]:8080/x"),
        # first in keeps its place, with the highest priority of the merged rows
        ("http://example.com", 5, "http://example.com/a"),
        ("http://example.com", 0, "http://example.com/form"),
        ("http://example.com", 0, "http://example.com/form"),
    ]
    # The serialised requests carry the new URLs (and their own method and body).
    assert [(r.url, r.method, r.body) for *_, r in rows] == [
        ("http://example.org/show?article300=", "GET", b""),
        ("http://[::ffff:127.0.0.1]:8080/x", "GET", b""),
        ("http://example.com/a", "GET", b""),
        ("http://example.com/form", "POST", b"q=1"),
        ("http://example.com/form", "POST", b"q=2"),
    ]
    # Meta naming a canonical URL or an origin follows; other meta is left alone.
    meta = rows[1][3].meta
    assert meta["polite_robots_origin"] == "http://[::ffff:127.0.0.1]:8080"
    assert meta["polite_sitemap_scope"] == "http://[::ffff:127.0.0.1]:8080/"
    assert meta["polite_conditional"] == "http://[::ffff:127.0.0.1]:8080/x"
    assert meta["other"] == "http://[::ffff:7f00:1]:8080/x"
    assert store.head("http://[::ffff:127.0.0.1]:8080") is not None
    assert store.stopped() == {"http://[::ffff:127.0.0.1]:8080": "403"}
    store.close()


def test_seen_set_knows_every_form_of_what_was_seen(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v1_frontier(path)
    _migrate(path, known_urls=[V1_FETCHED])
    store = QueueStore(path)
    for link in [
        "http://example.org/show?article300",     # the link form 1 stored with "="
        "http://example.org/show?article300=",
        "http://[::ffff:127.0.0.1]:8080/x",
        "http://example%2Ecom/a",
        "http://example.org/r?u=http://x.example/",  # fetched, not queued: known_urls
        "http://example.org/r?u=http%3A%2F%2Fx.example%2F",
    ]:
        assert store.is_seen(canonical_fingerprint(Request(link))), link
    assert store.is_seen(canonical_fingerprint(Request("http://example.com/form", method="POST",
                                                       body=b"q=1")))
    assert not store.is_seen(canonical_fingerprint(Request("http://example.org/never")))
    store.close()


def test_migration_runs_once_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v1_frontier(path)
    assert _migrate(path) is not None
    assert _migrate(path) is None
    again = QueueStore(path)
    assert migrate_frontier(again.conn) is None
    row = again.conn.execute("SELECT value FROM frontier_meta WHERE key='canonical_form'")
    assert row.fetchone() == (str(CANONICAL_FORM),)
    assert len(_queue(again)) == len(V1_QUEUE) - 1
    again.close()


def test_new_frontier_is_marked_current(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    QueueStore(path).close()
    result = _migrate(path)
    if result is not None:  # (None: QueueStore migrated it when it opened)
        assert (result.rewritten, result.merged, result.seen_added) == (0, 0, 0)
    assert _migrate(path) is None


def test_failing_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v1_frontier(path)
    conn = connect(path)
    before = conn.execute("SELECT id, origin, prio, url, data FROM frontier_queue").fetchall()

    def broken() -> Iterator[str]:
        yield V1_FETCHED
        raise RuntimeError("power cut")

    with pytest.raises(RuntimeError):
        migrate_frontier(conn, known_urls=broken())
    assert conn.execute("SELECT id, origin, prio, url, data FROM frontier_queue").fetchall() \
        == before
    assert conn.execute(
        "SELECT 1 FROM frontier_meta WHERE key='canonical_form'").fetchone() is None
    assert migrate_frontier(conn, known_urls=[V1_FETCHED]) is not None
    conn.close()


def test_opening_the_queue_migrates_it(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v1_frontier(path)
    store = QueueStore(path)
    try:
        assert store.head("http://[::ffff:127.0.0.1]:8080") is not None
        assert store.is_seen(canonical_fingerprint(Request("http://example.org/show?article300")))
    finally:
        store.close()


def test_not_a_frontier_database(tmp_path: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "other.sqlite3")
    with pytest.raises(ValueError, match="not a frontier database"):
        migrate_frontier(conn)
    conn.close()


def test_queue_data_is_a_request_dict() -> None:
    # The migration edits the serialised request's "url" in place: hold the format to that.
    data = RequestCodec(None).dumps(Request("http://example.org/a"))
    assert pickle.loads(data)["url"] == "http://example.org/a"


# --- canonical form 3 (international hosts) ----------------------------------------------

# Queued as form 2 wrote them (IDNA 2003 for hosts that are not ASCII).
V2_QUEUE = ["http://fass.de/a", "http://xn--bcher-kva.de/b", "http://example.org/show?article300"]


def _v2_frontier(path: Path) -> None:
    store = QueueStore(path)
    codec = RequestCodec(None)
    for url in V2_QUEUE:
        store.push(origin_of(url), 0, url, codec.dumps(Request(url)))
        store.add_seen(_fingerprint(url, "GET", b""))
    store.commit()
    store.conn.execute("UPDATE frontier_meta SET value='2' WHERE key='canonical_form'")
    store.close()


def test_form_2_frontier_opens_in_form_3(tmp_path: Path) -> None:
    path = tmp_path / "frontier.sqlite3"
    _v2_frontier(path)
    result = _migrate(path, known_urls=V2_QUEUE)
    assert result is not None
    assert (result.from_version, result.rewritten, result.merged, result.seen_added) == (
        2, 0, 0, 0)
    store = QueueStore(path)
    try:
        assert [u for *_, u, _r in _queue(store)] == V2_QUEUE
        row = store.conn.execute("SELECT value FROM frontier_meta WHERE key='canonical_form'")
        assert row.fetchone() == ("3",)
        # Form 1's lost spellings are not made up for a form 2 queue.
        assert not store.is_seen(_fingerprint("http://example.org/show?article300=", "GET", b""))
        # The queued fass.de request stays fass.de's; a link to faß.de is another URL now.
        assert store.is_seen(canonical_fingerprint(Request("http://fass.de/a")))
        # (Scrapy's Request would map the host by IDNA 2003 itself: the crawler builds
        # its requests from the canonical URL, policy.urls.)
        link = canonicalize("http://faß.de/a")
        assert link == "http://xn--fa-hia.de/a"
        assert not store.is_seen(canonical_fingerprint(Request(link)))
    finally:
        store.close()
    assert _migrate(path) is None
