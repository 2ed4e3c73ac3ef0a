"""The page store on SQLite: the shared state database, WAL, no server."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.store.page_backend import SQLPageBackend
from polite_crawler.store.paths import connect

if TYPE_CHECKING:
    from collections.abc import Sequence


class SQLitePageBackend(SQLPageBackend):
    dialect = "sqlite"

    def __init__(self, path: str, *, wait: float = 30.0) -> None:
        super().__init__()
        self.path = path
        # autocommit mode; WAL; waits up to ``wait`` seconds for other writers
        self.conn = connect(path, wait=wait)

    def begin_sql(self) -> str:
        # Take the write lock now, not at the first write, so a batch never fails half-way
        # on a lock held by another job.
        return "BEGIN IMMEDIATE"

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cur = self.conn.execute(sql, tuple(params))
        rows = cur.fetchall()
        cur.close()
        return rows

    def close(self) -> None:
        if self.in_transaction:
            self.commit()
        self.conn.close()
