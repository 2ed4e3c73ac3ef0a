"""What the server says goes: real crawls with the add-on against the test web,
asserting from the server's own request log."""

from __future__ import annotations

import email.utils
import itertools
import random
import time
import zlib
from typing import Any

import pytest_twisted

from demo.web.server import LogEntry, Req, Resp, Site, TestWeb, page
from polite_crawler.extensions.accesslog import read_access_log
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.fetch import fetch
from tests.test_accesslog import assert_agrees

ROBOTS = "User-agent: *\nAllow: /\n"
SCALE = 0.05  # POLITE_TEST_WAIT_SCALE: Retry-After: 7 -> 0.35 s on loopback
MB = 1024 * 1024


def _settings(tmp_path: Any, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "POLITE_STATE_DIR": str(tmp_path),
        "POLITE_TEST_WAIT_SCALE": SCALE,
        "POLITE_CHECKPOINT_INTERVAL": 0.5,
    }
    base.update(extra)
    return base


def _content(web: TestWeb, host: str) -> list[LogEntry]:
    return [e for e in web.entries(host) if e.path != "/robots.txt"]


def _gaps(entries: list[LogEntry]) -> list[float]:
    return [b.started - a.finished for a, b in itertools.pairwise(entries)]


class _Once:
    """Answers ``first`` on the first request of a path, 200 after."""

    def __init__(self, first: Resp) -> None:
        self.first = first
        self.seen: set[str] = set()

    def __call__(self, req: Req) -> Resp:
        if req.path in self.seen:
            return Resp(200, page(req.path))
        self.seen.add(req.path)
        return self.first


def _site(default: Any, **routes: Any) -> Site:
    """Every path answered by ``default`` (a Resp or a handler), robots.txt allowing all."""

    class _S(Site):
        def handle(self, req: Req) -> Resp:
            if req.path == "/robots.txt":
                return Resp(200, ROBOTS.encode(), content_type="text/plain")
            if req.path in routes:
                route = routes[req.path]
                return route(req) if callable(route) else route
            return default(req) if callable(default) else default

    return _S()


@pytest_twisted.ensureDeferred
async def test_429_retry_after_seconds(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(_Once(Resp(429, b"slow down",
                                                      headers={"Retry-After": "7"})))})
    urls = [web.url("127.0.0.1", p) for p in ("/a", "/b")]
    result = await fetch(urls, _settings(tmp_path))
    entries = _content(web, "127.0.0.1")
    statuses = [e.status for e in entries]
    assert statuses.count(429) == 2 and statuses.count(200) == 2  # each retried once, then 200
    for a, b in itertools.pairwise(entries):
        if a.status == 429:
            assert b.started - a.finished >= 7 * SCALE, (a.path, b.path)
    assert {i["url"] for i in result.items} == set(urls)
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    limited = [x for x in lines if x["status"] == 429]
    assert len(limited) == 2
    assert all(x["verdict"] == "retry_later:429" and x["rest"] >= 7 * SCALE - 1e-6 for x in limited)


@pytest_twisted.ensureDeferred
async def test_503_retry_after_http_date(web_factory, tmp_path) -> None:
    sent: list[float] = []

    def unavailable(req: Req) -> Resp:
        if sent:
            return Resp(200, page("back"))
        when = time.time() + 20  # 20 s ahead: 1 s at SCALE
        sent.append(float(int(when)))  # an HTTP-date has whole seconds
        return Resp(503, b"maintenance",
                    headers={"Retry-After": email.utils.formatdate(when, usegmt=True)})

    web = web_factory({"127.0.0.1": _site(unavailable)})
    await fetch([web.url("127.0.0.1", "/")], _settings(tmp_path))
    first, second = _content(web, "127.0.0.1")
    assert first.status == 503 and second.status == 200
    # The wait the date asked for, from the moment the answer came, scaled.
    assert second.started - first.finished >= (sent[0] - first.finished) * SCALE - 0.01
    assert second.started - first.finished >= 0.9


