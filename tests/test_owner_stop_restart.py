"""A restarted job (the same JOBDIR: after a kill, a scrapyd cancel and resume) takes
its queue's saved stops for an owner's refusal (``owner_refused``) on again only while
the owner's stop stands: after ``scrapy unblock`` the owner's other hosts are asked
again, while a stop with no lift, or a refusal after the lift, is kept. The refusing
origin's own stop stays for the run, as a running job keeps it. A real frontier
scheduler on a state directory and a JOBDIR (real SQLite files), stopped and reopened
as a job is; the unblock is the command the operator runs."""

from __future__ import annotations

import json
import logging
import sqlite3
from types import SimpleNamespace
from typing import TYPE_CHECKING

import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.frontier.store import OWNER_LIFT_TABLE
from polite_crawler.middlewares.blocks import block_memory
from polite_crawler.store.jobfiles import QUEUE_DB
from polite_crawler.store.paths import ORIGINS_DB
from tests.commands_util import scrapy
from tests.frontier_fixtures import open_scheduler, site_crawler
from tests.test_resolver import FakeDNS

if TYPE_CHECKING:
    from pathlib import Path

    import pytest
    from scrapy.crawler import Crawler

    from polite_crawler.frontier.core import Frontier
    from polite_crawler.frontier.scheduler import FrontierScheduler

WWW = "http://www.example.org"
CDN = "http://cdn.example.org"
NEW = "http://new.example.org"
OTHER = "http://other.net"
# Every name on this machine's loopback (the resolver's injected lookup): a host is
# sent to once its address is known.
DNS = FakeDNS({name: [["127.0.0.1"]] for name in (
    "www.example.org", "cdn.example.org", "new.example.org", "other.net")})


class Job:
    """One start of the job: the crawler's frontier scheduler on ``tmp`` (the state
    directory) and ``tmp/job`` (the JOBDIR), opened as the engine opens it."""

    def __init__(self, tmp: Path) -> None:
        crawler, spider = site_crawler(tmp, f"{WWW}/", POLITE_DNS_LOOKUP=DNS)
        # No engine runs: the scheduler's wake finds none to wake (the engine's own
        # loop is not under test; the test asks the scheduler itself).
        crawler.engine = SimpleNamespace()  # type: ignore[assignment]
        self.crawler: Crawler = crawler
        self.scheduler: FrontierScheduler = open_scheduler(crawler, spider)
        self.memory = block_memory(crawler)
        self.memory.spider_opened(spider)
        self.spider = spider

    @property
    def f(self) -> Frontier:
        assert self.scheduler.frontier is not None
        return self.scheduler.frontier

    def queue(self, *urls: str) -> int:
        return self.scheduler.enqueue_urls(
            [(u, "/".join(u.split("/", 3)[:3]), None) for u in urls], callback="parse")

    async def sent(self, wanted: int) -> list[str]:
        """The URLs the scheduler hands out until ``wanted`` of them or 5 s (the
        hosts' names looked up meanwhile), each answered at once (the gate frees its
        origin) and done with."""
        out: list[str] = []
        for _ in range(100):
            request = self.scheduler.next_request()
            while request is not None:
                out.append(request.url)
                self.f.release(request.meta["polite_origin"], request.meta["polite_token"])
                self.f.done(request.meta["polite_row"])  # the spider is done with it
                request = self.scheduler.next_request()
            if len(out) >= wanted:
                break
            await deferLater(reactor, 0.05)
        return out

    def refused(self, origin: str, reason: str) -> None:
        """The gate stops the origin for a refusal; the block memory records it."""
        self.f.stop(origin, reason)
        self.memory.sync()

    def end(self) -> None:
        """The job ends (a cancel, a shutdown): its state stored."""
        self.memory.spider_closed(self.spider)
        self.scheduler.close("shutdown")

    def kill(self) -> None:
        """The process is killed: nothing more is written (the queue's stop was
        committed when it was made; the owner's row waits for a checkpoint)."""
        f = self.f
        f.queue.close()
        for store in (f.origin_store, f.host_store, f.owner_store):
            if store is not None:
                store.close()
        self.memory.store.close()
        self.scheduler.frontier = None
        self.scheduler.close("shutdown")


def unblock(tmp: Path, origin: str) -> dict[str, str]:
    done = scrapy("unblock", origin, "--state-dir", str(tmp), "--json")
    assert done.returncode == 0, done.stderr
    lifted: dict[str, str] = json.loads(done.stdout)[0]["owner_stops_lifted"]
    return lifted


def owner_refused(tmp: Path) -> Job:
    """The job queues pages of the owner's two hosts and another site; www refuses
    the crawler (403) and cdn, queued, is stopped for its owner; the job ends."""
    job = Job(tmp)
    assert job.queue(f"{CDN}/1", f"{OTHER}/1") == 2
    job.refused(WWW, "403")
    assert job.f.stopped == {WWW: "403", CDN: OWNER_REFUSED}
    assert job.memory.store.load(WWW) is not None  # the block remembered
    return job


