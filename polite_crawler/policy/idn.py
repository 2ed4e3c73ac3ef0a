"""International host names in their ASCII form, as a browser spells them.

A link's host is the host a browser would connect to: the WHATWG URL standard's
"domain to ASCII", which is UTS #46 ToASCII with non-transitional processing
(``CheckHyphens`` false, ``CheckBidi`` and ``CheckJoiners`` true,
``UseSTD3ASCIIRules`` false), with one rule more: a name DNS cannot hold (an
empty label, a label over 63 octets) is refused (``VerifyDnsLength``), as it was
before; no request could reach it. Non-transitional matters:
``faß.de`` is ``xn--fa-hia.de`` and ``βόλος.com`` is ``xn--nxasmm1c.com``, not
``fass.de`` and ``xn--nxasmq6b.com`` as IDNA 2003 (Python's ``"idna"`` codec)
maps them; those are other registered names, usually someone else's.

The mapping (case folding included) is UTS #46's own: a host is not
lower-cased before it, since ``str.lower`` turns a final capital sigma into the
final small sigma (U+03C2) where UTS #46 maps every capital sigma to U+03C3.

The work is done by ada-url, the WHATWG URL parser (its host parser, fed one
host): it agrees with the standard's published host cases (the web platform
tests' ``toascii.json`` and ``IdnaTestV2.json``, run in tests/test_policy_idn.py).
The ``idna`` package applies IDNA 2008's stricter rules after the UTS #46
mapping and refuses about one non-ASCII host in six of those cases that a
browser follows (leading or trailing hyphens, symbols, long labels).
"""

from __future__ import annotations

import re

import ada_url

# Forbidden domain code points of the WHATWG URL standard that would change how a URL
# parser reads the host ("/", "?", "#", "@", ":", "\\" end it; tabs and newlines are
# dropped; "%" starts an escape, and the caller has decoded the escapes already):
# refused before the host goes to the parser. The others ("<", ">", "^", "|") may be
# part of a character the mapping composes ("<" and U+0338 are "≮"), so the parser
# judges them after the mapping, as the standard says.
_FORBIDDEN = re.compile(r"[\x00-\x20#%/:?@\[\\\]\x7f]")


class IDNAError(ValueError):
    """The host has no ASCII form a browser would connect to."""


def to_ascii(host: str) -> str:
    """The ASCII form of a host name (no port, escapes decoded), lower-case.

    A trailing dot is kept as written. The URL standard leaves an all-ASCII host as
    written but for its case, ``xn--`` labels unchecked (``xn--a`` stays ``xn--a``);
    the callers call this only for a host with a character that is not ASCII.

    >>> to_ascii("Faß.de"), to_ascii("ΒΌΛΟΣ.com"), to_ascii("bücher.example.")
    ('xn--fa-hia.de', 'xn--nxasmq6b.com', 'xn--bcher-kva.example.')
    >>> to_ascii("日本語。\\uff2a\\uff30")  # an ideographic full stop, fullwidth letters
    'xn--wgv71a119e.jp'
    >>> to_ascii("\u200d.example")  # a joiner out of context  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    polite_crawler.policy.idn.IDNAError: host '\u200d.example' has no IDNA form
    """
    if not host or _FORBIDDEN.search(host):
        raise IDNAError(f"host {host!r} has characters no host name holds")
    try:
        ascii_host = ada_url.URL(f"http://{host}/").hostname
    except ValueError as exc:
        raise IDNAError(f"host {host!r} has no IDNA form") from exc
    if not ascii_host or not ascii_host.isascii():
        raise IDNAError(f"host {host!r} has no IDNA form")
    # UTS #46 VerifyDnsLength, which the URL standard leaves off: a name DNS cannot
    # hold (an empty label, a label over 63 octets, over 253 in all) is no host
    # the crawler can fetch.
    name = str(ascii_host).rstrip(".")
    labels = name.split(".")
    if not name or len(name) > 253 or not all(0 < len(label) <= 63 for label in labels):
        raise IDNAError(f"host {host!r} has no DNS name (an empty or over-long label)")
    return str(ascii_host)

