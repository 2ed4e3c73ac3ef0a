"""The Scrapy settings a spider or project set, honoured, said or refused at start.

Glue for :mod:`polite_crawler.policy.scrapysettings`: reads what the author set (above
Scrapy's defaults, below the add-on's pins) and where, before the add-on pins it.
:func:`apply` is called by the add-on: a floor goes into the POLITE_* rest setting the
frontier reads, each note is logged once at INFO, and a refusal raises
:class:`SettingsRefused` (the crawl does not start). ``scrapy crawl`` asks
:func:`settings_problem` first and exits with status 2 and the same line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.settings import SETTINGS_PRIORITIES

from polite_crawler.defaults import polite_settings
from polite_crawler.policy.scrapysettings import JUDGED, Judgement, Requested, judge

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

# The add-on's pins are set at this priority (polite_crawler.addon.ENFORCED): a value
# there is the add-on's own, not the author's.
_PINNED_AT = 100


class SettingsRefused(ValueError):
    """A Scrapy setting asks for what the rules cannot grant (one line, names it)."""


def _where(priority: int, spider: str) -> str:
    names = {v: k for k, v in SETTINGS_PRIORITIES.items()}
    name = names.get(priority, "")
    if name == "spider":
        return f"spider {spider}'s custom_settings"
    place = {"project": "the project's settings.py",
             "cmdline": "-s on the command line"}.get(name, f"{name or priority} settings")
    return f"{place}, crawling with spider {spider}" if spider else place


def requested(settings: BaseSettings, spider: str) -> list[Requested]:
    """The judged Scrapy settings the author set, with where."""
    out = []
    for name in JUDGED:
        priority = settings.getpriority(name)
        if priority is None or priority <= SETTINGS_PRIORITIES["default"] \
                or priority >= _PINNED_AT:
            continue
        out.append(Requested(name, settings[name], _where(priority, spider), priority))
    return out


def judgement(settings: BaseSettings, spider: str) -> Judgement:
    rests = polite_settings(settings)
    return judge(requested(settings, spider), rests.getfloat("POLITE_REST_PAGE"),
                 rests.getfloat("POLITE_REST_API"))


def settings_problem(settings: BaseSettings, spider: str) -> str | None:
    """The first refusal (one line), or None."""
    found = judgement(settings, spider)
    return found.refused[0] if found.refused else None


def apply(settings: BaseSettings, spider: str) -> None:
    """Honour, say or refuse (see the module docstring); before the add-on pins."""
    found = judgement(settings, spider)
    if found.refused:
        raise SettingsRefused(found.refused[0])
    for name, (value, priority) in found.floors.items():
        current = settings.getpriority(name) or 0
        settings.set(name, value, priority=max(priority, current))
    if found.floors:
        value = max(v for v, _ in found.floors.values())
        logger.info("DOWNLOAD_DELAY = %(value)g (%(where)s): honoured as a floor on the "
                    "rest: %(names)s at least %(value)g s (a slow host rests longer)",
                    {"value": value, "names": " and ".join(found.floors),
                     "where": _where(max(p for _, p in found.floors.values()), spider)})
    for line in found.said:
        logger.info(line)


__all__ = ["SettingsRefused", "apply", "requested", "settings_problem"]
