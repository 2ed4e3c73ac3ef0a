"""When to fetch a known page again, and whether to fetch it at all.

Three rules, each a statement of the site's own honoured before the crawler's guess:

* Cache-Control ``max-age`` and ``Expires`` are a *floor* on the revisit
  interval: a page the site declared fresh is not requested while it is fresh
  (RFC 9111 section 4.2: freshness lifetime and current age). ``no-cache`` and
  ``must-revalidate`` give no floor (revalidate each time, RFC 9111 5.2.2.2 /
  5.2.2.4). ``no-store`` (5.2.2.5) means no copy is kept: no body for a 304,
  so no validators are sent and no floor applies.
* Sitemap ``lastmod``: a URL whose lastmod is not newer than the stored copy's
  fetch time is not requested again.
* Each URL's revisit interval follows its observed change rate: shorter after
  a change, longer after a visit that found none, within [min, max].

Pure: the caller passes ``now`` (epoch seconds).
"""

from __future__ import annotations

import email.utils
import enum
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

# After a visit that found no change the interval grows by this factor; after a
# change it shrinks by the other. Six unchanged visits from one day: 11 days.
GROW = 1.5
SHRINK = 0.5

_DIRECTIVE = re.compile(
    r'\s*([!#$%&\'*+\-.^_`|~0-9A-Za-z]+)\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^,]*))?\s*')


def parse_cache_control(value: str | None) -> dict[str, str | None]:
    """Directives of a Cache-Control header, names lower-cased (RFC 9111 section 5.2).

    >>> parse_cache_control('max-age=60, no-cache="Set-Cookie", Public')
    {'max-age': '60', 'no-cache': 'Set-Cookie', 'public': None}
    """
    out: dict[str, str | None] = {}
    if not value:
        return out
    for part in _split_commas(value):
        m = _DIRECTIVE.fullmatch(part)
        if not m:
            continue
        name, arg = m.group(1).lower(), m.group(2)
        if arg is not None:
            arg = arg.strip()
            if arg.startswith('"') and arg.endswith('"') and len(arg) >= 2:
                arg = re.sub(r"\\(.)", r"\1", arg[1:-1])
        out.setdefault(name, arg)  # the first occurrence wins
    return out


def _split_commas(value: str) -> list[str]:
    parts: list[str] = []
    buf: list[str] = []
    quoted = False
    for ch in value:
        if ch == '"':
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    parts.append("".join(buf))
    return [p for p in parts if p.strip()]


def parse_http_date(value: str | None) -> float | None:
    """Epoch seconds of an HTTP-date, None when absent or invalid."""
    if not value:
        return None
    try:
        dt = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if dt is None:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def parse_lastmod(value: str | float | None) -> float | None:
    """Epoch seconds of a sitemap lastmod (W3C datetime: a date, or a date and time).

    >>> parse_lastmod("2024-03-05")
    1709596800.0
    >>> parse_lastmod("2024-03-05T10:00:00+01:00")
    1709629200.0
    """
    if value is None or value == "":
        return None
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


_DELTA_SECONDS = re.compile(r"[0-9]+")
# RFC 9111 section 1.2.2: a delta-seconds value too large to represent counts as 2**31.
_DELTA_MAX = 2**31


def _seconds(arg: str | None) -> int | None:
    """delta-seconds (``1*DIGIT``, ASCII digits only); anything else is invalid (None).

    >>> _seconds("60"), _seconds("\u00b2"), _seconds("-1"), _seconds("9" * 5000)
    (60, None, None, 2147483648)
    """
    if arg is None or not _DELTA_SECONDS.fullmatch(arg):
        return None
    if len(arg.lstrip("0")) > 10:
        return _DELTA_MAX
    return min(int(arg), _DELTA_MAX)


@dataclass(frozen=True)
class Freshness:
    """What a response's caching headers allow, computed at fetch time."""

    store: bool  # False: no-store, keep no copy (no 304 reuse)
    fresh_until: float | None  # epoch seconds; None: no floor


