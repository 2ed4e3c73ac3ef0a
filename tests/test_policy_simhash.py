"""SimHash near duplicates: recall and false positives on a corpus built here; the index."""

from __future__ import annotations

import random

import numpy as np
import pytest

from polite_crawler.policy.simhash import (
    MAX_DISTANCE,
    SHINGLE,
    SimHashIndex,
    distance,
    fingerprint,
    from_signed,
    shingle_hashes,
    simhash,
    to_signed,
)
from polite_crawler.policy.text import normalise, text_hash, word_hash, word_hashes, words
from tests.neardup_corpus import build_corpus


@pytest.fixture(scope="module")
def corpus():  # type: ignore[no-untyped-def]
    return build_corpus(200, seed=11)


def test_recall_and_no_false_positive(corpus) -> None:  # type: ignore[no-untyped-def]
    fa = [simhash(t) for t in corpus.articles]
    fv = [simhash(v.text) for v in corpus.variants]
    hits = [distance(f, fa[v.base]) <= MAX_DISTANCE
            for f, v in zip(fv, corpus.variants, strict=True)]
    recall = sum(hits) / len(hits)
    assert recall >= 0.95, recall
    for kind in ("date", "byline", "sentence", "date+byline"):
        per = [h for h, v in zip(hits, corpus.variants, strict=True) if v.kind == kind]
        assert sum(per) / len(per) >= 0.85, kind
    # Different articles on the same template, and variants against other articles.
    a = np.array(fa, dtype=np.uint64)
    v = np.array(fv, dtype=np.uint64)
    d_aa = np.bitwise_count(a[:, None] ^ a[None, :])[np.triu_indices(len(a), 1)]
    bases = np.array([x.base for x in corpus.variants])
    d_va = np.bitwise_count(v[:, None] ^ a[None, :])[bases[:, None] != np.arange(len(a))[None, :]]
    assert int(np.sum(d_aa <= MAX_DISTANCE)) == 0
    assert int(np.sum(d_va <= MAX_DISTANCE)) == 0


def test_digits_normalised_matter(corpus) -> None:  # type: ignore[no-untyped-def]
    """The measured reason for normalising digits: dates move fewer bits."""
    dates = [v for v in corpus.variants if v.kind == "date"]
    with_digits = [distance(simhash(v.text, digits=False), simhash(corpus.articles[v.base],
                                                                  digits=False)) for v in dates]
    normalised = [distance(simhash(v.text), simhash(corpus.articles[v.base])) for v in dates]
    assert sum(normalised) < sum(with_digits)
    assert SHINGLE == 3


def test_word_hashes_match_the_plain_rule() -> None:
    text = ("Published 12 March 2024, 10:45 by A. Smith \u2014 Caf\u00e9 STRASSE "
            "\ufb01ne \U0001d518nicode \u65e5\u672c\u8a9e x_y 3rd \u0663\u0664\u0665 "
            "end\u00a0nbsp")
    assert words(text) == ["published", "0", "march", "0", "0", "0", "by", "a", "smith",
                           "caf\u00e9", "strasse", "fine", "unicode", "\u65e5\u672c\u8a9e", "x_y",
                           "0", "0", "end", "nbsp"]
    assert list(word_hashes(text)) == [word_hash(w) for w in words(text)]
    plain = words(text, digits=False)
    assert list(word_hashes(text, digits=False)) == [word_hash(w) for w in plain]
    assert word_hashes("").size == 0 and word_hashes(" ,. ").size == 0


def test_exact_hash_normalisation() -> None:
    assert normalise(" A\tb\n\nC ") == "a b c"
    assert text_hash("Hello World") == text_hash("hello   WORLD\n")
    assert text_hash("Hello World") != text_hash("Hello World!")


def test_fingerprint_and_signed_round_trip() -> None:
    h, n = fingerprint("one two three four five six")
    assert n == 6 and 0 <= h < 1 << 64
    for x in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        assert from_signed(to_signed(x)) == x and -(1 << 63) <= to_signed(x) < 1 << 63
    assert simhash("") == 0


def _flip(h: int, k: int, rng: random.Random) -> int:
    for b in rng.sample(range(64), k):
        h ^= 1 << b
    return h


def test_index_finds_everything_within_distance() -> None:
    rng = random.Random(3)
    idx = SimHashIndex(MAX_DISTANCE, buffer_size=64)
    stored = [rng.getrandbits(64) for _ in range(3000)]
    idx.add_many(stored)
    for _ in range(300):
        i = rng.randrange(len(stored))
        k = rng.randint(0, MAX_DISTANCE)
        q = _flip(stored[i], k, rng)
        found = idx.near(q)
        assert i in found
        brute = sorted(j for j, h in enumerate(stored) if distance(h, q) <= MAX_DISTANCE)
        assert sorted(found) == brute
        assert found[0] == i or distance(stored[found[0]], q) <= k  # nearest first
    q = _flip(stored[5], MAX_DISTANCE + 1, rng)
    assert 5 not in idx.near(q)
    idx.remove(5)
    assert 5 not in idx.near(stored[5])
    assert len(idx) == len(stored) - 1


@pytest.mark.parametrize("k", [0, 3, 8, 12])
def test_index_other_distances(k: int) -> None:
    rng = random.Random(k)
    idx = SimHashIndex(k, buffer_size=16)
    stored = [rng.getrandbits(64) for _ in range(500)]
    idx.add_many(stored)
    for i in range(0, 500, 25):
        q = _flip(stored[i], k, rng)
        assert sorted(idx.near(q)) == sorted(j for j, h in enumerate(stored) if distance(h, q) <= k)


def test_index_is_sublinear_at_100k() -> None:
    """Probes, not a scan: a lookup at 100,000 pages compares a few hundred fingerprints.

    (Timings are in bench/simhash_index.py, not here.)
    """
    rng = np.random.default_rng(5)
    hashes = [int(x) for x in rng.integers(0, 1 << 63, size=100_000, dtype=np.int64)]
    idx = SimHashIndex(MAX_DISTANCE)
    idx.add_many(hashes)
    r = random.Random(1)
    compared = []
    for _ in range(200):
        i = r.randrange(len(hashes))
        assert i in idx.near(_flip(hashes[i], MAX_DISTANCE, r))
        compared.append(idx.last_candidates)
    # The unmerged buffer (< 2048) plus the probed band values: far under a scan.
    assert max(compared) < 2048 + 1000, max(compared)
    assert sum(compared) / len(compared) < 0.03 * len(hashes)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 50, 5000])
def test_distinct_shingles_are_numpy_unique(size: int) -> None:
    # The shingles' distinct values are taken without np.unique (cheaper): the same
    # array, repeats and the largest 64-bit values included.
    rng = np.random.default_rng(size)
    tokens = rng.integers(0, 40, size=size, dtype=np.uint64)  # few words: many repeats
    tokens[::7] = np.uint64((1 << 64) - 1)
    mixed = shingle_hashes(tokens, distinct=False)
    got = shingle_hashes(tokens)
    assert got.dtype == np.uint64
    assert np.array_equal(got, np.unique(mixed))
