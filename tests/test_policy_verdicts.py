"""The verdict rules: status -> action, Retry-After, backoff, breaker, rate factor."""

from __future__ import annotations

import doctest
import email.utils
import random
import socket
import ssl
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scrapy.http import Headers

import polite_crawler.policy.verdicts as verdicts_module
from polite_crawler.defaults import POLITE_DEFAULTS
from polite_crawler.policy.verdicts import (
    STOP_BREAKER,
    STOP_PARKED,
    Action,
    FailureState,
    HeaderView,
    Verdict,
    VerdictParams,
    apply_verdict,
    backoff_delay,
    classify_exception,
    classify_response,
    describe_stop,
    error_kind,
    may_retry,
    new_run,
    parse_retry_after,
    text_headers,
)

NOW = 1_700_000_000.0


class _Settings(dict):
    def getfloat(self, name: str, default: float = 0.0) -> float:
        return float(self.get(name, default))

    def getint(self, name: str, default: int = 0) -> int:
        return int(self.get(name, default))


# The verdicts' knobs at the declared defaults, as a crawl without other settings reads them.
DEFAULT_PARAMS = VerdictParams.from_settings(_Settings(POLITE_DEFAULTS))


def _rng() -> random.Random:
    return random.Random(5)


def test_doctests() -> None:
    failed, tried = doctest.testmod(verdicts_module)
    assert tried > 0
    assert failed == 0


# --- classify_response ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "action", "failure"),
    [
        (200, Action.OK, False),
        (204, Action.OK, False),
        (301, Action.OK, False),
        (304, Action.NOT_MODIFIED, False),
        (402, Action.STOP_ORIGIN, False),
        (403, Action.STOP_ORIGIN, False),
        (404, Action.GIVE_UP, False),
        (410, Action.GIVE_UP, False),
        (400, Action.GIVE_UP, False),
        (401, Action.GIVE_UP, False),
        (451, Action.GIVE_UP, False),
        (408, Action.RETRY_LATER, False),
        (429, Action.RETRY_LATER, False),
        (503, Action.RETRY_LATER, True),
        (500, Action.RETRY_LATER, True),
        (502, Action.RETRY_LATER, True),
        (504, Action.RETRY_LATER, True),
        (599, Action.RETRY_LATER, True),
    ],
)
def test_status_actions(status: int, action: Action, failure: bool) -> None:
    v = classify_response(status, {}, b"<html>ordinary page</html>", NOW)
    assert v.action is action
    assert v.failure is failure
    assert v.reason == str(status)
    assert v.rate_limited is (status == 429)
    assert v.label == f"{action.value}:{status}"


def test_429_and_503_carry_retry_after() -> None:
    v = classify_response(429, {"retry-after": "7"}, b"", NOW)
    assert v.wait == 7.0 and v.rate_limited and not v.park
    date = email.utils.formatdate(NOW + 90, usegmt=True)
    v = classify_response(503, {"retry-after": date}, b"", NOW)
    assert v.wait == pytest.approx(90.0, abs=1.0)
    assert not v.rate_limited and v.failure
    assert classify_response(429, {"retry-after": "garbage"}, b"", NOW).wait is None


def test_long_retry_after_parks() -> None:
    v = classify_response(429, {"retry-after": str(2 * 24 * 3600)}, b"", NOW,
                          params=DEFAULT_PARAMS)
    assert v.park
    short = classify_response(429, {"retry-after": "3600"}, b"", NOW, params=DEFAULT_PARAMS)
    assert not short.park
    # Without the crawl's params the park is judged when the verdict is applied.
    unjudged = classify_response(429, {"retry-after": str(2 * 24 * 3600)}, b"", NOW)
    assert not unjudged.park
    assert apply_verdict(FailureState(), unjudged, NOW, DEFAULT_PARAMS, _rng()).stopped \
        == apply_verdict(FailureState(), v, NOW, DEFAULT_PARAMS, _rng()).stopped
    assert classify_response(
        429, {"retry-after": "3600"}, b"", NOW, params=replace(DEFAULT_PARAMS, park_after=60)
    ).park


def test_challenge_beats_status() -> None:
    body = (b"<html><head><title>Just a moment...</title></head>"
            b"<script src='/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1'></script>")
    for status in (200, 403, 503, 429):
        v = classify_response(status, {}, body, NOW)
        assert v.action is Action.STOP_ORIGIN
        assert v.reason == "challenge:cloudflare"


