"""Content codings (RFC 9110 section 8.4.1) decoded under a size cap.

gzip, deflate (zlib-wrapped or raw), br and zstd are decoded in bounded steps
that never produce more than the cap: a gzip bomb costs the cap, not its
inflated size. A truncated or corrupt stream gives what decoded before the
damage; a stream that cannot be decoded under the cap (br on a brotli before 1.2)
is left encoded, like a corrupt one. No Scrapy here: the size-cap middleware and
the verdicts both use it.

A body is decoded once: a :class:`Decoding` goes only as far as it is asked and
goes on from there when asked for more (the gate asks for the head the challenge
markers are searched in, the size cap for the rest, up to its cap).
"""

from __future__ import annotations

import io
import zlib
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

import brotli
import zstandard

if TYPE_CHECKING:
    from collections.abc import Callable

_STEP = 64 * 1024


def brotli_is_bounded(decompressor: Callable[[], Any] | None = None) -> bool:
    """Whether this brotli decodes in bounded steps (``output_buffer_limit``, brotli 1.2+).

    An older one decodes a whole stream at once: a brotli bomb would cost its inflated
    size. pyproject.toml asks for 1.2; an older one found installed anyway is not used.
    """
    d = (decompressor or brotli.Decompressor)()
    try:
        d.process(b"", output_buffer_limit=1)
    except TypeError:
        return False
    except brotli.error:
        pass
    return True


def accept_encoding(brotli_bounded: bool) -> bytes:
    """The codings asked for: br only when it can be decoded under the cap.

    >>> accept_encoding(True), accept_encoding(False)
    (b'gzip, deflate, br, zstd', b'gzip, deflate, zstd')
    """
    return b"gzip, deflate, br, zstd" if brotli_bounded else b"gzip, deflate, zstd"


BROTLI_BOUNDED = brotli_is_bounded()
ACCEPT_ENCODING = accept_encoding(BROTLI_BOUNDED)


class _Reader(Protocol):
    def read(self, n: int) -> bytes:
        """At most ``n`` more decoded bytes (a truncated stream's last may be more);
        ``b""`` at the end."""
        ...


class _ZlibReader:
    """gzip (several members in a row are one body, RFC 1952 section 2.2) or deflate."""

    def __init__(self, data: bytes, wbits: int) -> None:
        self._data = data  # the members not started yet
        self._wbits = wbits
        self._d: Any = None
        self._pending = b""

    def read(self, n: int) -> bytes:
        while self._d is not None or self._data:
            d = self._d
            if d is None:
                d = self._d = zlib.decompressobj(self._wbits)
                self._pending, self._data = self._data, b""
            if not d.eof:
                # Never asked again once at its end: the input past the end is then in
                # both unused_data and unconsumed_tail, and a second call would append
                # it to unused_data again (the next member decoded twice).
                chunk: bytes = d.decompress(self._pending, n)
                self._pending = d.unconsumed_tail
                if chunk:
                    return chunk
                if not d.eof:  # truncated: what it holds, then the end
                    self._d = None
                    flushed: bytes = d.flush()
                    return flushed
            self._d = None
            rest: bytes = d.unused_data if self._wbits != -zlib.MAX_WBITS else b""
            self._data = rest if rest.strip(b"\x00") else b""
        return b""


