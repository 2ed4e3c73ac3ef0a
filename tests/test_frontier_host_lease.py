"""One lease per host on the embedded backend: the host's row is the lease jobs sharing
a state directory take, held across the host's requests while a job has work for it;
the origin rows under it keep state only, written at checkpoints (at once where the
server asked for a wait). Real SQLite files, an injected clock; no crawl."""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import Counter
from typing import TYPE_CHECKING

from polite_crawler.frontier.core import DISPATCH_MARGIN, Dispatch, FrontierConfig
from polite_crawler.frontier.store import (
    HOST_TABLE,
    ORIGIN_TABLE,
    process_owner,
)
from polite_crawler.policy.verdicts import FailureState
from tests.clock import T0, Clock
from tests.frontier_fixtures import PARAMS, dead_owner, embedded_frontier

if TYPE_CHECKING:
    from pathlib import Path

A = "http://127.0.0.1"
A2 = "https://127.0.0.1"  # the same host name, the other scheme
REST = PARAMS.rest_page
TTL = 30.0


class Job:
    """One job's frontier on the state directory ``tmp`` (as EmbeddedDriver opens it)."""

    def __init__(self, tmp: Path, clock: Clock, name: str) -> None:
        self.clock = clock
        self.stats: Counter[str] = Counter()
        self.statements = 0
        built = embedded_frontier(tmp, clock, FrontierConfig(params=PARAMS, lease_ttl=TTL),
                                  db="origins.sqlite3", owner=process_owner() + name,
                                  job=name, count=self.count, trace=self._traced)
        self.f, self.queue, self.origins = built.f, built.queue, built.origins
        self.hosts, self.owners = built.hosts, built.owners

    def _traced(self, _sql: str) -> None:
        self.statements += 1

    def count(self, key: str, n: int) -> None:
        self.stats[key] += n

    def push(self, url: str) -> None:
        self.f.push(url.rsplit("/", 1)[0], 0, url, url.encode())

    def fetch(self, failure: FailureState | None = None) -> Dispatch | None:
        """Hand out what is due now; settled 0.1 s later and done."""
        d = self.f.pop()
        if d is not None and d.row is not None:
            start = max(self.clock.t, d.not_before)
            self.f.settle(d.origin, d.token, start=start, end=start + 0.1, failure=failure)
            self.f.done(d.row.id)
        return d

    def kill(self) -> None:
        """kill -9: nothing written or given back; its leases held by a dead process."""
        self.queue.commit()
        self.queue.conn.close()
        for table in (ORIGIN_TABLE, HOST_TABLE):
            self.hosts.conn.execute(
                f"UPDATE {table} SET lease_owner=? WHERE lease_owner IS NOT NULL", (dead_owner(),))
        for store in (self.origins, self.hosts, self.owners):
            store.conn.close()

    def close(self) -> None:
        self.f.close(finished=False)
        self.queue.close()
        for store in (self.origins, self.hosts, self.owners):
            store.close()


def _row(tmp: Path, table: str, key: str) -> tuple[dict[str, object], str | None]:
    conn = sqlite3.connect(tmp / "origins.sqlite3")
    try:
        state, owner = conn.execute(f"SELECT state, lease_owner FROM {table} WHERE origin=?",
                                    (key,)).fetchone()
    finally:
        conn.close()
    return json.loads(state), owner


def _started(tmp: Path, clock: Clock, n: int) -> Job:
    """A job with ``n`` rows of one origin, the first fetched (its host's lease held)."""
    job = Job(tmp, clock, "job")
    for i in range(n):
        job.push(f"{A}/{i}")
    clock.t += DISPATCH_MARGIN
    assert job.fetch() is not None
    return job


def _drain(job: Job, until: float) -> list[str]:
    got = []
    while job.clock.t < until:
        d = job.fetch()
        if d is not None and d.row is not None:
            got.append(d.row.url)
        else:
            job.clock.t += 0.05
    return got


def test_a_busy_host_is_leased_once_and_its_requests_write_no_row(tmp_path: Path) -> None:
    clock = Clock(T0)
    job = Job(tmp_path, clock, "job")
    for i in range(6):
        job.push(f"{A}/{i}")
        job.push(f"{A2}/{i}")
    clock.t += DISPATCH_MARGIN
    assert job.fetch() is not None  # the host's lease taken
    first = job.statements
    got = _drain(job, clock.t + 6 * (REST + 0.1) + 1)
    assert len(got) == 6  # one request at a time per host, the whole rest between
    # Requests of a held host ask and write nothing of the shared rows between
    # checkpoints (each took and gave back the host's and the origin's lease), but
    # for the other origin's row at its first request.
    assert job.statements == first + 1
    _state, holder = _row(tmp_path, HOST_TABLE, "127.0.0.1")
    assert holder is not None  # still held: it has work for the host
    job.f.checkpoint()  # the origins' rows written, in one transaction
    state, origin_holder = _row(tmp_path, ORIGIN_TABLE, A)
    assert origin_holder is None  # the origin rows keep state only
    assert state["last_end"] == job.f.state(A).last_end > T0
    assert state["budget_used"] == job.f.state(A).budget_used
    _drain(job, clock.t + 12 * (REST + 0.1))
    _state, holder = _row(tmp_path, HOST_TABLE, "127.0.0.1")
    assert holder is None  # no work left: given back at once
    job.close()