@pytest_twisted.ensureDeferred
async def test_backoff_grows_without_retry_after(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(Resp(503, b"busy"))})
    result = await fetch([web.url("127.0.0.1", "/")],
                         _settings(tmp_path, POLITE_RETRY_TIMES=3))
    entries = _content(web, "127.0.0.1")
    assert len(entries) == 4  # the request and its three retries, then given up
    gaps = _gaps(entries)
    # Backoff base 4 s x SCALE: [0.2, 0.4), [0.4, 0.8), [0.8, 1.6)
    assert gaps[0] >= 4 * SCALE
    for a, b in itertools.pairwise(gaps):
        assert b >= a - 0.02, gaps
    assert gaps[-1] >= 2 * gaps[0] - 0.02, gaps
    assert result.stats.get("polite/gate/retry/exhausted") == 1


@pytest_twisted.ensureDeferred
async def test_nothing_after_a_refusal(web_factory, tmp_path, caplog) -> None:
    challenge = (b"<html><head><title>Just a moment...</title></head><body>"
                 b"<script>window._cf_chl_opt={cType:'managed'};</script></body></html>")
    web = web_factory({
        "127.0.0.1": _site(Resp(403, b"forbidden")),
        "127.0.0.2": _site(Resp(402, b"pay")),
        "127.0.0.3": _site(Resp(200, challenge)),  # a challenge with a 200
        "127.0.0.4": _site(Resp(503, b"", headers={"cf-mitigated": "challenge"})),
        "127.0.0.5": _site(Resp(200, page("fine"))),
    })
    hosts = [f"127.0.0.{i}" for i in range(1, 6)]
    urls = [web.url(h, f"/p{n}") for n in range(4) for h in hosts]
    result = await fetch(urls, _settings(tmp_path))
    for host in hosts[:4]:
        entries = web.entries(host)
        assert [e.path for e in entries] == ["/robots.txt", "/p0"], host
    assert len(_content(web, "127.0.0.5")) == 4
    assert {i["url"] for i in result.items if "status" in i} == \
        {web.url("127.0.0.5", f"/p{n}") for n in range(4)}
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    verdicts = {x["url"]: x["verdict"] for x in lines if not x["robots"]}
    assert verdicts[web.url("127.0.0.1", "/p0")] == "stop_origin:403"
    assert verdicts[web.url("127.0.0.2", "/p0")] == "stop_origin:402"
    assert verdicts[web.url("127.0.0.3", "/p0")] == "stop_origin:challenge:cloudflare"
    assert verdicts[web.url("127.0.0.4", "/p0")] == "stop_origin:challenge:cloudflare"
    # A site owner's reason, at WARNING, once per stopped origin.
    warnings = [r.getMessage() for r in caplog.records
                if r.levelname == "WARNING" and r.name == "polite_crawler.middlewares.gate"]
    for host, why in (("127.0.0.1", "403 Forbidden"), ("127.0.0.2", "402 Payment"),
                      ("127.0.0.3", "challenge page (cloudflare)"),
                      ("127.0.0.4", "challenge page (cloudflare)")):
        assert [w for w in warnings if host in w and why in w], (host, warnings)


@pytest_twisted.ensureDeferred
async def test_stats_per_reason(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(Resp(200, page("fine")),
                                          **{"/missing": Resp(404, b"nope")}),
                       "127.0.0.2": _site(Resp(403, b"no"))})
    result = await fetch([web.url("127.0.0.1", "/"), web.url("127.0.0.1", "/missing"),
                          web.url("127.0.0.2", "/")], _settings(tmp_path))
    assert result.stats.get("polite/verdicts/200") == 3  # two robots.txt and /
    assert result.stats.get("polite/verdicts/404") == 1
    assert result.stats.get("polite/verdicts/403") == 1


@pytest_twisted.ensureDeferred
async def test_breaker_after_five_500s(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(Resp(500, b"broken")),
                       "127.0.0.2": _site(Resp(200, page("fine")))})
    urls = [web.url(h, f"/p{n}") for n in range(6) for h in ("127.0.0.1", "127.0.0.2")]
    await fetch(urls, _settings(tmp_path, POLITE_BACKOFF_BASE=0.5))
    assert [e.status for e in _content(web, "127.0.0.1")] == [500] * 5
    assert len(_content(web, "127.0.0.2")) == 6


