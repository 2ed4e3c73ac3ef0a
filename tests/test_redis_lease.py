"""The Redis frontier's ownership rules, two workers in one process (a real redis-server).

Each worker has its own injected clock; a lease running out is what Redis does at the
TTL: the worker's lease key vanishes (deleted here, so nothing sleeps).
"""

from __future__ import annotations

from typing import Any

import pytest

from polite_crawler.frontier.core import CONTENT, DISPATCH_MARGIN, FrontierConfig
from polite_crawler.frontier.redis_frontier import RedisFrontier
from polite_crawler.frontier.redis_shared import RedisShared, seen_fp
from polite_crawler.interfaces import LeaseAnswer
from polite_crawler.policy.rest import OriginState, RestParams
from tests.clock import Clock
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)
from tests.robots_numbers import ROBOTS_NUMBERS

# ruff: noqa: F811

ORIGIN = "http://127.0.0.1:8000"
TTL = 60.0
TIMEOUT = 5.0  # the exchange timeout: no request lasts longer
REST = 1.0


def worker(url: str, name: str, clock: Clock, robots: Any = None,
           budget: int = 10_000) -> RedisFrontier:
    shared = RedisShared(url, "c", name)
    shared.register(clock(), TTL)
    f = RedisFrontier(shared, FrontierConfig(params=RestParams(rest_page=REST, jitter=0.0),
                                             budget=budget),
                      clock=clock, ttl=TTL, interval=0.5, exchange_timeout=TIMEOUT,
                      clock_skew=0.0, robots=lambda: robots)
    f.origin_store.valid_until = clock() + TTL - f.margin
    return f


def push(f: RedisFrontier, *paths: str) -> None:
    for p in paths:
        f.frontier.push(ORIGIN, 0, ORIGIN + p, b"data")


@pytest.fixture
def two(redis_url: str) -> tuple[Any, ...]:
    ca, cb = Clock(1000.0), Clock(1000.0)
    return worker(redis_url, "A", ca), ca, worker(redis_url, "B", cb), cb


def test_one_owner_takes_the_origin_and_the_other_gets_nothing(two):
    a, _ca, b, _cb = two
    push(a, "/1", "/2")
    a.run_batch()  # pushed, and taken (nobody owned it)
    b.run_batch()
    assert a.owned() == [ORIGIN] and b.owned() == []
    a.run_batch()  # claims rows
    d = a.frontier.pop()
    assert d is not None and d.kind == CONTENT and d.row is not None
    assert b.frontier.pop() is None


def test_a_lease_that_expires_mid_request_never_gives_two_owners_on_the_wire(two, redis_url):
    a, ca, b, cb = two
    push(a, "/1", "/2")
    a.run_batch()
    a.run_batch()
    d = a.frontier.pop()
    assert d is not None and d.row is not None
    sent = ca()
    # A stalls mid-request; its lease runs out in Redis (the key expires at the TTL).
    lease_end = float(b.shared.r.get("polite:w:A"))
    b.shared.r.delete("polite:alive:A")
    cb.t = lease_end + 0.1
    b.run_batch()
    assert b.owned() == [ORIGIN], "B takes the origin of a worker whose lease ran out"
    # A's request may still be on the wire until its lease end plus the timeout; B
    # waits that, and a rest after it, before anything of the origin goes.
    not_before = lease_end + TIMEOUT + REST
    for t in (lease_end + 1, lease_end + TIMEOUT, not_before - 0.02):
        cb.t = t
        b.run_batch()
        assert b.frontier.pop() is None, t
    # A wakes: it may not dispatch (its own lease, as last confirmed, ran out) and its
    # next batch finds its lease gone: it owns nothing, writes nothing.
    ca.t = sent + TTL
    assert a.frontier.pop() is None
    a.frontier.settle(ORIGIN, d.token, start=sent, end=ca.t, observe=False)
    a.frontier.done(d.row.id)  # the spider finished with the page A fetched
    a.run_batch()
    assert a.owned() == []
    # The page A fetched is not fetched again; the other one goes, after the wait.
    cb.t = not_before + 0.1
    b.run_batch()
    got = b.frontier.pop()
    assert got is not None and got.row is not None
    assert got.row.url == ORIGIN + "/2"
    b.run_batch()
    assert b.frontier.pop() is None


