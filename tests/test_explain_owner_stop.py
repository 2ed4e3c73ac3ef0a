"""``scrapy explain URL`` names the stop the URL's owner (its registrable domain) keeps
for a run, and when ``scrapy unblock`` last lifted it: the command as the operator runs
it on a real state directory."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from polite_crawler.frontier.store import OWNER_TABLE, OriginStore, lift_owner_stop
from polite_crawler.policy.rest import OriginState
from polite_crawler.store.paths import ORIGINS_DB
from tests.commands_util import scrapy, scrapy_json

if TYPE_CHECKING:
    from pathlib import Path

STOP = "403 from http://www.example.org"


def test_explain_shows_the_owners_stop_then_its_lift(tmp_path: Path) -> None:
    db = tmp_path / ORIGINS_DB
    owners = OriginStore(db, "test:1:x", "run-1", table=OWNER_TABLE)
    row = OriginState("example.org")
    row.failure.stopped = STOP
    owners.save(row, time.time())
    owners.close()
    url = "http://cdn.example.org/page"
    args = ["--state-dir", str(tmp_path)]
    shown = scrapy_json("explain", url, *args)
    assert shown["owner"]["stops"] == {"run-1": STOP}
    assert shown["owner"]["stop_lifted"] is None
    text = scrapy("explain", url, *args)
    assert text.returncode == 0, text.stderr
    assert f"  stopped in run-1: {STOP} (a refusal from one of its hosts" in text.stdout
    lifted = time.time()
    lift_owner_stop(db, "example.org", lifted)
    shown = scrapy_json("explain", url, *args)
    assert shown["owner"]["stops"] == {}
    assert shown["owner"]["stop_lifted"] == lifted
    text = scrapy("explain", url, *args)
    assert "  its stop last lifted " in text.stdout and "stopped in" not in text.stdout
