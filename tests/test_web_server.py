"""The test web itself: correct HTTP/1.1, and a request log that catches impoliteness."""

from __future__ import annotations

import gzip
import http.client

from demo.web.server import LogEntry, Resp, Site, etag_for, overlaps, page, short_rests

BODY = page("Hello", "a page long enough to be worth compressing " * 10)


def _site() -> Site:
    return Site({
        "/": Resp(200, BODY, etag=etag_for(BODY), last_modified=1_700_000_000),
        "/chunked": Resp(200, iter([b"one ", b"two ", b"three"])),
    })


def test_keep_alive_head_gzip_and_validators(web_factory) -> None:
    web = web_factory({"127.0.0.1": _site()})
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=5)
    try:
        conn.request("GET", "/", headers={"Accept-Encoding": "gzip"})
        r = conn.getresponse()
        body = r.read()
        assert r.status == 200 and r.getheader("Content-Encoding") == "gzip"
        assert gzip.decompress(body) == BODY
        etag, lm = r.getheader("ETag"), r.getheader("Last-Modified")
        # same connection: keep-alive
        conn.request("HEAD", "/")
        r = conn.getresponse()
        assert r.status == 200 and r.read() == b""
        assert int(r.getheader("Content-Length")) == len(BODY)
        conn.request("GET", "/", headers={"If-None-Match": etag})
        r = conn.getresponse()
        assert r.status == 304 and r.read() == b""
        conn.request("GET", "/", headers={"If-Modified-Since": lm})
        r = conn.getresponse()
        assert r.status == 304 and r.read() == b""
        conn.request("GET", "/chunked")
        r = conn.getresponse()
        assert r.getheader("Transfer-Encoding") == "chunked"
        assert r.read() == b"one two three"
        conn.request("GET", "/missing")
        r = conn.getresponse()
        assert r.status == 404
        r.read()
    finally:
        conn.close()
    log = web.entries("127.0.0.1")
    assert [(e.method, e.path, e.status) for e in log] == [
        ("GET", "/", 200), ("HEAD", "/", 200), ("GET", "/", 304), ("GET", "/", 304),
        ("GET", "/chunked", 200), ("GET", "/missing", 404)]
    assert log[0].bytes_sent == len(gzip.compress(BODY, mtime=0)) and log[2].bytes_sent == 0
    assert all(e.started <= e.finished for e in log)


def _entry(host: str, started: float, finished: float) -> LogEntry:
    return LogEntry(host, 80, "GET", "/", 200, 0, started, finished, {})


def test_overlaps_and_short_rests_are_caught() -> None:
    polite = [_entry("127.0.0.1", 0.0, 1.0), _entry("127.0.0.1", 4.0, 5.0),
              _entry("127.0.0.2", 0.5, 4.5)]  # another origin may overlap
    assert overlaps(polite) == []
    assert short_rests(polite, 3.0) == []
    rude = [*polite, _entry("127.0.0.1", 4.5, 6.0), _entry("127.0.0.2", 5.0, 5.5)]
    assert [(a.started, b.started) for a, b in overlaps(rude)] == [(4.0, 4.5)]
    short = short_rests(rude, 3.0)
    # (start of the earlier request, gap): 127.0.0.2 rested 0.5 s, 127.0.0.1 overlapped
    assert sorted((round(a.started, 1), round(gap, 1)) for a, _b, gap in short) == [
        (0.5, 0.5), (4.0, -0.5)]
