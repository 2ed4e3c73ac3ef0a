"""RobotsTxtMiddleware and PageRulesMiddleware on their own, with real Requests and Responses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
import scrapy
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler

from polite_crawler.context import polite_context
from polite_crawler.items import PageRulesItem
from polite_crawler.middlewares.pagerules import PageRulesMiddleware
from polite_crawler.middlewares.robotstxt import HOPS_KEY, RobotsTxtMiddleware

if TYPE_CHECKING:
    from pathlib import Path

ORIGIN = "http://127.0.0.5:8000"


def robots_request(url: str = ORIGIN + "/robots.txt", **meta: object) -> Request:
    return Request(url, meta={"polite_robots": True, "polite_robots_origin": ORIGIN, **meta})


@pytest.fixture
def mw(tmp_path: Path) -> RobotsTxtMiddleware:
    crawler = get_crawler(settings_dict={"POLITE_STATE_DIR": str(tmp_path)})
    crawler.stats.open_spider()  # type: ignore[union-attr]
    return RobotsTxtMiddleware(crawler)


def stat(mw: RobotsTxtMiddleware, key: str) -> int:
    return int(mw.crawler.stats.get_value(key, 0))  # type: ignore[union-attr]


def test_the_book_is_shared_through_the_context(mw: RobotsTxtMiddleware) -> None:
    assert polite_context(mw.crawler).robots is mw.book


def test_answer_is_recorded_and_never_reaches_the_spider(mw: RobotsTxtMiddleware) -> None:
    request = robots_request()
    assert mw.process_request(request) is None
    assert request.meta["dont_redirect"] is True
    body = b"User-agent: *\nDisallow: /private\n"
    with pytest.raises(IgnoreRequest):
        mw.process_response(request, Response(request.url, status=200, body=body))
    assert mw.book.ready(ORIGIN)
    assert not mw.book.allowed(ORIGIN + "/private/x")
    assert stat(mw, "polite/robots/outcome/parse") == 1


def test_error_page_is_an_outage_not_a_file(mw: RobotsTxtMiddleware) -> None:
    request = robots_request()
    with pytest.raises(IgnoreRequest):
        mw.process_response(request, Response(request.url, status=500, body=b"User-agent: *\n"))
    assert not mw.book.ready(ORIGIN)
    assert stat(mw, "polite/robots/outage_without_copy") == 1


def test_network_error_is_an_outage(mw: RobotsTxtMiddleware) -> None:
    with pytest.raises(IgnoreRequest):
        mw.process_exception(robots_request(), ConnectionRefusedError())
    assert mw.book.state(ORIGIN).failures == 1
    assert stat(mw, "polite/robots/error/refused") == 1
    # exceptions of other requests are not the middleware's business
    assert mw.process_exception(Request(ORIGIN + "/a"), ConnectionRefusedError()) is None


def test_redirect_hops_are_followed_up_to_five(mw: RobotsTxtMiddleware) -> None:
    request = robots_request()
    for hop in range(1, 6):
        target = f"/r{hop}"
        answer = Response(request.url, status=301, headers={"Location": target})
        nxt = mw.process_response(request, answer)
        assert isinstance(nxt, Request)
        assert nxt.url == ORIGIN + target
        assert nxt.meta[HOPS_KEY] == hop
        assert nxt.meta["polite_robots_origin"] == ORIGIN
        assert not mw.book.needs_fetch(ORIGIN)  # the hop is on its way
        request = nxt
    with pytest.raises(IgnoreRequest):
        mw.process_response(request, Response(request.url, status=302, headers={"Location": "/r6"}))
    # the sixth hop is not followed: the file is unavailable, i.e. no restrictions
    assert mw.book.state(ORIGIN).failures == 0
    assert mw.book.ready(ORIGIN) and not mw.book.needs_fetch(ORIGIN)
    assert mw.book.allowed(ORIGIN + "/anything")
    assert stat(mw, "polite/robots/too_many_redirects") == 1


def test_redirect_to_a_non_http_url_is_an_outage(mw: RobotsTxtMiddleware) -> None:
    request = robots_request()
    answer = Response(request.url, status=302, headers={"Location": "ftp://example.org/robots.txt"})
    with pytest.raises(IgnoreRequest):
        mw.process_response(request, answer)
    assert mw.book.state(ORIGIN).failures == 1


def test_a_cut_body_loses_its_last_line(mw: RobotsTxtMiddleware) -> None:
    request = robots_request()
    body = b"User-agent: *\nDisallow: /private\nAllow: /privatefolder/abc"
    with pytest.raises(IgnoreRequest):
        mw.process_response(request, Response(request.url, body=body, flags=["polite_truncated"]))
    assert not mw.book.allowed(ORIGIN + "/privatefolder/a")


def test_defence_in_depth(mw: RobotsTxtMiddleware) -> None:
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request(ORIGIN + "/page"))  # robots.txt not known yet
    assert stat(mw, "polite/robots/refused_not_ready") == 1
    mw.book.record_answer(ORIGIN, 200, b"User-agent: *\nDisallow: /private\n")
    assert mw.process_request(Request(ORIGIN + "/page")) is None
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request(ORIGIN + "/private"))
    assert stat(mw, "polite/robots/refused") == 1


def test_page_rules_on_meta_and_items(tmp_path: Path) -> None:
    crawler = get_crawler(settings_dict={"POLITE_STATE_DIR": str(tmp_path)})
    crawler.stats.open_spider()  # type: ignore[union-attr]
    robots = RobotsTxtMiddleware(crawler)
    robots.book.record_answer(ORIGIN, 200, b"User-agent: *\nContent-Signal: ai-input=no\n")
    mw = PageRulesMiddleware(crawler)
    body = (b'<html><head><meta name="robots" content="noindex"></head><body>'
            b'<a href="/x" rel="nofollow">x</a><a href="/y">y</a></body></html>')
    response = HtmlResponse(ORIGIN + "/p", body=body, request=Request(ORIGIN + "/p"))
    mw.process_spider_input(response)
    assert response.meta["polite_noindex"] is True
    assert response.meta["polite_nofollow"] is False
    assert response.meta["polite_ai_input"] is False
    class Marked(PageRulesItem):
        url = scrapy.Field()
        title = scrapy.Field()
        text = scrapy.Field()

    class Own(scrapy.Item):
        url = scrapy.Field()
        text = scrapy.Field()

    out = list(mw.process_spider_output(response, [
        {"url": response.url, "title": "p", "text": "words"},
        Marked(url=response.url, title="p", text="words"),
        Own(url=response.url, text="words"),
        Request(ORIGIN + "/x"),
        Request(ORIGIN + "/y"),
        Request(ORIGIN + "/x", meta={"polite_link": False}),
    ]))
    # The author's items leave as they were yielded: a dict, an Item of their own.
    assert out[0] == {"url": response.url, "title": "p", "text": "words"}
    assert dict(out[2]) == {"url": response.url, "text": "words"}
    # An item that asks for the page's rules gets them (and a noindex page's text goes).
    item = out[1]
    assert item["polite_noindex"] is True and "title" not in item and "text" not in item
    assert item["polite_signals"] == {"search": None, "ai_input": False, "ai_train": None}
    assert [r.url for r in out[3:]] == [ORIGIN + "/y", ORIGIN + "/x"]
