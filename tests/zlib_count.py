"""A zlib that counts what it decompresses: how often a body is decoded, in tests.

``counting_zlib(monkeypatch)`` puts it in place of ``zlib`` in
:mod:`polite_crawler.policy.codings` (every gzip and deflate body the crawler decodes
goes through there) and returns the counter.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

import polite_crawler.policy.codings as codings_module

if TYPE_CHECKING:
    import pytest


class _CountingDecompress:
    def __init__(self, counter: ZlibCount, wbits: int) -> None:
        self._d = zlib.decompressobj(wbits)
        self._counter = counter

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        out = self._d.decompress(data, max_length)
        self._counter.bytes_out += len(out)
        return out

    def flush(self, *args: int) -> bytes:
        out = self._d.flush(*args)
        self._counter.bytes_out += len(out)
        return out

    def __getattr__(self, name: str) -> Any:  # eof, unused_data, unconsumed_tail
        return getattr(self._d, name)


class ZlibCount:
    """The ``zlib`` module with decompressors that count: streams begun, bytes out."""

    error = zlib.error
    MAX_WBITS = zlib.MAX_WBITS

    def __init__(self) -> None:
        self.streams = 0
        self.bytes_out = 0

    def decompressobj(self, wbits: int = zlib.MAX_WBITS) -> _CountingDecompress:
        self.streams += 1
        return _CountingDecompress(self, wbits)


def counting_zlib(monkeypatch: pytest.MonkeyPatch) -> ZlibCount:
    count = ZlibCount()
    monkeypatch.setattr(codings_module, "zlib", count)
    return count
