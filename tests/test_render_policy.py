"""The render rules (policy.render), the render settings, and a crawl that stays browser-free."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from demo.web.rendered import BeaconSite, RenderedSite
from polite_crawler.addon import PoliteAddon
from polite_crawler.policy.render import (
    SubrequestRules,
    ends_render,
    host_blocked,
    json_alternate,
    json_ld_text,
    json_text,
    judge_subrequest,
    load_blocked_hosts,
    script_built,
    text_document,
)
from polite_crawler.policy.verdicts import classify_response
from polite_crawler.render.settings import HANDLER, MIDDLEWARE, RenderSettingError, render_mode

PAGE = "https://example.org/story/1"
RULES = SubrequestRules(load_blocked_hosts() | {"beacon.example.net"})


@pytest.mark.parametrize(("url", "kind", "method", "reason"), [
    ("https://example.org/static/app.js", "script", "GET", None),
    ("https://example.org/api/story/1.json", "fetch", "GET", None),
    ("https://example.org/api/story/1.json", "xhr", "HEAD", None),
    ("https://example.org/story/2", "document", "GET", None),  # a same-origin frame
    ("https://example.org/api/hit", "fetch", "POST", "method"),
    ("https://example.org/hero.jpg", "image", "GET", "image"),
    ("https://example.org/clip.mp4", "media", "GET", "media"),
    ("https://example.org/f.woff2", "font", "GET", "font"),
    ("https://example.org/app.css", "stylesheet", "GET", "stylesheet"),
    ("https://example.org/favicon.ico", "image", "GET", "favicon"),
    ("https://example.org/site.webmanifest", "manifest", "GET", "favicon"),
    ("https://example.org/collect", "ping", "POST", "ping"),
    ("https://example.org/live", "websocket", "GET", "websocket"),
    ("https://example.org/events", "eventsource", "GET", "eventsource"),
    ("https://www.googletagmanager.com/gtm.js?id=X", "script", "GET", "analytics"),
    ("https://region1.google-analytics.com/g/collect", "fetch", "POST", "analytics"),
    ("https://beacon.example.net/tag.js", "script", "GET", "analytics"),  # the setting
    ("https://cdn.example.net/react.js", "script", "GET", "other_origin"),
    ("http://example.org/app.js", "script", "GET", "other_origin"),  # another scheme
    ("https://example.org:8443/app.js", "script", "GET", "other_origin"),  # another port
    ("https://example.org:443/app.js", "script", "GET", None),  # the default port
    ("ws://example.org/live", "websocket", "GET", "scheme"),
])
def test_judge_subrequest(url: str, kind: str, method: str, reason: str | None) -> None:
    assert judge_subrequest(url, kind, method, PAGE, RULES) == reason


def test_stylesheets_are_a_setting() -> None:
    rules = SubrequestRules(frozenset(), block_stylesheets=False)
    assert judge_subrequest("https://example.org/a.css", "stylesheet", "GET", PAGE, rules) is None
    assert judge_subrequest("https://cdn.example.net/a.css", "stylesheet", "GET", PAGE,
                            rules) == "other_origin"


def test_blocked_hosts_file_lists_the_common_tag_hosts() -> None:
    hosts = load_blocked_hosts()
    for host in ("googletagmanager.com", "google-analytics.com", "doubleclick.net",
                 "connect.facebook.net", "hotjar.com", "clarity.ms"):
        assert host in hosts
    assert host_blocked("SSL.Google-Analytics.com.", hosts)
    assert not host_blocked("example.org", hosts)


SHELL = RenderedSite("http://127.0.0.9:1").handle  # a page of the test site, as bytes


def _body(path: str) -> bytes:
    from demo.web.server import Req

    resp = SHELL(Req("GET", path, {}, "127.0.0.1", 1))
    assert isinstance(resp.body, bytes)
    return resp.body


def test_script_built_finds_the_test_sites_shell_and_not_a_plain_page() -> None:
    assert script_built(_body("/story/1"), 0) == "noscript"
    assert script_built(b"<html><body><div id='app'></div><script src=a.js></script>", 0) \
        == "empty_app_root"
    assert script_built(b"<html><body><div id='__next'> </div><script>x()</script>", 3) \
        == "empty_app_root"
    # a page with text of its own is not rendered, whatever its scripts
    assert script_built(_body("/story/1"), 50) is None
    # an empty root without any script is not an application
    assert script_built(b"<html><body><div id='root'></div></body></html>", 0) is None
    # a root with content is mounted server-side
    assert script_built(b"<div id='root'><p>Hi</p></div><script></script>", 1) is None
    assert script_built(b"", 0) is None
    assert script_built(b"\xff\xfe<<<", 0) is None


def test_json_alternate_same_origin_only() -> None:
    assert json_alternate(_body("/alt/2"), "http://127.0.0.1:1/alt/2") \
        == "http://127.0.0.1:1/api/story/2.json"
    assert json_alternate(_body("/story/2"), "http://127.0.0.1:1/story/2") is None
    other = b'<link rel="alternate" type="application/json" href="https://api.other.net/x">'
    assert json_alternate(other, PAGE) is None
    feed = b'<link rel="alternate" type="application/rss+xml" href="/feed">'
    assert json_alternate(feed, PAGE) is None
    ld = b'<link rel="alternate" type="application/ld+json" href="/x.jsonld">'
    assert json_alternate(ld, PAGE) == "https://example.org/x.jsonld"


def test_json_ld_text_takes_the_article_body() -> None:
    body = ("<html><head><script type='application/ld+json'>"
            '{"@context": "https://schema.org", "@type": "NewsArticle", "headline": "Bridge",'
            ' "articleBody": "' + "word " * 30 + '"}</script></head>'
            "<body><div id='root'></div><script src=a.js></script></body></html>").encode()
    found = json_ld_text(body)
    assert found is not None and found.title == "Bridge" and found.words == 30
    # JSON-LD that is only a breadcrumb is not the page's text
    crumbs = (b"<script type='application/ld+json'>{\"@type\": \"BreadcrumbList\","
              b" \"name\": \"Home\"}</script>")
    assert json_ld_text(crumbs) is None
    assert json_ld_text(b"<script type='application/ld+json'>{not json</script>") is None


def test_json_text_and_its_document() -> None:
    assert json_text(b"not json") is None
    assert json_text(b"[1, 2, 3]") is None
    found = json_text(b'{"data": {"title": "A <b>", "paragraphs": ["x & y", "x & y", "z"]}}')
    assert found is not None
    assert found.paragraphs == ("x & y", "z")
    html = text_document(found)
    assert b"<title>A &lt;b&gt;</title>" in html and b"<p>x &amp; y</p>" in html
    deep = b'{"a":' * 50 + b'"x"' + b"}" * 50
    assert json_text(deep) is None  # nesting past the depth limit is not read


def test_render_mode() -> None:
    s = Settings({"POLITE_RENDER": ""})
    assert render_mode(s) == ""

    class Spider:
        render = "auto"

    assert render_mode(s, Spider()) == "auto"

    class Drawing:
        def render(self) -> None: ...

    assert render_mode(s, Drawing()) == ""  # a spider's own render() method is not -a render
    assert render_mode(Settings({"POLITE_RENDER": True})) == "meta"
    assert render_mode(Settings({"POLITE_RENDER": "off"})) == ""
    with pytest.raises(RenderSettingError):
        render_mode(Settings({"POLITE_RENDER": "always"}))


def test_the_addon_installs_the_render_handler_only_when_rendering_is_on() -> None:
    plain = get_crawler(settings_dict={"ADDONS": {PoliteAddon: 0}})
    assert plain.settings.getdict("DOWNLOAD_HANDLERS")["http"] \
        == "polite_crawler.handlers.GuardedHTTPDownloadHandler"
    assert MIDDLEWARE not in plain.settings.getdict("SPIDER_MIDDLEWARES")
    pytest.importorskip("scrapy_playwright")
    on = get_crawler(settings_dict={"ADDONS": {PoliteAddon: 0}, "POLITE_RENDER": "auto",
                                    "POLITE_RENDER_BROWSER": sys.executable})  # any program
    handlers = on.settings.getdict("DOWNLOAD_HANDLERS")
    assert handlers["http"] == handlers["https"] == HANDLER
    assert on.settings.getdict("SPIDER_MIDDLEWARES")[MIDDLEWARE] == 80


def test_a_plain_crawl_imports_no_browser() -> None:
    """What a plain `scrapy crawl site` loads never imports Playwright."""
    code = textwrap.dedent("""
        import sys
        from scrapy.utils.test import get_crawler
        from scrapy.utils.misc import load_object
        import polite_crawler.settings as s
        import polite_crawler.render.settings, polite_crawler.policy.render
        from polite_crawler.spiders.site import SiteSpider
        crawler = get_crawler(SiteSpider, {k: getattr(s, k) for k in dir(s) if k.isupper()})
        for name in ("DOWNLOAD_HANDLERS", "DOWNLOADER_MIDDLEWARES", "SPIDER_MIDDLEWARES",
                     "ITEM_PIPELINES", "EXTENSIONS"):
            for path in crawler.settings.getdict(name).values() if name == "DOWNLOAD_HANDLERS" \\
                    else crawler.settings.getdict(name):
                if isinstance(path, str):
                    load_object(path)
        bad = sorted(m for m in sys.modules if "playwright" in m)
        assert not bad, bad
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_beacon_site_serves_a_tag() -> None:
    from demo.web.server import Req

    resp = BeaconSite().handle(Req("GET", "/tag.js", {}, "127.0.0.2", 1))
    assert resp.status == 200 and b"pixel.gif" in bytes(resp.body)  # type: ignore[arg-type]


