"""File descriptors as a budget: ``scrapy crawl`` in a child process whose RLIMIT_NOFILE
the test sets (``resource.setrlimit`` before the exec, as ``ulimit -n`` does), against
real loopback sites, each on its own address.

* More sites than the limit: every site finished, no traceback, exit 0 (kept-alive
  connections do not pile up one a site; requests in flight fitted under the limit).
* Descriptors taken mid-crawl (tests/descriptor_hog.py): the crawl closes with
  ``descriptors_exhausted``, exit 1, one line, no traceback, every page fetched stored.
* A limit too small for the crawl's own files: one line naming it, exit 2.
"""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from demo.web.server import Site, page

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parent.parent


def small_site(host: str) -> Site:
    """robots.txt, and "/" linking two pages of their own text."""
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    paths = ["/", "/a", "/b"]
    for i, path in enumerate(paths):
        words = " ".join(f"{host}-{path}-{k}" for k in range(40))
        routes[path] = page(f"{host}{path}", words, paths[1:] if i == 0 else ["/"])
    return Site(routes)


def hosts(n: int) -> list[str]:
    return [f"127.0.{20 + i // 250}.{1 + i % 250}" for i in range(n)]


def _limit(n: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))
    return apply


def crawl(tmp: Path, urls: list[str], limit: int, *settings: str,
          timeout: float = 240) -> tuple[int, str, dict[str, Any]]:
    """``scrapy crawl site`` under a hard and soft descriptor limit of ``limit``: its
    exit status, its log and its final stats."""
    listed = tmp / "urls.txt"
    listed.write_text("".join(u + "\n" for u in urls))
    log, stats = tmp / "crawl.log", tmp / "stats.json"
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"urls={listed}",
           "-s", f"POLITE_STATE_DIR={tmp / 'state'}", "-s", "LOG_LEVEL=INFO",
           "-s", f"LOG_FILE={log}", "-s", f"POLITE_STATS_FILE={stats}",
           "-s", "POLITE_JITTER=0", "-s", "CLOSESPIDER_TIMEOUT=120"]
    for kv in settings:
        cmd += ["-s", kv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False, preexec_fn=_limit(limit))
    text = log.read_text(encoding="utf-8") if log.exists() else done.stderr
    data = json.loads(stats.read_text()).get("stats", {}) if stats.exists() else {}
    return done.returncode, text, data


def stored_urls(tmp: Path) -> set[str]:
    with sqlite3.connect(tmp / "state" / "polite.sqlite3") as conn:
        return {row[0] for row in conn.execute("SELECT url FROM pages")}


@pytest.mark.slow
def test_more_sites_than_the_descriptor_limit_every_site_finished(
        web_factory: Any, tmp_path: Path) -> None:
    limit = 200
    names = hosts(260)
    web = web_factory({h: small_site(h) for h in names})
    # Rests shorter than the keep-alive time: connections are kept, within the budget.
    code, log, stats = crawl(tmp_path, [web.url(h) for h in names], limit,
                             "POLITE_REST_PAGE=0.5")
    assert code == 0, log[-3000:]
    pages = {(e.host, e.path) for e in web.entries() if e.status == 200
             and e.path in ("/", "/a", "/b")}
    assert pages == {(h, p) for h in names for p in ("/", "/a", "/b")}
    assert "Traceback" not in log
    assert "Too many open files" not in log
    assert stats.get("finish_reason") == "finished"
    assert "Descriptor budget: 200 open files allowed" in log


