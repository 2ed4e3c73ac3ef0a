from __future__ import annotations

import json
import math
import random

import pytest

from polite_crawler.policy.rest import (
    DOUBLED,
    EASED,
    OriginState,
    RestParams,
    budget_left,
    charge_budget,
    compute_rest,
    dispatch_lead,
    floor_params,
    observe_latency,
    settle,
    utc_day,
    wait_before_send,
)
from polite_crawler.policy.verdicts import FailureState

NOJIT = RestParams(jitter=0.0)
T0 = 1_700_000_000.0


def rest_of(
    state: OriginState, params: RestParams = NOJIT, api: bool = False, end: float = T0
) -> float:
    return compute_rest(state, params, end=end, api=api, rng=random.Random(1)).total


def test_base_rest_page_and_api() -> None:
    s = OriginState("http://a")
    assert rest_of(s) == 3.0
    assert rest_of(s, api=True) == 1.0


def test_duration_term_and_its_cap() -> None:
    s = OriginState("http://a", last_duration=0.8)
    assert rest_of(s) == pytest.approx(4.0)  # 5 x 0.8 beats the 3 s base
    s.last_duration = 0.1
    assert rest_of(s) == 3.0  # 0.5 s: the base wins
    s.last_duration = 20.0
    assert rest_of(s) == 30.0  # 100 s capped at 30 s
    assert rest_of(s, RestParams(jitter=0.0, duration_factor=10.0)) == 30.0


def test_crawl_delay_term_and_its_cap() -> None:
    s = OriginState("http://a", crawl_delay=7.0)
    assert rest_of(s) == 7.0
    s.crawl_delay = 3600.0
    assert rest_of(s) == 60.0


def test_verdict_wait_term() -> None:
    s = OriginState("http://a", failure=FailureState(wait_until=T0 + 42.0))
    assert rest_of(s) == pytest.approx(42.0)
    # A Retry-After above the backoff cap is honoured in full, never shortened.
    s.failure.wait_until = T0 + 900.0
    assert rest_of(s) == pytest.approx(900.0)
    # A wait already over adds nothing.
    s.failure.wait_until = T0 - 5
    assert rest_of(s) == 3.0


def test_factors_multiply_the_longest_term() -> None:
    s = OriginState("http://a", last_duration=1.0, latency_factor=2.0,
                    failure=FailureState(rate_factor=2.0))
    assert rest_of(s) == pytest.approx(5.0 * 2 * 2)


def test_jitter_is_a_fraction_of_the_base() -> None:
    params = RestParams(jitter=1.0)
    s = OriginState("http://a")
    rng = random.Random(7)
    seen = [compute_rest(s, params, end=T0, api=False, rng=rng) for _ in range(200)]
    assert all(3.0 <= r.total <= 6.0 for r in seen)
    assert max(r.jitter for r in seen) > 2.5 and min(r.jitter for r in seen) < 0.5
    api = [compute_rest(s, params, end=T0, api=True, rng=rng).total for _ in range(200)]
    assert all(1.0 <= r <= 2.0 for r in api)  # the seeds' "uniform between 1.0 and 2.0 s"


def test_settle_measures_from_the_end() -> None:
    s = OriginState("http://a")
    rest, doubled = settle(s, NOJIT, start=T0, end=T0 + 2.0, api=False, rng=random.Random())
    assert not doubled
    assert s.last_duration == 2.0
    assert rest.total == 10.0
    assert s.next_allowed == T0 + 2.0 + 10.0
    assert s.eligible_at() == T0 + 12.0


def test_eligible_at_includes_the_server_wait() -> None:
    s = OriginState("http://a", next_allowed=T0 + 3, failure=FailureState(wait_until=T0 + 30))
    assert s.eligible_at() == T0 + 30


def test_latency_watch_doubles_then_remeasures() -> None:
    params = RestParams(jitter=0.0)
    s = OriginState("http://a")
    for _ in range(5):
        assert not observe_latency(s, 0.1, params)
    assert s.baseline == pytest.approx(0.1)
    # Fifteen more fast ones, then slow ones: the tenth slow one lifts the median of
    # the last twenty (mean of the middle two: 0.1 and 0.5) above twice the baseline.
    for _ in range(15):
        assert not observe_latency(s, 0.1, params)
    fired = [observe_latency(s, 0.5, params) for _ in range(10)]
    assert fired[-1] and not any(fired[:-1])
    assert s.latency_factor == 2.0
    assert s.window == []
    # It re-measures before doubling again: 19 slow responses are not enough.
    assert not any(observe_latency(s, 0.5, params) for _ in range(19))
    assert observe_latency(s, 0.5, params)
    assert s.latency_factor == 4.0
    assert rest_of(s) == pytest.approx(4 * 3.0)


def test_latency_watch_stays_calm_for_a_steady_host() -> None:
    s = OriginState("http://a")
    rng = random.Random(3)
    for _ in range(500):
        observe_latency(s, rng.uniform(0.08, 0.12), NOJIT)
    assert s.latency_factor == 1.0


