"""The gate and a request the download handler could not send for want of a file
descriptor (``handlers.DescriptorsExhaustedError``): not a lapsed lease and not the
site's failure. Its own line and count, the request held back (its row back in the
origin's queue, the origin free with no rest), an access-log verdict of its own.

A real frontier scheduler on the embedded backend (SQLite files in the test's
directory) and the gate as a crawl builds it."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scrapy import Request

from polite_crawler.handlers import DescriptorsExhaustedError, LeaseLapsedError
from polite_crawler.middlewares.gate import GateMiddleware
from tests.test_scheduler_seen_memory import ORIGIN, scheduler

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    import pytest

    from polite_crawler.frontier.scheduler import FrontierScheduler


@contextmanager
def gated(tmp_path: Path) -> Iterator[tuple[FrontierScheduler, GateMiddleware]]:
    """A real frontier scheduler opened on the embedded backend, and the gate."""
    with scheduler(tmp_path) as (sched, _asked):
        yield sched, GateMiddleware(sched.crawler)


def _stats(sched: FrontierScheduler) -> dict[str, Any]:
    assert sched.crawler.stats is not None
    return sched.crawler.stats.get_stats()


def _handed_out(sched: FrontierScheduler, gate: GateMiddleware) -> Request:
    assert sched.enqueue_request(Request(ORIGIN + "/a"))
    req = sched.next_request()
    assert req is not None and req.url == ORIGIN + "/a"
    assert gate.process_request(req) is None  # dispatched: on to the handler
    return req


def test_a_request_not_sent_for_want_of_descriptors_is_said_so_not_a_lapsed_lease(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with gated(tmp_path) as (sched, gate):
        req = _handed_out(sched, gate)
        with caplog.at_level(logging.DEBUG, logger="polite_crawler.middlewares.gate"):
            out = gate.process_exception(req, DescriptorsExhaustedError(
                f"{req.url}: not sent, the process has no file descriptor left"))
        assert out is req  # held back: back to the scheduler, no errback
        lines = [r.getMessage() for r in caplog.records
                 if r.name == "polite_crawler.middlewares.gate"]
        assert len(lines) == 1, lines
        assert "no file descriptor left" in lines[0]
        assert "descriptors_exhausted" in lines[0]
        assert "lease" not in lines[0]
        stats = _stats(sched)
        assert stats.get("polite/descriptors/not_sent") == 1
        assert "polite/redis/held_at_gate" not in stats
        assert "polite/redis/held_at_gate/handler" not in stats
        # Its row goes back to the origin's queue and the origin is free, no rest.
        assert sched.enqueue_request(out)
        again = sched.next_request()
        assert again is not None and again.url == ORIGIN + "/a"


def test_a_lapsed_lease_is_still_told_as_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with gated(tmp_path) as (sched, gate):
        req = _handed_out(sched, gate)
        with caplog.at_level(logging.INFO, logger="polite_crawler.middlewares.gate"):
            out = gate.process_exception(req, LeaseLapsedError("not started"))
        assert out is req
        assert any("valid lease" in r.getMessage() for r in caplog.records)
        stats = _stats(sched)
        assert stats.get("polite/redis/held_at_gate/handler") == 1
        assert "polite/descriptors/not_sent" not in stats
