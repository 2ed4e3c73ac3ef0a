"""The bundled demo web's scenarios, the demo's summary, and a short run of the demo."""

from __future__ import annotations

import gzip
import http.client
import re
import socket
import time
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from protego import Protego

from demo.crawl import (
    CrawlRun,
    Records,
    host_figures,
    read_jsonl,
    run_demo,
    store_counts,
    summary,
)
from demo.web.demo import DEMO_HOSTS, SMALL, DemoScale, demo_sites
from demo.web.server import LogEntry, TestWeb

if TYPE_CHECKING:
    from pathlib import Path

NEWS, EVENTS, SLOW, BUSY, DOWN, LIBRARY = (h.address for h in DEMO_HOSTS)


def get(web: TestWeb, host: str, path: str, headers: dict[str, str] | None = None,
        ) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(host, web.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def hrefs(body: bytes) -> list[str]:
    return re.findall(r'href="([^"]+)"', body.decode())


@pytest.fixture
def web(web_factory) -> TestWeb:
    return web_factory(dict(demo_sites(SMALL)))


def test_default_scale_is_a_few_hundred_pages() -> None:
    assert 200 <= DemoScale().pages <= 400
    assert len({h.address for h in DEMO_HOSTS}) == len(DEMO_HOSTS) == 6


def test_text_is_deterministic_and_readable(web: TestWeb) -> None:
    status, _, body = get(web, NEWS, "/")
    assert status == 200
    article = next(h for h in hrefs(body) if h.startswith("/articles/"))
    first = get(web, NEWS, article)[2]
    again = dict(demo_sites(SMALL))[NEWS]  # a second, independent build
    assert first == get(web, NEWS, article)[2]
    from demo.web.server import Req

    rebuilt = again.handle(Req("GET", article, {}, NEWS, web.port)).body
    assert rebuilt == first
    text = re.sub(r"<[^>]+>", " ", first.decode())
    sentences = re.findall(r"[A-Z][^.!?]{10,}[.!?]", text)
    assert len(sentences) >= 12  # paragraphs of real sentences, not filler


def test_down_host_robots_is_503_with_retry_after(web: TestWeb) -> None:
    status, headers, _ = get(web, DOWN, "/robots.txt")
    assert status == 503
    assert headers["retry-after"] == str(SMALL.retry_after)
    # The pages themselves would answer: only robots.txt says "not now".
    status, _, body = get(web, DOWN, "/")
    assert status == 200
    page = next(h for h in hrefs(body) if h.startswith("/pages/"))
    assert get(web, DOWN, page)[0] == 200


def test_busy_host_429_every_nth_request_with_retry_after(web: TestWeb) -> None:
    assert get(web, BUSY, "/robots.txt")[0] == 200
    statuses = []
    for _ in range(3 * SMALL.busy_every):
        status, headers, _ = get(web, BUSY, "/")
        statuses.append(status)
        if status == 429:
            assert headers["retry-after"] == str(SMALL.retry_after)
    assert get(web, BUSY, "/robots.txt")[0] == 200  # robots.txt is never limited
    expected = [429 if (i + 1) % SMALL.busy_every == 0 else 200 for i in range(len(statuses))]
    assert statuses == expected


def test_calendar_trap_never_ends(web: TestWeb) -> None:
    _, _, home = get(web, EVENTS, "/")
    path = next(h for h in hrefs(home) if h.startswith("/calendar/"))
    seen = set()
    for _ in range(30):
        status, _, body = get(web, EVENTS, path)
        assert status == 200
        seen.add(path)
        links = re.findall(r'<a href="([^"]+)">([^<]+)</a>', body.decode())
        path = next(h for h, label in links if label.endswith("»"))
    assert len(seen) == 30  # thirty distinct, valid, worthless URLs
    assert "/calendar/2025/12" in seen and "/calendar/2026/1" in seen
    assert any(p.startswith("/calendar/2027/") for p in seen)
    # The sitemap lists the events, not the calendar.
    _, _, sitemap = get(web, EVENTS, "/sitemap.xml")
    assert b"/events/" in sitemap and b"/calendar/" not in sitemap


def test_slow_host_delays_every_answer(web: TestWeb) -> None:
    for path in ("/robots.txt", "/"):
        t0 = time.monotonic()
        assert get(web, SLOW, path)[0] == 200
        assert time.monotonic() - t0 >= SMALL.slow_delay
    entries = web.entries(SLOW)
    assert all(e.finished - e.started >= SMALL.slow_delay for e in entries)


def test_news_sitemap_index_gzip_and_feed(web: TestWeb) -> None:
    _, _, robots = get(web, NEWS, "/robots.txt")
    lines = [ln.split(": ", 1)[1] for ln in robots.decode().splitlines()
             if ln.startswith("Sitemap:")]
    assert lines == [web.url(NEWS, "/sitemap-index.xml"), web.url(NEWS, "/feed.xml")]
    _, _, index = get(web, NEWS, "/sitemap-index.xml")
    locs = re.findall(r"<loc>([^<]+)</loc>", index.decode())
    assert web.url(NEWS, "/sitemaps/articles.xml.gz") in locs
    status, headers, gz = get(web, NEWS, "/sitemaps/articles.xml.gz")
    assert status == 200 and headers["content-type"] == "application/gzip"
    articles = re.findall(r"<loc>([^<]+)</loc>", gzip.decompress(gz).decode())
    assert len(articles) == SMALL.news_articles
    for url in articles:
        assert get(web, NEWS, url.split(str(web.port), 1)[1])[0] == 200
    _, _, feed = get(web, NEWS, "/feed.xml")
    assert feed.count(b"<item>") == SMALL.news_articles
    assert b"utm_source=rss" in feed  # aliases under tracking parameters


def test_robots_rules_for_the_token(web: TestWeb) -> None:
    rules = Protego.parse(get(web, LIBRARY, "/robots.txt")[2].decode())
    assert rules.crawl_delay("PoliteCrawler") == SMALL.crawl_delay
    assert not rules.can_fetch(web.url(LIBRARY, "/catalogue/raw/1"), "PoliteCrawler")
    assert rules.can_fetch(web.url(LIBRARY, "/catalogue/raw/1"), "OtherBot")
    sitemap = get(web, LIBRARY, "/sitemap.txt")[2].decode().split()
    assert len(sitemap) == SMALL.library_pages + 1
    news = Protego.parse(get(web, NEWS, "/robots.txt")[2].decode())
    assert not news.can_fetch(web.url(NEWS, "/search?q=x"), "PoliteCrawler")


def test_duplicates_aliases_and_near_duplicates(web: TestWeb) -> None:
    _, _, body = get(web, NEWS, "/a/0")
    canonical = re.search(r'rel="canonical" href="([^"]+)"', body.decode()).group(1)
    assert get(web, NEWS, canonical)[2] == body  # exact duplicate under an alias
    slug = canonical.removeprefix("/articles/")
    paragraphs = [p for p in re.findall(r"<p>([^<]+)</p>", body.decode()) if "demo web" not in p]
    assert len(paragraphs) >= 4

    printed = get(web, NEWS, f"/print/{slug}")[2].decode()
    assert printed.encode() != body
    assert all(p in printed for p in paragraphs)  # same text, other markup

    status, _, wire = get(web, NEWS, f"/syndicated/{slug}")
    assert status == 200
    wire_text = wire.decode()
    assert all(p in wire_text for p in paragraphs)
    byline = re.search(r'class="byline">([^<]+)<', body.decode()).group(1)
    wire_byline = re.search(r'class="byline">([^<]+)<', wire_text).group(1)
    assert byline != wire_byline  # another date and byline: a near duplicate


def test_validators_and_304(web: TestWeb) -> None:
    status, headers, _ = get(web, LIBRARY, "/")
    assert status == 200 and headers["etag"] and headers["last-modified"]
    assert get(web, LIBRARY, "/", {"If-None-Match": headers["etag"]})[0] == 304
    assert get(web, LIBRARY, "/", {"If-Modified-Since": headers["last-modified"]})[0] == 304


def test_bot_page_served_on_the_first_host(web_factory) -> None:
    web = web_factory(dict(demo_sites(SMALL, bot_page=b"<html>the bot page</html>")))
    status, _, body = get(web, NEWS, "/bot/")
    assert (status, body) == (200, b"<html>the bot page</html>")
    assert get(web, EVENTS, "/bot/")[0] == 404


# --- the summary, from records ------------------------------------------------------------

def _entry(host: str, path: str, started: float, finished: float, status: int = 200,
           ua: str = "PoliteCrawler/0.1.0 (+http://127.0.0.1:8900/bot/)") -> LogEntry:
    return LogEntry(host, 8900, "GET", path, status, 10, started, finished, {"user-agent": ua})


def _records(log: list[LogEntry], **kw) -> Records:
    base = {"web_log": log,
            "robots": {NEWS: (200, "User-agent: *\nDisallow: /search\n"), DOWN: (503, "")},
            "access_log": None, "stats": None, "items": None, "store": None,
            "store_note": "no page store at x", "token": "PoliteCrawler", "port": 8900}
    base.update(kw)
    return Records(**base)


def test_host_figures_count_what_the_site_saw() -> None:
    log = [
        _entry(NEWS, "/", 0.0, 0.1),  # before robots.txt
        _entry(NEWS, "/robots.txt", 0.5, 0.6),
        _entry(NEWS, "/search?q=a", 1.0, 1.5),  # disallowed
        _entry(NEWS, "/b", 1.2, 1.3, ua="Mozilla/5.0"),  # overlaps the one before
        _entry(DOWN, "/robots.txt", 0.0, 0.1, status=503),
        _entry(DOWN, "/", 2.0, 2.1),  # robots.txt was a 503: disallowed
    ]
    figs = {f.address: f for f in host_figures(_records(log))}
    news, down = figs[NEWS], figs[DOWN]
    assert news.requests == 4 and news.statuses == Counter({200: 4})
    assert news.before_robots == 1
    assert news.disallowed == 1
    assert news.overlaps == 1
    assert news.identified == 3
    assert news.gap_min == pytest.approx(-0.3)  # the overlap shows as a negative rest
    assert down.disallowed == 1 and down.before_robots == 0
    assert figs[SLOW].requests == 0 and figs[SLOW].gap_min is None


def test_rests_under_crawl_delay_and_robots_outage_are_reported() -> None:
    robots = {LIBRARY: (200, "User-agent: PoliteCrawler\nCrawl-delay: 1\n\nUser-agent: *\n"),
              DOWN: (503, "")}
    log = [_entry(LIBRARY, "/robots.txt", 0.0, 0.1), _entry(LIBRARY, "/", 0.3, 0.4),
           _entry(LIBRARY, "/b", 1.5, 1.6), _entry(LIBRARY, "/c", 2.0, 2.1)]
    access = [{"origin": f"http://{DOWN}:8900", "robots": True, "status": 503,
               "verdict": "retry_later:503"}] * 2
    figs = {f.address: f for f in host_figures(_records(log, robots=robots, access_log=access))}
    assert figs[LIBRARY].crawl_delay == 1.0
    assert figs[LIBRARY].under_crawl_delay == 2  # 0.2 s and 0.4 s; 1.1 s is fine
    assert figs[LIBRARY].span == pytest.approx(2.1)
    assert figs[LIBRARY].after_refusal is None
    assert figs[DOWN].stopped == "robots.txt unavailable (503 x2): held back"
    assert figs[NEWS].stopped == ""


def test_rest_after_a_429_is_measured() -> None:
    log = [_entry(BUSY, "/robots.txt", 0.0, 0.1), _entry(BUSY, "/", 0.3, 0.4, status=429),
           _entry(BUSY, "/", 2.5, 2.6), _entry(BUSY, "/a", 2.8, 2.9, status=429),
           _entry(BUSY, "/a", 6.0, 6.1)]
    fig = next(f for f in host_figures(_records(log)) if f.address == BUSY)
    assert fig.after_refusal == pytest.approx(2.1)
    assert fig.gap_min == pytest.approx(0.2)


def test_summary_says_what_is_missing_and_invents_nothing(tmp_path: Path) -> None:
    log = [_entry(NEWS, "/robots.txt", 0.0, 0.1), _entry(NEWS, "/", 0.4, 0.5)]
    text = summary(_records(log), CrawlRun(returncode=0, seconds=3.0), tmp_path)
    assert "missing: the crawler wrote no access log" in text
    assert "missing: no page store at x" in text
    assert "close reason: unknown (no stats file)" in text
    assert "n/a" in text
    row = next(ln for ln in text.splitlines() if ln.startswith(NEWS) and "news" in ln)
    assert "0.30 / 0.30" in row
    # With the records present, their numbers appear instead.
    access = [{"origin": f"http://{NEWS}:8900", "verdict": "ok"},
              {"origin": f"http://{BUSY}:8900", "verdict": "stop_origin:403"}]
    text = summary(
        _records(log, access_log=access, items=[{"url": f"http://{NEWS}:8900/"}],
                 store={NEWS: 1}, store_note="table 'pages'",
                 stats={"reason": "finished", "stats": {"polite/frontier/x": 2}}),
        CrawlRun(returncode=0, seconds=3.0), tmp_path)
    assert "close reason: finished" in text
    assert "stop_origin:403" in text
    assert "polite/frontier/x: 2" in text
    assert "missing" not in text


def test_store_counts_reads_a_pages_table(tmp_path: Path) -> None:
    import sqlite3

    assert store_counts(tmp_path / "none.sqlite3")[0] is None
    db = tmp_path / "s.sqlite3"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE pages (canonical_url TEXT)")
    conn.executemany("INSERT INTO pages VALUES (?)",
                     [(f"http://{NEWS}:8900/a",), (f"http://{NEWS}:8900/b",), (f"http://{BUSY}:8900/",)])
    conn.commit()
    conn.close()
    counts, note = store_counts(db)
    assert counts == {NEWS: 2, BUSY: 1}
    assert "pages" in note


# --- the demo runner ---------------------------------------------------------------------

def _port_closed(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((NEWS, port)) != 0


def test_demo_reports_a_failed_crawl_and_stops_the_web(tmp_path: Path) -> None:
    # A browser User-Agent makes the crawl refuse to start.
    code, text = run_demo(tmp_path / "out", port=0, scale=SMALL, quiet=True, timeout=60,
                          extra={"USER_AGENT": "Mozilla/5.0 (X11) Chrome/126.0"})
    assert code == 1
    assert "DEMO FAILED" in text
    port = int(re.search(r"on port (\d+)", text).group(1))
    assert _port_closed(port)


@pytest.mark.slow
def test_demo_runs_end_to_end_on_a_small_web(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, text = run_demo(out, port=0, scale=SMALL, quiet=True, timeout=60,
                          extra={"CLOSESPIDER_TIMEOUT": 6})
    assert code == 0, text
    for host in DEMO_HOSTS:
        assert host.address in text
    web_log = read_jsonl(out / "web-log.jsonl")
    assert web_log, "the demo web saw no request"
    assert all(e["user_agent"].startswith("PoliteCrawler/") for e in web_log)
    assert (out / "stats.json").is_file()
    # The crawl report (scrapy report) is written and its path printed.
    assert str(out / "report.html") in text
    assert (out / "report.html").read_text(encoding="utf-8").count("<svg") == 5
    port = web_log[0]["port"]
    assert _port_closed(port)
    # The summary's request counts are the demo web's own.
    row = next(ln for ln in text.splitlines() if ln.startswith(NEWS) and " news " in ln)
    assert row.split()[2] == str(sum(1 for e in web_log if e["host"] == NEWS))