def _warm(s: OriginState, params: RestParams, duration: float) -> None:
    """Baseline and a first full window at ``duration``."""
    for _ in range(params.baseline_n + params.window_n):
        assert observe_latency(s, duration, params) == 0
    assert s.baseline == pytest.approx(duration)


def test_latency_watch_needs_an_absolute_rise() -> None:
    # 1 ms becoming 3 ms is three times the baseline but no server in trouble.
    params = RestParams(jitter=0.0)
    s = OriginState("http://a")
    _warm(s, params, 0.001)
    assert not any(observe_latency(s, 0.003, params) for _ in range(200))
    assert s.latency_factor == 1.0
    # 48 ms more is still within the default rise of 50 ms; 60 ms more is not.
    assert not any(observe_latency(s, 0.049, params) for _ in range(200))
    results = [observe_latency(s, 0.061, params) for _ in range(20)]
    assert results.count(DOUBLED) == 1 and s.latency_factor == 2.0


def test_latency_watch_rise_is_a_setting() -> None:
    strict = RestParams(jitter=0.0, latency_min_rise=0.0)
    s = OriginState("http://a")
    _warm(s, strict, 0.001)
    assert [observe_latency(s, 0.003, strict) for _ in range(20)].count(DOUBLED) == 1
    lax = RestParams(jitter=0.0, latency_min_rise=1.0)
    s = OriginState("http://a")
    _warm(s, lax, 0.1)
    assert not any(observe_latency(s, 0.9, lax) for _ in range(100))  # +0.8 s < 1 s
    assert [observe_latency(s, 1.2, lax) for _ in range(20)].count(DOUBLED) == 1


def test_latency_watch_eases_step_by_step() -> None:
    params = RestParams(jitter=0.0)
    s = OriginState("http://a")
    _warm(s, params, 0.1)
    changes = [observe_latency(s, 0.5, params) for _ in range(50)]
    assert changes.count(DOUBLED) == 3 and s.latency_factor == 8.0
    assert s.window == []  # the third doubling was the 50th: a fresh window
    # Back at the baseline: one halving per full window, never below 1.
    steps = []
    for _ in range(5):
        changes = [observe_latency(s, 0.1, params) for _ in range(params.window_n)]
        assert changes[:-1] == [0] * (params.window_n - 1)
        steps.append((changes[-1], s.latency_factor))
    assert steps == [(EASED, 4.0), (EASED, 2.0), (EASED, 1.0), (0, 1.0), (0, 1.0)]
    assert rest_of(s) == pytest.approx(3.0)


def test_latency_watch_holds_between_the_bands() -> None:
    # Baseline 100 ms: doubling needs > 200 ms (and > 150 ms); easing needs <= 150 ms
    # (or <= 125 ms). At 180 ms the factor neither grows nor shrinks.
    params = RestParams(jitter=0.0)
    s = OriginState("http://a")
    _warm(s, params, 0.1)
    s.latency_factor, s.window = 2.0, []  # as after a doubling
    assert not any(observe_latency(s, 0.18, params) for _ in range(200))
    assert s.latency_factor == 2.0
    assert [observe_latency(s, 0.14, params) for _ in range(20)].count(EASED) == 1
    assert s.latency_factor == 1.0


def test_settle_times_the_exchange_with_the_given_clock() -> None:
    # Everything comes from the times passed in: the exchange took 4 ms (start/end).
    params = RestParams(jitter=0.0, rest_page=0.05, baseline_n=1, window_n=2)
    s = OriginState("http://a")
    rng = random.Random(1)
    t = T0
    for _ in range(10):
        rest, doubled = settle(s, params, start=t, end=t + 0.004, api=False, rng=rng)
        assert not doubled and rest.total == pytest.approx(0.05)
        t += 1.0
    assert s.last_duration == pytest.approx(0.004, abs=1e-6)
    # Window [0.004, 0.3]: its median, 152 ms, is above 2 x 4 ms and above 4 + 50 ms.
    rest, doubled = settle(s, params, start=t, end=t + 0.3, api=False, rng=rng)
    assert doubled and s.latency_factor == 2.0
    assert rest.total == pytest.approx(2 * 5 * 0.3)  # the duration term, doubled
    assert s.next_allowed == pytest.approx(t + 0.3 + rest.total)


def test_public_floor_caps_the_latency_rise() -> None:
    floored, raised = floor_params(RestParams(latency_min_rise=2.0))
    assert floored.latency_min_rise == 0.05 and raised == ["latency_min_rise"]
    assert floor_params(RestParams(latency_min_rise=0.01))[1] == []


def test_daily_budget_per_utc_day() -> None:
    s = OriginState("http://a")
    assert budget_left(s, 3, T0) == 3
    for _ in range(3):
        charge_budget(s, T0)
    assert budget_left(s, 3, T0) == 0
    assert s.budget_day == utc_day(T0)
    tomorrow = T0 + 86400
    assert budget_left(s, 3, tomorrow) == 3
    charge_budget(s, tomorrow)
    assert s.budget_used == 1


