"""Spans of time judged from a server's own log: how many were open at once."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable


def most_open(spans: Iterable[tuple[float, float]]) -> int:
    """The most spans (start, end) open at once; one ending as another starts is not two."""
    events = sorted(itertools.chain.from_iterable(((s, 1), (e, -1)) for s, e in spans),
                    key=lambda x: (x[0], x[1]))
    most = now = 0
    for _t, step in events:
        now += step
        most = max(most, now)
    return most
