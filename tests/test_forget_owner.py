"""``scrapy forget`` and what the state directory keeps of an origin's owner (its
registrable domain): the owner's row (the run's budget count and stop) and the time
``scrapy unblock`` lifted its stop go with the owner's last site kept, and stay while
another site of it is crawled (an opted-out one keeps nothing). The command as the
operator runs it, on a real state directory."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from polite_crawler.frontier.store import (
    OWNER_LIFT_TABLE,
    OWNER_TABLE,
    OriginStore,
    forget_owner,
    lift_owner_stop,
)
from polite_crawler.policy.rest import OriginState
from polite_crawler.store.paths import ORIGINS_DB, connect
from tests.commands_util import scrapy_json
from tests.test_commands_forget import make_state

if TYPE_CHECKING:
    from pathlib import Path

WWW = "http://www.example.org"
CDN = "https://cdn.example.org:8443"


def _rows(db: Path) -> dict[str, list[str]]:
    conn = connect(db)
    try:
        return {t: sorted(str(r[0]) for r in conn.execute(f"SELECT {k} FROM {t}"))
                for t, k in ((OWNER_TABLE, "origin"), (OWNER_LIFT_TABLE, "owner"))}
    finally:
        conn.close()


def _state(tmp_path: Path) -> Path:
    """A state directory whose crawl kept two sites of example.org and one of
    example.net, the owner example.org stopped, then unblocked, then stopped again."""
    state = make_state(tmp_path)
    db = state / ORIGINS_DB
    now = time.time()
    origins = OriginStore(db, "test:1:x", "run")
    for origin in (WWW, CDN, "http://example.net"):
        origins.save(OriginState(origin), now)
    origins.close()
    owners = OriginStore(db, "test:1:x", "run", table=OWNER_TABLE)
    for name in ("example.org", "example.net"):
        row = OriginState(name, budget_day="2026-01-01", budget_used=3)
        row.failure.stopped = f"403 from {WWW}"
        owners.save(row, now)
    owners.close()
    lift_owner_stop(db, "example.org", now)
    lift_owner_stop(db, "example.net", now)
    return state


def test_forget_deletes_the_owners_rows_with_its_last_site(tmp_path: Path) -> None:
    """www's forget keeps example.org's rows (cdn is still crawled); cdn's deletes them,
    www being on the opt-out list; example.net's rows are not touched. (Before: the
    owner's row and its lift were never deleted.)"""
    state = _state(tmp_path)
    db = state / ORIGINS_DB
    args = ["--state-dir", str(state), "--wait", "0.2"]
    first = scrapy_json("forget", WWW, *args)
    assert first["removed"]["owner"] == {"owner": "example.org", "rows_deleted": 0,
                                         "kept_by": [CDN]}
    assert _rows(db) == {OWNER_TABLE: ["example.net", "example.org"],
                         OWNER_LIFT_TABLE: ["example.net", "example.org"]}
    second = scrapy_json("forget", CDN, *args)
    assert second["removed"]["owner"] == {"owner": "example.org", "rows_deleted": 2,
                                          "kept_by": []}
    assert _rows(db) == {OWNER_TABLE: ["example.net"], OWNER_LIFT_TABLE: ["example.net"]}


def test_an_owners_sites_are_its_hosts_not_names_alike(tmp_path: Path) -> None:
    """Only an origin whose host's registrable domain is the owner keeps it: not
    notexample.org, not example.org.uk, not a platform's customer beside it."""
    state = _state(tmp_path)
    db = state / ORIGINS_DB
    origins = OriginStore(db, "test:1:x", "run")
    for origin in ("http://notexample.org", "http://example.org.uk", "http://a.github.io"):
        origins.save(OriginState(origin), time.time())
    origins.close()
    assert forget_owner(db, CDN)[2] == [WWW]
    assert forget_owner(db, "http://b.github.io") == ("b.github.io", 0, [])
