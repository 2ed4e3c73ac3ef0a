"""``scrapy report``: one self-contained HTML file that renders, with its plots, in Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from polite_crawler.commands.report import build_sites, percentile, pick_logs
from tests.commands_util import scrapy, scrapy_json
from tests.services import needs
from tests.test_commands_history import SITE, line, write

if TYPE_CHECKING:
    from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
B = "http://127.0.0.8:8080"


def crawl_logs(tmp_path: Path) -> Path:
    t = 1_790_000_000.0
    first = [line(t, "/robots.txt", rest=1.0)]
    at = t + 1.2
    for i in range(30):
        first.append(line(at, f"/p{i}", rest=1.0))
        at += 1.2 + (i % 3) * 0.1
    first.append(line(at, "/gone", status=404, verdict="give_up:404"))
    first.append(line(at + 1.5, "/x", status=304, verdict="not_modified:304", saved=20_000))
    second = [{**line(t + 2 + i * 3.1, f"/b{i}", rest=3.0), "origin": B, "url": f"{B}/b{i}"}
              for i in range(12)]
    second.append({**line(t + 40, "/busy", status=429, verdict="retry_later:429"),
                   "origin": B, "url": f"{B}/busy"})
    second.append({**line(t + 45, "/no", status=403, verdict="stop_origin:403"),
                   "origin": B, "url": f"{B}/no"})
    write(tmp_path / "access-site-20260921T141320.000Z-101.jsonl", first)
    write(tmp_path / "access-site-20260921T141320.000Z-101.2.jsonl", second)
    write(tmp_path / "access-site-20260922T000000.000Z-202.jsonl", [line(t + 90000, "/later")])
    return tmp_path


def test_per_site_figures(tmp_path):
    from polite_crawler.commands.history import read_lines

    state = crawl_logs(tmp_path)
    files, _ = pick_logs(state, "20260921", False, None)
    assert len(files) == 2  # a rotated crawl is one crawl
    sites = build_sites(list(read_lines(files)))
    a, b = sites[SITE], sites[B]
    assert (a.requests, a.pages, a.saved) == (33, 31, 20_000)
    assert a.statuses == {"2xx": 31, "4xx": 1, "304": 1}
    assert a.robots == "read (200)"
    assert abs(percentile(a.rests, 0.5) - 1.1) < 0.11
    assert b.stopped == "403 Forbidden: the site refuses the crawler"


def test_a_request_held_back_is_not_counted_refused(tmp_path):
    # A cluster worker that no longer held the origin held the request back (its row went
    # back to the queue): not a refusal, not a request, shown as held.
    t = 1_790_000_000.0
    lines = [line(t, "/robots.txt", rest=1.0), line(t + 1.2, "/p0", rest=1.0),
             {**line(t + 2.4, "/p1"), "sent": None, "status": None,
              "verdict": "held:lease_lapsed"},
             {**line(t + 3.0, "/p2"), "sent": None, "status": None,
              "verdict": "refused:opted_out"}]
    site = build_sites(lines)[SITE]
    assert (site.requests, site.refused, site.held) == (2, 1, 1)
    assert site.statuses == {"2xx": 2, "held": 1, "refused": 1}
    assert site.row()["held"] == 1


def test_report_json_and_bad_input(tmp_path):
    state = crawl_logs(tmp_path)
    data = scrapy_json("report", "--all", "-o", str(tmp_path / "r.html"), "--state-dir",
                       str(state))
    assert data["plots"] == ["requests", "rests", "savings", "statuses", "timeline"]
    assert {s["origin"] for s in data["sites"]} == {SITE, B}
    for args, words in [
        (["nosuchjob", "-o", str(tmp_path / "x.html")], "no job 'nosuchjob'"),
        (["site", "-o", str(tmp_path / "x.html")], "matches 2 crawls"),
        (["--all"], "-o report.html"),
    ]:
        done = scrapy("report", *args, "--state-dir", str(state))
        assert done.returncode == 2, args
        assert len(done.stderr.splitlines()) == 1 and words in done.stderr, done.stderr
    assert not (tmp_path / "x.html").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    done = scrapy("report", "-o", str(tmp_path / "x.html"), "--state-dir", str(empty))
    assert done.returncode == 2 and "no access log" in done.stderr


@needs(not shutil.which(CHROMIUM), "Chromium is not installed "
       "(scripts/system-deps.sh installs Debian's chromium)")
def test_report_renders_in_headless_chromium_with_its_plots(tmp_path):
    state = crawl_logs(tmp_path)
    out = tmp_path / "report.html"
    done = scrapy("report", "--all", "-o", str(out), "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    # Self-contained: no script, nothing fetched from anywhere.
    assert "<script" not in page
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#)""", page)
    assert page.count("<svg") == 5
    shot = tmp_path / "report.png"
    run = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          "--hide-scrollbars", "--window-size=1200,3000",
                          f"--screenshot={shot}", out.as_uri()],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    from PIL import Image  # matplotlib's own dependency

    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 3000)
    colors = image.getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 50, "a blank screenshot"
    # The plots' own colours are on the page: the status mix's 2xx green and the
    # requests histogram's blue.
    pixels = {rgb for _, rgb in colors}
    assert any(abs(r - 0x2B) < 8 and abs(g - 0x8A) < 8 and abs(b - 0x3E) < 8
               for r, g, b in pixels), "no status-mix bar rendered"
    assert any(abs(r - 0x1F) < 8 and abs(g - 0x77) < 8 and abs(b - 0xB4) < 8
               for r, g, b in pixels), "no histogram rendered"


def test_a_job_id_names_its_process_log(tmp_path):
    from polite_crawler.store.optout import OptOutList

    state = crawl_logs(tmp_path)
    lst = OptOutList(state / "polite-origins.sqlite3")
    queue = state / "jobs" / "site" / "nightly-7" / "polite_frontier.sqlite3"
    lst.register("vm:202:abcd", "site", str(queue), 0, 1_790_090_000.0)
    lst.close()
    data = scrapy_json("report", "nightly-7", "-o", str(tmp_path / "r.html"),
                       "--state-dir", str(state))
    assert data["title"] == "Job nightly-7 (access-site-20260922T000000.000Z-202)"
    assert [s["origin"] for s in data["sites"]] == [SITE]


def test_sites_are_grouped_by_the_server_their_names_resolve_to() -> None:
    from polite_crawler.commands.report import build_servers, build_sites

    def exchange(origin: str, sent: float, done: float) -> dict[str, Any]:
        return {"origin": origin, "sent": sent, "done": done, "status": 200,
                "url": f"{origin}/", "duration": done - sent, "verdict": "ok"}

    lines = [exchange("http://a.test", 0.0, 1.0), exchange("https://b.test:8443", 0.5, 1.5),
             exchange("http://a.test", 3.0, 4.0), exchange("http://127.0.0.9", 0.0, 0.1)]
    names = {"a.test": ["10.0.0.1"], "b.test": ["10.0.0.1", "10.0.0.2"]}
    servers = build_servers(build_sites(lines), lambda name, port: names.get(name, []))
    by = {v.address: v for v in servers}
    assert set(by) == {"10.0.0.1", "127.0.0.9"}
    shared = by["10.0.0.1"]
    assert sorted(shared.sites) == ["http://a.test", "https://b.test:8443"]
    assert (shared.requests, shared.most_open) == (3, 2)
    assert shared.share == pytest.approx(3.0 / 4.0)
    assert [v.share for v in servers] == sorted((v.share for v in servers), reverse=True)
