"""An owner is its registrable domain: its hosts share one daily budget (wildcard
subdomains cannot multiply it) and a cap on requests at once across them; the Public
Suffix List's private section makes ``a.github.io`` and ``b.github.io`` two owners."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED, FrontierConfig
from polite_crawler.policy.owners import owner_of
from tests.clock import T0, Clock
from tests.frontier_fixtures import PARAMS, Env, with_owner_rows

if TYPE_CHECKING:
    from pathlib import Path


def _drain(env: Env, clock: Clock, seconds: float) -> list[str]:
    got = []
    until = clock.t + seconds
    while clock.t < until:
        d = env.f.pop()
        if d is not None and d.row is not None:
            got.append(d.row.url)
            env.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.01)
            env.f.done(d.row.id)
            continue
        clock.t += 0.25
    return got


def test_the_owner_is_the_registrable_domain() -> None:
    assert owner_of("www.example.co.uk") == owner_of("cdn.example.co.uk") == "example.co.uk"
    assert owner_of("a.github.io") != owner_of("b.github.io")  # the private section
    assert owner_of("10.0.0.1") == "10.0.0.1"
    assert owner_of("intranet") == "intranet"


def test_wildcard_subdomains_share_one_daily_budget(tmp_path: Path) -> None:
    clock = Clock(T0)
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, budget=3,
                                                     owner_concurrency=0))
    for host in ("x1", "x2", "x3", "x4"):
        env.push(f"http://{host}.example.org/a")
        env.push(f"http://{host}.example.org/b")
    got = _drain(env, clock, 30)
    assert len(got) == 3  # one budget for the owner, not one a host name
    assert env.f.admit("http://x5.example.org") == "budget_exhausted"
    env.close()


def test_two_owners_under_a_private_suffix_have_a_budget_each(tmp_path: Path) -> None:
    clock = Clock(T0)
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, budget=2))
    for host in ("a.github.io", "b.github.io"):
        for path in ("/1", "/2", "/3"):
            env.push(f"http://{host}{path}")
    got = _drain(env, clock, 30)
    assert sorted(got) == ["http://a.github.io/1", "http://a.github.io/2",
                           "http://b.github.io/1", "http://b.github.io/2"]
    env.close()


def test_requests_at_once_across_an_owners_hosts_are_capped(tmp_path: Path) -> None:
    clock = Clock(T0)
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, owner_concurrency=2))
    for host in ("www", "cdn", "api"):
        env.push(f"http://{host}.example.org/a")
    env.push("http://other.example.net/a")
    out = [d for d in (env.f.pop() for _ in range(4)) if d is not None]
    origins = sorted(d.origin for d in out)
    assert len([o for o in origins if o.endswith("example.org")]) == 2
    assert "http://other.example.net" in origins  # another owner is not held
    assert env.stats["polite/frontier/owner_busy"] >= 1
    first = next(d for d in out if d.origin.endswith("example.org"))
    env.f.settle(first.origin, first.token, start=clock.t, end=clock.t + 0.01)
    left = env.f.pop()
    assert left is not None and left.origin.endswith("example.org")
    env.close()


def test_the_owners_budget_is_shared_by_jobs_through_the_state_db(tmp_path: Path) -> None:
    clock = Clock(T0)
    config = FrontierConfig(params=PARAMS, budget=2, owner_concurrency=0)
    env, _ = with_owner_rows(tmp_path, clock, "job", "run", config=config)
    env.push("http://a.example.org/1")
    env.push("http://a.example.org/2")
    assert len(_drain(env, clock, 10)) == 2
    env.f.checkpoint()
    other, _ = with_owner_rows(tmp_path, clock, "job2", "run", config=config)
    assert other.f.admit("http://b.example.org") == "budget_exhausted"
    env.close()
    other.close()


def test_a_refusal_stops_every_host_of_its_owner_and_no_other(tmp_path: Path) -> None:
    """A 403 from one host of example.org stops its other hosts for the run (queued rows
    dropped, a host found later refused at once); a.github.io's refusal leaves
    b.github.io alone (two owners under a private suffix); a stop that is not a
    refusal (the breaker) stays with its origin."""
    clock = Clock(T0)
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS))
    for url in ("http://www.example.org/a", "https://cdn.example.org/b",
                "http://a.github.io/1", "http://b.github.io/1",
                "http://x.other.org/1", "http://y.other.org/1"):
        env.push(url)
    env.f.stop("http://www.example.org", "403")
    assert env.f.stopped["https://cdn.example.org"] == OWNER_REFUSED
    assert env.f.admit("http://new.example.org") == "stopped"
    env.f.stop("http://a.github.io", "challenge:cloudflare")
    env.f.stop("http://x.other.org", "breaker")
    assert env.f.admit("http://b.github.io") is None
    assert env.f.admit("http://y.other.org") is None
    got = _drain(env, clock, 30)
    assert sorted(got) == ["http://b.github.io/1", "http://y.other.org/1"]
    env.close()
