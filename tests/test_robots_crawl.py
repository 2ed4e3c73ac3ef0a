"""robots.txt in real crawls against the test web: first, through the gate, strictly.

Every assertion about what was fetched comes from the test web's own request
log: no request precedes an origin's robots.txt, and an origin whose
robots.txt is unreachable sees nothing but robots.txt.
"""

from __future__ import annotations

import itertools
import time
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
import scrapy

from demo.web.server import LogEntry, Req, Resp, Site, TestWeb, overlaps, page
from polite_crawler.defaults import POLITE_DEFAULTS
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.items import PageRulesItem
from polite_crawler.policy.robots import MAX_UNUSABLE_FETCHES
from polite_crawler.spiders.site import SiteSpider
from polite_crawler.store.paths import origins_db_path
from polite_crawler.store.robots import RobotsBook
from tests.crawl import run_crawl
from tests.robots_numbers import ROBOTS_NUMBERS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from scrapy.http import Response

    from tests.crawl import CrawlResult

pytestmark = pytest.mark.slow

ROBOTS = "/robots.txt"
# With no Sitemap line in robots.txt the site spider reads /sitemap.xml first
# (sitemaps first); it is a request like any other, after robots.txt.
SITEMAP = "/sitemap.xml"
CONTENT = ("/", "/a", "/secret")
BREAKER = POLITE_DEFAULTS["POLITE_BREAKER_FAILURES"]


def _settings(tmp_path: Path, **extra: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "POLITE_STATE_DIR": str(tmp_path),
        "POLITE_ROBOTS_RETRY_MIN": 0.2,
        "POLITE_ROBOTS_RETRY_MAX": 0.4,
        "POLITE_TEST_WAIT_SCALE": 0.01,
        "DOWNLOAD_TIMEOUT": 5,
        "CLOSESPIDER_TIMEOUT": 40,
    }
    settings.update(extra)
    return settings


def site(robots: Resp | str | bytes | Callable[[Req], Resp] | None, **routes: Any) -> Site:
    """A small site: / links to /a and /secret; ``robots`` answers /robots.txt."""
    table: dict[str, Any] = {
        "/": page("home", "welcome", ["/a", "/secret"]),
        "/a": page("a", "plain page"),
        "/secret": page("secret", "do not fetch"),
    }
    if robots is not None:
        table[ROBOTS] = robots
    table.update({k.replace("_", "-") if k.startswith("x") else k: v for k, v in routes.items()})
    return Site(table)


def text(body: str | bytes) -> Resp:
    return Resp(200, body.encode() if isinstance(body, str) else body, content_type="text/plain")


def paths(web: TestWeb, host: str) -> list[str]:
    return [e.path for e in web.entries(host)]


def assert_robots_first(web: TestWeb, host: str, robots_paths: tuple[str, ...] = (ROBOTS,)) -> None:
    """The first request to the host is robots.txt, and no content request starts
    before that first robots.txt exchange (and its redirect hops on this host) ended."""
    entries: list[LogEntry] = web.entries(host)
    assert entries, f"nothing was requested from {host}"
    assert entries[0].path == ROBOTS, [e.path for e in entries]
    leading = 0
    while leading < len(entries) and entries[leading].path in robots_paths:
        leading += 1
    robots_done = max(e.finished for e in entries[:leading])
    content = [e for e in entries if e.path not in robots_paths]
    if content:
        assert min(e.started for e in content) >= robots_done


def assert_only_robots(web: TestWeb, host: str, robots_paths: tuple[str, ...] = (ROBOTS,)) -> None:
    got = paths(web, host)
    assert got, f"robots.txt of {host} was never asked for"
    assert set(got) <= set(robots_paths), got


async def crawl(web: TestWeb, hosts: list[str], tmp_path: Path, **settings: Any) -> CrawlResult:
    urls = ",".join(web.url(h, "/") for h in hosts)
    return await run_crawl(SiteSpider, _settings(tmp_path, **settings), url=urls)


# ---------------------------------------------------------------------------
# Status classes


def failing_then(fail: Resp, times: int, rules: str) -> Callable[[Req], Resp]:
    """robots.txt that fails ``times`` times, then answers ``rules``."""
    calls = {"n": 0}

    def handle(req: Req) -> Resp:
        calls["n"] += 1
        return fail if calls["n"] <= times else text(rules)

    return handle