def test_public_floor_clamps_low_settings() -> None:
    low = RestParams(rest_page=0.05, rest_api=0.01, duration_factor=1.0, duration_max=1.0,
                     crawl_delay_max=1.0, jitter=0.0)
    floored, raised = floor_params(low)
    assert raised == ["crawl_delay_max", "duration_factor", "duration_max", "rest_api", "rest_page"]
    assert (floored.rest_page, floored.rest_api, floored.duration_factor) == (3.0, 1.0, 5.0)
    assert (floored.duration_max, floored.crawl_delay_max) == (30.0, 60.0)
    high = RestParams(rest_page=10.0, duration_factor=10.0)
    assert floor_params(high) == (high, [])


def test_state_round_trips_through_json() -> None:
    s = OriginState("http://a", next_allowed=T0 + 3, last_duration=0.4, crawl_delay=2.0,
                    baseline=0.1, baseline_samples=[0.1] * 5, window=[0.2, 0.3],
                    latency_factor=2.0, budget_day="2024-01-01", budget_used=7,
                    failure=FailureState(consecutive_failures=2, wait_until=math.inf,
                                         rate_factor=2.0, stopped="403"))
    back = OriginState.from_json(s.to_json())
    assert back.failure.wait_until == 1e18  # a parked origin stays parked
    back.failure.wait_until = math.inf
    assert back == s
    back.reset_run()
    assert back.latency_factor == 1.0 and back.failure.stopped is None
    assert back.failure.wait_until == math.inf and back.budget_used == 7


def test_a_state_is_stored_with_what_differs_from_a_new_one() -> None:
    # An owner's row holds its budget count, a host's its rest's end: written at each
    # checkpoint, with nothing else to serialise.
    owner = OriginState("example.org", budget_day="2024-01-01", budget_used=3)
    assert json.loads(owner.to_json()) == {"origin": "example.org",
                                           "budget_day": "2024-01-01", "budget_used": 3}
    assert OriginState.from_json(owner.to_json()) == owner
    assert OriginState.from_json(OriginState("h").to_json()) == OriginState("h")


def test_dispatch_lead_is_the_setting_at_most_a_quarter_of_the_base_rest() -> None:
    params = RestParams(rest_page=1.0, rest_api=0.2, jitter=0.0)
    assert dispatch_lead(0.1, params) == 0.1  # below the bound: as configured
    assert dispatch_lead(0.25, params) == 0.25
    assert dispatch_lead(5.0, params) == 0.25  # a quarter of the page rest, not the API one
    assert dispatch_lead(5.0, RestParams()) == 0.75  # the public floor's 3 s page rest
    assert dispatch_lead(0.0, params) == 0.0  # off
    assert dispatch_lead(-1.0, params) == 0.0  # never negative
    assert dispatch_lead(0.5, RestParams(rest_page=0.0, jitter=0.0)) == 0.0  # no rest, no lead


def test_a_request_handed_out_ahead_waits_for_its_time_and_no_longer() -> None:
    assert wait_before_send(T0 + 0.2, T0) == pytest.approx(0.2)
    assert wait_before_send(T0 + 0.2, T0 + 0.2) == 0.0  # its time: sent
    assert wait_before_send(T0 + 0.2, T0 + 0.3) == 0.0  # late: sent at once, never negative
    assert wait_before_send(T0 + 1e-6, T0) > 0  # a microsecond early is still early
    assert wait_before_send(0.0, T0) == 0.0  # not handed out ahead: no time carried


def test_a_state_that_observed_no_response_holds_no_list_and_no_dict() -> None:
    # A host's and an owner's rows are states that never observe a response: one of
    # each a site, so what a fresh state holds is memory a site.
    import tracemalloc
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        states = [OriginState(f"h{i:05d}.example") for i in range(2000)]
        each = (tracemalloc.get_traced_memory()[0] - before) / len(states)
    finally:
        tracemalloc.stop()
    s = states[0]
    assert s.baseline_samples is None and s.window is None
    assert not hasattr(s, "__dict__")
    assert each < 400  # 510 bytes with an instance dict and two empty lists


def test_the_baseline_samples_are_let_go_once_the_baseline_is_read() -> None:
    s, p = OriginState("http://a"), RestParams(baseline_n=3, window_n=4)
    for d in (0.01, 0.02):
        observe_latency(s, d, p)
    assert s.baseline is None and s.baseline_samples == [0.01, 0.02]
    back = OriginState.from_json(s.to_json())  # a row stored mid-measure reads back
    assert back.baseline_samples == [0.01, 0.02] and back.window == [0.01, 0.02]
    observe_latency(s, 0.03, p)
    assert s.baseline == 0.02 and s.baseline_samples is None
    assert json.loads(s.to_json()).get("baseline_samples") is None
    s.reset_run()
    assert s.baseline is None and s.window is None
