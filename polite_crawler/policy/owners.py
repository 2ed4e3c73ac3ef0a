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
"""

from __future__ import annotations

import functools
import ipaddress
from typing import Any


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
