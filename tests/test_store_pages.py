"""The page store on SQLite and on a real PostgreSQL server: round trip, migrations, batches."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from typing import Any

import psycopg
import pytest

from polite_crawler.backend import page_backend_factory as backend_factory
from polite_crawler.policy.revisit import Bounds
from polite_crawler.store.migrations import MIGRATIONS, Migration, current_version, migrate
from polite_crawler.store.pages import PageRecord, PageStore
from polite_crawler.store.sqlite import SQLitePageBackend
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)

BACKENDS = ["sqlite", "postgres"]
DB_ERRORS = (sqlite3.Error, psycopg.Error)


@pytest.fixture(params=BACKENDS)
def store_uri(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'polite.sqlite3'}"
    return str(request.getfixturevalue("pg_uri"))


def _store(uri: str, **kw: Any) -> PageStore:
    return PageStore(backend_factory(uri, ""), **kw)


def _rec(i: int, **kw: Any) -> PageRecord:
    url = f"http://127.0.0.1:8000/p/{i}"
    values: dict[str, Any] = {
        "canonical_url": url, "url": url + "?utm_source=x", "final_url": url, "status": 200,
        "fetched_at": 1_700_000_000.0 + i, "etag": f'W/"e{i}"',
        "last_modified": "Tue, 14 Nov 2023 22:13:20 GMT", "lastmod": "2023-11-14",
        "title": f"Page {i} \u2014 \u00fcn\u00efcode", "text": f"main text of page {i}\n\nsecond",
        "text_hash": f"{i:032x}", "simhash": (1 << 63) + i, "words": 40,
        "signals": {"ai_input": False, "search": True, "ai_train": None},
        "ai_input": False, "language": "en", "links": 7,
        "headers": {"content-type": "text/html", "etag": f'W/"e{i}"'},
        "body": b"<html>" + bytes(range(256)) * 20 + b"</html>", "fresh_until": 1_700_000_600.0,
        "revisit_interval": 86400.0, "due_at": 1_700_086_400.0,
    }
    values.update(kw)
    return PageRecord(**values)


def test_round_trip(store_uri: str) -> None:
    store = _store(store_uri)
    try:
        rec = _rec(1)
        store.save(rec, [("http://127.0.0.1:8000/old/1", "redirect")]).result()
        got = store.get(rec.canonical_url, body=True).result()
        assert got is not None
        for name in ("canonical_url", "url", "final_url", "status", "fetched_at", "etag",
                     "last_modified", "lastmod", "title", "text", "text_hash", "simhash", "words",
                     "signals", "ai_input", "language", "links", "headers", "body",
                     "fresh_until", "revisit_interval", "due_at"):
            assert getattr(got, name) == getattr(rec, name), name
        assert got.body_length == len(rec.body or b"")
        light = store.get(rec.canonical_url).result()
        assert light is not None and light.body is None and light.has_copy
        via_alias = store.get("http://127.0.0.1:8000/old/1").result()
        assert via_alias is not None and via_alias.canonical_url == rec.canonical_url
        store.flush().result()
        # The synchronous lookup (own connection) sees committed data.
        looked = store.lookup("http://127.0.0.1:8000/old/1", body=True)
        assert looked is not None and looked.body == rec.body
        # no-store: the copy is not kept.
        store.save(_rec(2, no_store=True)).result()
        two = store.get(_rec(2).canonical_url, body=True).result()
        assert two is not None and two.body is None and not two.has_copy
    finally:
        store.close()
    # Reopened: still there.
    again = _store(store_uri)
    try:
        assert again.call(lambda b: b.count()).result() == 2
        assert again.call(lambda b: b.count_aliases()).result() == 1
    finally:
        again.close()


def test_visits_and_revisit_interval(store_uri: str) -> None:
    bounds = Bounds(default=1000.0, minimum=100.0, maximum=10_000.0)
    store = _store(store_uri)
    try:
        r = _rec(1)
        assert store.record_visit(r, [], bounds).result() == "new"
        got = store.get(r.canonical_url).result()
        assert got is not None and got.revisit_interval == 1000.0
        assert got.due_at == r.fetched_at + 1000.0
        again = _rec(1, fetched_at=r.fetched_at + 10)
        assert store.record_visit(again, [], bounds).result() == "unchanged"
        assert store.get(r.canonical_url).result().revisit_interval == 1500.0  # type: ignore[union-attr]
        assert store.record_not_modified(r.canonical_url, fetched_at=r.fetched_at + 20,
                                         headers={"etag": '"new"'}, fresh_until=None,
                                         bounds=bounds).result()
        got = store.get(r.canonical_url, body=True).result()
        assert got is not None and got.revisit_interval == 2250.0 and got.etag == '"new"'
        assert got.visits == 3 and got.body == r.body and got.fetched_at == r.fetched_at + 20
        changed = _rec(1, fetched_at=r.fetched_at + 30, text_hash="f" * 32)
        assert store.record_visit(changed, [], bounds).result() == "changed"
        got = store.get(r.canonical_url).result()
        assert got is not None and got.revisit_interval == 1125.0 and got.changes == 1
        assert not store.record_not_modified("http://nowhere/", fetched_at=1.0, headers={},
                                             fresh_until=None, bounds=bounds).result()
        due = store.call(lambda b: b.due_urls("http://127.0.0.1:8000", got.due_at + 1)).result()
        assert due == [r.canonical_url]
        early = store.call(lambda b: b.due_urls("http://127.0.0.1:8000", got.due_at - 1)).result()
        assert early == []
    finally:
        store.close()


def test_dedupe_exact_and_near(store_uri: str) -> None:
    store = _store(store_uri)
    try:
        a = _rec(1, simhash=0xFFFF_0000_FFFF_0000)
        r = store.dedupe(a.canonical_url, a.text_hash, a.simhash, 40, 1.0).result()
        assert r.duplicate_of is None and r.near_duplicate_of is None
        # Claimed before it is written: a second URL with the same text is a duplicate already.
        r = store.dedupe("http://127.0.0.1:8000/copy", a.text_hash, a.simhash, 40, 1.0).result()
        assert r.duplicate_of == a.canonical_url
        store.save(a).result()
        near = 0xFFFF_0000_FFFF_0000 ^ 0b1011  # 3 bits away
        r = store.dedupe("http://127.0.0.1:8000/near", "ab" * 16, near, 40, 1.0).result()
        assert r.near_duplicate_of == a.canonical_url
        # A near duplicate of the near duplicate joins the first page's cluster.
        nearer = near ^ (0b111 << 20)
        r = store.dedupe("http://127.0.0.1:8000/nearer", "cd" * 16, nearer, 40, 1.0).result()
        assert r.near_duplicate_of == a.canonical_url
        # Too short to judge: no link.
        r = store.dedupe("http://127.0.0.1:8000/short", "ef" * 16, near, 5, 1.0).result()
        assert r.near_duplicate_of is None
        # A page is not a duplicate of itself when visited again.
        r = store.dedupe(a.canonical_url, a.text_hash, a.simhash, 40, 2.0).result()
        assert r.duplicate_of is None and r.near_duplicate_of is None
    finally:
        store.close()
    # The fingerprint index is rebuilt from the store on a new run.
    again = _store(store_uri)
    try:
        r = again.dedupe("http://127.0.0.1:8000/later", "12" * 16, 0xFFFF_0000_FFFF_0000 ^ 1, 40,
                         3.0).result()
        assert r.near_duplicate_of == a.canonical_url
    finally:
        again.close()


def test_failing_write_keeps_the_batch(store_uri: str) -> None:
    store = _store(store_uri, batch_size=100)
    try:
        store.save(_rec(1)).result()

        def bad(backend: Any) -> None:
            backend.execute("INSERT INTO no_such_table VALUES (1)")

        with pytest.raises(DB_ERRORS):
            store.call(bad, write=True).result()
        store.save(_rec(2)).result()
        store.flush().result()
        assert store.call(lambda b: b.count()).result() == 2
    finally:
        store.close()


def test_migrations_versioned_and_idempotent(tmp_path: Any) -> None:
    backend = SQLitePageBackend(str(tmp_path / "m.sqlite3"))
    try:
        assert backend.migrate() == [m.version for m in MIGRATIONS]
        assert backend.migrate() == []
        later = (*MIGRATIONS, Migration(99, "a later column",
                                        ("ALTER TABLE pages ADD COLUMN extra {FLOAT}",)))
        assert migrate(backend.execute, "sqlite", later) == [99]
        assert current_version(backend.execute) == 99
        backend.execute("SELECT extra FROM pages")
        # A failing migration leaves nothing half-applied.
        broken = (*later, Migration(100, "broken", ("ALTER TABLE pages ADD COLUMN x INTEGER",
                                                    "THIS IS NOT SQL")))
        with pytest.raises(sqlite3.Error):
            migrate(backend.execute, "sqlite", broken)
        assert current_version(backend.execute) == 99
        cols = [r[1] for r in backend.execute("PRAGMA table_info(pages)")]
        assert "x" not in cols
    finally:
        backend.close()


_WRITER = textwrap.dedent("""
    import sys
    from polite_crawler.backend import page_backend_factory as backend_factory
    from polite_crawler.store.pages import PageStore
    from tests.test_store_pages import _rec
    store = PageStore(backend_factory(sys.argv[1], ""), batch_size=10, flush_interval=3600,
                      idle_commit=False, on_commit=lambda n: print(n, flush=True))
    i = 0
    while True:
        store.save(_rec(i)).result()
        i += 1
