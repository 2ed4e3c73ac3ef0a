"""Scrapy's own politeness settings, as a spider or project sets them, against the rules.

The add-on pins the Scrapy settings that would add timing or concurrency of their own
(the frontier owns all of it). A value an author sets there is a request, judged here:

* one that asks to be *gentler* than the rules is honoured: ``DOWNLOAD_DELAY`` above
  the rest becomes a floor on the rest (POLITE_REST_PAGE and POLITE_REST_API, at the
  priority the author set it);
* one the rules already exceed (``DOWNLOAD_DELAY = 1`` against the 3 s rest, as
  ``scrapy startproject``'s template writes it), or one that has no effect here
  (``AUTOTHROTTLE_ENABLED``, ``COOKIES_ENABLED``), is *said* once, in one line naming
  the setting, where it was set and the POLITE_* setting that governs it;
* one the rules cannot grant (``CONCURRENT_REQUESTS_PER_DOMAIN`` above 1,
  ``DOWNLOAD_DELAY = 0`` set explicitly, ``ROBOTSTXT_OBEY = False``) is *refused*:
  the crawl does not start, with one such line.

A value equal to what the add-on pins (``ROBOTSTXT_OBEY = True``,
``CONCURRENT_REQUESTS_PER_DOMAIN = 1``) says nothing. Pure: no Scrapy import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Requested:
    """One Scrapy setting as the author set it: its value and where (``"spider X's
    custom_settings"``, ``"the project's settings"``, ``"-s"``)."""

    name: str
    value: Any
    where: str
    priority: int


@dataclass
class Judgement:
    """What the add-on does with the settings asked for."""

    floors: dict[str, tuple[float, int]] = field(default_factory=dict)  # name -> (value, prio)
    said: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _flag(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def judge(requested: list[Requested], rest_page: float, rest_api: float) -> Judgement:
    """Judge the Scrapy settings an author set (see the module docstring).

    ``rest_page`` and ``rest_api``: the rests the rules keep (POLITE_REST_PAGE and
    POLITE_REST_API as configured).

    >>> at = "spider s's custom_settings"
    >>> j = judge([Requested("DOWNLOAD_DELAY", 5, at, 30)], 3.0, 1.0)
    >>> j.floors, j.said, j.refused
    ({'POLITE_REST_PAGE': (5.0, 30), 'POLITE_REST_API': (5.0, 30)}, [], [])
    >>> judge([Requested("DOWNLOAD_DELAY", 1, at, 30)], 3.0, 1.0).said  # doctest: +ELLIPSIS
    ["DOWNLOAD_DELAY = 1 (spider s's custom_settings): the rules already rest longer ..."]
    >>> judge([Requested("CONCURRENT_REQUESTS_PER_DOMAIN", 16, at, 30)], 3, 1).refused
    ... # doctest: +ELLIPSIS
    ["CONCURRENT_REQUESTS_PER_DOMAIN = 16 (spider s's custom_settings) cannot be granted: ..."]
    """
    out = Judgement()
    for req in requested:
        shown = f"{req.name} = {req.value!r} ({req.where})"
        if req.name == "DOWNLOAD_DELAY":
            delay = _number(req.value)
            if delay is None or delay < 0:
                out.refused.append(f"{shown} is not a number of seconds; remove it (the "
                                   "rest between requests is POLITE_REST_PAGE)")
            elif delay == 0:
                out.refused.append(
                    f"{shown} cannot be granted: every host gets a rest between two "
                    f"requests (POLITE_REST_PAGE, {rest_page:g} s, and more for a slow "
                    "host); remove it, or set a longer DOWNLOAD_DELAY to be gentler")
            elif delay > rest_page or delay > rest_api:
                if delay > rest_page:
                    out.floors["POLITE_REST_PAGE"] = (delay, req.priority)
                if delay > rest_api:
                    out.floors["POLITE_REST_API"] = (delay, req.priority)
            else:
                out.said.append(
                    f"{shown}: the rules already rest longer between two requests to a "
                    f"host (POLITE_REST_PAGE, {rest_page:g} s, more for a slow host); "
                    "a longer DOWNLOAD_DELAY would be honoured as a floor")
        elif req.name == "CONCURRENT_REQUESTS_PER_DOMAIN":
            n = _number(req.value)
            if n is None or n != 1:
                out.refused.append(
                    f"{shown} cannot be granted: one request at a time per host, "
                    "always; throughput comes from many hosts at once "
                    "(CONCURRENT_REQUESTS); remove it")
        elif req.name == "ROBOTSTXT_OBEY":
            if not _flag(req.value):
                out.refused.append(
                    f"{shown} cannot be granted: robots.txt is always obeyed (RFC 9309, "
                    "by the crawler's own middleware; POLITE_ROBOTS_* tune it); remove it")
        elif req.name == "AUTOTHROTTLE_ENABLED":
            if _flag(req.value):
                out.said.append(
                    f"{shown}: not used; the rest already grows with a host's slowness "
                    "(POLITE_REST_DURATION_FACTOR, POLITE_REST_DURATION_MAX)")
        elif req.name == "COOKIES_ENABLED" and _flag(req.value):
            out.said.append(
                f"{shown}: not used; the crawler keeps no cookies (a crawler has no "
                "session, and cookies grow traps)")
    return out


#: The Scrapy settings :func:`judge` reads (what a spider or project may have set).
JUDGED = ("DOWNLOAD_DELAY", "CONCURRENT_REQUESTS_PER_DOMAIN", "ROBOTSTXT_OBEY",
          "AUTOTHROTTLE_ENABLED", "COOKIES_ENABLED")

__all__ = ["JUDGED", "Judgement", "Requested", "judge"]
