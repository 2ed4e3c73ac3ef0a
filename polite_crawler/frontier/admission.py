"""Whether a URL may enter the frontier: one set of rules for a Request and for a URL row.

Two ways in, one judge. A ``Request`` a callback yields passes the trap middleware
(:class:`polite_crawler.middlewares.traps.TrapMiddleware`) and then the scheduler's
``enqueue_request``; a URL the ``site`` spider lists in bulk (a sitemap's entries, a
page's new in-host links) goes straight to ``FrontierScheduler.enqueue_urls`` as a
row, with no Request made until the frontier dispatches it. Both ask the same two
questions, in the same order, counted under the same stats:

1. :meth:`UrlRules.judge`, the URL rules (:mod:`polite_crawler.policy.traps`): an
   origin that parses (``bad_url``), an origin not stopped for low yield
   (``low_yield``), then, for a page (not a discovery fetch), the URL length, a
   canonical form (``bad_url``), the depth, the query-parameter count and a
   repeated path segment. Counted ``polite/traps/<reason>``.
2. The frontier's own checks (:class:`FrontierChecks`): the seen set
   (``polite/frontier/duplicate``), an origin stopped this run
   (``polite/frontier/stopped``), the daily budget
   (``polite/frontier/budget_exhausted``), and robots.txt where the origin's copy
   is known already (``polite/robots/disallowed``; otherwise it is checked when
   the row is dispatched).

``tests/test_frontier_bulk.py`` sends the same cases through both ways and asserts
the same outcome and the same stats.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.traps import DEPTH, LOW_YIELD, URL_LENGTH, TrapLimits, url_trap
from polite_crawler.policy.urls import URLError, canonicalize, origin_of

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from polite_crawler.context import PoliteContext
    from polite_crawler.frontier.core import Frontier
    from polite_crawler.frontier.seen import SeenSet
    from polite_crawler.policy.traps import YieldMonitor

logger = logging.getLogger(__name__)

BAD_URL = "bad_url"
# A refusal of the frontier's checks -> its stats key (the same on both ways in).
REFUSED = {
    "duplicate": "polite/frontier/duplicate",
    "stopped": "polite/frontier/stopped",
    "budget_exhausted": "polite/frontier/budget_exhausted",
    "disallowed": "polite/robots/disallowed",
}
# URLs whose reading (canonical form, origin, page rules but the depth) a UrlRules keeps:
# a site's navigation links come again on every page of it.
READINGS_KEPT = 8192


@dataclass(frozen=True, slots=True)
class Judged:
    """The URL rules' answer: a reason to refuse (``reason``), or the URL's two forms."""

    reason: str | None
    origin: str = ""
    canonical: str = ""  # "" when not worked out (refused first, or a discovery fetch)


def safe_origin(url: str) -> str | None:
    try:
        return origin_of(url)
    except ValueError:  # a port out of range, a broken IPv6 literal
        return None


class UrlRules:
    """The URL rules every way into the frontier applies (see the module docstring)."""

    def __init__(self, limits: TrapLimits, strip_params: list[str],
                 monitor: YieldMonitor | None = None) -> None:
        self.limits = limits
        self.strip_params = list(strip_params)
        self.monitor = monitor
        # _read's answers by URL: they depend on the URL, the limits and the stripped
        # parameters only (the origin's stop and the depth are applied by judge).
        self._reading = lru_cache(maxsize=READINGS_KEPT)(self._read)

    def judge(self, url: str, depth: int, *, discovery: bool = False,
              canonical_form: bool = False) -> Judged:
        """The rules for ``url`` at ``depth``; ``discovery``: robots.txt or a sitemap.

        A discovery fetch is held to the origin's stop only, not to the page rules.
        The canonical form is worked out once, and the origin read off it;
        ``canonical_form``: ``url`` is the output of ``canonicalize`` already (a
        sitemap's entries are), so only the stripped parameters may change it.
        """
        if discovery:
            origin = safe_origin(url)
            if origin is None:
                return Judged(BAD_URL)
            if self.monitor is not None and self.monitor.stopped(origin):
                return Judged(LOW_YIELD, origin)
            return Judged(None, origin)
        if canonical_form and not self.strip_params:
            origin, shallow, deep = self._answers(url, url)
        else:
            origin, shallow, deep = self._reading(url)
        if origin is not None and self.monitor is not None and self.monitor.stopped(origin):
            return Judged(LOW_YIELD, origin)
        return deep if depth > self.limits.max_depth else shallow

    def _read(self, url: str) -> tuple[str | None, Judged, Judged]:
        """:meth:`_answers` for a page's ``url``, its canonical form worked out here.

        Kept by URL (``_reading``): a site's navigation links come again on every page.
        """
        canonical: str | None = None
        if len(url) <= self.limits.max_url_length:
            try:
                canonical = canonicalize(url, strip_params=self.strip_params)
            except URLError:
                canonical = None
        return self._answers(url, canonical)

    def _answers(self, url: str, canonical: str | None) -> tuple[str | None, Judged, Judged]:
        """:meth:`judge` of a page's ``url`` (``canonical``: its canonical form, None if
        it has none or is too long to have it worked out) but the origin's stop:
        ``(origin, answer at a depth up to the limit, answer beyond it)``.

        The origin's stop comes before every rule but a missing origin, and only the
        depth rule reads the depth (``url_trap`` answers the same at any depth up to the
        limit), so :meth:`judge` needs nothing else.
        """
        limits = self.limits
        origin = canonical_origin(canonical) if canonical is not None else safe_origin(url)
        if origin is None:
            bad = Judged(BAD_URL)
            return None, bad, bad
        if len(url) > limits.max_url_length:
            long = Judged(URL_LENGTH, origin)
            return origin, long, long
        if canonical is None:
            bad = Judged(BAD_URL, origin)
            return origin, bad, bad
        return (origin, Judged(url_trap(canonical, limits.max_depth, limits), origin, canonical),
                Judged(DEPTH, origin, canonical))

    def judge_canonical(self, urls: Sequence[str], depth: int,
                        ) -> tuple[list[str | None], list[str]]:
        """:meth:`judge` of each URL with ``canonical_form=True``, in one pass: the
        reasons (None: passed) and the origins ("" where :meth:`judge` has none).

        A sitemap's entries share their origin, so it is read off the text once and
        the origin's stop looked up once; a plain path with fewer slashes than the
        segment-repeat limit has no trap to look for (``url_trap`` is asked the rest).
        """
        if self.strip_params:
            judged = [self.judge(url, depth, canonical_form=True) for url in urls]
            return [j.reason for j in judged], [j.origin for j in judged]
        limits = self.limits
        max_length, repeats = limits.max_url_length, limits.max_segment_repeats
        too_deep = depth > limits.max_depth
        monitor = self.monitor
        stopped: dict[str, bool] = {}
        reasons: list[str | None] = []
        origins: list[str] = []
        prefix, origin, cut = "\0", "", 0
        for url in urls:
            if not url.startswith(prefix):
                origin = canonical_origin(url)
                cut = len(origin) + 1
                # Every URL that starts with "<origin>/" has this origin (no "@" in it).
                prefix = origin + "/" if url[:cut] == origin + "/" else "\0"
            origins.append(origin)
            if monitor is not None:
                halted = stopped.get(origin)
                if halted is None:
                    halted = stopped[origin] = monitor.stopped(origin)
                if halted:
                    reasons.append(LOW_YIELD)
                    continue
            if len(url) > max_length:
                reasons.append(URL_LENGTH)
            elif too_deep or prefix == "\0" or "?" in url or url.count("/", cut - 1) >= repeats:
                reasons.append(url_trap(url, depth, limits))
            else:
                # No query; the path has fewer non-empty segments than slashes, so
                # fewer than the repeats that make a loop (url_trap says None).
                reasons.append(None)
        return reasons, origins

    def page_reason(self, url: str, depth: int) -> str | None:
        """The page rules alone (no origin check): the part of :meth:`judge` after the stop."""
        if len(url) > self.limits.max_url_length:
            return URL_LENGTH
        try:
            canonical = canonicalize(url, strip_params=self.strip_params)
        except URLError:
            return BAD_URL
        return url_trap(canonical, depth, self.limits)


def canonical_origin(canonical: str) -> str:
    """:func:`origin_of` of a URL already in canonical form, read off its text.

    >>> canonical_origin("http://127.0.0.1:8080/a?b=1"), canonical_origin("https://[::1]/")
    ('http://127.0.0.1:8080', 'https://[::1]')
    >>> canonical_origin("http://u:p@ex.org/a")
    'http://ex.org'
    """
    start = canonical.find("//") + 2
    end = canonical.find("/", start)
    if end < 0:
        end = len(canonical)
    if "@" in canonical[start:end]:
        return origin_of(canonical)
    return canonical[:end]


class FrontierChecks:
    """The frontier's own checks (step 2 of the module docstring), counted.

    ``seen``: the crawl's seen set; ``ctx``: the crawl's context, whose robots.txt
    book is read as each batch is judged; ``count``: adds to a stats key. Each check
    is of the frontier (the core) it is given.
    """

    def __init__(self, seen: SeenSet, ctx: PoliteContext,
                 count: Callable[[str, int], None]) -> None:
        self.seen = seen
        self.ctx = ctx
        self.count = count

    def admit(self, f: Frontier,
              candidates: list[tuple[str, str, bytes | None]]) -> list[str | None]:
        """The checks for ``(origin, url, fingerprint)``: a refusal or None each.

        One function for a Request and for a batch of URL rows: the seen set (no
        fingerprint: not checked), the origin's stop, its budget, and its robots.txt
        when the copy is known already. Refusals are counted.
        """
        fps = [fp for _o, _u, fp in candidates if fp is not None]
        fresh = self.seen.add(f.queue, fps)
        if len(fps) < len(candidates):  # a Request with dont_filter: not in the seen set
            it = iter(fresh)
            fresh = [fp is None or next(it) for _o, _u, fp in candidates]
        return self.admit_many(f, [o for o, _u, _fp in candidates],
                               [u for _o, u, _fp in candidates], fresh)

    def admit_many(self, f: Frontier, origins: list[str], urls: list[str],
                   fresh: list[bool]) -> list[str | None]:
        """:meth:`admit` of URLs whose seen-set answers are in: ``fresh`` (False: seen)."""
        # origin -> (f.admit(origin), its robots.txt rules or None when they let every
        # URL through now), worked out once a batch, for an origin with a new URL only
        checks: dict[str, tuple[str | None, Any]] = {}
        out: list[str | None] = []
        refused: Counter[str] = Counter()
        last_origin = "\0"
        reason: str | None = None
        rules: Any = None
        found: tuple[str | None, Any] | None
        for origin, url, new in zip(origins, urls, fresh, strict=True):
            if not new:
                out.append("duplicate")
                refused["duplicate"] += 1
                continue
            if origin != last_origin:
                found = checks.get(origin)
                if found is None:
                    found = checks[origin] = self._origin_checks(f, origin)
                last_origin, (reason, rules) = origin, found
            if reason is not None:
                refused[reason] += 1
                out.append(reason)
            elif rules is not None and not rules.allowed(url):
                refused["disallowed"] += 1
                out.append("disallowed")
            else:
                out.append(None)
        for why, n in refused.items():
            self.count(REFUSED[why], n)
        if refused["disallowed"] and logger.isEnabledFor(logging.DEBUG):
            for url, verdict in zip(urls, out, strict=True):
                if verdict == "disallowed":
                    logger.debug("Forbidden by robots.txt: %(url)s", {"url": url})
        return out

    def _origin_checks(self, f: Frontier, origin: str) -> tuple[str | None, Any]:
        """``(f.admit(origin), rules)``: ``rules`` is the origin's robots.txt copy in use
        now, None where none is (not known yet, a 4xx allow-all, not read here) or where
        it lets every URL through."""
        reason = f.admit(origin)
        robots = self.ctx.robots
        if reason is not None or robots is None:
            return reason, None
        if robots.remote and not robots.cached(origin):
            # Not read here (a round trip on the reactor): the owner's take batch reads
            # it, and the dispatch judges the URL.
            return reason, None
        rules = robots.rules(origin) if robots.ready(origin) else None
        return reason, None if rules is None or rules.allows_all else rules
