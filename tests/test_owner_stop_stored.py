"""An owner's stop for a refusal is part of its stored state (the embedded backend's
owner row, a run's): a process of the same run that meets the owner after the stop was
written (a resumed job, another job of the run) stops the owner's hosts without asking
them again; another run asks again (the remembered block stays the origin's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED
from tests.clock import T0, Clock
from tests.frontier_fixtures import Env, with_owner_rows

if TYPE_CHECKING:
    from pathlib import Path


def test_a_refusal_stops_the_owner_for_other_processes_of_the_run(tmp_path: Path) -> None:
    clock = Clock(T0)
    first, first_owners = with_owner_rows(tmp_path, clock, "job1", "run")
    first.push("http://www.example.org/a")
    first.f.stop("http://www.example.org", "403")
    first.f.checkpoint()  # the owner's row written with its stop
    second, second_owners = with_owner_rows(tmp_path, clock, "job2", "run")
    assert second.f.admit("http://cdn.example.org") == "stopped"
    assert second.f.stopped["http://cdn.example.org"] == OWNER_REFUSED
    assert second.f.admit("http://other.org") is None  # another owner
    later, later_owners = with_owner_rows(tmp_path, clock, "job3", "another run")
    assert later.f.admit("http://cdn.example.org") is None  # the stop is the run's
    for env, owners in ((first, first_owners), (second, second_owners),
                        (later, later_owners)):
        env.close()
        owners.close()


def test_a_resumed_job_drops_the_queued_rows_of_a_refused_owner(tmp_path: Path) -> None:
    clock = Clock(T0)
    before = Env(tmp_path, clock, name="job")
    before.push("http://cdn.example.org/1")
    before.push("http://cdn.example.org/2")
    before.push("http://other.org/1")
    before.f.queue.commit()
    before.close()
    refusing, refusing_owners = with_owner_rows(tmp_path, clock, "job2", "run")
    refusing.push("http://www.example.org/a")
    refusing.f.stop("http://www.example.org", "challenge:cloudflare")
    refusing.f.checkpoint()
    resumed, resumed_owners = with_owner_rows(tmp_path, clock, "job", "run")
    resumed.f.restore()
    assert resumed.f.stopped.get("http://cdn.example.org") == OWNER_REFUSED
    got = []
    for _ in range(40):
        d = resumed.f.pop()
        if d is not None:
            got.append(d.origin)
            resumed.f.release(d.origin, d.token)
        clock.t += 0.5
    assert set(got) == {"http://other.org"}
    for env, owners in ((refusing, refusing_owners), (resumed, resumed_owners)):
        env.close()
        owners.close()
