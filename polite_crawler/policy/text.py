"""Text normalisation for content fingerprints (exact hash and SimHash).

Two pages carry the same content when their *normalised* main text is the same:
Unicode compatibility forms folded (NFKC), case folded, all runs of white space
one space. The exact-duplicate hash is taken over that form.

For near duplicates the text is cut into words (maximal runs of letters, digits
and ``_``, as the regular expression ``\\w+``) and every word with a digit in it
becomes ``0``, so a changed date, time, counter, page number or reference does
not move a page's SimHash (measured in ``bench/simhash_tuning.py``). :func:`words`
states the rule in plain Python; :func:`read_words` computes the same words'
hashes with numpy, about ten times faster, both as written and normalised in one
pass, and a test holds them to each other.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")

_U64 = np.uint64
_MASK64 = (1 << 64) - 1
# Polynomial hash of a word's code points, base B (odd, so invertible mod 2**64).
_B = 0x100000001B3
_B_INV = pow(_B, -1, 1 << 64)
_BMP = 0x10000


def normalise(text: str) -> str:
    """The form of a text that exact-duplicate hashing sees.

    >>> normalise("  Caf\\u00e9\\n\\tMENU  \\ufb01ne ")
    'café menu fine'
    """
    return " ".join(fold(text).split())


def text_hash(text: str, *, folded: bool = False) -> str:
    """Hex digest (128 bits) of the normalised text: equal for exact duplicates.

    ``folded``: ``text`` is :func:`fold` ed already.

    >>> text_hash("Hello  World") == text_hash("hello world\\n")
    True
    """
    plain = " ".join((text if folded else fold(text)).split())
    return hashlib.blake2b(plain.encode("utf-8"), digest_size=16).hexdigest()


def fold(text: str) -> str:
    """Unicode compatibility forms folded (NFKC), then case folded."""
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str, *, digits: bool = True) -> list[str]:
    """The normalised words of ``text``; a word with a digit is ``0`` unless ``digits`` is False.

    >>> words("Published 12 March 2024, 10:45 by A. Smith, ref A3")
    ['published', '0', 'march', '0', '0', '0', 'by', 'a', 'smith', 'ref', '0']
    """
    found = _WORD.findall(fold(text))
    if digits:
        return ["0" if _DIGITS.search(w) else w for w in found]
    return found


def mix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser: every input bit moves about half the output bits."""
    x = x ^ (x >> _U64(30))
    x = x * _U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> _U64(27))
    x = x * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def word_hash(word: str) -> int:
    """64-bit hash of one normalised word (the reference for :func:`word_hashes`)."""
    h = 0
    for ch in word:
        h = (h * _B + ord(ch) + 1) & _MASK64
    x = np.array([h ^ len(word)], dtype=_U64)
    return int(mix64(x)[0])


@lru_cache(maxsize=1)
def _tables() -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """Which BMP code points are word characters (``\\w``) and digits (``\\d``)."""
    chars = [chr(c) for c in range(_BMP)]
    is_word = np.fromiter((bool(_WORD.fullmatch(c)) for c in chars), dtype=bool, count=_BMP)
    is_digit = np.fromiter((bool(_DIGITS.fullmatch(c)) for c in chars), dtype=bool, count=_BMP)
    return is_word, is_digit


class _Powers:
    """B**i and B**-i mod 2**64 for i < n, grown on demand (a constant table, shared).

    Both arrays are replaced together, so a thread never sees one grown without the other.
    """

    def __init__(self) -> None:
        one = np.ones(1, dtype=_U64)
        self.tables = (one, one)

    def get(self, n: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        tables = self.tables
        if n <= len(tables[0]):
            return tables
        size = max(n, 2 * len(tables[0]))
        one = np.ones(1, _U64)
        fwd = np.concatenate([one, np.cumprod(np.full(size - 1, _B, _U64), dtype=_U64)])
        inv = np.concatenate([one, np.cumprod(np.full(size - 1, _B_INV, _U64), dtype=_U64)])
        self.tables = (fwd, inv)
        return self.tables


_POWERS = _Powers()


@dataclass(frozen=True, eq=False)
class Words:
    """A text's words, hashed once for every comparison that reads them.

    ``raw``: as written (the yield monitor's words); ``normal``: a word with a
    digit in it as ``0`` (the SimHash's). ``folded``: the text :func:`fold` ed,
    which the exact hash reads.
    """

    text: str
    folded: str
    raw: npt.NDArray[np.uint64]
    normal: npt.NDArray[np.uint64]


def read_words(text: str) -> Words:
    """:class:`Words` of ``text``: ``[word_hash(w) for w in words(text, digits=...)]``, fast."""
    folded = fold(text)
    codes = np.frombuffer(folded.encode("utf-32-le"), dtype=np.uint32)
    empty = np.zeros(0, dtype=_U64)
    if not codes.size:
        return Words(text, folded, empty, empty)
    is_word_tab, is_digit_tab = _tables()
    low = np.minimum(codes, _BMP - 1)  # U+FFFF is neither word character nor digit
    is_word = is_word_tab[low]
    is_digit = is_digit_tab[low]
    for i in np.flatnonzero(codes >= _BMP):  # astral code points: rare, ask the regex
        ch = chr(int(codes[i]))
        is_word[i] = bool(_WORD.fullmatch(ch))
        is_digit[i] = bool(_DIGITS.fullmatch(ch))
    edges = np.diff(np.concatenate([[0], is_word.view(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    if not starts.size:
        return Words(text, folded, empty, empty)
    n = codes.size
    fwd, inv = _POWERS.get(n + 1)
    # H(a, b) = sum c_j B**(b-1-j) = B**(b-1) * (S[b] - S[a]), S the prefix sums of c_j B**-j.
    c = codes.astype(_U64) + _U64(1)
    prefix = np.concatenate([np.zeros(1, _U64), np.cumsum(c * inv[:n], dtype=_U64)])
    raw = mix64(fwd[ends - 1] * (prefix[ends] - prefix[starts]) ^ (ends - starts).astype(_U64))
    if is_digit.any():
        digits_before = np.concatenate([[0], np.cumsum(is_digit, dtype=np.int64)])
        has_digit = digits_before[ends] > digits_before[starts]
        normal = np.where(has_digit, _ZERO_WORD, raw)
    else:
        normal = raw
    return Words(text, folded, raw, normal)


def word_hashes(text: str, *, digits: bool = True) -> npt.NDArray[np.uint64]:
    """``[word_hash(w) for w in words(text, digits=digits)]`` as a numpy array, fast."""
    read = read_words(text)
    return read.normal if digits else read.raw


_ZERO_WORD = _U64(word_hash("0"))
