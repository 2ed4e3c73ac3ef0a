"""Who owns a host: its registrable domain (pure; the Public Suffix List's data is read
from the ``publicsuffixlist`` package, offline).

A site owner pays for every host name under their domain: ``www.example.org``,
``cdn.example.org`` and a wildcard's ``x1.example.org``, ``x2.example.org`` ... are one
owner, so a daily budget per host would be multiplied by as many names as the owner's
DNS answers. The owner is the registrable domain: the public suffix plus one label,
with the list's private section included (``a.github.io`` and ``b.github.io`` are two
owners, as ``github.io`` is a suffix under which anyone registers). An IP literal and a
single-label name (``localhost``, an intranet name) are their own owners, decided before
the list is asked; a name that is itself a public suffix (``co.uk``) is its own too.

The list's data ships with the package and is updated with it (``pip install -U
publicsuffixlist``), not with a release of this project.

The owner's daily budget is decided here too (:func:`budget_spent`,
:func:`owner_used_today`), for one process and for a cluster alike.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import TYPE_CHECKING, Any

from polite_crawler.policy.rest import budget_left

if TYPE_CHECKING:
    from collections.abc import Iterable

    from polite_crawler.policy.rest import OriginState


@functools.cache
def _list() -> Any:
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList()  # ICANN and private sections


@functools.lru_cache(maxsize=65_536)
def owner_of(host: str) -> str:
    """The registrable domain of ``host`` (lower-case, as ``host_of`` spells it).

    >>> owner_of("www.example.co.uk"), owner_of("a.github.io"), owner_of("b.github.io")
    ('example.co.uk', 'a.github.io', 'b.github.io')
    >>> owner_of("127.0.0.1"), owner_of("[::1]"), owner_of("localhost"), owner_of("co.uk")
    ('127.0.0.1', '[::1]', 'localhost', 'co.uk')
    """
    name = host.lower().rstrip(".")
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        pass
    else:
        return name
    if "." not in name:
        return name
    found = _list().privatesuffix(name)
    return str(found) if found else name


# --- the owner's daily budget -------------------------------------------------------------
# A site owner pays for every request to any of its hosts: the daily budget
# (POLITE_HOST_BUDGET pages a UTC day) holds for each origin and for its owner's hosts
# together, so wildcard subdomains cannot multiply it. One process counts the owner's
# requests as it charges them (its owner record); a cluster worker that takes an owner's
# group starts the count from its origins' counts as Redis keeps them (docs/CLUSTER.md,
# "The owner's daily budget").

def budget_spent(origin: OriginState, owner: OriginState | None, limit: int,
                 now: float) -> bool:
    """Whether the origin may not be asked for another page today: its own daily count,
    or its owner's (``owner``: the owner's record, None when it has none), has reached
    ``limit``.

    >>> from polite_crawler.policy.rest import OriginState, charge_budget
    >>> site, owner = OriginState("http://www.example.org"), OriginState("example.org")
    >>> for _ in range(2):
    ...     charge_budget(owner, 0.0)
    >>> budget_spent(site, owner, 3, 0.0), budget_spent(site, owner, 2, 0.0)
    (False, True)
    >>> budget_spent(site, owner, 2, 86_400.0)  # a new UTC day starts afresh
    False
    """
    if budget_left(origin, limit, now) <= 0:
        return True
    return owner is not None and budget_left(owner, limit, now) <= 0


def owner_used_today(counts: Iterable[str], today: str) -> int:
    """The owner's count for ``today`` (``utc_day``) from its origins' daily counts, each
    ``"<day> <used>"`` as written with the origin's state: the sum of today's.

    >>> owner_used_today(["2026-12-05 3", "2026-12-04 9", "2026-12-05 1"], "2026-12-05")
    4
    """
    used = 0
    for count in counts:
        day, n = count.split()
        if day == today:
            used += int(n)
    return used
