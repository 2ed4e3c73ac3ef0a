"""What each response means for its origin.

INTERFACE between the frontier and the verdicts: the gate middleware calls
``classify_response`` / ``classify_exception`` for every exchange and
``apply_verdict`` to fold the verdict into the origin's
:class:`FailureState`; the frontier's rest includes ``FailureState.wait_until``
(not capped: a Retry-After above POLITE_BACKOFF_MAX is honoured in full, never
shortened).

The rules (the project's politeness rules, and RFC 9110 for Retry-After):

* 429 and 503 wait for Retry-After (delta-seconds or HTTP-date, RFC 9110
  section 10.2.3); a value in the past, negative, zero or garbage counts as
  absent. Without it, a random backoff that grows with each consecutive
  retry-later verdict, capped at POLITE_BACKOFF_MAX. A Retry-After above
  POLITE_RETRY_AFTER_PARK parks the origin for the run. Three 429s in a run
  halve the origin's steady rate (``rate_factor`` 2).
* 402, 403 and a challenge page (any status, see :mod:`.challenges`) stop the
  origin for the run.
* 5xx (503 included, after its Retry-After), connection errors, timeouts, DNS
  and TLS failures back off and count toward the circuit breaker: POLITE_BREAKER_FAILURES in a row
  stop the origin. A success (2xx, 3xx, 304) or a plain 4xx resets the streak.
* 408 is retried later with backoff; every other 4xx is never retried.
* A failure that is a property of the answer itself (a response head over
  POLITE_MAX_HEADER_BYTES, a status line that does not parse) would fail the
  same way every time: that URL is not retried (GIVE_UP), but the failure
  still backs off and counts toward the breaker, as a network failure does.
"""

from __future__ import annotations

import email.utils
import enum
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC
from typing import TYPE_CHECKING, Any, Protocol

from polite_crawler.policy.challenges import BODY_HEAD_BYTES, detect_challenge
from polite_crawler.policy.codings import Decoding, decoded_head

if TYPE_CHECKING:
    import random


class Action(enum.Enum):
    OK = "ok"  # 2xx (and 3xx handled by redirects): store, usual rest
    NOT_MODIFIED = "not_modified"  # 304: reuse the stored copy, a success
    RETRY_LATER = "retry_later"  # 429, 503, 408, 5xx, network errors: re-queue behind a wait
    STOP_ORIGIN = "stop_origin"  # 402, 403, challenge page: nothing more from the origin this run
    GIVE_UP = "give_up"  # other 4xx: never retried, the origin carries on


@dataclass(frozen=True)
class Verdict:
    action: Action
    # Short and stable, used in stats keys and the access log: "429", "challenge:cloudflare".
    reason: str
    # Seconds the server asked for (Retry-After), validated; None: backoff.
    wait: float | None = None
    failure: bool = False  # counts toward the circuit breaker's consecutive-failure streak
    rate_limited: bool = False  # a 429: three in a run halve the origin's steady rate
    park: bool = False  # Retry-After beyond POLITE_RETRY_AFTER_PARK: the origin waits out the run

    @property
    def label(self) -> str:
        """``<action>:<reason>``, the access log's ``verdict`` field ("retry_later:429")."""
        return f"{self.action.value}:{self.reason}"

    @property
    def success(self) -> bool:
        return self.action in (Action.OK, Action.NOT_MODIFIED)


# Reasons an origin is stopped for, besides a STOP_ORIGIN verdict's own reason.
STOP_BREAKER = "breaker"
STOP_PARKED = "parked"


@dataclass
class FailureState:
    """The part of an origin's state that verdicts change (persisted by the frontier)."""

    consecutive_failures: int = 0
    wait_until: float = 0.0  # wall clock; the origin is not eligible before it
    rate_limit_hits: int = 0  # 429s this run
    rate_factor: float = 1.0  # multiplies the steady rest (2.0 after three 429s)
    stopped: str | None = None  # reason the origin is stopped for the run
    # Consecutive retry-later verdicts of any kind (429/503/408 too): the backoff's exponent.
    backoff_streak: int = 0
    # The wait the last retry-later verdict set (seconds, after scaling), for logs.
    last_wait: float = 0.0


class _Settings(Protocol):
    def get(self, name: str) -> Any: ...
    def getfloat(self, name: str) -> float: ...
    def getint(self, name: str) -> int: ...


