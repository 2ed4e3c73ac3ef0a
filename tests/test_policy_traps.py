from __future__ import annotations

import doctest
import random

import pytest

from polite_crawler.policy import traps
from polite_crawler.policy.traps import (
    TrapLimits,
    YieldLimits,
    YieldMonitor,
    html_text,
    url_trap,
)

LIM = TrapLimits(max_depth=10, max_url_length=2000, max_query_params=5, max_segment_repeats=3)
YIELD = YieldLimits(window=30, min_share=0.1, min_novelty=0.2)
_WORDS_TEXT = ("river stone market winter garden copper lantern harbor meadow violin orbit "
               "canyon pepper glacier thunder saddle marble quartz falcon ember willow cedar")
WORDS = _WORDS_TEXT.split()


def test_doctests() -> None:
    assert doctest.testmod(traps).failed == 0


@pytest.mark.parametrize(("url", "depth", "reason"), [
    ("http://e.org/", 0, None),
    ("http://e.org/a", 10, None),
    ("http://e.org/a", 11, "depth"),
    ("http://e.org/" + "x" * 1990, 1, "url_length"),
    ("http://e.org/" + "x" * 1980, 1, None),
    ("http://e.org/s?a=1&b=2&c=3&d=4&e=5", 1, None),
    ("http://e.org/s?a=1&b=2&c=3&d=4&e=5&f=6", 1, "query_params"),
    ("http://e.org/s?a=1&&&b=2", 1, None),
    ("http://e.org/a/b/a/b", 1, None),
    ("http://e.org/a/b/a/b/a", 1, "repeated_segment"),
    ("http://e.org/2024/01/01/post", 1, None),
    ("http://e.org/x/x/x", 1, "repeated_segment"),
    ("http://[bad/", 1, None),
])
def test_url_rules(url: str, depth: int, reason: str | None) -> None:
    assert url_trap(url, depth, LIM) == reason


def test_limits_are_settings() -> None:
    lim = TrapLimits(max_depth=2, max_url_length=30, max_query_params=1, max_segment_repeats=2)
    assert url_trap("http://e.org/a", 3, lim) == "depth"
    assert url_trap("http://e.org/a?b=1&c=2", 1, lim) == "query_params"
    assert url_trap("http://e.org/a/a", 1, lim) == "repeated_segment"
    assert url_trap("http://e.org/" + "y" * 30, 1, lim) == "url_length"


def _article(rnd: random.Random, n: int = 120) -> str:
    return " ".join(rnd.choice(WORDS) + str(rnd.randrange(1000)) for _ in range(n))


NAV = "Home Products About Contact Blog Careers Press Legal Privacy Terms Sitemap Help " * 2


def test_new_articles_keep_an_origin_going() -> None:
    rnd = random.Random(1)
    mon = YieldMonitor(YIELD)
    for _ in range(200):
        v = mon.observe("http://news", NAV + _article(rnd))
        assert v.productive
        assert not v.stopped
    assert v.novelty > 0.7


def test_exact_repeats_stop_the_origin_after_the_window() -> None:
    mon = YieldMonitor(YIELD)
    text = NAV + _article(random.Random(2))
    first = mon.observe("http://loop", text)
    assert first.productive and first.novelty == 1.0
    verdicts = [mon.observe("http://loop", text) for _ in range(40)]
    assert all(v.novelty == 0.0 for v in verdicts)
    stopped_at = next(i for i, v in enumerate(verdicts) if v.stopped)
    assert stopped_at == 28  # the 30th page in the window: 1 of 30 productive
    assert mon.stopped("http://loop")
    assert not mon.stopped("http://other")


def test_near_duplicates_are_unproductive() -> None:
    # A calendar: every month the same page but its name and year.
    mon = YieldMonitor(YIELD)
    body = NAV + " ".join(f"Events calendar slot {d} nothing scheduled" for d in range(1, 31))
    novelties = []
    for month in range(60):
        v = mon.observe("http://cal", f"Calendar month {month % 12} year {2000 + month} " + body)
        novelties.append(v.novelty)
    assert novelties[0] == 1.0
    assert max(novelties[1:]) < 0.2
    assert mon.stopped("http://cal")


