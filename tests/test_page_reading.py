"""A page's encoding is decided once, from what it declares, with no auto-detection pass.

nginx sends ``Content-Type: text/html`` with no charset and gzip on; the page says
``<meta charset="utf-8">``. Decoding the gzip (the size cap) must not make Scrapy
guess the charset of the still-compressed body, and the decoded page's encoding is
its declaration. Charset auto-detection (charset_normalizer, through Scrapy's
TextResponse) runs only for a page that declares nothing and is not UTF-8.
"""

from __future__ import annotations

import gzip
from typing import Any

import pytest
import scrapy.http.response.text as scrapy_text
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from polite_crawler.analysis import page_links, page_text
from polite_crawler.middlewares.charset import CharsetMiddleware
from polite_crawler.middlewares.sizecap import SizeCapMiddleware
from tests.fetch import FetchSpider

PAGE = ('<!DOCTYPE html><html><head><meta charset="utf-8" /><title>Süß</title></head>'
        '<body><p>Grüße aus Köln, ça va — très bien.</p><a href="/next">next</a></body></html>')


@pytest.fixture
def detections(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of Scrapy's charset auto-detection (the real one still runs)."""
    calls: list[int] = []
    real = scrapy_text.from_bytes

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(scrapy_text, "from_bytes", counted)
    return calls


def _chain(body: bytes, headers: dict[str, str]) -> Any:
    crawler = get_crawler(FetchSpider, {})
    crawler._apply_settings()
    crawler.stats.open_spider()  # type: ignore[union-attr]
    size, charset = SizeCapMiddleware.from_crawler(crawler), CharsetMiddleware.from_crawler(crawler)
    request = Request("http://127.0.0.1/page")
    response = HtmlResponse(request.url, body=body, headers=headers, request=request)
    # process_response runs high to low: the size cap (590), then the charset (585).
    return charset.process_response(request, size.process_response(request, response))


def test_gzip_page_declaring_its_charset_is_never_auto_detected(detections) -> None:
    body = gzip.compress(PAGE.encode("utf-8"))
    response = _chain(body, {"Content-Type": "text/html", "Content-Encoding": "gzip"})
    assert response.body == PAGE.encode("utf-8")
    assert response.encoding == "utf-8"
    assert page_links(response, 5000).title == "Süß"
    assert "Grüße aus Köln" in page_text(response).text
    assert detections == []


def test_a_page_declaring_nothing_in_no_utf8_is_still_detected(detections) -> None:
    # The control: the spy sees the detection when there is one to make.
    plain = PAGE.replace('<meta charset="utf-8" />', "").encode("cp1252", "replace") * 20
    body = gzip.compress(plain)
    response = _chain(body, {"Content-Type": "text/html", "Content-Encoding": "gzip"})
    assert response.body == plain
    assert response.encoding
    assert len(detections) == 1
