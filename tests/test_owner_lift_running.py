"""A running job takes ``scrapy unblock``'s lift of an owner's stop on at its next
checkpoint (the embedded backend): the hosts it stopped for the owner's refusal are
asked again, and a refusal after the lift stops the owner again. The job is the
frontier core on the stores the embedded backend opens (real SQLite files in a state
directory), driven as the job drives it, with an injected clock; the unblock is the
command the operator runs, or its store function."""

from __future__ import annotations

import json
import logging
import random
import time
from collections import Counter
from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED, Frontier, FrontierConfig
from polite_crawler.frontier.store import (
    HOST_TABLE,
    ORIGIN_TABLE,
    OWNER_LIFT_KEPT,
    OWNER_LIFT_TABLE,
    OWNER_TABLE,
    OriginStore,
    QueueStore,
    lift_owner_stop,
    process_owner,
)
from polite_crawler.store.paths import ORIGINS_DB, connect
from tests.clock import Clock
from tests.commands_util import scrapy
from tests.frontier_fixtures import PARAMS, EmbeddedFrontier

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

WWW = "http://www.example.org"
CDN = "http://cdn.example.org"
OTHER = "http://other.net"
RUN = "run"


def _job(tmp: Path, clock: Clock, name: str, stats: Counter[str]) -> EmbeddedFrontier:
    """A job of the run RUN: its queue file, the state directory's origin, host and
    owner tables, as the embedded backend opens them."""
    queue = QueueStore(tmp / f"{name}.sqlite3")
    owner = process_owner()
    stores = [OriginStore(tmp / ORIGINS_DB, owner, RUN, table=t)
              for t in (ORIGIN_TABLE, HOST_TABLE, OWNER_TABLE)]
    f = Frontier(queue, stores[0], FrontierConfig(params=PARAMS), clock=clock,
                 rng=random.Random(0), count=lambda k, n: stats.update({k: n}),
                 hosts=stores[1], owners=stores[2])
    f.restore()
    return EmbeddedFrontier(f, queue, *stores)


def _push(job: EmbeddedFrontier, url: str) -> None:
    origin = "/".join(url.split("/", 3)[:3])
    assert job.f.admit(origin) is None, job.f.admit(origin)
    job.f.push(origin, 0, url, url.encode())


def _sent(job: EmbeddedFrontier, clock: Clock) -> list[str]:
    """What the job hands out now and a minute on, each request answered at once (the
    origin released, as the gate frees it after an exchange)."""
    out = []
    for _ in range(60):
        d = job.f.pop()
        while d is not None:
            assert d.row is not None
            out.append(d.row.url)
            job.f.release(d.origin, d.token)
            d = job.f.pop()
        clock.t += 1.0
    return out


def _close(*jobs: EmbeddedFrontier) -> None:
    for job in jobs:
        job.f.close(finished=False)
        for store in (job.queue, job.origins, job.hosts, job.owners):
            store.close()


def _owner_row(tmp: Path) -> str | None:
    store = OriginStore(tmp / ORIGINS_DB, process_owner(), RUN, table=OWNER_TABLE)
    try:
        return store.load("example.org")[0].failure.stopped
    finally:
        store.close()


def _refused(job: EmbeddedFrontier, clock: Clock) -> None:
    """www.example.org refused the crawler: the gate stops it for 403, which stops every
    host of its owner the job knows (cdn.example.org, its page dropped)."""
    _push(job, f"{WWW}/a")
    _push(job, f"{CDN}/1")
    d = job.f.pop()
    while d is not None and d.origin != WWW:
        job.f.release(d.origin, d.token)
        d = job.f.pop()
    assert d is not None
    job.f.release(d.origin, d.token)
    job.f.stop(WWW, "403")
    assert job.f.stopped.get(CDN) == OWNER_REFUSED
    clock.t += 1.0
    job.f.checkpoint()  # the owner's row written with its stop


