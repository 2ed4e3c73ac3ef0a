"""Sites that refused the crawler, remembered across runs and jobs (the embedded store).

One table, ``origin_blocks``, in the shared state directory's origin store
(``polite-origins.sqlite3``, :mod:`.paths`), beside the robots.txt cache: every job
and every spider on the state directory sees a block as soon as it is written. With
the frontier on Redis the same rows are in Redis instead
(:mod:`polite_crawler.store.redis_blocks`). The rule (how long, doubling) is
:mod:`polite_crawler.policy.blocks`; a store only loads, saves and deletes.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.blocks import Block
from polite_crawler.store.paths import connect

if TYPE_CHECKING:
    from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS origin_blocks (
    origin     TEXT PRIMARY KEY,
    reason     TEXT NOT NULL,     -- "402", "403", "challenge:<name>"
    blocked_at REAL NOT NULL,     -- the last refusal (epoch seconds)
    until      REAL NOT NULL,     -- not asked before this
    count      INTEGER NOT NULL,  -- refusals in a row
    first_at   REAL NOT NULL,     -- the first refusal of the row
    url        TEXT NOT NULL DEFAULT ''
)
"""
_COLUMNS = ("origin", "reason", "blocked_at", "until", "count", "first_at", "url")


def _block(row: Any) -> Block:
    return Block(origin=row[0], reason=row[1], blocked_at=float(row[2]), until=float(row[3]),
                 count=int(row[4]), first_at=float(row[5]), url=row[6] or "")


class SQLiteBlockStore:
    """A :class:`~polite_crawler.interfaces.BlockStore` in the state directory's origin
    store."""

    errors: tuple[type[Exception], ...] = (sqlite3.OperationalError,)

    def __init__(self, db: Path | str, *, readonly: bool = False) -> None:
        if readonly:
            self._conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        else:
            self._conn = connect(db)
            self._conn.execute(_SCHEMA)
        self._lock = threading.Lock()

    def _select(self, where: str = "", args: tuple[Any, ...] = ()) -> list[Block]:
        with self._lock:
            try:
                rows = self._conn.execute(
                    f"SELECT {', '.join(_COLUMNS)} FROM origin_blocks {where}", args).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []  # a state directory no crawl has written a block to
                raise
        return [_block(r) for r in rows]

    def load(self, origin: str) -> Block | None:
        found = self._select("WHERE origin = ?", (origin,))
        return found[0] if found else None

    def all(self) -> list[Block]:
        return self._select("ORDER BY origin")

    def save(self, block: Block) -> None:
        with self._lock:
            self._conn.execute(
                f"INSERT OR REPLACE INTO origin_blocks ({', '.join(_COLUMNS)}) "
                f"VALUES ({', '.join('?' * len(_COLUMNS))})",
                (block.origin, block.reason, block.blocked_at, block.until, block.count,
                 block.first_at, block.url))

    def delete(self, origin: str) -> int:
        with self._lock:
            try:
                return int(self._conn.execute("DELETE FROM origin_blocks WHERE origin = ?",
                                              (origin,)).rowcount)
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return 0
                raise

    def close(self) -> None:
        self._conn.close()


__all__ = ["SQLiteBlockStore"]
