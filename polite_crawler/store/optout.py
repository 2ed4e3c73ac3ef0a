"""The opt-out list: origins whose owners asked not to be crawled (``scrapy forget``).

Durable, in the origin store (``polite-origins.sqlite3``, :data:`.paths.ORIGINS_DB`),
shared by every job on the state directory. Four tables:

* ``polite_optout``: the refused origins (origin, reason, when);
* ``polite_optout_log``: every change (forget and undo), with what was removed, so
  the operator can show a site owner when the request was acted on;
* ``polite_optout_meta``: the list's version, one integer raised by every change.
  A crawl reads it (one indexed row) and reloads the list only when it moved;
* ``polite_optout_jobs``: every job that honours the list, as it registered on
  opening: its owner (``host:pid:token``), its frontier file (how ``forget`` finds
  the JOBDIR queues), the version it last acknowledged and when it closed.
  ``forget`` waits until every live job has acknowledged the new version: a job
  acknowledges once it holds the new list and nothing of a refused origin is in
  flight, so when ``forget`` returns no request of that origin leaves any job.

With the frontier on Redis the same list lives in Redis instead
(:mod:`polite_crawler.store.redis_optout`), for every worker on every machine.
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polite_crawler.records import Job, OptOut
from polite_crawler.store.jobfiles import edit_queue_file, frontier_files, owner_alive
from polite_crawler.store.paths import connect
from polite_crawler.store.robots import SQLiteRobotsStore

if TYPE_CHECKING:
    from collections.abc import Sequence

_SCHEMA = """
CREATE TABLE IF NOT EXISTS polite_optout (
    origin   TEXT PRIMARY KEY,
    reason   TEXT NOT NULL,
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS polite_optout_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    origin  TEXT NOT NULL,
    action  TEXT NOT NULL,            -- 'forget' or 'undo'
    reason  TEXT NOT NULL,
    at      REAL NOT NULL,
    removed TEXT NOT NULL DEFAULT '{}' -- JSON: what was deleted, by store
);
CREATE TABLE IF NOT EXISTS polite_optout_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS polite_optout_jobs (
    owner      TEXT PRIMARY KEY,      -- host:pid:token
    spider     TEXT NOT NULL,
    queue_path TEXT,                  -- the job's frontier file (JOBDIR or a temporary one)
    opened_at  REAL NOT NULL,
    closed_at  REAL,                  -- NULL while the job runs
    version    INTEGER NOT NULL,      -- the list version it acknowledged
    acked_at   REAL NOT NULL
);
"""


# Seconds ``forget`` waits for a job frontier file another process has locked.
FRONTIER_LOCK_WAIT = 2.0


class OptOutList:
    """The list in one SQLite connection (its own, or the caller's).

    ``jobdir``: the JOBDIR setting of the command using it, one more place a job
    frontier may be (:meth:`clear_frontiers`).
    """

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, db: Path | str | sqlite3.Connection, *, timeout: float = 30.0,
                 jobdir: str | None = None) -> None:
        self.timeout = timeout
        self.jobdir = jobdir
        if isinstance(db, sqlite3.Connection):
            self.conn = db
            self._own = False
            path = next((row[2] for row in db.execute("PRAGMA database_list")
                         if row[1] == "main" and row[2]), None)
        else:
            self.conn = connect(db)
            self.conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
            self._own = True
            path = str(db)
        self.where = path or "the origin store"
        # The state directory: the origin store's own (job frontiers may be under it).
        self.state_dir = Path(path).parent if path else None
        self.conn.executescript(_SCHEMA)

    def close(self) -> None:
        if self._own:
            self.conn.close()

    def check_writable(self) -> None:
        """Raise :class:`sqlite3.OperationalError` unless the list can be written now
        (another process holds the store's write lock)."""
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("ROLLBACK")

    def _has(self, table: str) -> bool:
        return self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?",
                                 (table,)).fetchone() is not None

    def known(self, origin: str) -> bool:
        """Whether the origin store has the origin: its state or a robots.txt copy."""
        return any(self._has(table) and self.conn.execute(
            f"SELECT 1 FROM {table} WHERE origin=?", (origin,)).fetchone() is not None
            for table in ("polite_origin", "robots_txt"))

    def forget_robots(self, origin: str) -> int:
        """Delete the origin's robots.txt copy; 1 if there was one."""
        return SQLiteRobotsStore(self.conn).delete(origin)

    # --- reading (cheap: what a crawl does on its requests) --------------------
    def version(self) -> int:
        row = self.conn.execute(
            "SELECT value FROM polite_optout_meta WHERE key='version'").fetchone()
        return int(row[0]) if row else 0

    def entries(self) -> dict[str, OptOut]:
        return {o: OptOut(o, r, a) for o, r, a in self.conn.execute(
            "SELECT origin, reason, added_at FROM polite_optout ORDER BY added_at")}

    def snapshot(self) -> tuple[int, frozenset[str]]:
        """The version and the origins, read together."""
        self.conn.execute("BEGIN")
        try:
            version = self.version()
            origins = frozenset(r[0] for r in self.conn.execute(
                "SELECT origin FROM polite_optout"))
        finally:
            self.conn.execute("COMMIT")
        return version, origins

    def get(self, origin: str) -> OptOut | None:
        row = self.conn.execute("SELECT origin, reason, added_at FROM polite_optout "
                                "WHERE origin=?", (origin,)).fetchone()
        return OptOut(*row) if row else None

    def log(self, origin: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT origin, action, reason, at, removed FROM polite_optout_log"
        rows = self.conn.execute(sql + (" WHERE origin=? ORDER BY id" if origin else
                                        " ORDER BY id"), (origin,) if origin else ())
        return [{"origin": o, "action": a, "reason": r, "at": t, "removed": json.loads(m)}
                for o, a, r, t, m in rows]

    # --- changing (the forget command) -------------------------------------------
    def _bump(self) -> int:
        self.conn.execute(
            "INSERT INTO polite_optout_meta (key, value) VALUES ('version', 1) "
            "ON CONFLICT(key) DO UPDATE SET value = value + 1")
        return self.version()

    def add(self, origin: str, reason: str, now: float) -> int:
        """Put the origin on the list; returns the new version."""
        return self._change(origin, "forget", reason, now, (
            "INSERT INTO polite_optout (origin, reason, added_at) VALUES (?, ?, ?) "
            "ON CONFLICT(origin) DO UPDATE SET reason=excluded.reason", (origin, reason, now)))

    def remove(self, origin: str, reason: str, now: float) -> int:
        """Take the origin off the list (``--undo``); returns the new version."""
        return self._change(origin, "undo", reason, now,
                            ("DELETE FROM polite_optout WHERE origin=?", (origin,)))

    def _change(self, origin: str, action: str, reason: str, now: float,
                edit: tuple[str, tuple[Any, ...]]) -> int:
        """One change of the list, its log line and the version's bump, in one transaction."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.conn.execute(*edit)
            self.conn.execute("INSERT INTO polite_optout_log (origin, action, reason, at) "
                              "VALUES (?, ?, ?, ?)", (origin, action, reason, now))
            version = self._bump()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        return version

    def record_removed(self, origin: str, removed: dict[str, Any]) -> None:
        """What the last ``forget`` of the origin deleted (kept with its log line)."""
        self.conn.execute(
            "UPDATE polite_optout_log SET removed=? WHERE id=(SELECT MAX(id) FROM "
            "polite_optout_log WHERE origin=? AND action='forget')",
            (json.dumps(removed, sort_keys=True), origin))

    # --- jobs ----------------------------------------------------------------------
    def register(self, owner: str, spider: str, queue_path: str | None, version: int,
                 now: float, *, keep: float = 365 * 86400.0) -> None:
        """A job opens; jobs closed more than ``keep`` seconds ago are forgotten."""
        self.conn.execute("DELETE FROM polite_optout_jobs WHERE closed_at < ?", (now - keep,))
        self.conn.execute(
            "INSERT OR REPLACE INTO polite_optout_jobs (owner, spider, queue_path, opened_at, "
            "closed_at, version, acked_at) VALUES (?, ?, ?, ?, NULL, ?, ?)",
            (owner, spider, queue_path, now, version, now))

    def ack(self, owner: str, version: int, now: float) -> None:
        self.conn.execute("UPDATE polite_optout_jobs SET version=?, acked_at=? WHERE owner=?",
                          (version, now, owner))

    def closed(self, owner: str, now: float) -> None:
        self.conn.execute("UPDATE polite_optout_jobs SET closed_at=? WHERE owner=?",
                          (now, owner))

    def jobs(self, *, running: bool | None = None) -> list[Job]:
        sql = ("SELECT owner, spider, queue_path, opened_at, closed_at, version, acked_at "
               "FROM polite_optout_jobs")
        if running is True:
            sql += " WHERE closed_at IS NULL"
        elif running is False:
            sql += " WHERE closed_at IS NOT NULL"
        return [Job(*row) for row in self.conn.execute(sql + " ORDER BY opened_at")]

    def live(self, jobs: list[Job]) -> set[str]:
        """Owners of the running jobs among ``jobs`` that may still send a request: the
        job's process lives, or is on another machine (where it cannot be asked). A
        running job whose process is gone crashed: it holds nothing, and is recorded
        closed here."""
        out = set()
        for job in jobs:
            if job.closed_at is not None:
                continue
            if owner_alive(job.owner) is False:
                self.closed(job.owner, time.time())
            else:
                out.add(job.owner)
        return out

    # --- the job frontiers (forget) ---------------------------------------------------
    def _frontiers(self, live: list[Job], also: Sequence[str]) -> tuple[list[Path], set[str]]:
        places = [*also, *([self.jobdir] if self.jobdir else [])]
        files = frontier_files(self.state_dir, [j.queue_path for j in self.jobs()], places)
        return files, {j.queue_path for j in live if j.queue_path}

    def clear_frontiers(self, origin: str, live: list[Job],
                        also: Sequence[str] = ()) -> dict[str, int | str]:
        """Delete the origin's queued URLs from every job frontier file found (those the
        jobs registered, the default JOBDIRs, the JOBDIR given, ``also``), except the
        files of the ``live`` jobs, which drop them themselves. Per file: rows deleted,
        or what was done instead."""
        files, held = self._frontiers(live, also)
        wait = min(self.timeout, FRONTIER_LOCK_WAIT)
        return {str(path): "dropped by the running job" if str(path) in held
                else edit_queue_file(path, origin, undo=False, timeout=wait) for path in files}

    def unstop_frontiers(self, origin: str, live: list[Job],
                         also: Sequence[str] = ()) -> dict[str, int | str]:
        """``--undo``: forget the opt-out's stop of the origin in every job frontier file
        found that no ``live`` job holds (a live job keeps it stopped until it ends)."""
        files, held = self._frontiers(live, also)
        wait = min(self.timeout, FRONTIER_LOCK_WAIT)
        return {str(path): edit_queue_file(path, origin, undo=True, timeout=wait)
                for path in files if str(path) not in held}


__all__ = ["Job", "OptOut", "OptOutList"]
