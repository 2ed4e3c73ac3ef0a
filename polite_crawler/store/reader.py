"""What the operator's commands read, one class per backend, the same methods
(:class:`polite_crawler.interfaces.StateReader`); opened by
:meth:`polite_crawler.backend.Backend.reader`, read only.

- :class:`EmbeddedReader`: the state directory's origin store (SQLite: origin, host
  and owner state and leases, the robots.txt cache, the opt-out list and its jobs);
- :class:`ClusterReader`: the same state in Redis, every worker's
  (:mod:`polite_crawler.store.redis_keys`);
- both with a :class:`PageReader` over the page store (SQLite or PostgreSQL).

A store that cannot be read raises :class:`StateUnreadable` (its message says which
and why); a store not there yet (no crawl has written it) reads as empty.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.rest import OriginState
from polite_crawler.records import HostRecord, OwnerRecord, ServerRecord
from polite_crawler.store.optout import OptOutList
from polite_crawler.store.robots import read_robots_state

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from polite_crawler.records import FetchRecord, Job, OptOut, PageRecord, RobotsState
    from polite_crawler.store.page_backend import SQLPageBackend


class StateUnreadable(Exception):
    """A store of the crawl's state could not be read (the message says which, and why)."""


class PageReader:
    """Reads of the page store through one connection, opened on first use."""

    def __init__(self, factory: Callable[[], SQLPageBackend] | None, where: str | None) -> None:
        self.factory = factory
        self.where = where
        self._backend: SQLPageBackend | None = None

    def _open(self) -> SQLPageBackend | None:
        if self.factory is None:
            return None
        if self._backend is None:
            try:
                self._backend = self.factory()
            except Exception as exc:  # psycopg's errors: no server, refused, bad URI
                raise StateUnreadable(f"cannot open the page store {self.where}: {exc}") from exc
        return self._backend

    def _read(self, fn: Callable[[SQLPageBackend], Any]) -> Any:
        backend = self._open()
        if backend is None:
            return None
        try:
            return fn(backend)
        except Exception:  # an empty store has no tables yet
            if backend.in_transaction:
                backend.rollback()
            return None

    def page(self, canonical_url: str, *, follow: Any) -> PageRecord | None:
        found: PageRecord | None = self._read(lambda b: b.resolve(canonical_url, follow=follow))
        return found

    def alias_of(self, url: str) -> tuple[str, str] | None:
        found: tuple[str, str] | None = self._read(lambda b: b.alias_of(url))
        return found

    def fetch(self, url: str) -> FetchRecord | None:
        found: FetchRecord | None = self._read(lambda b: b.get_fetch(url))
        return found

    def has_pages(self, origin: str) -> bool:
        return bool(self._read(lambda b: b.execute(
            "SELECT 1 FROM pages WHERE origin = ? LIMIT 1", (origin,))))

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


class _PagesOf:
    """The page store's part of a reader."""

    pages: PageReader

    def page(self, canonical_url: str, *, follow: Any) -> PageRecord | None:
        return self.pages.page(canonical_url, follow=follow)

    def alias_of(self, url: str) -> tuple[str, str] | None:
        return self.pages.alias_of(url)

    def fetch(self, url: str) -> FetchRecord | None:
        return self.pages.fetch(url)

    def has_pages(self, origin: str) -> bool:
        return self.pages.has_pages(origin)

    def pages_where(self) -> str | None:
        return self.pages.where if self.pages.factory is not None else None


