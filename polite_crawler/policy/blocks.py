"""A site's own refusal, remembered: when it may be asked again.

A site that answered 402, 403 or a challenge page refused the crawler: a polite
crawler stops there (it does not pay, log in or solve a challenge to get past a site
that said no). The gate stops it for the run; this rule says for how long
every later run and job leaves it alone: no sooner than :data:`FIRST` (24 h) after
the refusal, doubling for each refusal in a row (asked again after the wait, refused
again) up to :data:`LONGEST` (a week). A Retry-After the site sent with its refusal
wins when it is longer. An operator may lift a block at any time (``scrapy unblock``);
a site that answers normally again starts afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

FIRST = 24 * 3600.0
LONGEST = 7 * 24 * 3600.0

#: Stop reasons (``policy.verdicts``) that are the site's own refusal of the crawler.
REFUSALS = ("402", "403")
CHALLENGE_PREFIX = "challenge:"


def is_refusal(stop_reason: str) -> bool:
    """Whether an origin's stop reason is the site's own refusal.

    >>> is_refusal("403"), is_refusal("challenge:cloudflare"), is_refusal("breaker")
    (True, True, False)
    """
    return stop_reason in REFUSALS or stop_reason.startswith(CHALLENGE_PREFIX)


@dataclass(frozen=True)
class Block:
    """One origin's remembered refusal."""

    origin: str
    reason: str  # "402", "403", "challenge:<name>"
    blocked_at: float  # epoch seconds of the last refusal
    until: float  # not asked before this
    count: int = 1  # refusals in a row
    first_at: float = 0.0  # the first refusal of the row
    url: str = ""  # the URL the last refusal answered

    def active(self, now: float) -> bool:
        return now < self.until


def block_wait(count: int, retry_after: float | None = None) -> float:
    """Seconds a site that refused ``count`` times in a row is left alone.

    >>> block_wait(1) / 3600, block_wait(2) / 3600, block_wait(4) / 3600, block_wait(9) / 3600
    (24.0, 48.0, 168.0, 168.0)
    >>> block_wait(1, retry_after=10 * 86400) / 86400
    10.0
    """
    wait = min(FIRST * 2.0 ** max(count - 1, 0), LONGEST)
    if retry_after is not None and retry_after > wait:
        wait = retry_after
    return wait


def record_refusal(previous: Block | None, origin: str, reason: str, now: float, *,
                   url: str = "", retry_after: float | None = None) -> Block:
    """The block after a refusal at ``now``.

    A refusal while the last block is still on (the same run's stop seen again, a job
    that had already been sent the request) does not count twice: the block stays, a
    longer Retry-After extends it. A refusal after the block ran out doubles the wait.

    >>> b = record_refusal(None, "http://e.org", "403", 0.0)
    >>> b.count, b.until / 3600
    (1, 24.0)
    >>> record_refusal(b, "http://e.org", "403", 3600.0).count  # still on
    1
    >>> b2 = record_refusal(b, "http://e.org", "challenge:x", 90000.0)
    >>> b2.count, (b2.until - 90000.0) / 3600, b2.first_at
    (2, 48.0, 0.0)
    """
    if previous is not None and previous.active(now):
        if retry_after is not None and now + retry_after > previous.until:
            return replace(previous, until=now + retry_after)
        return previous
    count = previous.count + 1 if previous is not None else 1
    first = previous.first_at if previous is not None else now
    return Block(origin=origin, reason=reason, blocked_at=now,
                 until=now + block_wait(count, retry_after), count=count, first_at=first,
                 url=url)


def describe(block: Block, now: float) -> str:
    """One line: why and until when.

    >>> describe(Block("http://e.org", "403", 0.0, 86400.0, 1, 0.0), 3600.0)
    'http://e.org refused the crawler (HTTP 403), 1 time in a row; not asked again for 23.0 h'
    """
    why = (f"a challenge page ({block.reason[len(CHALLENGE_PREFIX):]})"
           if block.reason.startswith(CHALLENGE_PREFIX) else f"HTTP {block.reason}")
    times = f"{block.count} time{'s' if block.count != 1 else ''} in a row"
    left = block.until - now
    when = f"not asked again for {left / 3600:.1f} h" if left > 0 else "may be asked again"
    return f"{block.origin} refused the crawler ({why}), {times}; {when}"


__all__ = ["FIRST", "LONGEST", "Block", "block_wait", "describe", "is_refusal",
           "record_refusal"]