def test_a_clean_hand_over_waits_only_the_saved_rest(two):
    a, ca, b, cb = two
    push(a, "/1", "/2")
    a.run_batch()
    a.run_batch()
    d = a.frontier.pop()
    assert d is not None
    a.frontier.settle(ORIGIN, d.token, start=ca(), end=ca() + 0.2)
    assert d.row is not None
    a.frontier.done(d.row.id)
    saved = a.frontier.state(ORIGIN).next_allowed
    assert saved == pytest.approx(ca() + 0.2 + REST)
    a.run_batch(closing=True)  # gives the origin back, the state written
    assert a.owned() == []
    b.run_batch()
    assert b.owned() == [ORIGIN]
    assert b.frontier.state(ORIGIN).next_allowed == pytest.approx(saved)
    cb.t = saved - 0.05
    b.run_batch()
    assert b.frontier.pop() is None
    cb.t = saved + 0.05
    got = b.frontier.pop()
    assert got is not None and got.row is not None and got.row.url == ORIGIN + "/2"


def test_seen_set_takes_a_url_once_across_workers(two):
    a, _ca, b, _cb = two
    fp = b"\x01" * 16
    for f in (a, b):
        f.queue.add_seen_many([fp])
        f.queue._fresh.clear()
    # The same URL found by both workers, each in its batch: queued once.
    from polite_crawler.frontier.dupefilter import url_fingerprint

    url = ORIGIN + "/same"
    for f in (a, b):
        f.queue.add_seen_many([url_fingerprint(url)])
        f.frontier.push(ORIGIN, 0, url, b"d")
        f.run_batch()
    assert b.shared.r.zcard(b.shared.qkey(ORIGIN)) == 1
    assert seen_fp(url) != 0


def test_an_origin_with_work_always_has_an_owner_or_is_free(redis_url):
    """A batch with little room and a transient origin to take first pops from the free
    set only what it tries: every active origin stays owned or in the free set, so
    every one is crawled without waiting for the sample of the active set."""
    from polite_crawler.frontier.redis_frontier import Plan, execute

    c = Clock(1000.0)
    seeder = RedisShared(redis_url, "c", "S")
    seeder.register(c(), TTL)
    origins = [f"http://10.0.1.{i}" for i in range(6)]
    seeder.batch(now=c(), ttl=TTL, pushes={o: [(None, 0, f"{o}/\ndata".encode())]
                                           for o in origins},
                 seen={}, templates={}, stops={}, drops=[], owned=[])
    assert seeder.r.scard(seeder.free_key) == 6
    b = worker(redis_url, "B", c)
    plan = Plan(c(), {}, 0, {}, {}, {}, [], [], room=3, want=["http://10.0.2.1"],
                owned=set())
    out = execute(b.shared, plan, TTL)
    taken = {t.origin for t in out.taken}
    assert len(taken & set(origins)) == 2  # the room, less the transient origin
    free = {bytes(o).decode() for o in seeder.r.smembers(seeder.free_key)}
    active = {bytes(o).decode() for o in seeder.r.smembers(seeder.active_key)}
    assert active == set(origins)
    assert active - taken == free  # before: one popped, not tried, and nowhere


def test_an_origin_given_back_and_popped_in_one_batch_stays_free(redis_url):
    """The batch that gives an origin back may pop it from the free set itself: it goes
    back there for another worker (before, it was left with work and no owner)."""
    from polite_crawler.frontier.redis_frontier import Plan, execute

    c = Clock(1000.0)
    seeder = RedisShared(redis_url, "c", "S")
    seeder.register(c(), TTL)
    origins = [f"http://10.0.3.{i}" for i in range(4)]
    seeder.batch(now=c(), ttl=TTL, pushes={o: [(None, 0, f"{o}/\ndata".encode())]
                                           for o in origins},
                 seen={}, templates={}, stops={}, drops=[], owned=[])
    b = worker(redis_url, "B", c)
    plan = Plan(c(), {}, 0, {}, {}, {}, [], [], room=10, want=[], owned={origins[0]})
    out = execute(b.shared, plan, TTL)
    assert {t.origin for t in out.taken} == set(origins[1:])
    assert seeder.r.smembers(seeder.free_key) == {origins[0].encode()}


