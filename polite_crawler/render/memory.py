"""The memory of the processes this crawl started (the Playwright driver and Chromium).

Read from ``/proc`` (Linux): the memory (PSS) of every descendant of this process.
Elsewhere it reads 0 and the memory limit never triggers.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _children_table() -> dict[int, list[int]]:
    table: dict[int, list[int]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1:
            table.setdefault(int(fields[1]), []).append(int(entry.name))
    return table


def _resident(pid: int) -> int:
    """The process's proportional set size (shared pages split among their users), or
    its resident set where the kernel gives no PSS: Chromium's processes share most
    of their pages, and adding their RSS would count those many times."""
    for name, key in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            for line in (PROC / str(pid) / name).read_text().splitlines():
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            continue
    return 0


def descendants_rss(root: int | None = None) -> int:
    """Bytes resident in all descendants of ``root`` (default: this process), by PSS."""
    if not PROC.is_dir():
        return 0
    table = _children_table()
    todo = list(table.get(root if root is not None else os.getpid(), []))
    total = 0
    seen: set[int] = set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += _resident(pid)
        todo.extend(table.get(pid, []))
    return total