class EmbeddedReader(_PagesOf):
    """The state directory's origin store (SQLite, read only) and the page store."""

    def __init__(self, origins_db: Path | None, pages: PageReader) -> None:
        self.pages = pages
        self.where = str(origins_db) if origins_db is not None else "no state directory"
        self.conn: sqlite3.Connection | None = None
        if origins_db is not None and origins_db.is_file():
            try:
                self.conn = sqlite3.connect(f"file:{origins_db}?mode=ro", uri=True, timeout=5.0)
                self.conn.execute("PRAGMA busy_timeout=5000")
                self.conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            except sqlite3.Error as exc:
                raise StateUnreadable(f"cannot read {origins_db}: {exc}") from exc

    def _has(self, table: str) -> bool:
        return self.conn is not None and self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,)
        ).fetchone() is not None

    def _lease_row(self, table: str,
                   key: str) -> tuple[OriginState, str | None, float | None] | None:
        """A row of the origin store's leased tables (``polite_origin``, ``polite_host``):
        its state, and its lease's holder and end (None, None: nobody holds it)."""
        if self.conn is None or not self._has(table):
            return None
        row = self.conn.execute(f"SELECT state, lease_owner, lease_until FROM {table} "
                                "WHERE origin=?", (key,)).fetchone()
        if row is None:
            return None
        state = OriginState.from_json(row[0])
        state.origin = key
        return state, row[1] or None, row[2] if row[1] else None

    def origin_state(self, origin: str) -> tuple[OriginState, str | None, float | None] | None:
        # The origin's row keeps its state; the one lease is its host's (a row of
        # an older crawler may still name a holder).
        return self._lease_row("polite_origin", origin)

    def host_state(self, host: str) -> HostRecord | None:
        found = self._lease_row("polite_host", host)
        if found is None:
            return None
        state, holder, until = found
        return HostRecord(host, state.next_allowed, holder, until)

    def owner_state(self, owner: str) -> OwnerRecord | None:
        if self.conn is None or not self._has("polite_owner"):
            return None
        row = self.conn.execute("SELECT state, run_id FROM polite_owner WHERE origin=?",
                                (owner,)).fetchone()
        lift = self.conn.execute("SELECT lifted FROM polite_owner_lift WHERE owner=?",
                                 (owner,)).fetchone() if self._has("polite_owner_lift") else None
        if row is None and lift is None:
            return None
        st = OriginState.from_json(row[0]) if row is not None else OriginState(owner)
        stop = st.failure.stopped
        return OwnerRecord(owner, ((st.budget_day, st.budget_used),) if st.budget_day else (),
                           stops=((str(row[1]), stop),) if row is not None and stop else (),
                           lifted=float(lift[0]) if lift is not None else None)

    def server_state(self, address: str) -> ServerRecord | None:
        return None  # a running crawl's memory only

    def origin_states(self) -> Iterator[tuple[str, OriginState]]:
        if self.conn is None or not self._has("polite_origin"):
            return
        for origin, raw in self.conn.execute("SELECT origin, state FROM polite_origin"):
            yield origin, OriginState.from_json(raw)

    def robots(self, origin: str) -> RobotsState | None:
        if self.conn is None or not self._has("robots_txt"):
            return None
        return read_robots_state(self.conn, origin)

    def robots_entries(self) -> Iterator[RobotsState]:
        if self.conn is None or not self._has("robots_txt"):
            return
        for (origin,) in self.conn.execute("SELECT origin FROM robots_txt").fetchall():
            found = read_robots_state(self.conn, origin)
            if found is not None:
                yield found

    def _list(self) -> OptOutList | None:
        if self.conn is None or not self._has("polite_optout"):
            return None
        return OptOutList(self.conn)  # its tables exist: nothing is written

    def optout(self, origin: str) -> OptOut | None:
        lst = self._list()
        return lst.get(origin) if lst is not None else None

    def optouts(self) -> dict[str, OptOut]:
        lst = self._list()
        return lst.entries() if lst is not None else {}

    def jobs(self) -> list[Job]:
        lst = self._list()
        return lst.jobs() if lst is not None and self._has("polite_optout_jobs") else []

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        self.pages.close()