def test_a_url_row_template_is_read_with_the_claim_not_at_dispatch(two):
    """The batch that claims URL rows reads the templates the worker does not know: the
    dispatch needs no Redis (an outage then dropped the row as unrestorable)."""
    import redis

    a, _ca, b, _cb = two
    tid = a.queue.template_id(b"a template")
    a.frontier.push(ORIGIN, 0, ORIGIN + "/1", b"u%d\0" % tid)
    a.run_batch()  # pushed, template written, origin taken by A
    a.run_batch(closing=True)  # given back
    b.run_batch()  # B takes it
    b.run_batch()  # and claims the row, reading its template
    assert b.queue.head(ORIGIN) is not None
    b.shared.r = redis.Redis(port=1)  # Redis unreachable from here on
    assert b.queue.template(tid) == b"a template"


def test_a_dead_workers_origins_are_all_taken_over_in_one_batch(redis_url):
    """Origins of a worker whose lease ran out come from its owned set, all of them at
    once (the random sample of the active set found at most 50 a batch)."""
    ca = Clock(1000.0)
    a = worker(redis_url, "A", ca)
    origins = [f"http://10.0.4.{i}" for i in range(120)]
    for o in origins:
        a.frontier.push(o, 0, o + "/", b"data")
    for _ in range(3):
        a.run_batch()
    assert len(a.owned()) == 120
    a.shared.r.delete("polite:alive:A")  # A dies; its lease is gone
    cb = Clock(1000.0 + TTL + 1)
    b = worker(redis_url, "B", cb)
    b.run_batch()  # learns the crawl's size (120 active origins, one live worker)
    b._sampled = 0.0  # the next batch looks for dead workers' origins (every TTL / 3)
    b.run_batch()
    assert sorted(b.owned()) == sorted(origins)
    assert b.shared.r.scard(b.shared.owned_key("B")) == 120
    assert not b.shared.r.exists(b.shared.owned_key("A"))
    b._sampled = 0.0
    b.run_batch()  # A's empty set: A leaves the registry
    assert b.shared.r.zscore(b.shared.workers_key, "A") is None


def test_the_robots_txt_entry_of_an_origin_taken_is_read_in_the_batch(redis_url):
    """A worker taking an origin reads its robots.txt entry with the take, off the
    reactor: judging the origin's URLs then needs no Redis."""
    import redis

    from polite_crawler.store.redis_robots import RedisRobotsStore
    from polite_crawler.store.robots import RobotsBook

    c = Clock(1000.0)
    book_a = RobotsBook(RedisRobotsStore(redis_url), "PoliteCrawler", clock=c, **ROBOTS_NUMBERS)
    book_a.record_answer(ORIGIN, 200, b"User-agent: *\nDisallow: /private\n")
    a = worker(redis_url, "A", c)
    push(a, "/1")
    a.run_batch()
    a.run_batch(closing=True)  # A gives the origin back
    book_b = RobotsBook(RedisRobotsStore(redis_url), "PoliteCrawler", clock=c, **ROBOTS_NUMBERS)
    b = worker(redis_url, "B", c, robots=book_b)
    b.run_batch()
    assert b.owned() == [ORIGIN]
    assert book_b.cached(ORIGIN)
    book_b.store.r = redis.Redis(port=1)  # type: ignore[attr-defined]  (unreachable)
    assert not book_b.needs_fetch(ORIGIN)
    assert book_b.ready(ORIGIN)
    assert not book_b.allowed(ORIGIN + "/private")
    assert book_b.allowed(ORIGIN + "/1")


def test_memory_per_queued_url(redis_url):
    """Not a benchmark: a bound that fails if the row form grows (figures in the report)."""
    import redis

    r = redis.Redis.from_url(redis_url)
    before = int(r.info("memory")["used_memory"])
    c = Clock(1000.0)
    f = worker(redis_url, "M", c)
    from polite_crawler.frontier.dupefilter import url_fingerprint

    n = 0
    for h in range(20):
        origin = f"http://10.0.0.{h}"
        urls = [f"{origin}/section/page-{i}.html" for i in range(250)]
        f.queue.add_seen_many([url_fingerprint(u) for u in urls])
        f.frontier.push_many([(origin, 0, u, b"u1234567890\0") for u in urls])
        n += len(urls)
    f.run_batch()
    per_url = (int(r.info("memory")["used_memory"]) - before) / n
    assert r.zcard(f.shared.qkey("http://10.0.0.3")) == 250
    assert per_url < 400, per_url  # 267 bytes measured (queue row and seen fingerprint)


