"""The frontier on Redis: worker processes sharing one crawl (a real redis-server).

Asserted from the test web's own request log: no two requests in flight on one origin
and no short rest across all workers; every page fetched, none twice; every worker
exits 0 on its own when the crawl is over.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from demo.web.server import Req, Resp, Site, overlaps, page, short_rests
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)

if TYPE_CHECKING:
    from collections.abc import Callable

# The fixtures above, by name (ruff: F811).
# ruff: noqa: F811

ROOT = Path(__file__).resolve().parent.parent
REST = 0.2
PAGES = 12
HOSTS = [f"127.0.0.{i}" for i in range(1, 9)]


def chain_site(n: int, host: str) -> Site:
    """A chain of pages, each with its own text (identical pages would be duplicates)."""
    paths = ["/"] + [f"/p{i}" for i in range(1, n)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    for i, path in enumerate(paths):
        words = " ".join(f"{host}-{path}-{k}" for k in range(30))
        routes[path] = page(path, words, paths[i + 1:i + 3])
    return Site(routes)


def worker_cmd(web: Any, tmp: Path, name: str, redis: str, store: str,
               **extra: str) -> list[str]:
    urls = ",".join(web.url(h) for h in HOSTS)
    sets = {
        "POLITE_FRONTIER": redis,
        "POLITE_CRAWL": "t",
        "POLITE_STORE": store,
        "POLITE_STATE_DIR": str(tmp / "state"),  # one machine: the robots.txt cache shared
        "POLITE_ACCESS_LOG": str(tmp / f"access-{name}.jsonl"),
        "POLITE_REST_PAGE": str(REST),
        "POLITE_JITTER": "0",
        "POLITE_REDIS_LEASE_TTL": "2",
        "POLITE_REDIS_SYNC_INTERVAL": "0.1",
        "POLITE_CLOCK_SKEW": "0.05",
        "DOWNLOAD_TIMEOUT": "3",
        "LOG_LEVEL": "INFO",
        "LOG_FILE": str(tmp / f"{name}.log"),
        **extra,
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"url={urls}"]
    for k, v in sets.items():
        cmd += ["-s", f"{k}={v}"]
    return cmd


def content(entries: list[Any]) -> list[Any]:
    return [e for e in entries if e.path != "/robots.txt" and not e.path.startswith("/sitemap")]


def served(tmp: Path, name: str) -> set[str]:
    """Hosts whose pages the worker fetched (its access log)."""
    path = tmp / f"access-{name}.jsonl"
    if not path.exists():
        return set()
    out = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec.get("status") is not None and not rec.get("robots"):
            out.add(rec["origin"])
    return out


def start(cmd: list[str]) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def assert_clean(web: Any) -> Counter[tuple[str, str]]:
    entries = web.entries()
    assert overlaps(entries) == []
    assert short_rests(entries, REST, slack=0.02) == []
    return Counter((e.host, e.path) for e in content(entries))


@pytest.mark.slow
def test_two_workers_share_the_hosts_one_politeness(web_factory, tmp_path, redis_url, pg_uri):
    joined = threading.Event()
    web = web_factory({h: held_site(PAGES, h, joined) for h in HOSTS})
    a = start(worker_cmd(web, tmp_path, "a", redis_url, pg_uri))
    b = None
    try:
        # Not the same instant: two processes creating the state directory's SQLite
        # files together can find them locked (store.paths.connect switching to WAL).
        wait_for((tmp_path / "access-a.jsonl").exists)
        b = start(worker_cmd(web, tmp_path, "b", redis_url, pg_uri))
        joins(tmp_path, "b", joined)  # both workers serve hosts
        codes = [a.wait(timeout=180), b.wait(timeout=180)]
    finally:
        joined.set()
        stop_all(a, b)
    assert codes == [0, 0]
    fetched = assert_clean(web)
    assert len(fetched) == len(HOSTS) * PAGES
    assert max(fetched.values()) == 1
    assert served(tmp_path, "a"), "both workers served hosts"
    # robots.txt fetched once per origin for the whole crawl.
    assert len(web.entries(path="/robots.txt")) == len(HOSTS)


def slow_site(n: int, host: str, delay: float) -> Site:
    """A chain of pages each answered after ``delay``: a worker has requests in flight."""
    return timed_site(n, host, lambda: delay)


def held_site(n: int, host: str, joined: threading.Event) -> Site:
    """A chain of pages answered after 0.3 s until ``joined`` is set, then at once: a
    worker alone crawls it slowly (its rest grows with the answers) while a second one
    starts, so the crawl cannot end before the second takes a share, however slow the
    machine is to start a process."""
    return timed_site(n, host, lambda: 0.0 if joined.is_set() else 0.3)


def timed_site(n: int, host: str, delay: Callable[[], float]) -> Site:
    """A chain of pages each answered after ``delay()`` seconds (read as it is asked)."""
    plain = chain_site(n, host)
    routes: dict[str, Any] = {}
    for path, body in plain.routes.items():
        if path == "/robots.txt":
            routes[path] = body
            continue

        def answer(req: Req, body: Any = body) -> Resp:
            return Resp(200, body, delay=delay())

        routes[path] = answer
    return Site(routes)


def joins(tmp: Path, name: str, joined: threading.Event) -> None:
    """Wait until worker ``name`` served a host, then let the held sites answer at once."""
    deadline = time.time() + 120
    while not served(tmp, name):
        assert time.time() < deadline, f"worker {name} never took a share of the hosts"
        time.sleep(0.05)
    joined.set()


def wait_for(cond: Any, timeout: float = 60.0) -> None:
    deadline = time.time() + timeout
    while not cond():
        assert time.time() < deadline, "timed out"
        time.sleep(0.05)


def stop_all(*procs: Any) -> None:
    """Kill by its PID a worker a failed test left running."""
    for p in procs:
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()


def log_lines(tmp: Path, name: str) -> int:
    path = tmp / f"access-{name}.jsonl"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_sigkill_of_a_worker_its_origins_taken_over_nothing_lost(
        web_factory, tmp_path, redis_url, pg_uri):
    web = web_factory({h: slow_site(PAGES, h, 0.3) for h in HOSTS})
    a = start(worker_cmd(web, tmp_path, "a", redis_url, pg_uri))
    try:
        wait_for(lambda: log_lines(tmp_path, "a") >= len(HOSTS))
        b = start(worker_cmd(web, tmp_path, "b", redis_url, pg_uri))
        wait_for(lambda: log_lines(tmp_path, "b") >= 4)
        os.kill(a.pid, signal.SIGKILL)  # pages take 0.3 s: some of a's are in flight
    finally:
        a.wait()
    assert b.wait(timeout=180) == 0
    fetched = assert_clean(web)
    assert len(fetched) == len(HOSTS) * PAGES  # nothing lost
    # Only what was in flight in the killed worker may be fetched again (its answer
    # never reached the spider), at most one page an origin.
    assert max(fetched.values()) <= 2
    assert sum(1 for n in fetched.values() if n > 1) <= len(HOSTS)
    log = (tmp_path / "b.log").read_text(encoding="utf-8")
    assert "taken over from" in log


@pytest.mark.slow
def test_a_worker_joining_mid_crawl_takes_a_share(web_factory, tmp_path, redis_url, pg_uri):
    joined = threading.Event()
    web = web_factory({h: held_site(PAGES + 8, h, joined) for h in HOSTS})
    a = start(worker_cmd(web, tmp_path, "a", redis_url, pg_uri))
    b = None
    try:
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        b = start(worker_cmd(web, tmp_path, "b", redis_url, pg_uri))
        joins(tmp_path, "b", joined)  # the joining worker served hosts
        assert b.wait(timeout=180) == 0
        assert a.wait(timeout=180) == 0
    finally:
        joined.set()
        stop_all(a, b)
    fetched = assert_clean(web)
    assert len(fetched) == len(HOSTS) * (PAGES + 8)
    assert max(fetched.values()) == 1


@pytest.mark.slow
def test_redis_restarting_mid_crawl_the_crawl_resumes_and_no_rest_is_shortened(
        web_factory, tmp_path, redis_server, pg_uri):
    web = web_factory({h: slow_site(PAGES, h, 0.1) for h in HOSTS})
    a = start(worker_cmd(web, tmp_path, "a", redis_server.url, pg_uri))
    b = None
    try:
        wait_for((tmp_path / "access-a.jsonl").exists)
        b = start(worker_cmd(web, tmp_path, "b", redis_server.url, pg_uri))
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        redis_server.stop_process()  # its AOF (fsync always here) holds the crawl
        time.sleep(1.0)
        redis_server.start()
        assert b.wait(timeout=180) == 0
    finally:
        if b is not None and b.poll() is None:  # never left running after a failure
            b.kill()
            b.wait()
        assert a.wait(timeout=180) == 0
    fetched = assert_clean(web)
    assert len(fetched) == len(HOSTS) * PAGES
    # A batch whose reply the outage cut may be sent again: a page at most twice.
    assert max(fetched.values()) <= 2
    logs = "".join((tmp_path / f"{n}.log").read_text(encoding="utf-8") for n in "ab")
    assert "A Redis frontier batch failed" in logs
