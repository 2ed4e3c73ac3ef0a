"""Rendering in real crawls: Chromium against the client-rendered test site (server log asserts)."""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import shutil
import signal
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
import pytest_twisted
import scrapy

from demo.web.rendered import PRIVATE, BeaconSite, RenderedSite, story
from demo.web.server import LogEntry, Req, Resp, Site, TestWeb, overlaps
from polite_crawler.context import polite_context
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.items import page_item
from polite_crawler.middlewares.identity import identity_from_settings
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.services import needs
from tests.zlib_count import counting_zlib

if TYPE_CHECKING:
    from collections.abc import Callable

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.slow,
    needs(not os.path.exists(CHROMIUM),
          "Chromium is not installed (make test installs it from Debian as root: "
          "scripts/system-deps.sh)"),
    needs(importlib.util.find_spec("scrapy_playwright") is None,
          "scrapy-playwright is not installed (pip install -e '.[render]')"),
]

A, B, INTERNAL = "127.0.19.1", "127.0.19.2", "127.0.19.3"
REST = 0.4
CONTACT = "crawler-ops@example.org"


def _settings(tmp_path: Any, **extra: Any) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(tmp_path), "POLITE_RENDER": "meta",
            "POLITE_REST_PAGE": REST, "POLITE_CONTACT": CONTACT,
            "POLITE_RENDER_IDLE": 0.3, "POLITE_RENDER_TIMEOUT": 20.0,
            "POLITE_RENDER_BROWSER": CHROMIUM, "POLITE_RENDER_BLOCK_HOSTS": [B], **extra}


