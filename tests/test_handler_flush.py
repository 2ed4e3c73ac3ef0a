"""A request on a kept connection reaches the kernel in the step that writes it.

The download handler checks the origin's lease and the pool hands it a kept connection
in one step; the request's bytes must leave in that step too, not at the event loop's
next write event. A cluster worker frozen between the two would otherwise send them
when it thaws, before its overdue timers run, to an origin another worker has taken
over (CLUSTER.md). A new connection's first request is left to the write event.

Real parts: a loopback TCP connection, Twisted's own TCP transport over it, and the
crawler's HTTP client protocol. The reactor is a private, never-run instance: the test
is that nothing needs to run it for the bytes to leave.
"""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING, Any

import pytest
from twisted.internet import address, tcp
from twisted.internet.selectreactor import SelectReactor
from twisted.web._newclient import Request
from twisted.web.http_headers import Headers

from polite_crawler.handlers import _GuardedProtocol

if TYPE_CHECKING:
    from collections.abc import Iterator

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


class _Connection(tcp.Connection):
    """Twisted's TCP transport over a socket connected beforehand; the response path
    asks it for its addresses, which only its connecting subclasses otherwise give."""

    def getPeer(self) -> address.IPv4Address:
        return address.IPv4Address("TCP", *self.socket.getpeername())

    def getHost(self) -> address.IPv4Address:
        return address.IPv4Address("TCP", *self.socket.getsockname())


def _request(path: bytes) -> Any:
    return Request(b"GET", path, Headers({b"host": [b"127.0.0.1"]}), None, persistent=True)


def _pending(server: socket.socket) -> bytes:
    """What the server's socket has received so far, without waiting."""
    try:
        return server.recv(65536, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return b""


def _wait_for(server: socket.socket) -> bytes:
    server.settimeout(5.0)
    return server.recv(65536)


@pytest.fixture
def link() -> Iterator[tuple[_GuardedProtocol, _Connection, socket.socket]]:
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    listener.close()
    client.setblocking(False)
    reactor = SelectReactor()  # never run: addWriter/removeWriter only record
    protocol = _GuardedProtocol()
    conn = _Connection(client, protocol, reactor)
    conn.connected = True
    protocol.makeConnection(conn)
    try:
        yield protocol, conn, server
    finally:
        conn.stopReading()
        conn.stopWriting()
        client.close()
        server.close()
        reactor.waker.connectionLost(None)


def _answer(conn: _Connection, server: socket.socket, finished: Any) -> None:
    """The server answers; the transport reads it as the reactor's read event would."""
    server.sendall(RESPONSE)
    done: list[Any] = []
    finished.addBoth(done.append)
    for _ in range(100):
        conn.doRead()
        if done:
            break
    assert done and getattr(done[0], "code", None) == 200, done


def test_a_kept_connections_request_leaves_in_the_step_that_writes_it(
    link: tuple[_GuardedProtocol, _Connection, socket.socket],
) -> None:
    protocol, conn, server = link
    first = protocol.request(_request(b"/one"))
    # A new connection's first request waits for the write event, as Twisted does it.
    assert _pending(server) == b""
    conn.doWrite()  # the reactor's write event
    assert _wait_for(server).startswith(b"GET /one HTTP/1.1\r\n")
    _answer(conn, server, first)

    protocol.request(_request(b"/two"))
    # The kept connection's request is in the kernel already: no write event ran.
    assert _wait_for(server).startswith(b"GET /two HTTP/1.1\r\n")