def test_faceted_listing_of_known_products_is_unproductive() -> None:
    rnd = random.Random(3)
    products = [f"Product {i} " + _article(rnd, 40) for i in range(12)]
    mon = YieldMonitor(YIELD)
    for p in products:
        assert mon.observe("http://shop", NAV + p).productive
    facets = [(c, s) for c in "red green blue black white pink" for s in "xs s m l xl xxl"]
    stopped = None
    for n, (color, size) in enumerate(facets):
        shown = rnd.sample(products, 3)
        v = mon.observe("http://shop", f"{NAV} Filter color {color} size {size} " + " ".join(shown))
        if v.stopped and stopped is None:
            stopped = n
    assert stopped is not None and stopped < 36


def test_interleaved_real_pages_keep_the_share_up() -> None:
    rnd = random.Random(4)
    mon = YieldMonitor(YIELD)
    dup = NAV + _article(rnd)
    for i in range(300):
        text = NAV + _article(rnd) if i % 5 == 0 else dup  # one page in five is new
        v = mon.observe("http://mixed", text)
    assert not v.stopped
    assert 0.1 <= v.share <= 0.3


def test_short_pages_judged_by_whole_text() -> None:
    mon = YieldMonitor(YIELD)
    assert mon.observe("http://s", "Hello").productive
    assert not mon.observe("http://s", "Hello").productive
    assert mon.observe("http://s", "Hi there").productive


def test_memory_is_bounded() -> None:
    rnd = random.Random(5)
    mon = YieldMonitor(YieldLimits(window=30, min_share=0.1, min_novelty=0.2, memory_pages=10,
                                     max_origins=3))
    for _ in range(50):
        mon.observe("http://big", _article(rnd, 400))
    state = mon._origins["http://big"]
    assert len(state.recent) == 10
    assert len(state.seen) <= 10 * 400
    # Text forgotten after memory_pages counts as new again.
    old = _article(random.Random(99), 200)
    mon.observe("http://big", old)
    for _ in range(10):
        mon.observe("http://big", _article(rnd, 200))
    assert mon.observe("http://big", old).productive
    for i in range(5):
        mon.observe(f"http://o{i}", "text")
    assert len(mon._origins) == 3


def test_html_text() -> None:
    body = (b"<html><head><style>p{color:red}</style><script>var x='<p>';</script></head>"
            b"<body><p>Hello&nbsp;<b>world</b></p><!-- hidden --></body></html>")
    words = html_text(body).split()
    assert words == ["Hello", "world"]


def test_query_variants_stop_listings_and_let_a_catalogue_through() -> None:
    """Past the cap, a path's yield decides whether new query strings are fetched."""
    from polite_crawler.policy.traps import QueryLimits, QueryVariants, query_path

    q = QueryVariants(QueryLimits(max_variants=5, min_share=0.5, min_novelty=0.2))
    listing = "Shop. Filters chosen above. No products match these filters. Try fewer filters."
    for i in range(5):
        q.observe(f"http://e.org/shop?c={i}", f"{listing} Page {i} of the listings.")
        q.observe(f"http://e.org/item?id={i}",
                  " ".join(f"word{i}x{k} text{i}y{k}" for k in range(60)))
    assert q.allows("http://e.org/shop?c=99") == "query_variants"
    assert q.allows("http://e.org/shop?c=1") is None  # fetched before: a revisit
    assert q.allows("http://e.org/item?id=99") is None  # every item page was new text
    assert q.allows("http://f.org/shop?c=99") is None  # another origin
    assert query_path("http://e.org/shop?c=1") == "http://e.org/shop?"


def test_trap_memory_of_paths_expires() -> None:
    from polite_crawler.policy.traps import TrapMemory

    mem = TrapMemory(ttl=10.0)
    assert mem.add_path("http://e.org/shop?", "query_variants", 100.0)
    assert mem.path_remembered("http://e.org/shop?c=7", 105.0) == "query_variants"
    assert mem.path_remembered("http://e.org/shop", 105.0) is None  # the plain path is a page
    assert mem.path_remembered("http://e.org/shop?c=7", 111.0) is None


# --- session tokens in paths -------------------------------------------------------

TOKENS = ["3f9c0a17be42d865", "77ab01c9e3d2f456", "c0ffee12ab34cd56", "9e8d7c6b5a4f3e2d"]


