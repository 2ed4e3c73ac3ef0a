"""A machine's job frontier files and the processes that hold them, as the opt-out list
sees them (``scrapy forget``).

A job's queued URLs and seen set are one SQLite file (:data:`QUEUE_DB`) in its JOBDIR,
or a temporary one in the state directory; the job registers the file with the opt-out
list (:class:`~polite_crawler.store.optout.OptOutList`). A process is named
``host:pid:token`` (``frontier.store.process_owner``), the name that holds its origin
leases too, so whether it still lives is one test for both (:func:`owner_alive`).
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

QUEUE_DB = "polite_frontier.sqlite3"
JOBS_DIR = "jobs"  # under the state directory: the default JOBDIRs


def owner_alive(owner: str) -> bool | None:
    """Whether a lease owner's process lives: True, False, or None (another machine)."""
    try:
        host, pid_text, _ = owner.split(":", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def frontier_files(state: Path | None, registered: Iterable[str | None],
                   also: Iterable[str]) -> list[Path]:
    """Every job frontier file to be found: those the jobs ``registered``, every
    :data:`QUEUE_DB` under ``<state>/jobs/`` (the default JOBDIRs), and ``also``: more
    JOBDIRs, frontier files or directories above some. Each file once."""
    found: list[Path] = [Path(p) for p in registered if p]
    if state is not None:
        found.extend((state / JOBS_DIR).glob(f"**/{QUEUE_DB}"))
    for raw in also:
        root = Path(raw).expanduser()
        if root.is_file():
            found.append(root)
        elif (root / QUEUE_DB).is_file():
            found.append(root / QUEUE_DB)
        else:
            found.extend(root.glob(f"**/{QUEUE_DB}"))
    seen: set[Path] = set()
    out = []
    for path in found:
        resolved = path.resolve()
        if resolved not in seen and resolved.is_file():
            seen.add(resolved)
            out.append(resolved)
    return out


def edit_queue_file(path: Path, origin: str, *, undo: bool, timeout: float) -> int | str:
    """Drop the origin's queued URLs from a job frontier file that no live job holds
    (``scrapy forget``).

    ``undo``: forget that the job stopped the origin for the opt-out instead.
    Returns the rows changed, or why the file was left alone.
    """
    try:
        conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    except sqlite3.Error as exc:
        return f"unreadable: {exc}"
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "frontier_queue" not in tables:
            return "not a job frontier"
        conn.execute("BEGIN IMMEDIATE")
        if undo:
            cur = conn.execute("DELETE FROM frontier_stopped WHERE origin=? AND reason=?",
                               (origin, "opted_out"))
        else:
            cur = conn.execute("DELETE FROM frontier_queue WHERE origin=?", (origin,))
        conn.execute("COMMIT")
        return cur.rowcount
    except sqlite3.OperationalError as exc:
        return f"left alone: {exc}"
    finally:
        conn.close()
