"""Jobs of one run share an owner's stored row (``polite_owner``, the embedded backend)
and each writes it at its checkpoints: a write merges with what the row holds, never
overwrites it. Another job's stop is kept (and this job adopts it), the jobs' budget
counts add up (the owner's daily budget is not multiplied by its jobs), and a stop
recorded before ``scrapy unblock`` lifted the owner's stop is not written back.
Real SQLite files, two jobs of one run, an injected clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED, FrontierConfig
from polite_crawler.frontier.store import OWNER_TABLE, OriginStore, lift_owner_stop, process_owner
from tests.clock import T0, Clock
from tests.frontier_fixtures import PARAMS, Env, with_owner_rows

if TYPE_CHECKING:
    from pathlib import Path

RUN = "run"
WWW = "http://www.example.org"


def _send(env: Env, clock: Clock, url: str) -> None:
    """One page of the url's origin sent and answered (its owner's budget charged)."""
    env.push(url)
    d = env.f.pop()
    assert d is not None and url.startswith(d.origin)
    env.f.release(d.origin, d.token)
    clock.t += 0.01


def _row(tmp: Path, owner: str = "example.org") -> tuple[str | None, str, int]:
    """The owner's stored row: its stop, its budget day and count."""
    store = OriginStore(tmp / "state.sqlite3", process_owner(), RUN, table=OWNER_TABLE)
    state = store.load(owner)[0]
    store.close()
    return state.failure.stopped, state.budget_day, state.budget_used


def _close(*jobs: tuple[Env, OriginStore]) -> None:
    for env, owners in jobs:
        env.close()
        owners.close()


def test_another_jobs_stop_is_kept_and_adopted(tmp_path: Path) -> None:
    """Job 2 met the owner before job 1's refusal was written; its next write of the
    owner's count keeps job 1's stop, and job 2 stops its own hosts of the owner."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    two = with_owner_rows(tmp_path, clock, "job2", RUN)
    _send(one[0], clock, f"{WWW}/a")
    _send(two[0], clock, "http://cdn.example.org/1")
    two[0].push("http://cdn.example.org/2")  # queued, not sent yet
    one[0].f.stop(WWW, "403")
    one[0].f.checkpoint()  # the owner's row: the stop, a page
    two[0].f.checkpoint()  # job 2's page counted; the stop stays
    assert _row(tmp_path)[0] == f"403 from {WWW}"
    assert two[0].f.stopped.get("http://cdn.example.org") == OWNER_REFUSED
    assert two[0].f.admit("http://new.example.org") == "stopped"
    assert two[0].f.pending == 0  # the queued page of the owner's host is dropped
    three = with_owner_rows(tmp_path, clock, "job3", RUN)
    assert three[0].f.admit("http://new.example.org") == "stopped"
    _close(one, two, three)


def test_two_jobs_counts_add_up(tmp_path: Path) -> None:
    """The owner's daily budget is shared by its hosts across the run's jobs: two
    jobs' pages add up in its row, and each job then judges the budget on the sum."""
    clock = Clock(T0)
    config = FrontierConfig(params=PARAMS, budget=6)
    one = with_owner_rows(tmp_path, clock, "job1", RUN, config=config)
    two = with_owner_rows(tmp_path, clock, "job2", RUN, config=config)
    for n in range(2):
        _send(one[0], clock, f"http://a{n}.example.org/")
    for n in range(3):
        _send(two[0], clock, f"http://b{n}.example.org/")
    one[0].f.checkpoint()
    two[0].f.checkpoint()
    one[0].f.checkpoint()  # nothing new of job 1's: the row stays
    assert _row(tmp_path)[2] == 5
    _send(one[0], clock, "http://a9.example.org/")
    one[0].f.checkpoint()
    assert _row(tmp_path)[2] == 6
    # Job 1 learnt job 2's pages at its write: the owner's budget is spent for it.
    assert one[0].f.admit("http://c.example.org") == "budget_exhausted"
    _send(two[0], clock, "http://b9.example.org/")  # within what job 2 knew (5 of 6)
    two[0].f.checkpoint()
    assert _row(tmp_path)[2] == 7  # counted, never lost
    assert two[0].f.admit("http://c.example.org") == "budget_exhausted"
    _close(one, two)


