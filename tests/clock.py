"""An injected clock for tests: a callable that answers the time it was set to.

``clock.t`` is the time (epoch seconds); a test moves it by hand, so nothing sleeps
and every timing rule is exact. The benchmarks keep their own (bench/ imports no tests).
"""

from __future__ import annotations

T0 = 1_700_000_000.0  # the default start: a plausible epoch time


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