def freshness(headers: Mapping[str, str], fetched_at: float) -> Freshness:
    """The floor a response's Cache-Control / Expires set (RFC 9111 section 4.2).

    ``headers`` is keyed by lower-case names. The freshness lifetime is
    ``max-age`` (first), else ``Expires`` minus ``Date``; the current age is
    the larger of the ``Age`` header and ``fetched_at - Date`` (4.2.3, with
    the response delay taken as nil). An invalid ``Expires`` (such as ``0``)
    means already expired (5.3).

    >>> freshness({"cache-control": "max-age=600"}, 1000.0)
    Freshness(store=True, fresh_until=1600.0)
    >>> freshness({"cache-control": "no-store, max-age=600"}, 1000.0)
    Freshness(store=False, fresh_until=None)
    """
    cc = parse_cache_control(headers.get("cache-control"))
    if "no-store" in cc:
        return Freshness(False, None)
    if "no-cache" in cc and cc["no-cache"] is None:
        return Freshness(True, None)
    date = parse_http_date(headers.get("date"))
    lifetime: float | None = None
    max_age = _seconds(cc.get("max-age")) if "max-age" in cc else None
    if max_age is not None:
        lifetime = float(max_age)
    elif "expires" in headers:
        expires = parse_http_date(headers.get("expires"))
        if expires is None:
            return Freshness(True, None)
        lifetime = expires - (date if date is not None else fetched_at)
    if lifetime is None or lifetime <= 0:
        return Freshness(True, None)
    age = _seconds(headers.get("age")) or 0
    if date is not None:
        age = max(age, int(max(0.0, fetched_at - date)))
    remaining = lifetime - age
    if remaining <= 0:
        return Freshness(True, None)
    return Freshness(True, fetched_at + remaining)


@dataclass(frozen=True)
class Bounds:
    """The revisit interval's settings (POLITE_REVISIT_DEFAULT / _MIN / _MAX), seconds."""

    default: float
    minimum: float
    maximum: float

    def next(self, previous: float | None, changed: bool | None) -> float:
        return next_interval(previous, changed, default=self.default, minimum=self.minimum,
                             maximum=self.maximum)


def next_interval(previous: float | None, changed: bool | None, *, default: float,
                  minimum: float, maximum: float) -> float:
    """The revisit interval after a visit.

    ``changed`` is None for a first visit (the default interval), True when the
    content changed since the last visit (shorter), False when it did not
    (longer); always within [minimum, maximum].

    >>> next_interval(None, None, default=86400, minimum=3600, maximum=864000)
    86400.0
    >>> next_interval(86400, False, default=86400, minimum=3600, maximum=864000)
    129600.0
    >>> next_interval(7200, True, default=86400, minimum=3600, maximum=864000)
    3600.0
    """
    if changed is None or previous is None or previous <= 0:
        interval = default
    elif changed:
        interval = previous * SHRINK
    else:
        interval = previous * GROW
    return float(min(maximum, max(minimum, interval)))


class Decision(enum.Enum):
    FETCH = "fetch"  # nothing usable is stored: an unconditional request
    CONDITIONAL = "conditional"  # revalidate the stored copy
    FRESH = "fresh"  # within the Cache-Control floor: do not request
    NOT_DUE = "not_due"  # the revisit interval has not passed: do not request
    LASTMOD = "lastmod"  # the sitemap says unchanged since our copy: do not request

    @property
    def requests(self) -> bool:
        return self in (Decision.FETCH, Decision.CONDITIONAL)


@dataclass(frozen=True)
class Known:
    """What the store knows about a URL, as the decision needs it."""

    fetched_at: float
    due_at: float
    fresh_until: float | None
    has_copy: bool  # a stored body (so a 304 can be answered with it)
    has_validators: bool  # an ETag or a Last-Modified
    # The site said no-store: no copy by its wish, yet a 304 still says "unchanged"
    # (the visit is recorded; nothing is handed on), so the validators are sent.
    no_store: bool = False


def decide(known: Known | None, now: float, *, lastmod: float | None = None,
           force: bool = False) -> Decision:
    """Whether to request a URL now, and how.

    The Cache-Control floor comes first, then the sitemap's lastmod (an honest
    "changed since" overrides the interval), then the revisit interval.
    ``force`` (``-a recrawl=all``) overrides only the interval: the site's own
    statements (still fresh; not modified since, by its sitemap) win: Cache-Control
    max-age and Expires are a floor on the interval (RFC 9111 section 4.2).

    >>> k = Known(fetched_at=1000, due_at=5000, fresh_until=2000, has_copy=True,
    ...           has_validators=True)
    >>> [decide(k, t).value for t in (1500, 3000, 6000)]
    ['fresh', 'not_due', 'conditional']
    >>> decide(k, 3000, lastmod=4000).value, decide(k, 6000, lastmod=900).value
    ('conditional', 'lastmod')
    >>> [decide(k, t, force=True).value for t in (1500, 3000)]
    ['fresh', 'conditional']
    """
    if known is None:
        return Decision.FETCH
    revalidate = known.has_validators and (known.has_copy or known.no_store)
    conditional = Decision.CONDITIONAL if revalidate else Decision.FETCH
    if known.has_copy and known.fresh_until is not None and now < known.fresh_until:
        return Decision.FRESH
    if lastmod is not None:
        return Decision.LASTMOD if lastmod <= known.fetched_at else conditional
    if force or now >= known.due_at:
        return conditional
    return Decision.NOT_DUE
