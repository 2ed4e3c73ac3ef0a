from __future__ import annotations

import doctest
from urllib.parse import urljoin

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from polite_crawler.policy import links
from polite_crawler.policy.links import _Joiner, extract_links


def test_doctests() -> None:
    assert doctest.testmod(links).failed == 0


def test_joins_every_href_shape() -> None:
    page = b"""<html><head><title>T</title></head><body>
      <a href="/root">1</a><a href="rel/x">2</a><a href="../up">3</a><a href="?q=1">4</a>
      <a href="//other.example/p">5</a><a href="HTTPS://Example.org/abs">6</a>
      <a href=" /spaced \n">7</a><a href="/ta\tb">8</a><a href="">9</a><a>10</a>
      <a href="javascript:go()">11</a><a href="mailto:a@b">12</a><a href="tel:1">13</a>
      <a href="data:text/html,x">14</a><a href="#frag">15</a><a href="ftp://x/">16</a>
    </body></html>"""
    got = extract_links(page, "https://example.org/d/page.html?old=1", max_links=5000)
    assert [link.url for link in got.links] == [
        "https://example.org/root", "https://example.org/d/rel/x", "https://example.org/up",
        "https://example.org/d/page.html?q=1", "https://other.example/p",
        "https://Example.org/abs", "https://example.org/spaced", "https://example.org/tab",
    ]


def test_base_href_and_canonical() -> None:
    page = b"""<html><head><base href="http://example.org/base/">
      <link rel="alternate" href="/alt"><link rel="Canonical shortlink" href="page?a=1">
      </head><body><a href="x">x</a></body></html>"""
    got = extract_links(page, "http://example.org/somewhere/else", max_links=5000)
    assert got.base == "http://example.org/base/"
    assert got.canonical == "http://example.org/base/page?a=1"
    assert [link.url for link in got.links] == ["http://example.org/base/x"]
    # A base that is not http(s) is ignored.
    got = extract_links(b'<head><base href="javascript:x"></head><a href="y">y</a>',
                        "http://example.org/a/b", max_links=5000)
    assert [link.url for link in got.links] == ["http://example.org/a/y"]


def test_nofollow_only_when_every_anchor_says_so() -> None:
    page = b"""<a href="/a" rel="nofollow">a</a><a href="/a">a again</a>
      <a href="/b" rel="NoFollow noopener">b</a><a href="/b" rel="nofollow">b again</a>
      <a href="/c" rel="noopener">c</a>"""
    got = extract_links(page, "http://example.org/", max_links=5000)
    assert [(link.url, link.nofollow) for link in got.links] == [
        ("http://example.org/a", False), ("http://example.org/b", True),
        ("http://example.org/c", False)]


def test_cap_counts_the_rest() -> None:
    page = b"".join(b'<a href="/p%d">p</a>' % i for i in range(200_000))
    got = extract_links(page, "http://example.org/", max_links=5000)
    assert len(got.links) == 5000
    assert got.dropped == 195_000
    assert got.links[-1].url == "http://example.org/p4999"


def test_past_the_cap_anchors_are_counted_not_resolved() -> None:
    # Past the cap nothing is joined: a repeat, a mailto: or a javascript: href
    # counts as dropped like any other (an empty href does not).
    page = (b'<a href="/a">a</a><a href="/b">b</a><a href="/a">a</a><a href="mailto:x@y">m</a>'
            b'<a href="">e</a><a>n</a><area href="javascript:x"><a href="/c">c</a>')
    got = extract_links(page, "http://example.org/", max_links=2)
    assert [link.url for link in got.links] == ["http://example.org/a", "http://example.org/b"]
    assert got.dropped == 4
    got = extract_links(page, "http://example.org/", max_links=0)
    assert got.links == [] and got.dropped == 6


def test_meta_tags_anywhere_and_past_the_cap_are_read() -> None:
    # Anchors and meta tags are read in one walk: meta tags among the anchors, in
    # the body and after the cap are all kept, in page order.
    page = (b'<head><meta name="Robots" content="noarchive"><meta charset="utf-8"></head>'
            b'<body><a href="/a">a</a><meta name="x" content="1"><a href="/b">b</a>'
            b'<a href="/c">c</a><meta name=" Googlebot " content="nofollow"></body>')
    got = extract_links(page, "http://example.org/", max_links=1)
    assert [link.url for link in got.links] == ["http://example.org/a"]
    assert got.dropped == 2
    assert got.metas == [("robots", "noarchive"), ("x", "1"), ("googlebot", "nofollow")]


