"""Content codings decoded under a cap: every coding, cut, truncated, corrupt, bombs."""

from __future__ import annotations

import doctest
import gzip
import os
import zlib

import brotli
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import polite_crawler.policy.codings as codings_module
from polite_crawler.policy.codings import Decoding, decode_capped, decoded_head, split_encodings
from tests.zlib_count import counting_zlib

DATA = os.urandom(3000) * 20 + b"tail" * 5000  # compressible, not trivially


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


COMPRESS = {
    b"gzip": gzip.compress,
    b"x-gzip": gzip.compress,
    b"deflate": zlib.compress,
    b"br": brotli.compress,
    b"zstd": lambda d: zstandard.ZstdCompressor().compress(d),
}


def test_doctests() -> None:
    failed, tried = doctest.testmod(codings_module)
    assert tried > 0
    assert failed == 0


@pytest.mark.parametrize("coding", list(COMPRESS))
def test_each_coding_round_trips(coding: bytes) -> None:
    body = COMPRESS[coding](DATA)
    out, left, cut = decode_capped(body, [coding], 10**7)
    assert out == DATA
    assert left == []
    assert not cut


@pytest.mark.parametrize("coding", list(COMPRESS))
def test_each_coding_cut_at_cap(coding: bytes) -> None:
    body = COMPRESS[coding](DATA)
    out, left, cut = decode_capped(body, [coding], 5000)
    assert out == DATA[:5000]
    assert cut and left == []
    exact, _, cut_exact = decode_capped(body, [coding], len(DATA))
    assert exact == DATA and not cut_exact


