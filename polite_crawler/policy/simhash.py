"""64-bit SimHash over word shingles, and an index that finds near duplicates.

Charikar's SimHash: every feature (here a shingle of ``SHINGLE`` consecutive
normalised words, :func:`polite_crawler.policy.text.words`) is hashed to 64
bits; bit *i* of the fingerprint is 1 when more than half of the distinct
features have bit *i* set. Pages that share most shingles differ in few bits.

The numbers (``SHINGLE``, ``MAX_DISTANCE``, digits normalised) were chosen by
measurement on the corpus of ``tests/neardup_corpus.py`` (see
``bench/simhash_tuning.py``): variants that differ by a date, a byline or one
changed sentence against different articles on one template.

:class:`SimHashIndex` answers "which stored fingerprints are within distance
*k*" without a scan: the 64 bits are cut into *m* bands; two fingerprints
within *k* bits agree to within ``k // m`` bits on at least one band
(pigeonhole), so each band keeps its values sorted and a query probes, per
band, every value within ``k // m`` bits of its own (multi-index hashing,
Norouzi et al. 2012; Manku et al. 2007 use the exact-band case).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from polite_crawler.policy.text import Words, mix64, read_words, text_hash, word_hashes

if TYPE_CHECKING:
    from collections.abc import Iterable

# Shingle size and the largest Hamming distance that still counts as a near
# duplicate; measured, see the module docstring.
SHINGLE = 3
MAX_DISTANCE = 8
# Below this many words a page's fingerprint says too little to link it to another.
MIN_WORDS = 20

_MASK64 = (1 << 64) - 1
_U64 = np.uint64
_PRIME = np.array([0x100000001B3], dtype=_U64)  # to mix word positions within a shingle


def shingle_hashes(tokens: npt.NDArray[np.uint64], shingle: int = SHINGLE, *,
                   distinct: bool = True) -> npt.NDArray[np.uint64]:
    """64-bit hashes of the ``shingle``-word shingles of a sequence of word hashes.

    Distinct and sorted unless ``distinct`` is False (then in text order, repeats kept).
    """
    if not tokens.size:
        return np.zeros(0, dtype=_U64)
    k = min(shingle, tokens.size)
    n = tokens.size - k + 1
    acc = tokens[:n].copy()
    for j in range(1, k):
        acc = acc * _PRIME + tokens[j : j + n]
    mixed = mix64(acc)
    return _distinct(mixed) if distinct else mixed


def _distinct(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """``np.unique(values)`` for a 1-d array, about 3x faster.

    numpy 2.3+ answers ``np.unique`` with a hash table and then sorts its output;
    a sort and a mask of the changes is less work for the same answer.
    """
    out = np.sort(values)
    if out.size > 1:
        keep = np.empty(out.size, dtype=bool)
        keep[0] = True
        np.not_equal(out[1:], out[:-1], out=keep[1:])
        out = out[keep]
    return out


def simhash_of_hashes(features: npt.NDArray[np.uint64]) -> int:
    """The SimHash of a set of 64-bit feature hashes (equal weights)."""
    if features.size == 0:
        return 0
    bits = np.unpackbits(features.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    counts = bits.sum(axis=0, dtype=np.int64)
    out = np.packbits(counts * 2 > features.size, bitorder="little")
    return int(out.view("<u8")[0])


def simhash(text: str, *, shingle: int = SHINGLE, digits: bool = True) -> int:
    """64-bit SimHash of a text over ``shingle``-word shingles of its normalised words.

    >>> a = simhash("Published 3 May 2024. " + "The quick brown fox jumps over the lazy dog. " * 9)
    >>> b = simhash("Published 9 May 2025. " + "The quick brown fox jumps over the lazy dog. " * 9)
    >>> distance(a, b) <= MAX_DISTANCE
    True
    """
    return simhash_of_hashes(shingle_hashes(word_hashes(text, digits=digits), shingle))


def fingerprint(text: str) -> tuple[int, int]:
    """The project's SimHash of a main text, and how many words it has."""
    tokens = word_hashes(text)
    return simhash_of_hashes(shingle_hashes(tokens)), int(tokens.size)


def fingerprints(text: str, read: Words | None = None) -> tuple[str, int, int]:
    """:func:`~polite_crawler.policy.text.text_hash`, SimHash and word count of a main text.

    ``read``: the text's :class:`~polite_crawler.policy.text.Words` when they are
    at hand (the yield monitor read them), else they are read here.

    >>> fingerprints("Hello world") == (text_hash("Hello world"), *fingerprint("Hello world"))
    True
    """
    if read is None or read.text is not text:
        read = read_words(text)
    return (text_hash(read.folded, folded=True), simhash_of_hashes(shingle_hashes(read.normal)),
            int(read.normal.size))


def distance(a: int, b: int) -> int:
    """Hamming distance of two 64-bit fingerprints."""
    return ((a ^ b) & _MASK64).bit_count()


def to_signed(h: int) -> int:
    """The fingerprint as a signed 64-bit integer (SQL BIGINT)."""
    return h - (1 << 64) if h >= 1 << 63 else h


def from_signed(v: int) -> int:
    return v & _MASK64