def test_text_headers() -> None:
    assert text_headers([(b"Retry-After", [b"7"]), (b"X-A", [b"1", b"2"])]) == {
        "retry-after": "7", "x-a": "1, 2"}
    assert text_headers({"A": "x", "a": "y"}) == {"a": "x, y"}


# --- Retry-After -------------------------------------------------------------------


def test_retry_after_forms() -> None:
    assert parse_retry_after("120", NOW) == 120.0
    assert parse_retry_after(b" 7 ", NOW) == 7.0
    assert parse_retry_after("1.5", NOW) == 1.5
    assert parse_retry_after(None, NOW) is None
    assert parse_retry_after("", NOW) is None
    assert parse_retry_after("0", NOW) is None
    assert parse_retry_after("-3", NOW) is None
    assert parse_retry_after("7 seconds", NOW) is None
    assert parse_retry_after("inf", NOW) is None
    assert parse_retry_after("nan", NOW) is None
    # the three HTTP-date forms of RFC 9110 section 5.6.7
    base = datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC).timestamp()
    for text in ("Tue, 14 Nov 2023 22:15:20 GMT", "Tuesday, 14-Nov-23 22:15:20 GMT",
                 "Tue Nov 14 22:15:20 2023"):
        assert parse_retry_after(text, base) == pytest.approx(120.0), text
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:19 GMT", base) is None  # past
    assert parse_retry_after("Tue, 14 Nov 2023 22:13:20 GMT", base) is None  # now


@given(st.integers(min_value=1, max_value=10**9))
def test_retry_after_delta_property(seconds: int) -> None:
    assert parse_retry_after(str(seconds), NOW) == float(seconds)


@given(st.integers(min_value=-(10**9), max_value=0))
def test_retry_after_non_positive_absent(seconds: int) -> None:
    assert parse_retry_after(str(seconds), NOW) is None


@given(st.integers(min_value=1, max_value=10 * 365 * 86400))
def test_retry_after_future_date_property(ahead: int) -> None:
    text = email.utils.formatdate(NOW + ahead, usegmt=True)
    assert parse_retry_after(text, NOW) == pytest.approx(float(ahead))


@given(st.integers(min_value=0, max_value=30 * 365 * 86400))
def test_retry_after_past_date_absent(behind: int) -> None:
    text = email.utils.formatdate(NOW - behind, usegmt=True)
    assert parse_retry_after(text, NOW) is None


@given(st.text(max_size=40))
def test_retry_after_garbage_never_raises(text: str) -> None:
    got = parse_retry_after(text, NOW)
    assert got is None or got > 0


@given(st.binary(max_size=40))
def test_retry_after_bytes_never_raises(raw: bytes) -> None:
    got = parse_retry_after(raw, NOW)
    assert got is None or got > 0


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz !?;", min_size=1, max_size=20))
def test_retry_after_words_absent(text: str) -> None:
    assert parse_retry_after(text, NOW) is None


# --- backoff -------------------------------------------------------------------------


@given(st.integers(min_value=1, max_value=200), st.integers(min_value=0, max_value=2**32))
def test_backoff_grows_and_is_capped(streak: int, seed: int) -> None:
    rng = random.Random(seed)
    a = backoff_delay(streak, rng, base=4.0, cap=300.0)
    b = backoff_delay(streak + 1, rng, base=4.0, cap=300.0)
    assert 4.0 <= a <= 300.0
    assert b >= a or a == 300.0 or b == 300.0
    assert backoff_delay(streak + 1, random.Random(seed), 4.0, 300.0) >= 4.0 * 2 ** min(streak, 6)


def test_backoff_jitter_spreads() -> None:
    rng = random.Random(1)
    values = {round(backoff_delay(2, rng), 3) for _ in range(50)}
    assert len(values) > 40
    assert all(8.0 <= v < 16.0 for v in values)
    assert backoff_delay(0, rng) == 0.0


# --- apply_verdict -------------------------------------------------------------------


def test_retry_after_sets_wait_never_shortens() -> None:
    v = classify_response(429, {"retry-after": "600"}, b"", NOW)
    s = apply_verdict(FailureState(), v, NOW, DEFAULT_PARAMS, _rng())
    # above POLITE_BACKOFF_MAX, still honoured in full
    assert s.wait_until == NOW + 600
    assert s.stopped is None
    shorter = classify_response(429, {"retry-after": "5"}, b"", NOW + 1)
    s2 = apply_verdict(s, shorter, NOW + 1, DEFAULT_PARAMS, _rng())
    assert s2.wait_until == NOW + 600