def before_first_good_robots(web: TestWeb, host: str) -> list[str]:
    """Paths requested before robots.txt was first answered 2xx."""
    entries = web.entries(host)
    good = [e for e in entries if e.path == ROBOTS and 200 <= e.status < 300]
    assert good, f"robots.txt of {host} never recovered"
    return [e.path for e in entries if e.started < good[0].finished]


@pytest_twisted.ensureDeferred
async def test_every_status_class(web_factory: type[TestWeb], tmp_path: Path) -> None:
    rules = "User-agent: *\nDisallow: /secret\n"
    answers: dict[str, Any] = {
        "127.0.0.11": text(rules),  # 200
        "127.0.0.12": Resp(203, rules.encode(), content_type="text/plain"),
        "127.0.0.13": Resp(404, b"<html>not found</html>"),
        "127.0.0.14": Resp(410, b"gone"),
        "127.0.0.15": Resp(401, b"who are you"),
        "127.0.0.16": Resp(403, b"forbidden"),
        # an error page is never parsed as robots.txt: nothing but robots.txt is
        # asked for, again and again with a backoff, until the breaker stops the origin
        "127.0.0.18": Resp(500, b"User-agent: *\nAllow: /\n"),
        "127.0.0.20": Resp(502, b"bad gateway"),
        # 429 for good: no failure for the breaker, but robots.txt never becomes usable
        "127.0.0.21": Resp(429, b"slow down", headers={"Retry-After": "1"}),
        # 429 and 503: unreachable until robots.txt can be read again
        "127.0.0.17": failing_then(Resp(429, b"slow down", headers={"Retry-After": "1"}), 2, rules),
        "127.0.0.19": failing_then(Resp(503, b"User-agent: *\nAllow: /\n"), 3, rules),
    }
    web = web_factory({h: site(r) for h, r in answers.items()})
    result = await crawl(web, list(answers), tmp_path)
    for host in answers:
        assert_robots_first(web, host)
    for host in ("127.0.0.11", "127.0.0.12"):  # 2xx: parsed and obeyed
        assert set(paths(web, host)) == {ROBOTS, SITEMAP, "/", "/a"}
    for host in ("127.0.0.13", "127.0.0.14", "127.0.0.15", "127.0.0.16"):  # 4xx: no rules
        assert set(paths(web, host)) == {ROBOTS, SITEMAP, *CONTENT}
    for host in ("127.0.0.18", "127.0.0.20", "127.0.0.21"):  # unreachable for good
        assert_only_robots(web, host)
    # asked for again after each backoff, until the origin is stopped: a 5xx is a
    # failure (five in a row trip the breaker); 429 is none, and the frontier gives
    # up after ten robots.txt fetches in a row that never made it usable
    assert len(paths(web, "127.0.0.18")) == len(paths(web, "127.0.0.20")) == BREAKER
    assert len(paths(web, "127.0.0.21")) == MAX_UNUSABLE_FETCHES
    for host, failures in (("127.0.0.17", 2), ("127.0.0.19", 3)):  # unreachable, then back
        assert before_first_good_robots(web, host) == [ROBOTS] * (failures + 1)
        assert set(paths(web, host)) == {ROBOTS, SITEMAP, "/", "/a"}
    assert not overlaps(web.log)
    stats = result.stats
    assert result.stats["finish_reason"] == "finished"
    assert stats["polite/robots/outcome/parse"] == 4
    assert stats["polite/robots/outcome/allow_all"] == 4
    assert stats["polite/robots/outage_without_copy"] >= 9
    assert stats["polite/robots/status/429"] == 2 + MAX_UNUSABLE_FETCHES
    assert stats["polite/origin/stopped/breaker"] == 2
    assert stats["polite/origin/stopped/robots_unreachable"] == 1
    urls = {i["url"] for i in result.items}
    assert web.url("127.0.0.11", "/secret") not in urls
    # The 4xx hosts serve the same pages: the first /secret fetched is the item, the
    # others are its exact duplicates (aliases, not stored again).
    assert any(web.url(h, "/secret") in urls for h in ("127.0.0.13", "127.0.0.14",
                                                        "127.0.0.15", "127.0.0.16"))


# ---------------------------------------------------------------------------
# Redirects (RFC 9309 section 2.3.1.2)


def chain(redirects: int, final: str, prefix: str = "/r") -> dict[str, Resp]:
    """robots.txt -> /r1 -> ... -> /r<n>: ``redirects`` redirects, then ``final``."""
    routes: dict[str, Resp] = {}
    hops = [ROBOTS] + [f"{prefix}{i}" for i in range(1, redirects + 1)]
    for here, there in itertools.pairwise(hops):
        routes[here] = Resp(301 if len(routes) % 2 else 302, b"", headers={"Location": there})
    routes[hops[-1]] = text(final)
    return routes