def test_another_job_gets_the_host_when_the_holders_turn_is_over(tmp_path: Path) -> None:
    clock = Clock(T0)
    one, two = Job(tmp_path, clock, "one"), Job(tmp_path, clock, "two")
    for i in range(60):
        one.push(f"{A}/{i}")
    for i in range(3):
        two.push(f"{A2}/{i}")
    clock.t += DISPATCH_MARGIN
    starts: list[tuple[float, str]] = []
    while clock.t < T0 + TTL + 20:
        for job in (one, two):
            d = job.fetch()
            if d is not None and d.row is not None:
                starts.append((max(clock.t, d.not_before), d.origin))
        clock.t += 0.005  # finer than the margin the holder yields its turn by
    assert two.stats["polite/frontier/lease_busy"] > 0  # waited while one held the host
    taken = [t for t, o in starts if o == A2]
    assert len(taken) == 3  # its turn came: the whole lease time, not the whole crawl
    assert min(taken) >= T0 + TTL
    times = sorted(t for t, _o in starts)
    assert min(b - a for a, b in itertools.pairwise(times)) >= REST + 0.1 - 1e-6
    one.close()
    two.close()


def test_kill_9_with_a_held_host_the_heir_rests_and_a_wait_survives(tmp_path: Path) -> None:
    clock = Clock(T0)
    job = _started(tmp_path, clock, 4)
    clock.t += REST + 0.2
    # The server asks for a 300 s wait: stored at once, not at the next checkpoint.
    wait = FailureState(consecutive_failures=1, wait_until=clock.t + 300.0, backoff_streak=1)
    d = job.fetch(failure=wait)
    assert d is not None
    state, _holder = _row(tmp_path, ORIGIN_TABLE, A)
    assert state["failure"]["wait_until"] == wait.wait_until  # type: ignore[index]
    job.kill()
    clock.t += 5.0
    heir = Job(tmp_path, clock, "job")  # the same JOBDIR, restarted
    assert heir.fetch() is None
    assert heir.f.state(A).failure.wait_until == wait.wait_until
    clock.t = wait.wait_until - 1.0
    assert _drain(heir, wait.wait_until) == []
    assert _drain(heir, wait.wait_until + 10) == [f"{A}/2", f"{A}/3"]
    heir.close()


def test_kill_9_while_resting_the_heir_waits_a_rest_from_its_takeover(tmp_path: Path) -> None:
    clock = Clock(T0)
    job = _started(tmp_path, clock, 3)  # the first settled; the host held through its rest
    job.kill()
    heir = Job(tmp_path, clock, "job")
    clock.t += 0.3
    taken_over = clock.t
    while clock.t < taken_over + REST - 0.05:
        assert heir.fetch() is None, clock.t
        clock.t += 0.1
    assert _drain(heir, clock.t + 10) == [f"{A}/1", f"{A}/2"]  # nothing lost
    heir.close()


def test_a_job_taking_a_host_another_held_reads_its_origins_rows(tmp_path: Path) -> None:
    clock = Clock(T0)
    one, two = Job(tmp_path, clock, "one"), Job(tmp_path, clock, "two")
    two.push(f"{A}/two")
    assert two.f.state(A).last_end == 0.0  # read before one fetched anything
    one.push(f"{A}/one")
    clock.t += DISPATCH_MARGIN
    d = one.fetch()
    assert d is not None and d.origin == A
    ended = one.f.state(A).last_end
    # one has no more work: the host given back, the origin's row written with it.
    got = _drain(two, clock.t + 5)
    assert got == [f"{A}/two"]
    assert two.f.state(A).last_end > ended  # its own request, after one's state was read
    assert two.f.state(A).budget_used == 2  # one's count and its own
    one.close()
    two.close()


def test_a_job_frozen_past_its_host_lease_asks_the_row_again(tmp_path: Path) -> None:
    clock = Clock(T0)
    one = _started(tmp_path, clock, 4)  # holds the host through its rest
    two = Job(tmp_path, clock, "two")
    two.push(f"{A2}/x")
    clock.t += TTL + 1.0  # one is frozen: no checkpoint renews its lease
    assert two.fetch() is None  # the lease ran out: taken over, the host rests from now
    clock.t += REST + 2 * DISPATCH_MARGIN
    assert two.fetch() is not None
    assert one.fetch() is None  # one does not send on a lease it no longer holds
    assert one.stats["polite/frontier/lease_busy"] == 1
    one.close()
    two.close()


def test_the_lease_waits_for_what_the_last_response_queues(tmp_path: Path) -> None:
    clock = Clock(T0)
    job = Job(tmp_path, clock, "job")
    job.push(f"{A}/")
    clock.t += DISPATCH_MARGIN
    d = job.f.pop()
    assert d is not None and d.row is not None
    job.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.1)
    taken = job.statements
    job.push(f"{A}/linked")  # the page's link, queued before the spider is done with it
    job.f.done(d.row.id)
    assert job.statements == taken  # kept: not given back and taken again
    assert _row(tmp_path, HOST_TABLE, "127.0.0.1")[1] is not None
    assert _drain(job, clock.t + REST + 1) == [f"{A}/linked"]
    assert _row(tmp_path, HOST_TABLE, "127.0.0.1")[1] is None  # nothing more: given back
    job.close()