def test_backoff_without_header_grows() -> None:
    s = FailureState()
    waits = []
    v = classify_response(429, {}, b"", NOW)
    for _ in range(8):
        s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
        waits.append(s.last_wait)
    assert waits == sorted(waits)
    assert waits[0] >= 4.0
    assert waits[-1] == 300.0
    assert s.stopped is None  # 429 is rate limiting, not a breaker failure
    assert s.consecutive_failures == 0


def test_five_503s_in_a_row_stop_the_origin() -> None:
    s = FailureState()
    v = classify_response(503, {}, b"", NOW)
    for i in range(5):
        assert s.stopped is None, i
        s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
    assert s.stopped is not None
    assert s.consecutive_failures == 5


def test_three_429s_halve_the_rate() -> None:
    s = FailureState()
    v = classify_response(429, {"retry-after": "1"}, b"", NOW)
    s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
    s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
    assert s.rate_factor == 1.0
    ok = classify_response(200, {}, b"", NOW)
    s = apply_verdict(s, ok, NOW, DEFAULT_PARAMS, _rng())  # hits count per run, not per streak
    s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
    assert s.rate_limit_hits == 3
    assert s.rate_factor == 2.0
    for _ in range(5):
        s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
    assert s.rate_factor == 2.0  # halved once for the run
    assert new_run(s).rate_factor == 1.0


def test_breaker_after_five_failures_and_reset_by_success() -> None:
    rng = _rng()
    err = classify_response(500, {}, b"", NOW)
    reset = classify_exception(ConnectionResetError())
    s = FailureState()
    for v in (err, reset, err, err):
        s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, rng)
    assert s.stopped is None and s.consecutive_failures == 4
    s = apply_verdict(s, classify_response(200, {}, b"", NOW), NOW, DEFAULT_PARAMS, rng)
    assert s.consecutive_failures == 0 and s.backoff_streak == 0
    for _ in range(4):
        s = apply_verdict(s, err, NOW, DEFAULT_PARAMS, rng)
    assert s.stopped is None
    s = apply_verdict(s, reset, NOW, DEFAULT_PARAMS, rng)
    assert s.stopped == STOP_BREAKER
    assert "breaker" in describe_stop(s.stopped)


def test_breaker_count_is_a_setting() -> None:
    params = replace(DEFAULT_PARAMS, breaker_failures=2)
    err = classify_response(502, {}, b"", NOW)
    s = apply_verdict(FailureState(), err, NOW, params, _rng())
    assert s.stopped is None
    assert apply_verdict(s, err, NOW, params, _rng()).stopped == STOP_BREAKER


def test_429_does_not_reset_breaker_streak_but_404_does() -> None:
    err = classify_response(500, {}, b"", NOW)
    s = FailureState()
    for _ in range(4):
        s = apply_verdict(s, err, NOW, DEFAULT_PARAMS, _rng())
    s = apply_verdict(s, classify_response(429, {}, b"", NOW), NOW, DEFAULT_PARAMS, _rng())
    assert s.consecutive_failures == 4
    s = apply_verdict(s, classify_response(404, {}, b"", NOW), NOW, DEFAULT_PARAMS, _rng())
    assert s.consecutive_failures == 0


def test_stop_verdicts() -> None:
    for status in (402, 403):
        s = apply_verdict(FailureState(), classify_response(status, {}, b"", NOW), NOW,
                          DEFAULT_PARAMS, _rng())
        assert s.stopped == str(status)
        assert str(status) in describe_stop(s.stopped)
    s = apply_verdict(FailureState(stopped="403"), classify_response(
        200, {"cf-mitigated": "challenge"}, b"", NOW), NOW, DEFAULT_PARAMS, _rng())
    assert s.stopped == "403"  # the first reason stays


def test_park() -> None:
    v = classify_response(503, {"retry-after": str(3 * 86400)}, b"", NOW)
    s = apply_verdict(FailureState(), v, NOW, DEFAULT_PARAMS, _rng())
    assert s.stopped == STOP_PARKED
    assert s.wait_until == NOW + 3 * 86400  # the server's wait carries into the next run
    assert new_run(s).wait_until == NOW + 3 * 86400
    assert new_run(s).stopped is None


def test_wait_scale_for_tests() -> None:
    params = replace(DEFAULT_PARAMS, wait_scale=0.01)
    s = apply_verdict(FailureState(), classify_response(429, {"retry-after": "7"}, b"", NOW),
                      NOW, params, _rng())
    assert s.wait_until == pytest.approx(NOW + 0.07)