@pytest.mark.slow
def test_descriptors_taken_mid_crawl_close_it_with_the_reason_and_no_page_lost(
        web_factory: Any, tmp_path: Path) -> None:
    names = hosts(20)
    web = web_factory({h: small_site(h) for h in names})
    code, log, stats = crawl(
        tmp_path, [web.url(h) for h in names], 512, "POLITE_REST_PAGE=0.5",
        # Connections not kept through the rest: the next request needs a new one.
        "POLITE_KEEPALIVE_IDLE=0.2",
        'EXTENSIONS={"tests.descriptor_hog.DescriptorHog": 0}', "POLITE_TEST_HOG_AFTER=5",
        "POLITE_TEST_HOG_HOLD=5")
    assert code == 1, log[-3000:]
    assert stats.get("finish_reason") == "descriptors_exhausted"
    assert log.count("ran out of file descriptors") == 1
    assert "Traceback" not in log
    # The requests not sent are told as such, not as a cluster's lapsed lease.
    assert stats.get("polite/descriptors/not_sent", 0) >= 1
    assert "valid lease" not in log and "polite/redis/held_at_gate" not in stats
    fetched = {e.host + e.path for e in web.entries() if e.path != "/robots.txt"
               and e.status == 200}
    assert len(fetched) < 3 * len(names)  # the crawl did stop
    stored = {u.split("//", 1)[1].split(":", 1)[0] + "/" + u.rsplit("/", 1)[1]
              for u in stored_urls(tmp_path)}
    assert fetched == stored  # every page fetched is in the page store


def test_a_limit_below_the_crawls_own_files_refuses_in_one_line(
        web_factory: Any, tmp_path: Path) -> None:
    """Refused by ``scrapy crawl`` before Scrapy starts: one line on stderr, none of
    Scrapy's start-up log, exit status 2, nothing sent."""
    web = web_factory({"127.0.20.1": small_site("127.0.20.1")})
    code, log, stats = crawl(tmp_path, [web.url("127.0.20.1")], 60)
    assert code == 2, log[-3000:]
    assert log.splitlines() == [log.strip()], log[-3000:]
    assert log.startswith("scrapy crawl: the open-file limit (RLIMIT_NOFILE, ulimit -n) is 60;")
    assert "raise it" in log
    assert not (tmp_path / "crawl.log").exists()  # Scrapy's logging never configured
    assert stats == {}
    assert web.entries() == []


# A crawl started from code (CrawlerProcess, scrapyd's runner), which the command's
# check does not see: the descriptor budget's extension refuses when the spider opens.
_FROM_CODE = """
import sys
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings

settings = get_project_settings()
settings.set("POLITE_STATE_DIR", sys.argv[2])
process = CrawlerProcess(settings)
crawler = process.create_crawler("site")
process.crawl(crawler, url=sys.argv[1])
process.start()
print("finish_reason", crawler.stats.get_value("finish_reason"))
"""


def test_a_crawl_started_from_code_under_a_small_limit_closes_with_the_reason(
        web_factory: Any, tmp_path: Path) -> None:
    web = web_factory({"127.0.20.1": small_site("127.0.20.1")})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", _FROM_CODE, web.url("127.0.20.1"),
                           str(tmp_path / "state")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120, check=False, preexec_fn=_limit(60))
    assert "finish_reason descriptors_short" in done.stdout, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.splitlines() if "Not crawling" in ln]
    assert len(lines) == 1 and "open-file limit (RLIMIT_NOFILE, ulimit -n) is 60" in lines[0]
    assert web.entries() == []


@pytest.mark.slow
@pytest.mark.parametrize(("rest", "keep", "kept"), [("0.3", "1.0", True), ("1.2", "0.5", False)])
def test_a_connection_is_kept_only_through_a_rest_shorter_than_the_keep_alive_time(
        web_factory: Any, tmp_path: Path, rest: str, keep: str, kept: bool) -> None:
    names = hosts(3)
    web = web_factory({h: small_site(h) for h in names})
    code, log, stats = crawl(tmp_path, [web.url(h) for h in names], 1024,
                             f"POLITE_REST_PAGE={rest}", f"POLITE_KEEPALIVE_IDLE={keep}")
    assert code == 0, log[-3000:]
    requests = len(web.entries())
    opened = stats.get("polite/connections/opened", 0)
    if kept:  # one connection a host, every request after the first on it
        assert opened == len(names)
        assert stats.get("polite/connections/closed/rest", 0) == 0
    else:  # each request on a connection of its own, closed as its exchange ended
        assert opened == requests
        assert stats.get("polite/connections/closed/rest", 0) == requests
