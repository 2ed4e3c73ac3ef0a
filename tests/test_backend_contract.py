"""One contract, two backends: every rule below runs on the embedded backend (SQLite,
a JOBDIR file) and on the cluster one (a real redis-server, a real PostgreSQL), so a
rule cannot hold on one and not the other.

The frontier core is the same object on both; what differs is the stores under it and,
on the cluster, the batches that keep them in step (``sync``). A crash is what kill -9
leaves: on the embedded backend the job's files as they were, its leases held by a
process that is gone; on the cluster the worker's lease key vanished from Redis.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import socket
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from polite_crawler.backend import Backend
from polite_crawler.frontier.core import (
    CONTENT,
    DISPATCH_MARGIN,
    Dispatch,
    FrontierConfig,
)
from polite_crawler.frontier.dupefilter import url_fingerprint
from polite_crawler.frontier.redis_frontier import RedisFrontier
from polite_crawler.frontier.redis_shared import RedisShared
from polite_crawler.frontier.store import (
    HOST_TABLE,
    ORIGIN_TABLE,
    QueueStore,
    process_owner,
)
from polite_crawler.policy.rest import OriginState, utc_day
from polite_crawler.store.optout import OptOutList
from polite_crawler.store.pages import FetchRecord
from polite_crawler.store.paths import ORIGINS_DB, STATE_DB
from polite_crawler.store.redis_keys import alive_key, until_key
from polite_crawler.store.redis_optout import RedisOptOutList
from polite_crawler.store.redis_robots import RedisRobotsStore
from polite_crawler.store.robots import RobotsBook, SQLiteRobotsStore
from tests.clock import Clock
from tests.frontier_fixtures import PARAMS, dead_owner, embedded_frontier
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.robots_numbers import ROBOTS_NUMBERS
from tests.test_commands_forget import page

if TYPE_CHECKING:
    from pathlib import Path

T0 = 1_790_000_000.0
A = "http://127.0.0.1:8000"
B = "http://127.0.0.2:8000"
REST = PARAMS.rest_page
TTL = 30.0
TIMEOUT = 5.0  # no exchange lasts longer (the download handler's bound)


class Worker:
    """One process's frontier on the backend under test."""

    def __init__(self, side: Side, name: str, job: str = "job") -> None:
        self.side = side
        self.stats: Counter[str] = Counter()
        clock, config = side.clock, FrontierConfig(params=PARAMS, budget=side.budget)
        count = self.count
        self.sync_: RedisFrontier | None = None
        if side.kind == "embedded":
            built = embedded_frontier(side.tmp, clock, config, db=ORIGINS_DB,
                                      owner=f"{process_owner()}{name}", job=job, count=count)
            self.f, self.queue, self.store = built.f, built.queue, built.origins
            self.hosts, self.owners = built.hosts, built.owners
        else:
            shared = RedisShared(side.url, "contract", f"{socket.gethostname()}:{name}")
            shared.register(clock(), TTL)
            self.sync_ = RedisFrontier(shared, config, clock=clock, ttl=TTL, interval=0.5,
                                       exchange_timeout=TIMEOUT, clock_skew=0.0,
                                       rng=random.Random(0), count=count)
            self.sync_.origin_store.valid_until = clock() + TTL - self.sync_.margin
            # The test clock runs far ahead of this Redis's real uptime: no take here
            # follows a restart (the restart rule is tested in test_redis_faults).
            self.sync_.restart_window = 0.0
            self.f = self.sync_.frontier

    def count(self, key: str, n: int) -> None:
        self.stats[key] += n

    def sync(self) -> None:
        """What the backend does between reactor calls: nothing on SQLite (every call
        writes), a batch on the cluster."""
        if self.sync_ is not None:
            self.sync_.run_batch()

    def offer(self, url: str, prio: int = 0) -> None:
        """A URL as the scheduler queues it: the seen set first, then the row."""
        origin = url.split("/", 3)
        fp = url_fingerprint(url)
        if self.f.queue.add_seen_many([fp])[0]:
            self.f.push("/".join(origin[:3]), prio, url, url.encode())

    def pop(self) -> Dispatch | None:
        self.sync()
        return self.f.pop()

    def drain(self, until: float) -> list[str]:
        """Every URL this worker dispatches until ``until``, each exchange 0.1 s long
        and done at once."""
        out = []
        clock = self.side.clock
        while clock.t < until:
            d = self.pop()
            if d is not None and d.kind == CONTENT and d.row is not None:
                out.append(d.row.url)
                self.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.1)
                self.f.done(d.row.id)
                continue
            if d is not None:
                self.f.release(d.origin, d.token)
            clock.t += 0.25
        return out

    def kill(self) -> None:
        """kill -9: nothing is closed or given back."""
        if self.sync_ is None:
            self.queue.commit()
            self.queue.conn.close()
            gone = dead_owner()
            for table in (ORIGIN_TABLE, HOST_TABLE):
                self.store.conn.execute(
                    f"UPDATE {table} SET lease_owner=? WHERE lease_owner IS NOT NULL",
                    (gone,))
            self.store.conn.close()
            self.hosts.conn.close()
            self.owners.conn.close()
        else:
            self.sync_.shared.r.delete(alive_key(self.sync_.shared.worker))

    def lease_end(self) -> float:
        """When the killed process's last exchange ended at the latest, as the backend
        bounds it (the cluster: the lease end plus the exchange timeout)."""
        if self.sync_ is None:
            return self.side.clock.t
        return float(self.sync_.shared.r.get(until_key(self.sync_.shared.worker))) + TIMEOUT

    def close(self) -> None:
        if self.sync_ is None:
            self.f.close(finished=False)
            self.queue.close()
            self.store.close()
            self.hosts.close()
            self.owners.close()
        else:
            self.sync_.close(finished=False)
            self.sync_.shared.close()


