"""The cluster under the faults clusters meet, with real servers on loopback.

A real redis-server (the production configuration where it matters), a real PostgreSQL,
the crawler as real worker processes; judged from the test web's own log: requests per
site in flight, the rest between the end of one answer and the start of the next, the
pages fetched. Leases and rests are short, set through settings.

- Redis killed (SIGKILL, ``appendfsync everysec``) and restarted on its port and
  directory: no short rest, no overlap, every site its budget, what the lost second
  forgot fetched again at most once, conditionally where a copy was stored.
- A frozen worker (SIGSTOP past its lease and the exchange timeout, then SIGCONT): the
  other takes its sites over; the woken one sends nothing for a site it lost, says it
  rejoins under a new identity, and the crawl completes.
- Redis unreachable (a TCP proxy that stops forwarding, longer than the lease): no
  dispatch once the lease cannot be confirmed, nothing lost, the crawl resumes.

Each test prints what it measured (``-s``): requests sent during the fault, the longest
stall of a site, pages lost, pages fetched twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from demo.web.server import (
    LogEntry,
    Req,
    Resp,
    Site,
    consecutive,
    etag_for,
    overlaps,
    page,
    short_rests,
)
from polite_crawler.frontier.redis_shared import origin_key
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import redis_production, redis_server  # noqa: F401  (fixtures)
from tests.test_redis_frontier import HOSTS, REST, content, start, wait_for, worker_cmd

# ruff: noqa: F811

TTL = 2.0  # POLITE_REDIS_LEASE_TTL in worker_cmd
EXCHANGE = 4.0  # DOWNLOAD_TIMEOUT 3 + 1: the bound a taken-over origin waits past the lease


def site(n: int, host: str, delay: float, slow: dict[str, float] | None = None,
         arrived: list[tuple[str, str, float]] | None = None, hub: bool = False) -> Site:
    """A chain of ``n`` pages answered after ``delay`` (``slow``: path -> a longer delay),
    each with an ETag (a page stored is fetched again conditionally: 304). ``arrived``
    gets (host, path, time) as each request's head arrives. ``hub``: the first page links
    to every other (all queued at once), else each page to the next two."""
    paths = ["/"] + [f"/p{i}" for i in range(1, n)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    for i, path in enumerate(paths):
        words = " ".join(f"{host}-{path}-{k}" for k in range(30))
        body = page(path, words, paths[1:] if hub and i == 0 else paths[i + 1:i + 3])
        wait = (slow or {}).get(path, delay)

        def answer(req: Req, body: bytes = body, wait: float = wait, path: str = path) -> Resp:
            if arrived is not None:
                arrived.append((host, path, time.time()))
            return Resp(200, body, etag=etag_for(body), delay=wait)

        routes[path] = answer
    return Site(routes)


def measure(entries: list[LogEntry], t0: float, t1: float, expected: int) -> dict[str, Any]:
    """What a fault cost, from the web's log: requests that arrived in [t0, t1], the
    longest a site waited between two requests, pages never fetched, pages fetched twice."""
    pages = content(entries)
    got = Counter((e.host, e.path) for e in pages)
    stall = max((b.started - a.finished for a, b in consecutive(entries)), default=0.0)
    return {
        "during_fault": sum(1 for e in entries if t0 <= e.started <= t1),
        "longest_stall_s": round(stall, 2),
        "pages_lost": expected - len(got),
        "fetched_twice": sum(1 for n in got.values() if n > 1),
        "not_modified": sum(1 for e in pages if e.status == 304),
    }


def assert_polite(entries: list[LogEntry], rest: float = REST) -> None:
    assert overlaps(entries) == [], "two requests in flight for one site"
    assert short_rests(entries, rest, slack=0.02) == [], "a rest shorter than R"


def access(tmp: Path, name: str) -> list[dict[str, Any]]:
    path = tmp / f"access-{name}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def logs(tmp: Path, *names: str) -> str:
    return "".join((tmp / f"{n}.log").read_text(encoding="utf-8") for n in names
                   if (tmp / f"{n}.log").exists())


def stop(*procs: Any) -> None:
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


# --- Redis killed with the production configuration ---------------------------------------

PAGES = 10
BUDGET = 5
LONG_REST = 3.5  # longer than the outage and the lost second: a rest they forgot shows
LOST = 1.0  # appendfsync everysec: a machine crash loses at most the last second


class AofTail(threading.Thread):
    """The size of Redis's AOF (its incremental file) every 50 ms, to cut it back to
    what it held ``LOST`` seconds before a kill: what a power cut with ``appendfsync
    everysec`` may lose. (A SIGKILL alone loses nothing acknowledged: Redis writes the
    AOF before it replies, and the kernel keeps what was written.)"""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.dir = directory
        self.sizes: list[tuple[float, Path, int]] = []
        self.halt = threading.Event()

    def incr(self) -> Path | None:
        found = sorted((self.dir / "appendonlydir").glob("*.incr.aof"))
        return found[-1] if found else None

    def run(self) -> None:
        while not self.halt.wait(0.05):
            path = self.incr()
            if path is not None:
                self.sizes.append((time.time(), path, path.stat().st_size))

    def cut(self, killed_at: float) -> int:
        """Truncate the AOF to its size ``LOST`` seconds before ``killed_at``: the bytes cut."""
        self.halt.set()
        self.join()
        path = self.incr()
        assert path is not None
        keep = max(size for t, p, size in self.sizes if p == path and t <= killed_at - LOST)
        cut = path.stat().st_size - keep
        os.truncate(path, keep)
        return cut


@pytest.mark.slow
def test_redis_killed_mid_crawl_with_everysec_loses_at_most_a_second(
        web_factory, tmp_path, redis_production, pg_uri):
    web = web_factory({h: site(PAGES, h, 0.1) for h in HOSTS})
    extra = {"POLITE_HOST_BUDGET": str(BUDGET), "POLITE_STORE_FLUSH": "0.1",
             "POLITE_REST_PAGE": str(LONG_REST)}
    a = b = None
    try:
        a = start(worker_cmd(web, tmp_path, "a", redis_production.url, pg_uri, **extra))
        wait_for((tmp_path / "access-a.jsonl").exists)
        b = start(worker_cmd(web, tmp_path, "b", redis_production.url, pg_uri, **extra))
        tail = AofTail(redis_production.dir)
        tail.start()
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        t0 = time.time()
        redis_production.kill()  # SIGKILL mid-crawl
        lost = tail.cut(t0)  # and the last second of the AOF gone, as after a power cut
        assert lost > 0
        time.sleep(2.0)  # as long as the lease: the workers stop dispatching
        redis_production.start()  # same port, same directory: the AOF is replayed
        t1 = time.time()
        assert b.wait(timeout=120) == 0
        assert a.wait(timeout=120) == 0
    finally:
        stop(a, b)
    entries = web.entries()
    assert_polite(entries, LONG_REST)
    # Every site gets its budget: robots.txt and BUDGET - 1 pages. A budget count the
    # lost second forgot may allow one request more, never fewer.
    pages = content(entries)
    for h in HOSTS:
        mine = [e for e in pages if e.host == h]
        assert BUDGET - 1 <= len({e.path for e in mine}) <= BUDGET, h
        assert len(mine) + len(web.entries(host=h, path="/robots.txt")) <= BUDGET + 1, h
    got = Counter((e.host, e.path) for e in pages)
    assert max(got.values()) <= 2, "a page fetched more than twice"
    # A page fetched again after the restart whose copy was stored goes conditionally.
    for (h, path), n in got.items():
        if n > 1:
            first, again = [e for e in pages if (e.host, e.path) == (h, path)]
            if first.finished < t0 - 1.0:  # committed before the kill (flush 0.1 s)
                assert again.status == 304 and "if-none-match" in {
                    k.lower() for k in again.headers}, (h, path)
    per_site = sorted(Counter(e.host for e in pages).values())
    print("\nredis SIGKILL:", measure(entries, t0, t1, len(HOSTS) * (BUDGET - 1)),
          f"AOF bytes cut: {lost}, pages per site: {per_site}")
    assert "A Redis frontier batch failed" in logs(tmp_path, "a", "b")


# --- A frozen worker -------------------------------------------------------------------

FROZEN_PAGES = 10
SLOW = dict.fromkeys(("/p2", "/p5", "/p8"), 2.7)  # longer than the lease


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP delivered): its state in /proc is T."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    return stat[stat.rindex(")") + 2] == "T"


def taken_over(log: str, old: str) -> set[str]:
    """Origins the log says were taken over from worker ``old``."""
    return set(re.findall(r"(http://\S+) taken over from " + re.escape(old), log))


def worker_ids(log: str) -> list[str]:
    """The worker ids a worker's log names, in order: its first, then each new identity."""
    first = re.findall(r"Redis frontier \S+, crawl \S+, worker (\S+)", log)
    again = re.findall(r"rejoins as worker (\S+)", log)
    return first[:1] + again