def test_a_new_days_count_starts_from_the_new_day(tmp_path: Path) -> None:
    """A row of yesterday's count is today's zero; jobs' pages of today add up."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    two = with_owner_rows(tmp_path, clock, "job2", RUN)
    for n in range(3):
        _send(one[0], clock, f"http://a{n}.example.org/")
    one[0].f.checkpoint()
    day1 = _row(tmp_path)[1]
    clock.t += 86_400.0
    _send(two[0], clock, "http://b0.example.org/")
    two[0].f.checkpoint()
    _send(one[0], clock, "http://a9.example.org/")
    one[0].f.checkpoint()
    _stop, day, used = _row(tmp_path)
    assert day != day1 and used == 2
    _close(one, two)


def test_an_unblock_after_the_refusal_is_not_undone(tmp_path: Path) -> None:
    """The refusal came before ``scrapy unblock`` lifted the owner's stop: the
    operator's unblock wins, so the refusing job's next checkpoint does not write the
    stop back (its own stopped hosts stay stopped for it), and another job of the run
    asks the owner's hosts again."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    _send(one[0], clock, f"{WWW}/a")
    one[0].f.checkpoint()
    one[0].f.stop(WWW, "403")  # within the checkpoint interval: not written yet
    clock.t += 1.0
    lift_owner_stop(tmp_path / "state.sqlite3", "example.org", clock.t)
    clock.t += 1.0
    one[0].f.checkpoint()
    assert _row(tmp_path)[0] is None
    assert one[0].f.stopped.get(WWW) == "403"
    two = with_owner_rows(tmp_path, clock, "job2", RUN)
    assert two[0].f.admit("http://new.example.org") is None
    _close(one, two)


def test_an_unblock_of_a_written_stop_is_not_undone(tmp_path: Path) -> None:
    """The stop was written, then lifted; the refusing job's next write of the owner's
    row (a page of the owner's count) keeps the row as the operator left it."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    _send(one[0], clock, "http://cdn.example.org/1")
    one[0].push("http://cdn.example.org/2")
    one[0].f.stop(WWW, "403")
    one[0].f.checkpoint()
    assert _row(tmp_path)[0] == f"403 from {WWW}"
    clock.t += 1.0
    assert lift_owner_stop(tmp_path / "state.sqlite3", "example.org", clock.t)
    clock.t += 1.0
    one[0].f.checkpoint()
    one[0].f.close(finished=False)
    assert _row(tmp_path)[0] is None
    _close(one)


def test_a_refusal_after_an_unblock_stops_the_owner_again(tmp_path: Path) -> None:
    """The unblock lifts the stops recorded before it, not a refusal that follows."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    _send(one[0], clock, f"{WWW}/a")
    one[0].f.checkpoint()
    lift_owner_stop(tmp_path / "state.sqlite3", "example.org", clock.t)
    clock.t += 1.0
    one[0].f.stop(WWW, "403")
    one[0].f.checkpoint()
    assert _row(tmp_path)[0] == f"403 from {WWW}"
    _close(one)


def test_a_page_put_back_after_a_write_is_taken_off_the_rows_count(tmp_path: Path) -> None:
    """A page charged, written to the row at a checkpoint, then never sent (put back):
    the next checkpoint takes it off the row's count, another job's pages kept."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    two = with_owner_rows(tmp_path, clock, "job2", RUN)
    _send(two[0], clock, "http://b.example.org/")
    two[0].f.checkpoint()
    one[0].push(f"{WWW}/a")
    d = one[0].f.pop()
    assert d is not None
    one[0].f.checkpoint()
    assert _row(tmp_path)[2] == 2
    assert one[0].f.put_back(d.origin, d.token)
    one[0].f.checkpoint()
    assert _row(tmp_path)[2] == 1
    _close(one, two)


def test_a_job_learns_another_jobs_stop_without_writing_the_owner(tmp_path: Path) -> None:
    """Job 2 queued a page of the owner's host but sent none since its last write: its
    checkpoint reads the stop job 1 stored, and the page is never sent."""
    clock = Clock(T0)
    one = with_owner_rows(tmp_path, clock, "job1", RUN)
    two = with_owner_rows(tmp_path, clock, "job2", RUN)
    two[0].push("http://cdn.example.org/1")
    two[0].push("http://other.org/1")
    two[0].f.checkpoint()
    one[0].push(f"{WWW}/a")
    one[0].f.stop(WWW, "403")
    clock.t += 5.0
    one[0].f.checkpoint()
    clock.t += 5.0
    two[0].f.checkpoint()
    assert two[0].f.stopped.get("http://cdn.example.org") == OWNER_REFUSED
    sent = []
    for _ in range(20):
        d = two[0].f.pop()
        if d is not None:
            sent.append(d.origin)
            two[0].f.release(d.origin, d.token)
        clock.t += 0.5
    assert sent == ["http://other.org"]
    _close(one, two)