class Side:
    """One backend, its stores on real servers (or files) of its own."""

    def __init__(self, kind: str, tmp: Path, url: str, pg: str) -> None:
        self.kind, self.tmp, self.url, self.pg = kind, tmp, url, pg
        self.clock = Clock(T0)
        self.budget = 10_000
        self.workers: list[Worker] = []
        self.backend = Backend(url if kind == "cluster" else "",
                               pg if kind == "cluster" else "")

    def worker(self, name: str = "w1", job: str = "job") -> Worker:
        """A process of the crawl (``job``: its JOBDIR on the embedded backend; two
        jobs share the state directory, as scrapyd runs them)."""
        w = Worker(self, name, job)
        self.workers.append(w)
        return w

    def robots_store(self) -> Any:
        if self.kind == "cluster":
            return RedisRobotsStore(self.url)
        return SQLiteRobotsStore(self.tmp / ORIGINS_DB)

    def optout(self) -> Any:
        if self.kind == "cluster":
            return RedisOptOutList(self.url)
        return OptOutList(self.tmp / ORIGINS_DB)

    def settings(self) -> Any:
        from scrapy.settings import Settings

        return Settings({"POLITE_FRONTIER": self.backend.frontier_url,
                         "POLITE_STORE": self.backend.store_uri,
                         "POLITE_STATE_DIR": str(self.tmp)})