@pytest.mark.slow
def test_a_frozen_worker_sends_nothing_for_the_sites_it_lost_and_rejoins(
        web_factory, tmp_path, redis_production, pg_uri):
    arrived: list[tuple[str, str, float]] = []
    web = web_factory({h: site(FROZEN_PAGES, h, 0.2, SLOW, arrived) for h in HOSTS})
    a = b = None
    try:
        a = start(worker_cmd(web, tmp_path, "a", redis_production.url, pg_uri, LOG_LEVEL="DEBUG"))
        wait_for((tmp_path / "access-a.jsonl").exists)
        b = start(worker_cmd(web, tmp_path, "b", redis_production.url, pg_uri))
        wait_for(lambda: worker_ids(logs(tmp_path, "b")))

        wait_for(lambda: worker_ids(logs(tmp_path, "a")))
        first = worker_ids(logs(tmp_path, "a"))[0].encode()
        r = redis_production.client()

        def slow_one_of_a() -> bool:
            now = time.time()
            return any(p in SLOW and now - at < 0.3
                       and r.hget(origin_key(web.url(h, "/")[:-1]), "owner") == first
                       for h, p, at in list(arrived))

        wait_for(slow_one_of_a)  # a slow answer of a site only a served is under way
        os.kill(a.pid, signal.SIGSTOP)
        wait_for(lambda: stopped(a.pid))
        # Taken once a is stopped: a request a sent before, with this test's thread
        # descheduled between reading the time and the signal, is not one after it.
        t0 = time.time()
        time.sleep(TTL + EXCHANGE + 1.0)  # past its lease and the exchange timeout
        t1 = time.time()
        os.kill(a.pid, signal.SIGCONT)
        assert b.wait(timeout=120) == 0
        assert a.wait(timeout=120) == 0
    finally:
        if a is not None and a.poll() is None:
            os.kill(a.pid, signal.SIGCONT)
        stop(a, b)
    entries = web.entries()
    assert_polite(entries)
    log_a, log_b = logs(tmp_path, "a"), logs(tmp_path, "b")
    ids = worker_ids(log_a)
    # (More than one new identity when the machine itself stalls past a lease later.)
    assert len(ids) >= 2, "the woken worker says it rejoins under a new identity"
    lost = taken_over(log_b, ids[0])
    assert lost, "the other worker took the frozen one's sites over"
    # Not one request of the woken worker for a site it lost before a new identity of
    # its took the site again (a clean hand-over, or a takeover with its wait).
    again: dict[str, float] = {}
    for origin, who, at in re.findall(r"(http://\S+) taken by (\S+) at (\S+)", log_a):
        if who in ids[1:]:
            again.setdefault(origin, float(at))
    late = [r for r in access(tmp_path, "a") if r.get("sent") is not None
            and r["sent"] >= t0 and r["origin"] in lost
            and r["sent"] < again.get(r["origin"], float("inf"))]
    assert late == [], late
    got = Counter((e.host, e.path) for e in content(entries))
    assert len(got) == len(HOSTS) * FROZEN_PAGES
    print("\nfrozen worker:", measure(entries, t0, t1, len(HOSTS) * FROZEN_PAGES),
          f"sites taken over: {len(lost)}, retaken by the new identity: {len(again)}, "
          f"requests of the woken worker after SIGCONT: "
          f"{sum(1 for r in access(tmp_path, 'a') if (r.get('sent') or 0) >= t1)}")


