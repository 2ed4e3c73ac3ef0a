"""The servers in the metrics and in the frontier's snapshot: the busiest only, each with
our load share, requests open, concurrency limit and latency; and the frontier's server
bound over an injected address book (many names on one address share one bound)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.context import polite_context
from polite_crawler.extensions.metrics import TOP_SERVERS
from polite_crawler.frontier.core import server_snapshot
from tests.clock import Clock
from tests.frontier_fixtures import Env
from tests.test_metrics import _families, _Frontier, _metrics

if TYPE_CHECKING:
    from pathlib import Path

T0 = 1_700_000_000.0


def _addresses(name: str) -> str:
    """Hosts n0 ... n39: n0 to n9 share 10.0.0.1; every other one has its own."""
    i = int(name.split(".", maxsplit=1)[0][1:])
    return "10.0.0.1" if i < 10 else f"10.0.1.{i}"


def _crawl_once(env: Env, clock: Clock, n: int) -> None:
    for i in range(n):
        env.push(f"http://n{i}.test/")
    env.f.address_of = _addresses
    for _ in range(200):
        d = env.f.pop()
        if d is None:
            clock.t += 0.5
            continue
        env.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.1)


def test_names_on_one_address_share_one_bound(tmp_path: Path) -> None:
    clock = Clock(T0)
    env = Env(tmp_path, clock)
    for i in range(10):
        env.push(f"http://n{i}.test/a")
    env.f.address_of = _addresses
    out = [d for d in (env.f.pop() for _ in range(10)) if d is not None]
    assert len(out) == 1  # one address, a limit of one: one request, the rest wait
    assert env.stats["polite/frontier/server_busy"] == 9
    d = out[0]
    env.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.1)
    clock.t += 0.1 + 5 * 0.1 - 0.02
    assert env.f.pop() is None  # the server's rest: five times the round's answer
    clock.t += 0.05
    assert env.f.pop() is not None
    env.close()


def test_a_name_not_resolved_yet_waits_for_its_address(tmp_path: Path) -> None:
    clock = Clock(T0)
    env = Env(tmp_path, clock)
    env.push("http://slow.test/a")
    known: dict[str, str] = {}
    env.f.address_of = known.get
    assert env.f.pop() is None
    assert env.f.next_eligible() is None  # out of the heap until the answer
    known["slow.test"] = "10.0.0.9"
    env.f.address_known("slow.test")
    assert env.f.pop() is not None
    env.close()


def test_metrics_export_the_busiest_servers_only(tmp_path: Path) -> None:
    m = _metrics(tmp_path)
    ctx = polite_context(m.crawler)
    clock = Clock(T0)
    env = Env(tmp_path, clock)
    ctx.frontier, ctx.clock = _Frontier(env.f), clock
    _crawl_once(env, clock, 40)
    views = server_snapshot(env.f, clock.t, 100)
    assert len(views) == 31  # one shared address and 30 of their own
    shared = next(v for v in views if v.address == "10.0.0.1")
    assert len(shared.hosts) == 10
    assert views[0].share >= views[-1].share
    fams = _families(m.render().decode())
    for name in ("polite_server_load_share", "polite_server_in_flight",
                 "polite_server_concurrency_limit", "polite_server_latency_seconds",
                 "polite_server_hosts"):
        servers = {s.labels["server"] for s in fams[name].samples}
        assert 0 < len(servers) <= TOP_SERVERS, name
    share = {s.labels["server"]: s.value for s in fams["polite_server_load_share"].samples}
    assert "10.0.0.1" in share  # the busiest: ten sites' load
    env.close()