@pytest_twisted.ensureDeferred
async def test_redirect_chains_of_1_5_and_6_hops(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    rules = "User-agent: *\nDisallow: /secret\n"
    one, five, six, cross, target = (f"127.0.0.{n}" for n in (31, 32, 33, 34, 35))
    sites = {}
    for host, n in ((one, 1), (five, 5), (six, 6)):
        s = site(None)
        s.routes.update(chain(n, rules))
        sites[host] = s
    sites[cross] = site(None)
    sites[target] = Site({"/shared-robots.txt": text(rules)})
    web = web_factory(sites)
    sites[cross].routes[ROBOTS] = Resp(
        302, b"", headers={"Location": web.url(target, "/shared-robots.txt")}
    )
    # the other host is no start host: the address policy must let the hop through
    result = await crawl(web, [one, five, six, cross], tmp_path,
                         POLITE_ALLOW_NETWORKS=[f"{target}/32"], POLITE_REST_PAGE=0.02,
                         POLITE_ROBOTS_RETRY_MIN=0.05, POLITE_ROBOTS_RETRY_MAX=0.05)
    for host, n in ((one, 1), (five, 5)):
        hop_paths = (ROBOTS, *(f"/r{i}" for i in range(1, n + 1)))
        assert_robots_first(web, host, hop_paths)
        assert paths(web, host)[: n + 1] == list(hop_paths)  # every hop, in order
        assert set(paths(web, host)) == {*hop_paths, SITEMAP, "/", "/a"}  # and the rules obeyed
    # six redirects: the sixth is not followed. RFC 9309 2.3.1.2 lets the crawler
    # read the file as unavailable, which 2.3.1.3 makes "no restrictions" (as a 4xx).
    six_paths = [ROBOTS, *(f"/r{i}" for i in range(1, 6))]
    got = paths(web, six)
    assert got[:6] == six_paths
    assert "/r6" not in got
    assert sorted(got[6:]) == sorted([SITEMAP, *CONTENT])
    assert result.stats.get("polite/robots/outcome/allow_all", 0) >= 1
    # across hosts: the file found on the other host rules the first one
    assert_robots_first(web, cross)
    assert set(paths(web, cross)) == {ROBOTS, SITEMAP, "/", "/a"}
    assert set(paths(web, target)) == {"/shared-robots.txt"}
    assert not overlaps(web.log)
    stats = result.stats
    assert stats["polite/robots/too_many_redirects"] >= 1
    assert stats["finish_reason"] == "finished"


# ---------------------------------------------------------------------------
# Network failures


@pytest_twisted.ensureDeferred
async def test_refused_reset_and_timeout(web_factory: type[TestWeb], tmp_path: Path) -> None:
    reset, slow = "127.0.0.41", "127.0.0.42"
    refused = "127.0.0.43"  # no server listens there
    rules = "User-agent: *\nDisallow: /secret\n"
    web = web_factory({
        reset: site(Resp(reset=True)),
        slow: site(failing_then(Resp(delay=2.0, body=b"User-agent: *\nAllow: /\n"), 1, rules)),
    })
    urls = ",".join([web.url(reset), web.url(slow), f"http://{refused}:{web.port}/"])
    result = await run_crawl(SiteSpider, _settings(tmp_path, DOWNLOAD_TIMEOUT=0.7), url=urls)
    assert_robots_first(web, reset)
    assert_only_robots(web, reset)
    assert not web.entries(refused)
    assert_robots_first(web, slow)
    # (the timed-out exchange itself may be missing from the log: the server
    # only logs a request once it has answered, and the client had gone)
    assert set(before_first_good_robots(web, slow)) == {ROBOTS}
    assert set(paths(web, slow)) == {ROBOTS, SITEMAP, "/", "/a"}
    stats = result.stats
    assert stats.get("polite/robots/error/refused", 0) >= 1
    # the reset (no answer, RST) is a lost or failed connection, whatever its label
    assert sum(stats.get(f"polite/robots/error/{k}", 0) for k in ("reset", "lost", "connect")) >= 1
    assert stats.get("polite/robots/error/timeout", 0) >= 1
    assert {i["url"] for i in result.items} == {web.url(slow, "/"), web.url(slow, "/a")}


# ---------------------------------------------------------------------------
# Size, encodings, groups


@pytest_twisted.ensureDeferred
async def test_two_megabyte_robots_txt_is_cut_not_rejected(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    body = b"User-agent: *\nDisallow: /secret\n" + b"# filler line\n" * 150_000 + b"Disallow: /a\n"
    assert len(body) > 2_000_000
    host = "127.0.0.51"
    web = web_factory({host: site(Resp(200, body, content_type="text/plain", gzip_ok=False))})
    result = await crawl(web, [host], tmp_path)
    assert_robots_first(web, host)
    # /secret (before the cut) is obeyed; /a (after 2 MB) was never read
    assert set(paths(web, host)) == {ROBOTS, SITEMAP, "/", "/a"}
    assert result.stats["polite/robots/truncated"] == 1


@pytest_twisted.ensureDeferred
async def test_bom_crlf_garbage_utf16_and_token_group(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    answers = {
        # BOM and CRLF: the group for our token is found
        "127.0.0.61": text(b"\xef\xbb\xbfUser-agent: PoliteCrawler\r\nDisallow: /secret\r\n"),
        # binary garbage: nothing parses, nothing is restricted, nothing crashes
        "127.0.0.62": text(bytes(range(256)) * 64),
        # UTF-16 with a byte order mark
        "127.0.0.63": text("User-agent: *\nDisallow: /secret\n".encode("utf-16")),
        # a group for the token beside "*": only ours applies
        "127.0.0.64": text("User-agent: *\nDisallow: /\n\nUser-agent: PoliteCrawler\n"
                           "Disallow: /secret\n"),
        # "PoliteCrawler/1.0" names the token (Protego alone would not match it)
        "127.0.0.65": text("User-agent: *\nAllow: /\n\nUser-agent: PoliteCrawler/1.0\n"
                           "Disallow: /secret\n"),
        # another bot's group only: nothing applies to us
        "127.0.0.66": text("User-agent: OtherBot\nDisallow: /\n"),
    }
    web = web_factory({h: site(r) for h, r in answers.items()})
    await crawl(web, list(answers), tmp_path)
    for host in answers:
        assert_robots_first(web, host)
    for host in ("127.0.0.61", "127.0.0.63", "127.0.0.64", "127.0.0.65"):
        assert set(paths(web, host)) == {ROBOTS, SITEMAP, "/", "/a"}, host
    for host in ("127.0.0.62", "127.0.0.66"):
        assert set(paths(web, host)) == {ROBOTS, SITEMAP, *CONTENT}, host


@pytest_twisted.ensureDeferred
async def test_a_group_whose_agent_list_names_us_stops_everything(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    # Before the fix the list was read as another bot's name and the whole
    # site was crawled under "*".
    answers = {
        "127.0.0.67": text("User-agent: PoliteCrawler, OtherBot\nDisallow: /\n\n"
                           "User-agent: *\nAllow: /\n"),
        "127.0.0.68": text("User-agent: *\nAllow: /\n\nUser-agent: OtherBot politecrawler\n"
                           "Disallow: /\n"),
        "127.0.0.69": text("User-agent: PoliteCrawler2\nDisallow: /\n"),
    }
    web = web_factory({h: site(r) for h, r in answers.items()})
    result = await crawl(web, list(answers), tmp_path)
    for host in answers:
        assert paths(web, host) == [ROBOTS], host
    assert result.stats["polite/robots/outcome/parse"] == 3
    assert not result.items


# ---------------------------------------------------------------------------
# Crawl-delay, the durable cache, refresh and outage with a cached copy


@pytest_twisted.ensureDeferred
async def test_crawl_delay_reaches_the_rest(web_factory: type[TestWeb], tmp_path: Path) -> None:
    host = "127.0.0.71"
    s = site(text("User-agent: *\nCrawl-delay: 0.6\n"))
    s.routes["/"] = page("home", "", ["/a", "/b", "/c"])
    s.routes["/b"] = page("b")
    s.routes["/c"] = page("c")
    web = web_factory({host: s})
    await crawl(web, [host], tmp_path)
    entries = web.entries(host)
    assert next(e.path for e in entries) == ROBOTS
    assert sorted(e.path for e in entries[1:]) == sorted([SITEMAP, "/", "/a", "/b", "/c"])
    content = entries[1:]
    gaps = [b.started - a.finished for a, b in itertools.pairwise(content)]
    assert min(gaps) >= 0.6 - 0.02, gaps  # not the 0.05 s base rest
    # ... and the Crawl-delay itself, not a multiple of it: the rests the crawler set (its
    # access log; the server's gaps add the reactor's lateness, which a busy machine
    # stretches). Five times a loopback answer stays far under it.
    lines = [r for r in read_access_log(next(tmp_path.glob("access-*.jsonl")))
             if not r.get("robots")]
    assert len(lines) == len(content)
    assert all(0.6 <= r["rest"] < 2 * 0.6 for r in lines), [r["rest"] for r in lines]


@pytest_twisted.ensureDeferred
async def test_crawl_delay_applies_right_after_robots_txt(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    host = "127.0.0.72"
    web = web_factory({host: site(text("User-agent: *\nCrawl-delay: 0.6\n"))})
    await crawl(web, [host], tmp_path)
    robots, first = web.entries(host)[:2]
    assert robots.path == ROBOTS
    assert first.started - robots.finished >= 0.6 - 0.02


def _seed(tmp_path: Path, origin: str, body: bytes, age: float) -> None:
    from scrapy.settings import Settings

    db = origins_db_path(Settings({"POLITE_STATE_DIR": str(tmp_path)}))
    book = RobotsBook(db, "PoliteCrawler", clock=lambda: time.time() - age, **ROBOTS_NUMBERS)
    book.record_answer(origin, 200, body)
    book.close()


@pytest_twisted.ensureDeferred
async def test_durable_cache_refresh_and_outage_with_a_copy(
    web_factory: type[TestWeb], tmp_path: Path
) -> None:
    fresh, stale, down = "127.0.0.81", "127.0.0.82", "127.0.0.83"
    web = web_factory({
        fresh: site(text("User-agent: *\nDisallow: /secret\n")),
        # the site added a Disallow since the cached copy was fetched
        stale: site(text("User-agent: *\nDisallow: /secret\n")),
        down: site(Resp(503, b"down")),
    })
    day = 24 * 3600
    allow_all = b"User-agent: *\nAllow: /\n"
    _seed(tmp_path, web.url(stale, "").rstrip("/"), allow_all, day + 60)
    _seed(tmp_path, web.url(down, "").rstrip("/"),
          b"User-agent: *\nDisallow: /secret\n", day + 60)
    first = await crawl(web, [fresh, stale, down], tmp_path)
    for host in (fresh, stale, down):
        assert_robots_first(web, host)
    assert set(paths(web, fresh)) == {ROBOTS, SITEMAP, "/", "/a"}
    # refetched: the new Disallow holds
    assert set(paths(web, stale)) == {ROBOTS, SITEMAP, "/", "/a"}
    # the old copy rules during the outage
    assert set(paths(web, down)) == {ROBOTS, SITEMAP, "/", "/a"}
    assert first.stats["polite/robots/outage_with_copy"] >= 1
    # A second run within the day: the cache survived, robots.txt is not fetched again.
    robots_before = len(web.entries(path=ROBOTS))
    web.log.clear()
    await crawl(web, [fresh], tmp_path, JOBDIR=str(tmp_path / "job2"))
    assert ROBOTS not in paths(web, fresh)
    assert len(web.entries(path=ROBOTS)) == 0 and robots_before >= 3


# ---------------------------------------------------------------------------
# Page-level rules and content signals


def _sitemap(*locs: str) -> bytes:
    urls = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return ('<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>").encode()


def html(title: str, links: list[tuple[str, str]] = (), head: str = "") -> bytes:  # type: ignore[assignment]
    anchors = "".join(f'<a href="{href}"{attrs}>{href}</a>' for href, attrs in links)
    return (f"<!doctype html><html><head><title>{title}</title>{head}</head>"
            f"<body><p>{title}</p>{anchors}</body></html>").encode()


class MarkedPage(PageRulesItem):
    """An author's item that asks for the page's rules (a dict would be left alone)."""

    url = scrapy.Field()
    title = scrapy.Field()


class EveryLinkSpider(scrapy.Spider):
    """A naive spider that follows every link: the page rules must hold it back."""

    name = "every_link"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [url]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield MarkedPage(url=response.url, title=response.css("title::text").get())
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href)


@pytest.mark.parametrize("spider", [SiteSpider, EveryLinkSpider])
@pytest_twisted.ensureDeferred
async def test_meta_and_header_rules(
    web_factory: type[TestWeb], tmp_path: Path, spider: type[scrapy.Spider]
) -> None:
    host = "127.0.0.91"
    routes: dict[str, Any] = {
        ROBOTS: text("User-agent: *\nAllow: /\n"),
        "/": html("home", [("/nf", ""), ("/ni", ""), ("/xr", ""), ("/xo", ""), ("/xn", ""),
                           ("/relnf", ' rel="nofollow"'), ("/both", ' rel="nofollow ugc"'),
                           ("/both", "")]),
        "/nf": html("nf", [("/nf-child", "")], '<meta name="robots" content="nofollow">'),
        "/ni": html("ni", [("/ni-child", "")], '<meta name="PoliteCrawler" content="noindex">'),
        "/xr": Resp(200, html("xr", [("/xr-child", "")]),
                    headers={"X-Robots-Tag": "PoliteCrawler: nofollow"}),
        "/xo": Resp(200, html("xo", [("/xo-child", "")]),
                    headers={"X-Robots-Tag": "otherbot: nofollow, noindex"}),
        "/xn": Resp(200, html("xn"), headers={"X-Robots-Tag": "noindex"}),
        # The site spider holds the links of / until this sitemap is read, and
        # releases them from its callback: the sitemap's own nofollow is not the
        # rule of the page they came from.
        SITEMAP: Resp(200, _sitemap("/"), content_type="application/xml",
                      headers={"X-Robots-Tag": "noindex, nofollow"}),
    }
    for p in ("/nf-child", "/ni-child", "/xr-child", "/xo-child", "/relnf", "/both"):
        routes[p] = html(p)
    web = web_factory({host: Site(routes)})
    result = await run_crawl(spider, _settings(tmp_path), url=web.url(host, "/"))
    assert_robots_first(web, host)
    got = set(paths(web, host))
    assert {"/ni-child", "/xo-child", "/both"} <= got
    assert not got & {"/nf-child", "/xr-child", "/relnf"}
    items = {i["url"].removeprefix(web.url(host, "/")[:-1]): i for i in result.items}
    for path in ("/ni", "/xn"):
        assert items[path]["polite_noindex"] is True
        assert "title" not in items[path]  # kept as a marker, its text held back
    for path in ("/", "/xo", "/ni-child"):
        assert items[path]["polite_noindex"] is False
        assert items[path]["title"]
    assert items["/nf"]["polite_nofollow"] is True
    assert items["/xr"]["polite_nofollow"] is True
    assert items["/xo"]["polite_nofollow"] is False
    stats = result.stats
    assert stats["polite/robots/page/nofollow"] == 2  # /nf and /xr; the sitemap is no page
    assert stats["polite/robots/page/noindex"] == 2
    if spider is EveryLinkSpider:
        # the page rules middleware drops what the naive spider yields
        assert stats["polite/robots/nofollow_dropped"] == 2
        assert stats["polite/robots/rel_nofollow_dropped"] == 1
    else:
        # the site spider reads the same rules and never yields those links
        assert stats["polite/discovery/rel_nofollow"] == 1
        assert SITEMAP in got
        assert stats.get("polite/robots/nofollow_dropped", 0) == 0


@pytest_twisted.ensureDeferred
async def test_content_signals_both_forms(web_factory: type[TestWeb], tmp_path: Path) -> None:
    host = "127.0.0.92"
    routes: dict[str, Any] = {
        ROBOTS: text("User-agent: *\nContent-Signal: search=yes, ai-input=no\n"
                     "Content-Usage: /open/ ai-use=y\nAllow: /\n"),
        "/": html("home", [("/open/p", ""), ("/hdr", ""), ("/cf", "")]),
        "/open/p": html("open"),
        "/hdr": Resp(200, html("hdr"), headers={"Content-Usage": "train-ai=n"}),
        "/cf": Resp(200, html("cf"), headers={"Content-Signal": "ai-train=no, search=no"}),
    }
    web = web_factory({host: Site(routes)})
    result = await crawl(web, [host], tmp_path)
    items = {i["url"].removeprefix(web.url(host, "/")[:-1]): i for i in result.items}
    assert items["/"]["polite_signals"] == {"search": True, "ai_input": False, "ai_train": None}
    assert items["/"]["polite_ai_input"] is False
    assert items["/"]["title"] == "home"  # kept, only held back from AI-input exports
    assert items["/open/p"]["polite_signals"] == {"search": True, "ai_input": True,
                                                  "ai_train": None}
    assert items["/open/p"]["polite_ai_input"] is True
    assert items["/hdr"]["polite_signals"] == {"search": True, "ai_input": False,
                                               "ai_train": False}
    assert items["/cf"]["polite_signals"] == {"search": False, "ai_input": False,
                                              "ai_train": False}
    assert result.stats["polite/robots/page/ai_input_refused"] == 3
