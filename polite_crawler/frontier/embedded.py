"""The frontier scheduler's embedded backend: SQLite files on this machine.

:class:`~polite_crawler.frontier.scheduler.FrontierScheduler` is the one scheduler;
without ``POLITE_FRONTIER`` (:func:`polite_crawler.backend.backend_of`) it runs
:class:`EmbeddedDriver`: the job's queue and seen set in ``JOBDIR`` (a temporary file
in the state directory without one), origin, host and owner state in the state
directory's origin store, shared by the jobs of one machine. The host's row holds the
one lease a job takes (across the host's requests while it has work for it); the origin
and owner rows keep state, written at the frontier's checkpoints
(:class:`polite_crawler.interfaces.SharedRows`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.utils.job import job_dir

from polite_crawler.frontier.core import Frontier
from polite_crawler.frontier.store import (
    HOST_TABLE,
    OWNER_TABLE,
    OriginStore,
    QueueStore,
    process_owner,
)
from polite_crawler.store.jobfiles import QUEUE_DB
from polite_crawler.store.paths import origins_db_path, state_dir

if TYPE_CHECKING:
    from scrapy import Spider

    from polite_crawler.frontier.scheduler import FrontierScheduler

logger = logging.getLogger(__name__)


class EmbeddedDriver:
    """The embedded backend: this job's queue in ``JOBDIR`` (a temporary file in the state
    directory without one), origin state and leases in the state directory's origin
    store, shared by the jobs of one machine (:class:`polite_crawler.interfaces.FrontierDriver`)."""

    shared = None
    # This job's SQLite file: nothing else adds to it or takes from it while the job
    # runs (forget edits the file of no live job; a crash loses the scheduler's memory
    # of it with the rest).
    seen_set_only_grows = True

    def __init__(self, scheduler: FrontierScheduler) -> None:
        self.scheduler = scheduler
        self.frontier: Frontier | None = None
        self._temp_path: Path | None = None

    def _queue_path(self) -> Path:
        settings = self.scheduler.crawler.settings
        jobdir = job_dir(settings)
        if jobdir:
            return Path(jobdir) / QUEUE_DB
        fd, name = tempfile.mkstemp(prefix="frontier-", suffix=".sqlite3",
                                    dir=state_dir(settings))
        os.close(fd)
        self._temp_path = Path(name)
        return self._temp_path

    def open(self, spider: Spider) -> Frontier:
        s = self.scheduler
        queue = QueueStore(self._queue_path(), clock=s.clock)
        owner = process_owner()
        path = origins_db_path(s.crawler.settings)
        origins = OriginStore(path, owner, queue.run_id)
        hosts = OriginStore(path, owner, queue.run_id, table=HOST_TABLE)
        owners = OriginStore(path, owner, queue.run_id, table=OWNER_TABLE)
        f = self.frontier = Frontier(
            queue, origins, s.config, clock=s.clock, rng=s.rng,
            robots=lambda: s.ctx.robots, count=s.hooks.count, hosts=hosts,
            address_of=s.addresses.address, owners=owners,
        )
        requeued = f.restore(queue.stopped_times())
        if f.pending:
            logger.info(
                "Resuming crawl: %(n)d requests queued (%(r)d marked in flight), "
                "every origin resumes after its saved rest",
                {"n": f.pending, "r": requeued},
            )
        return f

    def close(self, finished: bool) -> None:
        f = self.frontier
        if f is None:
            return
        f.close(finished=finished)
        f.queue.close()
        f.origin_store.close()
        for store in (f.host_store, f.owner_store):
            if store is not None:
                store.close()
        self.frontier = None
        if self._temp_path is not None:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{self._temp_path}{suffix}").unlink()

    def outbox(self) -> int:
        return 0

    def mark_seen(self, canonical: str) -> None:
        if self.scheduler.dupefilter is not None:
            self.scheduler.dupefilter.seen_url(canonical)

    def may_send(self, origin: str) -> bool:
        return True  # one process: its leases of the origin store are renewed as it runs
