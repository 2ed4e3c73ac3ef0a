from __future__ import annotations

import doctest
import gzip
import resource
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from polite_crawler.policy import sitemaps
from polite_crawler.policy.sitemaps import (
    ATOM,
    INDEX,
    RSS,
    TEXT,
    UNKNOWN,
    URLSET,
    SitemapEntry,
    parse_sitemap,
    scope_of,
)

SM = "http://example.org/sitemap.xml"
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<?xml version="1.0" encoding="UTF-8"?><urlset {NS}>{items}</urlset>'.encode()


def test_doctests() -> None:
    assert doctest.testmod(sitemaps).failed == 0


def test_urlset_keeps_lastmod_and_canonicalises() -> None:
    body = f"""<?xml version="1.0"?>
<urlset {NS}>
  <url><loc> http://EXAMPLE.org:80/a?b=2&amp;a=1#x </loc>
       <lastmod>2026-03-01T10:00:00+00:00</lastmod>
       <changefreq>daily</changefreq><priority>0.8</priority></url>
  <url><loc>http://example.org/b</loc></url>
  <url><lastmod>2026-01-01</lastmod></url>
</urlset>""".encode()
    r = parse_sitemap(body, SM)
    assert r.kind == URLSET
    assert r.pages == [
        SitemapEntry("http://example.org/a?a=1&b=2", "2026-03-01T10:00:00+00:00"),
        SitemapEntry("http://example.org/b", None),
    ]
    assert r.error is None


def test_index_lists_sitemaps() -> None:
    body = f"""<sitemapindex {NS}>
      <sitemap><loc>http://example.org/s1.xml.gz</loc><lastmod>2026-02-02</lastmod></sitemap>
      <sitemap><loc>/s2.txt</loc></sitemap>
    </sitemapindex>""".encode()
    r = parse_sitemap(body, SM)
    assert r.kind == INDEX
    assert [e.url for e in r.sitemaps] == ["http://example.org/s1.xml.gz",
                                           "http://example.org/s2.txt"]
    assert r.sitemaps[0].lastmod == "2026-02-02"
    assert r.pages == []


def test_cross_host_and_outside_path_dropped_and_counted() -> None:
    body = urlset("http://example.org/catalog/a", "http://example.org/shoes",
                  "http://evil.example/catalog/x", "http://example.org:8080/catalog/y",
                  "https://example.org/catalog/z", "javascript:alert(1)")
    r = parse_sitemap(body, "http://example.org/catalog/sitemap.xml")
    assert [e.url for e in r.pages] == ["http://example.org/catalog/a", "https://example.org/catalog/z"]
    assert r.dropped == {"outside_path": 1, "offsite": 2, "invalid": 1}
    # Named in robots.txt, the sitemap speaks for the whole host, still not for others.
    scope = scope_of("http://example.org/catalog/sitemap.xml", from_robots=True)
    r = parse_sitemap(body, "http://example.org/catalog/sitemap.xml", scope=scope)
    assert len(r.pages) == 3
    assert r.dropped == {"offsite": 2, "invalid": 1}


def test_gzip_sitemap() -> None:
    r = parse_sitemap(gzip.compress(urlset("http://example.org/g")), "http://example.org/s.xml.gz")
    assert r.kind == URLSET
    assert [e.url for e in r.pages] == ["http://example.org/g"]


