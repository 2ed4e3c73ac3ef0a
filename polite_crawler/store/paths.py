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


def connect(path: Path | str) -> sqlite3.Connection:
    """A SQLite connection in WAL mode that waits for other writers (other jobs)."""
    conn = sqlite3.connect(str(path), timeout=30.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA busy_timeout=30000")
    return conn