@pytest.mark.parametrize(("segment", "token"), [
    ("3f9c0a17be42d865", True),  # 16 hex, a session id
    ("550e8400e29b41d4a716446655440000", True),  # a UUID's hex
    ("da39a3ee5e6b4b0d3255bfef95601890afd80709", True),  # a git hash
    ("a3F9kQ2mZ7xW4pL0", True),  # base64url
    ("dGhpcyBpcyBhIHRva2Vu0A==", True),  # base64, padded
    ("3f9c0a17be4", False),  # 11 hex: too short
    ("123456789012345", False),  # a plain number: an id, not a minted token
    ("deadbeefcafebabe", False),  # hex letters only: a word as much as a token
    ("aaaaaaaaaaaaaaa1", False),  # low entropy
    ("2024-05-01", False),
    ("my-first-post-2024", False),  # a slug
    ("InternationalBusiness", False),  # CamelCase words, no digit
    ("page-3", False),
])
def test_token_segments(segment: str, token: bool) -> None:
    assert traps.is_token(segment) is token


def test_token_split_generalises_the_first_token_segment() -> None:
    split = traps.token_split
    assert split(f"http://e.org/s/{TOKENS[0]}/page-3") == \
        ("http://e.org/s/{id}/", TOKENS[0], "page-3")
    assert split(f"http://e.org/{TOKENS[0]}/a/b?x=1") == \
        ("http://e.org/{id}/", TOKENS[0], "a/b?x=1")
    assert split(f"http://e.org:8080/c/{TOKENS[1]}") == \
        ("http://e.org:8080/c/{id}/", TOKENS[1], "")
    assert split("http://e.org/2024/05/01/post-title") is None
    assert split("http://e.org/") is None and split("not a url") is None


def test_session_tokens_judge_a_page_that_comes_again_under_another_token() -> None:
    st = traps.SessionTokens(min_novelty=0.2)
    page = {n: " ".join(random.Random(n).choice(WORDS) for _ in range(60)) for n in (1, 2, 3)}
    assert st.observe(f"http://e.org/s/{TOKENS[0]}/page-1", page[1]) is None
    assert st.observe(f"http://e.org/s/{TOKENS[1]}/page-2", page[2]) is None
    assert st.observe(f"http://e.org/s/{TOKENS[2]}/page-3", page[3]) is None
    # page-1 again, under another token, nothing new: the token is a session id
    assert st.observe(f"http://e.org/s/{TOKENS[3]}/page-1", page[1]) == "http://e.org/s/{id}/"
    # the same token again is the same URL, not a trap
    st = traps.SessionTokens(min_novelty=0.2)
    assert st.observe(f"http://e.org/s/{TOKENS[0]}/page-1", page[1]) is None
    assert st.observe(f"http://e.org/s/{TOKENS[0]}/page-1", page[1]) is None


def test_session_tokens_leave_hashes_of_distinct_pages_alone() -> None:
    st = traps.SessionTokens(min_novelty=0.2)
    for n, sha in enumerate(TOKENS):
        text = " ".join(random.Random(f"diff{n}").choice(WORDS) + str(n) for _ in range(80))
        # a commit page (the hash ends the path) and its diff (a rest that repeats)
        assert st.observe(f"http://e.org/commit/{sha}", text) is None
        assert st.observe(f"http://e.org/commit/{sha}/diff", text + " diff") is None
    # two commits with the same (empty) text: the hash names the commit, no trap
    assert st.observe(f"http://e.org/commit/{TOKENS[0]}", "") is None
    assert st.observe(f"http://e.org/commit/{TOKENS[1]}", "") is None


def test_trap_memory_of_templates_covers_every_token_and_expires() -> None:
    mem = traps.TrapMemory(ttl=10.0)
    assert mem.remembered(f"http://e.org/s/{TOKENS[0]}/page-1", 100.0) is None
    assert mem.add_template("http://e.org/s/{id}/", "session_token", 100.0)
    assert not mem.add_template("http://e.org/s/{id}/", "session_token", 101.0)
    for url in (f"http://e.org/s/{TOKENS[1]}/page-9", f"http://e.org/s/{TOKENS[2]}",
                f"http://e.org/s/{TOKENS[3]}/a/b?c=1"):
        assert mem.remembered(url, 105.0) == "session_token", url
    # another prefix, another origin, no token: not covered
    for url in (f"http://e.org/t/{TOKENS[1]}/page-9", f"http://f.org/s/{TOKENS[1]}/page-9",
                "http://e.org/s/page-9"):
        assert mem.remembered(url, 105.0) is None, url
    assert mem.remembered(f"http://e.org/s/{TOKENS[1]}/page-9", 111.0) is None  # expired
