"""What the per-link work keeps in memory answers as the rules read afresh.

A page's links are mostly the site's navigation, the same on every page: the URL rules
keep their reading of a URL (:class:`polite_crawler.frontier.admission.UrlRules`), the
trail check its reading of a URL's path (:func:`polite_crawler.policy.traps._path_query`),
and the frontier scheduler the canonical URLs its seen set answered "seen" for. Each is
held here to the answer worked out with nothing kept.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from polite_crawler.frontier import seen as seen_module
from polite_crawler.frontier.admission import (
    BAD_URL,
    Judged,
    UrlRules,
    canonical_origin,
    safe_origin,
)
from polite_crawler.frontier.seen import SEEN_URLS_KEPT
from polite_crawler.policy import traps
from polite_crawler.policy.traps import (
    LOW_YIELD,
    URL_LENGTH,
    Trails,
    TrapLimits,
    YieldLimits,
    YieldMonitor,
    continues_trail,
    extend_trail,
    url_trap,
)
from polite_crawler.policy.urls import URLError, canonicalize
from tests.frontier_fixtures import open_scheduler, site_crawler, without_open_collection

YIELD = YieldLimits(window=30, min_share=0.1, min_novelty=0.2)


def judge_afresh(rules: UrlRules, url: str, depth: int, *, canonical_form: bool = False,
                 ) -> Judged:
    """UrlRules.judge for a page as it read every URL before it kept its readings."""
    limits = rules.limits
    canonical: str | None = None
    if canonical_form and not rules.strip_params:
        canonical = url
    elif len(url) <= limits.max_url_length:
        try:
            canonical = canonicalize(url, strip_params=rules.strip_params)
        except URLError:
            canonical = None
    origin = canonical_origin(canonical) if canonical is not None else safe_origin(url)
    if origin is None:
        return Judged(BAD_URL)
    if rules.monitor is not None and rules.monitor.stopped(origin):
        return Judged(LOW_YIELD, origin)
    if len(url) > limits.max_url_length:
        return Judged(URL_LENGTH, origin)
    if canonical is None:
        return Judged(BAD_URL, origin)
    return Judged(url_trap(canonical, depth, limits), origin, canonical)


_origins = st.sampled_from(["http://e.org", "HTTP://E.org:80", "https://e.org:8443",
                            "http://127.0.0.1:8001", "http://[::1]", "http://u:p@e.org",
                            "http://bücher.example", "http:", "http://e.org:99999", "ftp://e.org"])
_segments = st.sampled_from(["a", "b", "A", ".", "..", "x y", "%41", "c;p=1", "é", "", "a" * 30])
_queries = st.sampled_from(["", "?a=1", "?b=2&a=1", "?a&b&c&d&e&f", "?utm_source=x", "?q=%7e",
                            "?", "#frag", "?a=1#f"])
_urls = st.builds(lambda o, s, q: f"{o}/{'/'.join(s)}{q}", _origins,
                  st.lists(_segments, max_size=8), _queries)


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(st.tuples(_urls, st.integers(0, 6), st.booleans(), st.booleans()),
                      min_size=1, max_size=30),
       max_depth=st.integers(-1, 4), max_length=st.sampled_from([40, 80, 2000]),
       strip=st.sampled_from([[], ["utm_source"]]))
def test_judge_with_readings_kept_answers_as_afresh(
        calls: list[tuple[str, int, bool, bool]], max_depth: int, max_length: int,
        strip: list[str]) -> None:
    # Each URL asked again and again (navigation links), at other depths, with origins
    # stopped for low yield between the asks: every answer as the rules read afresh.
    limits = TrapLimits(max_depth=max_depth, max_url_length=max_length, max_query_params=3,
                        max_segment_repeats=3)
    monitor = YieldMonitor(YIELD)
    rules = UrlRules(limits, strip, monitor)
    for written, depth, canonical_form, stop in [*calls, *calls]:
        url = written
        if canonical_form:
            try:
                url = canonicalize(written)
            except URLError:
                continue
        assert rules.judge(url, depth, canonical_form=canonical_form) == judge_afresh(
            rules, url, depth, canonical_form=canonical_form), (url, depth)
        if stop:
            origin = safe_origin(url)
            if origin is not None:
                monitor._stopped.add(origin)  # as the yield monitor does


def test_a_kept_reading_leaves_the_stop_and_the_depth_to_each_ask() -> None:
    rules = UrlRules(TrapLimits(max_depth=2, max_url_length=2000, max_query_params=5,
                                max_segment_repeats=3), [], YieldMonitor(YIELD))
    url = "http://e.org/a/b"
    assert rules.judge(url, 2) == Judged(None, "http://e.org", url)
    assert rules.judge(url, 3) == Judged("depth", "http://e.org", url)
    assert rules.monitor is not None
    rules.monitor._stopped.add("http://e.org")
    assert rules.judge(url, 1) == Judged(LOW_YIELD, "http://e.org")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_urls, _urls), min_size=1, max_size=20))
def test_trail_check_with_paths_kept_answers_as_afresh(pairs: list[tuple[str, str]]) -> None:
    for parent, child in [*pairs, *pairs]:
        kept = continues_trail(parent, child), traps._path_query(child)
        traps._path_query.cache_clear()
        assert kept == (continues_trail(parent, child), traps._path_query(child))



@settings(max_examples=200, deadline=None)
@given(_urls, st.lists(_urls, max_size=3), st.lists(_urls, min_size=1, max_size=12))
def test_a_pages_trails_read_once_are_each_links_own(parent: str, trail: list[str],
                                                      links: list[str]) -> None:
    # A page's links judged with the page read once (Trails): each gets the trail
    # extend_trail gave it when the page was read again for every link.
    trails = Trails(parent, tuple(trail) or None)
    for child in links:
        own = (*trail, parent) if continues_trail(parent, child) else ()
        assert trails.of(child) == own == extend_trail(parent, tuple(trail) or None, child)


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "http:", ""]),
       st.text(alphabet="ab.:@[]%é﹖ \t", max_size=8),
       st.text(alphabet="/ab.?=&;#%é \t\x00", max_size=16))
def test_trail_reading_is_urlsplits(scheme: str, netloc: str, tail: str) -> None:
    # _path_query reads a plain http(s) URL off its text: as urlsplit reads it.
    url = scheme + netloc + tail
    try:
        parts = urlsplit(url)
        want: tuple[str, str, str] | None = (
            f"{parts.scheme}://{parts.netloc}", parts.path or "/", parts.query)
    except ValueError:
        want = None
    assert traps._path_query.__wrapped__(url) == want

# --- the seen set's "seen" answers, kept by the frontier scheduler ----------------------

O1, O2 = "http://127.0.0.1:8001", "http://127.0.0.2:8001"
_POOL = [f"{o}/p{i}" for o in (O1, O2) for i in range(6)]
_KEYS = ("polite/frontier/", "scheduler/enqueued")


class _Job:
    """A real frontier scheduler on its own JOBDIR; ``keep``: its seen memory on or off."""

    def __init__(self, tmp: Path, keep: bool) -> None:
        self.tmp, self.keep = tmp, keep
        self.crawler, self.spider = site_crawler(tmp, f"{O1},{O2}", POLITE_HOST_BUDGET=1000)
        self.open()

    def open(self) -> None:
        self.scheduler = open_scheduler(self.crawler, self.spider)
        seen = self.scheduler.seen
        assert seen is not None and (seen.known is not None) is True  # the embedded queue
        if not self.keep:
            seen.known = None  # every URL asked of the seen set

    def restart(self) -> None:
        self.scheduler.close("shutdown")
        self.open()

    def queue(self, urls: list[str]) -> int:
        return self.scheduler.enqueue_urls([(u, canonical_origin(u), None) for u in urls],
                                           callback="parse")

    def state(self) -> tuple[dict[str, Any], list[tuple[str, int]]]:
        f = self.scheduler.frontier
        assert f is not None and self.crawler.stats is not None
        f.queue.commit()
        rows = f.queue.conn.execute("SELECT url, state FROM frontier_queue ORDER BY id")
        return ({k: v for k, v in self.crawler.stats.get_stats().items()
                 if k.startswith(_KEYS)}, rows.fetchall())


_ops = st.one_of(
    st.tuples(st.just("queue"), st.lists(st.sampled_from(_POOL), max_size=10)),
    st.tuples(st.sampled_from(["restart", "stop", "drop"]), st.sampled_from([O1, O2])),
    st.tuples(st.just("mark_seen"), st.sampled_from(_POOL)),
)


@settings(max_examples=40, deadline=None)
@given(kept=st.sampled_from([3, SEEN_URLS_KEPT]), ops=st.lists(_ops, min_size=1, max_size=14))
def test_seen_urls_kept_answer_as_the_seen_set(kept: int, ops: list[tuple[str, Any]]) -> None:
    # The same batches (repeats inside one too), restarts on the same JOBDIR, origins
    # stopped and their rows dropped (scrapy forget's way in a live job), URLs marked
    # seen (rel=canonical): the same counts, stats and rows as asking the seen set.
    saved = seen_module.SEEN_URLS_KEPT
    seen_module.SEEN_URLS_KEPT = kept  # a small memory: forgotten all at once often
    with tempfile.TemporaryDirectory() as tmp, without_open_collection():
        jobs = [_Job(Path(tmp) / "kept", True), _Job(Path(tmp) / "asked", False)]
        try:
            for op, arg in ops:
                answers = []
                for job in jobs:
                    f = job.scheduler.frontier
                    assert f is not None
                    if op == "queue":
                        answers.append(job.queue(arg))
                    elif op == "restart":
                        job.restart()
                    elif op == "stop":
                        f.stop(arg, "opted_out")
                    elif op == "drop":
                        f.queue.drop_origin(arg)
                    else:
                        job.scheduler.mark_seen(arg)
                assert len(set(answers)) <= 1, (op, arg, answers)
            assert jobs[0].state() == jobs[1].state()
        finally:
            seen_module.SEEN_URLS_KEPT = saved
            for job in jobs:
                job.scheduler.close("finished")


def test_a_url_answered_seen_is_not_asked_again(tmp_path: Path) -> None:
    job = _Job(tmp_path, True)
    try:
        assert job.queue([f"{O1}/a", f"{O1}/b"]) == 2
        assert job.queue([f"{O1}/a", f"{O1}/c"]) == 1
        f = job.scheduler.frontier
        assert f is not None
        assert job.scheduler.seen is not None and job.scheduler.seen.known == {f"{O1}/a"}
        # Out of the seen set behind the scheduler's back (no live job does this: forget
        # edits the queue of a job that is not running, and never its seen set): the
        # memory answers, the file is not asked.
        f.queue.conn.execute("DELETE FROM frontier_seen")
        assert job.queue([f"{O1}/a", f"{O1}/b"]) == 1  # b asked: new again
        job.restart()  # a new process: nothing kept, the file answers
        assert job.queue([f"{O1}/a"]) == 1
        assert job.crawler.stats is not None
        assert job.crawler.stats.get_value("polite/frontier/duplicate") == 2
    finally:
        job.scheduler.close("finished")
