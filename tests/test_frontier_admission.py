"""The URL rules of a batch of canonical URLs (a sitemap's entries) are judge's, URL by URL."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st

from polite_crawler.frontier.admission import UrlRules
from polite_crawler.policy.traps import TrapLimits, YieldLimits, YieldMonitor
from polite_crawler.policy.urls import URLError, canonicalize
from tests.test_frontier_bulk import A, B, E, F, _Setup

LIMITS = TrapLimits(max_depth=10, max_url_length=2000, max_query_params=5, max_segment_repeats=3)

if TYPE_CHECKING:
    from pathlib import Path

_origins = st.sampled_from([A, B, E, "http://u:p@127.0.0.9:8001", "https://[::1]",
                            "http://example.org"])
_segments = st.sampled_from(["a", "b", "a", "x.html", "%41", "é", "", "l" * 40])
_queries = st.sampled_from(["", "?a=1", "?a&b&c&d&e&f", "?a=1&b=2"])


def _canonical(urls: list[str], strip: list[str]) -> list[str]:
    out = []
    for url in urls:
        try:
            out.append(canonicalize(url, strip_params=strip))
        except URLError:
            continue
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_origins, st.lists(_segments, max_size=6), _queries), max_size=12),
       st.integers(0, 12), st.sampled_from([[], ["b"]]),
       st.sampled_from([LIMITS, replace(LIMITS, max_url_length=60, max_segment_repeats=2)]))
def test_judge_canonical_is_judge_of_each_url(found: list[tuple[str, list[str], str]],
                                             depth: int, strip: list[str],
                                             limits: TrapLimits) -> None:
    urls = _canonical([f"{o}/{'/'.join(s)}{q}" for o, s, q in found], strip)
    monitor = YieldMonitor(YieldLimits(window=30, min_share=0.1, min_novelty=0.2))
    monitor._stopped.add(B)  # as the yield monitor does when it stops an origin
    rules = UrlRules(limits, strip, monitor)
    judged = [rules.judge(url, depth, canonical_form=True) for url in urls]
    assert rules.judge_canonical(urls, depth) == (
        [j.reason for j in judged], [j.origin for j in judged])


def _queue_listed(tmp: Path, found: list[str], *, one_by_one: bool,
                  ) -> tuple[set[str], dict[str, object]]:
    s = _Setup(tmp)
    try:
        s.ctx.robots.record_answer(A, 200, b"User-agent: *\nAllow: /\nAllow: /private\n")
        batches = [[u] for u in found] if one_by_one else [found]
        for batch in batches:
            requests, _n = s.spider.queue_pages([(u, None) for u in batch], depth=0,
                                                source="sitemap", canonical_form=True)
            assert requests == []
        return s.queued(), s.stats()
    finally:
        s.close()


def test_listed_urls_in_one_batch_are_admitted_as_one_by_one(tmp_path: Path) -> None:
    # Per origin: allowed by a robots.txt of Allow lines only (A), refused by one with a
    # Disallow (E), not known yet (F), stopped for low yield (B); duplicates; a trap.
    found = [f"{A}/a", f"{A}/private/b", f"{E}/private/x", f"{E}/public/y", f"{A}/a",
             f"{F}/private/z", f"{B}/p", f"{A}/x/y/x/y/x/z", f"{E}/public/y", f"{A}/c?q=1"]
    batched = _queue_listed(tmp_path / "batch", found, one_by_one=False)
    assert batched == _queue_listed(tmp_path / "single", found, one_by_one=True)
    queued, stats = batched
    assert queued == {f"{A}/a", f"{A}/private/b", f"{E}/public/y", f"{F}/private/z",
                      f"{A}/c?q=1"}
    assert stats == {"polite/robots/disallowed": 1, "polite/frontier/duplicate": 2,
                     "polite/traps/low_yield": 1, "polite/traps/repeated_segment": 1,
                     "scheduler/enqueued": 5}