@pytest.mark.parametrize("charset", ["utf\x008", "zlib", "rot13", "idna", "base64", "\x00"])
def test_charset_that_is_not_a_text_encoding_is_ignored(charset: str) -> None:
    # Fuzz finding: a NUL in the name made codecs.lookup raise ValueError.
    got = extract_links(b"<a href='/a'>a</a>", "http://example.org/", charset, max_links=5000)
    assert [link.url for link in got.links] == ["http://example.org/a"]


def test_unparseable_base_href_is_ignored() -> None:
    # Fuzz finding: urljoin's ValueError on "http://[" escaped extract_links.
    for base in ("http://[", "//[oops/", "\x01//[x"):
        got = extract_links(b'<head><base href="%s"></head><a href="a">a</a>' % base.encode(),
                            "http://example.org/d/p", max_links=5000)
        assert got.base == "http://example.org/d/p"
        assert [link.url for link in got.links] == ["http://example.org/d/a"]


@pytest.mark.parametrize("href", ["\x01javascript:x//", "https:rel", "//[oops", "mailto:a@b",
                                  "\x01//[x"])
def test_canonical_and_links_are_absolute_http_or_nothing(href: str) -> None:
    # Fuzz finding: urljoin hands back what it cannot resolve as it came.
    page = f'<link rel=canonical href="{href}"><a href="{href}">x</a><a href="/ok">ok</a>'
    got = extract_links(page.encode(), "http://example.org/dir/page", max_links=5000)
    assert got.canonical is None  # checked to parse: there is one per page
    # Links are only held to http(s) (a host like "[oops" is canonicalize's to refuse).
    assert [link.url for link in got.links if "[" not in link.url] == ["http://example.org/ok"]
    assert all(link.url.startswith(("http://", "https://")) for link in got.links)


def test_scheme_is_lower_case_and_http_colon_path_is_relative() -> None:
    page = b'<a href="HTTP://Example.org/A">1</a><a href="http:rel">2</a><a href="hTTps://x/">3</a>'
    got = extract_links(page, "http://example.org/dir/page", max_links=5000)
    assert [link.url for link in got.links] == [
        "http://Example.org/A", "http://example.org/dir/rel", "https://x/"]


def test_encodings_and_title() -> None:
    page = "<title>Caf\xe9  \n menu</title><a href='/caf\xe9'>x</a>".encode("latin-1")
    got = extract_links(page, "http://example.org/", "latin-1", max_links=5000)
    assert got.title == "Caf\xe9 menu"
    assert got.links[0].url == "http://example.org/caf\xe9"


def test_deep_nesting_is_bounded() -> None:
    page = b"<div>" * 100_000 + b'<a href="/deep">d</a>' + b"</div>" * 100_000
    got = extract_links(page, "http://example.org/", max_links=5000)
    assert len(got.links) <= 1  # libxml2 stops at its depth limit; no crash, no recursion


@settings(max_examples=300)
@given(st.one_of(st.binary(max_size=500),
                 st.text(max_size=300).map(lambda t: ("<a href='" + t).encode("utf-8", "replace"))))
def test_garbage_never_raises(body: bytes) -> None:
    got = extract_links(body, "http://example.org/x", max_links=5000)
    for link in got.links:
        assert link.url.lower().startswith(("http://", "https://"))


# --- relative paths are joined without urljoin, exactly as urljoin would ------------
_SEGMENTS = st.sampled_from(["a", "b", ".", "..", "", "x.html", "%20", "c d", "~", "\\", "é",
                             "?q=1", "?", "?a=b?c", "\x01", " x", "[x"])
_BASES = st.sampled_from(["http://e.org/dir/page", "http://e.org/", "http://e.org/a//b/c",
                          "http://e.org/a/b/", "https://e.org:8080/x/y.html?z=1", "http://e.org",
                          "http://e.org/a/./b/../c", "http://e.org/a/b?x=1/2", "HTTP://E.org/q"])


@given(base=_BASES, parts=st.lists(_SEGMENTS, min_size=1, max_size=6))
def test_relative_join_matches_urljoin(base: str, parts: list[str]) -> None:
    href = "/".join(parts)
    assume(href and href[0] != "/")
    assert _Joiner(base)(href) == urljoin(base, href)