class RenderSpider(scrapy.Spider):
    """Marks every page it is given for rendering."""

    name = "render_test"
    kill_browser_after: int = 0

    def __init__(self, urls: list[str], wait: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls
        self.wait = wait
        self.seen = 0

    async def start(self) -> Any:
        for i, url in enumerate(self.start_urls):
            meta: dict[str, Any] = {"polite_render": True}
            if self.wait:
                meta["polite_render_wait"] = self.wait
            yield scrapy.Request(url, meta=meta, priority=-i, callback=self.parse)

    def parse(self, response: Any) -> Any:
        self.seen += 1
        if self.seen == self.kill_browser_after:
            _kill_browsers()
        yield page_item(response)


def _kill_browsers() -> None:
    """SIGKILL every Chromium process this test process started."""
    from polite_crawler.render.memory import _children_table

    table = _children_table()
    todo, found = list(table.get(os.getpid(), [])), []
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(table.get(pid, []))
    for pid in found:
        try:
            with open(f"/proc/{pid}/comm") as f:
                name = f.read().strip()
            if "chrom" in name:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _web() -> TestWeb:
    beacon = f"http://{B}:0"  # the port is filled in once the web is up
    site = RenderedSite(beacon, stories=3)
    web = TestWeb({A: site, B: BeaconSite(), INTERNAL: Site({"/latest/meta-data/": "secret"})})
    web.start()
    # now with the real port
    site.__init__(f"http://{B}:{web.port}", stories=3,
                  internal_origin=f"http://{INTERNAL}:{web.port}")
    return web


async def _crawl_story_1(
    tmp_path: Any, web: TestWeb, handle: Callable[[Req], Resp],
) -> tuple[str, Any]:
    """Story 1 rendered by a crawl, its site answering through ``handle``; the web stopped."""
    web.sites[A].handle = handle  # type: ignore[method-assign]
    try:
        url = web.url(A, "/story/1")
        result = await run_crawl(RenderSpider, _settings(tmp_path), urls=[url],
                                 wait="#root[data-ready]")
    finally:
        web.stop()
    return url, result


def _paths(entries: list[LogEntry]) -> list[str]:
    return [e.path for e in entries]


def _text(item: Any) -> str:
    return str(dict(item).get("text") or "")


@pytest_twisted.ensureDeferred
async def test_rendered_page_stores_the_rendered_text_and_the_site_serves_only_what_builds_it(
        tmp_path: Any) -> None:
    web = _web()
    try:
        urls = [web.url(A, f"/story/{n}") for n in (1, 2, 3)]
        result = await run_crawl(RenderSpider, _settings(tmp_path), urls=urls,
                                 wait="#root[data-ready]")
    finally:
        web.stop()
    stats = result.stats
    # The stored main text is the rendered text.
    texts = {dict(i)["url"]: _text(i) for i in result.items}
    assert set(texts) == set(urls)
    for n, url in enumerate(urls, 1):
        for para in story(n)["paragraphs"]:
            assert para in texts[url]
    # The site served the shell, the script and the JSON call of each page, nothing else;
    # the script once (kept for the crawl), the disallowed API path never.
    paths = _paths(web.entries(A))
    assert paths[0] == "/robots.txt"
    assert paths[1:] == ["/story/1", "/static/app.js", "/api/story/1.json",
                         "/story/2", "/api/story/2.json", "/story/3", "/api/story/3.json"]
    assert PRIVATE not in {p.split("?")[0] for p in paths}
    assert web.entries(B) == []  # the analytics host was never reached
    assert web.entries(INTERNAL) == []  # nor the address the script tried
    # Identified like every other request.
    identity = identity_from_settings(result.crawler.settings)
    for entry in web.entries(A):
        assert entry.headers.get("user-agent") == identity.user_agent
        assert entry.headers.get("from") == CONTACT
    # One at a time, and the rest after the whole render.
    entries = web.entries(A)
    assert overlaps(entries) == []
    for prev, nxt in itertools.pairwise(entries):
        if nxt.path.startswith("/story/"):  # the next exchange of the origin
            assert nxt.started - prev.finished >= REST - 0.02, (prev.path, nxt.path)
    # Every block counted.
    for reason in ("analytics", "image", "font", "stylesheet", "robots", "other_origin"):
        assert stats.get(f"polite/render/blocked/{reason}", 0) >= 1, reason
    assert stats["polite/render/pages"] == 3
    assert stats["polite/render/playwright_started"] == 1
    # The access log has the three pages and, beside them, each sub-request.
    log = read_access_log(polite_context(result.crawler).access_log.path)
    subs = [line for line in log if line["verdict"] == "render_subrequest"]
    assert sorted(urlsplit(line["url"]).path for line in subs) == [
        "/api/story/1.json", "/api/story/2.json", "/api/story/3.json", "/static/app.js"]
    assert {line["render_of"] for line in subs} == set(urls)
    # The 5x rest follows the render's time on the wire (the document to the last
    # sub-request, as the server saw them), not the whole exchange with the browser's
    # own work in it.
    pages = {urlsplit(line["url"]).path: line for line in log if line["url"] in urls}
    for n in (1, 2, 3):
        mine = [e for e in entries if e.path in (f"/story/{n}", f"/api/story/{n}.json")]
        wire = max(e.finished for e in mine) - min(e.started for e in mine)
        line = pages[f"/story/{n}"]
        # The crawler's stamps of the render's ends lag the server's by a few ms, 20 ms
        # with a core kept busy (0.1 s of rest): up to 0.2 s of wire allowed, far under
        # the browser's own work that a rest from the whole exchange would add.
        assert max(REST, 5 * wire) - 0.05 <= line["rest"] <= max(REST, 5 * wire) + 1.0
        assert line["rest"] < 5 * line["duration"]
    assert stats["polite/render/cache_hit"] == 2
    assert stats["polite/render/memory_max_bytes"] > 0
    assert stats.get("playwright/page_count/max_concurrent", 0) <= 2


@pytest_twisted.ensureDeferred
async def test_page_with_a_json_alternate_is_read_from_the_json_without_a_browser(
        tmp_path: Any) -> None:
    web = _web()
    try:
        result = await run_crawl(SiteSpider, _settings(tmp_path), url=web.url(A, "/alt/2"),
                                 render="auto")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/choice/json_alternate"] == 1
    assert "polite/render/started" not in stats
    assert "polite/render/playwright_started" not in stats  # no process was started
    assert "playwright/page_count" not in stats
    items = [dict(i) for i in result.items]
    assert [i["url"] for i in items] == [web.url(A, "/alt/2")]
    assert story(2)["paragraphs"][0] in items[0]["text"]
    paths = set(_paths(web.entries(A)))
    assert "/api/story/2.json" in paths
    assert "/static/app.js" not in paths


@pytest_twisted.ensureDeferred
async def test_auto_renders_a_script_built_page_and_does_not_fetch_its_shell_twice(
        tmp_path: Any) -> None:
    web = _web()
    try:
        result = await run_crawl(SiteSpider, _settings(tmp_path), url=web.url(A, "/story/3"),
                                 render="auto")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/choice/render"] == 1
    assert stats["polite/render/shell_reused"] == 1
    items = [dict(i) for i in result.items]
    assert len(items) == 1
    assert story(3)["paragraphs"][1] in items[0]["text"]
    paths = _paths(web.entries(A))
    assert paths.count("/story/3") == 1
    assert "/api/story/3.json" in paths
    assert PRIVATE not in {p.split("?")[0] for p in paths}


@pytest_twisted.ensureDeferred
async def test_a_render_that_times_out_is_a_failed_exchange_not_a_crash(tmp_path: Any) -> None:
    web = _web()
    try:
        urls = [web.url(A, "/story/1")]
        result = await run_crawl(
            RenderSpider, _settings(tmp_path, POLITE_RENDER_TIMEOUT=1.5, POLITE_RETRY_TIMES=1,
                                    POLITE_BACKOFF_BASE=0.05, POLITE_TEST_WAIT_SCALE=0.01),
            urls=urls, wait="#never-there")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/failed/timeout"] == 2  # the first try and its one retry
    assert stats.get("polite/verdicts/error:timeout", 0) == 2
    assert result.items == []
    assert stats.get("finish_reason") == "finished"


@pytest_twisted.ensureDeferred
async def test_a_browser_that_dies_is_launched_again(tmp_path: Any) -> None:
    RenderSpider.kill_browser_after = 1
    web = _web()
    try:
        urls = [web.url(A, f"/story/{n}") for n in (1, 2)]
        result = await run_crawl(RenderSpider, _settings(tmp_path, POLITE_RETRY_TIMES=2,
                                                         POLITE_BACKOFF_BASE=0.05,
                                                         POLITE_TEST_WAIT_SCALE=0.01),
                                 urls=urls, wait="#root[data-ready]")
    finally:
        RenderSpider.kill_browser_after = 0
        web.stop()
    stats = result.stats
    assert {dict(i)["url"] for i in result.items} == set(urls)
    assert stats["polite/render/browser_restarts"] >= 1


@pytest_twisted.ensureDeferred
async def test_pages_with_a_feed_are_read_from_its_entries_the_feed_fetched_once(
        tmp_path: Any) -> None:
    web = _web()
    try:
        urls = [web.url(A, "/feedpage/1"), web.url(A, "/feedpage/2")]
        result = await run_crawl(SiteSpider, _settings(tmp_path), url=",".join(urls),
                                 render="auto")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/choice/feed"] == 2
    assert stats["polite/render/feed/read"] == 2  # the second page waited for the same feed
    assert "polite/render/started" not in stats
    items = {dict(i)["url"]: dict(i) for i in result.items}
    assert set(items) == set(urls)
    for n, url in enumerate(urls, 1):
        assert story(n)["paragraphs"][2] in items[url]["text"]
        assert items[url]["title"] == story(n)["title"]
    paths = _paths(web.entries(A))
    assert paths.count("/feed.xml") == 1
    assert "/static/app.js" not in paths


@pytest_twisted.ensureDeferred
async def test_a_json_alternate_without_text_falls_back_to_rendering(tmp_path: Any) -> None:
    web = _web()
    site = web.sites[A]
    real = site.handle

    def handle(req: Req) -> Resp:
        # The crawler's plain request (Accept: text/html...) gets a JSON with no text;
        # the page's own script (Accept: */*) gets the story.
        if req.path.startswith("/api/story/") and req.header("accept").startswith("text/html"):
            return Resp(200, b'{"id": 1}', content_type="application/json")
        return real(req)

    site.handle = handle  # type: ignore[method-assign]
    try:
        result = await run_crawl(SiteSpider, _settings(tmp_path), url=web.url(A, "/alt/1"),
                                 render="auto")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/json_alternate/no_text"] == 1
    assert stats["polite/render/choice/render"] == 1
    assert stats["polite/render/shell_reused"] == 1
    items = [dict(i) for i in result.items]
    assert [i["url"] for i in items] == [web.url(A, "/alt/1")]
    assert story(1)["paragraphs"][0] in items[0]["text"]
    assert _paths(web.entries(A)).count("/alt/1") == 1


@pytest_twisted.ensureDeferred
async def test_the_sub_requests_of_a_render_are_signed_as_every_request(tmp_path: Any) -> None:
    from tests.signing_verifier import keys_from_directory, verify_request
    from tests.test_signing_crawl import AGENT, _setup

    key, directory = _setup(tmp_path)
    web = _web()
    site = web.sites[A]
    real = site.handle
    outcomes: list[tuple[str, bool, str]] = []

    def handle(req: Req) -> Resp:
        keys = keys_from_directory(directory.read_text())
        out = verify_request(req.method, req.path, req.headers, keys, now=time.time())
        outcomes.append((req.path, out.verified, out.reason))
        return real(req)

    site.handle = handle  # type: ignore[method-assign]
    try:
        result = await run_crawl(
            RenderSpider, _settings(tmp_path, POLITE_SIGNING_KEY=key,
                                    POLITE_SIGNATURE_AGENT=AGENT,
                                    POLITE_SIGNATURE_DIRECTORY=str(directory)),
            urls=[web.url(A, "/story/1")], wait="#root[data-ready]")
    finally:
        web.stop()
    assert [p for p, _, _ in outcomes] == ["/robots.txt", "/story/1", "/static/app.js",
                                           "/api/story/1.json"]
    assert [(p, why) for p, ok, why in outcomes if not ok] == []
    assert len(result.items) == 1


@pytest_twisted.ensureDeferred
async def test_a_json_alternate_that_fails_falls_back_to_rendering(tmp_path: Any) -> None:
    web = _web()
    site = web.sites[A]
    real = site.handle

    def handle(req: Req) -> Resp:
        if req.path.startswith("/api/story/") and req.header("accept").startswith("text/html"):
            return Resp(404, b"gone", content_type="text/plain")
        return real(req)

    site.handle = handle  # type: ignore[method-assign]
    try:
        result = await run_crawl(SiteSpider, _settings(tmp_path), url=web.url(A, "/alt/3"),
                                 render="auto")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/choice/json_alternate"] == 1
    assert stats["polite/render/choice/render"] == 1
    items = [dict(i) for i in result.items]
    assert [i["url"] for i in items] == [web.url(A, "/alt/3")]
    assert story(3)["paragraphs"][0] in items[0]["text"]


@pytest_twisted.ensureDeferred
async def test_a_browser_over_its_memory_limit_is_closed_and_launched_again(
        tmp_path: Any) -> None:
    web = _web()
    try:
        urls = [web.url(A, f"/story/{n}") for n in (1, 2)]
        result = await run_crawl(RenderSpider, _settings(tmp_path, POLITE_RENDER_MAX_RSS=1),
                                 urls=urls, wait="#root[data-ready]")
    finally:
        web.stop()
    stats = result.stats
    assert {dict(i)["url"] for i in result.items} == set(urls)
    assert stats["polite/render/restart/memory"] == 2
    assert stats["polite/render/browser_restarts"] == 1
    assert "polite/render/failed/browser" not in stats  # the close came between two pages


@pytest_twisted.ensureDeferred
async def test_a_sub_request_answered_429_is_the_exchanges_answer(tmp_path: Any) -> None:
    web = _web()
    site = web.sites[A]
    real = site.handle
    calls = {"n": 0}

    def handle(req: Req) -> Resp:
        if req.path == "/api/story/1.json":
            calls["n"] += 1
            if calls["n"] == 1:
                return Resp(429, b"slow down", content_type="text/plain",
                            headers={"Retry-After": "1"})
        return real(req)

    url, result = await _crawl_story_1(tmp_path, web, handle)
    stats = result.stats
    assert stats["polite/render/refused/429"] == 1
    assert stats["polite/verdicts/429"] == 1
    assert stats["polite/gate/retry/count"] == 1
    assert [dict(i)["url"] for i in result.items] == [url]  # read on the retry
    entries = [e for e in web.entries(A) if e.path != "/robots.txt"]
    refused = next(e for e in entries if e.status == 429)
    later = entries[entries.index(refused) + 1]
    assert later.path == "/story/1"
    assert later.started - refused.finished >= 0.95  # Retry-After: 1 was kept


@pytest_twisted.ensureDeferred
async def test_a_challenge_on_a_sub_request_stops_the_origin(tmp_path: Any) -> None:
    """A challenge page is a stop whatever its status: the gate's verdict, not a list."""
    web = _web()
    site = web.sites[A]
    real = site.handle

    def handle(req: Req) -> Resp:
        if req.path == "/api/story/1.json":
            return Resp(200, b"{}", content_type="application/json",
                        headers={"cf-mitigated": "challenge"})
        return real(req)

    site.handle = handle  # type: ignore[method-assign]
    try:
        urls = [web.url(A, "/story/1"), web.url(A, "/story/2")]
        result = await run_crawl(RenderSpider, _settings(tmp_path), urls=urls,
                                 wait="#root[data-ready]")
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/refused/200"] == 1
    assert stats["polite/gate/verdict/stop_origin"] == 1
    assert result.items == []
    assert not [e for e in web.entries(A) if e.path == "/story/2"]  # nothing after the stop


@pytest_twisted.ensureDeferred
async def test_a_gzip_sub_request_is_decoded_once_for_its_judgement_and_the_browser(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sub-request's verdict reads its body's head (for challenge markers) and the
    browser is given the body decoded on from there: one gzip stream, not one each."""
    web = _web()
    site = web.sites[A]
    real = site.handle

    def handle(req: Req) -> Resp:  # only the JSON call gzip-encoded
        return dataclasses.replace(real(req), gzip_ok=req.path == "/api/story/1.json")

    zlib_count = counting_zlib(monkeypatch)
    _, result = await _crawl_story_1(tmp_path, web, handle)
    [item] = result.items
    for para in story(1)["paragraphs"]:  # the browser read the decoded JSON
        assert para in _text(item)
    served = [e for e in web.entries(A) if e.path == "/api/story/1.json"]
    assert len(served) == 1
    assert zlib_count.streams == 1


@pytest_twisted.ensureDeferred
async def test_a_render_sends_at_most_its_sub_request_budget(tmp_path: Any) -> None:
    web = _web()
    try:
        result = await run_crawl(RenderSpider, _settings(tmp_path, POLITE_RENDER_MAX_SUBREQUESTS=1),
                                 urls=[web.url(A, "/story/2")])
    finally:
        web.stop()
    stats = result.stats
    assert stats["polite/render/blocked/too_many"] >= 1
    assert _paths(web.entries(A)) == ["/robots.txt", "/story/2", "/static/app.js"]
    assert story(2)["paragraphs"][0] not in _text(result.items[0])
