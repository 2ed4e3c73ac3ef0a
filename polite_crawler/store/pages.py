"""The page store: every page stored once, its validators, its copy, its revisit time.

One interface, two backends: SQLite (default, the shared state database, no
setup) and PostgreSQL (``POLITE_STORE=postgresql://...``), both through
:class:`SQLPageBackend` and versioned migrations (:mod:`.migrations`); which one a
crawl uses is :func:`polite_crawler.backend.backend_of`'s choice (``page_store``).

:class:`PageStore` is what the crawl uses: the backend lives on one thread of
its own, so the reactor thread never waits for disk or network; writes are
batched into one transaction (up to ``batch_size`` writes or ``flush_interval``
seconds, committed early when no more work is queued, so the write lock other
jobs share is held only while writes keep coming), and reads on that thread see
the writes not committed yet. A crash loses at most the open batch, never a
committed one. Each write runs under a
savepoint, so one failing write does not undo the others of its batch.

Lookups by canonical URL (what the conditional-request middleware and the
frontier need): :meth:`PageStore.get` (async, sees pending writes) and
:meth:`PageStore.lookup` (synchronous, committed data only, its own
connection; cheap on SQLite).
"""

from __future__ import annotations

import contextlib
import json
import logging
import pickle
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

import zstandard

from polite_crawler.closing import STORE_DOWN
from polite_crawler.policy.simhash import MIN_WORDS, SimHashIndex, from_signed, to_signed
from polite_crawler.policy.urls import origin_of
from polite_crawler.records import FetchRecord, PageRecord
from polite_crawler.store.migrations import migrate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from scrapy.crawler import Crawler

    from polite_crawler.policy.revisit import Bounds

logger = logging.getLogger(__name__)

T = TypeVar("T")

ZSTD_LEVEL = 3


_FETCH_COLUMNS = ["url", "origin", *(f.name for f in fields(FetchRecord) if f.name != "url")]
_FETCH_LIGHT = [c for c in _FETCH_COLUMNS if c != "body"]


def body_hash(body: bytes | None) -> str | None:
    import hashlib

    return None if body is None else hashlib.blake2b(body, digest_size=16).hexdigest()


_COLUMNS = [f.name for f in fields(PageRecord) if f.name != "id"]
_COLUMNS.insert(1, "origin")
_LIGHT = [c for c in _COLUMNS if c != "body"]  # every column but the copy


def _encode_row(rec: PageRecord, compress: Callable[[bytes], bytes]) -> tuple[Any, ...]:
    values: list[Any] = []
    for name in _COLUMNS:
        if name == "origin":
            values.append(origin_of(rec.canonical_url))
        elif name == "body":
            values.append(compress(rec.body) if rec.body is not None and not rec.no_store else None)
        elif name in ("signals", "headers"):
            values.append(json.dumps(getattr(rec, name), sort_keys=True))
        elif name == "simhash":
            values.append(None if rec.simhash is None else to_signed(rec.simhash))
        elif name in ("noindex", "ai_input", "no_store"):
            values.append(int(bool(getattr(rec, name))))
        elif name == "body_length":  # of the copy kept (0: none)
            kept = rec.body is not None and not rec.no_store
            values.append(len(rec.body or b"") if kept else 0 if rec.no_store else rec.body_length)
        else:
            values.append(getattr(rec, name))
    return tuple(values)


def _decode_row(names: Sequence[str], row: Sequence[Any],
                decompress: Callable[[bytes], bytes]) -> PageRecord:
    data: dict[str, Any] = {}
    for name, raw in zip(names, row, strict=True):
        value = raw
        if name == "origin":
            continue
        if name == "body":
            value = decompress(bytes(raw)) if raw is not None else None
        elif name in ("signals", "headers"):
            value = json.loads(raw) if raw else {}
        elif name == "simhash":
            value = None if raw is None else from_signed(int(raw))
        elif name in ("noindex", "ai_input", "no_store"):
            value = bool(raw)
        data[name] = value
    return PageRecord(**data)


