"""A Redis batch plans only the origins touched since the last one, and loses nothing by it.

Two workers are driven in lockstep through the same crawl (each in a keyspace of its own on
one real redis-server, the same injected clock, the same events): one plans as it does
in production, visiting only the origins something happened to and those whose planned
time came; the other walks every owned origin every batch (``walk_all``, the plan as it
was). Every batch's plan must be the same: the same origins synced with the same state,
claims, give backs, done rows and checks, the same room and the same claims with pushes.
A touch or a planned time missed anywhere shows as a batch that differs.
"""

from __future__ import annotations

import random
from typing import Any

from polite_crawler.frontier.core import CONTENT, FrontierConfig
from polite_crawler.frontier.redis_frontier import Plan, RedisFrontier, execute
from polite_crawler.frontier.redis_shared import RedisShared, row_body
from polite_crawler.policy.rest import RestParams
from tests.clock import Clock
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)

# ruff: noqa: F811

TTL = 4.0
INTERVAL = 0.5


class InOrder(RedisShared):
    """Origins nobody owns popped and sampled in sorted order, not Redis's random one
    (SPOP, SRANDMEMBER), so that both workers take the same origins in the same batch."""

    def free(self, n: int) -> list[str]:
        found = sorted(bytes(o).decode() for o in self.r.smembers(self.free_key))[:n]
        if found:
            self.r.srem(self.free_key, *found)
        return found

    def candidates(self, n: int) -> list[str]:
        return sorted(bytes(o).decode() for o in self.r.smembers(self.active_key))[:n]


def make(url: str, crawl: str, clock: Clock, kept: set[str], counts: dict[str, int], *,
         walk_all: bool) -> RedisFrontier:
    shared = InOrder(url, "c", f"w-{crawl}", prefix=f"{crawl}:")  # one keyspace each
    shared.register(clock(), TTL)

    def count(key: str, n: int) -> None:
        counts[key] = counts.get(key, 0) + n

    f = RedisFrontier(shared, FrontierConfig(params=RestParams(rest_page=1.0, jitter=0.0),
                                             budget=10_000),
                      clock=clock, ttl=TTL, interval=INTERVAL, exchange_timeout=2.0,
                      clock_skew=0.0, robots=lambda: None, count=count)
    f.walk_all = walk_all
    # The take reads how long Redis has been up, in real time, to tell a state from
    # before a restart; the two workers' takes fall a moment apart, and a session's
    # server may be seconds old. No restart here: that rule is tested elsewhere.
    f.restart_window = 0.0
    f.keep = lambda origin: origin in kept
    return f


def shape(plan: Plan) -> dict[str, Any]:
    """What a plan asks of Redis, in an order that does not depend on the walk's."""
    return {
        "syncs": {s.origin: (s.state, s.claim, s.give_back, sorted(s.done), sorted(s.check),
                             s.held) for s in plan.syncs},
        "room": plan.room,
        "want": sorted(plan.want),
        "owned": sorted(plan.owned),
        "push_claims": plan.push_claims,
        "pushes": {o: sorted(rows) for o, rows in plan.pushes.items()},
        "stops": plan.stops,
        "drops": sorted(plan.drops),
    }


