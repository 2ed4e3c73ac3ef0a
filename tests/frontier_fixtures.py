"""Embedded frontiers for tests, built as the crawler builds them.

Three ways a test holds one, from the core alone to the whole scheduler:

* :class:`Env`: the frontier core on a job's queue file and the state directory's
  origin store (``<tmp>/<name>.sqlite3``, ``<tmp>/state.sqlite3``), an injected clock,
  stats counted in a ``Counter``; :func:`with_owner_rows` adds the owner rows of a run.
* :func:`embedded_frontier`: the core with its origin, host and owner tables in one
  origin store, as :class:`polite_crawler.frontier.embedded.EmbeddedDriver` opens them
  (one lease a host, jobs sharing a state directory).
* :func:`site_crawler` and :func:`open_scheduler`: a real ``FrontierScheduler`` for the
  ``site`` spider on a state directory and a JOBDIR.

Real SQLite files always; no crawl, no reactor.
"""

from __future__ import annotations

import gc
import random
import socket
import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from scrapy.utils.test import get_crawler

from polite_crawler.frontier import scheduler as scheduler_module
from polite_crawler.frontier.core import Frontier, FrontierConfig
from polite_crawler.frontier.scheduler import FrontierScheduler
from polite_crawler.frontier.store import (
    HOST_TABLE,
    OWNER_TABLE,
    OriginStore,
    QueueStore,
    process_owner,
)
from polite_crawler.policy.rest import RestParams
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import project_settings_dict

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from scrapy.crawler import Crawler

    from tests.clock import Clock

# The rests the frontier tests reason in: 1 s a page, 0.5 s an API call, five times
# the answer's duration, no jitter (every time exact).
PARAMS = RestParams(rest_page=1.0, rest_api=0.5, duration_factor=5.0, jitter=0.0)


def dead_owner() -> str:
    """A lease owner of this machine whose process is gone (what kill -9 leaves)."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    return f"{socket.gethostname()}:{dead.pid}:gone"


class Robots:
    """A stand-in for the robots.txt book (the frontier's collaborator, not under test)."""

    def __init__(self) -> None:
        self.known: dict[str, bool] = {}  # origin -> allow all?
        self.retry: dict[str, float] = {}
        self.disallow: set[str] = set()
        self.delay: dict[str, float] = {}

    def needs_fetch(self, origin: str) -> bool:
        return origin not in self.known and origin not in self.retry

    def ready(self, origin: str) -> bool:
        return origin in self.known

    def retry_at(self, origin: str) -> float:
        return self.retry.get(origin, 0.0)

    def allowed(self, url: str) -> bool:
        return url not in self.disallow

    def crawl_delay(self, origin: str) -> float | None:
        return self.delay.get(origin)


class Env:
    """The frontier core of one job: its queue file and the shared origin store."""

    def __init__(self, tmp: Path, clock: Clock, name: str = "job", robots: Robots | None = None,
                 config: FrontierConfig | None = None) -> None:
        self.stats: Counter[str] = Counter()
        self.queue = QueueStore(tmp / f"{name}.sqlite3")
        self.store = OriginStore(tmp / "state.sqlite3", process_owner(), self.queue.run_id)
        self.robots = robots
        self.f = Frontier(
            self.queue, self.store, config or FrontierConfig(params=PARAMS), clock=clock,
            rng=random.Random(0), robots=lambda: self.robots,
            count=lambda k, n: self.stats.update({k: n}),
        )

    def push(self, url: str, prio: int = 0) -> int:
        origin = url.split("/", 3)
        return self.f.push("/".join(origin[:3]), prio, url, url.encode())

    def close(self) -> None:
        self.queue.close()
        self.store.close()


def with_owner_rows(tmp: Path, clock: Clock, name: str, run: str, *,
                    config: FrontierConfig | None = None,
                    db: str = "state.sqlite3") -> tuple[Env, OriginStore]:
    """A job (:class:`Env`) of the run ``run`` whose owners' rows are in ``<tmp>/<db>``
    (the rows the run's other jobs read: the owner's stop, its budget)."""
    env = Env(tmp, clock, name=name, config=config)
    owners = OriginStore(tmp / db, process_owner(), run, table=OWNER_TABLE)
    env.f.owner_store = owners
    return env, owners


@dataclass
class EmbeddedFrontier:
    """A frontier core and the stores under it, as the embedded backend opens them."""

    f: Frontier
    queue: QueueStore
    origins: OriginStore
    hosts: OriginStore
    owners: OriginStore


def embedded_frontier(
    tmp: Path, clock: Clock, config: FrontierConfig, *, db: str, owner: str,
    job: str = "job", count: Callable[[str, int], None] | None = None,
    trace: Callable[[str], None] | None = None,
) -> EmbeddedFrontier:
    """A job's frontier on ``<tmp>/<job>.sqlite3`` and the state directory's origin store
    ``<tmp>/<db>`` (origin, host and owner tables), leases taken as ``owner``, restored
    as a starting job is. ``trace``: every SQL statement of the origin store's three
    tables, from their opening on."""
    queue = QueueStore(tmp / f"{job}.sqlite3")
    origins = OriginStore(tmp / db, owner, queue.run_id)
    hosts = OriginStore(tmp / db, owner, queue.run_id, table=HOST_TABLE)
    owners = OriginStore(tmp / db, owner, queue.run_id, table=OWNER_TABLE)
    if trace is not None:
        for store in (origins, hosts, owners):
            store.conn.set_trace_callback(trace)
    f = Frontier(queue, origins, config, clock=clock, rng=random.Random(0),
                 count=count or (lambda _k, _n: None), hosts=hosts, owners=owners)
    f.restore()
    return EmbeddedFrontier(f, queue, origins, hosts, owners)


def site_crawler(tmp: Path, url: str, **settings: Any) -> tuple[Crawler, SiteSpider]:
    """A crawler of the ``site`` spider (start URLs ``url``) with the project's settings,
    its state in ``tmp`` and its job in ``tmp/job``, stats open; no crawl started."""
    crawler = get_crawler(SiteSpider, project_settings_dict(
        POLITE_STATE_DIR=str(tmp), JOBDIR=str(tmp / "job"), **settings))
    spider = SiteSpider.from_crawler(crawler, url=url)
    crawler.spider = spider
    assert crawler.stats is not None
    crawler.stats.open_spider()
    return crawler, spider


def open_scheduler(crawler: Crawler, spider: SiteSpider) -> FrontierScheduler:
    """The crawler's frontier scheduler, opened as the engine opens it."""
    scheduler = FrontierScheduler.from_crawler(crawler)
    scheduler.open(spider)
    return scheduler


@contextmanager
def without_open_collection() -> Iterator[None]:
    """Schedulers opened inside skip the full collection the scheduler makes as it opens
    (``gc.collect()`` before ``gc.freeze()``); freeze and unfreeze stay real. For property
    tests that open schedulers by the hundred: in the test process's heap each collection
    takes 0.1 to 0.3 s and was most of their time, and what they compare (queues, rows,
    stats) does not depend on it."""
    collections = SimpleNamespace(collect=lambda *_args: 0, freeze=gc.freeze,
                                  unfreeze=gc.unfreeze)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler_module, "gc", collections)
        yield