@pytest_twisted.ensureDeferred
async def test_breaker_after_five_resets(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(Resp(reset=True))})
    urls = [web.url("127.0.0.1", f"/p{n}") for n in range(6)]
    await fetch(urls, _settings(tmp_path, POLITE_BACKOFF_BASE=0.5))
    entries = _content(web, "127.0.0.1")
    assert len(entries) == 5, [e.path for e in entries]
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    assert_agrees(lines, web)


@pytest_twisted.ensureDeferred
async def test_success_resets_the_streak(web_factory, tmp_path) -> None:
    # 500 on every other request: never five in a row, so nothing is stopped.
    count = itertools.count()

    def flaky(req: Req) -> Resp:
        return Resp(500, b"x") if next(count) % 2 == 0 else Resp(200, page("ok"))

    web = web_factory({"127.0.0.1": _site(flaky)})
    urls = [web.url("127.0.0.1", f"/p{n}") for n in range(6)]
    result = await fetch(urls, _settings(tmp_path, POLITE_BACKOFF_BASE=0.5))
    assert len([i for i in result.items if i.get("status") == 200]) == 6
    assert [e.status for e in _content(web, "127.0.0.1")].count(500) == 6


@pytest_twisted.ensureDeferred
async def test_404_requested_once_408_retried(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(
        Resp(200, page("fine")),
        **{"/missing": Resp(404, b"nope"), "/gone": Resp(410, b"gone"),
           "/slow": _Once(Resp(408, b"timeout"))},
    )})
    urls = [web.url("127.0.0.1", p) for p in ("/missing", "/gone", "/slow", "/ok")]
    await fetch(urls, _settings(tmp_path))
    paths = [e.path for e in _content(web, "127.0.0.1")]
    assert paths.count("/missing") == 1
    assert paths.count("/gone") == 1
    assert paths.count("/slow") == 2
    assert paths.count("/ok") == 1


@pytest_twisted.ensureDeferred
async def test_long_retry_after_parks_the_origin(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(Resp(429, b"", headers={"Retry-After": "172800"}))})
    started = time.monotonic()
    await fetch([web.url("127.0.0.1", f"/p{n}") for n in range(3)], _settings(tmp_path))
    assert time.monotonic() - started < 20  # the crawl ends; it does not wait two days
    assert len(_content(web, "127.0.0.1")) == 1