class SQLPageBackend:
    """The page store's SQL, shared by both dialects (``?`` placeholders here).

    Not thread-safe: one thread uses one backend (see :class:`PageStore`).
    """

    dialect = "sqlite"

    def __init__(self) -> None:
        self._zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._zd = zstandard.ZstdDecompressor()
        self.in_transaction = False

    # --- dialect hooks -------------------------------------------------------
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        for row in rows:
            self.execute(sql, row)

    def close(self) -> None:
        raise NotImplementedError

    def begin_sql(self) -> str:
        return "BEGIN"

    def lost(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the connection to the database is gone (a server
        restarted or unreachable): the store reconnects and writes its batch again."""
        return False

    # --- transactions ----------------------------------------------------------
    def migrate(self) -> list[int]:
        return migrate(self.execute, self.dialect)

    def begin(self) -> None:
        if not self.in_transaction:
            self.execute(self.begin_sql())
            self.in_transaction = True

    def commit(self) -> None:
        if self.in_transaction:
            self.execute("COMMIT")
            self.in_transaction = False

    def rollback(self) -> None:
        if self.in_transaction:
            self.execute("ROLLBACK")
            self.in_transaction = False

    # --- helpers ---------------------------------------------------------------
    def _compress(self, data: bytes) -> bytes:
        return self._zc.compress(data)

    def _decompress(self, data: bytes) -> bytes:
        return self._zd.decompress(data)

    def _one(self, where: str, params: Sequence[Any], body: bool) -> PageRecord | None:
        names = ["id", *(_COLUMNS if body else _LIGHT)]
        rows = self.execute(f"SELECT {', '.join('p.' + n for n in names)} FROM pages p {where}",
                            params)
        if not rows:
            return None
        return _decode_row(names, rows[0], self._decompress)

    # --- reads -------------------------------------------------------------------
    def get(self, canonical_url: str, *, body: bool = False) -> PageRecord | None:
        return self._one("WHERE p.canonical_url = ?", (canonical_url,), body)

    def resolve(self, canonical_url: str, *, body: bool = False,
                follow: Sequence[str] | None = None) -> PageRecord | None:
        """The page stored under this canonical URL, or the one it is an alias of.

        ``follow`` limits the aliases followed to these reasons (None: all).
        """
        rec = self.get(canonical_url, body=body)
        if rec is not None or follow == ():
            return rec
        where = "WHERE a.alias_url = ?"
        params: list[Any] = [canonical_url]
        if follow is not None:
            where += f" AND a.reason IN ({', '.join('?' for _ in follow)})"
            params.extend(follow)
        return self._one(f"JOIN page_aliases a ON a.canonical_url = p.canonical_url {where}",
                         params, body)

    def alias_of(self, alias_url: str) -> tuple[str, str] | None:
        rows = self.execute("SELECT canonical_url, reason FROM page_aliases WHERE alias_url = ?",
                            (alias_url,))
        return (rows[0][0], rows[0][1]) if rows else None

    def first_with_text_hash(self, text_hash: str, exclude: str) -> str | None:
        rows = self.execute("SELECT canonical_url FROM pages WHERE text_hash = ? "
                            "AND canonical_url <> ? ORDER BY id LIMIT 1", (text_hash, exclude))
        return rows[0][0] if rows else None

    def fingerprints(self) -> Iterator[tuple[str, int, str | None]]:
        rows = self.execute("SELECT canonical_url, simhash, near_duplicate_of FROM pages "
                            "WHERE simhash IS NOT NULL AND words >= ? ORDER BY id", (MIN_WORDS,))
        for canonical, h, root in rows:
            yield canonical, from_signed(int(h)), root

    def due_urls(self, origin: str, now: float, limit: int = 1000) -> list[str]:
        rows = self.execute("SELECT canonical_url FROM pages WHERE origin = ? AND due_at <= ? "
                            "AND (fresh_until IS NULL OR fresh_until <= ?) ORDER BY due_at LIMIT ?",
                            (origin, now, now, limit))
        return [r[0] for r in rows]

    def iter_pages(self, batch: int = 500) -> Iterator[PageRecord]:
        """Every stored page (without its copy), in the order stored."""
        last = 0
        names = ["id", *_LIGHT]
        while True:
            rows = self.execute(f"SELECT {', '.join(names)} FROM pages WHERE id > ? "
                                "ORDER BY id LIMIT ?", (last, batch))
            if not rows:
                return
            for row in rows:
                rec = _decode_row(names, row, self._decompress)
                last = rec.id or last
                yield rec

    def count(self) -> int:
        return int(self.execute("SELECT COUNT(*) FROM pages")[0][0])

    def get_fetch(self, url: str, *, body: bool = False) -> FetchRecord | None:
        names = _FETCH_COLUMNS if body else _FETCH_LIGHT
        rows = self.execute(f"SELECT {', '.join(names)} FROM url_fetches WHERE url = ?", (url,))
        if not rows:
            return None
        data: dict[str, Any] = {}
        for name, raw in zip(names, rows[0], strict=True):
            if name == "origin":
                continue
            value = raw
            if name == "body":
                value = self._decompress(bytes(raw)) if raw is not None else None
            elif name == "headers":
                value = json.loads(raw) if raw else {}
            elif name == "no_store":
                value = bool(raw)
            data[name] = value
        return FetchRecord(**data)

    def put_fetch(self, rec: FetchRecord) -> None:
        values: list[Any] = []
        for name in _FETCH_COLUMNS:
            if name == "origin":
                values.append(origin_of(rec.url))
            elif name == "body":
                keep = rec.body is not None and not rec.no_store
                values.append(self._compress(rec.body) if keep and rec.body is not None else None)
            elif name == "body_length":
                values.append(len(rec.body) if rec.body is not None and not rec.no_store else 0)
            elif name == "headers":
                values.append(json.dumps(rec.headers, sort_keys=True))
            elif name == "no_store":
                values.append(int(rec.no_store))
            else:
                values.append(getattr(rec, name))
        updates = ", ".join(f"{c} = excluded.{c}" for c in _FETCH_COLUMNS if c != "url")
        self.execute(f"INSERT INTO url_fetches ({', '.join(_FETCH_COLUMNS)}) VALUES "
                     f"({', '.join('?' for _ in _FETCH_COLUMNS)}) "
                     f"ON CONFLICT (url) DO UPDATE SET {updates}", values)

    def fetch_revisited(self, url: str, *, fetched_at: float, headers: dict[str, str],
                        fresh_until: float | None, revisit_interval: float,
                        due_at: float) -> bool:
        rows = self.execute("SELECT etag, last_modified, headers FROM url_fetches WHERE url = ?",
                            (url,))
        if not rows:
            return False
        etag, lm, old = rows[0]
        merged = {**(json.loads(old) if old else {}), **headers}
        self.execute(
            "UPDATE url_fetches SET fetched_at = ?, headers = ?, etag = ?, last_modified = ?, "
            "fresh_until = ?, revisit_interval = ?, due_at = ?, visits = visits + 1 "
            "WHERE url = ?",
            (fetched_at, json.dumps(merged, sort_keys=True), headers.get("etag") or etag,
             headers.get("last-modified") or lm, fresh_until, revisit_interval, due_at, url))
        return True

    def count_fetches(self, kind: str | None = None) -> int:
        if kind is None:
            return int(self.execute("SELECT COUNT(*) FROM url_fetches")[0][0])
        return int(self.execute("SELECT COUNT(*) FROM url_fetches WHERE kind = ?",
                                (kind,))[0][0])

    def count_aliases(self) -> int:
        return int(self.execute("SELECT COUNT(*) FROM page_aliases")[0][0])

    # --- writes (inside a transaction: call begin() first) ---------------------------
    def put(self, rec: PageRecord) -> None:
        """Insert or replace the page stored under ``rec.canonical_url``."""
        cols = ", ".join(_COLUMNS)
        marks = ", ".join("?" for _ in _COLUMNS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS if c != "canonical_url")
        self.execute(f"INSERT INTO pages ({cols}) VALUES ({marks}) "
                     f"ON CONFLICT (canonical_url) DO UPDATE SET {updates}",
                     _encode_row(rec, self._compress))
        # A URL stored as a page of its own is no longer an alias of another.
        self.execute("DELETE FROM page_aliases WHERE alias_url = ?", (rec.canonical_url,))

    def revisited(self, canonical_url: str, *, fetched_at: float, headers: dict[str, str],
                  etag: str | None, last_modified: str | None, fresh_until: float | None,
                  revisit_interval: float, due_at: float) -> None:
        """A visit that found the stored copy current (304, or the same text)."""
        self.execute(
            "UPDATE pages SET fetched_at = ?, headers = ?, etag = ?, last_modified = ?, "
            "fresh_until = ?, revisit_interval = ?, due_at = ?, visits = visits + 1 "
            "WHERE canonical_url = ?",
            (fetched_at, json.dumps(headers, sort_keys=True), etag, last_modified, fresh_until,
             revisit_interval, due_at, canonical_url))

    def add_alias(self, alias_url: str, canonical_url: str, reason: str, seen_at: float) -> None:
        if alias_url == canonical_url:
            return
        self.execute("INSERT INTO page_aliases (alias_url, canonical_url, reason, seen_at) "
                     "VALUES (?, ?, ?, ?) ON CONFLICT (alias_url) DO UPDATE SET "
                     "canonical_url = excluded.canonical_url, reason = excluded.reason, "
                     "seen_at = excluded.seen_at", (alias_url, canonical_url, reason, seen_at))

    def delete(self, canonical_url: str) -> None:
        self.execute("DELETE FROM pages WHERE canonical_url = ?", (canonical_url,))


# --------------------------------------------------------------------------------------
# Near duplicates: the fingerprints of stored pages, searchable.


class NearDuplicates:
    """Stored pages' SimHashes and the first page of each one's cluster."""

    def __init__(self, max_distance: int) -> None:
        self.index = SimHashIndex(max_distance)
        self._urls: list[str] = []
        self._root: list[int] = []  # position of the first page of the cluster
        self._pos: dict[str, int] = {}

    def load(self, rows: Iterator[tuple[str, int, str | None]]) -> None:
        for canonical, h, root in rows:
            root_pos = self._pos.get(root) if root else None
            self._add(canonical, h, root_pos)

    def _add(self, canonical: str, h: int, root_pos: int | None) -> int:
        old = self._pos.get(canonical)
        if old is not None:
            self.index.remove(old)
        pos = self.index.add(h)
        self._urls.append(canonical)
        self._root.append(pos if root_pos is None else root_pos)
        self._pos[canonical] = pos
        return pos

    def link(self, canonical: str, h: int) -> str | None:
        """Add a page; returns the first page of the cluster it joins, or None."""
        own = self._pos.get(canonical)
        roots = {self._root[p] for p in self.index.near(h) if p != own}
        # The first page of the cluster: the earliest stored (not this page itself).
        roots = {r for r in roots if self._urls[r] != canonical}
        root_pos = min(roots) if roots else None
        self._add(canonical, h, root_pos)
        return self._urls[root_pos] if root_pos is not None else None

    def forget(self, canonical: str) -> None:
        pos = self._pos.pop(canonical, None)
        if pos is not None:
            self.index.remove(pos)

    def __len__(self) -> int:
        return len(self._pos)


@dataclass(frozen=True)
class DedupeResult:
    duplicate_of: str | None = None  # exact duplicate: an alias of this page now
    near_duplicate_of: str | None = None  # first page of its near-duplicate cluster


# --------------------------------------------------------------------------------------
# The store a crawl uses: one backend on one thread.

_STOP = object()


class PageStoreDown(RuntimeError):
    """The page store's database did not come back in time: the crawl stops."""


class PageStore:
    """A page backend on a thread of its own, with batched commits.

    ``call(fn, *args)`` runs ``fn(backend, *args)`` on the store thread and
    returns a :class:`concurrent.futures.Future`; ``write=True`` marks a write
    (run under a savepoint, counted toward the batch). :mod:`.aio` awaits these.
    """

    def __init__(self, factory: Callable[[], SQLPageBackend], *, batch_size: int = 200,
                 flush_interval: float = 1.0, idle_commit: bool = True, max_distance: int = 8,
                 reader_factory: Callable[[], SQLPageBackend] | None = None,
                 on_commit: Callable[[int], None] | None = None,
                 buffer: int = 2000, give_up: float = 300.0, spill: Path | None = None,
                 on_state: Callable[[str, str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.batch_size = max(1, batch_size)
        # A database that went away (see _recover): writes wait, at most ``buffer`` of
        # them (beyond it ``on_state("full", ...)``: the crawl pauses), retried for
        # ``give_up`` seconds; then ``on_state("down", reason)``, and every write not
        # made goes to the ``spill`` file, written at the next start.
        self.buffer = max(1, buffer)
        self.give_up = give_up
        self.spill = spill
        self.on_state = on_state
        self._sleep = sleep
        self.down: str | None = None  # why the store gave up
        self._full = False
        self._waiting = 0  # writes submitted and not finished
        self._batch: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []  # uncommitted
        self.stats: dict[str, int] = {}  # retried, spilled, lost
        self.flush_interval = flush_interval
        # Commit as soon as no more work is queued: the write lock (shared with other jobs
        # on the same state directory) is held only while writes keep coming.
        self.idle_commit = idle_commit
        self.max_distance = max_distance
        self.on_commit = on_commit
        self._factory = factory
        self._reader_factory = reader_factory or factory
        self._reader: SQLPageBackend | None = None
        self._reader_lock = threading.Lock()
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._pending = 0
        self._since = 0.0
        self._committed = 0
        self._near: NearDuplicates | None = None
        self._claims: dict[str, str] = {}  # text hash -> canonical URL, not written yet
        self._count_lock = threading.Lock()
        self._ready: Future[None] = Future()
        self._thread = threading.Thread(target=self._run, name="polite-page-store", daemon=True)
        self._closed = False
        self._thread.start()
        self._ready.result()  # open errors surface here

    # --- the store thread ------------------------------------------------------------
    def _run(self) -> None:
        try:
            backend = self._factory()
            backend.migrate()
            self._replay_spill(backend)
        except BaseException as exc:
            self._ready.set_exception(exc)
            return
        self._ready.set_result(None)
        self.backend = backend
        while True:
            timeout = None
            if self._pending:
                timeout = max(0.0, self._since + self.flush_interval - time.monotonic())
            try:
                job = self._jobs.get(timeout=timeout)
            except queue.Empty:
                self._commit(self.backend)
                continue
            if job is _STOP:
                break
            fn, args, write, future = job
            if not future.set_running_or_notify_cancel():
                self._finished(write)
                continue
            try:
                if self.down is not None:
                    if write:
                        self._spill_writes([(fn, args)])
                    raise PageStoreDown(self.down)
                result = self._attempt(fn, args, write)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)
            self._finished(write)
            if self._pending and (self._pending >= self.batch_size
                                  or time.monotonic() - self._since >= self.flush_interval
                                  or (self.idle_commit and self._jobs.empty())):
                self._commit(self.backend)
        self._commit(self.backend)
        if self.down is None:
            self.backend.close()

    def _apply(self, backend: SQLPageBackend, fn: Callable[..., Any], args: tuple[Any, ...],
               write: bool) -> Any:
        """Run one job; a write under a savepoint (one failing write leaves the others)."""
        if not write:
            return fn(backend, *args)
        backend.begin()
        mark = f"w{len(self._batch) % 2}"
        backend.execute(f"SAVEPOINT {mark}")
        try:
            result = fn(backend, *args)
        except BaseException:
            backend.execute(f"ROLLBACK TO SAVEPOINT {mark}")
            backend.execute(f"RELEASE SAVEPOINT {mark}")
            raise
        backend.execute(f"RELEASE SAVEPOINT {mark}")
        return result

    def _attempt(self, fn: Callable[..., Any], args: tuple[Any, ...], write: bool) -> Any:
        """One job; a lost connection is recovered (the open batch written again) and the
        job tried again, until the store gives up (PageStoreDown)."""
        while True:
            try:
                result = self._apply(self.backend, fn, args, write)
            except Exception as exc:
                if not self.backend.lost(exc):
                    raise
                self._recover(exc, [(fn, args)] if write else [])
                continue
            if write:
                self._batch.append((fn, args))
                if not self._pending:
                    self._since = time.monotonic()
                self._pending += 1
            return result

    def _recover(self, exc: BaseException,
                 current: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
        """Reconnect with backoff and write the open batch again. After ``give_up``
        seconds, give up: the batch, ``current`` and every write queued go to the spill
        file, every job queued fails, and PageStoreDown is raised."""
        started = time.monotonic()
        logger.error("The page store lost its database (%(e)s); the %(n)d writes of the "
                     "open batch and those that come are kept and written when it answers "
                     "(giving up after %(t)g s)",
                     {"e": str(exc).strip(), "n": len(self._batch), "t": self.give_up})
        self._signal("retrying", str(exc))
        delay = 0.1
        last: BaseException = exc
        while time.monotonic() - started < self.give_up:
            self._sleep(delay)
            delay = min(2 * delay, 2.0)
            with contextlib.suppress(Exception):  # already gone: nothing to close
                self.backend.close()
            try:
                backend = self._factory()
                for fn, args in self._batch:
                    self._apply(backend, fn, args, True)
            except Exception as again:
                last = again
                continue
            self.backend = backend
            self._count("retried", 1)
            logger.warning("The page store's database answers again after %(t).1f s; the "
                           "%(n)d writes of the open batch were written again",
                           {"t": time.monotonic() - started, "n": len(self._batch)})
            self._signal("ok", "")
            return
        self.down = (f"the page store's database did not answer for {self.give_up:g} s "
                     f"({str(last).strip()})")
        logger.error("Giving up on the page store: %(why)s", {"why": self.down})
        spilled = self._batch + current
        self._batch, self._pending = [], 0
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is _STOP:
                self._jobs.put(_STOP)
                break
            fn, args, write, future = job
            if write:
                spilled.append((fn, args))
            if future.set_running_or_notify_cancel():
                future.set_exception(PageStoreDown(self.down))
            self._finished(write)
        self._spill_writes(spilled)
        self._signal("down", self.down)
        raise PageStoreDown(self.down) from last

    def _count(self, what: str, n: int) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    # --- the spill file: writes the store could not make, made at its next start --------
    def _spill_writes(self, writes: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> None:
        if not writes:
            return
        if self.spill is None:
            self._count("lost", len(writes))
            logger.error("%(n)d page-store writes lost (no spill file to keep them in)",
                         {"n": len(writes)})
            return
        with self.spill.open("ab") as out:
            for fn, args in writes:
                pickle.dump((fn.__name__, args), out)
        self._count("spilled", len(writes))
        logger.error("%(n)d page-store writes kept in %(path)s (written when the store next "
                     "opens)", {"n": len(writes), "path": str(self.spill)})

    def _replay_spill(self, backend: SQLPageBackend) -> None:
        path = self.spill
        if path is None or not path.exists():
            return
        n = 0
        with path.open("rb") as src:
            while True:
                try:
                    name, args = pickle.load(src)  # this store's own file
                except EOFError:
                    break
                self._apply(backend, getattr(self, name), args, True)
                n += 1
        backend.commit()
        path.unlink()
        logger.warning("Wrote the %(n)d page-store writes a former run could not make "
                       "(%(path)s)", {"n": n, "path": str(path)})

    def _signal(self, state: str, why: str) -> None:
        if self.on_state is not None:
            self.on_state(state, why)

    def _finished(self, write: bool) -> None:
        if not write:
            return
        with self._count_lock:
            self._waiting -= 1
            calm = self._full and self._waiting <= self.buffer // 2
            if calm:
                self._full = False
        if calm:
            self._signal("room", "")

    def _commit(self, backend: SQLPageBackend) -> None:
        if not self._pending:
            return
        while True:
            try:
                backend.commit()
            except Exception as exc:
                if self.down is None and backend.lost(exc):
                    try:
                        self._recover(exc, [])
                    except PageStoreDown:
                        return
                    backend = self.backend
                    continue
                logger.exception("Page store commit failed; %(n)d writes lost",
                                 {"n": self._pending})
                backend.rollback()
                self._pending = 0
                self._batch = []
                return
            break
        self._committed += self._pending
        self._pending = 0
        self._batch = []
        if self.on_commit is not None:
            self.on_commit(self._committed)

    # --- submitting --------------------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: Any, write: bool = False) -> Future[T]:
        future: Future[T] = Future()
        if self._closed:
            future.set_exception(RuntimeError("page store closed"))
            return future
        if write:
            with self._count_lock:
                self._waiting += 1
                full = not self._full and self._waiting >= self.buffer
                if full:
                    self._full = True
            if full:
                self._signal("full", f"{self._waiting} page-store writes waiting")
        self._jobs.put((fn, args, write, future))
        return future

    def flush(self) -> Future[None]:
        """Commit the open batch now."""
        def _flush(backend: SQLPageBackend) -> None:
            self._commit(backend)
        return self.call(_flush)

    def close(self, timeout: float | None = 60.0) -> None:
        """Commit what is pending and stop the thread (blocks: call off the reactor or at exit)."""
        if self._closed:
            return
        self._closed = True
        self._jobs.put(_STOP)
        self._thread.join(timeout)
        with self._reader_lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    @property
    def committed(self) -> int:
        return self._committed

    # --- synchronous lookups (committed data; any thread) ----------------------------------
    def lookup(self, canonical_url: str, *, body: bool = False,
               follow: Sequence[str] | None = None) -> PageRecord | None:
        """The committed record for a canonical URL (or its alias target), on this thread."""
        with self._reader_lock:
            if self._reader is None:
                self._reader = self._reader_factory()
            return self._reader.resolve(canonical_url, body=body, follow=follow)

    # --- operations run on the store thread ----------------------------------------------
    def get(self, canonical_url: str, *, body: bool = False,
            follow: Sequence[str] | None = None) -> Future[PageRecord | None]:
        """The record of a canonical URL or of the page it is an alias of (see ``resolve``)."""
        return self.call(lambda b: b.resolve(canonical_url, body=body, follow=follow))

    def dedupe(self, canonical_url: str, text_hash: str | None, simhash: int | None,
               words: int, now: float) -> Future[DedupeResult]:
        return self.call(self._dedupe, canonical_url, text_hash, simhash, words, now, write=True)

    def _dedupe(self, backend: SQLPageBackend, canonical: str,  # noqa: PLR0917
                text_hash: str | None, simhash: int | None, words: int,
                now: float) -> DedupeResult:
        if text_hash:
            first = self._claims.get(text_hash)
            if first is None or first == canonical:
                first = backend.first_with_text_hash(text_hash, canonical)
            if first is not None and first != canonical:
                backend.add_alias(canonical, first, "duplicate", now)
                backend.delete(canonical)
                if self._near is not None:
                    self._near.forget(canonical)
                return DedupeResult(duplicate_of=first)
            self._claims[text_hash] = canonical
        if simhash is None or words < MIN_WORDS:
            return DedupeResult()
        if self._near is None:
            self._near = NearDuplicates(self.max_distance)
            self._near.load(backend.fingerprints())
        return DedupeResult(near_duplicate_of=self._near.link(canonical, simhash))

    def save(self, rec: PageRecord, aliases: Sequence[tuple[str, str]] = ()) -> Future[None]:
        """Store a page (and the URLs that are aliases of it: ``(url, reason)``)."""
        return self.call(self._save, rec, aliases, write=True)

    def _save(self, backend: SQLPageBackend, rec: PageRecord,
              aliases: Sequence[tuple[str, str]]) -> None:
        backend.put(rec)
        if rec.text_hash and self._claims.get(rec.text_hash) == rec.canonical_url:
            del self._claims[rec.text_hash]
        for url, reason in aliases:
            if url != rec.canonical_url:
                backend.add_alias(url, rec.canonical_url, reason, rec.fetched_at)

    def record_visit(self, rec: PageRecord, aliases: Sequence[tuple[str, str]],
                     bounds: Bounds) -> Future[str]:
        """Store a fetched page, its revisit interval following its change.

        Returns ``"new"``, ``"changed"`` or ``"unchanged"`` (same main text and title).
        """
        return self.call(self._record_visit, rec, aliases, bounds, write=True)

    def _record_visit(self, backend: SQLPageBackend, rec: PageRecord,
                      aliases: Sequence[tuple[str, str]], bounds: Bounds) -> str:
        old = backend.get(rec.canonical_url)
        changed: bool | None = None
        if old is not None:
            changed = (old.text_hash, old.title) != (rec.text_hash, rec.title)
            rec.visits = old.visits + 1
            rec.changes = old.changes + int(changed)
        rec.revisit_interval = bounds.next(old.revisit_interval if old else None, changed)
        rec.due_at = rec.fetched_at + rec.revisit_interval
        self._save(backend, rec, aliases)
        return "new" if changed is None else "changed" if changed else "unchanged"

    def record_not_modified(self, canonical_url: str, *, fetched_at: float,
                            headers: dict[str, str], fresh_until: float | None,
                            bounds: Bounds) -> Future[bool]:
        """A 304 for a stored page: a visit that found no change. False if nothing is stored."""
        return self.call(self._record_not_modified, canonical_url, fetched_at, headers,
                         fresh_until, bounds, write=True)

    def _record_not_modified(self, backend: SQLPageBackend, canonical_url: str,  # noqa: PLR0917
                             fetched_at: float, headers: dict[str, str],
                             fresh_until: float | None, bounds: Bounds) -> bool:
        old = backend.resolve(canonical_url)
        if old is None:
            return False
        interval = bounds.next(old.revisit_interval, False)
        backend.revisited(old.canonical_url, fetched_at=fetched_at, headers=headers,
                          etag=headers.get("etag") or old.etag,
                          last_modified=headers.get("last-modified") or old.last_modified,
                          fresh_until=fresh_until, revisit_interval=interval,
                          due_at=fetched_at + interval)
        return True

    def add_alias(self, alias_url: str, canonical_url: str, reason: str,
                  seen_at: float) -> Future[None]:
        return self.call(self._add_alias, alias_url, canonical_url, reason, seen_at,
                         write=True)

    @staticmethod
    def _add_alias(backend: SQLPageBackend, alias_url: str, canonical_url: str, reason: str,
                   seen_at: float) -> None:
        backend.add_alias(alias_url, canonical_url, reason, seen_at)

    # --- URLs fetched that are not pages of their own ----------------------------------
    def get_fetch(self, url: str, *, body: bool = False) -> Future[FetchRecord | None]:
        """The fetch state of a URL that is not a stored page (sitemap, alias), or None."""
        return self.call(lambda b: b.get_fetch(url, body=body))

    def get_page_or_fetch(
        self, canonical_url: str, *, follow: Sequence[str] | None = None,
    ) -> Future[tuple[PageRecord | None, FetchRecord | None]]:
        """The page record (as :meth:`get`), else the URL's fetch record: one trip to the
        store thread for what a request is revalidated against."""
        def both(b: Any) -> tuple[PageRecord | None, FetchRecord | None]:
            rec = b.resolve(canonical_url, follow=follow)
            return rec, (b.get_fetch(canonical_url) if rec is None else None)

        return self.call(both)

    def record_fetch(self, rec: FetchRecord, bounds: Bounds) -> Future[str]:
        """Store a fetch of a URL that is not a page; its interval follows its change.

        Returns ``"new"``, ``"changed"`` or ``"unchanged"`` (same body).
        """
        return self.call(self._record_fetch, rec, bounds, write=True)

    @staticmethod
    def _record_fetch(backend: SQLPageBackend, rec: FetchRecord, bounds: Bounds) -> str:
        old = backend.get_fetch(rec.url)
        changed: bool | None = None
        rec.body_hash = rec.body_hash or body_hash(rec.body)
        if old is not None:
            changed = old.body_hash != rec.body_hash
            rec.visits = old.visits + 1
            rec.changes = old.changes + int(changed)
        rec.revisit_interval = bounds.next(old.revisit_interval if old else None, changed)
        rec.due_at = rec.fetched_at + rec.revisit_interval
        backend.put_fetch(rec)
        return "new" if changed is None else "changed" if changed else "unchanged"

    def record_fetch_not_modified(self, url: str, *, fetched_at: float, headers: dict[str, str],
                                  fresh_until: float | None, bounds: Bounds) -> Future[bool]:
        """A 304 for a URL that is not a page: a visit without change. False if unknown."""
        return self.call(self._record_fetch_not_modified, url, fetched_at, headers, fresh_until,
                         bounds, write=True)

    @staticmethod
    def _record_fetch_not_modified(backend: SQLPageBackend, url: str,  # noqa: PLR0917
                                   fetched_at: float, headers: dict[str, str],
                                   fresh_until: float | None, bounds: Bounds) -> bool:
        old = backend.get_fetch(url)
        if old is None:
            return False
        interval = bounds.next(old.revisit_interval, False)
        return backend.fetch_revisited(url, fetched_at=fetched_at, headers=headers,
                                       fresh_until=fresh_until, revisit_interval=interval,
                                       due_at=fetched_at + interval)


# --------------------------------------------------------------------------------------
# What the crawl does when its page store's database goes away.


# The writes a page store gave up on, in the state directory: made when a store opens
# there next.
SPILL_FILE = "page-store-unwritten.pickle"


class StoreWatch:
    """What the crawl does when its page store's database goes away (any thread)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.paused = False

    def __call__(self, state: str, why: str) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._on_reactor, state, why)

    def _on_reactor(self, state: str, why: str) -> None:
        engine = self.crawler.engine
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value(f"polite/pages/store_{state}")
        if engine is None:
            return
        if state == "full" and not self.paused:
            self.paused = True
            engine.pause()
            logger.warning("Fetching paused: %(why)s for a page store that does not answer",
                           {"why": why})
        elif state in ("room", "ok") and self.paused:
            self.paused = False
            engine.unpause()
            logger.info("Fetching resumed: the page store takes writes again")
        elif state == "down":
            from scrapy.utils.defer import deferred_from_coro

            logger.error("Closing the crawl: %(why)s", {"why": why})
            engine.unpause()
            deferred_from_coro(engine.close_spider_async(reason=STORE_DOWN))


__all__ = [
    "DedupeResult",
    "FetchRecord",
    "NearDuplicates",
    "PageRecord",
    "PageStore",
    "PageStoreDown",
    "SQLPageBackend",
]
