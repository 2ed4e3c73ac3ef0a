"""A worker starting while its Redis does not answer yet (a restart under way).

What a worker reads from Redis before its crawl runs (its registration, the opt-out
list) is asked again every half second for up to :data:`STARTUP_WAIT` seconds; then the
error is raised and the crawl fails to open, saying why.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

logger = logging.getLogger(__name__)

T = TypeVar("T")

STARTUP_WAIT = 30.0  # seconds


def when_redis_answers(call: Callable[[], T], url: str, wait: float = STARTUP_WAIT,
                       sleep: Callable[[float], None] = time.sleep) -> T:
    """``call()``, asked again while Redis refuses or times out, for up to ``wait`` s."""
    import redis

    deadline = time.monotonic() + wait
    while True:
        try:
            return call()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() >= deadline:
                raise
            logger.warning("Redis %(url)s does not answer (%(e)s); asking again",
                           {"url": url, "e": exc})
            sleep(0.5)
