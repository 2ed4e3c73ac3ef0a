"""What each response means for its origin (issue 5 owns the bodies).

INTERFACE, agreed between the frontier (issue 3) and the verdicts (issue 5):
the gate middleware calls ``classify_response`` / ``classify_exception`` for
every exchange and ``apply_verdict`` to fold the verdict into the origin's
:class:`FailureState`; the frontier's rest includes ``FailureState.wait_until``.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping
from dataclasses import dataclass


class Action(enum.Enum):
    OK = "ok"  # 2xx (and 3xx handled by redirects): store, usual rest
    NOT_MODIFIED = "not_modified"  # 304: reuse the stored copy, a success
    RETRY_LATER = "retry_later"  # 429, 503, 408, 5xx, network errors: re-queue behind a wait
    STOP_ORIGIN = "stop_origin"  # 402, 403, challenge page: nothing more from the origin this run
    GIVE_UP = "give_up"  # other 4xx: never retried, the origin carries on


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str  # short and stable, used in stats keys and the access log: "429", "challenge:cloudflare"
    wait: float | None = None  # seconds the server asked for (Retry-After), validated; None: backoff
    failure: bool = False  # counts toward the circuit breaker's consecutive-failure streak
    rate_limited: bool = False  # a 429: three in a run halve the origin's steady rate
    park: bool = False  # Retry-After beyond POLITE_RETRY_AFTER_PARK: the origin waits out the run


@dataclass
class FailureState:
    """The part of an origin's state that verdicts change (persisted by the frontier)."""

    consecutive_failures: int = 0
    wait_until: float = 0.0  # wall clock; the origin is not eligible before it
    rate_limit_hits: int = 0  # 429s this run
    rate_factor: float = 1.0  # multiplies the steady rest (2.0 after three 429s)
    stopped: str | None = None  # reason the origin is stopped for the run


@dataclass(frozen=True)
class VerdictParams:
    backoff_max: float = 300.0
    breaker_failures: int = 5
    park_after: float = 24 * 3600.0


def classify_response(status: int, headers: Mapping[str, str], body_head: bytes, now: float) -> Verdict:
    """Verdict for a response; ``headers`` lower-case names; ``body_head`` the first KiB."""
    raise NotImplementedError


def classify_exception(exc: BaseException) -> Verdict:
    """Verdict for a failed exchange (connection refused/reset, timeout, DNS, TLS ...)."""
    raise NotImplementedError


def apply_verdict(
    state: FailureState, verdict: Verdict, now: float, params: VerdictParams, rng: random.Random
) -> FailureState:
    """Fold one verdict into the origin's failure state (returns the new state)."""
    raise NotImplementedError
