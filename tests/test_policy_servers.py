"""The per-address bound (policy.servers), on a simulated server: W workers, each
request taking ``service`` seconds, queued when more than W of ours are open at once
(so its latency grows with our concurrency), and every site of it always wanting more."""

from __future__ import annotations

import itertools
import math

from polite_crawler.policy.servers import (
    ServerParams,
    ServerState,
    answered,
    held_back,
    load_share,
    next_send,
    probe_worth,
    released,
    sent,
)

P = ServerParams()


def _simulate(workers: int, service: float, seconds: float,
              params: ServerParams = P) -> tuple[ServerState, int, float, list[int]]:
    """Run the bound against the server for ``seconds``; returns the state, the most
    requests open at once, the share of one worker's time, and the limit over time."""
    st = ServerState("10.0.0.1")
    t = 0.0
    out: list[tuple[float, int, float]] = []  # (end, concurrency, duration)
    most = 0
    limits = []
    while t < seconds:
        at = next_send(st, len(out))
        while at is not None and at <= t:
            c = sent(st, len(out))
            duration = service * math.ceil(c / workers)  # beyond W, ours queue
            out.append((t + duration, c, duration))
            most = max(most, c)
            at = next_send(st, len(out))
        held_back(st)
        out.sort()
        ends = [e for e, _c, _d in out]
        nxt = min([*ends[:1], *([at] if at is not None else []), t + 1.0])
        t = max(nxt, t + 1e-6)
        while out and out[0][0] <= t:
            end, c, duration = out.pop(0)
            answered(st, params, duration=duration, end=end, concurrency=c,
                     in_flight=len(out))
            limits.append(st.limit)
    return st, most, load_share(st, 0.0, seconds), limits


def test_a_slow_small_server_is_never_probed_past_one() -> None:
    """150 ms a page on two workers (a small shared host): a probe of a third request
    would queue one of ours behind both workers; the slow server keeps one at a time."""
    st, most, share, limits = _simulate(workers=2, service=0.15, seconds=600)
    assert st.limit == 1
    assert most == 1
    assert set(limits) == {1}
    assert share <= 1 / 6 + 0.02  # the 5x rule: a sixth of one worker


def test_a_fast_small_server_gets_at_most_its_workers() -> None:
    st, most, share, limits = _simulate(workers=2, service=0.02, seconds=600)
    assert st.limit == 2
    assert most <= 3  # a probe of one more, now and then
    assert share <= 2 / 6 + 0.02  # the 5x rule per slot: a third of one worker
    # Probing the third slot is rare: once per cooldown at most.
    assert sum(1 for a, b in itertools.pairwise(limits) if b > a and b == 3) <= 4


def test_one_fast_worker_keeps_one_slot() -> None:
    _st, most, share, limits = _simulate(workers=1, service=0.05, seconds=600)
    assert most <= 2
    assert limits.count(1) >= 0.95 * len(limits)  # a probe of a second slot, rarely
    assert share <= 1 / 6 + 0.02


def test_a_probe_waits_while_the_latency_is_above_the_probe_latency() -> None:
    """The same flat answers: at 150 ms the limit stays one, and once the server
    answers within 100 ms the next flat round grows it."""
    st = ServerState("10.0.0.1")
    t = 0.0
    for _ in range(P.baseline_n + P.window_n):
        held_back(st)
        t += 1.0
        assert answered(st, P, duration=0.15, end=t, concurrency=1, in_flight=0) == 0
    assert st.limit == 1 and not probe_worth(st, P)
    changed = []
    for _ in range(P.window_n):
        held_back(st)
        t += 1.0
        changed.append(answered(st, P, duration=0.14, end=t, concurrency=1, in_flight=0))
    assert st.limit == 1 and changed.count(1) == 0  # 140 ms flat: still no probe
    for _ in range(P.window_n):
        held_back(st)
        t += 1.0
        changed.append(answered(st, P, duration=0.05, end=t, concurrency=1, in_flight=0))
    assert st.limit >= 2 and probe_worth(st, P)


def test_a_fast_edge_with_flat_latency_is_not_serialised() -> None:
    st, most, _share, _ = _simulate(workers=64, service=0.005, seconds=120)
    assert st.limit >= 16
    assert most <= 64


def test_latency_that_rises_whatever_the_concurrency_halves_the_limit() -> None:
    st = ServerState("10.0.0.1")
    for i in range(P.baseline_n):
        answered(st, P, duration=0.02, end=float(i), concurrency=1, in_flight=0)
    st.limit = 8
    for i in range(P.window_n):
        answered(st, P, duration=0.2, end=10.0 + i, concurrency=1, in_flight=0)
    assert st.limit == 4
    for _ in range(2):
        st.limit = 1
        for i in range(P.window_n):
            answered(st, P, duration=0.2, end=40.0 + i, concurrency=1, in_flight=0)
    assert st.factor == 4.0  # at a limit of one the rate halves instead


def test_a_failure_of_the_machine_makes_every_site_wait_and_the_limit_one() -> None:
    st = ServerState("10.0.0.1", limit=4)
    sent(st, 0)
    answered(st, P, duration=0.01, end=1.0, concurrency=1, in_flight=0, failure=True,
             wait=30.0)
    assert st.limit == 1
    assert next_send(st, 0) == 31.0


def test_a_round_then_five_times_its_longest_answer_and_a_release_frees_its_place() -> None:
    st = ServerState("10.0.0.1", limit=2)
    assert next_send(st, 0) == 0.0
    assert sent(st, 0) == 1
    assert next_send(st, 1) == 0.0  # room in the round
    assert sent(st, 1) == 2
    assert next_send(st, 2) is None  # the round is full
    answered(st, P, duration=0.1, end=0.1, concurrency=1, in_flight=1)
    assert next_send(st, 1) is None  # its last answer sets the next round's time
    answered(st, P, duration=0.2, end=0.2, concurrency=2, in_flight=0)
    assert next_send(st, 0) == 0.2 + 5 * 0.2
    sent(st, 0)
    released(st, 0)
    assert st.round_n == 0


def test_the_bound_that_decides_an_origins_next_request_is_named() -> None:
    from polite_crawler.policy.bounds import (
        HOST_BUSY,
        HOST_REST,
        NONE,
        SERVER_FULL,
        SERVER_REST,
        next_request,
    )
    from polite_crawler.policy.rest import OriginState

    st = OriginState("https://a.example:8443", next_allowed=10.0)
    got = next_request(st.origin, 5.0, origin_state=st, host_next=12.0)
    assert (got.host, got.at, got.bound) == ("a.example", 12.0, HOST_REST)
    assert next_request(st.origin, 5.0, origin_state=st, host_busy=True).bound == HOST_BUSY
    server = ServerState("10.0.0.1", next_allowed=20.0)
    got = next_request(st.origin, 5.0, origin_state=st, host_next=12.0, server=server)
    assert (got.server, got.at, got.bound) == ("10.0.0.1", 20.0, SERVER_REST)
    sent(server, 0)
    assert next_request(st.origin, 30.0, origin_state=st, server=server,
                        server_in_flight=1).bound == SERVER_FULL
    assert next_request(st.origin, 30.0, origin_state=OriginState(st.origin)).bound == NONE