def test_the_scrapy_playwright_names_the_handler_relies_on() -> None:
    """scrapy-playwright is pinned (pyproject.toml); this fails when its private names move."""
    import inspect

    handler = pytest.importorskip("scrapy_playwright.handler")
    cls = handler.ScrapyPlaywrightDownloadHandler
    for name in ("_download_request", "_make_request_handler", "_browser_disconnected_callback",
                 "_create_page", "_maybe_launch_in_thread", "_launch", "_maybe_launch_browser"):
        assert callable(getattr(cls, name, None)), name
    params = list(inspect.signature(cls._make_request_handler).parameters)
    assert params == ["self", "context_name", "method", "url", "headers", "body", "encoding",
                      "spider", "initial_request_done"]
    fields = set(handler.Config.__dataclass_fields__)
    assert {"browser_type_name", "launch_options", "max_pages_per_context",
            "navigation_timeout_ms", "restart_disconnected_browser", "startup_context_kwargs",
            "cdp_url", "connect_url"} <= fields
    from polite_crawler.render.handler import RenderDownloadHandler

    assert issubclass(RenderDownloadHandler, cls)


def test_feed_alternate_and_its_entry_text() -> None:
    from demo.web.rendered import story
    from polite_crawler.policy.render import feed_alternate, feed_entry_text

    site = RenderedSite("http://127.0.0.9:1", stories=2)
    page = "http://127.0.0.1:1/feedpage/2"
    assert feed_alternate(_body("/feedpage/2"), page) == "http://127.0.0.1:1/feed.xml"
    assert feed_alternate(_body("/story/2"), page) is None
    found = feed_entry_text(site.feed(), page)
    assert found is not None and found.title == story(2)["title"]
    assert found.paragraphs == tuple(story(2)["paragraphs"])
    assert feed_entry_text(site.feed(), "http://127.0.0.1:1/feedpage/9") is None
    feed = "http://127.0.0.1:1/feed.xml"
    assert feed_entry_text(site.feed(), "http://other.example/feedpage/2", feed) is None
    atom = (b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>T</title>'
            b'<link href="https://example.org/a"/><summary>short</summary>'
            b'<content type="html">&lt;p&gt;' + b"word " * 25 + b"&lt;/p&gt;</content>"
            b"</entry></feed>")
    entry = feed_entry_text(atom, "https://example.org/a/")
    assert entry is not None and entry.words == 25
    assert feed_entry_text(atom, "https://example.org/a", min_words=30) is None
    bomb = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
            b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><rss><item><link>https://example.org/a'
            b"</link><description>&b;&b;&b;</description></item></rss>")
    assert feed_entry_text(bomb, "https://example.org/a") is None  # entities stay unexpanded
    assert feed_entry_text(b"not xml at all", "https://example.org/a") is None


