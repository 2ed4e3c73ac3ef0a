"""The yield monitor's page numbers kept small: counted from the oldest page remembered.

Each remembered hash carries its last page's number less the origin's ``base``, which
moves up as pages leave the memory, so the numbers stay below two memories: 1 byte a hash
for memories up to 128 pages (the default is 100), 2 up to 32,768, 4 beyond. Verdicts
are those of the monitor that counts each remembered page's sample (the reference of
``test_yield_memory``), over more pages than 2 bytes can count.
"""

from __future__ import annotations

import random

import numpy as np

from polite_crawler.policy.traps import YieldLimits, YieldMonitor
from tests.test_yield_memory import _Reference


def _drive(memory_pages: int, pages: int, seed: int) -> YieldMonitor:
    rnd = random.Random(seed)
    lim = YieldLimits(window=7, min_share=0.0, min_novelty=0.5, memory_pages=memory_pages)
    new, ref = YieldMonitor(lim), _Reference(lim)
    pool = [h * 0x9E3779B97F4A7C15 % 2**64 for h in range(40)]
    for _ in range(pages):
        sample = set(rnd.sample(pool, rnd.randrange(0, 3)))
        whole = rnd.randrange(6)
        compact = np.array(sorted(sample), dtype=np.uint64)
        assert new.observe_sample("http://e", compact, whole) == \
            ref.observe_sample("http://e", frozenset(sample), whole)
    return new


def test_more_pages_than_two_bytes_count_same_verdicts() -> None:
    mon = _drive(memory_pages=100, pages=70_000, seed=1)
    state = mon._origins["http://e"]
    assert state.last.dtype == np.uint8  # the default memory: 100 pages
    assert state.pages == 70_000 and state.base == 69_900


def test_a_memory_beyond_one_byte_counts_in_two() -> None:
    mon = _drive(memory_pages=200, pages=70_000, seed=3)
    assert mon._origins["http://e"].last.dtype == np.uint16


def test_a_memory_beyond_two_bytes_counts_in_four() -> None:
    mon = _drive(memory_pages=40_000, pages=2_000, seed=2)
    assert mon._origins["http://e"].last.dtype == np.uint32


def test_a_small_site_keeps_nine_bytes_a_hash() -> None:
    """Three pages of about 800 words: hashes 8 bytes and page numbers 1 byte each
    (4 before: 12 bytes a hash)."""
    rnd = random.Random(3)
    mon = YieldMonitor(YieldLimits(window=30, min_share=0.1, min_novelty=0.2))
    for _ in range(3):
        mon.observe("http://site.test", " ".join(f"w{rnd.randrange(5000)}" for _ in range(800)))
    state = mon._origins["http://site.test"]
    assert state.hashes.size > 200
    assert state.hashes.nbytes + state.last.nbytes == 9 * state.hashes.size
