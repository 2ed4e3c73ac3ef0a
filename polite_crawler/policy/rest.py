"""How long an origin rests after each exchange (pure; the frontier is the glue).

The rest after a request ends is the longest of

* the base rest: ``rest_page`` (3 s) for a page, ``rest_api`` (1 s) for a request a
  spider marks as a documented API (``meta["polite_api"] = True``);
* ``duration_factor`` (5) times the duration of the last exchange, at most
  ``duration_max`` (30 s): a slow server gets more rest;
* the origin's robots.txt ``Crawl-delay``, at most ``crawl_delay_max`` (60 s);
* the wait the verdicts asked for (Retry-After or backoff, ``FailureState.wait_until``),

times the latency-watch factor and the origin's rate factor (2 after repeated 429s),
plus jitter: a uniform random extra of up to ``jitter`` times the base rest. It is
measured from the end of the exchange to the start of the next one.

Numbers below the seeds' floors (3 s page, 1 s API, 5x duration, ...) are honoured only
for loopback and the operator's test networks: :func:`floor_params` clamps them for any
other host. No setting turns the rest off.

Every function takes the time as an argument (wall-clock epoch seconds, since the
next-allowed time is persisted and must survive a restart) and a ``random.Random``.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.verdicts import FailureState

if TYPE_CHECKING:
    import random


@dataclass(frozen=True)
class RestParams:
    rest_page: float = 3.0
    rest_api: float = 1.0
    duration_factor: float = 5.0
    duration_max: float = 30.0
    crawl_delay_max: float = 60.0
    jitter: float = 1.0  # fraction of the base rest, uniform random extra
    baseline_n: int = 5  # responses whose median is the latency baseline
    window_n: int = 20  # responses in the latency window
    latency_trigger: float = 2.0  # window median above trigger x baseline: the rest doubles
    # ... and above baseline + min_rise (seconds): a few milliseconds more is timer and
    # network noise, not a struggling site (see observe_latency).
    latency_min_rise: float = 0.05

    def base(self, api: bool) -> float:
        return self.rest_api if api else self.rest_page


def dispatch_lead(configured: float, params: RestParams) -> float:
    """How long before its origin's time a request may be handed out: the configured
    dispatch lead (``POLITE_DISPATCH_LEAD``; 0 or less: none), at most a quarter of the
    origin's base page rest. An origin handed out ahead counts as busy from then, so it
    stays idle for most of its rest and a cluster worker can still give it back between
    requests."""
    return min(configured, params.base(False) / 4) if configured > 0 else 0.0


def wait_before_send(not_before: float, now: float) -> float:
    """Seconds a request handed out ahead (:func:`dispatch_lead`) must still wait before
    it is sent: it never leaves before its origin's time, ``not_before``. 0.0: send now;
    a request not handed out ahead carries no time (0.0) and never waits."""
    return max(not_before - now, 0.0)


# The seeds' numbers (002 "How the crawler is polite", 003 "Rate and Concurrency"):
# settings may raise them for any host, lower them only for loopback and test networks.
PUBLIC_FLOOR = RestParams()
_FLOORED = ("rest_page", "rest_api", "duration_factor", "duration_max", "crawl_delay_max")


def floor_params(params: RestParams) -> tuple[RestParams, list[str]]:
    """The params for a public host, and the names of the values that were raised.

    >>> p, raised = floor_params(RestParams(rest_page=0.1, duration_factor=10.0))
    >>> p.rest_page, p.duration_factor, raised
    (3.0, 10.0, ['rest_page'])
    """
    changes: dict[str, Any] = {}
    for name in _FLOORED:
        floor = getattr(PUBLIC_FLOOR, name)
        if getattr(params, name) < floor:
            changes[name] = floor
    if params.latency_trigger > PUBLIC_FLOOR.latency_trigger:
        changes["latency_trigger"] = PUBLIC_FLOOR.latency_trigger
    if params.latency_min_rise > PUBLIC_FLOOR.latency_min_rise:
        changes["latency_min_rise"] = PUBLIC_FLOOR.latency_min_rise
    return replace(params, **changes), sorted(changes)


@dataclass(slots=True)
class OriginState:
    """Timing state of one origin (``scheme://host[:port]``), persisted by the frontier.

    A host's and an owner's rows are states too (their rest's end, their budget count),
    one of each a site: no instance dict, and the latency watch's lists made only when
    a response is observed (a host's or an owner's never is)."""

    origin: str
    next_allowed: float = 0.0  # wall clock: no request may start before it
    last_end: float = 0.0
    last_duration: float = 0.0
    last_rest: float = 0.0
    crawl_delay: float | None = None
    # Latency watch ("you are the load": a server slower under our requests is told so by
    # its own latency): baseline = median of the first responses; the window
    # holds the latest ones; the factor doubles when the window's median exceeds twice
    # the baseline ("you are the load") by more than the minimum rise, and halves
    # (down to 1) when a full window's median is back near the baseline; either way
    # the window starts again (see observe_latency). None: no sample (yet, or any more
    # once the baseline is read).
    baseline: float | None = None
    baseline_samples: list[float] | None = None
    window: list[float] | None = None
    latency_factor: float = 1.0
    failure: FailureState = field(default_factory=FailureState)
    # Daily budget, counted per UTC day.
    budget_day: str = ""
    budget_used: int = 0

    def eligible_at(self) -> float:
        """The earliest time a request may start: the rest, and any wait the server asked for."""
        return max(self.next_allowed, self.failure.wait_until)

    def to_json(self) -> str:
        """The state as stored: the fields that differ from a new state's (the rest
        read back as their defaults by :meth:`from_json`). A host's row holds its rest's
        end, an owner's its budget count: little else to write at each checkpoint."""
        data: dict[str, Any] = {"origin": self.origin}
        for name, default in _STATE_DEFAULTS.items():
            value = getattr(self, name)
            if value != default:
                data[name] = value  # shallow: json copies the lists itself
        failure = {k: v for k, v in vars(self.failure).items() if v != _FAILURE_DEFAULTS[k]}
        if failure:
            if "wait_until" in failure:
                failure["wait_until"] = _finite(self.failure.wait_until)
            data["failure"] = failure
        if "next_allowed" in data:
            data["next_allowed"] = _finite(self.next_allowed)
        return _dumps(data)

    @classmethod
    def from_json(cls, text: str) -> OriginState:
        data: dict[str, Any] = json.loads(text)
        known = {f.name for f in fields(FailureState)}
        failure = FailureState(**{k: v for k, v in data.pop("failure", {}).items() if k in known})
        mine = {f.name for f in fields(cls)}
        return cls(failure=failure, **{k: v for k, v in data.items() if k in mine})

    def reset_run(self) -> None:
        """Forget what holds only for one run (the factors, the streak, the stop)."""
        self.baseline = None
        self.baseline_samples = None
        self.window = None
        self.latency_factor = 1.0
        self.failure = FailureState(wait_until=self.failure.wait_until)


# What a new state holds, field by field (to_json leaves these out).
_STATE_DEFAULTS: dict[str, Any] = {
    f.name: getattr(OriginState(""), f.name) for f in fields(OriginState)
    if f.name not in ("origin", "failure")}
_FAILURE_DEFAULTS: dict[str, Any] = dict(vars(FailureState()))
_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _finite(value: float) -> float:
    # JSON has no infinity; a parked origin's wait is "far in the future".
    return value if math.isfinite(value) else 1e18


@dataclass(frozen=True)
class Rest:
    """A computed rest and the terms it came from (for logs and tests)."""

    total: float
    base: float
    duration: float
    crawl_delay: float
    wait: float
    latency_factor: float
    rate_factor: float
    jitter: float


def compute_rest(
    state: OriginState, params: RestParams, *, end: float, api: bool, rng: random.Random
) -> Rest:
    """The rest after an exchange that ended at ``end`` (see the module docstring)."""
    base = params.base(api)
    duration = min(params.duration_factor * max(state.last_duration, 0.0), params.duration_max)
    delay = min(state.crawl_delay or 0.0, params.crawl_delay_max)
    wait = max(state.failure.wait_until - end, 0.0)
    rate = max(state.failure.rate_factor, 1.0)
    jitter = rng.uniform(0.0, params.jitter * base) if params.jitter > 0 else 0.0
    total = max(base, duration, delay, wait) * state.latency_factor * rate + jitter
    return Rest(total, base, duration, delay, wait, state.latency_factor, rate, jitter)


# The latency watch compares exchange durations the download handler measures at the
# transport (request sent to last byte received, from the kernel's TCP timestamps), so
# a crawler busy with its own CPU does not read as a slow server. Two conditions before
# the rest doubles: the window's median above ``latency_trigger`` x the baseline, and
# above the baseline plus ``latency_min_rise``. The default rise, 50 ms, is above what
# measuring adds (the kernel's timestamps tick in 1-10 ms, one jiffy; internet paths
# vary by tens of ms) and below a server in trouble: 2 ms becoming 3 ms, or 20 ms
# becoming 45, is not a site struggling under one request every few seconds; 20 ms
# becoming 80, or 300 ms becoming 700, is. Back down: a full window whose median is
# within half of each margin (at most 1.5 x and baseline + 25 ms at the defaults) halves
# the factor, one window at a time, so a site that recovered gets its pace back step
# by step; between the two bands the factor holds.
DOUBLED = 1
EASED = -1


def _above(median: float, baseline: float, trigger: float, rise: float) -> bool:
    return median > trigger * baseline and median > baseline + rise


def observe_latency(state: OriginState, duration: float, params: RestParams) -> int:
    """Feed one response's duration to the latency watch.

    Returns :data:`DOUBLED` (1) when the rest just doubled, :data:`EASED` (-1) when it
    just halved back towards 1, else 0.

    >>> s, p = OriginState("http://a"), RestParams(baseline_n=1, window_n=3)
    >>> [observe_latency(s, d, p) for d in (0.010, 0.012, 0.013, 0.011)]  # noise
    [0, 0, 0, 0]
    >>> [observe_latency(s, d, p) for d in (0.3, 0.3)], s.latency_factor
    ([0, 1], 2.0)
    >>> [observe_latency(s, d, p) for d in (0.011, 0.012, 0.011)], s.latency_factor
    ([0, 0, -1], 1.0)
    """
    if state.baseline is None:
        samples = state.baseline_samples
        if samples is None:
            samples = state.baseline_samples = []
        samples.append(duration)
        if len(samples) >= params.baseline_n:
            state.baseline = statistics.median(samples)
            state.baseline_samples = None  # read: the baseline holds from now on
    window = state.window
    if window is None:
        window = state.window = []
    window.append(duration)
    if len(window) > params.window_n:
        del window[: len(window) - params.window_n]
    baseline = state.baseline
    if baseline is None or len(window) < params.window_n:
        return 0
    median = statistics.median(window)
    if _above(median, baseline, params.latency_trigger, params.latency_min_rise):
        state.latency_factor *= 2.0
        state.window = []  # re-measure at the slower rate before slowing again
        return DOUBLED
    if state.latency_factor > 1.0 and not _above(
        median, baseline, 1.0 + (params.latency_trigger - 1.0) / 2, params.latency_min_rise / 2
    ):
        state.latency_factor = max(state.latency_factor / 2.0, 1.0)
        state.window = []  # a full window at the new pace before the next step
        return EASED
    return 0


def settle(
    state: OriginState,
    params: RestParams,
    *,
    start: float,
    end: float,
    api: bool,
    rng: random.Random,
    observe: bool = True,
) -> tuple[Rest, bool]:
    """Fold an exchange (``start`` to ``end``) into the state and set its next-allowed time.

    ``observe`` feeds the latency watch (responses only: an error's duration says little
    about the server's load). Returns the rest and whether the latency watch doubled it
    (an easing is seen in ``state.latency_factor``).
    """
    duration = max(end - start, 0.0)
    state.last_duration = duration
    state.last_end = end
    doubled = observe and observe_latency(state, duration, params) == DOUBLED
    rest = compute_rest(state, params, end=end, api=api, rng=rng)
    state.last_rest = rest.total
    state.next_allowed = max(state.next_allowed, end + rest.total)
    return rest, doubled


def utc_day(now: float) -> str:
    """The UTC day of ``now``, the key of the daily budget.

    >>> utc_day(0.0), utc_day(86_399.9), utc_day(86_400.0)
    ('1970-01-01', '1970-01-01', '1970-01-02')
    """
    # POSIX time has 86,400 seconds a day: the day's number says it (asked several
    # times a request, by the budget's checks and charges; strftime once a day).
    return _day_name(int(now // 86_400))


@lru_cache(maxsize=4)
def _day_name(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * 86_400))


def budget_left(state: OriginState, limit: int, now: float) -> int:
    """Pages the origin may still be asked for today (UTC)."""
    used = state.budget_used if state.budget_day == utc_day(now) else 0
    return max(limit - used, 0)


def charge_budget(state: OriginState, now: float) -> None:
    day = utc_day(now)
    if state.budget_day != day:
        state.budget_day, state.budget_used = day, 0
    state.budget_used += 1


def uncharge_budget(state: OriginState, now: float) -> None:
    """A request charged by :func:`charge_budget` was never sent: the charge is undone
    (only on the same UTC day: a new day's count starts afresh anyway)."""
    if state.budget_day == utc_day(now) and state.budget_used > 0:
        state.budget_used -= 1