def _bomb(inflated: int) -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * MB
    return b"".join(z.compress(block) for _ in range(inflated // MB)) + z.flush()


@pytest_twisted.ensureDeferred
async def test_big_body_and_gzip_bomb_cut_at_cap(web_factory, tmp_path) -> None:
    def fifty_mb(_req: Req) -> Resp:
        chunk = b"z" * (64 * 1024)
        return Resp(200, (chunk for _ in range(50 * 16)), content_type="text/plain")

    bomb = _bomb(100 * MB)
    web = web_factory({"127.0.0.1": _site(
        Resp(200, page("fine")),
        **{"/big": fifty_mb,
           "/bomb": Resp(200, bomb, headers={"Content-Encoding": "gzip"},
                         content_type="text/plain")},
    )})
    result = await fetch([web.url("127.0.0.1", p) for p in ("/big", "/bomb", "/ok")],
                         _settings(tmp_path, POLITE_MAX_BYTES=MB))
    items = {i["url"].rsplit("/", 1)[1]: i for i in result.items}
    assert len(items["big"]["body"]) == MB and items["big"]["truncated"] == "wire"
    assert items["bomb"]["body"] == b"\0" * MB and items["bomb"]["truncated"] == "decoded"
    assert items["ok"]["truncated"] is None
    assert result.stats["polite/sizecap/cut"] == 2
    big = web.entries("127.0.0.1", "/big")
    assert len(big) == 1 and big[0].bytes_sent < 20 * MB
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    (big_line,) = [x for x in lines if x["url"].endswith("/big")]
    assert big_line["cut"] is True and MB <= big_line["bytes"] < 20 * MB


@pytest_twisted.ensureDeferred
async def test_access_log_agrees_with_server(web_factory, tmp_path) -> None:
    web = web_factory({
        "127.0.0.1": _site(Resp(200, page("fine", "x" * 300)),
                           **{"/missing": Resp(404, b"nope"),
                              "/limited": _Once(Resp(429, b"", headers={"Retry-After": "1"})),
                              "/chunked": Resp(200, (b"c%d" % i for i in range(20)))}),
        "127.0.0.2": _site(Resp(403, b"no")),
        "127.0.0.3": _site(Resp(500, b"err")),
    })
    urls = [web.url("127.0.0.1", p) for p in ("/", "/missing", "/limited", "/chunked")]
    urls += [web.url("127.0.0.2", "/x"), web.url("127.0.0.3", "/y")]
    await fetch(urls, _settings(tmp_path, POLITE_BACKOFF_BASE=0.5))
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    assert_agrees(lines, web)
    assert sum(1 for x in lines if x["robots"]) == 3
    assert all(x["verdict"] for x in lines)
    assert all(x["rest"] is not None and x["rest"] > 0 for x in lines)


@pytest_twisted.ensureDeferred
async def test_challenge_on_robots_txt_stops(web_factory, tmp_path) -> None:
    class _Challenged(Site):
        def handle(self, req: Req) -> Resp:
            return Resp(403, b"<title>Just a moment...</title>",
                        headers={"cf-mitigated": "challenge"})

    web = web_factory({"127.0.0.1": _Challenged()})
    await fetch([web.url("127.0.0.1", f"/p{n}") for n in range(3)], _settings(tmp_path))
    assert [e.path for e in web.entries("127.0.0.1")] == ["/robots.txt"]


def late_challenge(style_bytes: int = 10_000) -> bytes:
    """A 200 challenge page whose markers come after ``style_bytes`` of inline style:
    the title "Just a moment...", a challenge form and ``cf-chl`` markers, no header.
    The style rules are pseudo-random, so gzip does not bring the markers forward."""
    rnd = random.Random(24)
    rules: list[bytes] = []
    while sum(map(len, rules)) < style_bytes:
        rules.append(b".c%x{color:#%06x;margin:%dpx %dpx}" % (
            rnd.getrandbits(48), rnd.getrandbits(24), rnd.randrange(99), rnd.randrange(99)))
    return (b"<!DOCTYPE html><html lang=\"en-US\"><head><meta charset=\"utf-8\"><style>"
            + b"".join(rules) + b"</style><title>Just a moment...</title></head><body>"
            b"<form id=\"challenge-form\" action=\"/p0?__cf_chl_f_tk=3d1b2e\" method=\"POST\">"
            b"<input type=\"hidden\" name=\"md\" value=\"x\"></form>"
            b"<script>window._cf_chl_opt={cvId:'3',cType:'managed'};</script>"
            b"<a href=\"/p1\">p1</a><a href=\"/p2\">p2</a></body></html>")


@pytest_twisted.ensureDeferred
async def test_issue24_challenge_markers_after_the_first_4_kib_stop_the_origin(
        web_factory, tmp_path) -> None:
    # Failed before the fix: the gate handed the verdict the body's first 4096 bytes, so
    # a challenge after 10 KB of style was answered with more requests, page after page.
    late = late_challenge()
    assert late.index(b"Just a moment") > 10_000
    zipped = late_challenge(24_000)
    assert len(zlib.compress(zipped)) > 2 * 4096  # compressed too, the markers come late
    latest = late_challenge(30_000)  # markers near the end of the 32 KiB searched

    class _RobotsChallenged(Site):
        def handle(self, req: Req) -> Resp:
            return Resp(200, late, gzip_ok=False)

    hosts = {
        "127.0.0.31": _site(Resp(200, late, gzip_ok=False)),
        "127.0.0.32": _site(Resp(200, zipped)),  # gzip on the wire: the gate decodes it
        "127.0.0.33": _site(Resp(200, latest, gzip_ok=False)),
        "127.0.0.34": _RobotsChallenged(),  # robots.txt itself is the challenge
        "127.0.0.35": _site(Resp(200, page("fine"))),
    }
    web = web_factory(hosts)
    urls = [web.url(h, f"/p{n}") for n in range(4) for h in hosts]
    result = await fetch(urls, _settings(tmp_path))
    for host in ("127.0.0.31", "127.0.0.32", "127.0.0.33"):
        assert [e.path for e in web.entries(host)] == ["/robots.txt", "/p0"], host
    assert [e.status for e in web.entries("127.0.0.32", "/p0")] == [200]
    assert web.entries("127.0.0.32", "/p0")[0].bytes_sent < len(zipped)  # it was gzipped
    assert [e.path for e in web.entries("127.0.0.34")] == ["/robots.txt"]
    assert len(_content(web, "127.0.0.35")) == 4
    assert result.stats["polite/verdicts/challenge:cloudflare"] == 4
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    verdicts = {x["url"]: x["verdict"] for x in lines}
    for host in ("127.0.0.31", "127.0.0.32", "127.0.0.33"):
        assert verdicts[web.url(host, "/p0")] == "stop_origin:challenge:cloudflare"
    # A sitemap answered with the challenge (the site spider asks for it beside the start
    # page): nothing after it.
    host = "127.0.0.36"
    web = web_factory({host: Site({
        "/robots.txt": Resp(200, b"User-agent: *\nAllow: /\nSitemap: /sm.xml\n",
                            content_type="text/plain"),
        "/sm.xml": Resp(200, late, gzip_ok=False),
        "/": page("home", "welcome", ["/a"]), "/a": page("a", "a page")})})
    await run_crawl(SiteSpider, _settings(tmp_path / "site"), url=web.url(host))
    assert [e.path for e in web.entries(host)] == ["/robots.txt", "/", "/sm.xml"]


# --- a failure that is a property of the answer ----------------------------------------

_FAT_HEAD = b"HTTP/1.1 200 OK\r\n" + b"".join(
    b"X-Filler-%d: %s\r\n" % (i, b"y" * 100) for i in range(800)) + b"Content-Length: 2\r\n\r\nok"


@pytest_twisted.ensureDeferred
async def test_issue15_oversized_head_is_not_retried(web_factory, tmp_path) -> None:
    # Failed before the fix: the URL was asked for four times (three retries).
    web = web_factory({"127.0.0.1": _site(Resp(200, page("fine")),
                                          **{"/fat": Resp(raw=_FAT_HEAD)})})
    result = await fetch([web.url("127.0.0.1", "/fat")],
                         _settings(tmp_path, POLITE_MAX_HEADER_BYTES=16 * 1024))
    assert [e.path for e in _content(web, "127.0.0.1")] == ["/fat"]  # one request only
    assert result.stats.get("polite/verdicts/error:head_too_large") == 1
    assert not result.stats.get("polite/gate/retry/count")
    lines = read_access_log(next(tmp_path.glob("access-*.jsonl")))
    assert [x["verdict"] for x in lines if not x["robots"]] == ["give_up:error:head_too_large"]


@pytest_twisted.ensureDeferred
async def test_issue15_unusable_answers_count_toward_the_breaker(web_factory, tmp_path) -> None:
    # Five answers with an oversized head, or a status line that does not parse,
    # stop the origin; each URL is asked for once.
    web = web_factory({
        "127.0.0.1": _site(Resp(raw=_FAT_HEAD)),
        "127.0.0.2": _site(Resp(raw=b"HTTP/1.1 two-hundred OK\r\nContent-Length: 2\r\n\r\nok")),
        "127.0.0.3": _site(Resp(200, page("fine"))),
    })
    hosts = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
    urls = [web.url(h, f"/p{n}") for n in range(7) for h in hosts]
    result = await fetch(urls, _settings(tmp_path, POLITE_MAX_HEADER_BYTES=16 * 1024,
                                         POLITE_BACKOFF_BASE=0.5))
    for host in hosts[:2]:
        paths = [e.path for e in _content(web, host)]
        assert len(paths) == 5 and len(set(paths)) == 5, (host, paths)
    assert len(_content(web, "127.0.0.3")) == 7
    assert result.stats.get("polite/verdicts/error:malformed") == 5
    assert not result.stats.get("polite/gate/retry/count")