def test_a_running_job_asks_the_owners_hosts_after_scrapy_unblock(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The operator runs ``scrapy unblock`` while the job runs: at its next checkpoint
    the job ends the owner's stop, logs one line and counts it, and a page of the
    owner's other host found afterwards is sent. The refusing origin's own stop stays
    for the run. (Before: the job kept the owner stopped until it ended.)"""
    clock = Clock(time.time() - 3_600)  # the command's lift is stamped with the wall clock
    stats: Counter[str] = Counter()
    job = _job(tmp_path, clock, "job", stats)
    _refused(job, clock)
    assert _owner_row(tmp_path) == f"403 from {WWW}"

    done = scrapy("unblock", WWW, "--state-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[0]["owner_stops_lifted"]

    clock.t = time.time() + 1.0
    with caplog.at_level(logging.WARNING, logger="polite_crawler.frontier.core"):
        job.f.checkpoint()
    assert CDN not in job.f.stopped
    assert job.f.stopped.get(WWW) == "403"
    assert stats["polite/owner/stop_lifted"] == 1
    lines = [r.getMessage() for r in caplog.records if "was lifted" in r.getMessage()]
    assert lines == ["The stop of owner example.org (403 from http://www.example.org) was "
                     "lifted (scrapy unblock): 1 of its origins are asked again"]
    _push(job, f"{CDN}/2")
    _push(job, "http://new.example.org/1")
    assert sorted(_sent(job, clock)) == [f"{CDN}/2", "http://new.example.org/1"]
    job.f.checkpoint()
    assert _owner_row(tmp_path) is None  # nothing written back
    # What report and explain read of the site: its row no longer says stopped.
    rows = OriginStore(tmp_path / ORIGINS_DB, process_owner(), RUN)
    assert rows.load(CDN)[0].failure.stopped is None
    assert rows.load(WWW)[0].failure.stopped == "403"
    rows.close()
    _close(job)


def test_a_job_that_read_the_stop_from_the_row_ends_it_too(tmp_path: Path) -> None:
    """Job 2 took the owner's stop on from the row job 1 stored; the lift ends it in
    both, each at its own next checkpoint."""
    clock = Clock()
    s1: Counter[str] = Counter()
    s2: Counter[str] = Counter()
    one = _job(tmp_path, clock, "job1", s1)
    two = _job(tmp_path, clock, "job2", s2)
    _push(two, f"{OTHER}/1")
    _push(two, f"{CDN}/1")  # met before the refusal
    _refused(one, clock)
    clock.t += 1.0
    two.f.checkpoint()
    assert two.f.stopped.get(CDN) == OWNER_REFUSED
    clock.t += 1.0
    assert lift_owner_stop(tmp_path / ORIGINS_DB, "example.org", clock.t)
    clock.t += 1.0
    two.f.checkpoint()
    assert CDN not in two.f.stopped and s2["polite/owner/stop_lifted"] == 1
    _push(two, f"{CDN}/2")
    assert f"{CDN}/2" in _sent(two, clock)
    one.f.checkpoint()
    assert CDN not in one.f.stopped and s1["polite/owner/stop_lifted"] == 1
    _close(one, two)


def test_a_refusal_after_the_lift_stops_the_owner_again(tmp_path: Path) -> None:
    """After the lift, another host of the owner refuses: the owner stops again, in the
    job and in its row; the lift, still read within the checkpoints' margin, does not
    end this later stop."""
    clock = Clock()
    stats: Counter[str] = Counter()
    job = _job(tmp_path, clock, "job", stats)
    _refused(job, clock)
    clock.t += 1.0
    lift_owner_stop(tmp_path / ORIGINS_DB, "example.org", clock.t)
    clock.t += 1.0
    job.f.checkpoint()
    assert CDN not in job.f.stopped
    _push(job, f"{CDN}/2")
    _push(job, "http://new.example.org/1")
    clock.t += 1.0
    job.f.stop(CDN, "402")
    assert job.f.stopped.get("http://new.example.org") == OWNER_REFUSED
    for _ in range(3):
        clock.t += 1.0
        job.f.checkpoint()
    assert job.f.stopped.get("http://new.example.org") == OWNER_REFUSED
    assert _owner_row(tmp_path) == f"402 from {CDN}"
    assert stats["polite/owner/stop_lifted"] == 1
    _close(job)


def test_a_lift_is_kept_a_week(tmp_path: Path) -> None:
    """One lift row an unblocked owner, deleted once older than OWNER_LIFT_KEPT when
    the next lift is written: the table does not grow with every unblock ever made."""
    clock = Clock()
    job = _job(tmp_path, clock, "job", Counter())
    _close(job)
    db = tmp_path / ORIGINS_DB
    lift_owner_stop(db, "example.org", clock.t)
    lift_owner_stop(db, "example.net", clock.t + 60)
    lift_owner_stop(db, "example.com", clock.t + OWNER_LIFT_KEPT + 30)
    conn = connect(db)
    kept = sorted(r[0] for r in conn.execute(f"SELECT owner FROM {OWNER_LIFT_TABLE}"))
    conn.close()
    assert kept == ["example.com", "example.net"]
