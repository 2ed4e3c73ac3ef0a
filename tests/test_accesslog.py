"""The access log: one JSON line per exchange, agreeing with the server's own log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest_twisted
from scrapy.exceptions import IgnoreRequest

from demo.web.server import Resp, Site, TestWeb, page
from polite_crawler.context import polite_context
from polite_crawler.extensions.accesslog import FIELDS, AccessLog, read_access_log
from tests.fetch import fetch, plain_settings

if TYPE_CHECKING:
    from pathlib import Path

SLACK = 0.5  # seconds: client and server stamp the same clock from different threads


def _site() -> Site:
    return Site({
        "/": page("Home", "x" * 500),
        "/a": page("A"),
        "/gone": Resp(404, b"<html>gone</html>"),
        "/oops": Resp(500, b"<html>oops</html>"),
        "/reset": Resp(reset=True),
        "/chunks": Resp(200, (b"chunk%d " % i for i in range(50)), content_type="text/plain"),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    })


def _only_log(tmp_path: Path) -> Path:
    logs = sorted(tmp_path.glob("access-*.jsonl"))
    assert len(logs) == 1, logs
    return logs[0]


def assert_agrees(lines: list[dict[str, Any]], web: TestWeb) -> None:
    """Line for line, the access log says what the server saw."""
    entries = web.entries()
    assert len(lines) == len(entries)
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for line in sorted(lines, key=lambda x: x["sent"]):
        path = line["url"].split(str(web.port), 1)[1]
        by_key.setdefault((line["origin"], path), []).append(line)
    for e in entries:
        line = by_key[(e.origin, e.path)].pop(0)
        assert line["method"] == e.method
        assert line["status"] == (e.status if e.status > 0 else None)
        if e.status > 0:
            assert line["bytes"] == e.bytes_sent, e.path
        assert line["sent"] <= e.started + SLACK
        assert line["done"] >= e.finished - SLACK
        assert line["duration"] == round(line["done"] - line["sent"], 6) or \
            abs(line["duration"] - (line["done"] - line["sent"])) < 1e-5
    assert all(not v for v in by_key.values())


@pytest_twisted.ensureDeferred
async def test_every_exchange_one_line(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site(), "127.0.0.2": _site()})
    urls = [web.url(h, p) for h in ("127.0.0.1", "127.0.0.2")
            for p in ("/", "/a", "/gone", "/oops", "/chunks")]
    result = await fetch(urls, plain_settings(str(tmp_path)))
    lines = read_access_log(_only_log(tmp_path))
    assert len(lines) == 10
    for line in lines:
        assert list(line)[: len(FIELDS)] == list(FIELDS)
        assert line["robots"] is False
        assert line["origin"] == line["url"].rsplit("/", 1)[0]
    assert_agrees(lines, web)
    assert result.stats["polite/accesslog/lines"] == 10


@pytest_twisted.ensureDeferred
async def test_failed_exchange_logged_without_status(web_factory, tmp_path) -> None:
    # One request per host on a fresh connection: Twisted's pool re-sends a request
    # that failed on a *reused* connection by itself (see the crawl tests).
    web = web_factory({"127.0.0.1": _site(), "127.0.0.2": _site()})
    await fetch([web.url(h, "/reset") for h in ("127.0.0.1", "127.0.0.2")],
                plain_settings(str(tmp_path)))
    lines = read_access_log(_only_log(tmp_path))
    assert len(lines) == 2
    assert all(x["status"] is None and x["bytes"] == 0 for x in lines)
    assert_agrees(lines, web)


@pytest_twisted.ensureDeferred
async def test_robots_flag_and_explicit_path(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site()})
    path = tmp_path / "logs" / "my.jsonl"
    await fetch([web.url("127.0.0.1", "/robots.txt")],
                plain_settings(str(tmp_path), POLITE_ACCESS_LOG=str(path)),
                meta={"polite_robots": True})
    (line,) = read_access_log(path)
    assert line["robots"] is True
    assert line["status"] == 200
    assert not list(tmp_path.glob("access-*.jsonl"))


class _Refuser:
    """Plays the address guard: refuses /a before it is sent, and logs it."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> _Refuser:
        return cls(crawler)

    def process_request(self, request: Any) -> None:
        if request.url.endswith("/a"):
            polite_context(self.crawler).access_log.record(request=request,
                                                           verdict="refused:test")
            raise IgnoreRequest("refused")


