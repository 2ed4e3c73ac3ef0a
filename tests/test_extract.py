from __future__ import annotations

from polite_crawler.extract import MAX_DEPTH, main_text


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
