"""The robots.txt book: a durable cache of every origin's robots.txt and its fetch state.

One table, ``robots_txt``, in the shared state database (:mod:`.paths`), so the
cache survives restarts and is shared by every job on the same hosts; with the
frontier on Redis, one hash per origin in Redis instead
(:mod:`polite_crawler.store.redis_robots`), shared by every worker on every
machine. The rules are the same for both (this class; the store only loads and
saves: :class:`polite_crawler.interfaces.RobotsStore`; the crawl's book is
:meth:`polite_crawler.backend.Backend.robots_book`). A copy is fresh for
``POLITE_ROBOTS_TTL`` (24 h, RFC 9309 section 2.4); the last good copy is kept
through an outage and used until robots.txt can be read again. A store that fails
(Redis unreachable) fails safe: an origin this process holds no entry of is not
ready (nothing of it is fetched, robots.txt neither) and asked again after
:data:`STORE_RETRY`; an answer it could not write is used here and written when the
store answers again.

The frontier asks, synchronously and cheaply (an in-memory dict in front of
the store, read once per origin and again only before a fetch would be asked):

* :meth:`RobotsBook.needs_fetch` -- should robots.txt be fetched now?
* :meth:`RobotsBook.ready` -- may the origin's content be judged now?
* :meth:`RobotsBook.retry_at` -- when may :meth:`needs_fetch` turn true?
* :meth:`RobotsBook.allowed`, :meth:`RobotsBook.crawl_delay`, :meth:`RobotsBook.robots_url`.

The robots.txt middleware records answers with :meth:`RobotsBook.record_answer`,
:meth:`RobotsBook.record_failure` and :meth:`RobotsBook.record_redirect`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.robots import (
    NO_SIGNALS,
    ContentSignals,
    Outcome,
    RobotsRules,
    clip_robots,
    fetch_outcome,
    retry_delay,
)
from polite_crawler.policy.urls import origin_of
from polite_crawler.records import RobotsState
from polite_crawler.store.paths import connect

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from polite_crawler.interfaces import RobotsStore

logger = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS robots_txt (
    origin       TEXT PRIMARY KEY,
    url          TEXT,
    kind         TEXT,              -- 'rules' (2xx), 'allow_all' (4xx) or NULL (no copy yet)
    status       INTEGER,           -- status of the last good copy
    body         BLOB,              -- the parsed part of the last good copy
    truncated    INTEGER NOT NULL DEFAULT 0,
    fetched_at   REAL,              -- when the last good copy was fetched (epoch seconds)
    failures     INTEGER NOT NULL DEFAULT 0,  -- outages in a row (0: robots.txt reachable)
    outage_since REAL,
    retry_at     REAL NOT NULL DEFAULT 0,     -- no new fetch before this time
    last_error   TEXT,
    checked_at   REAL               -- the last answer of any kind
)
"""

_COLUMNS = ("url", "kind", "status", "body", "truncated", "fetched_at", "failures",
            "outage_since", "retry_at", "last_error", "checked_at")

KIND_RULES = "rules"
KIND_ALLOW_ALL = "allow_all"

# How long a redirected robots.txt request may stay unanswered before the
# origin's robots.txt is asked for again (the hop may have been dropped).
PENDING_TTL = 600.0
# How often an entry this process holds is compared with the shared table
# (another job may have fetched it) before the book asks for a fetch.
_RELOAD_AFTER = 5.0
# A store that failed (Redis unreachable) is asked again for an origin after this long.
STORE_RETRY = 5.0


class _Entry:
    __slots__ = ("body_stored", "hold_until", "loaded_at", "pending_until", "rules", "state",
                 "trust", "unknown")

    def __init__(self, state: RobotsState, loaded_at: float) -> None:
        self.state = state
        self.rules: RobotsRules | None = None
        # The body was let go once parsed and stored (``state.body`` is empty): the rules
        # in use are parsed from it, and the store holds it for whoever reads it later
        # (``scrapy explain``, another job, this one's next save).
        self.body_stored = False
        self.pending_until = 0.0
        self.loaded_at = loaded_at
        self.hold_until = 0.0  # the store failed: neither fetch nor ask it again before
        self.unknown = False  # a stand-in: the store could not be read
        self.trust = 0.0  # read just now by someone else (preload): no re-read before


