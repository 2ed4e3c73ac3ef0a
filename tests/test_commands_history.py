"""``scrapy history`` from the access logs of every job; access log rotation and retention."""

from __future__ import annotations

import json
import os
import time
from typing import TYPE_CHECKING, Any

import pytest_twisted

from demo.web.server import Site, page
from polite_crawler.extensions.accesslog import prune_access_logs, read_access_log
from tests.commands_util import scrapy, scrapy_json
from tests.fetch import fetch, plain_settings

if TYPE_CHECKING:
    from pathlib import Path

SITE = "http://127.0.0.9:8080"


def line(sent: float, path: str, status: int | None = 200, rest: float = 3.0,
         **kw: Any) -> dict[str, Any]:
    out = {"sent": sent, "done": sent + 0.2, "origin": SITE, "method": "GET", "url": SITE + path,
           "status": status, "bytes": 100, "duration": 0.2,
           "verdict": f"ok:{status}" if status else "retry_later:timeout", "rest": rest,
           "robots": path == "/robots.txt", "cut": False}
    out.update(kw)
    return out


def write(path: Path, lines: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def two_jobs(tmp_path: Path) -> Path:
    t = 1_790_000_000.0
    write(tmp_path / "access-site-20260911T000000.000Z-1.jsonl", [
        line(t, "/robots.txt"), line(t + 3.5, "/a", rest=4.0),
        {**line(t + 5, "/b"), "origin": "http://other.example", "url": "http://other.example/b"},
    ])
    write(tmp_path / "access-site-20260912T000000.000Z-2.jsonl", [
        line(t + 8, "/c", status=None),
        {"sent": None, "done": t + 9, "origin": SITE, "url": SITE + "/d",
         "verdict": "refused:private"},
    ])
    (tmp_path / "access-site-20260912T000000.000Z-2.jsonl").open("a").write('{"cut by a crash')
    return tmp_path


def test_history_across_jobs_with_the_rest_before_each(tmp_path):
    state = two_jobs(tmp_path)
    d = scrapy_json("history", SITE, "--state-dir", str(state))
    ex = d["exchanges"]
    assert [e["url"].removeprefix(SITE) for e in ex] == ["/robots.txt", "/a", "/c", "/d"]
    assert ex[0]["rest_before"] is None
    assert ex[1]["rest_before"] == 3.3 and ex[1]["rest_rule"] == 3.0
    assert ex[2]["rest_before"] == 4.3 and ex[2]["rest_rule"] == 4.0  # across the two jobs
    assert ex[2]["job"] != ex[1]["job"]
    assert ex[3]["sent"] is False and ex[3]["verdict"] == "refused:private"
    since = scrapy_json("history", SITE, "--since", "2026-09-21T14:13:25Z",
                        "--state-dir", str(state))
    assert [e["url"].removeprefix(SITE) for e in since["exchanges"]] == ["/c", "/d"]
    text = scrapy("history", SITE, "--state-dir", str(state)).stdout
    assert "3 requests from 2 access logs" in text
    assert "3.30 (3.00)" in text


def test_history_bad_input(tmp_path):
    state = two_jobs(tmp_path)
    for args, words in [
        (["http://never.example"], "no exchange with http://never.example"),
        (["ftp://x"], "not an http(s) origin"),
        ([SITE, "--since", "yesterday"], "--since 'yesterday'"),
        ([SITE, "--until", "nan"], "--until 'nan'"),
        ([SITE, "--log", str(tmp_path / "none.jsonl")], "no such file"),
    ]:
        done = scrapy("history", *args, "--state-dir", str(state))
        assert done.returncode == 2, (args, done.stdout)
        assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = scrapy("history", SITE, "--state-dir", str(empty))
    assert done.returncode == 2 and "no access log" in done.stderr


def test_prune_keeps_recent_logs(tmp_path):
    old, new = tmp_path / "access-a.jsonl", tmp_path / "access-b.jsonl"
    other = tmp_path / "polite.sqlite3"
    for p in (old, new, other):
        p.write_text("x")
    week = time.time() - 8 * 86400
    os.utime(old, (week, week))
    os.utime(other, (week, week))
    assert prune_access_logs(tmp_path, 7, time.time()) == [old]
    assert new.exists() and other.exists()
    assert prune_access_logs(tmp_path, 0, time.time()) == []
    # The crawl's own log (a fixed POLITE_ACCESS_LOG last written long ago) is never deleted.
    mine = tmp_path / "access-fixed.jsonl"
    mine.write_text("x")
    os.utime(mine, (week, week))
    assert prune_access_logs(tmp_path, 7, time.time(), spare=mine) == []
    assert mine.exists()


@pytest_twisted.ensureDeferred
async def test_access_log_rotates_at_its_size(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": Site({"/": page("Home"), "/robots.txt": "User-agent: *\n"})})
    urls = [web.url("127.0.0.1", f"/?n={i}") for i in range(6)]
    await fetch(urls, plain_settings(str(tmp_path), POLITE_ACCESS_LOG_MAX_BYTES=600))
    parts = sorted(tmp_path.glob("access-*.jsonl"))
    assert len(parts) >= 2, parts
    assert all(p.stat().st_size <= 600 for p in parts)
    assert sum(len(read_access_log(p)) for p in parts) == 6
    origin = web.url("127.0.0.1", "/").rstrip("/")
    d = scrapy_json("history", origin, "--state-dir", str(tmp_path))
    assert len(d["exchanges"]) == 6
