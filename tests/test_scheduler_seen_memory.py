"""The scheduler keeps the seen set's "seen" answers in memory only where its backend's
driver says the seen set only grows while this job holds it: the embedded one (this
job's SQLite file), not a cluster's Redis (the crawl's, shared by every worker)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.urls import origin_of
from tests.frontier_fixtures import open_scheduler, site_crawler
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from polite_crawler.frontier.scheduler import FrontierScheduler

# ruff: noqa: F811

ORIGIN = "http://127.0.0.1:8000"
URLS = [f"{ORIGIN}/nav", f"{ORIGIN}/about"]  # a site's navigation links, on every page


@contextmanager
def scheduler(tmp_path: Path, *, answer: bool = False,
              **settings: Any) -> Iterator[tuple[FrontierScheduler, list[int]]]:
    """A real frontier scheduler opened on the backend the settings name, and how many
    fingerprints each batch asked of its seen set. ``answer``: the seen set's answers
    are given here, "seen" for a fingerprint asked before (Redis's queue answers "new"
    and decides at push time), so that a memory of them would show."""
    sched = open_scheduler(*site_crawler(tmp_path, ORIGIN, **settings))
    asked: list[int] = []
    f = sched.frontier
    assert f is not None
    add_seen_many = f.queue.add_seen_many

    known: set[bytes] = set()

    def counted(fps: list[bytes]) -> list[bool]:
        asked.append(len(fps))
        fresh = add_seen_many(fps)
        if answer:
            fresh = [fp not in known for fp in fps]
            known.update(fps)
        return fresh

    f.queue.add_seen_many = counted  # type: ignore[method-assign]
    try:
        yield sched, asked
    finally:
        sched.close("shutdown")


def found_on_three_pages(sched: FrontierScheduler) -> list[int]:
    return [sched.enqueue_urls([(u, origin_of(u), None) for u in URLS], callback="parse")
            for _ in range(3)]


def test_the_embedded_seen_set_is_remembered(tmp_path: Path) -> None:
    with scheduler(tmp_path) as (sched, asked):
        assert sched.driver is not None and sched.driver.seen_set_only_grows
        assert found_on_three_pages(sched) == [2, 0, 0]
        # Asked once new and once seen; the third page's links come from memory.
        assert asked == [2, 2]


def test_a_cluster_seen_set_is_asked_every_time(tmp_path: Path, redis_url: str) -> None:
    with scheduler(tmp_path, answer=True, POLITE_FRONTIER=redis_url,
                   POLITE_CRAWL="seen") as (sched, asked):
        assert sched.driver is not None and not sched.driver.seen_set_only_grows
        assert found_on_three_pages(sched) == [2, 0, 0]
        assert asked == [2, 2, 2]  # the seen links asked again on every page
