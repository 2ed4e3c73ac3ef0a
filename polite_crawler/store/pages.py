"""The page store: every page stored once, its validators, its copy, its revisit time.

Its jobs are in four modules: the records (:mod:`polite_crawler.records`:
:class:`PageRecord`, :class:`FetchRecord`), the SQL both dialects run
(:mod:`.page_backend`: :class:`SQLPageBackend`; SQLite, the default, in the shared
state database, or PostgreSQL, ``POLITE_STORE=postgresql://...``; which one is
:func:`polite_crawler.backend.backend_of`'s choice), the near-duplicate index
(:mod:`.neardup`) and, here, the store a crawl writes through.

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
import logging
import pickle
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from polite_crawler.policy.simhash import MIN_WORDS
from polite_crawler.records import FetchRecord, PageRecord
from polite_crawler.store.neardup import NearDuplicates
from polite_crawler.store.page_backend import SQLPageBackend, body_hash

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from polite_crawler.policy.revisit import Bounds

logger = logging.getLogger(__name__)

T = TypeVar("T")


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

    @property
    def waiting(self) -> int:
        """Jobs queued for the store thread and not taken yet (approximate: any thread)."""
        return self._jobs.qsize()

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


# The writes a page store gave up on, in the state directory: made when a store opens
# there next.
SPILL_FILE = "page-store-unwritten.pickle"


__all__ = [
    "DedupeResult",
    "FetchRecord",
    "NearDuplicates",
    "PageRecord",
    "PageStore",
    "PageStoreDown",
    "SQLPageBackend",
]
