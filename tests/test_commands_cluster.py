"""The operator's commands on a cluster: explain, history, report and forget read the
state every worker shares (real redis-server, real PostgreSQL), with only the crawl's
``-s POLITE_FRONTIER=redis://... -s POLITE_STORE=postgresql://...``."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from polite_crawler.backend import page_backend_factory
from polite_crawler.policy.rest import OriginState
from polite_crawler.policy.verdicts import FailureState
from polite_crawler.store.pages import FetchRecord
from polite_crawler.store.redis_keys import origin_key, robots_key, until_key
from polite_crawler.store.redis_optout import RedisOptOutList
from polite_crawler.store.redis_robots import RedisRobotsStore
from polite_crawler.store.robots import RobotsBook
from tests.commands_util import scrapy, scrapy_json
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.robots_numbers import ROBOTS_NUMBERS
from tests.test_commands_forget import page
from tests.test_commands_history import line, write

# ruff: noqa: F811

if TYPE_CHECKING:
    from pathlib import Path

HERE = "http://127.0.0.21:8080"  # crawled by this machine's worker
THERE = "http://127.0.0.22:8080"  # by another machine's: nothing of it in the logs here
GONE = "http://127.0.0.23:8080"  # opted out, by another machine's worker


def cluster(redis_url: str, r: Any, pg_uri: str, tmp_path: Path) -> tuple[Path, list[str]]:
    now = time.time()
    for origin, failure in ((HERE, FailureState()), (THERE, FailureState(stopped="403")),
                            (GONE, FailureState())):
        state = OriginState(origin, last_end=now, last_duration=0.2, last_rest=1.0,
                            next_allowed=now + 20, failure=failure)
        r.hset(origin_key(origin), mapping={"state": state.to_json(), "run": "t",
                                            "owner": "other:9:w"})
    r.set(until_key("other:9:w"), repr(now + 15))
    book = RobotsBook(RedisRobotsStore(redis_url), "PoliteCrawler", **ROBOTS_NUMBERS)
    book.record_answer(HERE, 200, b"User-agent: *\nDisallow: /private\n")
    book.record_failure(THERE, "status 503")
    book.close()
    lst = RedisOptOutList(redis_url)
    lst.add(GONE, "owner's mail", now)
    lst.close()
    backend = page_backend_factory(pg_uri, "")()
    backend.migrate()
    backend.begin()
    backend.put(page(f"{HERE}/x"))
    backend.put_fetch(FetchRecord(url=f"{HERE}/sitemap.xml", kind="sitemap", status=200,
                                  final_url=f"{HERE}/sitemap.xml", fetched_at=now - 60,
                                  etag='"m"', body=b"<urlset/>", revisit_interval=3600.0,
                                  due_at=now + 3540))
    backend.commit()
    backend.close()
    machine = tmp_path / "machine-a"
    machine.mkdir()
    t = now - 100
    write(machine / "access-site-20261201T000000.000Z-7.jsonl",
          [{**line(t + i, "/robots.txt" if i == 0 else f"/p{i}"), "origin": HERE,
            "url": f"{HERE}/p{i}"} for i in range(5)])
    return machine, ["-s", f"POLITE_FRONTIER={redis_url}", "-s", f"POLITE_STORE={pg_uri}",
                     "-s", "POLITE_CRAWL=t"]


def test_the_four_commands_read_every_workers_state(
        redis_url: str, redis_server_session: Any, pg_uri: str, tmp_path: Path) -> None:
    r = redis_server_session.client()
    machine, sets = cluster(redis_url, r, pg_uri, tmp_path)
    # explain, with no state directory at all: the cluster's state is Redis and PostgreSQL.
    d = scrapy_json("explain", f"{HERE}/private/y", *sets,
                    "--state-dir", str(tmp_path / "machine-a"))
    assert d["robots"]["allowed"] is False and d["robots"]["source"] == "cached copy"
    assert d["origin_state"]["known"] is True
    assert d["origin_state"]["lease"]["owner"] == "other:9:w"
    x = scrapy_json("explain", f"{HERE}/x", *sets)["store"]
    assert x["stored"] is True and x["where"] == pg_uri and x["kind"] == "page"
    sm = scrapy_json("explain", f"{HERE}/sitemap.xml", *sets)["store"]
    assert sm["kind"] == "sitemap" and sm["next_visit"]["decision"] == "not_due"
    gone = scrapy_json("explain", f"{GONE}/a", *sets)
    assert gone["optout"]["reason"] == "owner's mail"
    # history: this machine's exchanges.
    h = scrapy_json("history", HERE, "--state-dir", str(machine), *sets)
    assert len(h["exchanges"]) == 5
    # report: this machine's sites from its logs, and every other worker's from Redis,
    # with their robots.txt and opt-out state.
    out = tmp_path / "report.html"
    rep = scrapy_json("report", "--all", "-o", str(out), "--state-dir", str(machine), *sets)
    sites = {s["origin"]: s for s in rep["sites"]}
    assert sites[HERE]["here"] is True and sites[HERE]["requests"] == 5
    assert sites[THERE]["here"] is False
    assert sites[THERE]["robots"].startswith("unreachable (status 503)")
    assert sites[THERE]["stopped"] == "403 Forbidden: the site refuses the crawler"
    assert sites[GONE]["stopped"] == "opted out (scrapy forget)"
    assert "another worker&#x27;s" in out.read_text(encoding="utf-8") \
        or "another worker's" in out.read_text(encoding="utf-8")
    # Without the cluster's settings the report knows only this machine's logs.
    plain = scrapy_json("report", "--all", "-o", str(out), "--state-dir", str(machine))
    assert [s["origin"] for s in plain["sites"]] == [HERE]
    assert plain["sites"][0]["robots"] == "read (200)"
    # forget: no worker running, so it deletes at once, in Redis and PostgreSQL.
    done = scrapy("forget", HERE, "--json", "--wait", "0.2", *sets)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["removed"]["page_store"]["pages"] == 1
    assert data["removed"]["robots_txt"] == 1
    assert not r.exists(robots_key(HERE))
    again = scrapy_json("explain", f"{HERE}/x", *sets)
    assert again["optout"] is not None and again["store"]["stored"] is False