# --- Redis unreachable -------------------------------------------------------------------


class Blackhole:
    """A TCP proxy on loopback in front of Redis that can stop forwarding: connections
    stay open, nothing passes either way (a network partition), until it resumes."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = int(self.sock.getsockname()[1])
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = False
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self.flowing.wait()
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
            self.conns += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self.flowing.wait()  # held here while the partition lasts
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed = True
        self.flowing.set()
        self.sock.close()
        for s in self.conns:
            s.close()


UNREACHABLE_PAGES = 20
OUTAGE = 6.0  # longer than the lease (2 s) and the exchange timeout


@pytest.mark.slow
def test_redis_unreachable_longer_than_the_lease_no_dispatch_nothing_lost(
        web_factory, tmp_path, redis_production, pg_uri):
    web = web_factory({h: site(UNREACHABLE_PAGES, h, 0.1, hub=True) for h in HOSTS})
    proxy = Blackhole(redis_production.port)
    # Batches every 0.5 s: a worker holds rows claimed for a few seconds of rests, more
    # than the lease has left when Redis goes silent.
    # The opt-out list's and robots.txt cache's reads give up after 0.2 s (not 2 s, a
    # reactor that waits on them sends little anyway): the lease alone stops the dispatch.
    extra = {"POLITE_REDIS_SYNC_INTERVAL": "0.5", "POLITE_REDIS_STATE_TIMEOUT": "0.2"}
    a = b = None
    try:
        a = start(worker_cmd(web, tmp_path, "a", proxy.url, pg_uri, **extra))
        wait_for((tmp_path / "access-a.jsonl").exists)
        b = start(worker_cmd(web, tmp_path, "b", proxy.url, pg_uri, **extra))
        wait_for((tmp_path / "access-b.jsonl").exists)  # both under way
        # Each site's first page (the hub) done and its rows claimed a batch ahead.
        wait_for(lambda: len(content(web.entries())) >= 4 * len(HOSTS))
        proxy.flowing.clear()
        # Taken after the partition began: a batch that got through while this test's
        # thread was descheduled before it would renew the lease past t0 + TTL.
        t0 = time.time()
        time.sleep(OUTAGE)
        t1 = time.time()
        proxy.flowing.set()
        assert b.wait(timeout=120) == 0
        assert a.wait(timeout=120) == 0
    finally:
        stop(a, b)
        proxy.close()
    entries = web.entries()
    assert_polite(entries)
    # Once the lease as last confirmed (sent before t0, plus the TTL) has run out,
    # nothing is sent until Redis answers again.
    blind = [e for e in entries if t0 + TTL + 0.1 <= e.started <= t1]
    assert blind == [], blind
    got = Counter((e.host, e.path) for e in content(entries))
    assert len(got) == len(HOSTS) * UNREACHABLE_PAGES  # nothing queued is lost
    assert max(got.values()) <= 2
    # Every request the web saw is one a worker logged: nothing it cannot account for.
    logged = [r for n in "ab" for r in access(tmp_path, n) if r.get("status") is not None]
    assert len(logged) == len(entries)
    print("\nredis unreachable:", measure(entries, t0, t1, len(HOSTS) * UNREACHABLE_PAGES),
          f"requests in the lease's last {TTL:g} s: "
          f"{sum(1 for e in entries if t0 <= e.started < t0 + TTL + 0.1)}")


# --- A take the restart lost (injected clocks, a real redis-server restarted) -------------


def first_page_done(a: Any, clock: Any, *paths: str) -> None:
    """Worker ``a`` queues ``paths`` of the lease tests' origin, takes it, and fetches
    the first in 0.1 s (injected clock)."""
    from tests.test_redis_lease import ORIGIN, push

    push(a, *paths)
    a.run_batch()
    a.run_batch()
    d = a.frontier.pop()
    assert d is not None and d.row is not None
    a.frontier.settle(ORIGIN, d.token, start=clock(), end=clock() + 0.1)
    a.frontier.done(d.row.id)


def test_an_origin_whose_take_a_restart_lost_waits_the_restart_plus_the_timeout(
        redis_server):
    """A worker took an origin from the free set and has a request out when Redis dies;
    the log it replays lost that take (the origin is free again, its state from before).
    Whoever takes it next waits until the restart + the exchange timeout + the rest."""
    from polite_crawler.frontier.redis_frontier import execute
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, REST, TIMEOUT, worker

    ca = Clock(time.time() - 30.0)  # A's work is from before the restart
    a = worker(redis_server.url, "A", ca)
    first_page_done(a, ca, "/1", "/2", "/3")
    a.run_batch()  # this state is what the log keeps
    ca.t += 0.2 + REST
    assert a.frontier.pop() is not None  # /2 goes out: A's request is on the wire
    r = redis_server.client()
    # What the lost second held: A's take (the origin free again, as before it), and
    # the take of its host's group made in the same batch (the group free again).
    r.hdel(origin_key(ORIGIN), "owner")
    r.hset(a.shared.gkey(ORIGIN), "owner", "")
    r.hdel(a.shared.gkey(ORIGIN), f"m:{ORIGIN}")
    r.sadd(a.shared.free_key, ORIGIN)
    before = time.time()  # Redis starts after this
    redis_server.restart()
    # The take reads Redis's uptime, a real duration: B's clock is real time as its
    # batch ends (as a worker's clock reads when the batch's outcome is applied), or a
    # slow machine's time between the plan and the take would shift the bound.
    cb = Clock(time.time())
    b = worker(redis_server.url, "B", cb)
    for _ in range(2):
        plan = b.plan()
        out = execute(b.shared, plan, b.ttl)
        cb.t = max(cb.t, time.time())
        b.apply(out)
        b._sampled = 0.0
    taken = cb.t
    assert b.owned() == [ORIGIN]
    for t in (taken + 1.0, before + TIMEOUT + REST - 0.05):
        cb.t = max(t, taken)
        b.run_batch()
        assert b.frontier.pop() is None, t - before
    cb.t = taken + TIMEOUT + REST + 1.5  # uptime is read in whole seconds
    b.run_batch()
    assert b.frontier.pop() is not None


def test_the_restart_bound_takes_the_latest_start_redis_whole_seconds_allow(redis_server):
    """Redis keeps its start time and its clock in whole seconds, so the uptime it reports
    runs up to a second ahead of the real one: a restart at 100.9 reads uptime 1 at 101.1.
    Taken as exact, the restart would be put 0.8 s early and the lost take's request could
    still be open when the next owner sends (the CI failure: 5.95 s after the stop, not the
    6 s of restart + timeout + rest). The bound starts from now - uptime + 1."""
    from polite_crawler.frontier.redis_shared import Taken
    from polite_crawler.policy.rest import OriginState
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, REST, TIMEOUT, worker

    clock = Clock(1_000_000.0)
    b = worker(redis_server.url, "B", clock)
    saved = OriginState(ORIGIN)
    saved.next_allowed = clock() - 30.0  # a state from before the restart
    up = 1.0  # read at 1,000,000.0: the restart was between 999,998.0 and 999,999.0 + 1
    b._adopt(Taken(ORIGIN, saved.to_json(), b.queue.run_id, 0, 1, "", "", 0.0,
                   redis_up=up), clock(), clock())
    state = b.frontier.state(ORIGIN)
    latest_start = clock() - up + 1.0
    assert state.next_allowed >= latest_start + TIMEOUT + REST
    assert state.next_allowed == pytest.approx(latest_start + TIMEOUT + REST)


def test_the_restart_window_holds_while_the_whole_second_uptime_may_be_inside_it(
        redis_server):
    """An uptime read as the window's length may be up to a second long: Redis may
    have started less than the window ago, and the restart's bound holds (a window
    shorter than the exchange timeout and the rest: a short lease)."""
    from polite_crawler.frontier.redis_shared import Taken
    from polite_crawler.policy.rest import OriginState
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, REST, TIMEOUT, worker

    clock = Clock(1_000_000.0)
    b = worker(redis_server.url, "B", clock)
    b.restart_window = 2.0
    saved = OriginState(ORIGIN)
    saved.next_allowed = clock() - 30.0  # a state from before the restart
    up = b.restart_window  # Redis started between 3 s and 1 s ago
    b._adopt(Taken(ORIGIN, saved.to_json(), b.queue.run_id, 0, 1, "", "", 0.0,
                   redis_up=up), clock(), clock())
    assert b.frontier.state(ORIGIN).next_allowed == pytest.approx(
        clock() - up + 1.0 + TIMEOUT + REST)


def test_the_restart_bound_holds_a_rest_longer_than_the_lease_after_any_window(
        redis_server):
    """A host whose rest (its Crawl-delay, say 120 s) is longer than the lease: a take
    70 s after Redis started, past the lease plus the exchange timeout, still waits the
    whole rest after the restart plus the timeout. A window on the uptime ended the
    guard there, and the request the restart's lost take had out could be followed
    50 s short of its rest."""
    from polite_crawler.frontier.redis_shared import Taken
    from polite_crawler.policy.rest import OriginState
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, TIMEOUT, TTL, worker

    clock = Clock(1_000_000.0)
    b = worker(redis_server.url, "B", clock)
    saved = OriginState(ORIGIN)
    saved.next_allowed = clock() - 75.0  # written before the restart
    saved.last_rest = 120.0
    up = 70.0
    assert up > TTL + TIMEOUT  # past the window the guard had
    b._adopt(Taken(ORIGIN, saved.to_json(), b.queue.run_id, 0, 1, "", "", 0.0,
                   redis_up=up), clock(), clock())
    latest_start = clock() - up + 1.0
    assert b.frontier.state(ORIGIN).next_allowed == pytest.approx(
        latest_start + TIMEOUT + 120.0)


def test_a_state_from_long_before_a_long_running_redis_is_not_held_back(redis_server):
    """A Redis up for a day: the restart's bound is far behind and changes nothing."""
    from polite_crawler.frontier.redis_shared import Taken
    from polite_crawler.policy.rest import OriginState
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, worker

    clock = Clock(1_000_000.0)
    b = worker(redis_server.url, "B", clock)
    saved = OriginState(ORIGIN)
    saved.next_allowed = clock() - 90_000.0
    saved.last_rest = 120.0
    counted: Counter[str] = Counter()
    b.frontier.count = lambda key, n: counted.update({key: n})
    b._adopt(Taken(ORIGIN, saved.to_json(), b.queue.run_id, 0, 1, "", "", 0.0,
                   redis_up=86_400.0), clock(), clock())
    assert b.frontier.state(ORIGIN).next_allowed <= clock()
    assert counted["polite/redis/origin_taken"] == 1
    assert counted["polite/redis/origin_taken_after_restart"] == 0


