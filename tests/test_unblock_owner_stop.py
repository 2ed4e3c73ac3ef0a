"""``scrapy unblock`` on one machine lifts the stop the origin's owner keeps in its
stored row (``polite_owner``, a run's), not only the origin's block: the command run as
the operator runs it on a real state directory, jobs of the run as frontiers on its
origin store and an injected clock."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.frontier.store import OWNER_TABLE, OriginStore, process_owner
from polite_crawler.policy.blocks import Block
from polite_crawler.store.blocks import SQLiteBlockStore
from polite_crawler.store.paths import ORIGINS_DB
from tests.clock import Clock
from tests.commands_util import scrapy
from tests.frontier_fixtures import Env, with_owner_rows

if TYPE_CHECKING:
    from pathlib import Path

T0 = 1_700_000_000.0
WWW = "http://www.example.org"
RUN = "run"


def _job(tmp_path: Path, clock: Clock, name: str) -> tuple[Env, OriginStore]:
    """A job of the run: its owner rows in the state directory's origin store."""
    return with_owner_rows(tmp_path, clock, name, RUN, db=ORIGINS_DB)


def _close(*jobs: tuple[Env, OriginStore]) -> None:
    for env, owners in jobs:
        env.close()
        owners.close()


def test_unblock_lifts_the_owners_stored_stop(tmp_path: Path) -> None:
    """www.example.org refused the crawler (403): its owner's row keeps the stop for the
    run. ``scrapy unblock`` of the origin lifts its block and the owner's stop and keeps
    the row's budget count; a resumed job then asks the owner's host it had queued, and
    another job of the run a host of the owner found later."""
    clock = Clock(T0)
    before = _job(tmp_path, clock, "job")
    before[0].push("http://cdn.example.org/1")
    before[0].f.queue.commit()
    _close(before)
    refusing = _job(tmp_path, clock, "job2")
    refusing[0].push(f"{WWW}/a")
    d = refusing[0].f.pop()
    assert d is not None and d.origin == WWW  # a page sent: the owner's budget counts it
    refusing[0].f.release(d.origin, d.token)
    refusing[0].f.stop(WWW, "403")
    refusing[0].f.checkpoint()  # the owner's row written with its stop
    _close(refusing)
    blocks = SQLiteBlockStore(tmp_path / ORIGINS_DB)
    blocks.save(Block(WWW, "403", T0, T0 + 86_400, 1, T0, f"{WWW}/a"))
    blocks.close()
    kept = OriginStore(tmp_path / ORIGINS_DB, process_owner(), RUN, table=OWNER_TABLE)
    row, _, _ = kept.load("example.org")
    assert row.failure.stopped == f"403 from {WWW}" and row.budget_used == 1

    done = scrapy("unblock", WWW, "--state-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    (answer,) = json.loads(done.stdout)
    assert answer["owner_stops_lifted"] == {RUN: f"403 from {WWW}"}
    row, _, _ = kept.load("example.org")
    assert row.failure.stopped is None and row.budget_used == 1  # the count kept
    kept.close()
    text = scrapy("unblock", WWW, "--state-dir", str(tmp_path))
    assert text.returncode == 0, text.stderr
    assert "stop in crawl" not in text.stdout  # nothing left to lift

    resumed = _job(tmp_path, clock, "job")
    resumed[0].f.restore()
    assert resumed[0].f.stopped.get("http://cdn.example.org") != OWNER_REFUSED
    other = _job(tmp_path, clock, "job3")
    assert other[0].f.admit("http://new.example.org") is None
    _close(resumed, other)


def test_unblock_says_which_owner_stop_it_lifted(tmp_path: Path) -> None:
    """The text answer names the owner's stop lifted, as on a cluster."""
    clock = Clock(T0)
    refusing = _job(tmp_path, clock, "job")
    refusing[0].push(f"{WWW}/a")
    refusing[0].f.stop(WWW, "challenge:cloudflare")
    refusing[0].f.checkpoint()
    _close(refusing)
    done = scrapy("unblock", "http://cdn.example.org", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "http://cdn.example.org: not blocked; its owner's stop in crawl run lifted "
        f"(challenge:cloudflare from {WWW})")