def test_gzip_bomb_stops_at_cap() -> None:
    # 60 MB of blank lines after one URL: decompression stops at the 50 MB cap.
    head = b"http://example.org/first\n"
    bomb = gzip.compress(head + b"\n" * (60 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 1_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = parse_sitemap(bomb, "http://example.org/bomb.txt.gz")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.truncated
    assert [e.url for e in r.pages] == ["http://example.org/first"]
    assert grown_mb < 150
    small = parse_sitemap(gzip.compress(urlset(*(f"http://example.org/{i}" for i in range(100)))),
                          SM, max_bytes=500)
    assert small.truncated
    assert 0 < len(small.pages) < 100


def test_corrupt_gzip_is_an_error_not_an_exception() -> None:
    r = parse_sitemap(b"\x1f\x8b" + b"garbage" * 10, SM)
    assert r.error
    assert r.pages == []


def test_text_sitemap() -> None:
    body = (b"\xef\xbb\xbfhttp://example.org/t1\r\n\n# comment\nhttp://example.org/t2  \n"
            b"not a url\n\xff\xfe\n")
    r = parse_sitemap(body, "http://example.org/sitemap.txt")
    assert r.kind == TEXT
    assert [e.url for e in r.pages] == ["http://example.org/t1", "http://example.org/t2"]
    assert r.dropped == {"invalid": 2}


def test_rss_feed() -> None:
    body = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>News</title>
      <link>http://example.org/</link>
      <item><title>One</title><link>http://example.org/news/1?utm_source=rss</link>
            <pubDate>Mon, 02 Mar 2026 10:00:00 GMT</pubDate></item>
      <item><title>Two</title><guid>http://example.org/news/2</guid></item>
      <item><title>Three</title><guid isPermaLink="false">tag:example.org,2026:3</guid></item>
      <item><title>Away</title><link>http://elsewhere.example/x</link></item>
    </channel></rss>"""
    r = parse_sitemap(body, "http://example.org/feeds/news.xml")
    assert r.kind == RSS
    # A feed is held to its host, not to its directory.
    assert r.pages == [SitemapEntry("http://example.org/news/1", "Mon, 02 Mar 2026 10:00:00 GMT"),
                       SitemapEntry("http://example.org/news/2", None)]
    assert r.dropped == {"empty": 1, "offsite": 1}


def test_atom_feed() -> None:
    body = b"""<?xml version="1.0" encoding="utf-8"?>
    <feed xmlns="http://www.w3.org/2005/Atom"><title>Blog</title>
      <link href="http://example.org/" rel="alternate"/>
      <entry><title>A</title><link rel="edit" href="/api/a"/><link href="/posts/a"/>
             <updated>2026-04-01T00:00:00Z</updated></entry>
      <entry><title>B</title><link rel="alternate" type="text/html" href="http://example.org/posts/b"/></entry>
    </feed>"""
    r = parse_sitemap(body, "http://example.org/atom.xml")
    assert r.kind == ATOM
    assert r.pages == [SitemapEntry("http://example.org/posts/a", "2026-04-01T00:00:00Z"),
                       SitemapEntry("http://example.org/posts/b", None)]


def test_url_limit_per_file() -> None:
    body = urlset(*(f"http://example.org/p{i}" for i in range(50_010)))
    r = parse_sitemap(body, SM)
    assert len(r.pages) == 50_000
    assert r.dropped == {"over_limit": 10}
    assert len(parse_sitemap(body, SM, max_urls=7).pages) == 7


BILLION_LAUGHS = (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol0 "lol">\n'
    + "".join(f' <!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">\n' for i in range(1, 10))
    + f"]>\n<urlset {NS}><url><loc>http://example.org/&lol9;</loc></url>"
    "<url><loc>http://example.org/ok</loc></url></urlset>"
).encode()


def test_billion_laughs_is_refused_cheaply() -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = parse_sitemap(BILLION_LAUGHS, SM)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.pages == []
    assert r.error and "DTD" in r.error
    assert r.dropped == {"dtd_refused": 1}
    assert grown_mb < 20


def test_external_entity_never_read(tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    for decl in (f'<!ENTITY x SYSTEM "file://{secret}">',
                 f'<!ENTITY % p SYSTEM "file://{secret}"> %p;',
                 '<!ENTITY x SYSTEM "http://127.0.0.1:9/leak">'):
        body = (f'<?xml version="1.0"?><!DOCTYPE urlset [{decl}]>'
                f"<urlset {NS}><url><loc>http://example.org/&x;</loc></url></urlset>").encode()
        r = parse_sitemap(body, SM)
        assert r.pages == []
        assert "TOPSECRET" not in repr(r)
    # An external DTD by reference is not loaded either; its entities stay unresolved.
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "file://{secret}">'
            f"<urlset {NS}><url><loc>http://example.org/p&x;</loc></url>"
            "<url><loc>http://example.org/q</loc></url></urlset>").encode()
    r = parse_sitemap(body, SM)
    assert "TOPSECRET" not in repr(r)


def test_an_unparseable_loc_drops_that_entry_only() -> None:
    # urljoin's ValueError on "http://[" used to end the whole file as an error.
    body = urlset("http://[", "http://example.org/a", "http://[::1", "http://example.org/b")
    r = parse_sitemap(body, SM)
    assert r.error is None
    assert [e.url for e in r.pages] == ["http://example.org/a", "http://example.org/b"]
    assert r.dropped == {"invalid": 2}
    r = parse_sitemap(b"http://[\nhttp://example.org/a\n", "http://example.org/sitemap.txt")
    assert [e.url for e in r.pages] == ["http://example.org/a"] and r.error is None


def test_entity_behind_a_quoted_gt_is_refused() -> None:
    # A ">" inside the system identifier does not end the declaration.
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "a>b" [<!ENTITY x "y">]>'
            f"<urlset {NS}><url><loc>http://example.org/&x;</loc></url></urlset>").encode()
    assert parse_sitemap(body, SM).dropped == {"dtd_refused": 1}


def test_doctype_without_subset_is_read() -> None:
    body = (f'<?xml version="1.0"?><!DOCTYPE urlset><urlset {NS}>'
            "<url><loc>http://example.org/a</loc></url></urlset>").encode()
    assert [e.url for e in parse_sitemap(body, SM).pages] == ["http://example.org/a"]


def test_doctype_scan_is_linear() -> None:
    # Fuzz finding: a regex restarting at every "<!DOCTYPE" took 24 s on 350 KB.
    for body in (b"<urlset>" + b"<!DOCTYPE a" * 32_000, b"<urlset>" + b"<!doctype a>" * 32_000,
                 b"<urlset>" + b"<!DOCTYPE a" * 32_000 + b"[<!ENTITY x 'y'>]>"):
        cpu = time.process_time()
        r = parse_sitemap(body, SM)
        assert time.process_time() - cpu < 0.5
        assert r.pages == []
    assert r.dropped == {"dtd_refused": 1}


def test_utf16_billion_laughs_stays_small() -> None:
    # The byte scan sees no "<!DOCTYPE" in UTF-16; the parser still expands nothing.
    text = BILLION_LAUGHS.decode().replace('version="1.0"', 'version="1.0" encoding="UTF-16"')
    for body in (text.encode("utf-16-le"), text.encode("utf-16")):
        r = parse_sitemap(body, SM)
        assert all(len(e.url) < 100 for e in r.pages), r


def test_not_a_sitemap() -> None:
    r = parse_sitemap(b"<!doctype html><html><body><a href='/x'>x</a></body></html>", SM)
    assert r.kind == UNKNOWN
    assert r.pages == []
    r = parse_sitemap(urlset("http://example.org/a")[:-40], SM)  # cut mid-file
    assert r.kind == URLSET
    assert r.error is None or r.pages == []
    assert parse_sitemap(b"", SM).pages == []
    assert parse_sitemap(b"x", "not a url").error


@settings(max_examples=300)
@given(st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(lambda t: ("<urlset><url><loc>" + t).encode("utf-8", "replace")),
    st.text(max_size=300).map(
        lambda t: ("<rss><channel><item><link>" + t).encode("utf-8", "replace")),
))
def test_garbage_never_raises(body: bytes) -> None:
    r = parse_sitemap(body, SM)
    for e in r.pages + r.sitemaps:
        assert e.url.startswith(("http://example.org/", "https://example.org/"))


# ---------------------------------------------------------------------------
# Encodings and files cut before their end (each failed before the fix)

HAWAII = "http://www.example.com/catalog?item=12&amp;desc=vacation_hawaii"
HAWAII_CANON = "http://www.example.com/catalog?desc=vacation_hawaii&item=12"


def _sample(encoding: str = "UTF-8") -> str:
    return (f'<?xml version="1.0" encoding="{encoding}"?>\n<urlset {NS}>\n'
            f"  <url><loc>{HAWAII}</loc></url>\n</urlset>\n")


def test_issue15_bom_and_whitespace_before_the_declaration_keep_every_ampersand() -> None:
    for prefix in (b"\xef\xbb\xbf", b"\xef\xbb\xbf \n\t\r\n", b"\n  ", b" "):
        r = parse_sitemap(prefix + _sample().encode(), "http://www.example.com/sitemap.xml")
        assert [e.url for e in r.pages] == [HAWAII_CANON], prefix
        assert not r.truncated


def test_issue15_utf16_sitemap_with_bom_and_declaration() -> None:
    text = _sample("UTF-16")
    for codec in ("utf-16", "utf-16-le", "utf-16-be"):
        r = parse_sitemap(text.encode(codec), "http://www.example.com/sitemap.xml")
        assert r.kind == URLSET, codec
        assert [e.url for e in r.pages] == [HAWAII_CANON], codec
    # a UTF-16 index, byte order mark and whitespace first
    index = (f'\ufeff \n<?xml version="1.0" encoding="UTF-16"?><sitemapindex {NS}>'
             "<sitemap><loc>http://www.example.com/s1.xml?a=1&amp;b=2</loc></sitemap></sitemapindex>")
    r = parse_sitemap(index.encode("utf-16-le"), "http://www.example.com/sitemap.xml")
    assert [e.url for e in r.sitemaps] == ["http://www.example.com/s1.xml?a=1&b=2"]


def _index(n: int) -> bytes:
    items = "".join(f"\n <sitemap>\n  <loc>http://www.example.com/sitemap{i}.xml.gz</loc>\n"
                    f"  <lastmod>2004-10-0{i % 9 + 1}</lastmod>\n </sitemap>" for i in range(n))
    head = f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {NS}>'
    return f"{head}{items}\n</sitemapindex>\n".encode()


def test_issue15_index_cut_anywhere_lists_every_complete_entry_and_only_those() -> None:
    body = _index(4)
    start = body.index(b"<sitemap>")
    for cut in range(start, len(body)):
        part = body[:cut]
        r = parse_sitemap(part, "http://www.example.com/sitemap_index.xml")
        whole_locs = part.count(b"</loc>")
        assert r.kind == INDEX
        assert [e.url for e in r.sitemaps] == [
            f"http://www.example.com/sitemap{i}.xml.gz" for i in range(whole_locs)], cut
        for i, e in enumerate(r.sitemaps):  # a lastmod is whole or absent
            assert e.lastmod in (None, f"2004-10-0{i % 9 + 1}"), cut
        assert r.truncated is (b"</sitemapindex>" not in part), cut


def test_issue15_urlset_cut_mid_file_and_gzipped_cut() -> None:
    whole = urlset(*(f"http://example.org/p{i}" for i in range(30)))
    cut = whole[: whole.index(b"http://example.org/p20") + 12]  # inside p20's <loc>
    r = parse_sitemap(cut, SM)
    assert [e.url for e in r.pages] == [f"http://example.org/p{i}" for i in range(20)]
    assert r.truncated
    gz = gzip.compress(whole)
    r = parse_sitemap(gz[: len(gz) * 2 // 3], SM)  # a download stopped part way
    assert r.truncated
    assert all(e.url in {f"http://example.org/p{i}" for i in range(30)} for e in r.pages)
    assert [e.url for e in r.pages] == [f"http://example.org/p{i}" for i in range(len(r.pages))]
    assert not parse_sitemap(whole, SM).truncated


def test_issue15_text_sitemap_cut_at_the_cap_drops_its_half_line() -> None:
    body = b"".join(b"http://example.org/page%d\n" % i for i in range(10))
    r = parse_sitemap(body, "http://example.org/s.txt", max_bytes=len(body) - 5)
    assert r.truncated
    assert [e.url for e in r.pages] == [f"http://example.org/page{i}" for i in range(9)]


def test_a_page_that_is_no_sitemap_is_not_counted_as_truncated() -> None:
    r = parse_sitemap(b"<html><body><p>no sitemap here", SM)
    assert r.kind == UNKNOWN
    assert not r.truncated


def test_issue15_feed_cut_mid_item_lists_the_items_before_it() -> None:
    items = "".join(f"<item><title>t{i}</title><link>http://example.org/post/{i}</link>"
                    f"<pubDate>Mon, 0{i + 1} Jan 2026 00:00:00 GMT</pubDate></item>"
                    for i in range(5))
    body = f'<?xml version="1.0"?><rss version="2.0"><channel><link>http://example.org/</link>{items}'
    body = body[: body.index("post/4") - 3]  # inside the last item's <link>
    r = parse_sitemap(body.encode(), "http://example.org/feed.xml")
    assert r.kind == RSS
    assert [e.url for e in r.pages] == [f"http://example.org/post/{i}" for i in range(4)]
    assert r.truncated


# --- entries already in canonical form skip canonicalize: the same entries either way ---

_PREFIXES = ["http://example.org/docs/", "http://example.org/", "http://EXAMPLE.org/docs/",
             "http://example.org:80/docs/", "https://example.org/docs/",
             "http://example.org:8080/docs/", "http://other.example/docs/"]
_TAIL = st.text(alphabet="aZ09-._~/!$&'()*+,;=:@%?# \u00e9", max_size=12)


def _expected(text: str, scope: str) -> tuple[str | None, str | None]:
    """(canonical URL, None) or (None, drop reason), worked out the general way."""
    from urllib.parse import urljoin

    from polite_crawler.policy.urls import canonicalize

    text = text.strip()
    if not text:
        return None, "empty"
    try:
        url = canonicalize(urljoin("http://example.org/docs/sitemap.xml", text))
    except ValueError:
        return None, "invalid"
    host = url.split("://", 1)[1].split("/", 1)[0]
    if host != scope.split("://", 1)[1].split("/", 1)[0]:
        return None, "offsite"
    if not url.split("://", 1)[1].startswith(scope.split("://", 1)[1]):
        return None, "outside_path"
    return url, None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), _TAIL), min_size=1, max_size=8))
def test_entries_in_canonical_form_are_read_as_canonicalize_reads_them(
        entries: list[tuple[str, str]]) -> None:
    from html import escape

    scope = "http://example.org/docs/"
    texts = [prefix + tail for prefix, tail in entries]
    result = parse_sitemap(urlset(*(escape(t) for t in texts)),
                           "http://example.org/docs/sitemap.xml")
    expected = [_expected(t, scope) for t in texts]
    assert [e.url for e in result.pages] == [u for u, _r in expected if u is not None]
    reasons: dict[str, int] = {}
    for _u, reason in expected:
        if reason is not None:
            reasons[reason] = reasons.get(reason, 0) + 1
    assert result.dropped == reasons


def test_an_entry_whose_tag_is_spelt_in_capitals_is_read() -> None:
    # Entries' end events are asked of lxml by name, which it matches case and all; a
    # file spelling a tag name otherwise is read with every event, as before.
    body = (f'<?xml version="1.0"?><urlset {NS}><url><loc>http://example.org/a</loc></url>'
            "<URL><loc>http://example.org/b</loc></URL>"
            "<Url><LOC>http://example.org/c</LOC></Url></urlset>").encode()
    result = parse_sitemap(body, SM)
    assert [e.url for e in result.pages] == [
        "http://example.org/a", "http://example.org/b", "http://example.org/c"]


def test_a_urlset_without_entries_is_still_known_by_its_root() -> None:
    body = f'<?xml version="1.0"?><!-- <feed> --><urlset {NS}><other/></urlset>'.encode()
    result = parse_sitemap(body, SM)
    assert (result.kind, result.pages, result.dropped) == (URLSET, [], {})


def test_lastmod_of_entries_in_canonical_form_as_of_any_other() -> None:
    body = (f'<?xml version="1.0"?><urlset {NS}>'
            "<url><loc> http://example.org/a </loc><lastmod> 2026-01-02 </lastmod></url>"
            "<url><loc>http://example.org/b</loc><lastmod>  </lastmod></url>"
            "<url><lastmod>2026-03-04</lastmod><loc>http://example.org/c</loc></url>"
            "<url><loc>http://EXAMPLE.org/d</loc><lastmod>2026-05-06</lastmod></url>"
            "<url><loc>http://example.org/e</loc><loc>http://example.org/f</loc></url>"
            "<url><loc>   </loc></url></urlset>").encode()
    result = parse_sitemap(body, SM, max_urls=5)
    assert result.pages == [
        SitemapEntry("http://example.org/a", "2026-01-02"), SitemapEntry("http://example.org/b"),
        SitemapEntry("http://example.org/c", "2026-03-04"),
        SitemapEntry("http://example.org/d", "2026-05-06"), SitemapEntry("http://example.org/e")]
    assert result.dropped == {"over_limit": 1, "empty": 1}