class SQLiteRobotsStore:
    """The book's storage in the shared state database (the embedded default)."""

    # What a failing store raises, caught by the book (none: a local file's error is a bug).
    errors: tuple[type[Exception], ...] = ()
    # How long an entry the book holds is trusted before it asks for a fetch (another job
    # on the state directory may have fetched it meanwhile).
    reload_after = _RELOAD_AFTER
    remote = False  # a local file: read where it is needed

    def __init__(self, db: Path | str | sqlite3.Connection) -> None:
        self._own_conn = not isinstance(db, sqlite3.Connection)
        self._conn = db if isinstance(db, sqlite3.Connection) else connect(db)
        self._conn.execute(_SCHEMA)
        self._lock = threading.RLock()

    def load(self, origin: str) -> RobotsState | None:
        with self._lock:
            return read_robots_state(self._conn, origin)

    def save(self, state: RobotsState) -> None:
        values = (
            state.url, state.kind, state.status, state.body, int(state.truncated),
            state.fetched_at, state.failures, state.outage_since, state.retry_at,
            state.last_error, state.checked_at,
        )
        with self._lock:
            self._conn.execute(
                f"INSERT OR REPLACE INTO robots_txt (origin, {', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (len(_COLUMNS) + 1))})",
                (state.origin, *values),
            )

    def delete(self, origin: str) -> int:
        """Forget the origin's entry (``scrapy forget``); 1 if there was one."""
        with self._lock:
            return self._conn.execute("DELETE FROM robots_txt WHERE origin=?",
                                      (origin,)).rowcount

    def close(self) -> None:
        if self._own_conn:
            self._conn.close()


