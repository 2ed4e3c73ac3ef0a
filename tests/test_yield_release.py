"""The yield monitor lets an origin's memory go when its crawl is over (``release``).

Released means started afresh: an origin that serves pages again later (a sitemap found
late, a recrawl) is judged as a new origin is, against its own pages from then on, and a
stop is kept whatever is released.
"""

from __future__ import annotations

import random
import tracemalloc

from polite_crawler.policy.traps import YieldLimits, YieldMonitor

YIELD = YieldLimits(window=30, min_share=0.1, min_novelty=0.2)
WORDS = ("river", "stone", "lamp", "harbour", "violet", "engine", "meadow", "copper",
         "signal", "garden", "ledger", "orbit", "canvas", "thunder", "pepper", "bridge")


def _page(rnd: random.Random, n: int = 800) -> str:
    return " ".join(rnd.choice(WORDS) + str(rnd.randrange(5000)) for _ in range(n))


def test_a_released_origin_is_held_no_more() -> None:
    rnd = random.Random(1)
    mon = YieldMonitor(YIELD)
    pages = [_page(rnd) for _ in range(3)]
    for text in pages:  # the word readings' caches filled first: they are no site's
        mon.observe("http://warm.test", text)
    mon.release("http://warm.test")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(50):
            for text in pages:
                mon.observe(f"http://site{i}.test", text)
        held = tracemalloc.get_traced_memory()[0] - before
        for i in range(50):
            assert mon.release(f"http://site{i}.test")
        left = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held > 50 * 2000  # a few KB a site of three pages while it is crawled
    # Nothing of a site once released but the monitor's table, which keeps its size.
    assert left < held / 6, (held, left)
    assert mon.origins() == [] and not mon.remembers("http://site0.test")
    assert not mon.release("http://site0.test")  # twice: nothing more to let go


def test_released_means_judged_afresh() -> None:
    rnd = random.Random(2)
    text = _page(rnd)
    later = [_page(rnd) for _ in range(5)] + [text] * 3
    mon, fresh = YieldMonitor(YIELD), YieldMonitor(YIELD)
    first = mon.observe("http://a.test", text)
    assert first.novelty == 1.0
    assert mon.observe("http://a.test", text).novelty == 0.0  # remembered
    mon.release("http://a.test")
    # Pages that come after (a sitemap found late): the verdicts of a new origin's pages.
    for page in later:
        assert mon.observe("http://a.test", page) == fresh.observe("http://a.test", page)
    assert mon.remembers("http://a.test")


def test_a_stop_outlives_the_release() -> None:
    mon = YieldMonitor(YIELD)
    text = _page(random.Random(3))
    verdicts = [mon.observe("http://loop.test", text) for _ in range(40)]
    assert verdicts[-1].stopped and mon.stopped("http://loop.test")
    assert mon.release("http://loop.test")
    assert mon.stopped("http://loop.test") and not mon.remembers("http://loop.test")


def test_other_origins_keep_their_memory() -> None:
    rnd = random.Random(4)
    mon = YieldMonitor(YIELD)
    text = _page(rnd)
    mon.observe("http://a.test", text)
    mon.observe("http://b.test", text)
    mon.release("http://a.test")
    assert mon.origins() == ["http://b.test"]
    assert mon.observe("http://b.test", text).novelty == 0.0
