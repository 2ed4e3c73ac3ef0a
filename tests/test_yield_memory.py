"""The yield monitor's compact memory: the same verdicts as counting each remembered
page's sample, at a few KB an origin.

The reference below is the monitor as it was written first (each page's sample a
frozenset, a Counter of the samples of the last ``memory_pages`` pages, a deque of
outcomes); the monitor now keeps each hash once with its last page. Hypothesis drives
both with the same pages (sampled hashes drawn from a small range so pages share them,
empty samples judged by their whole text, several origins under a small ``max_origins``)
and every verdict must be equal.
"""

from __future__ import annotations

import random
import tracemalloc
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from polite_crawler.policy.traps import YieldLimits, YieldMonitor, YieldVerdict, shingles


@dataclass
class _RefOrigin:
    recent: deque[tuple[frozenset[int], int]] = field(default_factory=deque)
    seen: Counter[int] = field(default_factory=Counter)
    wholes: Counter[int] = field(default_factory=Counter)
    outcomes: deque[bool] = field(default_factory=deque)


class _Reference:
    def __init__(self, limits: YieldLimits) -> None:
        self.limits = limits
        self._origins: OrderedDict[str, _RefOrigin] = OrderedDict()
        self._stopped: set[str] = set()

    def observe_sample(self, origin: str, sample: frozenset[int], whole: int) -> YieldVerdict:
        lim = self.limits
        state = self._origins.pop(origin, None) or _RefOrigin()
        self._origins[origin] = state
        if len(self._origins) > lim.max_origins:
            self._origins.popitem(last=False)
        seen = state.seen
        if sample:
            novelty = 1.0 - sum(map(seen.__contains__, sample)) / len(sample)
        else:
            novelty = 0.0 if state.wholes[whole] else 1.0
        productive = novelty >= lim.min_novelty
        state.recent.append((sample, whole))
        seen.update(sample)
        state.wholes[whole] += 1
        if len(state.recent) > lim.memory_pages:
            old_sample, old_whole = state.recent.popleft()
            for h in old_sample:
                n = seen[h]
                if n > 1:
                    seen[h] = n - 1
                else:
                    del seen[h]
            state.wholes[old_whole] -= 1
            if state.wholes[old_whole] <= 0:
                del state.wholes[old_whole]
        state.outcomes.append(productive)
        if len(state.outcomes) > lim.window:
            state.outcomes.popleft()
        share = sum(state.outcomes) / len(state.outcomes)
        if len(state.outcomes) >= lim.window and share < lim.min_share:
            self._stopped.add(origin)
        return YieldVerdict(novelty, productive, share, origin in self._stopped)


_page = st.tuples(
    st.sampled_from(["http://a", "http://b", "http://c", "http://d"]),
    st.sets(st.integers(0, 60).map(lambda h: h * 0x9E3779B97F4A7C15 % 2**64), max_size=12),
    st.integers(0, 5),
)


@settings(max_examples=300, deadline=None)
@given(pages=st.lists(_page, max_size=120), memory_pages=st.integers(1, 7),
       window=st.integers(1, 9), min_share=st.sampled_from([0.0, 0.1, 0.34, 0.5, 1.0]),
       min_novelty=st.sampled_from([0.0, 0.2, 0.5, 0.75, 1.0]), max_origins=st.integers(1, 4))
def test_same_verdicts_as_counting_each_remembered_page(
        pages: list[tuple[str, set[int], int]], memory_pages: int, window: int,
        min_share: float, min_novelty: float, max_origins: int) -> None:
    lim = YieldLimits(window=window, min_share=min_share, min_novelty=min_novelty,
                      memory_pages=memory_pages, max_origins=max_origins)
    new, ref = YieldMonitor(lim), _Reference(lim)
    for origin, sample, whole in pages:
        compact = np.array(sorted(sample), dtype=np.uint64)
        assert new.observe_sample(origin, compact, whole) == \
            ref.observe_sample(origin, frozenset(sample), whole)


def test_same_verdicts_on_texts() -> None:
    """Texts that share sentences, repeat, and are too short to sample."""
    rnd = random.Random(7)
    sentences = [" ".join(f"w{rnd.randrange(400)}" for _ in range(12)) for _ in range(40)]
    lim = YieldLimits(window=30, min_share=0.1, min_novelty=0.2, memory_pages=100)
    new, ref = YieldMonitor(lim), _Reference(lim)
    for _ in range(400):
        text = " ".join(rnd.choices(sentences, k=rnd.randrange(0, 8))) or rnd.choice(["a", "b c"])
        sample, whole = shingles(text)
        assert new.observe_sample("http://e", sample, whole) == \
            ref.observe_sample("http://e", frozenset(sample.tolist()), whole)


def test_a_small_site_costs_a_few_kb() -> None:
    """Three pages of about 800 words an origin: the monitor keeps a few KB of it (the
    frozensets and Counter took about 40 KB)."""
    rnd = random.Random(3)
    texts = [" ".join(f"w{rnd.randrange(5000)}" for _ in range(800)) for _ in range(3)]
    samples = [shingles(t) for t in texts]
    mon = YieldMonitor(YieldLimits(window=30, min_share=0.1, min_novelty=0.2))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(200):
            for sample, whole in samples:
                mon.observe_sample(f"http://site{i}.test", sample.copy(), whole)
        per_site = (tracemalloc.get_traced_memory()[0] - before) / 200
    finally:
        tracemalloc.stop()
    assert per_site < 6_000, per_site