def test_params_from_settings_scale_only_for_test_origins() -> None:
    settings = _Settings(POLITE_TEST_WAIT_SCALE=0.01, POLITE_BREAKER_FAILURES=3,
                         POLITE_BACKOFF_MAX=60, POLITE_RETRY_TIMES=2)
    public = VerdictParams.from_settings(settings)
    assert public.wait_scale == 1.0
    assert public.breaker_failures == 3 and public.backoff_max == 60 and public.retry_times == 2
    assert VerdictParams.from_settings(settings, test_origin=True).wait_scale == 0.01
    assert VerdictParams.from_settings(_Settings()).wait_scale == 1.0


def test_params_read_the_declared_defaults_without_the_add_on() -> None:
    """The crawl's settings without the add-on (polite_settings) give the declared
    defaults; no test scale set, waits are not scaled, even on a test origin."""
    from scrapy.settings import Settings

    from polite_crawler.defaults import polite_settings

    params = VerdictParams.from_settings(polite_settings(Settings()), test_origin=True)
    assert (params.backoff_max, params.breaker_failures, params.park_after,
            params.backoff_base, params.retry_times, params.wait_scale) == (
        POLITE_DEFAULTS["POLITE_BACKOFF_MAX"], POLITE_DEFAULTS["POLITE_BREAKER_FAILURES"],
        POLITE_DEFAULTS["POLITE_RETRY_AFTER_PARK"], POLITE_DEFAULTS["POLITE_BACKOFF_BASE"],
        POLITE_DEFAULTS["POLITE_RETRY_TIMES"], 1.0)


def test_may_retry() -> None:
    assert may_retry(0, DEFAULT_PARAMS)
    assert may_retry(2, DEFAULT_PARAMS)
    assert not may_retry(3, DEFAULT_PARAMS)
    assert not may_retry(0, replace(DEFAULT_PARAMS, retry_times=0))


def test_408_retried_with_backoff() -> None:
    s = apply_verdict(FailureState(), classify_response(408, {}, b"", NOW), NOW,
                      DEFAULT_PARAMS, _rng())
    assert 4.0 <= s.wait_until - NOW < 8.0
    assert s.consecutive_failures == 0


def test_give_up_and_success_leave_wait_alone() -> None:
    s = FailureState(wait_until=NOW + 50)
    s2 = apply_verdict(s, classify_response(404, {}, b"", NOW), NOW, DEFAULT_PARAMS, _rng())
    assert s2.wait_until == NOW + 50 and s2.stopped is None


# --- exceptions ----------------------------------------------------------------------


class ResponseNeverReceived(Exception):
    """Shaped as Twisted's: ``reasons`` holds Failures with ``value``."""

    def __init__(self, inner: BaseException) -> None:
        super().__init__()

        class _F:
            value = inner

        self.reasons = [_F()]


class DNSLookupError(OSError):
    pass


class TCPTimedOutError(Exception):
    pass


class IgnoreRequest(Exception):
    pass


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ConnectionRefusedError(), "refused"),
        (ConnectionResetError(), "reset"),
        (TimeoutError(), "timeout"),
        (socket.gaierror(), "dns"),
        (DNSLookupError(), "dns"),
        (TCPTimedOutError(), "timeout"),
        (ssl.SSLError(), "tls"),
        (ssl.SSLCertVerificationError(), "tls"),
        (ResponseNeverReceived(ConnectionResetError()), "reset"),
        (OSError(), "connect"),
        (ValueError(), "other"),
    ],
)
def test_exception_kinds(exc: BaseException, kind: str) -> None:
    assert error_kind(exc) == kind
    v = classify_exception(exc)
    assert v == Verdict(Action.RETRY_LATER, f"error:{kind}", failure=True)


def test_own_cancellations_are_not_failures() -> None:
    v = classify_exception(IgnoreRequest())
    assert v.action is Action.GIVE_UP and not v.failure
    s = apply_verdict(FailureState(consecutive_failures=4), v, NOW, DEFAULT_PARAMS, _rng())
    assert s.stopped is None


