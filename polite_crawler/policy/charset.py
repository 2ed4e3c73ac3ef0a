"""Charset labels a response may carry, and the ones that must be ignored."""

from __future__ import annotations

import codecs
import re

_CHARSET_PARAM = re.compile(r";\s*charset\s*=\s*(\"[^\"]*\"|[^;]*)", re.IGNORECASE)


def usable_charset(label: str) -> bool:
    """True when ``label`` names a text encoding that can decode with errors="replace".

    A label such as ``base64``, ``uu``, ``zlib``, ``rot13`` or ``hex`` names a codec
    that is not a text encoding; ``idna`` refuses ``errors="replace"``. Decoding a
    page with them raises instead of giving text.

    >>> [usable_charset(x) for x in ("utf-8", "latin-1", "base64", "idna", "nope", "")]
    [True, True, False, False, False, False]
    """
    label = label.strip().strip('"').strip()
    if not label or "\x00" in label:
        return False
    try:
        info = codecs.lookup(label)
    except (LookupError, ValueError):
        return False
    if not getattr(info, "_is_text_encoding", True):
        return False
    try:
        b"ab\xff".decode(info.name, errors="replace")
    except (UnicodeError, LookupError, ValueError, TypeError):
        return False
    return True


def strip_unusable_charset(content_type: str) -> str | None:
    """``content_type`` without a charset parameter that cannot decode text, or None if fine.

    >>> strip_unusable_charset("text/html; charset=base64")
    'text/html'
    >>> strip_unusable_charset("text/html; charset=utf-8") is None
    True
    """
    match = _CHARSET_PARAM.search(content_type)
    if match is None or usable_charset(match.group(1)):
        return None
    return (content_type[: match.start()] + content_type[match.end():]).strip()
