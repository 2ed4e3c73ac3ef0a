"""File descriptors are a budget the crawl keeps (pure rules: no Scrapy, no Twisted).

A process may hold at most RLIMIT_NOFILE's soft limit of open descriptors; past it every
``open``, ``socket`` and ``accept`` fails with EMFILE, whatever part of the crawl asked:
a SQLite store opening its write-ahead log, a module imported late, a connection to a
site. So the crawl counts what it needs before it starts, against the limit:

* its own files: the SQLite databases (each connection holds the database, its ``-wal``
  and its ``-shm``: the origin store, the robots.txt book and the opt-out list share
  one file with a connection each, the frontier's queue, the trap memory, the page
  store's writer and reader), the log file, the access log, the stats file and the
  event loop's own (epoll, its waker, standard streams): 32 on a crawl measured on
  Linux (``/proc/PID/fd``), counted as :data:`OWN_FILES`;
* the browser's pipes when it renders (:data:`BROWSER`; Chromium's own descriptors
  are its processes', not the crawler's);
* one descriptor a request in flight (its connection), Scrapy's CONCURRENT_REQUESTS;
* the kept-alive connections waiting for their host's next request, at most
  ``idle`` of them;
* headroom (:func:`headroom`) for what comes and goes: DNS lookups on the thread pool,
  a module imported on first use, a source file read for a traceback.

When the limit cannot hold what was asked, requests in flight come down first to what
fits (the crawl slows, it does not fail), then the kept connections; below
:data:`MIN_REQUESTS` in flight the crawl refuses to start, in one line naming the limit
and what it needs.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

#: The crawl's own open files on Linux, measured (``/proc/PID/fd`` of a crawl of five
#: sites: 23 to 26 besides its sockets), rounded up.
OWN_FILES = 32
#: The browser's share when rendering: Playwright's driver pipes and its own files.
BROWSER = 16
#: Fewer requests in flight than this and the crawl is not worth starting.
MIN_REQUESTS = 4
#: Errors that say the process (EMFILE) or the system (ENFILE) ran out of descriptors.
EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE})


def headroom(limit: int) -> int:
    """Descriptors left free for what comes and goes: a tenth of the limit, at least 32.

    >>> headroom(1024), headroom(100)
    (102, 32)
    """
    return max(32, limit // 10)


def soft_limit_to_ask(soft: int, hard: int, infinity: int) -> int:
    """The soft limit to set: the hard one (as servers such as nginx and systemd's
    services raise theirs), or ``soft`` when it is the higher already. An unlimited hard
    limit (``infinity``) is not asked for as such: 1,048,576 (Linux's default
    ``fs.nr_open``, the most a process may have).

    >>> soft_limit_to_ask(1024, 4096, -1), soft_limit_to_ask(1024, -1, -1)
    (4096, 1048576)
    """
    target = 1 << 20 if hard == infinity else hard
    return max(soft, target) if soft != infinity else soft


@dataclass(frozen=True)
class DescriptorPlan:
    """What the crawl may hold open under ``limit``."""

    limit: int
    requests: int  # requests in flight (Scrapy's CONCURRENT_REQUESTS)
    idle: int  # kept-alive connections waiting for their host's next request
    files: int  # the crawl's own files, the browser's included
    headroom: int
    asked_requests: int
    asked_idle: int
    refusal: str | None = None  # why the crawl cannot start under this limit

    @property
    def needs(self) -> int:
        """Descriptors the plan counts: files, headroom, requests and idle connections."""
        return self.files + self.headroom + self.requests + self.idle

    @property
    def slowed(self) -> bool:
        return self.requests < self.asked_requests

    def describe(self) -> str:
        return (f"{self.limit} open files allowed; counted {self.files} for the crawl's own "
                f"files, {self.headroom} headroom, {self.requests} requests in flight, "
                f"{self.idle} idle kept-alive connections ({self.needs} in all)")


def plan_descriptors(limit: int, requests: int, idle: int, *, browser: bool = False) -> \
        DescriptorPlan:
    """Fit ``requests`` in flight and ``idle`` kept connections under ``limit``.

    >>> p = plan_descriptors(1024, 128, 256)
    >>> (p.requests, p.idle, p.refusal is None)
    (128, 256, True)
    >>> p = plan_descriptors(256, 128, 256)
    >>> (p.requests, p.idle, p.slowed)
    (128, 64, False)
    >>> p = plan_descriptors(128, 128, 256)
    >>> (p.requests, p.idle, p.slowed)
    (64, 0, True)
    >>> plan_descriptors(64, 128, 256).refusal is not None
    True
    >>> plan_descriptors(20000, 2, 0).refusal is None  # fewer asked for than the minimum
    True
    """
    files = OWN_FILES + (BROWSER if browser else 0)
    spare = max(limit - files - headroom(limit), 0)
    fitted = min(requests, spare) if requests > 0 else spare
    kept = min(idle, spare - fitted)
    refusal = None
    # Refused only when the limit cuts below the minimum what was asked for: a crawl
    # that asks for fewer requests in flight than MIN_REQUESTS gets what it asked.
    if fitted < min(MIN_REQUESTS, requests if requests > 0 else MIN_REQUESTS):
        need = files + headroom(limit) + MIN_REQUESTS
        refusal = (f"the open-file limit (RLIMIT_NOFILE, ulimit -n) is {limit}; the crawl "
                   f"needs at least {need} ({files} for its own files, "
                   f"{headroom(limit)} headroom, {MIN_REQUESTS} connections): raise it "
                   f"(ulimit -n, LimitNOFILE= for a systemd service)")
    return DescriptorPlan(limit, fitted, max(kept, 0), files, headroom(limit), requests, idle,
                          refusal)


def keep_for(rest_floor: float, keep: float) -> float:
    """Seconds an idle kept-alive connection stays open: ``keep`` when its host's next
    request may come before then (its rest, ``rest_floor``, is shorter), else 0 (closed
    now: the connection would only hold a descriptor through the rest, and a server
    closes it anyway after its own keep-alive time).

    >>> keep_for(3.0, 4.0), keep_for(10.0, 4.0)
    (4.0, 0.0)
    """
    return keep if rest_floor < keep else 0.0


def is_exhaustion(code: int | None) -> bool:
    """Whether an OSError's ``errno`` says the descriptors ran out.

    >>> is_exhaustion(errno.EMFILE), is_exhaustion(errno.ECONNREFUSED), is_exhaustion(None)
    (True, False, False)
    """
    return code in EXHAUSTED


__all__ = ["DescriptorPlan", "headroom", "is_exhaustion", "keep_for", "plan_descriptors",
           "soft_limit_to_ask"]