def test_without_the_setting_the_embedded_frontier_stays():
    """No POLITE_FRONTIER: the SQLite frontier, no Redis needed (this test needs none)."""
    from scrapy.utils.misc import load_object
    from scrapy.utils.test import get_crawler

    from polite_crawler.backend import backend_of
    from polite_crawler.frontier.embedded import EmbeddedDriver
    from polite_crawler.frontier.redis_scheduler import ClusterDriver
    from tests.crawl import project_settings_dict

    plain = get_crawler(settings_dict=project_settings_dict())
    plain._apply_settings()
    assert plain.settings["SCHEDULER"] == "polite_crawler.frontier.scheduler.FrontierScheduler"
    assert load_object(backend_of(plain.settings).frontier_driver) is EmbeddedDriver
    shared = get_crawler(settings_dict=project_settings_dict(
        POLITE_FRONTIER="redis://127.0.0.1:6379/0"))
    shared._apply_settings()
    # One scheduler; the backend is the driver it runs.
    assert shared.settings["SCHEDULER"] == plain.settings["SCHEDULER"]
    assert load_object(backend_of(shared.settings).frontier_driver) is ClusterDriver


def test_a_queue_row_leaves_its_origin_out_and_whole_url_rows_are_still_read(two):
    """The row's key names its origin: a row keeps the path alone; a row in the first
    form (the whole URL) is read as it is, and both come back as whole URLs."""
    a, _ca, _b, _cb = two
    push(a, "/new")
    a.run_batch()
    r = a.shared.r
    q, f = a.shared.qkey(ORIGIN), a.shared.fkey(ORIGIN)
    assert [*r.zrange(q, 0, -1), *r.hvals(f)] == [b"0 1 /new\ndata"]
    r.zadd(q, {f"0 9 {ORIGIN}/old\ndata".encode(): 9})
    for _ in range(4):
        a.run_batch()
    own = a.queue.own[ORIGIN]
    assert [row.url for row in own.buffer] == [ORIGIN + "/new", ORIGIN + "/old"]


def test_every_done_row_leaves_the_claimed_hash_and_the_queue(redis_url):
    """Done rows leave Redis whoever owns the origin now: those still claimed (a claim
    popped them from the queue) and those a takeover put back in the queue (not fetched
    again), all of a batch's; a batch of done rows alone reads nothing else."""
    from polite_crawler.frontier.redis_shared import OriginSync

    c = Clock(1000.0)
    s = RedisShared(redis_url, "c", "A")
    s.register(c(), TTL)
    rows = [f"0 {i} /p{i}\ndata".encode() for i in (1, 2, 3, 4, 5)]
    s.r.hset(s.fkey(ORIGIN), mapping={str(i): m for i, m in enumerate(rows[:3], 1)})
    s.r.zadd(s.qkey(ORIGIN), {m: i for i, m in enumerate(rows[3:], 4)})
    _ok, _p, [res] = s.batch(
        now=c(), ttl=TTL, pushes={}, seen={}, templates={}, stops={}, drops=[],
        owned=[OriginSync(ORIGIN, done=[(b"1", rows[0]), (b"2", rows[1])])])[:3]
    assert res.status == 3
    assert s.r.hkeys(s.fkey(ORIGIN)) == [b"3"]
    assert s.r.zrange(s.qkey(ORIGIN), 0, -1) == rows[3:]
    s.batch(now=c(), ttl=TTL, pushes={}, seen={}, templates={}, stops={}, drops=[],
            owned=[OriginSync(ORIGIN, done=[(b"3", rows[2]), (b"4", rows[3])])])
    assert s.r.hkeys(s.fkey(ORIGIN)) == []
    assert s.r.zrange(s.qkey(ORIGIN), 0, -1) == [rows[4]]
    s.close()