def test_shell_cache_is_bounded_and_short_lived() -> None:
    from scrapy.http import HtmlResponse

    from polite_crawler.render.middleware import SHELL_MAX, SHELL_MAX_BYTES, SHELL_TTL, ShellCache

    now = [0.0]
    cache = ShellCache(clock=lambda: now[0])
    small = [HtmlResponse(f"http://a.example/{i}", body=b"x" * 100) for i in range(SHELL_MAX + 5)]
    for r in small:
        cache.put(r.url, r)
    assert cache.take(small[0].url) is None  # the oldest went first
    assert cache.take(small[-1].url) is small[-1]
    assert cache.take(small[-1].url) is None  # taken once
    big = HtmlResponse("http://a.example/big", body=b"x" * (SHELL_MAX_BYTES // 4 + 1))
    cache.put(big.url, big)
    assert cache.take(big.url) is None
    assert cache.size == 100 * (SHELL_MAX - 1)
    cache.put("http://a.example/late", small[1])
    now[0] += SHELL_TTL + 1
    assert cache.take("http://a.example/late") is None  # too old to stand for the page now


def test_rendering_on_without_the_browser_is_a_clear_error_at_start(tmp_path: Any) -> None:
    pytest.importorskip("scrapy_playwright")
    from polite_crawler.spiders.site import SiteSpider

    with pytest.raises(RenderSettingError, match="apt-get install chromium"):
        get_crawler(SiteSpider, {"ADDONS": {PoliteAddon: 0}, "POLITE_RENDER": "meta",
                                 "POLITE_RENDER_BROWSER": str(tmp_path / "no-chromium")})


def test_the_crawl_command_says_in_one_line_that_the_browser_is_missing(tmp_path: Any) -> None:
    pytest.importorskip("scrapy_playwright")
    from scrapy.utils.project import get_project_settings

    from polite_crawler.commands.crawl import start_problem
    from polite_crawler.spiders.site import SiteSpider

    settings = get_project_settings()
    settings.set("POLITE_RENDER_BROWSER", str(tmp_path / "no-chromium"), priority="cmdline")
    problem = start_problem(settings, SiteSpider, {"url": "http://127.0.0.1:9/",
                                                   "render": "auto"})
    assert problem is not None and "apt-get install chromium" in problem
    assert start_problem(settings, SiteSpider, {"url": "http://127.0.0.1:9/"}) is None


@pytest.mark.parametrize(("status", "headers", "ends"), [
    (200, {}, False), (404, {}, False), (500, {}, False), (408, {}, False),
    (402, {}, True), (403, {}, True), (429, {"retry-after": "5"}, True), (503, {}, True),
    (200, {"cf-mitigated": "challenge"}, True),
])
def test_a_sub_request_answer_ends_the_render_on_the_gates_verdict(
        status: int, headers: dict[str, str], ends: bool) -> None:
    assert ends_render(classify_response(status, headers, b"", 0.0)) is ends
