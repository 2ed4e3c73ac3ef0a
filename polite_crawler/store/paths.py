"""Where durable state lives.

* The shared state directory (POLITE_STATE_DIR): per-origin state, the robots.txt
  cache and the page store. Shared by every job, so two jobs on the same hosts
  coordinate through it. Default: ``.scrapy/polite`` (as Scrapy's own
  ``.scrapy/`` data dir), whatever JOBDIR is, so two runs on the same hosts
  share one in flight and the rests even when each has its own JOBDIR.
* The job directory (Scrapy's JOBDIR): this job's queued requests.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

STATE_DB = "polite.sqlite3"
# Per-origin state, leases and the robots.txt cache: written from the reactor
# thread, so kept apart from the page store's batched transactions.
ORIGINS_DB = "polite-origins.sqlite3"


def state_dir(settings: BaseSettings) -> Path:
    raw = settings.get("POLITE_STATE_DIR") or ".scrapy/polite"
    path = Path(raw).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_db_path(settings: BaseSettings) -> Path:
    return state_dir(settings) / STATE_DB


def origins_db_path(settings: BaseSettings) -> Path:
    return state_dir(settings) / ORIGINS_DB


def connect(path: Path | str, *, wait: float = 30.0) -> sqlite3.Connection:
    """A SQLite connection in WAL mode that waits for other writers (other jobs).

    Switching a new file to WAL can answer "database is locked" at once, without
    SQLite's busy wait, when another process creates the same file at that moment
    (two workers or jobs starting together): the switch is tried again until
    ``wait`` seconds have passed.
    """
    conn = sqlite3.connect(str(path), timeout=wait, isolation_level=None, check_same_thread=False)
    deadline = time.monotonic() + wait
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                conn.close()
                raise
            time.sleep(0.01)  # start-up only: a file being created by another process
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={int(wait * 1000)}")
    return conn