def test_a_link_found_again_by_the_owner_is_not_sent_until_redis_loses_its_logs_end(two):
    """The owner keeps the fingerprints Redis acknowledged for its origins: a link found
    again is a duplicate without a push. Redis restarted without the end of its log (the
    worker's batch counter counts from less) may have lost them: they are forgotten, and
    the next find goes to Redis's seen check again."""
    from polite_crawler.frontier.dupefilter import url_fingerprint
    from polite_crawler.store.redis_keys import mark_key

    a, _ca, _b, _cb = two
    url = ORIGIN + "/again"

    def find() -> None:
        a.queue.add_seen_many([url_fingerprint(url)])
        a.frontier.push(ORIGIN, 0, url, b"d")

    push(a, "/")
    a.run_batch()  # taken
    find()
    plan = a.run_batch().plan
    assert [len(rows) for rows in plan.pushes.values()] == [1]
    find()
    assert a.queue.pushes == {} and a.run_batch().plan.pushes == {}
    r = a.shared.r
    r.delete(mark_key(a.shared.worker))  # the log's end lost: the counter is back to 0
    assert not a.run_batch().kept
    find()
    plan = a.run_batch().plan
    assert [len(rows) for rows in plan.pushes.values()] == [1]  # Redis decides: a dup
    assert r.zcard(a.shared.qkey(ORIGIN)) + r.hlen(a.shared.fkey(ORIGIN)) == 2


def test_rows_the_owner_finds_for_its_origin_are_claimed_with_their_push(two):
    """Nothing of the origin queued in Redis: the rows its owner pushes go straight to
    the claimed hash and its buffer, in one round trip (no claim in the next batch);
    rows another worker finds go to the queue, and the owner learns of them from that
    worker's nudge in its next batch (no poll of its origins' queues)."""
    a, _ca, b, _cb = two
    push(a, "/")
    a.run_batch()  # taken
    a.run_batch()  # "/" claimed
    r = a.shared.r
    assert r.zcard(a.shared.qkey(ORIGIN)) == 0
    push(a, "/x", "/y")
    out = a.run_batch()
    assert [(s.origin, s.status) for s in out.results if s.status == 4] == [(ORIGIN, 4)]
    assert r.zcard(a.shared.qkey(ORIGIN)) == 0 and r.hlen(a.shared.fkey(ORIGIN)) == 3
    assert [row.url for row in a.queue.own[ORIGIN].buffer] == [
        ORIGIN + "/", ORIGIN + "/x", ORIGIN + "/y"]
    push(b, "/z")  # found by a worker that does not own the origin: queued
    b.run_batch()
    assert r.zrange(a.shared.qkey(ORIGIN), 0, -1) == [b"0 4 /z\ndata"]
    assert a.run_batch().nudged == [ORIGIN]
    assert a.queue.own[ORIGIN].remote == 1
    assert a.run_batch().nudged == []


# --- a request handed out before a freeze, at the gate after it ---------------------------


def gated_worker(url: str, name: str, clock: Clock) -> tuple[Any, Any, RedisFrontier]:
    """A worker's scheduler and gate as a crawl builds them, over a RedisFrontier with an
    injected clock (the batches are run by the test, not by the reactor's loop)."""
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from polite_crawler.context import PoliteContext
    from polite_crawler.frontier.redis_scheduler import ClusterDriver
    from polite_crawler.frontier.scheduler import FrontierScheduler
    from polite_crawler.middlewares.gate import GateMiddleware

    crawler = get_crawler(Spider, {
        "SCHEDULER": "polite_crawler.frontier.scheduler.FrontierScheduler",
        "POLITE_FRONTIER": url, "POLITE_CRAWL": "c"})
    crawler._polite_context = PoliteContext(crawler, clock=clock)  # type: ignore[attr-defined]
    sched = FrontierScheduler(crawler)
    driver = ClusterDriver(sched)
    sync = worker(url, name, clock)
    driver.sync, driver.shared = sync, sync.shared
    sched.driver, sched.frontier = driver, sync.frontier
    return sched, GateMiddleware(crawler), sync


def enqueue(sched: Any, *paths: str) -> None:
    from scrapy import Request

    for p in paths:
        assert sched.enqueue_request(Request(ORIGIN + p))


