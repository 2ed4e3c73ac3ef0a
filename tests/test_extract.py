from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse

from polite_crawler.analysis import page_links, page_text
from polite_crawler.extract import MAX_DEPTH, main_text
from polite_crawler.policy.links import extract_links


def test_main_text_leaves_navigation_out() -> None:
    body = (b"<html><head><title>T</title></head><body><nav><a href=/>Home</a><a href=/x>X</a>"
            b"</nav><main><h1>Hello</h1><p>The text of the page is here, long enough to keep."
            b"</p></main></body></html>")
    m = main_text(body)
    assert m.title == "T"
    assert "The text of the page is here" in m.text
    assert "Home" not in m.text
    assert not m.too_deep


def test_deep_nesting_takes_the_linear_path() -> None:
    # Main-content extraction is quadratic in depth: 100,000 nested divs would take
    # minutes. The page is read with the plain extraction instead, and says so.
    depth = 100_000
    body = b"<body>" + b"<div>" * depth + b"deep words" + b"</div>" * depth + b"</body>"
    m = main_text(body)
    assert m.too_deep
    assert "deep words" in m.text


def test_depth_at_the_limit_keeps_main_content() -> None:
    depth = MAX_DEPTH - 10
    body = b"<body>" + b"<div>" * depth + b"<p>inner text</p>" + b"</div>" * depth + b"</body>"
    m = main_text(body)
    assert not m.too_deep


# --- the depth check is skipped when libxml2 read the whole page ------------------------
# Constructs that nest (or that one parser nests and the other closes): libxml2 must
# nest each at least as deeply as Lexbor, so a page libxml2 read to the end (below its
# limit of 256) is below MAX_DEPTH for Lexbor too.
NESTING = ["<div>", "<span>", "<a href=x>", "<p>", "<li>", "<ul><li>", "<button>", "<b><p>",
           "<table><tr><td>", "<table><div>", "<font>", "<nobr>", "<form>", "<select><option>",
           "<dd>", "<h1>", "<svg><g>", "<math><mi>", "<em><i>", "<b>", "<a><div>", "<p><b>",
           "<i><p>x", "<object>", "<template>", "<frameset>", "<center>", "<blockquote>", "<q>",
           "<label>", "<table><caption>", "<td>", "<tr>", "<noscript>", "<iframe>", "<textarea>",
           "<details>", "<dl><dt>", "<marquee>", "<applet>", "<ruby><rb>", "<fieldset>",
           "<b><table>", "<s><u>", "<sup>", "<div><p><b>", "<custom-el>", "<x>",
           "<svg><foreignObject>", "<math><annotation-xml encoding='text/html'>", "<a><b><p>",
           "<table><b>", "<select><div>", "<tbody><tr>", "<colgroup>", "<html><body>"]


@pytest.mark.parametrize("construct", NESTING)
def test_libxml2_nests_at_least_as_deeply_as_lexbor(construct: str) -> None:
    body = f"<html><body>{construct * 1500}deep words</body></html>".encode()
    lexbor_deep = main_text(body).too_deep
    if not extract_links(body, "http://example.org/", max_links=5000).too_deep:
        assert not lexbor_deep, construct
        assert not main_text(body, shallow=True).too_deep


def test_the_reading_skips_the_check_only_below_libxml2s_limit() -> None:
    shallow = b"<body>" + b"<div>" * 100 + b"<p>inner words here</p>" + b"</div>" * 100
    assert not extract_links(shallow, "http://example.org/", max_links=5000).too_deep
    deep = b"<body>" + b"<div>" * 100_000 + b"deep words" + b"</div>" * 100_000
    assert extract_links(deep, "http://example.org/", max_links=5000).too_deep
    response = HtmlResponse("http://example.org/", body=deep, encoding="utf-8")
    page_links(response, 5000)  # the spider's reading first, as in a crawl
    assert page_text(response).too_deep  # checked by Lexbor: libxml2 stopped early
