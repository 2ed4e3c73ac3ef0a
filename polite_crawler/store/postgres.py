"""The page store on PostgreSQL (``POLITE_STORE=postgresql://user@host/db``), psycopg 3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.store.page_backend import SQLPageBackend

if TYPE_CHECKING:
    from collections.abc import Sequence


class PostgresPageBackend(SQLPageBackend):
    dialect = "postgres"

    def __init__(self, uri: str) -> None:
        super().__init__()
        import psycopg  # optional dependency: polite_crawler[postgres]

        self.uri = uri
        # Autocommit: transactions are explicit (BEGIN ... COMMIT), as on SQLite.
        self.conn = psycopg.connect(uri, autocommit=True)
        self._sql: dict[str, str] = {}

    def _convert(self, sql: str) -> str:
        converted = self._sql.get(sql)
        if converted is None:
            # The shared SQL uses "?" placeholders and never a literal "?" or "%".
            converted = self._sql[sql] = sql.replace("?", "%s")
        return converted

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.conn.cursor() as cur:
            if params:
                cur.execute(self._convert(sql), tuple(params))
            else:
                cur.execute(sql)
            return list(cur.fetchall()) if cur.description is not None else []

    def lost(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.OperationalError) and (
            self.conn.broken or self.conn.closed
            or isinstance(exc, (psycopg.errors.AdminShutdown, psycopg.errors.CannotConnectNow)))

    def close(self) -> None:
        if self.in_transaction:
            self.commit()
        self.conn.close()
