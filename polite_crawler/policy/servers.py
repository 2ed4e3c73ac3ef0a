"""How hard the crawl may press one server: the address it connects to (pure; the
frontier is the glue).

Many sites share one machine (name-based hosting, ports, the two schemes of a name), so
the bound on one host is not a bound on the machine. Per address the crawl sends in
*rounds*: up to ``limit`` requests at once, and when the last of them is answered a
rest of ``duration_factor`` (5) times the round's longest duration before the next
round. So at most ``limit`` of our requests are open on it at once, and our share of
the server's time is at most ``limit / (1 + duration_factor)`` of one of its workers:
with ``limit`` its proven parallelism, the 5x rule bounds the machine as it bounds one
host (a rest that is a multiple of the response time caps the crawler's share of the
server's request-handling capacity). A round sends its requests together, so every
full round measures the latency at concurrency ``limit``.

``limit`` starts at 1 and grows by one only while the server's latency stays flat as
our concurrency grows: after ``probe_n`` answers to requests sent while ``limit`` of
ours were open at once, with demand waiting (sites of the server held back by the
bound), each within ``flat`` of the baseline (the median of the first
``baseline_n`` answers at concurrency 1). One answer above that at the probed
concurrency means the server queues our requests: the limit goes back down one and is not probed
again for ``cooldown`` seconds (doubled after each such probe, up to ``cooldown_max``).
When the latency rises whatever the concurrency (the
window's median above ``rise`` times the baseline and ``min_rise`` above it), the
crawler is the load (a median latency that rises after the crawl starts is the
crawler's own doing; the answer is to halve the rate): the limit halves, and at a limit
of one the rounds' rest doubles.

A failure that speaks for the machine (503, a timeout, a refused or reset connection)
makes every site of the address wait (``wait_until``) and the limit falls to one; a
429 and its Retry-After are the site's own (the frontier keeps them per host).

A server with flat latency (a fast edge in front of hundreds of sites) gets more room
as long as sites wait for them: it is not serialised.

A slow server is not probed: while its latency (the window's median) is above
``probe_latency`` (100 ms) the limit stays what it has proven (one at first). An
adaptive limit cannot tell a server of W workers from one of W + 1 without sending
W + 1 at once, so a probe of a server at its size queues one of our requests behind its
workers, and its own clients wait a service time for the worker ours took. On a slow
machine (a dynamic page on a small shared host, a few workers) that is 100 ms or more
of a scarce worker; a fast answer (a static file, a cache, an edge in front of many
sites) costs little either way, and its many sites need the room. The crawl does not
need a slow server's parallelism: its throughput comes from many hosts at once, and at
a limit of one the server gives us at most a sixth of one worker.

Every function takes the time as an argument and changes only the state it is given.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ServerParams:
    duration_factor: float = 5.0  # the rest after a round: this many times its longest answer
    rest_min: float = 0.0  # and at least this long (seconds)
    max_limit: int = 64  # requests at once at most, however flat the latency
    baseline_n: int = 5  # answers at concurrency 1 whose median is the baseline
    probe_n: int = 3  # answers at the probed concurrency before it is judged
    window_n: int = 20  # latest answers whose median is watched for a rise
    flat: float = 1.2  # a mean within this factor of the baseline (and flat_rise) is flat
    flat_rise: float = 0.01  # seconds above the baseline still counted as flat
    rise: float = 2.0  # the window's median above this factor x baseline ...
    min_rise: float = 0.05  # ... and this many seconds above it: we are the load
    cooldown: float = 120.0  # seconds before a concurrency that queued is probed again,
    cooldown_max: float = 3600.0  # doubled after each probe that queued, up to this
    probe_latency: float = 0.1  # seconds: a server answering slower is not probed past
    # its limit (a failed probe there costs one of few workers a slow answer's time)


@dataclass
class ServerState:
    """One address's bound, as the frontier holds it."""

    address: str
    limit: int = 1
    next_allowed: float = 0.0  # no round starts before it
    factor: float = 1.0  # the rounds' rest multiplier (doubled when the load is ours at 1)
    wait_until: float = 0.0  # a failure of the machine: no site of it before this
    round_n: int = 0  # requests sent in the round under way
    round_longest: float = 0.0  # its longest answer so far
    baseline: float | None = None
    baseline_samples: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)
    probe: list[float] = field(default_factory=list)  # answers at concurrency == limit
    no_probe_until: float = 0.0
    probes_failed: int = 0  # probes in a row that found our requests queued
    probing: bool = False  # the limit just grew: not yet judged at it
    wanted: bool = False  # a site was held back by the bound since the last change
    busy: float = 0.0  # seconds of exchanges answered (our load on it, summed)
    answers: int = 0
    since: float = 0.0  # when the crawl first knew it (the load share's start)


def _resize(state: ServerState, limit: int) -> None:
    state.limit = max(1, limit)
    state.probe = []
    state.wanted = False


def next_send(state: ServerState, in_flight: int, cap: int | None = None) -> float | None:
    """When a request may go to the server: the round's rest and any wait the machine
    asked for over (the time); None when the round under way is full (``limit`` sent,
    or ``cap``: the places this process holds of a limit several share): the round's
    last answer sets the next one's time."""
    limit = state.limit if cap is None else min(state.limit, cap)
    if state.round_n >= limit or in_flight >= limit:
        return None
    if state.round_n > 0:  # a round under way has room: join it
        return state.wait_until
    return max(state.next_allowed, state.wait_until)