@pytest_twisted.ensureDeferred
async def test_a_restart_after_unblock_asks_the_owners_other_hosts(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Restarted without an unblock, the job keeps cdn stopped for its owner; after
    ``scrapy unblock`` and another restart it drops that saved stop (one line, a
    count) and sends to cdn and to a host of the owner found later. www's own stop
    stays for the run, as in a running job that takes the lift on. (Before: the saved
    stop was taken on again and cdn stayed stopped.)"""
    owner_refused(tmp_path).end()

    again = Job(tmp_path)  # no unblock: the stop stands
    assert again.f.stopped == {WWW: "403", CDN: OWNER_REFUSED}
    assert again.queue(f"{CDN}/2", f"{NEW}/1") == 0
    assert await again.sent(1) == [f"{OTHER}/1"]
    again.end()

    assert unblock(tmp_path, WWW)
    with caplog.at_level(logging.WARNING, logger="polite_crawler.frontier.core"):
        resumed = Job(tmp_path)
    assert resumed.f.stopped == {WWW: "403"}
    lines = [r.getMessage() for r in caplog.records if "saved stop" in r.getMessage()]
    # cdn, and new.example.org the job stopped when it found it after the restart.
    assert lines == ["The saved stop of 2 origins for owner example.org's refusal is not "
                     "taken on again (scrapy unblock lifted it since): they are asked again"]
    assert resumed.crawler.stats is not None
    assert resumed.crawler.stats.get_value("polite/owner/restored_stop_dropped") == 2
    # Pages found since (those refused while stopped are in the seen set, as for a
    # running job that takes a lift on).
    assert resumed.queue(f"{CDN}/3", f"{NEW}/2", f"{WWW}/b") == 2
    assert sorted(await resumed.sent(2)) == [f"{CDN}/3", f"{NEW}/2"]
    resumed.end()

    later = Job(tmp_path)  # the dropped stop is gone from the queue, the lift aside
    assert later.f.stopped == {WWW: "403"}
    later.end()


def test_a_refusal_after_the_lift_is_kept_across_a_restart(tmp_path: Path) -> None:
    """After the unblock the restarted job asks cdn again, and cdn refuses (402): the
    owner stops again (new.example.org with it); the process is killed before a
    checkpoint wrote the owner's row. Restarted, the job keeps the owner's hosts
    stopped: the refusal is later than the lift."""
    owner_refused(tmp_path).end()
    assert unblock(tmp_path, WWW)
    resumed = Job(tmp_path)
    assert resumed.queue(f"{CDN}/2", f"{NEW}/1") == 2
    assert CDN not in resumed.f.stopped
    resumed.refused(CDN, "402")
    assert resumed.f.stopped.get(NEW) == OWNER_REFUSED
    resumed.kill()

    restarted = Job(tmp_path)
    assert restarted.f.stopped == {WWW: "403", CDN: "402", NEW: OWNER_REFUSED}
    assert restarted.queue(f"{NEW}/2") == 0
    restarted.end()


def test_a_running_jobs_lift_holds_after_a_restart(tmp_path: Path) -> None:
    """The job takes the unblock on while it runs (its checkpoint): cdn's saved stop
    goes with it, so a restart after the lift's row is gone (deleted a week on, when
    another lift is written) does not bring it back."""
    job = owner_refused(tmp_path)
    job.f.checkpoint()  # the owner's row written with its stop
    assert unblock(tmp_path, WWW)
    job.f.checkpoint()  # the lift read: cdn asked again
    assert CDN not in job.f.stopped
    job.end()
    with sqlite3.connect(tmp_path / ORIGINS_DB) as db:
        db.execute(f"DELETE FROM {OWNER_LIFT_TABLE}")
    db.close()

    restarted = Job(tmp_path)
    assert restarted.f.stopped == {WWW: "403"}
    assert restarted.queue(f"{CDN}/2") == 1
    restarted.end()


def test_a_jobdir_saved_before_stop_times_opens_and_drops_a_lifted_stop(
        tmp_path: Path) -> None:
    """A JOBDIR whose queue keeps no stop times (written before they were kept) still
    opens: with no lift its stops are taken on again, after an unblock its stop for the
    owner is dropped (a stop without a time is older than any lift)."""
    owner_refused(tmp_path).end()
    with sqlite3.connect(tmp_path / "job" / QUEUE_DB) as db:
        db.execute("DROP TABLE IF EXISTS frontier_stop_time")  # the queue as it was saved before
    db.close()

    again = Job(tmp_path)
    assert again.f.stopped == {WWW: "403", CDN: OWNER_REFUSED}
    again.end()
    with sqlite3.connect(tmp_path / "job" / QUEUE_DB) as db:
        db.execute("DROP TABLE IF EXISTS frontier_stop_time")
    db.close()

    assert unblock(tmp_path, WWW)
    resumed = Job(tmp_path)
    assert resumed.f.stopped == {WWW: "403"}
    assert resumed.queue(f"{CDN}/2") == 1
    resumed.end()
