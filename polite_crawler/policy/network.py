"""Address networks named in settings (test networks, allowed networks)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from polite_crawler.policy.identity import is_loopback_host

if TYPE_CHECKING:
    from collections.abc import Iterable

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> list[Network]:
    """Parse CIDR strings; a bare address is a /32 or /128.

    >>> parse_networks(["10.0.0.0/8", "192.0.2.7"])
    [IPv4Network('10.0.0.0/8'), IPv4Network('192.0.2.7/32')]
    """
    return [ipaddress.ip_network(v.strip(), strict=False) for v in values if v and v.strip()]


def in_networks(host: str, networks: Iterable[Network]) -> bool:
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return any(addr in net for net in networks)


def is_test_host(host: str, networks: Iterable[Network]) -> bool:
    """A loopback host or an address in the test networks (POLITE_TEST_NETWORKS): a
    host of the operator's own, for which the public floors and POLITE_BOT_URL do not apply.

    >>> nets = parse_networks(["10.9.0.0/16"])
    >>> is_test_host("127.0.0.2", nets), is_test_host("10.9.1.1", nets), is_test_host("a.org", nets)
    (True, True, False)
    """
    return is_loopback_host(host) or in_networks(host, networks)
