"""The size cap and content decoding, on real Request/Response objects and real crawls."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest
import pytest_twisted
import zstandard
from scrapy import Request
from scrapy.exceptions import StopDownload
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.utils.test import get_crawler

from demo.web.server import Resp, Site
from polite_crawler.middlewares.sizecap import ROBOTS_MIN_BYTES, SizeCapMiddleware
from tests.fetch import FetchSpider, fetch, plain_settings
from tests.zlib_count import counting_zlib

MB = 1024 * 1024


def _mw(**settings: object) -> SizeCapMiddleware:
    crawler = get_crawler(FetchSpider, {"POLITE_MAX_BYTES": 1000, **settings})
    crawler._apply_settings()
    crawler.stats.open_spider()  # type: ignore[union-attr]
    return SizeCapMiddleware.from_crawler(crawler)


def _resp(body: bytes, encoding: str | None = None, url: str = "http://127.0.0.1/x") -> Response:
    headers = {"Content-Type": "text/html"}
    if encoding:
        headers["Content-Encoding"] = encoding
    return Response(url, body=body, headers=headers)


def test_accept_encoding() -> None:
    mw = _mw()
    req = Request("http://127.0.0.1/")
    mw.process_request(req)
    assert req.headers[b"Accept-Encoding"] == b"gzip, deflate, br, zstd"


@pytest.mark.parametrize(("coding", "compress"), [
    ("gzip", gzip.compress),
    ("deflate", zlib.compress),
    ("br", brotli.compress),
    ("zstd", lambda d: zstandard.ZstdCompressor().compress(d)),
])
def test_decodes_every_coding(coding: str, compress: object) -> None:
    mw = _mw()
    page = b"<html><body>" + b"hello " * 100 + b"</body></html>"
    req = Request("http://127.0.0.1/")
    out = mw.process_response(req, _resp(compress(page), coding))  # type: ignore[operator]
    assert isinstance(out, HtmlResponse)
    assert out.body[:700] == page[:700]
    assert b"Content-Encoding" not in out.headers
    cut = len(page) > 1000
    assert ("polite_truncated" in out.flags) is cut


def test_bomb_cut_and_counted() -> None:
    mw = _mw(POLITE_MAX_BYTES=100_000)
    bomb = gzip.compress(b"a" * (20 * MB))
    assert len(bomb) < 100_000
    req = Request("http://127.0.0.1/")
    out = mw.process_response(req, _resp(bomb, "gzip"))
    assert out.body == b"a" * 100_000
    assert "polite_truncated" in out.flags
    assert req.meta["polite_truncated"] == "decoded"
    stats = mw.crawler.stats
    assert stats.get_value("polite/sizecap/cut") == 1  # type: ignore[union-attr]
    assert stats.get_value("polite/sizecap/cut/decoded") == 1  # type: ignore[union-attr]


def test_wire_cut() -> None:
    mw = _mw()
    req = Request("http://127.0.0.1/")
    mw.process_request(req)
    mw.bytes_received(b"x" * 600, req)
    with pytest.raises(StopDownload) as info:
        mw.bytes_received(b"x" * 600, req)
    assert info.value.fail is False
    out = mw.process_response(req, _resp(b"x" * 1200))
    assert len(out.body) == 1000
    assert req.meta["polite_truncated"] == "wire"


def test_caps_per_request() -> None:
    mw = _mw(POLITE_ROBOTS_MAX_BYTES=10)
    assert mw.cap_for(Request("http://a/")) == 1000
    assert mw.cap_for(Request("http://a/robots.txt", meta={"polite_robots": True})) == \
        ROBOTS_MIN_BYTES
    assert mw.cap_for(Request("http://a/", meta={"polite_max_bytes": 50})) == 50
    assert _mw(POLITE_ROBOTS_MAX_BYTES=MB).cap_for(
        Request("http://a/robots.txt", meta={"polite_robots": True})) == MB


def test_small_plain_response_untouched() -> None:
    mw = _mw()
    resp = _resp(b"<p>hi</p>")
    assert mw.process_response(Request("http://127.0.0.1/"), resp) is resp


def test_head_not_decoded_unknown_coding_kept() -> None:
    mw = _mw()
    resp = _resp(b"", "gzip")
    assert mw.process_response(Request("http://127.0.0.1/", method="HEAD"), resp) is resp
    odd = mw.process_response(Request("http://127.0.0.1/"), _resp(b"abc", "compress"))
    assert odd.headers[b"Content-Encoding"] == b"compress"
    assert odd.body == b"abc"


def test_text_encoding_recomputed() -> None:
    mw = _mw()
    body = gzip.compress("<html><meta charset='utf-8'>é</html>".encode())
    out = mw.process_response(Request("http://127.0.0.1/"), _resp(body, "gzip"))
    assert isinstance(out, TextResponse)
    assert "é" in out.text


def _bigsite(tmp_bomb: bytes) -> Site:
    def fifty_mb(_req: object) -> Resp:
        chunk = b"z" * (64 * 1024)
        return Resp(200, (chunk for _ in range(50 * 16)), content_type="application/octet-stream")

    return Site({
        "/big": fifty_mb,
        "/bomb": Resp(200, tmp_bomb, headers={"Content-Encoding": "gzip"},
                      content_type="text/plain"),
        "/br": Resp(200, brotli.compress(b"brotli body " * 50),
                    headers={"Content-Encoding": "br"}, content_type="text/plain"),
        "/zstd": Resp(200, zstandard.ZstdCompressor().compress(b"zstd body " * 50),
                      headers={"Content-Encoding": "zstd"}, content_type="text/plain"),
        "/robots.txt": Resp(200, b"# " + b"r" * (700 * 1024), content_type="text/plain",
                            gzip_ok=False),
    })


def _bomb() -> bytes:
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * MB
    return b"".join(z.compress(block) for _ in range(200)) + z.flush()


@pytest_twisted.ensureDeferred
async def test_plain_crawl_cuts_big_body_and_bomb(web_factory, tmp_path) -> None:
    bomb = _bomb()
    assert len(bomb) < MB  # 200 MiB inflated
    web = web_factory({"127.0.0.1": _bigsite(bomb)})
    result = await fetch(
        [web.url("127.0.0.1", p) for p in ("/big", "/bomb", "/br", "/zstd")],
        plain_settings(str(tmp_path), POLITE_MAX_BYTES=2 * MB),
    )
    items = {i["url"].rsplit("/", 1)[1]: i for i in result.items}
    assert len(items["big"]["body"]) == 2 * MB
    assert items["big"]["truncated"] == "wire"
    assert "download_stopped" in items["big"]["flags"]
    assert items["bomb"]["body"] == b"\0" * (2 * MB)
    assert items["bomb"]["truncated"] == "decoded"
    assert items["br"]["body"] == b"brotli body " * 50
    assert items["zstd"]["body"] == b"zstd body " * 50
    assert result.stats["polite/sizecap/cut"] == 2
    # The server stopped sending soon after the cap: far from 50 MB went out.
    big = web.entries(path="/big")[0]
    assert big.bytes_sent < 20 * MB
    for e in web.entries():
        assert e.headers["accept-encoding"] == "gzip, deflate, br, zstd"


@pytest_twisted.ensureDeferred
async def test_plain_crawl_robots_keeps_500_kib(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": _bigsite(b"")})
    result = await fetch([web.url("127.0.0.1", "/robots.txt")],
                         plain_settings(str(tmp_path), POLITE_MAX_BYTES=100 * 1024),
                         meta={"polite_robots": True})
    (item,) = result.items
    assert len(item["body"]) == 512 * 1024  # POLITE_ROBOTS_MAX_BYTES default, >= 500 KiB
    assert item["truncated"] == "wire"


def test_a_body_left_encoded_is_counted() -> None:
    mw = _mw()
    stats = mw.crawler.stats
    assert stats is not None
    mw.process_response(Request("http://127.0.0.1/"), _resp(b"abc", "compress"))
    mw.process_response(Request("http://127.0.0.1/"), _resp(b"not brotli", "br"))
    mw.process_response(Request("http://127.0.0.1/"), _resp(brotli.compress(b"<p>ok</p>"), "br"))
    assert stats.get_value("polite/sizecap/undecoded") == 2
    assert stats.get_value("polite/sizecap/undecoded/other") == 1  # a coding named by the server
    assert stats.get_value("polite/sizecap/undecoded/br") == 1


@pytest_twisted.ensureDeferred
async def test_a_gzip_page_is_decoded_once_on_its_way_in(web_factory, tmp_path,
                                                         monkeypatch) -> None:
    # The gate decodes the head of a body for its challenge check, the size cap the
    # whole: the size cap goes on from the gate's decoding, so each byte of a page is
    # inflated once (before, the first 32 KiB twice).
    count = counting_zlib(monkeypatch)
    pages = {"/small": b"<html><title>small</title>" + b"<p>words</p>" * 100 + b"</html>",
             "/large": b"<html><title>large</title>" + b"<p>more words</p>" * 20_000}
    web = web_factory({"127.0.0.1": Site({
        "/robots.txt": Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain",
                            gzip_ok=False),
        **{path: Resp(200, body) for path, body in pages.items()},
    })})
    result = await fetch([web.url("127.0.0.1", p) for p in pages],
                         {"POLITE_STATE_DIR": str(tmp_path)})
    assert {i["url"].rsplit("/", 1)[1]: i["body"] for i in result.items} == {
        "small": pages["/small"], "large": pages["/large"]}
    sent = {e.path: e.bytes_sent for e in web.entries()}
    assert sent["/large"] < len(pages["/large"]) // 10  # gzip on the wire
    assert count.streams == 2
    assert count.bytes_out == sum(map(len, pages.values()))
