"""Trap memory: what a crawl judged a trap, per origin, kept for the next crawls.

One SQLite file in the shared state directory (``polite-traps.sqlite3``): one
row per URL judged a trap page (kind ``url``), per path whose new query strings
are a trap (``path``) and per session-token template (``template``:
``http://host/s/{id}/``, every URL under it a trap page, whatever its token), with
its origin, the reason (the trap rule that revealed it), when it was judged and
when the memory expires (POLITE_TRAP_MEMORY seconds later). Every crawl loads the
rows that have not expired into a :class:`polite_crawler.policy.traps.TrapMemory` when the spider
opens (on a thread); a new judgement is written at once, on a thread of its own (the
reactor never waits for the disk), so a crash does not lose it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from polite_crawler.defaults import polite_settings
from polite_crawler.policy.traps import TrapMemory
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.paths import connect, state_dir

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

TRAPS_DB = "polite-traps.sqlite3"
_ATTR = "_polite_trap_book"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trap_pages (
    url        TEXT PRIMARY KEY,   -- canonical form; for kind 'path': scheme://host/path?;
                                   -- for kind 'template': scheme://host/prefix/{id}/
    origin     TEXT NOT NULL,
    kind       TEXT NOT NULL DEFAULT 'url',  -- 'url': a trap page; 'path': its new queries;
                                             -- 'template': every URL under a session token
    reason     TEXT NOT NULL,      -- the trap rule that revealed it
    judged_at  REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS trap_pages_origin ON trap_pages (origin);
"""


class TrapBook:
    """The durable trap memory of one state directory."""

    def __init__(self, path: Path | str, ttl: float) -> None:
        self.path = str(path)
        self.memory = TrapMemory(ttl=ttl)
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="polite-traps")
        self._loaded = False

    def load(self, now: float) -> int:
        """Read the memory (expired rows are deleted); returns the URLs remembered."""
        conn = connect(self.path)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("DELETE FROM trap_pages WHERE expires_at <= ?", (now,))
            rows = conn.execute(
                "SELECT url, kind, reason, expires_at FROM trap_pages").fetchall()
        finally:
            conn.close()
        for url, kind, reason, expires in rows:
            if kind == "path":
                self.memory.add_path(url, reason, now, expires_at=float(expires))
            elif kind == "template":
                self.memory.add_template(url, reason, now, expires_at=float(expires))
            else:
                self.memory.add(url, reason, now, expires_at=float(expires))
        self._loaded = True
        return len(rows)

    def remembered(self, url: str, now: float) -> str | None:
        if not self._loaded:
            with self._lock:
                if not self._loaded:
                    n = self.load(now)
                    if n:
                        logger.info("Trap memory: %(n)d URLs judged trap pages by earlier "
                                    "crawls are not requested", {"n": n})
        return self.memory.remembered(url, now)

    def path_remembered(self, url: str, now: float) -> str | None:
        self.remembered("", now)  # loaded
        return self.memory.path_remembered(url, now)

    def remember(self, urls: Sequence[str], reason: str, now: float) -> Future[int]:
        """Remember trap pages (in memory now, on disk on the book's thread)."""
        self.remembered("", now)  # loaded first
        new = [u for u in urls if self.memory.add(u, reason, now)]
        expires = now + self.memory.ttl
        rows = [(u, origin_of(u), "url", reason, now, expires) for u in new]
        return self._pool.submit(self._write, rows)

    def remember_path(self, key: str, reason: str, now: float) -> Future[int]:
        """Remember that new query strings of a path (a :func:`query_path` key) are a trap."""
        return self._remember_key("path", key, reason, now)

    def remember_template(self, key: str, reason: str, now: float) -> Future[int]:
        """Remember a session-token template (a :func:`token_split` key) as a trap."""
        return self._remember_key("template", key, reason, now)

    def _remember_key(self, kind: str, key: str, reason: str, now: float) -> Future[int]:
        self.remembered("", now)
        add = self.memory.add_path if kind == "path" else self.memory.add_template
        rows = []
        if add(key, reason, now):
            rows.append((key, origin_of(key.rstrip("?")), kind, reason, now,
                         now + self.memory.ttl))
        return self._pool.submit(self._write, rows)

    def _write(self, rows: list[tuple[str, str, str, str, float, float]]) -> int:
        if not rows:
            return 0
        conn = connect(self.path)
        try:
            conn.executescript(_SCHEMA)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO trap_pages (url, origin, kind, reason, judged_at, expires_at) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (url) DO UPDATE SET "
                "reason = excluded.reason, judged_at = excluded.judged_at, "
                "expires_at = excluded.expires_at", rows)
            conn.execute("COMMIT")
        finally:
            conn.close()
        return len(rows)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def count(self) -> int:
        conn = connect(self.path)
        try:
            conn.executescript(_SCHEMA)
            return int(conn.execute("SELECT COUNT(*) FROM trap_pages").fetchone()[0])
        finally:
            conn.close()


def forget_traps(path: Path | str, origin: str, timeout: float) -> int:
    """Delete what the trap memory at ``path`` holds of ``origin`` (``scrapy forget``);
    returns the rows deleted (0 when there is no memory file or table)."""
    if not Path(path).is_file():
        return 0
    conn = sqlite3.connect(str(path), timeout=timeout)
    try:
        with conn:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' "
                                 "AND name='trap_pages'").fetchone()
            if found is None:
                return 0
            return int(conn.execute("DELETE FROM trap_pages WHERE origin=?",
                                    (origin,)).rowcount)
    finally:
        conn.close()


def trap_book(crawler: Crawler) -> TrapBook:
    """The crawl's trap memory (one per crawler), opened on first use, closed with the spider."""
    book = getattr(crawler, _ATTR, None)
    if book is None:
        from scrapy import signals

        settings = polite_settings(crawler.settings)
        book = TrapBook(state_dir(settings) / TRAPS_DB, settings.getfloat("POLITE_TRAP_MEMORY"))
        setattr(crawler, _ATTR, book)

        async def _open() -> None:
            from scrapy.utils.asyncio import run_in_thread

            from polite_crawler.context import polite_context

            # Read before the first request, off the reactor thread.
            await run_in_thread(book.remembered, "", polite_context(crawler).clock())

        async def _close() -> None:
            from scrapy.utils.asyncio import run_in_thread

            await run_in_thread(book.close)

        crawler.signals.connect(_open, signal=signals.spider_opened, weak=False)
        crawler.signals.connect(_close, signal=signals.spider_closed, weak=False)
    result: TrapBook = book
    return result
