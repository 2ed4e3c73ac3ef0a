"""Guard the test process itself: every outgoing connection is recorded, and one
to an address outside the allowed set is blocked and kept as an escape.

Twisted's TCP client connects with ``socket.connect_ex``; blocking clients use
``socket.connect``. Both are replaced on :class:`socket.socket` for the test, so
an address-policy escape fails the test (``escapes`` is not empty) instead of
reaching the network::

    with guard_connections(LOOPBACK) as guard:
        ...crawl...
    assert guard.escapes == []
"""

from __future__ import annotations

import errno
import ipaddress
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

LOOPBACK = ["127.0.0.0/8"]


@dataclass
class NetGuard:
    allowed: list[ipaddress.IPv4Network | ipaddress.IPv6Network]
    connects: list[str] = field(default_factory=list)  # every destination address tried
    escapes: list[str] = field(default_factory=list)  # destinations that were blocked

    def permits(self, host: str) -> bool:
        try:
            ip = ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            return False
        return any(ip in net for net in self.allowed if ip.version == net.version)

    def hosts(self) -> set[str]:
        return set(self.connects)


@contextmanager
def guard_connections(allowed: list[str]) -> Iterator[NetGuard]:
    guard = NetGuard([ipaddress.ip_network(a) for a in allowed])
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def blocked(sock: socket.socket, address: Any) -> bool:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return False
        host = str(address[0])
        guard.connects.append(host)
        if guard.permits(host):
            return False
        guard.escapes.append(host)
        return True

    def connect(self: socket.socket, address: Any) -> None:
        if blocked(self, address):
            raise ConnectionRefusedError(f"test network guard: connection to {address} blocked")
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if blocked(self, address):  # Twisted's client reads the error code
            return errno.ECONNREFUSED
        return original_connect_ex(self, address)

    socket.socket.connect = connect  # type: ignore[method-assign]
    socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
    try:
        yield guard
    finally:
        socket.socket.connect = original_connect  # type: ignore[method-assign]
        socket.socket.connect_ex = original_connect_ex  # type: ignore[method-assign]