@pytest.fixture(params=["embedded", "cluster"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "cluster":
        url = request.getfixturevalue("redis_url")
        request.getfixturevalue("redis_server_session").client().flushdb()
        pg = request.getfixturevalue("pg_uri")
    else:
        url = pg = ""
    s = Side(request.param, tmp_path, url, pg)
    yield s
    for w in s.workers:
        with contextlib.suppress(Exception):  # a killed worker's stores are gone already
            w.close()


# --- the frontier --------------------------------------------------------------------------

def test_one_in_flight_per_origin_and_the_rest_from_the_end(side: Side) -> None:
    w = side.worker()
    w.offer(f"{A}/1")
    w.offer(f"{A}/2")
    w.sync()
    side.clock.t += DISPATCH_MARGIN
    d = w.pop()
    assert d is not None and d.kind == CONTENT and d.row is not None and d.row.url == f"{A}/1"
    assert w.pop() is None  # in flight: nothing more of the origin
    end = side.clock.t + 0.4
    rest = w.f.settle(A, d.token, start=side.clock.t, end=end)
    assert rest is not None and rest.total == pytest.approx(2.0)  # 5 x 0.4 s over 1 s
    w.f.done(d.row.id)
    side.clock.t = end + 2.0 - 0.01
    assert w.pop() is None
    side.clock.t = end + 2.0 + 2 * DISPATCH_MARGIN
    d2 = w.pop()
    assert d2 is not None and d2.row is not None and d2.row.url == f"{A}/2"


# One host name, three origins: two ports and the other scheme (loopback names; no
# exchange reaches the network here).
HOSTS = ("http://127.0.0.1:8000", "http://127.0.0.1:8001", "https://127.0.0.1")


def _host_log(workers: list[Worker], clock: Any, until: float) -> list[tuple[float, str]]:
    """Dispatches of every worker until ``until``: (start, origin), each exchange
    0.1 s long and settled at once; the workers take turns."""
    log = []
    while clock.t < until:
        for w in workers:
            d = w.pop()
            if d is None:
                continue
            if d.kind == CONTENT and d.row is not None:
                start = max(clock.t, d.not_before)
                log.append((start, d.origin))
                w.f.settle(d.origin, d.token, start=start, end=start + 0.1)
                w.f.done(d.row.id)
            else:
                w.f.release(d.origin, d.token)
        clock.t += 0.05
    return log


def _assert_one_host_at_a_time(log: list[tuple[float, str]]) -> None:
    starts = sorted(t for t, _o in log)
    gaps = [b - (a + 0.1) for a, b in itertools.pairwise(starts)]
    assert gaps and min(gaps) >= REST - 1e-6, gaps  # the whole rest, whichever origin


def test_one_in_flight_and_the_rest_per_host_across_schemes_and_ports(side: Side) -> None:
    w = side.worker()
    for origin in HOSTS:
        for i in range(3):
            w.offer(f"{origin}/{i}")
    w.sync()
    side.clock.t += DISPATCH_MARGIN
    d = w.pop()
    assert d is not None and d.kind == CONTENT
    assert w.pop() is None  # another origin of the host waits: one request per host name
    assert w.stats["polite/frontier/host_busy"] >= 1
    first = side.clock.t
    w.f.settle(d.origin, d.token, start=first, end=first + 0.1)
    w.f.done(d.row.id if d.row else None)
    side.clock.t += 0.1 + REST - 0.05
    assert w.pop() is None  # the host's rest holds its other origins too
    log = _host_log([w], side.clock, side.clock.t + 60)
    assert len(log) == 8  # every row fetched
    _assert_one_host_at_a_time([(first, d.origin), *log])


def test_two_workers_keep_one_request_per_host(side: Side) -> None:
    """Two processes (two jobs on one state directory; two cluster workers), each
    queuing a different origin of one host: one request at a time and the whole rest
    between them, across both."""
    w1, w2 = side.worker("w1", "job1"), side.worker("w2", "job2")
    for i in range(4):
        w1.offer(f"{HOSTS[0]}/{i}")
    w1.sync()
    for i in range(4):
        w2.offer(f"{HOSTS[1]}/{i}")
    w2.sync()
    side.clock.t += DISPATCH_MARGIN
    log = _host_log([w1, w2], side.clock, side.clock.t + 60)
    assert sorted(o for _t, o in log) == [HOSTS[0]] * 4 + [HOSTS[1]] * 4
    _assert_one_host_at_a_time(log)
    if side.kind == "cluster":
        # The worker holding the host took the other worker's origin of it.
        assert w1.stats["polite/redis/origin_taken"] == 2
        assert w2.stats["polite/redis/origin_taken"] == 0


def test_priority_then_first_in(side: Side) -> None:
    w = side.worker()
    for path, prio in (("/low1", 0), ("/high", 5), ("/low2", 0)):
        w.offer(f"{A}{path}", prio)
    w.sync()
    got = w.drain(side.clock.t + 20)
    assert got == [f"{A}/high", f"{A}/low1", f"{A}/low2"]


def test_first_in_across_pushes(side: Side) -> None:
    """The row counter goes on from one push to the next (later rows sort after)."""
    w = side.worker()
    for path in ("/b1", "/b2"):
        w.offer(f"{A}{path}")
    w.sync()
    w.offer(f"{A}/a1")
    w.sync()
    w.offer(f"{A}/a0")
    w.sync()
    got = w.drain(side.clock.t + 20)
    assert got == [f"{A}/b1", f"{A}/b2", f"{A}/a1", f"{A}/a0"]


def test_a_url_is_queued_once(side: Side) -> None:
    w = side.worker()
    w.offer(f"{A}/1")
    w.sync()
    w.offer(f"{A}/1")
    w.offer(f"{B}/1")
    w.offer(f"{B}/1")
    w.sync()
    got = w.drain(side.clock.t + 20)
    assert sorted(got) == [f"{A}/1", f"{B}/1"]


def test_a_stop_drops_the_queue_and_outlives_the_process(side: Side) -> None:
    w = side.worker()
    for i in range(4):
        w.offer(f"{A}/{i}")
    w.offer(f"{B}/0")
    w.sync()
    w.f.stop(A, "403")
    assert w.f.admit(A) == "stopped"
    got = w.drain(side.clock.t + 10)
    assert got == [f"{B}/0"]
    w.close()
    side.workers.remove(w)
    again = side.worker("w2")
    again.sync()
    again.offer(f"{A}/new")
    again.sync()
    assert again.drain(side.clock.t + 10) == []


def test_the_daily_budget(side: Side) -> None:
    side.budget = 2
    w = side.worker()
    for i in range(5):
        w.offer(f"{A}/{i}")
    w.sync()
    assert len(w.drain(side.clock.t + 30)) == 2


def test_kill_9_loses_no_row_and_the_next_owner_waits(side: Side) -> None:
    w = side.worker()
    for i in range(3):
        w.offer(f"{A}/{i}")
    w.sync()
    first = w.drain(side.clock.t + 0.5)  # one page fetched and done
    assert first == [f"{A}/0"]
    side.clock.t += REST + 0.2
    d = w.pop()  # in flight at the crash: fetched, never done
    assert d is not None and d.row is not None and d.row.url == f"{A}/1"
    sent = side.clock.t
    w.kill()
    bound = w.lease_end()
    side.workers.remove(w)
    side.clock.t = sent + 0.5
    heir = side.worker("w2")
    heir.sync()
    # Not before the killed exchange could have ended, plus a rest.
    while side.clock.t < max(bound, sent) + REST - 0.05:
        assert heir.pop() is None, side.clock.t
        side.clock.t += 0.5
    got = heir.drain(side.clock.t + 30)
    assert got == [f"{A}/1", f"{A}/2"]  # the row in flight is fetched again; none is lost


def test_a_held_row_stays_until_released(side: Side) -> None:
    def fetch_and_hold(w: Worker) -> None:
        side.clock.t += REST + DISPATCH_MARGIN
        d = w.pop()
        assert d is not None and d.row is not None and d.row.url == f"{A}/page"
        w.f.settle(A, d.token, start=side.clock.t, end=side.clock.t + 0.1)
        w.f.hold(d.row.id, A)  # the spider keeps the page's links until A's sitemaps are read
        w.sync()

    w = side.worker()
    w.offer(f"{A}/page")
    w.sync()
    fetch_and_hold(w)
    w.kill()
    side.workers.remove(w)
    side.clock.t += TTL + TIMEOUT + 10
    heir = side.worker("w2")
    heir.sync()
    fetch_and_hold(heir)  # kept through the crash: fetched again
    heir.f.release_held(A)  # the links are queued now: the row goes
    heir.sync()
    heir.kill()
    side.workers.remove(heir)
    side.clock.t += TTL + TIMEOUT + 10
    last = side.worker("w3")
    last.sync()
    assert last.drain(side.clock.t + 10) == []


# --- the robots.txt store, the opt-out list, the page store, the reader -------------------

def test_the_robots_txt_book_keeps_its_rules_on_either_store(side: Side) -> None:
    clock = Clock(time.time())
    book = RobotsBook(side.robots_store(), "PoliteCrawler", clock=clock, **ROBOTS_NUMBERS)
    book.record_answer(A, 200, b"User-agent: *\nDisallow: /private\n")
    book.record_failure(B, "status 503")
    book.close()
    again = RobotsBook(side.robots_store(), "PoliteCrawler", clock=clock, **ROBOTS_NUMBERS)
    assert again.ready(A) and not again.allowed(f"{A}/private/x") and again.allowed(f"{A}/x")
    assert not again.ready(B)  # unreachable, no copy: nothing of it is fetched
    clock.t += 25 * 3600  # stale: fetched again first, the last good copy kept meanwhile
    assert again.needs_fetch(A)
    again.record_failure(A, "status 503")
    assert again.ready(A) and not again.allowed(f"{A}/private/x")
    again.close()


def test_the_opt_out_list_on_either_store(side: Side) -> None:
    lst = side.optout()
    v0 = lst.version()
    v1 = lst.add(A, "mail", 100.0)
    assert v1 > v0 and lst.get(A) is not None and lst.get(A).reason == "mail"
    assert list(lst.entries()) == [A]
    lst.record_removed(A, {"pages": 2})
    v2 = lst.remove(A, "undo", 200.0)
    assert v2 > v1 and lst.get(A) is None and lst.entries() == {}
    actions = [e["action"] for e in lst.log(A)]
    assert sorted(actions) == ["forget", "undo"]
    lst.close()


def test_the_block_store_on_either_store(side: Side) -> None:
    """The remembered refusals (``Backend.block_store``): what is saved is loaded back
    as it was, by every process on the backend; a save replaces the origin's block; a
    delete says whether there was one."""
    from polite_crawler.policy.blocks import Block, record_refusal

    store = side.backend.block_store(side.settings())
    other = side.backend.block_store(side.settings())  # another job, another worker
    assert store.load(A) is None and store.all() == [] and store.delete(A) == 0
    assert all(issubclass(e, Exception) for e in store.errors) and store.errors
    first = record_refusal(None, A, "403", T0, url=f"{A}/x")
    store.save(first)
    store.save(Block(B, "challenge:cloudflare", T0, T0 + 60.0, 3, T0 - 5.0, f"{B}/"))
    assert other.load(A) == first and first.count == 1
    again = record_refusal(other.load(A), A, "402", T0 + 90_000.0)
    other.save(again)
    assert store.load(A) == again and again.count == 2 and again.until > first.until
    assert [b.origin for b in store.all()] == [A, B]
    assert store.all()[1] == Block(B, "challenge:cloudflare", T0, T0 + 60.0, 3, T0 - 5.0,
                                   f"{B}/")
    assert other.delete(A) == 1 and store.load(A) is None and store.delete(A) == 0
    assert [b.origin for b in other.all()] == [B]
    store.close()
    other.close()


def _register(side: Side, lst: Any, owner: str, *, alive: bool) -> None:
    """A job registers with the list as its opt-out middleware does; ``alive``: its
    process is there (embedded: ``owner`` names a live or a dead process) or its
    heartbeat is (cluster)."""
    if side.kind == "cluster":
        lst.register(owner, "site", "contract", f"{owner}:w", version=lst.version(),
                     now=time.time(), alive_ttl=60.0)
        if not alive:
            lst.r.delete(lst.alive_key(owner))
    else:
        lst.register(owner, "site", None, lst.version(), time.time())


def test_the_opt_out_store_judges_live_one_way(side: Side) -> None:
    lst = side.optout()
    try:
        alive = process_owner() if side.kind == "embedded" else "h:1:a"
        gone = dead_owner() if side.kind == "embedded" else "h:2:b"
        closed = f"{process_owner()}closed" if side.kind == "embedded" else "h:3:c"
        for owner, up in ((alive, True), (gone, False), (closed, True)):
            _register(side, lst, owner, alive=up)
        lst.closed(closed, time.time())
        assert {j.owner for j in lst.jobs(running=True)} >= {alive} and \
            closed not in {j.owner for j in lst.jobs(running=True)}
        assert lst.live(lst.jobs()) == {alive}
        assert lst.live(lst.jobs(running=True)) == {alive}  # judged the same again
    finally:
        lst.close()


def test_the_opt_out_store_knows_an_origin_and_forgets_its_robots_txt(side: Side) -> None:
    lst = side.optout()
    try:
        assert not lst.known(A) and not lst.known(B)
        book = RobotsBook(side.robots_store(), "PoliteCrawler", clock=Clock(time.time()),
                          **ROBOTS_NUMBERS)
        book.record_answer(A, 200, b"User-agent: *\nAllow: /\n")
        book.close()
        w = side.worker()
        w.offer(f"{B}/1")
        w.sync()
        d = w.pop()
        assert d is not None
        w.f.settle(B, d.token, start=side.clock.t, end=side.clock.t + 0.2)
        w.sync()  # the origin's state is written (the cluster: with the batch)
        assert lst.known(A) and lst.known(B)
        assert lst.forget_robots(A) == 1
        assert lst.forget_robots(A) == 0
        assert not lst.known(A) and lst.known(B)
    finally:
        lst.close()


def test_the_opt_out_store_clears_and_unstops_the_frontiers(side: Side) -> None:
    w = side.worker()
    for url in (f"{A}/1", f"{A}/2", f"{B}/1"):
        w.offer(url)
    w.f.queue.commit()
    w.sync()
    # The embedded job's frontier file, as the operator names it (--jobdir); a cluster's
    # crawls are found in Redis.
    also = [str(side.tmp / "job.sqlite3")] if side.kind == "embedded" else []
    lst = side.optout()

    def rows(found: dict[str, int | str]) -> int:
        return sum(n for n in found.values() if isinstance(n, int))

    try:
        assert rows(lst.clear_frontiers(A, [], also)) == 2
        assert rows(lst.clear_frontiers(A, [], also)) == 0
        assert rows(lst.clear_frontiers(B, [], also)) == 1  # another origin's rows stayed
        w.f.queue.stop(A, "opted_out")  # as the opt-out middleware stops it
        w.f.queue.stop(B, "403")
        w.f.queue.commit()
        w.sync()
        assert rows(lst.unstop_frontiers(A, [], also)) == 1
        assert rows(lst.unstop_frontiers(A, [], also)) == 0
        assert rows(lst.unstop_frontiers(B, [], also)) == 0  # not the opt-out's stop
    finally:
        lst.close()


def test_a_live_jobs_own_frontier_is_left_to_it(tmp_path: Path) -> None:
    """On one machine a live job drops the origin from its own frontier file (it stops
    the origin); forget edits only the files no live job holds."""
    queue = QueueStore(tmp_path / "job.sqlite3")
    queue.push(A, 0, f"{A}/1", b"x")
    queue.stop(A, "opted_out")
    queue.commit()
    lst = OptOutList(tmp_path / ORIGINS_DB)
    try:
        lst.register(process_owner(), "site", str(queue.path.resolve()), 0, time.time())
        live = lst.jobs(running=True)
        assert lst.clear_frontiers(A, live) == {str(queue.path.resolve()):
                                                "dropped by the running job"}
        assert lst.unstop_frontiers(A, live) == {}
        assert queue.head(A) is not None and queue.stopped() == {A: "opted_out"}
        assert lst.clear_frontiers(A, []) == {str(queue.path.resolve()): 1}
    finally:
        lst.close()
        queue.close()


def test_the_reader_answers_the_same(side: Side) -> None:
    w = side.worker()
    w.offer(f"{A}/1")
    w.sync()
    d = w.pop()
    assert d is not None
    w.f.settle(A, d.token, start=side.clock.t, end=side.clock.t + 0.2)
    w.f.checkpoint()  # the owner's count: written at a checkpoint on one machine
    w.sync()  # the cluster writes the state back in its batch, the count with it
    book = RobotsBook(side.robots_store(), "PoliteCrawler", clock=Clock(time.time()),
                      **ROBOTS_NUMBERS)
    book.record_answer(A, 200, b"User-agent: *\nAllow: /\n")
    book.close()
    lst = side.optout()
    lst.add(B, "mail", 1.0)
    lst.close()
    pages = side.backend.page_backends(side.tmp)()
    pages.migrate()
    pages.begin()
    pages.put(page(f"{A}/1"))
    pages.put_fetch(FetchRecord(url=f"{A}/sitemap.xml", kind="sitemap", status=200,
                                final_url=f"{A}/sitemap.xml", fetched_at=1.0))
    pages.add_alias(f"{A}/print", f"{A}/1", "duplicate", 1.0)
    pages.commit()
    pages.close()
    if side.kind == "embedded":
        assert (side.tmp / STATE_DB).is_file()
    reader = side.backend.reader(side.settings(), side.tmp)
    try:
        found = reader.origin_state(A)
        assert found is not None
        state, _owner, _until = found
        assert isinstance(state, OriginState)
        assert state.last_end == pytest.approx(side.clock.t + 0.2)
        assert dict(reader.origin_states()).keys() >= {A}
        host = reader.host_state("127.0.0.1")
        assert host is not None
        if side.kind == "embedded":  # the host's row: its rest's end
            assert host.next_allowed > side.clock.t + 0.2
        else:  # the host's part of its owner's group: the worker holding it
            assert host.origins == (A,) and host.holder == w.sync_.shared.worker
        assert reader.host_state("127.0.0.9") is None
        owner = reader.owner_state("127.0.0.1")
        assert owner is not None and owner.used_on(utc_day(side.clock.t)) == 1
        assert reader.owner_state("127.0.0.9") is None
        robots = reader.robots(A)
        assert robots is not None and robots.status == 200
        assert [e.origin for e in reader.robots_entries()] == [A]
        assert reader.optout(B) is not None and list(reader.optouts()) == [B]
        assert reader.optout(A) is None
        rec = reader.page(f"{A}/1", follow=("redirect",))
        assert rec is not None and rec.canonical_url == f"{A}/1"
        assert reader.page(f"{A}/print", follow=("redirect",)) is None
        assert reader.alias_of(f"{A}/print") == (f"{A}/1", "duplicate")
        fetch = reader.fetch(f"{A}/sitemap.xml")
        assert fetch is not None and fetch.kind == "sitemap"
        assert reader.has_pages(A) and not reader.has_pages(B)
    finally:
        reader.close()