""")


def test_kill_in_the_middle_of_a_batch_loses_nothing_committed(store_uri: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    child = subprocess.Popen([sys.executable, "-c", _WRITER, store_uri], stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert child.stdout is not None
        committed = 0
        while committed < 60:
            line = child.stdout.readline()
            assert line, "writer ended early"
            committed = int(line)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    store = _store(store_uri)
    try:
        urls = store.call(lambda b: [r.canonical_url for r in b.iter_pages()]).result()
        n = len(urls)
        assert n >= committed  # everything reported committed is there
        assert n % 10 == 0  # whole batches only: the one open at the kill is gone entirely
        assert urls == [_rec(i).canonical_url for i in range(n)]
        if store_uri.startswith("sqlite"):
            assert store.call(lambda b: b.execute("PRAGMA integrity_check")).result() == [("ok",)]
    finally:
        store.close()


def test_idle_store_commits_at_once_and_shares_the_file(tmp_path: Any) -> None:
    """With nothing more queued the batch is committed: another job's store (another
    connection to the same file) reads it and writes at once, never waiting a flush
    interval for the write lock."""
    uri = f"sqlite:///{tmp_path / 'polite.sqlite3'}"
    one = _store(uri, flush_interval=3600)
    two = _store(uri, flush_interval=3600)
    try:
        one.save(_rec(1)).result()
        one.call(lambda b: None).result()  # the job after the save: the commit is done
        assert two.lookup(_rec(1).canonical_url) is not None
        two.save(_rec(2)).result()
        two.call(lambda b: None).result()
        assert one.get(_rec(2).canonical_url).result() is not None
    finally:
        one.close()
        two.close()


def test_fetch_records_of_urls_that_are_not_pages(store_uri: str) -> None:
    """A sitemap or an alias keeps its own validators, freshness and copy."""
    from polite_crawler.store.pages import FetchRecord

    bounds = Bounds(default=1000.0, minimum=100.0, maximum=10_000.0)
    store = _store(store_uri)
    url = "http://127.0.0.1:8000/sitemap.xml"
    try:
        body = b"<urlset>" + bytes(range(256)) * 4 + b"</urlset>"
        rec = FetchRecord(url=url, kind="sitemap", status=200, final_url=url,
                          fetched_at=1_700_000_000.0, etag='"s1"', headers={
                              "etag": '"s1"', "content-encoding": "gzip"}, body=body,
                          fresh_until=1_700_000_600.0)
        assert store.record_fetch(rec, bounds).result() == "new"
        got = store.get_fetch(url, body=True).result()
        assert got is not None and got.body == body and got.body_length == len(body)
        assert got.etag == '"s1"' and got.headers["content-encoding"] == "gzip"
        assert got.due_at == 1_700_001_000.0 and got.fresh_until == 1_700_000_600.0
        assert store.get(url).result() is None  # not a page: never exported as one
        page, fetch = store.get_page_or_fetch(url).result()  # one trip, as requests ask
        assert page is None and fetch is not None and fetch.etag == '"s1"' and fetch.body is None
        assert store.get_page_or_fetch("http://127.0.0.1:8000/none").result() == (None, None)
        light = store.get_fetch(url).result()
        assert light is not None and light.body is None and light.has_copy
        assert store.record_fetch_not_modified(url, fetched_at=1_700_002_000.0,
                                               headers={"etag": '"s2"'}, fresh_until=None,
                                               bounds=bounds).result()
        got = store.get_fetch(url, body=True).result()
        assert got is not None and got.etag == '"s2"' and got.visits == 2
        assert got.revisit_interval == 1500.0 and got.body == body
        same = FetchRecord(url=url, kind="sitemap", status=200, final_url=url,
                           fetched_at=1_700_003_000.0, etag='"s2"', body=body)
        assert store.record_fetch(same, bounds).result() == "unchanged"
        other = FetchRecord(url=url, kind="sitemap", status=200, final_url=url,
                            fetched_at=1_700_004_000.0, body=body + b"x")
        assert store.record_fetch(other, bounds).result() == "changed"
        nostore = FetchRecord(url=url + "2", kind="duplicate", status=200, final_url=url,
                              fetched_at=1.0, etag='"n"', body=b"secret", no_store=True,
                              canonical_url="http://127.0.0.1:8000/p/1")
        store.record_fetch(nostore, bounds).result()
        got = store.get_fetch(url + "2", body=True).result()
        assert got is not None and got.body is None and got.no_store and got.has_validators
        assert not store.record_fetch_not_modified("http://nowhere/", fetched_at=1.0,
                                                   headers={}, fresh_until=None,
                                                   bounds=bounds).result()
    finally:
        store.close()