class RobotsBook:
    """The durable robots.txt cache of the crawl (see the module docstring).

    ``db``: the SQLite origin store (a path or a connection), or any
    :class:`RobotsStore` (:class:`~polite_crawler.store.redis_robots.RedisRobotsStore`
    when the frontier is on Redis). ``clock`` returns wall-clock epoch seconds; tests
    inject their own. ``count`` receives the book's stats (store failures).
    """

    def __init__(
        self,
        db: Path | str | sqlite3.Connection | RobotsStore,
        token: str,
        *,
        ttl: float,
        max_bytes: int,
        retry_min: float,
        retry_max: float,
        clock: Callable[[], float] = time.time,
        count: Callable[[str], None] = lambda key: None,
    ) -> None:
        self.store: RobotsStore = SQLiteRobotsStore(db) if isinstance(
            db, (str, os.PathLike, sqlite3.Connection)) else db
        self.token = token
        self.ttl = ttl
        self.max_bytes = max_bytes
        self.retry_min = retry_min
        self.retry_max = retry_max
        self.clock = clock
        self.count = count
        self._entries: dict[str, _Entry] = {}
        self._unsaved: set[str] = set()  # answers the store failed to take
        self._down = False
        self._store_retry_at = 0.0  # while down, the store is not asked before this


    def close(self) -> None:
        self._flush(self.clock())
        self.store.close()

    # --- the frontier's questions ------------------------------------------

    @property
    def remote(self) -> bool:
        """Whether the store is read across the network (Redis): then an entry not held
        here is read by the frontier's batch, not on the reactor."""
        return self.store.remote

    @staticmethod
    def robots_url(origin: str) -> str:
        return f"{origin}/robots.txt"

    def needs_fetch(self, origin: str) -> bool:
        """No copy, or a stale one, and not inside a retry wait or a pending redirect."""
        now = self.clock()
        entry = self._entry(origin)
        if self._needs_fetch(entry, now) and now - entry.loaded_at >= max(
                self.store.reload_after, entry.trust):
            entry = self._reload(origin, now)  # another job may have fetched it meanwhile
        return self._needs_fetch(entry, now)

    def cached(self, origin: str) -> bool:
        """Whether this process holds an entry for ``origin`` (asking costs no store read)."""
        entry = self._entries.get(origin)
        return entry is not None and not entry.unknown

    def preload(self, found: dict[str, RobotsState | None], trust: float = 1.0) -> None:
        """Entries read off the reactor by the caller (the Redis frontier reads those of
        the origins it takes, in its batch): installed where this process holds none, and
        not read again for ``trust`` seconds before a fetch is asked for."""
        now = self.clock()
        for origin, stored in found.items():
            old = self._entries.get(origin)
            if (old is not None and not old.unknown) or origin in self._unsaved:
                continue  # what this process holds is as new; the usual rules apply
            entry = _Entry(RobotsState(origin) if stored is None else stored, now)
            entry.trust = trust
            if old is not None:
                entry.pending_until = old.pending_until
            self._entries[origin] = entry

    def ready(self, origin: str) -> bool:
        """May content of ``origin`` be judged now?

        True for a fresh copy (rules or allow-all), and for the last good copy
        while robots.txt is unreachable. False with no copy, and with a stale
        copy that is due to be fetched again.
        """
        state = self._entry(origin).state
        if not state.has_copy:
            return False
        return self._fresh(state, self.clock()) or state.in_outage

    def retry_at(self, origin: str) -> float:
        """When to ask again about an origin that is not ready (0: any time).

        During an outage, the time of the next robots.txt fetch; with a fresh
        copy, the time it goes stale. While a redirected fetch is on its way
        it is 0: the answer may come any moment, so the frontier checks again
        soon rather than at the redirect's give-up time.
        """
        entry = self._entry(origin)
        state = entry.state
        at = max(state.retry_at, entry.hold_until)
        if state.has_copy and not state.in_outage and state.fetched_at is not None:
            at = max(at, state.fetched_at + self.ttl)
        return at

    def allowed(self, url: str) -> bool:
        """May ``url`` be fetched? False while its origin's robots.txt is not ready."""
        origin = origin_of(url)
        if not self.ready(origin):
            return False
        rules = self.rules(origin)
        return rules is None or rules.allowed(url)

    def crawl_delay(self, origin: str) -> float | None:
        """Crawl-delay of the matched group (uncapped; the frontier caps it)."""
        rules = self.rules(origin)
        return rules.crawl_delay if rules is not None else None

    def sitemaps(self, origin: str) -> list[str]:
        """``Sitemap:`` URLs of the copy in use (for discovery)."""
        rules = self.rules(origin)
        return list(rules.sitemaps) if rules is not None else []

    def signals(self, url: str) -> ContentSignals:
        """Content signals robots.txt gives ``url`` (Content-Signal, Content-Usage)."""
        rules = self.rules(origin_of(url))
        return rules.signals(url) if rules is not None else NO_SIGNALS

    def rules(self, origin: str) -> RobotsRules | None:
        """The parsed copy in use, or None (no copy, or a 4xx allow-all)."""
        entry = self._entry(origin)
        if entry.state.kind != KIND_RULES:
            return None
        if entry.rules is None:
            entry.rules = RobotsRules.parse(entry.state.body, self.token, self.max_bytes)
            entry.rules.truncated = entry.state.truncated
            self._let_go_of_body(entry)
        return entry.rules

    def state(self, origin: str) -> RobotsState:
        return self._entry(origin).state

    # --- recording answers ---------------------------------------------------

    def record_answer(
        self, origin: str, status: int, body: bytes = b"", *, url: str | None = None,
        retry_after: float | None = None, cut: bool = False, outcome: Outcome | None = None,
    ) -> Outcome:
        """Record the final answer to a robots.txt request (after any redirects).

        2xx stores the file, 4xx (but 429) stores "no restrictions", anything
        else is an outage (:meth:`record_failure`). ``cut``: the body was cut
        on its way here (a size cap), so its last line may be incomplete.
        """
        if outcome is None:
            outcome = fetch_outcome(status, has_location=False)
        if outcome is Outcome.UNREACHABLE:
            self.record_failure(origin, f"status {status}", retry_after=retry_after, url=url)
            return outcome
        now = self.clock()
        clipped, truncated = b"", False
        if outcome is Outcome.PARSE:
            clipped, truncated = clip_robots(body, self.max_bytes, cut)
        entry = self._entry(origin)
        entry.state = RobotsState(
            origin=origin,
            url=url or self.robots_url(origin),
            kind=KIND_RULES if outcome is Outcome.PARSE else KIND_ALLOW_ALL,
            status=status,
            body=clipped,
            truncated=truncated,
            fetched_at=now,
            checked_at=now,
        )
        entry.rules = None
        entry.body_stored = False
        entry.pending_until = entry.hold_until = 0.0
        entry.unknown = False
        entry.loaded_at = now
        self._save(entry.state)
        return outcome

    def record_failure(
        self, origin: str, reason: str, *, retry_after: float | None = None,
        url: str | None = None,
    ) -> float:
        """Record an outage (429, 5xx, network error, too many redirects).

        The last good copy, if any, stays in use; robots.txt is asked for
        again after a backoff that doubles with each outage in a row. Returns
        the time of that retry.
        """
        now = self.clock()
        entry = self._entry(origin)
        state = entry.state
        state.failures += 1
        if state.outage_since is None:
            state.outage_since = now
        wait = retry_delay(state.failures, self.retry_min, self.retry_max, retry_after)
        state.retry_at = now + wait
        state.last_error = reason
        state.checked_at = now
        state.url = state.url or url or self.robots_url(origin)
        entry.pending_until = 0.0
        entry.loaded_at = now
        self._save(state)
        return state.retry_at

    def record_redirect(self, origin: str, target: str) -> None:
        """A robots.txt request was redirected; the hop is on its way (not a new fetch)."""
        entry = self._entry(origin)
        entry.pending_until = self.clock() + PENDING_TTL

    # --- internals -----------------------------------------------------------

    def _fresh(self, state: RobotsState, now: float) -> bool:
        return state.has_copy and state.fetched_at is not None and now < state.fetched_at + self.ttl

    def _needs_fetch(self, entry: _Entry, now: float) -> bool:
        state = entry.state
        if now < entry.pending_until or now < entry.hold_until or now < state.retry_at:
            return False
        return not self._fresh(state, now)

    def _entry(self, origin: str) -> _Entry:
        entry = self._entries.get(origin)
        if entry is None or (entry.unknown and self.clock() >= entry.hold_until):
            entry = self._reload(origin, self.clock())
        return entry

    def _reload(self, origin: str, now: float) -> _Entry:
        old = self._entries.get(origin)
        if self._down and now < self._store_retry_at:
            # Not asked again before its retry time: a store that does not answer may take
            # its whole timeout to say so, and this runs on the reactor.
            return self._unreadable(origin, old, now, None)
        try:
            stored = self.store.load(origin)
        except self.store.errors as exc:
            return self._unreadable(origin, old, now, exc)
        self._store_ok()
        if old is not None and origin in self._unsaved and (
                stored is None or (stored.checked_at or 0.0) <= (old.state.checked_at or 0.0)):
            # This process's answer never reached the store: it is the newest one.
            if self._save(old.state):
                old.loaded_at = now
            return old
        state = RobotsState(origin) if stored is None else stored
        if old is not None and not old.unknown and stored is not None \
                and old.state.checked_at == state.checked_at:
            old.loaded_at = now
            return old
        entry = _Entry(state, now)
        if old is not None:
            entry.pending_until = old.pending_until
        self._unsaved.discard(origin)
        self._entries[origin] = entry
        return entry

    def _unreadable(self, origin: str, old: _Entry | None, now: float,
                    exc: Exception | None) -> _Entry:
        """The store failed a read: nothing of the origin is fetched for a while (not
        even robots.txt, which another worker may hold a fresh copy of)."""
        self.count("polite/robots/store_error/read")
        if exc is not None:
            self._store_down(exc, now)
        if old is None:
            old = _Entry(RobotsState(origin), now)
            old.unknown = True
            self._entries[origin] = old
        old.hold_until = now + STORE_RETRY
        return old

    def _save(self, state: RobotsState, *, force: bool = False) -> bool:
        # Kept in memory and in use here when the store fails; written at the origin's
        # next reload, when the store answers again, or at close.
        if self._down and not force and self.clock() < self._store_retry_at:
            self.count("polite/robots/store_error/write")
            self._unsaved.add(state.origin)
            return False
        entry = self._entries.get(state.origin)
        held = entry if entry is not None and entry.state is state and entry.body_stored \
            else None
        try:
            if held is not None:
                self._take_body_back(held)  # a save writes the whole entry, body too
            self.store.save(state)
        except self.store.errors as exc:
            self.count("polite/robots/store_error/write")
            self._unsaved.add(state.origin)
            self._store_down(exc, self.clock())
            return False
        self._unsaved.discard(state.origin)
        self._store_ok()
        if entry is not None and entry.state is state:
            self._let_go_of_body(entry)
        return True

    def _let_go_of_body(self, entry: _Entry) -> None:
        """Keep the parsed rules only: the store has the body (a copy it has not taken yet
        is kept whole until it has)."""
        state = entry.state
        if entry.rules is None or state.origin in self._unsaved or not state.body:
            return
        state.body = b""
        entry.body_stored = True

    def _take_body_back(self, entry: _Entry) -> None:
        """Read the body of the copy in use back from the store, before the entry is
        written again (an outage recorded over the last good copy).

        The store's copy is another's when it is not the one parsed here (another job
        fetched robots.txt since, or ``scrapy forget`` dropped it): then that copy is the
        last good one, taken with its body and parsed again when next asked.
        """
        state = entry.state
        stored = self.store.load(state.origin)
        entry.body_stored = False
        if stored is not None and stored.kind == state.kind and \
                stored.fetched_at == state.fetched_at:
            state.body = stored.body
            return
        entry.rules = None
        copy = stored if stored is not None else RobotsState(state.origin)
        state.kind, state.status, state.body = copy.kind, copy.status, copy.body
        state.truncated, state.fetched_at = copy.truncated, copy.fetched_at
        state.url = copy.url or state.url

    def _store_down(self, exc: Exception, now: float) -> None:
        self._store_retry_at = now + STORE_RETRY
        if self._down:
            return
        self._down = True
        logger.warning(
            "The robots.txt cache is unreachable (%(e)s): origins whose robots.txt this "
            "process does not hold get no request until it answers again (asked again "
            "every %(retry).0f s)", {"e": exc, "retry": STORE_RETRY})

    def _store_ok(self) -> None:
        if not self._down:
            return
        self._down = False
        logger.info("The robots.txt cache answers again")
        self._flush(self.clock())

    def _flush(self, now: float) -> None:
        """Write the answers the store failed to take (as long as it takes them)."""
        for origin in sorted(self._unsaved):
            entry = self._entries.get(origin)
            if entry is None:
                self._unsaved.discard(origin)
            elif not self._save(entry.state, force=True):
                return


def read_robots_state(conn: Any, origin: str) -> RobotsState | None:
    """The stored state of ``origin``'s robots.txt (None: never read); any connection to
    the origin store, a read-only one too (``scrapy explain``)."""
    row = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM robots_txt WHERE origin = ?", (origin,)
    ).fetchone()
    return None if row is None else _state_from_row(origin, row)


def _state_from_row(origin: str, row: Any) -> RobotsState:
    return RobotsState(
        origin=origin,
        url=row[0],
        kind=row[1],
        status=row[2],
        body=bytes(row[3] or b""),
        truncated=bool(row[4]),
        fetched_at=row[5],
        failures=int(row[6] or 0),
        outage_since=row[7],
        retry_at=float(row[8] or 0.0),
        last_error=row[9],
        checked_at=row[10],
    )


__all__ = [
    "KIND_ALLOW_ALL", "KIND_RULES", "RobotsBook", "RobotsState",
    "SQLiteRobotsStore", "read_robots_state",
]