class _GateLike:
    """Plays the gate: leaves its verdict and rest on meta (or calls record)."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Any) -> _GateLike:
        return cls(crawler)

    def process_response(self, request: Any, response: Any) -> Any:
        if request.url.endswith("/chunks"):
            polite_context(self.crawler).access_log.record(request=request,
                                                           verdict="ok:explicit", rest=1.5)
        else:
            request.meta.update(polite_end=1.0 + len(request.url),
                                polite_verdict=f"ok:{response.status}", polite_rest=0.25)
        return response


@pytest_twisted.ensureDeferred
async def test_refused_and_gate_fields(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _site()})
    mws = {
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
        "polite_crawler.middlewares.sizecap.SizeCapMiddleware": 590,
        f"{__name__}._Refuser": 50,
        f"{__name__}._GateLike": 990,
    }
    await fetch([web.url("127.0.0.1", p) for p in ("/", "/a", "/gone", "/chunks")],
                plain_settings(str(tmp_path), DOWNLOADER_MIDDLEWARES=mws))
    lines = {x["url"].rsplit("/", 1)[1]: x for x in read_access_log(_only_log(tmp_path))}
    assert len(lines) == 4
    refused = lines["a"]
    assert refused["sent"] is None and refused["status"] is None
    assert refused["verdict"] == "refused:test"
    assert lines[""]["verdict"] == "ok:200" and lines[""]["rest"] == 0.25
    assert lines["gone"]["verdict"] == "ok:404"
    assert lines["chunks"]["verdict"] == "ok:explicit" and lines["chunks"]["rest"] == 1.5
    assert [e.path for e in web.entries()] != []
    assert "/a" not in {e.path for e in web.entries()}


def test_stale_gate_fields_are_not_reused() -> None:
    # A retry copy carries the previous attempt's verdict until the gate settles it again.
    from scrapy import Request
    from scrapy.utils.test import get_crawler

    from tests.fetch import FetchSpider

    crawler = get_crawler(FetchSpider, plain_settings("/tmp"))
    crawler._apply_settings()
    times = iter([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    log = AccessLog(crawler, clock=lambda: next(times))
    written: list[dict[str, Any]] = []
    log._write = written.append  # type: ignore[method-assign]
    req = Request("http://127.0.0.1/x", meta={"polite_end": 5.0, "polite_verdict": "old"})
    log.request_reached_downloader(req)
    log.request_left_downloader(req)
    assert written == []  # the meta is the previous attempt's
    req.meta.update(polite_end=11.5, polite_verdict="retry_later:503", polite_rest=2.0)
    log._flush_settled()
    (line,) = written
    assert line["verdict"] == "retry_later:503"
    assert line["sent"] == 10.0 and line["done"] == 11.0 and line["duration"] == 1.0


def _log_on(path: Path, max_bytes: int) -> AccessLog:
    from scrapy.utils.test import get_crawler

    from tests.fetch import FetchSpider

    crawler = get_crawler(FetchSpider, plain_settings(str(path.parent), POLITE_ACCESS_LOG=str(path),
                                                      POLITE_ACCESS_LOG_MAX_BYTES=max_bytes))
    crawler._apply_settings()
    return AccessLog(crawler, clock=lambda: 1000.0)


def test_appending_to_an_existing_log_keeps_every_part_under_its_cap(tmp_path: Path) -> None:
    from polite_crawler.extensions.accesslog import rotated_path

    path = tmp_path / "access-fixed.jsonl"
    cap = 600
    for crawl in range(3):  # three crawls append to one POLITE_ACCESS_LOG
        log = _log_on(path, cap)
        for i in range(7):
            log.record(verdict=f"refused:test-{crawl}-{i}", url=f"http://127.0.0.1/{i}")
        log._file.close()  # type: ignore[union-attr]
    parts = [path, *(rotated_path(path, n) for n in range(2, 20))]
    parts = [p for p in parts if p.exists()]
    sizes = [p.stat().st_size for p in parts]
    assert len(parts) >= 3, sizes
    assert all(size <= cap for size in sizes), sizes
    lines = [line for p in parts for line in read_access_log(p)]
    assert [x["verdict"] for x in lines] == [f"refused:test-{c}-{i}" for c in range(3)
                                             for i in range(7)]


def test_a_part_left_full_by_an_earlier_crawl_is_passed_over(tmp_path: Path) -> None:
    from polite_crawler.extensions.accesslog import rotated_path

    path = tmp_path / "access-fixed.jsonl"
    path.write_text('{"verdict":"earlier"}\n' * 30)  # 660 bytes: over the cap already
    log = _log_on(path, 600)
    log.record(verdict="refused:test", url="http://127.0.0.1/")
    log._file.close()  # type: ignore[union-attr]
    assert path.stat().st_size == 660  # not written to
    assert [x["verdict"] for x in read_access_log(rotated_path(path, 2))] == ["refused:test"]