@dataclass(frozen=True)
class VerdictParams:
    """The verdicts' knobs: the POLITE_* settings below (declared once, with their
    defaults, in :mod:`polite_crawler.defaults`), read by :meth:`from_settings`, and
    the fixed rules."""

    backoff_max: float  # POLITE_BACKOFF_MAX
    breaker_failures: int  # POLITE_BREAKER_FAILURES
    park_after: float  # POLITE_RETRY_AFTER_PARK
    backoff_base: float  # POLITE_BACKOFF_BASE: first backoff is uniform in [base, 2 x base)
    retry_times: int  # POLITE_RETRY_TIMES: retries per request
    rate_limit_hits: int = 3  # 429s in a run that halve the steady rate
    rate_limit_factor: float = 2.0
    # Multiplies every wait (Retry-After and backoff). Below 1 only for tests on
    # loopback / POLITE_TEST_NETWORKS origins: :meth:`from_settings` forces 1.0 elsewhere.
    wait_scale: float = 1.0

    @classmethod
    def from_settings(cls, settings: _Settings, *, test_origin: bool = False) -> VerdictParams:
        """Read the POLITE_* knobs bare from ``settings`` holding every declared
        default (:func:`polite_crawler.defaults.polite_settings` gives them; any object
        with Scrapy's ``get``/``getfloat``/``getint``).

        ``test_origin``: the origin is loopback or in POLITE_TEST_NETWORKS, where the
        tests' own POLITE_TEST_WAIT_SCALE, when they set it, may shrink waits (it is no
        crawl setting: absent, waits are as the rules say); for any other origin a
        scale below 1 is ignored (the server's wait is never shortened).
        """
        given = settings.get("POLITE_TEST_WAIT_SCALE")
        scale = 1.0 if given is None else float(given)
        if scale <= 0 or (scale < 1.0 and not test_origin):
            scale = 1.0
        return cls(
            backoff_max=settings.getfloat("POLITE_BACKOFF_MAX"),
            breaker_failures=max(1, settings.getint("POLITE_BREAKER_FAILURES")),
            park_after=settings.getfloat("POLITE_RETRY_AFTER_PARK"),
            backoff_base=settings.getfloat("POLITE_BACKOFF_BASE"),
            retry_times=max(0, settings.getint("POLITE_RETRY_TIMES")),
            wait_scale=scale,
        )

_DELTA_SECONDS = re.compile(r"^\+?\d+(?:\.\d*)?$")