def test_the_restart_bound_counts_from_the_uptimes_reading_not_the_plan(redis_server):
    """The take reads Redis's uptime in the batch, after the plan's time by the batch's
    round trips (on a busy machine, a while). Counted from the plan's time, the restart
    was put that much early, and a request the restart's lost take had out could still
    be open when the next owner sends. The bound counts from the batch's end."""
    from polite_crawler.frontier.redis_frontier import execute
    from tests.clock import Clock
    from tests.test_redis_lease import ORIGIN, REST, TIMEOUT, worker

    clock = Clock(1_000_000.0)
    a = worker(redis_server.url, "A", clock)
    first_page_done(a, clock, "/1", "/2")
    a.run_batch(closing=True)  # given back, its state written: from before the restart
    assert a.owned() == []
    clock.t += 30.0
    b = worker(redis_server.url, "B", clock)
    plan = b.plan()
    clock.t += 0.5  # the batch's round trips before its take reads the uptime
    out = execute(b.shared, plan, b.ttl)
    b.apply(out)
    [t] = out.taken
    assert t.origin == ORIGIN and t.redis_up < b.restart_window  # a fresh redis-server
    latest_start = clock() - t.redis_up + 1.0
    assert b.frontier.state(ORIGIN).next_allowed >= latest_start + TIMEOUT + REST


# --- A worker starting while Redis restarts ---------------------------------------------


def test_what_a_worker_reads_at_start_waits_for_a_restarting_redis(redis_server):
    """Its registration and the opt-out list are asked again while Redis refuses (a
    worker started then failed to open); past the wait the error is raised."""
    import redis

    from polite_crawler.store.redis_start import when_redis_answers

    client = redis_server.client()
    redis_server.stop_process()
    threading.Timer(1.0, redis_server.start).start()
    assert when_redis_answers(client.ping, redis_server.url, wait=20.0) is True
    redis_server.stop_process()
    with pytest.raises(redis.ConnectionError):
        when_redis_answers(client.ping, redis_server.url, wait=0.6)