class ClusterReader(_PagesOf):
    """Every worker's state in Redis (origin state and owners, the owners' groups with
    their hosts' rests and budget counts, the robots.txt cache, the opt-out list and
    its jobs) and the page store."""

    def __init__(self, url: str, pages: PageReader, *, timeout: float = 5.0) -> None:
        from polite_crawler.store.redis_keys import redis_client, redis_errors
        from polite_crawler.store.redis_optout import RedisOptOutList

        self.pages = pages
        self.url = url
        self.where = f"Redis {url}"
        self.r: Any = redis_client(url, timeout)
        self.errors = redis_errors()
        self.optout_list = RedisOptOutList(url, timeout=timeout)

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except self.errors as exc:
            raise StateUnreadable(f"cannot read {what} in Redis {self.url}: {exc}") from exc

    def origin_state(self, origin: str) -> tuple[OriginState, str | None, float | None] | None:
        from polite_crawler.store.redis_keys import origin_key, until_key

        def read() -> tuple[Any, ...] | None:
            state, owner = self.r.hmget(origin_key(origin), "state", "owner")
            if not state:
                return None
            who = bytes(owner).decode() if owner else ""
            until = self.r.get(until_key(who)) if who else None
            return bytes(state).decode(), who or None, float(until) if until else None

        row = self._call("the origin state", read)
        if row is None:
            return None
        state = OriginState.from_json(row[0])
        state.origin = origin
        return state, row[1], row[2]

    def _group(self, owner: str) -> dict[str, str]:
        from polite_crawler.store.redis_keys import group_key

        raw = self._call("the owner's group", lambda: self.r.hgetall(group_key(owner)))
        return {bytes(k).decode(): bytes(v).decode() for k, v in raw.items()}

    def host_state(self, host: str) -> HostRecord | None:
        from polite_crawler.policy.owners import owner_of
        from polite_crawler.policy.urls import host_of_origin

        fields = self._group(owner_of(host))
        mine = [k[2:] for k in fields if k[:2] in ("m:", "w:")
                and host_of_origin(k[2:]) == host]
        if f"u:{host}" not in fields and not mine:
            return None
        return HostRecord(host, float(fields.get(f"u:{host}") or 0.0),
                          fields.get("owner") or None, None,
                          tuple(sorted(o for o in mine if f"m:{o}" in fields)),
                          tuple(sorted(o for o in mine if f"w:{o}" in fields)))

    def owner_state(self, owner: str) -> OwnerRecord | None:
        fields = self._group(owner)
        if not fields:
            return None
        counts = []
        for k, v in fields.items():
            if k.startswith("b:"):
                day, _sp, used = v.partition(" ")
                counts.append((day, int(used or 0)))
        stops = tuple(sorted((k[2:], v) for k, v in fields.items() if k.startswith("s:")))
        return OwnerRecord(owner, tuple(sorted(counts)), fields.get("owner") or None, stops)

    def server_state(self, address: str) -> ServerRecord | None:
        from polite_crawler.store.redis_keys import server_key

        raw = self._call("the server's places", lambda: self.r.hgetall(server_key(address)))
        fields = {bytes(k).decode(): bytes(v).decode() for k, v in raw.items()}
        if not fields:
            return None
        return ServerRecord(
            address, int(fields.get("lim") or 1),
            tuple(sorted((k[2:], int(v)) for k, v in fields.items() if k.startswith("h:"))),
            tuple(sorted(k[2:] for k in fields if k.startswith("d:"))),
            float(fields.get("u") or 0.0), float(fields.get("x") or 0.0))

    def _scan(self, pattern: str) -> list[bytes]:
        found: list[bytes] = self._call(
            "the keys", lambda: list(self.r.scan_iter(match=pattern, count=1000)))
        return found

    def origin_states(self) -> Iterator[tuple[str, OriginState]]:
        from polite_crawler.store.redis_keys import PREFIX, origin_key, origin_of_key

        origins = [origin_of_key(k) for k in self._scan(origin_key("*", PREFIX))]
        origins = [o for o in origins if o]
        for i in range(0, len(origins), 500):
            chunk = origins[i:i + 500]

            def read(part: list[str] = chunk) -> list[Any]:
                pipe = self.r.pipeline(transaction=False)
                for origin in part:
                    pipe.hget(origin_key(origin), "state")
                return list(pipe.execute())

            for origin, raw in zip(chunk, self._call("the origin states", read), strict=True):
                if raw:
                    yield origin, OriginState.from_json(bytes(raw).decode())

    def robots(self, origin: str) -> RobotsState | None:
        from polite_crawler.store.redis_robots import load_many

        found: dict[str, RobotsState | None] = self._call(
            "the robots.txt cache", lambda: load_many(self.r, [origin]))
        return found.get(origin)

    def robots_entries(self) -> Iterator[RobotsState]:
        from polite_crawler.store.redis_keys import origin_of_key, robots_key
        from polite_crawler.store.redis_robots import load_many

        origins = [o for o in (origin_of_key(k) for k in self._scan(robots_key("*"))) if o]
        for i in range(0, len(origins), 500):
            chunk = origins[i:i + 500]

            def read(part: list[str] = chunk) -> dict[str, RobotsState | None]:
                return load_many(self.r, part)

            found: dict[str, RobotsState | None] = self._call("the robots.txt cache", read)
            for state in found.values():
                if state is not None:
                    yield state

    def optout(self, origin: str) -> OptOut | None:
        found: OptOut | None = self._call("the opt-out list",
                                          lambda: self.optout_list.get(origin))
        return found

    def optouts(self) -> dict[str, OptOut]:
        found: dict[str, OptOut] = self._call("the opt-out list", self.optout_list.entries)
        return found

    def jobs(self) -> list[Job]:
        found: list[Job] = self._call("the opt-out list's jobs", self.optout_list.jobs)
        return found

    def close(self) -> None:
        self.r.close()
        self.optout_list.close()
        self.pages.close()
