"""Which bound decides when an origin's next request may go (pure): for an operator's
explanation of a URL, from the same state the frontier keeps.

Three keys hold a request back, from the narrowest: the *origin* (its own rest,
Crawl-delay, a wait its server asked for), the *host* (its name across schemes and
ports: one request at a time and the whole rest, :mod:`polite_crawler.policy.rest`),
and the *server* (the address the name resolves to, :mod:`polite_crawler.policy.servers`:
a full round, the round's rest, a failure of the machine). :func:`next_request` names
the one that decides and when it lets the request go.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from polite_crawler.policy.servers import next_send
from polite_crawler.policy.urls import host_of_origin

if TYPE_CHECKING:
    from polite_crawler.policy.rest import OriginState
    from polite_crawler.policy.servers import ServerState

# The bounds, by name (NextRequest.bound).
NONE = "none"  # nothing holds it: it may go now
ORIGIN_REST = "origin_rest"  # the origin's own rest (or its Crawl-delay)
ORIGIN_WAIT = "origin_wait"  # a Retry-After or backoff the site asked for
HOST_BUSY = "host_busy"  # another request of the host name is out
HOST_REST = "host_rest"  # the rest after the host's last request (another origin's)
ADDRESS_UNKNOWN = "address_unknown"  # the name's address is being looked up
SERVER_FULL = "server_full"  # the server's round is full (its concurrency limit)
SERVER_REST = "server_rest"  # the rest after the server's last round
SERVER_WAIT = "server_wait"  # a failure of the machine (503, timeout, refused)


@dataclass(frozen=True)
class NextRequest:
    origin: str
    host: str
    server: str | None  # the address, or None when not known
    at: float | None  # when it may go (None: when the server's round frees a place)
    bound: str  # which bound decides (the names above)


def next_request(origin: str, now: float, *, origin_state: OriginState,
                 host_next: float = 0.0, host_busy: bool = False,
                 server: ServerState | None = None, server_in_flight: int = 0,
                 address_known: bool = True) -> NextRequest:
    """When the origin's next request may go and which bound decides it, from the
    origin's state, its host's (the end of its rest, whether a request of it is out) and
    its server's (the bound and our requests open on it)."""
    host = host_of_origin(origin)
    address = server.address if server is not None else None
    if host_busy:
        return NextRequest(origin, host, address, None, HOST_BUSY)
    if not address_known:
        return NextRequest(origin, host, None, None, ADDRESS_UNKNOWN)
    candidates = [(origin_state.next_allowed, ORIGIN_REST),
                  (origin_state.failure.wait_until, ORIGIN_WAIT),
                  (host_next, HOST_REST)]
    if server is not None:
        at = next_send(server, server_in_flight)
        if at is None:
            return NextRequest(origin, host, address, None, SERVER_FULL)
        candidates += [(server.wait_until, SERVER_WAIT), (server.next_allowed, SERVER_REST)]
    at, bound = max(candidates, key=lambda c: c[0])
    if at <= now:
        return NextRequest(origin, host, address, now, NONE)
    return NextRequest(origin, host, address, at, bound)