def drive(url: str, seed: int, steps: int = 360) -> tuple[dict[str, int], dict[str, int],
                                                        dict[str, int]]:
    """Returns what was done and the two workers' counters (touched, full)."""
    rng = random.Random(seed)
    clock = Clock(1_000_000.0)
    kept: set[str] = set()
    counts: tuple[dict[str, int], dict[str, int]] = ({}, {})
    touched = make(url, f"touched{seed}", clock, kept, counts[0], walk_all=False)
    full = make(url, f"full{seed}", clock, kept, counts[1], walk_all=True)
    both = (touched, full)
    pushers = [RedisShared(url, "c", "pusher", prefix=f.shared.p) for f in both]
    origins = [f"http://127.0.0.{k + 1}:8000" for k in range(24)]  # loopback: the rest applies
    out: list[dict[int, Any]] = [{}, {}]  # per worker: token -> (dispatch, steps left, slow)
    late: list[list[tuple[int, int | None]]] = [[], []]  # per worker: (step, row) to be done
    pages = 0
    kinds: dict[str, int] = {}
    for step in range(steps):
        clock.t += rng.choice((0.1, 0.5, 0.5, 1.0, 2.5))
        # New rows: a burst for some origins early, then a trickle, then long silences
        # (origins run empty, are given back, and come back with later links).
        if step < 110 and rng.random() < (0.9 if step < 10 else 0.3):
            for origin in rng.sample(origins, rng.randint(1, 6)):
                for _ in range(rng.randint(1, rng.choice((8, 20)))):
                    pages += 1
                    prio = rng.randint(0, 1)
                    for f in both:
                        f.frontier.push(origin, prio, f"{origin}/p{pages}", b"data")
        if rng.random() < 0.05:
            kept.symmetric_difference_update({rng.choice(origins)})
        if step < 150 and rng.random() < 0.15 and touched.queue.own:
            # Another worker queues rows for an origin this one owns (it is nudged).
            origin = rng.choice(sorted(touched.queue.own))
            rows = []
            for _ in range(rng.randint(3, 12)):
                pages += 1
                rows.append((None, 0, row_body(origin, f"{origin}/q{pages}", b"data")))
            for pusher in pushers:
                # Stamped long ago: it never counts as a live worker sharing the origins.
                pusher.batch(now=clock.t - 10 * TTL, ttl=TTL, pushes={origin: rows}, seen={},
                             templates={}, stops={}, drops=[], owned=[])
            kinds["nudges"] = kinds.get("nudges", 0) + 1
        if step == 70:
            for f in both:
                f.frontier.stop(origins[3], "http_403")
        # Dispatch what is due (the same in both), and end some of what is out.
        for i, f in enumerate(both):
            dispatched = []
            while (d := f.frontier.pop()) is not None:
                dispatched.append(d)
            # Origins due together go in the order their records were last placed in
            # the heap, which follows the batch's reply: compared as a set.
            dispatched.sort(key=lambda d: (d.origin, d.kind))
            plan_of = [(d.origin, d.kind, d.row.url if d.row is not None else None)
                       for d in dispatched]
            if i == 0:
                expected = plan_of
                fates = [rng.choice(("end", "end", "end", "later", "later", "put_back",
                                     "slow"))
                         for _ in dispatched]
                lengths = [rng.randint(1, 4) for _ in dispatched]
            else:
                assert plan_of == expected, f"step {step}: dispatches differ"
            for d, fate, n in zip(dispatched, fates, lengths, strict=True):
                kinds[fate] = kinds.get(fate, 0) + 1
                if fate == "put_back":
                    f.frontier.put_back(d.origin, d.token)
                elif fate == "end":
                    out[i][d.token] = (d, 0, False)
                else:
                    out[i][d.token] = (d, n, fate == "slow")
            for at, row_id in [x for x in late[i] if x[0] <= step]:
                late[i].remove((at, row_id))
                f.frontier.done(row_id)
            for token, (d, left, slow) in sorted(out[i].items()):
                if left > 0:
                    out[i][token] = (d, left - 1, slow)
                    continue
                del out[i][token]
                row_id = d.row.id if d.row is not None else None
                if slow:
                    # A slow answer (its rest grows: the state must reach Redis at once),
                    # the spider done with it only some batches later.
                    f.frontier.settle(d.origin, d.token, start=clock.t - 3.0, end=clock.t)
                    late[i].append((step + 1 + len(d.row.url if d.row else "") % 3, row_id))
                    continue
                f.frontier.settle(d.origin, d.token, start=clock.t - 0.2, end=clock.t)
                if d.kind == CONTENT:
                    f.frontier.done(row_id)
        plans = [f.plan() for f in both]
        assert shape(plans[0]) == shape(plans[1]), f"step {step}: the plans differ"
        for f, plan in zip(both, plans, strict=True):
            f.apply(execute(f.shared, plan, f.ttl))
    kinds["pages"] = pages
    return kinds, counts[0], counts[1]


def test_the_touched_plan_is_the_full_walks_plan(redis_url):
    given_back = 0
    for seed in (1, 2, 3):
        kinds, touched, full = drive(redis_url, seed)
        # The crawl did what the test is about: rows fetched, put back, kept out and
        # answered slowly over several batches, rows queued by another worker, an origin
        # stopped, origins given back when empty and taken again.
        assert kinds["pages"] > 300 and kinds["put_back"] > 10 and kinds["later"] > 50
        assert kinds["slow"] > 50 and kinds["nudges"] > 5
        assert touched.get("polite/origin/stopped/http_403") == 1
        assert touched.get("polite/redis/origin_taken", 0) > 24  # some taken again
        given_back += touched.get("polite/redis/origin_given_back", 0)
        for key in ("polite/redis/origin_given_back", "polite/redis/origin_taken",
                    "polite/frontier/dispatched/content"):
            assert touched.get(key) == full.get(key)
        # ... and the touched plan looked at fewer origins than the full walk, even on
        # this busy crawl (1 s rests, every origin active; bench.plan_cost measures
        # the quiet one: many origins, long rests).
        assert touched["polite/redis/plan_visits"] < 0.8 * full["polite/redis/plan_visits"]
    assert given_back > 20