def test_real_scrapy_and_twisted_exceptions() -> None:
    # The policy names them without importing them; check against the real classes.
    from scrapy.exceptions import (
        CannotResolveHostError,
        DownloadCancelledError,
        DownloadConnectionRefusedError,
        DownloadTimeoutError,
        IgnoreRequest,
        ResponseDataLossError,
    )
    from twisted.internet import error as terr
    from twisted.python.failure import Failure
    from twisted.web._newclient import ResponseNeverReceived

    assert error_kind(DownloadConnectionRefusedError()) == "refused"
    assert error_kind(CannotResolveHostError()) == "dns"
    assert error_kind(DownloadTimeoutError()) == "timeout"
    assert error_kind(ResponseDataLossError()) == "lost"
    assert error_kind(DownloadCancelledError()) == "cancelled"
    assert error_kind(IgnoreRequest()) == "ignored"
    assert error_kind(terr.ConnectionRefusedError()) == "refused"
    assert error_kind(terr.DNSLookupError()) == "dns"
    assert error_kind(terr.TCPTimedOutError()) == "timeout"
    assert error_kind(terr.TimeoutError()) == "timeout"
    assert error_kind(terr.ConnectionLost()) == "lost"
    assert error_kind(ResponseNeverReceived([Failure(terr.ConnectionLost())])) == "lost"
    from OpenSSL import SSL

    assert error_kind(SSL.Error()) == "tls"


def test_challenge_in_a_compressed_body() -> None:
    # The gate sees bodies before decompression: the verdict decodes the head itself.
    import gzip

    import brotli

    page = (b"<html><head><title>Just a moment...</title></head>"
            b"<script>window._cf_chl_opt={};</script>" + b"x" * 50_000)
    for coding, body in (("gzip", gzip.compress(page)), ("br", brotli.compress(page))):
        v = classify_response(403, {"content-encoding": coding}, body[:4096], NOW)
        assert v.reason == "challenge:cloudflare", coding
    plain = classify_response(200, {"content-encoding": "gzip"}, gzip.compress(b"<p>hi</p>"), NOW)
    assert plain.action is Action.OK


# --- failures that are a property of the answer ---------------------------------------


def test_issue15_unusable_answers_are_given_up_but_count_as_failures() -> None:
    # Failed before the fix: both were retried later (RETRY_LATER).
    from scrapy.exceptions import DownloadFailedError
    from twisted.python.failure import Failure
    from twisted.web._newclient import BadResponseVersion, ParseError, ResponseFailed

    from polite_crawler.handlers import HeadersTooLargeError

    def as_scrapy_raises(inner: BaseException) -> BaseException:
        try:
            try:
                raise ResponseFailed([Failure(inner)])
            except ResponseFailed as exc:
                raise DownloadFailedError(str(exc)) from exc
        except DownloadFailedError as outer:
            return outer

    cases = [
        (HeadersTooLargeError("head"), "head_too_large"),
        (as_scrapy_raises(ParseError("wrong number of parts", b"garbage")), "malformed"),
        (as_scrapy_raises(BadResponseVersion("bad version", b"HTTQ/1.1")), "malformed"),
        (ResponseFailed([Failure(ParseError("non-integer status code", b"x"))]), "malformed"),
    ]
    for exc, kind in cases:
        assert error_kind(exc) == kind
        v = classify_exception(exc)
        assert v == Verdict(Action.GIVE_UP, f"error:{kind}", failure=True)
    # A lost connection inside the same wrapping stays a network failure.
    from twisted.internet.error import ConnectionLost
    assert classify_exception(as_scrapy_raises(ConnectionLost())).action is Action.RETRY_LATER


def test_issue15_unusable_answers_back_off_and_reach_the_breaker() -> None:
    v = Verdict(Action.GIVE_UP, "error:head_too_large", failure=True)
    s = FailureState()
    for n in range(1, DEFAULT_PARAMS.breaker_failures + 1):
        s = apply_verdict(s, v, NOW, DEFAULT_PARAMS, _rng())
        assert s.consecutive_failures == n
        assert s.wait_until > NOW  # backs off like any failure
    assert s.stopped == STOP_BREAKER
    ok = apply_verdict(FailureState(consecutive_failures=3), classify_response(200, {}, b"", NOW),
                       NOW, DEFAULT_PARAMS, _rng())
    assert ok.consecutive_failures == 0


def test_the_gates_header_view_reads_retry_after() -> None:
    view = HeaderView(Headers({"Retry-After": "7", "Content-Type": "text/html"}))
    verdict = classify_response(429, view, b"", now=0.0)
    assert (verdict.label, verdict.wait) == ("retry_later:429", 7.0)
    assert "retry-after" in view and view.get("x-absent") is None and len(view) == 2