class _DeflateReader:
    """deflate, zlib-wrapped, or raw without the wrapper (some servers send it)."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._inner = _ZlibReader(data, zlib.MAX_WBITS)
        self._started = False

    def read(self, n: int) -> bytes:
        try:
            chunk = self._inner.read(n)
        except zlib.error:
            if self._started:
                raise
            self._started = True
            self._inner = _ZlibReader(self._data, -zlib.MAX_WBITS)
            chunk = self._inner.read(n)
        self._started = self._started or bool(chunk)
        return chunk


class _BrotliReader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._d: Any = None

    def read(self, n: int) -> bytes:
        if not BROTLI_BOUNDED:
            raise brotli.error("brotli before 1.2 cannot decode under a size cap")
        data = b""
        if self._d is None:
            self._d, data = brotli.Decompressor(), self._data
        if self._d.is_finished():
            return b""
        try:
            chunk: bytes = self._d.process(data, output_buffer_limit=n)
        except TypeError as exc:  # a brotli without output_buffer_limit: not decoded
            raise brotli.error(f"brotli cannot decode under a size cap: {exc}") from exc
        return chunk


class _ZstdReader:
    def __init__(self, data: bytes) -> None:
        self._reader = zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(data), read_across_frames=True)

    def read(self, n: int) -> bytes:
        chunk: bytes = self._reader.read(n)
        return chunk


# Coding -> (reader, the errors after which what decoded before them is kept).
_READERS: dict[bytes, tuple[Callable[[bytes], _Reader], tuple[type[Exception], ...]]] = {
    b"gzip": (lambda d: _ZlibReader(d, 16 + zlib.MAX_WBITS), (zlib.error,)),
    b"x-gzip": (lambda d: _ZlibReader(d, 16 + zlib.MAX_WBITS), (zlib.error,)),
    b"deflate": (_DeflateReader, (zlib.error,)),
    b"br": (_BrotliReader, (brotli.error,)),
    b"zstd": (_ZstdReader, (zstandard.ZstdError,)),
}
DECODED = frozenset(_READERS)  # the content codings decoded here
# A stream that fails with one of these decodes to nothing (it is left encoded).
_FAILURES = (zlib.error, brotli.error, zstandard.ZstdError, EOFError, OSError)


class _Layer:
    """One content coding being undone: what came out so far, and the reader to go on."""

    def __init__(self, data: bytes, coding: bytes) -> None:
        make, self._keeps = _READERS[coding]
        self._reader = make(data)
        self.out = bytearray()
        self.ended = False
        self.failed = False  # ended with nothing decoded: the body stays encoded

    def fill(self, want: int) -> None:
        """Decode until more than ``want`` bytes are out or the stream ends.

        A stream that fails part-way loses what the failing step decoded, so the steps
        asked are those a decoding from the start to the same ``want`` would ask."""
        out = self.out
        while not self.ended and len(out) <= want:
            try:
                chunk = self._reader.read(min(_STEP, want - len(out) + 1))
            except _FAILURES as exc:
                self.ended = True
                self.failed = not out or not isinstance(exc, self._keeps)
                return
            if not chunk:
                self.ended = True
                return
            out += chunk

    def first(self, cap: int) -> tuple[bytes, bool]:
        """The first ``cap`` decoded bytes, and whether there are more."""
        self.fill(cap + 1)
        if len(self.out) <= cap:
            return bytes(self.out), False
        with memoryview(self.out) as view, view[:cap] as part:
            return bytes(part), True


class Decoding:
    """A body's content codings undone as far as asked, and no further.

    ``codings`` in the order applied (:func:`split_encodings`). A body under one coding
    (the usual gzip) is decoded once however often it is asked, and each time only as
    far as that asks: :meth:`head` for the challenge markers, then :meth:`capped` for
    the size cap goes on from where the head stopped. Several codings are undone layer
    by layer at each ask. A stream that fails part-way (corrupt, truncated zstd, bytes
    after its end) keeps what decoded before the failing step, and the steps differ
    when asked in two goes: how much it keeps may differ by up to a step.

    >>> import gzip
    >>> d = Decoding(gzip.compress(b"a" * 10_000), [b"gzip"])
    >>> d.head(4), d.capped(100)[0] == b"a" * 100, d.capped(100)[2]
    (b'aaaa', True, True)
    """

    __slots__ = ("_layer", "body", "codings")

    def __init__(self, body: bytes, codings: list[bytes]) -> None:
        self.body = body
        self.codings = codings
        self._layer = _Layer(body, codings[0]) \
            if len(codings) == 1 and codings[0] in _READERS else None

    @classmethod
    def of(cls, body: bytes, content_encoding: str | bytes | list[bytes] | None) -> Decoding:
        """The decoding of a body from its Content-Encoding value(s)."""
        if isinstance(content_encoding, str):
            # A character latin-1 cannot hold names no coding: "?" is an unknown one.
            content_encoding = content_encoding.encode("latin-1", "replace")
        if isinstance(content_encoding, bytes):
            content_encoding = [content_encoding]
        return cls(body, split_encodings(content_encoding or []))

    def capped(self, cap: int) -> tuple[bytes, list[bytes], bool]:
        """As :func:`decode_capped` (``body``, ``codings``, ``cap``)."""
        layer = self._layer
        if layer is not None:
            decoded, truncated = layer.first(cap)
            if layer.failed:
                return self.body, list(self.codings), False
            return decoded, [], truncated
        body, codings, truncated = self.body, list(self.codings), False
        while codings and codings[-1] in _READERS:
            outer = _Layer(body, codings[-1])
            decoded, cut = outer.first(cap)
            if outer.failed:
                break
            body, truncated = decoded, truncated or cut
            codings.pop()
        return body, codings, truncated

    def head(self, limit: int) -> bytes:
        """The first ``limit`` decoded bytes; the body's own when it does not decode (it
        may have been decoded already)."""
        if not self.codings:
            return self.body[:limit]
        decoded, left, _ = self.capped(limit)
        return decoded if not left else self.body[:limit]


def split_encodings(values: list[bytes]) -> list[bytes]:
    """Content codings in the order they were applied (RFC 9110 section 8.4)."""
    return [
        c.strip().lower()
        for c in chain.from_iterable(v.split(b",") for v in values)
        if c.strip() and c.strip().lower() != b"identity"
    ]


def decode_capped(body: bytes, encodings: list[bytes], cap: int) -> tuple[bytes, list[bytes], bool]:
    """Undo ``encodings`` (last applied first), never producing more than ``cap`` bytes.

    Returns the decoded body, the codings left undecoded (unknown ones, and
    everything applied before them), and whether the output was cut at the cap.
    A body that fails to decode is returned as it came, with all its codings.

    >>> import gzip
    >>> decode_capped(gzip.compress(b"a" * 10_000), [b"gzip"], 100)[0] == b"a" * 100
    True
    """
    return Decoding(body, list(encodings)).capped(cap)


def decoded_head(body: bytes, content_encoding: str | bytes | list[bytes] | None,
                 limit: int) -> bytes:
    """The first ``limit`` decoded bytes of a body, cheaply (for challenge markers).

    A body that does not decode (it may have been decoded already) comes back as it is.

    >>> import gzip
    >>> decoded_head(gzip.compress(b"<title>x</title>" * 100), "gzip", 16)
    b'<title>x</title>'
    >>> decoded_head(b"plain", "gzip", 16)
    b'plain'
    """
    decoding = Decoding.of(body, content_encoding)
    return decoding.head(limit) if decoding.codings else body[:limit]
