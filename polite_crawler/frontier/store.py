"""Durable frontier state in SQLite.

Two files, two owners:

* :class:`QueueStore`, in the job directory (JOBDIR): this job's queued requests (one
  row each, the request serialised, never held in memory), the canonical URLs it has
  seen, and the origins it stopped. One open transaction, committed when a request is
  done (so a request's children and its own removal land together) and on every
  checkpoint. After a crash, rows that were in flight go back to the queue.
* :class:`OriginStore`, in the shared state directory (``store.paths.state_dir``, file
  ``store.paths.ORIGINS_DB``): per-origin timing, failure and budget state, and a lease with an
  expiry. Its own file, not ``polite.sqlite3``: the reactor thread writes it on every
  dispatch and settle, so no other writer may hold its lock for long (the page store
  batches its writes in transactions of up to a second). Every job on the machine reads
  and writes the same rows, so one request in flight per origin and the rests hold
  across processes: a job takes the origin's lease (in one short transaction) before it
  dispatches, and gives it back with the new next-allowed time when the exchange ends.
  A crashed job's lease frees itself at its expiry, or at once when its process is
  known dead.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from functools import lru_cache
from itertools import chain
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from polite_crawler.frontier.migrate import migrate_frontier
from polite_crawler.interfaces import Lease, LeaseAnswer
from polite_crawler.policy.owners import owner_of
from polite_crawler.policy.rest import OriginState
from polite_crawler.policy.urls import host_of_origin
from polite_crawler.records import Row
from polite_crawler.store.jobfiles import owner_alive
from polite_crawler.store.paths import connect

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Iterator

QUEUED, IN_FLIGHT = 0, 1
# Fingerprints inserted per statement (SQLite allows 32,766 parameters).
_IN_CHUNK = 500
# Queue rows inserted per statement (4 parameters each).
_PUSH_CHUNK = 250


@lru_cache(maxsize=8)
def _push_sql(n: int) -> str:
    """The INSERT of ``n`` queue rows in one statement."""
    return ("INSERT INTO frontier_queue (origin, prio, state, url, data) VALUES "
            + ",".join(["(?, ?, 0, ?, ?)"] * n))

_QUEUE_SCHEMA = """
CREATE TABLE IF NOT EXISTS frontier_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frontier_queue (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    origin TEXT NOT NULL,
    prio INTEGER NOT NULL,
    state INTEGER NOT NULL DEFAULT 0,
    url TEXT NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS frontier_queue_next ON frontier_queue (origin, state, prio DESC, id);
CREATE TABLE IF NOT EXISTS frontier_seen (fp BLOB PRIMARY KEY) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS frontier_stopped (origin TEXT PRIMARY KEY, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS frontier_stop_time (origin TEXT PRIMARY KEY, at REAL NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS frontier_template (id INTEGER PRIMARY KEY, data BLOB NOT NULL UNIQUE);
"""


class QueueStore:
    """This job's queued requests, seen set and stopped origins."""

    deferred = False  # a pushed row is queued at once (polite_crawler.interfaces.URLQueue)

    def __init__(self, path: Path | str, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self.clock = clock  # the wall clock a stop's time is read from (stopped_times)
        self.conn = connect(self.path)
        # Bigger pages of cache than the default keep a million-row queue's index warm.
        self.conn.execute("PRAGMA cache_size=-16000")
        self.conn.executescript(_QUEUE_SCHEMA)
        self._in_tx = False
        # A job queued under an older canonical form of URLs is brought to this one
        # (frontier.migrate; nothing to do, and marked current, for a new file).
        migrate_frontier(self.conn)
        row = self.conn.execute("SELECT value FROM frontier_meta WHERE key='run_id'").fetchone()
        if row is None:
            self.run_id = uuid.uuid4().hex
            self.conn.execute("INSERT INTO frontier_meta VALUES ('run_id', ?)", (self.run_id,))
        else:
            self.run_id = str(row[0])

    # --- transactions ------------------------------------------------------
    def _begin(self) -> None:
        if not self._in_tx:
            self.conn.execute("BEGIN")
            self._in_tx = True

    def commit(self) -> None:
        if self._in_tx:
            self.conn.execute("COMMIT")
            self._in_tx = False

    def close(self) -> None:
        self.commit()
        self.conn.close()

    # --- recovery ------------------------------------------------------------
    def requeue_in_flight(self) -> int:
        """Rows left in flight by a crash go back to the queue."""
        cur = self.conn.execute(
            "UPDATE frontier_queue SET state=? WHERE state<>?", (QUEUED, QUEUED)
        )
        return cur.rowcount

    def counts(self) -> Iterator[tuple[str, int]]:
        yield from self.conn.execute(
            "SELECT origin, COUNT(*) FROM frontier_queue WHERE state=? GROUP BY origin", (QUEUED,)
        )

    # --- queue -------------------------------------------------------------
    def push(self, origin: str, prio: int, url: str, data: bytes) -> int:
        self._begin()
        cur = self.conn.execute(
            "INSERT INTO frontier_queue (origin, prio, state, url, data) VALUES (?, ?, ?, ?, ?)",
            (origin, prio, QUEUED, url, data),
        )
        assert cur.lastrowid is not None
        return cur.lastrowid

    def push_many(self, rows: list[tuple[str, int, str, bytes]]) -> None:
        """Queue ``(origin, prio, url, data)`` rows (the open transaction), in order.

        Many rows a statement: SQLite's per-statement work (AUTOINCREMENT's
        ``sqlite_sequence`` read and write among it) is then done once for
        :data:`_PUSH_CHUNK` rows, not once a row as with ``executemany``; the ids
        are given in the rows' order either way.
        """
        self._begin()
        conn = self.conn
        for i in range(0, len(rows), _PUSH_CHUNK):
            chunk = rows[i:i + _PUSH_CHUNK]
            conn.execute(_push_sql(len(chunk)), list(chain.from_iterable(chunk)))

    def head(self, origin: str) -> Row | None:
        """The origin's next queued row (highest priority, then first in)."""
        found = self.conn.execute(
            "SELECT id, url, data, prio FROM frontier_queue WHERE origin=? AND state=? "
            "ORDER BY prio DESC, id LIMIT 1",
            (origin, QUEUED),
        ).fetchone()
        return Row(found[0], origin, found[1], found[2], found[3]) if found else None

    def mark_in_flight(self, row_id: int) -> None:
        self._begin()
        self.conn.execute("UPDATE frontier_queue SET state=? WHERE id=?", (IN_FLIGHT, row_id))

    def unmark_in_flight(self, row_id: int) -> bool:
        self._begin()
        cur = self.conn.execute("UPDATE frontier_queue SET state=? WHERE id=? AND state=?",
                                (QUEUED, row_id, IN_FLIGHT))
        return cur.rowcount > 0

    def delete(self, row_id: int) -> None:
        self._begin()
        self.conn.execute("DELETE FROM frontier_queue WHERE id=?", (row_id,))

    def drop_origin(self, origin: str) -> int:
        """Delete every queued row of the origin; returns how many."""
        self._begin()
        cur = self.conn.execute(
            "DELETE FROM frontier_queue WHERE origin=? AND state=?", (origin, QUEUED)
        )
        return cur.rowcount

    # --- URL row templates ---------------------------------------------------
    def template_id(self, data: bytes) -> int:
        """The id of a URL row template (what many rows share: callback, errback, meta)."""
        self._begin()
        self.conn.execute("INSERT OR IGNORE INTO frontier_template (data) VALUES (?)", (data,))
        found = self.conn.execute("SELECT id FROM frontier_template WHERE data=?",
                                  (data,)).fetchone()
        return int(found[0])

    def template(self, template_id: int) -> bytes | None:
        found = self.conn.execute("SELECT data FROM frontier_template WHERE id=?",
                                  (template_id,)).fetchone()
        return bytes(found[0]) if found else None

    # --- seen set ------------------------------------------------------------
    def add_seen(self, fp: bytes) -> bool:
        """Record a fingerprint; False when it was already there."""
        self._begin()
        cur = self.conn.execute("INSERT OR IGNORE INTO frontier_seen (fp) VALUES (?)", (fp,))
        return cur.rowcount == 1

    def add_seen_many(self, fps: list[bytes]) -> list[bool]:
        """Record fingerprints; for each, whether it was new (a repeat in ``fps`` is not)."""
        self._begin()
        new: set[bytes] = set()
        conn = self.conn
        # In key order: each statement's inserts then fall on neighbouring pages of
        # the seen set's B-tree (what is new does not depend on the order).
        ordered = sorted(fps)
        for i in range(0, len(ordered), _IN_CHUNK):
            chunk = ordered[i:i + _IN_CHUNK]
            values = ",".join(["(?)"] * len(chunk))
            new.update(map(itemgetter(0), conn.execute(
                f"INSERT OR IGNORE INTO frontier_seen (fp) VALUES {values} RETURNING fp", chunk)))
        if len(new) == len(fps):  # every one new, and none twice (a sitemap's, mostly)
            return [True] * len(fps)
        out = []
        for fp in fps:
            fresh = fp in new
            if fresh:
                new.discard(fp)
            out.append(fresh)
        return out

    def is_seen(self, fp: bytes) -> bool:
        found = self.conn.execute("SELECT 1 FROM frontier_seen WHERE fp=?", (fp,)).fetchone()
        return found is not None

    # --- stopped origins ---------------------------------------------------
    # A stop's time is kept in a table of its own (frontier_stop_time), not a column of
    # frontier_stopped: a JOBDIR from before opens as it is (its stops have no time:
    # read as 0, before any lift), and code that writes frontier_stopped's two columns
    # (frontier.migrate, store.jobfiles) is left as it is.
    def stop(self, origin: str, reason: str) -> None:
        self._begin()
        self.conn.execute("INSERT OR REPLACE INTO frontier_stopped VALUES (?, ?)", (origin, reason))
        self.conn.execute("INSERT OR REPLACE INTO frontier_stop_time VALUES (?, ?)",
                          (origin, self.clock()))

    def unstop(self, origin: str) -> None:
        """The origin's stop ends (its owner's stop was lifted): a restart no longer
        takes it on."""
        self._begin()
        self.conn.execute("DELETE FROM frontier_stopped WHERE origin=?", (origin,))
        self.conn.execute("DELETE FROM frontier_stop_time WHERE origin=?", (origin,))

    def stopped(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT origin, reason FROM frontier_stopped"))

    def stopped_times(self) -> dict[str, float]:
        """When each stop was recorded (the wall clock, seconds): what a restarted job
        weighs a lift of the stopped origin's owner against (Frontier.restore). A stop
        saved before times were kept has none (0)."""
        return {str(origin): float(at) for origin, at in self.conn.execute(
            "SELECT s.origin, coalesce(t.at, 0) FROM frontier_stopped s "
            "LEFT JOIN frontier_stop_time t ON t.origin = s.origin")}


ORIGIN_TABLE = "polite_origin"
# Host rows: the rest and lease of a host name, across its origins (Frontier's host gate).
HOST_TABLE = "polite_host"
# Owner rows: the daily budget of a registrable domain, shared by its hosts.
OWNER_TABLE = "polite_owner"
# When ``scrapy unblock`` last lifted an owner's stop (lift_owner_stop): a stop a job
# recorded before it is not written back (OriginStore.merge_owners), and a running job
# that holds one ends it at its next checkpoint (OriginStore.owner_lifts).
OWNER_LIFT_TABLE = "polite_owner_lift"
_LIFT_SCHEMA = (f"CREATE TABLE IF NOT EXISTS {OWNER_LIFT_TABLE} "
                "(owner TEXT PRIMARY KEY, lifted REAL NOT NULL)")
# Seconds a lift is kept. A running job takes a lift on at its next checkpoint (every
# few seconds; it reads the lifts since its last read, less OWNER_STOPS_MARGIN), after
# which the row is needed by nobody; a week covers a job stalled that long (a suspended
# machine). An older lift is deleted when the next is written (lift_owner_stop); a job
# stalled longer writes its stop back, the safe side: the owner stays stopped for it.
OWNER_LIFT_KEPT = 7 * 86_400.0
# One owner as a job holds it, for OriginStore.merge_owners: its state (the budget
# count and stop), the budget day and count it last read from or wrote to the row,
# and when the job recorded its own stop (0: none, or one it read from the row).
OwnerDraft = tuple[OriginState, str, int, float]

_ORIGIN_SCHEMA = """
CREATE TABLE IF NOT EXISTS polite_origin (
    origin TEXT PRIMARY KEY,
    next_allowed REAL NOT NULL DEFAULT 0,
    run_id TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL,
    lease_owner TEXT,
    lease_until REAL NOT NULL DEFAULT 0,
    lease_taken REAL NOT NULL DEFAULT 0,
    updated REAL NOT NULL DEFAULT 0
);
"""


# A row's state stored, its lease kept (OriginStore.save, .write).
_SAVE_SQL = (
    "INSERT INTO {table} (origin, next_allowed, run_id, state, updated) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT(origin) DO UPDATE SET next_allowed=excluded.next_allowed, "
    "run_id=excluded.run_id, state=excluded.state, updated=excluded.updated"
)
# A row's state stored and this process's lease of it ended (OriginStore.release, .give_back).
_RELEASE_SQL = (
    "UPDATE {table} SET next_allowed=?, state=?, run_id=?, updated=?, "
    "lease_owner=CASE WHEN lease_owner=? THEN NULL ELSE lease_owner END, "
    "lease_until=CASE WHEN lease_owner=? THEN 0 ELSE lease_until END WHERE origin=?"
)


def process_owner() -> str:
    """Lease owner of this process: ``host:pid:token`` (the token tells a reused pid apart)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class OriginStore:
    """Per-origin state and leases in the shared state DB (every job uses the same rows)."""

    def __init__(self, path: Path | str, owner: str, run_id: str, *,
                 table: str = ORIGIN_TABLE) -> None:
        self.conn = connect(path)
        self.conn.executescript(_ORIGIN_SCHEMA.replace(ORIGIN_TABLE, table))
        # The same rows and leases keyed by host name (HOST_TABLE, the frontier's
        # one-request-in-flight rule across a host's schemes and ports), or by origin.
        self.table = table
        self.owner = owner
        self.run_id = run_id
        # origin -> the ``updated`` stamp of this store's last write of the row: while
        # the row still carries it, nobody else has written it since, and the state
        # this process holds in memory is the stored one (see :meth:`try_lease`).
        self._written: dict[str, float] = {}
        self._lifts_ready = False  # OWNER_LIFT_TABLE and the owner rows' index made

    def close(self) -> None:
        self.conn.close()

    def _read(self, origin: str) -> tuple[OriginState, str, str | None, float, float] | None:
        """``(state, run_id, lease owner, lease end, updated)`` of the row, or None."""
        row = self.conn.execute(
            f"SELECT state, run_id, lease_owner, lease_until, updated FROM {self.table} "
            "WHERE origin=?",
            (origin,),
        ).fetchone()
        if row is None:
            return None
        state = OriginState.from_json(row[0])
        state.origin = origin
        return state, row[1], row[2], row[3], row[4]

    def load(self, origin: str) -> tuple[OriginState, str | None, float]:
        """The stored state (run-scoped parts reset for another run), lease owner and lease end."""
        found = self._read(origin)
        if found is None:
            return OriginState(origin), None, 0.0
        state, run_id, owner, until, _updated = found
        if run_id != self.run_id:
            state.reset_run()
        return state, owner, until

    def try_lease(self, origin: str, now: float, ttl: float, dead_rest: float,
                  state: OriginState | None = None, *, send_at: float | None = None,
                  ) -> Lease:
        """Take the row's lease if nobody holds it and its rest is over (:meth:`take`)."""
        return self.take(origin, now, ttl, dead_rest, state, send_at=send_at)[0]

    def take(self, origin: str, now: float, ttl: float, dead_rest: float,
             state: OriginState | None = None, *, send_at: float | None = None,
             ) -> tuple[Lease, bool]:
        """Take the row's lease if nobody holds it and its rest is over; and whether
        another process wrote the row since this store last did (the rows kept under
        it, its origins', may be newer than this process's copies).

        A lease held by a dead process of this machine is taken over, but not before
        ``dead_rest`` after now (its exchange may have ended at any moment).

        ``state`` is the caller's copy of the row's state. When the row is still
        as this store last wrote it and nobody holds its lease, one conditional
        UPDATE takes the lease and that copy stands; otherwise the row is read
        (and a dead holder's lease taken over) in a transaction. ``send_at``: see
        :meth:`polite_crawler.interfaces.OriginLeases.try_lease`.
        """
        due = now if send_at is None else max(now, send_at)
        stamp = self._written.get(origin)
        if state is not None and stamp is not None:
            at = state.eligible_at()
            if at > due:
                return Lease(LeaseAnswer.RESTING, state, at), False
            cur = self.conn.execute(
                f"UPDATE {self.table} SET lease_owner=?, lease_until=?, lease_taken=?, updated=? "
                "WHERE origin=? AND lease_owner IS NULL AND run_id=? AND updated=?",
                (self.owner, now + ttl, now, now, origin, self.run_id, stamp),
            )
            if cur.rowcount == 1:
                self._written[origin] = now
                return Lease(LeaseAnswer.GRANTED, state, now), False
        self._written.pop(origin, None)
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            found = self._read(origin)
            if found is None:
                state = OriginState(origin)
                conn.execute(
                    f"INSERT INTO {self.table} (origin, next_allowed, run_id, state, updated) "
                    "VALUES (?, 0, ?, ?, ?)",
                    (origin, self.run_id, state.to_json(), now),
                )
                owner, until, other = None, 0.0, False
            else:
                state, run_id, owner, until, updated = found
                other = updated != stamp
                if run_id != self.run_id:
                    state.reset_run()
            if owner is not None and owner != self.owner:
                alive = owner_alive(owner)
                if alive is False or until <= now:
                    # The holder died mid-exchange: rest from now, as if it just ended.
                    state.next_allowed = max(state.next_allowed, now + dead_rest)
                    conn.execute(
                        f"UPDATE {self.table} SET lease_owner=NULL, lease_until=0, next_allowed=?, "
                        "state=?, updated=? WHERE origin=?",
                        (state.next_allowed, state.to_json(), now, origin),
                    )
                    owner = None
                else:
                    conn.execute("COMMIT")
                    return Lease(LeaseAnswer.HELD, state,
                                 min(until, now + max(dead_rest, 0.1))), other
            at = state.eligible_at()
            if at > due:
                conn.execute("COMMIT")
                return Lease(LeaseAnswer.RESTING, state, at), other
            conn.execute(
                f"UPDATE {self.table} SET lease_owner=?, lease_until=?, lease_taken=?, run_id=?, "
                "updated=? WHERE origin=?",
                (self.owner, now + ttl, now, self.run_id, now, origin),
            )
            conn.execute("COMMIT")
            self._written[origin] = now
            return Lease(LeaseAnswer.GRANTED, state, now), other
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def release(self, state: OriginState, now: float) -> None:
        """Store the origin's state and give its lease back (if this process holds it)."""
        cur = self.conn.execute(
            _RELEASE_SQL.format(table=self.table),
            (min(state.next_allowed, 1e18), state.to_json(), self.run_id, now, self.owner,
             self.owner, state.origin),
        )
        if cur.rowcount == 1:
            self._written[state.origin] = now
        else:
            self._written.pop(state.origin, None)

    def save(self, state: OriginState, now: float) -> None:
        """Store the origin's state, keeping whoever holds its lease."""
        self.conn.execute(_SAVE_SQL.format(table=self.table), self._saved(state, now))
        self._written[state.origin] = now

    def _saved(self, state: OriginState, now: float) -> tuple[str, float, str, str, float]:
        return (state.origin, min(state.next_allowed, 1e18), self.run_id, state.to_json(), now)

    def write(self, states: list[OriginState], now: float) -> None:
        """Store the states in one transaction, keeping whoever holds their leases
        (:meth:`save` for many: a checkpoint's rows)."""
        if not states:
            return
        rows = [self._saved(state, now) for state in states]
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(_SAVE_SQL.format(table=self.table), rows)
        for state in states:
            self._written[state.origin] = now

    def merge_owners(self, drafts: list[OwnerDraft], now: float) -> list[OriginState]:
        """Store owners' rows merged with what they hold, in one transaction that
        reads and writes them (BEGIN IMMEDIATE: no other job writes in between); the
        rows as stored, in the drafts' order.

        Jobs of a run share an owner's row, each with its own copy: a whole copy
        written would lose another job's stop and count. So the budget count gets
        this job's pages since its last read (its count less the one it read, or all
        of it when its day is newer), added to the row's count of the same day; a
        row of an older day starts the day from them, one of a newer day keeps its
        own. The row's stop (this run's) stays; this job's own stop is written when
        the row has none, unless ``scrapy unblock`` lifted the owner's stop after
        the job recorded it (the operator's word is the later one). Another run's
        stop is reset as :meth:`load` resets it."""
        if not drafts:
            return []
        conn = self.conn
        self._owner_tables()
        merged: list[OriginState] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for mine, day, used, stopped_at in drafts:
                name = mine.origin
                found = self._read(name)
                if found is None:
                    row = OriginState(name)
                else:
                    row = found[0]
                    if found[1] != self.run_id:
                        row.reset_run()
                new = mine.budget_used - used if mine.budget_day == day else mine.budget_used
                if row.budget_day == mine.budget_day:
                    row.budget_used = max(0, row.budget_used + new)
                elif row.budget_day < mine.budget_day:
                    row.budget_day, row.budget_used = mine.budget_day, max(0, new)
                if row.failure.stopped is None and mine.failure.stopped and stopped_at:
                    lift = conn.execute(
                        f"SELECT lifted FROM {OWNER_LIFT_TABLE} WHERE owner=?", (name,),
                    ).fetchone()
                    if lift is None or stopped_at > lift[0]:
                        row.failure.stopped = mine.failure.stopped
                conn.execute(_SAVE_SQL.format(table=self.table), self._saved(row, now))
                merged.append(row)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        for row in merged:
            self._written[row.origin] = now
        return merged

    def _owner_tables(self) -> None:
        """The lifts' table, and the owner rows indexed by their last write (what
        :meth:`owner_stops` reads at each checkpoint), once a store."""
        if not self._lifts_ready:
            self.conn.execute(_LIFT_SCHEMA)
            self.conn.execute(f"CREATE INDEX IF NOT EXISTS {self.table}_updated "
                              f"ON {self.table} (updated)")
            self._lifts_ready = True

    def owner_stops(self, since: float) -> list[tuple[str, str]]:
        """``(owner, stop)`` of this run's owner rows written after ``since`` that keep
        a stop (another job of the run stored it): what a job that wrote none of them
        learns at its checkpoint. One read; the stop's text is matched before its row
        is parsed."""
        self._owner_tables()
        found = self.conn.execute(
            f"SELECT origin, state FROM {self.table} WHERE updated > ? AND run_id = ? "
            "AND instr(state, '\"stopped\"') > 0", (since, self.run_id)).fetchall()
        stops = []
        for name, text in found:
            stop = OriginState.from_json(text).failure.stopped
            if stop:
                stops.append((str(name), stop))
        return stops

    def owner_lifts(self, since: float) -> list[tuple[str, float]]:
        """``(owner, when)`` of the owners' stops ``scrapy unblock`` lifted after
        ``since`` (:func:`lift_owner_stop`): a job that holds one of them stopped from
        before then ends it (its hosts are asked again). One read of a table of one
        row an unblocked owner, bounded by :data:`OWNER_LIFT_KEPT`."""
        self._owner_tables()
        found = self.conn.execute(
            f"SELECT owner, lifted FROM {OWNER_LIFT_TABLE} WHERE lifted > ?", (since,),
        ).fetchall()
        return [(str(name), float(at)) for name, at in found]

    def give_back(self, states: list[OriginState], now: float) -> None:
        """Store the states and end this process's leases of them, in one transaction
        (:meth:`release` for many)."""
        if not states:
            return
        owner = self.owner
        rows = [(min(s.next_allowed, 1e18), s.to_json(), self.run_id, now, owner, owner, s.origin)
                for s in states]
        with self.conn:
            self.conn.execute("BEGIN")
            self.conn.executemany(_RELEASE_SQL.format(table=self.table), rows)
        for state in states:
            self._written[state.origin] = now

    def renew(self, origins: list[str], now: float, ttl: float) -> None:
        if not origins:
            return
        with self.conn:
            self.conn.execute("BEGIN")  # one transaction, not one a row
            self.conn.executemany(
                f"UPDATE {self.table} SET lease_until=? WHERE origin=? AND lease_owner=?",
                [(now + ttl, o, self.owner) for o in origins],
            )

    def release_all(self) -> None:
        self.conn.execute(
            f"UPDATE {self.table} SET lease_owner=NULL, lease_until=0 WHERE lease_owner=?",
            (self.owner,),
        )


def lift_owner_stop(path: Path | str, owner: str, now: float) -> dict[str, str]:
    """Clear the stop an owner's stored row keeps for its run (a refusal from one of
    the owner's hosts stopped them all, ``Frontier._stop_owner``): the operator lifted
    the block (``scrapy unblock``), so a resumed job or another job of the run asks the
    owner's hosts it has not stopped itself again. The row's other state (its budget
    count, its lease) stays; ``updated`` moves, so a process's copy of the row is read
    again. The lift's time is kept (OWNER_LIFT_TABLE), row or stop or none: a stop a
    running job recorded before it and writes later is not written back
    (:meth:`OriginStore.merge_owners`), and a running job holding the owner's stop
    from before it ends it at its next checkpoint (:meth:`OriginStore.owner_lifts`);
    lifts older than :data:`OWNER_LIFT_KEPT` are deleted. Returns run id -> the stop
    lifted ("<reason> from <origin>"), empty when the row keeps none."""
    conn = connect(path)
    try:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                        (OWNER_TABLE,)).fetchone() is None:
            return {}  # a state directory no crawl with owner rows has written
        conn.execute(_LIFT_SCHEMA)
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                f"INSERT INTO {OWNER_LIFT_TABLE} (owner, lifted) VALUES (?, ?) ON CONFLICT"
                "(owner) DO UPDATE SET lifted=max(lifted, excluded.lifted)", (owner, now))
            conn.execute(f"DELETE FROM {OWNER_LIFT_TABLE} WHERE lifted < ?",
                         (now - OWNER_LIFT_KEPT,))
            row = conn.execute(f"SELECT state, run_id FROM {OWNER_TABLE} WHERE origin=?",
                               (owner,)).fetchone()
            state = OriginState.from_json(row[0]) if row is not None else None
            if state is None or state.failure.stopped is None:
                conn.execute("COMMIT")
                return {}
            stop, state.failure.stopped = state.failure.stopped, None
            state.origin = owner
            conn.execute(f"UPDATE {OWNER_TABLE} SET state=?, updated=? WHERE origin=?",
                         (state.to_json(), now, owner))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return {str(row[1]): stop}
    finally:
        conn.close()


def forget_owner(path: Path | str, origin: str) -> tuple[str, int, list[str]]:
    """What the state DB keeps of the origin's owner (its registrable domain), deleted
    when the origin was its last site kept (``scrapy forget``): the owner's row
    (OWNER_TABLE: the run's budget count and stop) and its lift (OWNER_LIFT_TABLE).
    Another origin of the owner's hosts with a row in ORIGIN_TABLE that is not on the
    opt-out list keeps them: its crawl goes on counting the owner's budget, and a stop
    its refusal set. Returns the owner, the rows deleted, and the origins that keep
    them (empty when deleted), in one transaction."""
    owner = owner_of(host_of_origin(origin))
    conn = connect(path)
    try:
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table'")}
        conn.execute("BEGIN IMMEDIATE")
        try:
            kept = _owners_sites(conn, tables, owner, origin)
            deleted = 0
            if not kept:
                for table, key in ((OWNER_TABLE, "origin"), (OWNER_LIFT_TABLE, "owner")):
                    if table in tables:
                        deleted += conn.execute(f"DELETE FROM {table} WHERE {key}=?",
                                                (owner,)).rowcount
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return owner, deleted, kept
    finally:
        conn.close()


def _owners_sites(conn: sqlite3.Connection, tables: set[str], owner: str,
                  origin: str) -> list[str]:
    """The origins of the owner's hosts, ``origin`` aside, whose state the crawl keeps
    (an ORIGIN_TABLE row) and that are not opted out. The rows whose host is the owner
    or ends in ``.owner`` are read (an index range would need the host reversed: this
    runs once a ``forget``), then each is judged by :func:`owner_of`."""
    if ORIGIN_TABLE not in tables:
        return []
    name = owner.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    found = conn.execute(
        f"SELECT origin FROM {ORIGIN_TABLE} WHERE origin LIKE ? ESCAPE '\\' OR origin "
        "LIKE ? ESCAPE '\\' OR origin LIKE ? ESCAPE '\\' OR origin LIKE ? ESCAPE '\\'",
        (f"%://{name}", f"%://{name}:%", f"%.{name}", f"%.{name}:%")).fetchall()
    opted: set[str] = set()
    if "polite_optout" in tables:
        opted = {str(r[0]) for r in conn.execute("SELECT origin FROM polite_optout")}
    return sorted(o for (o,) in found if o != origin and o not in opted
                  and owner_of(host_of_origin(o)) == owner)