def sent(state: ServerState, in_flight: int) -> int:
    """A request goes to the server now, ``in_flight`` of ours open on it already;
    returns the concurrency it is sent at."""
    state.round_n += 1
    return in_flight + 1


def held_back(state: ServerState) -> None:
    """A site of the server waited for the bound: there is demand for another request."""
    state.wanted = True


def _round_over(state: ServerState, params: ServerParams, end: float) -> None:
    """The round's last answer came at ``end``: the server rests five times the round's
    longest answer (times the rounds' rest multiplier)."""
    rest = max(params.duration_factor * state.round_longest, params.rest_min)
    state.next_allowed = max(state.next_allowed, end + rest * state.factor)
    state.round_n = 0
    state.round_longest = 0.0


def answered(state: ServerState, params: ServerParams, *, duration: float, end: float,
             concurrency: int, in_flight: int, failure: bool = False, wait: float = 0.0,
             observe: bool = True, cap: int | None = None) -> int:
    """One of our requests to the server ended at ``end`` after ``duration``, sent at
    ``concurrency`` (:func:`sent`); ``in_flight`` of ours are still open on it.
    ``failure``: the machine failed it (503, timeout, refused); ``wait``: the seconds it
    asked for (or the backoff). ``observe``: the duration says something of the
    server's load (an answer). ``cap``: the places of a shared limit this process holds
    (a round of all of them is a full round).

    Returns +1 when the limit grew, -1 when it fell, else 0.
    """
    duration = max(duration, 0.0)
    state.busy += duration
    state.answers += 1
    state.round_longest = max(state.round_longest, duration)
    if in_flight <= 0:
        _round_over(state, params, end)
    if failure:
        state.wait_until = max(state.wait_until, end + wait)
        changed = -1 if state.limit > 1 else 0
        _resize(state, 1)
        return changed
    if not observe:
        return 0
    if state.baseline is None:
        if concurrency <= 1:
            state.baseline_samples.append(duration)
            if len(state.baseline_samples) >= params.baseline_n:
                state.baseline = statistics.median(state.baseline_samples)
        return 0
    base = state.baseline
    state.window.append(duration)
    if len(state.window) > params.window_n:
        del state.window[: len(state.window) - params.window_n]
    if len(state.window) >= params.window_n:
        median = statistics.median(state.window)
        if median > params.rise * base and median > base + params.min_rise:
            state.window = []
            if state.limit > 1:
                _resize(state, state.limit // 2)
            else:
                state.factor *= 2.0
            state.no_probe_until = end + params.cooldown
            return -1
        if state.factor > 1.0 and median <= params.flat * base + params.flat_rise:
            state.factor = max(state.factor / 2.0, 1.0)
            state.window = []
    if concurrency < (state.limit if cap is None else min(state.limit, cap)):
        return 0
    state.probe.append(duration)
    # One answer at the full concurrency above the flat band is enough: a request that
    # waited for a worker, even part of a service time, says the machine queues ours
    # (a mean would let a request that joined the round late pass as flat).
    queued = duration > params.flat * base + params.flat_rise
    if not queued and len(state.probe) < params.probe_n:
        return 0
    if queued:
        # Our requests queue at this concurrency: one less, and not tried again soon
        # (each failed probe doubles the wait: a probe queues a few of our requests).
        state.no_probe_until = end + min(params.cooldown * 2.0 ** state.probes_failed,
                                         params.cooldown_max)
        state.probes_failed += 1
        state.probing = False
        if state.limit > 1:
            _resize(state, state.limit - 1)
            return -1
        state.probe = []
        return 0
    state.probe = []
    if state.probing:
        state.probing = False
        state.probes_failed = 0  # the new concurrency is flat: a later probe starts afresh
    if (state.wanted and state.limit < params.max_limit and end >= state.no_probe_until
            and probe_worth(state, params)):
        _resize(state, state.limit + 1)
        state.probing = True
        return 1
    return 0


def probe_worth(state: ServerState, params: ServerParams) -> bool:
    """Whether the server may be probed past its limit: its latency now (the window's
    median, or the baseline) is at most ``probe_latency``. A slow server keeps the limit
    it has proven (one at first): a probe at its size queues one of our requests, a
    service time of one of its few workers taken from its own clients."""
    now = latency(state)
    return now is not None and now <= params.probe_latency


def shared_limit(state: ServerState, limit: int) -> None:
    """The limit several processes share is ``limit`` now (a cluster's workers): one
    that lowered it (its requests queued, the machine failed) lowered it for every
    process, and one that held every place and found the latency flat raised it."""
    if limit != state.limit:
        _resize(state, limit)
        state.probing = False


def released(state: ServerState, in_flight: int) -> None:
    """A request counted by :func:`sent` was never sent: it leaves its round."""
    state.round_n = max(state.round_n - 1, 0)
    if in_flight <= 0:
        state.round_n = 0


def latency(state: ServerState) -> float | None:
    """The server's latency now: the median of the window (or the baseline); None
    before any answer was measured."""
    if state.window:
        return statistics.median(state.window)
    if state.baseline is not None:
        return state.baseline
    return statistics.median(state.baseline_samples) if state.baseline_samples else None


def load_share(state: ServerState, since: float, now: float) -> float:
    """Our share of one server worker's time since ``since``: seconds of exchanges
    answered over the seconds elapsed."""
    elapsed = now - since
    return state.busy / elapsed if elapsed > 0 else 0.0