def test_a_request_handed_out_before_a_freeze_is_held_at_the_gate_for_the_new_owner(
        redis_url):
    """Worker A's frontier hands /1 out while its lease is valid; A freezes before the
    request reaches the gate; B takes the origin over. When A wakes, the gate (by A's
    clock, past its lease) does not let /1 go: it is not sent, not done, and the origin
    is freed with no rest; B fetches /1 after its takeover wait, then /2."""
    ca, cb = Clock(1000.0), Clock(1000.0)
    sched_a, gate_a, a = gated_worker(redis_url, "A", ca)
    b = worker(redis_url, "B", cb)
    enqueue(sched_a, "/1", "/2")
    a.run_batch()
    a.run_batch()
    req = sched_a.next_request()
    assert req is not None and req.url == ORIGIN + "/1"
    assert a.frontier.state(ORIGIN).budget_used == 1
    # A freezes here, between its frontier and its gate; its lease runs out in Redis.
    lease_end = float(b.shared.r.get("polite:w:A"))
    b.shared.r.delete("polite:alive:A")
    cb.t = lease_end + 0.1
    b.run_batch()
    assert b.owned() == [ORIGIN]
    # A wakes past its lease as last confirmed: the request reaches its gate.
    ca.t = lease_end + 1.0
    out = gate_a.process_request(req)
    assert out is req, "held back: handed back to the scheduler, not on to the network"
    assert "polite_dispatched" not in req.meta
    assert sched_a.enqueue_request(out)  # what Scrapy does with a request returned
    assert a.frontier.in_flight_origins() == [], "the origin's slot is free"
    assert a.frontier.state(ORIGIN).budget_used == 0, "not counted as a fetch"
    assert sched_a.crawler.stats.get_value("polite/redis/held_at_gate") == 1
    assert not a.queue.done_out, "nothing done"
    assert sched_a.next_request() is None  # A's lease ran out: nothing more goes
    a.run_batch()  # finds its lease gone: forgets the origin, writes no done
    assert a.owned() == []
    # B fetches both pages, /1 included, after its takeover wait.
    cb.t = lease_end + TIMEOUT + REST + 0.2
    got = []
    for _ in range(4):
        b.run_batch()
        d = b.frontier.pop()
        if d is not None:
            assert d.row is not None
            got.append(d.row.url)
            b.frontier.settle(ORIGIN, d.token, start=cb(), end=cb() + 0.1)
            b.frontier.done(d.row.id)
        cb.t += REST + 0.2
    assert got == [ORIGIN + "/1", ORIGIN + "/2"]
    assert b.shared.r.exists(b.shared.fkey(ORIGIN), b.shared.qkey(ORIGIN)) == 0


def test_a_request_the_handler_finds_unheld_goes_back_to_the_owners_buffer(redis_url):
    """The handler's check (the latest one, as the exchange starts): a request that
    passed the gate while the lease was valid and reached the handler after it ran out
    is put back (LeaseLapsedError, read by the gate first). No other worker took the
    origin, so A's next batch renews its lease and A fetches the row itself."""
    from polite_crawler.handlers import LeaseLapsedError

    ca = Clock(1000.0)
    sched_a, gate_a, a = gated_worker(redis_url, "A", ca)
    enqueue(sched_a, "/1", "/2")
    a.run_batch()
    a.run_batch()
    req = sched_a.next_request()
    assert req is not None and req.url == ORIGIN + "/1"
    assert gate_a.process_request(req) is None  # lease valid: on to the handler
    assert req.meta["polite_dispatched"]
    ca.t = a.origin_store.valid_until + 0.01  # the reactor stalled before the handler
    assert not sched_a.may_send(req)
    out = gate_a.process_exception(req, LeaseLapsedError("not started"))
    assert out is req
    assert sched_a.enqueue_request(out)
    assert a.frontier.in_flight_origins() == [] and not a.queue.done_out
    assert [r.url for r in a.queue.own[ORIGIN].buffer] == [ORIGIN + "/1", ORIGIN + "/2"]
    assert sched_a.crawler.stats.get_value("polite/redis/held_at_gate/handler") == 1
    a.run_batch()  # the lease in Redis is still there: renewed
    assert a.owned() == [ORIGIN]
    again = sched_a.next_request()
    assert again is not None and again.url == ORIGIN + "/1"
    assert sched_a.may_send(again) and gate_a.process_request(again) is None