def _band_masks(width: int, radius: int) -> npt.NDArray[np.uint64]:
    """Every XOR mask of ``width`` bits with at most ``radius`` bits set."""
    masks = [0]
    for r in range(1, radius + 1):
        for bits in itertools.combinations(range(width), r):
            masks.append(sum(1 << b for b in bits))
    return np.asarray(masks, dtype=_U64)


class SimHashIndex:
    """Fingerprints by position, searchable for those within ``max_distance`` bits.

    ``add`` returns the new entry's position (0, 1, 2, ...); ``near`` returns
    the positions of live entries within ``max_distance`` of a fingerprint.
    New entries go to a small buffer that is scanned directly and merged into
    the sorted bands when it grows, so adding stays cheap.
    """

    def __init__(self, max_distance: int = MAX_DISTANCE, bands: int | None = None,
                 buffer_size: int = 2048) -> None:
        if not 0 <= max_distance < 64:
            raise ValueError("max_distance must be within 0..63")
        if bands is None:
            # Probe radius 2 at most: for k = 8, 3 bands of 21-22 bits probe 254 values
            # each, and a probed value holds few entries up to millions of pages
            # (bench/simhash_index.py: 0.35 ms a lookup at 100,000 pages).
            bands = max(1, (max_distance + 3) // 3)
        bands = max(1, min(bands, 16))
        self.max_distance = max_distance
        self.bands = bands
        self.radius = max_distance // bands
        widths = [64 // bands + (1 if i < 64 % bands else 0) for i in range(bands)]
        self._shifts = [sum(widths[:i]) for i in range(bands)]
        self._band_mask = [(1 << w) - 1 for w in widths]
        self._probes = [_band_masks(w, self.radius) for w in widths]
        self._hashes = np.zeros(1024, dtype=_U64)
        self._alive = np.zeros(1024, dtype=bool)
        self._size = 0
        # Per band: sorted band values and the positions they belong to.
        self._keys: list[npt.NDArray[np.uint64]] = [np.zeros(0, dtype=_U64) for _ in widths]
        self._pos: list[npt.NDArray[np.int64]] = [np.zeros(0, dtype=np.int64) for _ in widths]
        self._merged = 0  # positions below this are in the bands
        self.buffer_size = buffer_size
        self.last_candidates = 0  # fingerprints compared by the last near(): the work done

    def __len__(self) -> int:
        return int(self._alive[: self._size].sum())

    def add(self, h: int) -> int:
        if self._size == len(self._hashes):
            self._hashes = np.concatenate([self._hashes, np.zeros_like(self._hashes)])
            self._alive = np.concatenate([self._alive, np.zeros_like(self._alive)])
        pos = self._size
        self._hashes[pos] = h & _MASK64
        self._alive[pos] = True
        self._size += 1
        if self._size - self._merged >= self.buffer_size:
            self._merge()
        return pos

    def add_many(self, hashes: Iterable[int]) -> range:
        start = self._size
        for h in hashes:
            self.add(h)
        return range(start, self._size)

    def remove(self, pos: int) -> None:
        self._alive[pos] = False

    def fingerprint(self, pos: int) -> int:
        return int(self._hashes[pos])

    def _merge(self) -> None:
        new = np.arange(self._merged, self._size, dtype=np.int64)
        values = self._hashes[self._merged : self._size]
        for b in range(self.bands):
            keys = (values >> _U64(self._shifts[b])) & _U64(self._band_mask[b])
            order = np.argsort(keys, kind="stable")
            keys, pos = keys[order], new[order]
            at = np.searchsorted(self._keys[b], keys, side="right")
            self._keys[b] = np.insert(self._keys[b], at, keys)
            self._pos[b] = np.insert(self._pos[b], at, pos)
        self._merged = self._size

    def near(self, h: int) -> list[int]:
        """Positions of live entries within ``max_distance`` bits of ``h``, nearest first."""
        h &= _MASK64
        q = np.array([h], dtype=_U64)
        found: list[npt.NDArray[np.int64]] = []
        for b in range(self.bands):
            if not len(self._keys[b]):
                continue
            key = (q >> _U64(self._shifts[b])) & _U64(self._band_mask[b])
            probes = key ^ self._probes[b]
            lo = np.searchsorted(self._keys[b], probes, side="left")
            counts = np.searchsorted(self._keys[b], probes, side="right") - lo
            total = int(counts.sum())
            if total:
                # Positions lo[i] .. lo[i] + counts[i] - 1 of every probe, gathered at once.
                starts = np.repeat(lo - (np.cumsum(counts) - counts), counts)
                found.append(self._pos[b][starts + np.arange(total)])
        if self._merged < self._size:
            found.append(np.arange(self._merged, self._size, dtype=np.int64))
        if not found:
            self.last_candidates = 0
            return []
        cand = np.unique(np.concatenate(found))
        self.last_candidates = int(cand.size)
        cand = cand[self._alive[cand]]
        dist = np.bitwise_count(self._hashes[cand] ^ q)
        keep = dist <= self.max_distance
        cand, dist = cand[keep], dist[keep]
        order = np.lexsort((cand, dist))
        return [int(p) for p in cand[order]]
