"""Content codings (RFC 9110 section 8.4.1) decoded under a size cap.

gzip, deflate (zlib-wrapped or raw), br and zstd are decoded in bounded steps
that never produce more than the cap: a gzip bomb costs the cap, not its
inflated size. A truncated or corrupt stream gives what decoded before the
damage; a stream that cannot be decoded under the cap (br on a brotli before 1.2)
is left encoded, like a corrupt one. No Scrapy here: the size-cap middleware and
the verdicts both use it.
"""

from __future__ import annotations

import io
import zlib
from itertools import chain
from typing import TYPE_CHECKING, Any

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


class _Capped(Exception):
    """Output reached the cap (internal)."""


def _drain(step: Callable[[int], bytes], out: bytearray, cap: int) -> None:
    """Call ``step(max_len)`` until it yields nothing, appending at most ``cap`` bytes."""
    while True:
        room = cap - len(out)
        chunk = step(min(_STEP, room + 1))
        if not chunk:
            return
        out += chunk
        if len(out) > cap:
            del out[cap:]
            raise _Capped


def _zlib_capped(data: bytes, wbits: int, cap: int, out: bytearray) -> None:
    # Several gzip members in a row are one body (RFC 1952 section 2.2).
    while data:
        d = zlib.decompressobj(wbits)
        pending = data

        def step(n: int, d: Any = d) -> bytes:
            nonlocal pending
            chunk: bytes = d.decompress(pending, n)
            pending = d.unconsumed_tail
            return chunk

        _drain(step, out, cap)
        if not d.eof:
            out += d.flush()[: cap - len(out)]
            return
        data = d.unused_data if wbits != -15 else b""
        if data.strip(b"\x00") == b"":
            return


def _run(
    fill: Callable[[bytes, int, bytearray], None],
    data: bytes,
    cap: int,
    errors: tuple[type[Exception], ...],
) -> bytes:
    """Run a decoder that fills ``out``; a corrupt or truncated stream keeps what came out."""
    out = bytearray()
    try:
        fill(data, cap, out)
    except _Capped:
        pass
    except errors:
        if not out:
            raise
    return bytes(out)


def _gunzip(data: bytes, cap: int) -> bytes:
    return _run(lambda d, c, o: _zlib_capped(d, 16 + zlib.MAX_WBITS, c, o), data, cap,
                (zlib.error,))


def _inflate(data: bytes, cap: int) -> bytes:
    try:
        return _run(lambda d, c, o: _zlib_capped(d, zlib.MAX_WBITS, c, o), data, cap,
                    (zlib.error,))
    except zlib.error:
        # Raw deflate without the zlib wrapper (some servers send it).
        return _run(lambda d, c, o: _zlib_capped(d, -zlib.MAX_WBITS, c, o), data, cap,
                    (zlib.error,))


def _brotli_fill(data: bytes, cap: int, out: bytearray) -> None:
    if not BROTLI_BOUNDED:
        raise brotli.error("brotli before 1.2 cannot decode under a size cap")
    d = brotli.Decompressor()
    first = [True]

    def step(n: int) -> bytes:
        if d.is_finished():
            return b""
        try:
            chunk: bytes = d.process(data if first[0] else b"", output_buffer_limit=n)
        except TypeError as exc:  # a brotli without output_buffer_limit: not decoded
            raise brotli.error(f"brotli cannot decode under a size cap: {exc}") from exc
        first[0] = False
        return chunk

    _drain(step, out, cap)


def _unbrotli(data: bytes, cap: int) -> bytes:
    return _run(_brotli_fill, data, cap, (brotli.error,))


def _zstd_fill(data: bytes, cap: int, out: bytearray) -> None:
    reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True)
    _drain(reader.read, out, cap)


def _unzstd(data: bytes, cap: int) -> bytes:
    return _run(_zstd_fill, data, cap, (zstandard.ZstdError,))


_DECODERS: dict[bytes, Callable[[bytes, int], bytes]] = {
    b"gzip": _gunzip,
    b"x-gzip": _gunzip,
    b"deflate": _inflate,
    b"br": _unbrotli,
    b"zstd": _unzstd,
}
DECODED = frozenset(_DECODERS)  # the content codings decoded here


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
    codings = list(encodings)
    truncated = False
    while codings:
        decoder = _DECODERS.get(codings[-1])
        if decoder is None:
            break
        try:
            decoded = decoder(body, cap + 1)
        except (zlib.error, brotli.error, zstandard.ZstdError, EOFError, OSError):
            return body, codings, truncated
        if len(decoded) > cap:
            decoded = decoded[:cap]
            truncated = True
        body = decoded
        codings.pop()
    return body, codings, truncated


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
    if isinstance(content_encoding, str):
        # A character latin-1 cannot hold names no coding: "?" is an unknown one.
        content_encoding = content_encoding.encode("latin-1", "replace")
    if isinstance(content_encoding, bytes):
        content_encoding = [content_encoding]
    codings = split_encodings(content_encoding or [])
    if not codings:
        return body[:limit]
    head, left, _ = decode_capped(body, codings, limit)
    return head[:limit] if not left else body[:limit]