def test_a_worker_past_its_lease_reports_no_row_done_that_it_did_not_fetch(redis_url):
    """Rows a worker drops without a fetch (here its daily budget, as it reckons it) are
    done only while it holds the origin: past its lease as last confirmed the origin may
    be another worker's, whose claimed hash the done would empty. A row it fetched is
    done as before."""
    ca = Clock(1000.0)
    a = worker(redis_url, "A", ca, budget=1)
    shared = a.shared
    push(a, "/1", "/2")
    for _ in range(2):
        a.run_batch()
    fetched = a.frontier.pop()
    assert fetched is not None and fetched.row is not None
    a.frontier.settle(ORIGIN, fetched.token, start=ca(), end=ca() + 0.1)
    a.frontier.done(fetched.row.id)
    assert list(a.queue.done_out) == [ORIGIN], "a row fetched is done"
    a.run_batch()
    assert shared.r.hlen(shared.fkey(ORIGIN)) == 1  # /2, claimed
    ca.t = a.origin_store.valid_until + 1.0  # stalled past its lease as last confirmed
    assert a.frontier.pop() is None  # the budget is spent: the queue is dropped here ...
    assert a.frontier.pending == 0
    assert not a.queue.done_out, "... but not done in Redis: the origin's owner judges it"
    a.run_batch()
    assert shared.r.hlen(shared.fkey(ORIGIN)) + shared.r.zcard(shared.qkey(ORIGIN)) == 1


def test_a_worker_hands_out_ahead_of_the_time_only_what_it_holds(two):
    # With a dispatch lead, the owner hands the next request out before the rest ends,
    # carrying the time it may be sent; the rest is judged at that time, and the lease
    # (held, not given back) as of now.
    a, ca, _b, _cb = two
    a.frontier.config.dispatch_lead = 0.2
    push(a, "/1", "/2")
    a.run_batch()
    a.run_batch()
    d = a.frontier.pop()
    assert d is not None and d.not_before == 0.0
    ca.t += 0.1
    a.frontier.settle(ORIGIN, d.token, start=1000.0, end=ca.t)
    a.frontier.done(d.row.id if d.row is not None else None)
    due = ca.t + REST + DISPATCH_MARGIN
    ca.t = due - 0.25
    assert a.frontier.pop() is None  # further ahead than the lead
    ca.t = due - 0.15
    d2 = a.frontier.pop()
    assert d2 is not None and d2.not_before == pytest.approx(due, abs=1e-6)
    # A worker whose lease as last confirmed ran out hands nothing out, ahead or not.
    a.frontier.put_back(ORIGIN, d2.token)
    a.origin_store.valid_until = ca.t
    assert a.frontier.pop() is None


def test_the_cluster_lease_store_says_why_a_lease_is_refused(two):
    # LocalLeases over a real redis-server: an origin this worker does not own, gives
    # back, or holds past its own lease as last confirmed is not its; one it owns is
    # refused while it rests and granted after.
    a, ca, b, _cb = two
    push(a, "/1")
    a.run_batch()
    assert a.owned() == [ORIGIN]
    now = ca()
    other = b.origin_store.try_lease(ORIGIN, now, TTL, REST)
    assert other.answer is LeaseAnswer.NOT_OWNED and other.retry_at == now + 0.5
    leases = a.origin_store
    state = OriginState(ORIGIN, next_allowed=now + 2.0)
    resting = leases.try_lease(ORIGIN, now, TTL, REST, state, send_at=now + 1.0)
    assert resting.answer is LeaseAnswer.RESTING and resting.retry_at == now + 2.0
    assert leases.try_lease(ORIGIN, now + 1.9, TTL, REST, state,
                            send_at=now + 2.0).answer is LeaseAnswer.GRANTED
    late = leases.try_lease(ORIGIN, leases.valid_until, TTL, REST, state)
    assert late.answer is LeaseAnswer.NOT_OWNED
    a.queue.own[ORIGIN].releasing = True
    giving_back = leases.try_lease(ORIGIN, now + 2.0, TTL, REST, state)
    assert giving_back.answer is LeaseAnswer.NOT_OWNED and not giving_back.taken
