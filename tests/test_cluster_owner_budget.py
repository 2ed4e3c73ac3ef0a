"""The owner's daily budget is one rule for one process and a cluster
(:func:`polite_crawler.policy.owners.budget_spent`, :func:`owner_used_today`): over a
table of the counts an owner's group keeps in Redis (``b:<origin>``, "<day> <used>"),
a worker that takes the group with the real scripts (a real redis-server, an injected
clock) refuses a new host of the owner exactly when the policy says the budget is
spent."""

from __future__ import annotations

import pytest

from polite_crawler.policy.owners import budget_spent, owner_used_today
from polite_crawler.policy.rest import OriginState, utc_day
from polite_crawler.store.redis_keys import group_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import T0, offer, worker

# ruff: noqa: F811

TODAY = utc_day(T0)
YESTERDAY = utc_day(T0 - 86_400)
TOMORROW = utc_day(T0 + 86_400)

# (the group's counts: origin -> "<day> <used>", the owner's count today)
CASES = [
    ({}, 0),
    ({"http://www.example.org": f"{TODAY} 3"}, 3),
    ({"http://www.example.org": f"{TODAY} 2", "https://www.example.org": f"{TODAY} 5"}, 7),
    ({"http://www.example.org": f"{YESTERDAY} 9", "http://cdn.example.org": f"{TODAY} 1"}, 1),
    ({"http://www.example.org": f"{YESTERDAY} 4"}, 0),
    ({"http://www.example.org": f"{TOMORROW} 6", "http://x.example.org:8080": f"{TODAY} 2"},
     2),
    ({"http://www.example.org": f"{TODAY} 0", "http://a.example.org": f"{TODAY} 4",
      "http://b.example.org": f"{TODAY} 4"}, 8),
]


@pytest.mark.parametrize(("counts", "used"), CASES)
def test_a_group_taken_counts_the_owners_budget_as_the_policy_does(
        redis_url: str, counts: dict[str, str], used: int) -> None:
    assert owner_used_today(counts.values(), TODAY) == used
    owner = OriginState("example.org", budget_day=TODAY, budget_used=used)
    for limit in sorted({max(used, 1), used + 1}):
        clock = Clock(T0)
        w = worker(redis_url, clock, f"w{limit}", budget=limit)
        r = w.shared.r
        r.delete(group_key("example.org"))
        if counts:
            r.hset(group_key("example.org"), mapping={f"b:{o}": c for o, c in counts.items()})
        site = "http://new.example.org"
        offer(w, f"{site}/1")
        w.run_batch()  # the row in, the origin taken with its owner's group
        w.run_batch()
        assert site in w.owned()
        spent = budget_spent(OriginState(site), owner, limit, clock())
        assert (w.frontier.admit(site) == "budget_exhausted") == spent, (limit, used)
        w.close(finished=False)