def parse_retry_after(value: str | bytes | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After value, or None when it says nothing usable.

    Both forms of RFC 9110 section 10.2.3: delta-seconds and an HTTP-date (any
    of the three date formats). A date in the past, a negative or zero delay and
    garbage count as absent.

    >>> parse_retry_after("120", now=0.0)
    120.0
    >>> parse_retry_after("Thu, 01 Jan 1970 00:02:00 GMT", now=60.0)
    60.0
    >>> parse_retry_after("-5", now=0.0) is None, parse_retry_after("soon", now=0.0) is None
    (True, True)
    """
    if value is None:
        return None
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    text = value.strip()
    if not text:
        return None
    if _DELTA_SECONDS.match(text):
        try:
            seconds = float(text)
        except (ValueError, OverflowError):
            return None
        return seconds if math.isfinite(seconds) and seconds > 0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime form and "-0000": the RFC says GMT
        when = when.replace(tzinfo=UTC)
    try:
        delta = when.timestamp() - now
    except (OverflowError, OSError, ValueError):
        return None
    return delta if math.isfinite(delta) and delta > 0 else None


def backoff_delay(streak: int, rng: random.Random, base: float = 4.0, cap: float = 300.0) -> float:
    """Random backoff after ``streak`` consecutive retry-later verdicts.

    Uniform in ``[base * 2**(streak-1), 2 * base * 2**(streak-1))``, capped at
    ``cap``: each step's shortest wait is the previous step's longest, so the
    waits grow with the streak while the jitter keeps crawlers apart.

    >>> import random; rng = random.Random(1)
    >>> [4 <= backoff_delay(1, rng) < 8, 8 <= backoff_delay(2, rng) < 16, backoff_delay(30, rng)]
    [True, True, 300.0]
    """
    if streak <= 0:
        return 0.0
    low = base * 2.0 ** min(streak - 1, 60)
    return min(cap, low * (1.0 + rng.random()))


def text_headers(headers: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """Lower-case ``str`` names and values from Scrapy-style headers (bytes, lists of values).

    >>> text_headers({b"Retry-After": [b"7"], "CF-Mitigated": "challenge"})
    {'retry-after': '7', 'cf-mitigated': 'challenge'}
    """
    items = headers.items() if isinstance(headers, Mapping) else headers
    out: dict[str, str] = {}
    for name, raw in items:
        key = (name.decode("latin-1") if isinstance(name, bytes) else str(name)).lower()
        values = raw if isinstance(raw, (list, tuple)) else [raw]
        text = ", ".join(v.decode("latin-1") if isinstance(v, bytes) else str(v) for v in values)
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


class RawHeaders(Protocol):
    """Headers as Scrapy keeps them (``scrapy.http.Headers``): names in any case, each
    with a list of bytes values."""

    def getlist(self, key: bytes) -> list[bytes]: ...
    def __contains__(self, key: bytes, /) -> bool: ...
    def __iter__(self) -> Iterator[bytes]: ...
    def __len__(self) -> int: ...


class HeaderView(Mapping[str, str]):
    """:func:`text_headers` of Scrapy's headers, each read only when asked for.

    The verdict asks a handful of names of every response (Content-Encoding, the
    challenge rules' headers, Retry-After on a refusal), most of them absent: a look-up
    each costs less than converting every header the server sent (a verdict on nginx's
    seven headers and a small page: 12.5 us, against 17.6 us converting them all).

    >>> class H(dict):
    ...     def __contains__(self, key): return dict.__contains__(self, key.title())
    ...     def getlist(self, key): return self.get(key.title(), [])
    >>> v = HeaderView(H({b"Retry-After": [b"7"], b"Vary": [b"a", b"b"]}))
    >>> v.get("retry-after"), v["vary"], v.get("cf-mitigated"), sorted(v)
    ('7', 'a, b', None, ['retry-after', 'vary'])
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: RawHeaders) -> None:
        self._raw = raw

    def get(self, name: str, default: Any = None) -> Any:
        key = name.encode("latin-1")
        if key not in self._raw:  # most asked are absent: no exception raised and caught
            return default
        values = self._raw.getlist(key)
        return ", ".join([v.decode("latin-1") for v in values]) if values else default

    def __getitem__(self, name: str) -> str:
        text: str | None = self.get(name)
        if text is None:
            raise KeyError(name)
        return text

    def __iter__(self) -> Iterator[str]:
        return (name.decode("latin-1").lower() for name in self._raw)

    def __len__(self) -> int:
        return len(self._raw)


def classify_response(
    status: int,
    headers: Mapping[str, str],
    body_head: bytes | Decoding,
    now: float,
    *,
    params: VerdictParams | None = None,
) -> Verdict:
    """Verdict for a response; ``headers`` lower-case names; ``params`` the crawl's
    (None: whether a Retry-After parks the origin is left to :func:`apply_verdict`,
    which judges it again with the crawl's params); ``body_head`` the body as
    received, whole or cut no shorter than :data:`.challenges.BODY_HEAD_BYTES`: its
    first that many bytes, decoded, are searched for challenge markers, and the cut
    is made here, once, for every caller (the gate, the render handler, ``explain``).
    A body still in its content coding (the gate sees it before decompression) is
    decoded here, up to that many bytes; the gate passes its :class:`.codings.Decoding`
    (of the body and its Content-Encoding), which the size cap then decodes on from
    where this stopped.

    >>> v = classify_response(429, {"retry-after": "7"}, b"", now=0.0)
    >>> v.label, v.wait, v.rate_limited, v.failure
    ('retry_later:429', 7.0, True, False)
    >>> classify_response(200, {"cf-mitigated": "challenge"}, b"", now=0.0).label
    'stop_origin:challenge:cloudflare'
    """
    if isinstance(body_head, Decoding):
        head = body_head.head(BODY_HEAD_BYTES)
    else:
        head = decoded_head(body_head, headers.get("content-encoding"), BODY_HEAD_BYTES)
    challenge = detect_challenge(status, headers, head)
    if challenge is not None:
        return Verdict(Action.STOP_ORIGIN, f"challenge:{challenge}")
    reason = str(status)
    if status in (402, 403):
        return Verdict(Action.STOP_ORIGIN, reason)
    if 200 <= status < 300:
        return Verdict(Action.OK, reason)
    if status == 304:
        return Verdict(Action.NOT_MODIFIED, reason)
    if 300 <= status < 400:
        return Verdict(Action.OK, reason)
    wait = parse_retry_after(headers.get("retry-after"), now)
    park = params is not None and wait is not None and wait > params.park_after
    if status == 429:
        return Verdict(Action.RETRY_LATER, reason, wait=wait, rate_limited=True, park=park)
    if status == 503:
        # The politeness rules: "five failures in sequence stop a host": a host that only
        # answers 503 is down, and it stops like any failing host.
        return Verdict(Action.RETRY_LATER, reason, wait=wait, failure=True, park=park)
    if status == 408:
        return Verdict(Action.RETRY_LATER, reason, wait=wait, park=park)
    if 500 <= status < 600:
        return Verdict(Action.RETRY_LATER, reason, wait=wait, failure=True, park=park)
    return Verdict(Action.GIVE_UP, reason)


def for_robots_txt(verdict: Verdict, status: int) -> Verdict:
    """The verdict on an answer to a robots.txt request.

    RFC 9309 section 2.3.1.3: a 4xx robots.txt is "unavailable", i.e. no
    restrictions, so a 401, 402, 403 or 404 there neither stops the origin nor
    counts against it. A challenge page is a refusal whatever it answers.

    >>> for_robots_txt(classify_response(403, {}, b"", 0.0), 403).label
    'ok:403'
    >>> for_robots_txt(classify_response(403, {"cf-mitigated": "challenge"}, b"", 0.0), 403).label
    'stop_origin:challenge:cloudflare'
    """
    if 400 <= status < 500 and verdict.action in (Action.STOP_ORIGIN, Action.GIVE_UP) \
            and not verdict.reason.startswith("challenge:"):
        return Verdict(Action.OK, str(status))
    return verdict


# Exception class names (anywhere in the MRO) -> kind. Names, not imports:
# the policy layer imports neither Twisted nor Scrapy.
_ERROR_KINDS: dict[str, str] = {
    # our own decisions: not the server's fault
    "IgnoreRequest": "ignored",
    "DownloadCancelledError": "cancelled",
    "CancelledError": "cancelled",
    "StopDownload": "cancelled",
    # name resolution
    "DNSLookupError": "dns",
    "CannotResolveHostError": "dns",
    "gaierror": "dns",
    # refused / reset / lost
    "DownloadConnectionRefusedError": "refused",
    "ConnectionRefusedError": "refused",
    "ConnectionResetError": "reset",
    "ConnectionAbortedError": "reset",
    "ConnectionAborted": "reset",
    "ConnectionLost": "lost",
    "ConnectionDone": "lost",
    "ResponseDataLossError": "lost",
    "PotentialDataLoss": "lost",
    "BrokenPipeError": "reset",
    # time
    "DownloadTimeoutError": "timeout",
    "TCPTimedOutError": "timeout",
    "UserTimeout": "timeout",
    "TimeoutError": "timeout",
    # TLS
    "SSLError": "tls",
    "CertificateError": "tls",
    "SSLCertVerificationError": "tls",
    "VerificationError": "tls",
    # the answer itself is unusable, and would be again (handlers.HeadersTooLargeError,
    # twisted.web._newclient.ParseError / BadResponseVersion for a status line)
    "HeadersTooLargeError": "head_too_large",
    "BadResponseVersion": "malformed",
    "ParseError": "malformed",
    # anything else on the way to the server
    "NoRouteError": "connect",
    "ConnectError": "connect",
    "ConnectingCancelledError": "connect",
    "TunnelError": "connect",
    "DownloadFailedError": "connect",
    "OSError": "connect",
}
_NOT_FAILURES = frozenset({"ignored", "cancelled"})
# Failures of the answer, not of the way to it: a retry would get the same answer.
_ANSWER_FAULTS = frozenset({"head_too_large", "malformed"})


def _unwrap(exc: BaseException) -> BaseException:
    """The first reason inside Twisted's ResponseNeverReceived / ResponseFailed."""
    for _ in range(5):
        reasons = getattr(exc, "reasons", None)
        if not reasons or not isinstance(reasons, list):
            return exc
        inner = getattr(reasons[0], "value", reasons[0])
        if not isinstance(inner, BaseException):
            return exc
        exc = inner
    return exc


def _answer_fault(exc: BaseException) -> str | None:
    """An unusable answer anywhere inside ``exc``: Scrapy reraises Twisted's
    ResponseFailed as DownloadFailedError (``from`` it), whose reasons hold the
    parser's ParseError."""
    seen: list[BaseException] = [exc]
    for current in seen:
        if len(seen) > 20:
            break
        for cls in type(current).__mro__:
            kind = _ERROR_KINDS.get(cls.__name__)
            if kind in _ANSWER_FAULTS:
                return kind
        if current.__cause__ is not None:
            seen.append(current.__cause__)
        reasons = getattr(current, "reasons", None)
        if isinstance(reasons, list):
            seen.extend(r for r in (getattr(x, "value", x) for x in reasons)
                        if isinstance(r, BaseException))
    return None


def error_kind(exc: BaseException) -> str:
    """"dns", "refused", "reset", "lost", "timeout", "tls", "connect", "head_too_large",
    "malformed", "ignored", "cancelled" or "other" (class names in the MRO; the first
    known wins)."""
    fault = _answer_fault(exc)
    if fault is not None:
        return fault
    exc = _unwrap(exc)
    for cls in type(exc).__mro__:
        if cls.__module__.split(".")[0] == "OpenSSL":
            return "tls"
        kind = _ERROR_KINDS.get(cls.__name__)
        if kind is not None:
            return kind
    return "other"


def classify_exception(exc: BaseException) -> Verdict:
    """Verdict for a failed exchange (connection refused/reset, timeout, DNS, TLS ...).

    Every kind of network failure is retried later and counts toward the
    breaker; our own cancellations (an IgnoreRequest, a cancelled download) do
    neither. An answer that is itself unusable (its head over the cap, a status
    line that does not parse) is not retried, and counts toward the breaker.

    >>> classify_exception(ConnectionRefusedError()).label
    'retry_later:error:refused'
    >>> class HeadersTooLargeError(Exception): ...
    >>> v = classify_exception(HeadersTooLargeError()); v.label, v.failure
    ('give_up:error:head_too_large', True)
    """
    kind = error_kind(exc)
    if kind in _NOT_FAILURES:
        return Verdict(Action.GIVE_UP, f"error:{kind}")
    if kind in _ANSWER_FAULTS:
        return Verdict(Action.GIVE_UP, f"error:{kind}", failure=True)
    return Verdict(Action.RETRY_LATER, f"error:{kind}", failure=True)


def apply_verdict(
    state: FailureState, verdict: Verdict, now: float, params: VerdictParams, rng: random.Random
) -> FailureState:
    """Fold one verdict into the origin's failure state (returns the new state).

    ``wait_until`` only ever moves later (the server's wait is never shortened).
    """
    if verdict.action is Action.STOP_ORIGIN:
        return replace(state, stopped=state.stopped or verdict.reason)
    if verdict.action is not Action.RETRY_LATER and not verdict.failure:
        # The origin answered: the failure streak and the backoff start over.
        return replace(state, consecutive_failures=0, backoff_streak=0)
    # A retry-later verdict, or a failure given up on at once (an unusable
    # answer): both back off and count toward the breaker.
    streak = state.backoff_streak + 1
    failures = state.consecutive_failures + (1 if verdict.failure else 0)
    hits = state.rate_limit_hits + (1 if verdict.rate_limited else 0)
    factor = state.rate_factor
    if verdict.rate_limited and hits >= params.rate_limit_hits:
        factor = max(factor, params.rate_limit_factor)
    if verdict.wait is not None:
        wait = verdict.wait
    else:
        wait = backoff_delay(streak, rng, params.backoff_base, params.backoff_max)
    park = verdict.park or (verdict.wait is not None and verdict.wait > params.park_after)
    wait *= params.wait_scale
    stopped = state.stopped
    if stopped is None and park:
        stopped = STOP_PARKED
    if stopped is None and verdict.failure and failures >= params.breaker_failures:
        stopped = STOP_BREAKER
    return replace(
        state,
        consecutive_failures=failures,
        backoff_streak=streak,
        rate_limit_hits=hits,
        rate_factor=factor,
        wait_until=max(state.wait_until, now + wait),
        last_wait=wait,
        stopped=stopped,
    )


def new_run(state: FailureState) -> FailureState:
    """The state a new run starts from: only the server's wait carries over.

    Stops, the breaker streak and the 429 count are per run ("for the run");
    ``wait_until`` is a promise to the server and survives restarts.
    """
    return FailureState(wait_until=state.wait_until)


def may_retry(retries_done: int, params: VerdictParams) -> bool:
    """Whether a request that has been retried ``retries_done`` times may be retried again."""
    return retries_done < params.retry_times


_STOP_TEXT = {
    "402": "402 Payment Required: the site wants payment",
    "403": "403 Forbidden: the site refuses the crawler",
    STOP_BREAKER: "circuit breaker: too many failures in a row",
    STOP_PARKED: "Retry-After longer than POLITE_RETRY_AFTER_PARK",
}


def describe_stop(reason: str) -> str:
    """A site owner's reading of why an origin was stopped (for the WARNING log).

    >>> describe_stop("challenge:cloudflare")
    'challenge page (cloudflare): the site asks for a human'
    """
    if reason.startswith("challenge:"):
        return f"challenge page ({reason.split(':', 1)[1]}): the site asks for a human"
    return _STOP_TEXT.get(reason, reason)