@pytest.mark.parametrize("coding", [b"gzip", b"deflate", b"br", b"zstd"])
def test_truncated_stream_keeps_a_prefix(coding: bytes) -> None:
    data = os.urandom(400_000)
    body = COMPRESS[coding](data)
    out, left, _ = decode_capped(body[: len(body) // 2], [coding], 10**7)
    assert left == []
    assert 0 < len(out) < len(data)
    assert data.startswith(out)


def test_raw_deflate_and_gzip_members() -> None:
    assert decode_capped(_raw_deflate(DATA), [b"deflate"], 10**7)[0] == DATA
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decode_capped(two, [b"gzip"], 100)[0] == b"first second"
    assert decode_capped(two, [b"gzip"], 8) == (b"first se", [], True)


def test_layers_unknown_and_garbage() -> None:
    layered = brotli.compress(gzip.compress(b"hello world"))  # gzip applied first, then br
    assert decode_capped(layered, [b"gzip", b"br"], 100) == (b"hello world", [], False)
    assert split_encodings([b"gzip, br", b" Identity", b"ZSTD"]) == [b"gzip", b"br", b"zstd"]
    # an unknown outer coding: nothing decoded, codings kept
    assert decode_capped(b"xyz", [b"gzip", b"compress"], 100) == (b"xyz", [b"gzip", b"compress"],
                                                                   False)
    # a known outer coding over an unknown inner one: only the outer is undone
    body = gzip.compress(b"opaque")
    assert decode_capped(body, [b"compress", b"gzip"], 100) == (b"opaque", [b"compress"], False)
    for coding in COMPRESS:
        assert decode_capped(b"not compressed at all", [coding], 100) == (
            b"not compressed at all", [coding], False)


def bomb(coding: bytes, inflated: int) -> bytes:
    """``inflated`` zero bytes in ``coding``, built without holding them all for zlib."""
    if coding in (b"gzip", b"deflate"):
        z = zlib.compressobj(9, zlib.DEFLATED, 31 if coding == b"gzip" else 15)
        block = b"\0" * (1024 * 1024)
        return b"".join(z.compress(block) for _ in range(inflated // len(block))) + z.flush()
    if coding == b"br":
        return brotli.compress(b"\0" * inflated, quality=1)
    return zstandard.ZstdCompressor(level=1).compress(b"\0" * inflated)


@pytest.mark.parametrize("coding", [b"gzip", b"deflate", b"br", b"zstd"])
def test_bomb_stops_at_cap(coding: bytes) -> None:
    # A naive decoder would inflate all 64 MiB; here the output stops at the cap.
    inflated = 64 * 1024 * 1024
    body = bomb(coding, inflated)
    assert len(body) < inflated // 100
    cap = 1024 * 1024
    out, left, cut = decode_capped(body, [coding], cap)
    assert len(out) == cap and cut and left == []


def test_decoded_head() -> None:
    page = b"<html><title>Just a moment...</title>" + b"x" * 100_000
    assert decoded_head(gzip.compress(page), [b"gzip"], 64) == page[:64]
    assert decoded_head(brotli.compress(page), "br", 64) == page[:64]
    assert decoded_head(page, None, 64) == page[:64]
    assert decoded_head(page, "gzip", 64) == page[:64]  # already decoded


def test_decoded_head_with_a_coding_latin1_cannot_hold() -> None:
    # Fuzz finding: a str value outside latin-1 raised UnicodeEncodeError; it names
    # no known coding, so the body comes back as it is.
    page = b"<html><title>x</title>"
    assert decoded_head(page, "\ufffd", 8) == page[:8]
    assert decoded_head(gzip.compress(page), "\u0100, gzip", 8) == gzip.compress(page)[:8]


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=5000), st.integers(min_value=1, max_value=6000),
       st.sampled_from(sorted(COMPRESS)))
def test_decode_capped_property(data: bytes, cap: int, coding: bytes) -> None:
    out, left, cut = decode_capped(COMPRESS[coding](data), [coding], cap)
    assert left == []
    assert out == data[:cap]
    assert cut is (len(data) > cap)


class _Brotli11Decompressor:
    """brotli 1.1's ``Decompressor``: ``process(data)`` decodes everything, no limit."""

    def __init__(self) -> None:
        self._d = brotli.Decompressor()

    def process(self, data: bytes) -> bytes:  # 1.1's signature: no output_buffer_limit
        return bytes(self._d.process(data))

    def is_finished(self) -> bool:
        return bool(self._d.is_finished())


def test_brotli_without_a_bounded_step_is_found() -> None:
    assert codings_module.brotli_is_bounded()  # the installed one (>= 1.2, pyproject.toml)
    assert not codings_module.brotli_is_bounded(_Brotli11Decompressor)


def test_br_on_a_brotli_that_cannot_bound_its_output_is_left_encoded(monkeypatch) -> None:
    body = brotli.compress(DATA)
    old = type("Brotli11", (), {"Decompressor": _Brotli11Decompressor, "error": brotli.error})
    monkeypatch.setattr(codings_module, "brotli", old)
    # Found at import (BROTLI_BOUNDED false): not even tried.
    monkeypatch.setattr(codings_module, "BROTLI_BOUNDED", False)
    assert decode_capped(body, [b"br"], 1000) == (body, [b"br"], False)
    # Found only at the call: the TypeError is a decode failure, never raised.
    monkeypatch.setattr(codings_module, "BROTLI_BOUNDED", True)
    assert decode_capped(body, [b"br"], 1000) == (body, [b"br"], False)
    assert decoded_head(body, "br", 100) == body[:100]
    # The other codings are decoded as ever.
    assert decode_capped(gzip.compress(DATA), [b"gzip"], 10)[0] == DATA[:10]
    assert codings_module.accept_encoding(False) == b"gzip, deflate, zstd"


def test_a_later_gzip_member_is_decoded_once() -> None:
    # A first member longer than one decoding step: at its end, the input past it was
    # in both unused_data and unconsumed_tail, and asking the finished decompressor
    # again appended it twice (the second member came out twice).
    first = os.urandom(200_000)
    body = gzip.compress(first) + gzip.compress(b"second member")
    assert decode_capped(body, [b"gzip"], 10**7) == (first + b"second member", [], False)


def test_a_decoding_goes_on_from_its_head(monkeypatch) -> None:
    # The gate asks for the head (the challenge markers), the size cap for the rest:
    # the body is decoded once, not the head twice.
    count = counting_zlib(monkeypatch)
    page = DATA + os.urandom(50_000)
    decoding = Decoding(gzip.compress(page), [b"gzip"])
    assert decoding.head(32 * 1024) == page[:32 * 1024]
    assert decoding.capped(10**7) == (page, [], False)
    assert count.streams == 1
    assert count.bytes_out == len(page)
    # Asked again, less or as much: nothing more decoded.
    assert decoding.head(100) == page[:100]
    assert decoding.capped(1000) == (page[:1000], [], True)
    assert count.bytes_out == len(page)


_VALID_OR_CUT = st.tuples(st.binary(max_size=80_000), st.sampled_from(sorted(COMPRESS)),
                          st.floats(min_value=0.0, max_value=1.0), st.booleans())


@settings(max_examples=80, deadline=None)
@given(_VALID_OR_CUT, st.integers(min_value=0, max_value=40_000),
       st.integers(min_value=1, max_value=100_000))
def test_a_resumed_decoding_is_a_fresh_one(stream: tuple[bytes, bytes, float, bool],
                                           head: int, cap: int) -> None:
    # Whole streams, and truncated ones of the codings whose decoder gives all it can
    # before the end of its input: the head, then the rest, give what a decoding from
    # the start gives. (A stream that fails part-way, zstd's truncated one included,
    # keeps what decoded before the failing step, whichever steps it was asked in.)
    data, coding, keep, cut = stream
    body = COMPRESS[coding](data)
    if cut and coding != b"zstd":
        body = body[: int(len(body) * keep)]
    decoding = Decoding(body, [coding])
    assert decoding.head(head) == decoded_head(body, [coding], head)
    assert decoding.capped(cap) == decode_capped(body, [coding], cap)
