"""The HTTP download handler: Scrapy's, with the address check at connection time,
timeouts a site cannot stretch, and a cap on the response head.

``DOWNLOAD_HANDLERS`` for http and https (pinned by the add-on). It is Scrapy's
HTTP/1.1 handler with these changes:

* **The address actually connected to.** Every new connection's peer address
  is checked against the crawl's :class:`AddressPolicy` the moment the TCP
  connection is made, before a byte of the request (or of a TLS handshake) is
  written: the protocol factory refuses to build a protocol for it. Together
  with :class:`polite_crawler.resolver.PolicyResolver`, which keeps refused
  addresses out of DNS answers (so no connection is attempted at all), a name
  that resolves to an internal address, by DNS rebinding included, is refused
  (``AddressRefusedError``, reason ``dns-<kind>``). A name whose answer the
  resolver holds fresh (the frontier had it resolved before the origin's first
  request) is connected to straight, at the first of its addresses the policy
  allows (the one the frontier bounds the server by), with a plain TCP endpoint;
  its other addresses are tried through Twisted's name endpoint if that one does
  not answer, and an answer older than the resolver's cache time is looked up
  again. A request's endpoint (and for https its TLS connection creator) is made only
  when the pool has no connection for it (:class:`_LazyEndpoint`), not for a request
  on a kept one.
* **Connect timeout** (POLITE_CONNECT_TIMEOUT): name resolution plus TCP
  connect, raced on the reactor.
* **Head timeout** (POLITE_HEADERS_TIMEOUT): the status line and headers must
  be in within this many seconds of the start; a server that sends its head
  one byte a second is cut off.
* **Exchange timeout** (POLITE_EXCHANGE_TIMEOUT): the whole exchange, body
  included. ``meta["download_timeout"]`` (Scrapy's DOWNLOAD_TIMEOUT) may make it
  shorter, never longer: a site cannot stretch it by dribbling bytes.
* **Head size cap** (POLITE_MAX_HEADER_BYTES): a status line and header block
  larger than this ends the exchange (``HeadersTooLargeError``).
* **The exchange's duration at the transport** (``meta["polite_transfer"]``, seconds):
  from the request's last byte sent to the response's last byte received, read from
  the kernel's TCP timestamps (``TCP_INFO``: ``tcpi_last_data_sent`` and
  ``tcpi_last_data_recv``, one jiffy of resolution) each time the response's bytes are
  read. Time the reactor spent elsewhere before it sent the request or read the answer
  is not in it, so a crawler busy with its own CPU does not look like a slow server to
  the latency watch. With it, ``meta["polite_received"]``: when (epoch seconds) the
  response's last byte arrived, the end of the exchange the origin's rest runs from.
  Where the kernel has no ``TCP_INFO`` both keys are absent and the gate times the
  exchange itself.
* **Connections follow requests in flight, not sites.** A kept-alive connection
  waits in the pool for its origin's next request only when that may come within
  POLITE_KEEPALIVE_IDLE, and is closed at once otherwise: first as the response ends,
  when the base rest for the request's kind is already longer
  (:func:`polite_crawler.policy.descriptors.keep_for`), then as the gate settles the
  exchange, when the frontier's next time for the origin (a Crawl-delay, a backoff, a
  Retry-After, a rest grown with the host's latency, its host's rest, its server's
  round) is further away
  (:class:`KeptConnections`; robots.txt's own exchange as the robots.txt middleware reads
  its Crawl-delay). It is closed after that long idle, and at most
  POLITE_KEEPALIVE_MAX wait, all hosts together (fewer when the descriptor budget is
  short: ``extensions.descriptors``).
* **Running out of descriptors is the crawl's error, not the site's.** A connection
  that cannot be made for EMFILE/ENFILE raises :class:`DescriptorsExhaustedError` (the
  gate puts the request back, as a request not started) and closes the crawl
  (``descriptors_exhausted``).
* **No silent re-send.** Twisted's pool re-sends a request that failed on a
  reused keep-alive connection, at once and unseen by the gate; that is off
  (``retryAutomatically = False``): every failure goes to the gate, which
  decides on a retry behind the origin's rest.

Each timeout raises a :class:`TimeoutError` subclass (also Scrapy's
``DownloadTimeoutError``), which :func:`polite_crawler.policy.verdicts.classify_exception`
reads as a timeout: retried later with backoff, and counted by the breaker.

Private Scrapy/Twisted names this relies on (Scrapy is pinned to 2.19.x and
``tests/test_resolver.py`` fails if they move): ``HTTP11DownloadHandler._pool``,
``_LenientHTTP11ClientFactory``/``_LenientHTTP11ClientProtocol``/
``_LenientHTTPClientParser``, ``HTTP11ClientProtocol._parser`` and
``HTTPConnectionPool._newConnection``, ``_putConnection``, ``_removeConnection``,
``_connections`` and ``_timeouts``, ``HostnameEndpoint._timeout`` and ``_bindAddress``,
``_WrapperEndpoint`` with its ``_wrappedEndpoint`` and ``_wrapperFactory``,
``_WrappingFactory._connector``, ``HTTPClientParser.bodyDecoder``, a connector's
``transport`` and ``factory``; Scrapy's
``_ScrapyAgent`` (its ``_get_agent``), ``_BindAddressAgent``, the handler's
``download_request`` as copied into :meth:`GuardedHTTPDownloadHandler._download_if_held`
(its ``_contextFactory``, ``_bind_address``, ``_default_maxsize``, ``_default_warnsize``,
``_fail_on_dataloss``, ``_fail_on_dataloss_warned``, ``_tls_verbose_logging``) and
Twisted's agent's endpoint factory (``_policyForHTTPS``, ``_connectTimeout``,
``_bindAddress``). ``tests/test_handler_cycles.py`` fails if the names the cycles are
broken by move.
"""

from __future__ import annotations

import logging
import math
import socket
import struct
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.downloader.handlers.http11 import (
    HTTP11DownloadHandler,
    _BindAddressAgent,
    _LenientHTTP11ClientFactory,
    _LenientHTTP11ClientProtocol,
    _LenientHTTPClientParser,
    _ScrapyAgent,
)
from scrapy.exceptions import DownloadTimeoutError, ResponseDataLossError
from scrapy.utils._download_handlers import (
    get_dataloss_msg,
    normalize_bind_address,
    wrap_twisted_exceptions,
)
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet import defer, error
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ClientEndpoint,
    TCP6ClientEndpoint,
    _WrapperEndpoint,
    wrapClientTLS,
)
from twisted.python.failure import Failure
from twisted.web.client import HTTPConnectionPool

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.extensions.descriptors import (
    descriptor_budget,
    descriptor_plan,
    exhaustion_in,
    walk_causes,
)
from polite_crawler.frontier.core import NOT_BEFORE
from polite_crawler.middlewares.addresses import (
    AddressRefusedError,
    address_policy,
    record_refusal,
)
from polite_crawler.policy.descriptors import keep_for
from polite_crawler.policy.rest import wait_before_send
from polite_crawler.resolver import ensure_resolver, release_resolver

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.interfaces import IAddress, IStreamClientEndpoint
    from twisted.web._newclient import HTTP11ClientProtocol

    from polite_crawler.interfaces import FrontierService
    from polite_crawler.policy.addresses import AddressPolicy
    from polite_crawler.resolver import PolicyResolver

logger = logging.getLogger(__name__)


class ConnectTimeoutError(DownloadTimeoutError, TimeoutError):
    """No connection within POLITE_CONNECT_TIMEOUT (name resolution included)."""


class HeadersTimeoutError(DownloadTimeoutError, TimeoutError):
    """The response head did not arrive within POLITE_HEADERS_TIMEOUT."""


class ExchangeTimeoutError(DownloadTimeoutError, TimeoutError):
    """The whole exchange took longer than POLITE_EXCHANGE_TIMEOUT."""


class LeaseLapsedError(Exception):
    """Not started: the frontier that handed the request out no longer holds its origin
    (a cluster worker whose lease ran out while the request waited; see
    ``FrontierScheduler.may_send``). The gate puts the request's dispatch back."""


class DescriptorsExhaustedError(LeaseLapsedError):
    """Not sent: the process ran out of file descriptors (EMFILE) making its connection.
    The crawl closes (``descriptors_exhausted``, extensions.descriptors); the request is
    not the site's failure, and goes back to its origin's queue as a request not started
    does."""


class HeadersTooLargeError(Exception):
    """The response's status line and headers exceeded POLITE_MAX_HEADER_BYTES."""


# --- the response head cap ------------------------------------------------------------


class _CappedHeadParser(_LenientHTTPClientParser):
    """Scrapy's lenient response parser, counting the bytes of the head."""

    _polite_cap = 64 * 1024

    def lineReceived(self, line: bytes) -> None:
        seen = getattr(self, "_polite_head_bytes", 0) + len(line) + 2
        self._polite_head_bytes = seen
        if seen > self._polite_cap:
            # HTTP11ClientProtocol.dataReceived catches this, drops the connection
            # and fails the response with it (inside ResponseFailed).
            raise HeadersTooLargeError(f"response head larger than {self._polite_cap} bytes")
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:
        # One line beyond LineReceiver.MAX_LENGTH (16 KiB): Twisted would only drop
        # the connection, and the exchange would wait for its timeout.
        raise HeadersTooLargeError(f"a response header line longer than {self.MAX_LENGTH} bytes")

    def connectionLost(self, reason: Any = None) -> None:
        # The protocol detaches the parser at every response's end through this call.
        # A chunked body's decoder calls back into the parser (its finish callback is a
        # bound method of it): a reference cycle holding the parser, its request and
        # the protocol's exchange (response, headers), freed only by a full collection,
        # which in a crawl's large heap rarely comes. Let go of the decoder once the
        # parser is done with it.
        try:
            super().connectionLost(reason)
        finally:
            self.bodyDecoder = None


# --- the exchange's duration at the transport ------------------------------------------

_TCP_INFO: int | None = getattr(socket, "TCP_INFO", None)  # Linux
# struct tcp_info (linux/tcp.h): eight one-byte fields, then 32-bit fields; the times,
# in milliseconds ago, start at byte 44: last_data_sent, last_ack_sent, last_data_recv.
_TIMES = struct.Struct("=III")
_TIMES_AT = 44


def _socket_of(transport: Any) -> socket.socket | None:
    """The TCP socket under a transport (plain TCP, or TLS over TCP)."""
    for layer in (transport, getattr(transport, "transport", None)):
        sock = getattr(layer, "socket", None)
        if isinstance(sock, socket.socket):
            return sock
    return None


def tcp_times(sock: socket.socket) -> tuple[float, float] | None:
    """Seconds from the last data this socket sent to the last data it received, and
    seconds since it received that data.

    Read from the kernel, so it is when the bytes went and came, not when the process
    got round to them. None when the kernel cannot tell (no TCP_INFO, closed socket).
    """
    if _TCP_INFO is None:
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, _TIMES_AT + _TIMES.size)
    except OSError:
        return None
    if len(info) < _TIMES_AT + _TIMES.size:
        return None
    sent_ago, _ack_ago, received_ago = _TIMES.unpack_from(info, _TIMES_AT)
    return max(int(sent_ago) - int(received_ago), 0) / 1000.0, int(received_ago) / 1000.0


def tcp_transfer(sock: socket.socket) -> float | None:
    """Seconds from the last data this socket sent to the last data it received."""
    times = tcp_times(sock)
    return None if times is None else times[0]


class _GuardedProtocol(_LenientHTTP11ClientProtocol):
    head_cap = 64 * 1024
    guard: _ConnectionGuard | None = None
    # The current exchange's duration at the transport so far (see tcp_times), and
    # when (epoch seconds) its last byte so far was received.
    transfer: float | None = None
    received: float | None = None
    _sock: socket.socket | None = None
    _kept = False  # a request was written on this connection before: it was kept

    def request(self, request: Any) -> defer.Deferred[Any]:
        self.transfer = self.received = None
        d = super().request(request)
        parser: Any = self._parser
        if parser is not None:
            parser.__class__ = _CappedHeadParser
            parser._polite_cap = self.head_cap
        if self._kept:
            self._flush_now()
        self._kept = True
        return d

    def _flush_now(self) -> None:
        """Hand a request's bytes to the kernel now, in the step that wrote them, rather
        than at the event loop's next write event. On a kept connection that step is the
        one in which the download handler checked the origin's lease (the pool hands the
        connection over at once); a process frozen (SIGSTOP, a long pause) between the
        two would otherwise send them when it thaws, since the event loop runs the ready
        I/O before the overdue timers: to an origin another cluster worker took over
        meanwhile. A new connection's first request is not flushed here: written when the
        connection completes, possibly on waking, it is left to the write event, after
        which the overdue exchange timer has aborted it unsent. Partial sends and errors
        are left to the reactor's own write event, as before."""
        transport: Any = self.transport
        for layer in (transport, getattr(transport, "transport", None)):
            write = getattr(layer, "doWrite", None)
            if write is not None and getattr(layer, "connected", False):
                write()
                return

    def connectionLost(self, reason: Any = None) -> None:
        transport: Any = self.transport
        try:
            super().connectionLost(reason)  # type: ignore[no-untyped-call]
        finally:
            # Twisted's connector and its TCP transport refer to each other after the
            # connection is lost (the connector's ``transport``, the transport's
            # ``connector``): a reference cycle holding the connection's objects until a
            # full collection, which in a crawl's large heap rarely comes (one set a
            # request when connections close after their exchange). The transport calls
            # its connector's connectionLost after this returns, through its own
            # reference; the connector's is dropped as Twisted drops it for a failed
            # connection, and so is the endpoint's wrapping factory's
            # (``_WrappingFactory._connector``, used only to cancel a connection
            # attempt), a cycle with the connector too.
            for layer in (transport, getattr(transport, "transport", None)):
                connector = getattr(layer, "connector", None)
                if connector is not None and getattr(connector, "transport", None) is layer:
                    connector.transport = None
                    wrapping: Any = getattr(connector, "factory", None)
                    if getattr(wrapping, "_connector", None) is connector:
                        wrapping._connector = None
                    break

    def dataReceived(self, bytes: bytes) -> None:
        sock = self._sock
        if sock is None:
            sock = self._sock = _socket_of(self.transport)
        if sock is not None:
            times = tcp_times(sock)
            if times is None:
                self.transfer = self.received = None
            else:
                self.transfer, ago = times
                self.received = time.time() - ago
        guard = self.guard
        if guard is None:
            super().dataReceived(bytes)  # type: ignore[no-untyped-call]
            return
        # The response head is parsed inside this call and Scrapy's headers_received
        # signal fires from it: the handler pairs the request with this protocol then.
        guard.reading = self
        try:
            super().dataReceived(bytes)  # type: ignore[no-untyped-call]
        finally:
            guard.reading = None


class _GuardedFactory(_LenientHTTP11ClientFactory):
    """Builds a protocol only for a peer address the policy allows."""

    guard: _ConnectionGuard
    name: str = ""
    port: int | None = None

    def buildProtocol(self, addr: IAddress | None) -> HTTP11ClientProtocol:
        address = getattr(addr, "host", None)
        reason = self.guard.check(address, self.name, self.port)
        if reason is not None:
            # Raised here, the connection is closed before anything is written
            # (Twisted's endpoint wrapper turns it into the connect failure).
            raise AddressRefusedError(reason, self.name, str(address))
        proto = _GuardedProtocol(self._quiescentCallback)  # type: ignore[no-untyped-call]
        proto.head_cap = self.guard.head_cap
        proto.guard = self.guard
        return proto


class _ConnectionGuard:
    def __init__(self, policy: AddressPolicy, head_cap: int, connect_timeout: float) -> None:
        self.policy = policy
        self.head_cap = head_cap
        self.connect_timeout = connect_timeout
        self.resolver: PolicyResolver | None = None
        self.reading: _GuardedProtocol | None = None  # the protocol reading bytes right now

    def check(self, address: Any, name: str, port: int | None) -> str | None:
        if address is None:
            return "dns-invalid"
        return self.policy.check_address(address, name, port)


def _key_host(key: Any) -> tuple[str, int | None]:
    """(host, port) from an HTTPConnectionPool key: (scheme, host, port, ...)."""
    try:
        host, port = key[1], key[2]
    except (IndexError, TypeError):
        return "", None
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    return str(host).strip("[]"), port if isinstance(port, int) else None


class _GuardedPool(HTTPConnectionPool):
    """Connections whose peer passed the address check, made within the connect timeout;
    idle ones kept only while their host's next request may use them.

    A kept-alive connection waits in the pool at most ``cachedConnectionTimeout``
    seconds (POLITE_KEEPALIVE_IDLE), is closed at once when its host's rest is longer
    (:meth:`settle`), and at most ``max_idle`` wait, all hosts together (the longest idle
    closed first): open connections follow the requests in flight, not the sites."""

    guard: _ConnectionGuard
    max_idle = 256
    cachedConnectionTimeout: float = 4.0  # type: ignore[assignment]  # Twisted's is an int

    def __init__(self, reactor: Any, persistent: bool = True,
                 count: Callable[[str], None] = lambda key: None) -> None:
        super().__init__(reactor, persistent)  # type: ignore[no-untyped-call]
        self._idle: dict[Any, Any] = {}  # idle connection -> its key, oldest first
        # The idle connection an origin's last exchange left (see rested), both ways;
        # an entry lives only as long as its connection is idle.
        self._by_origin: dict[str, Any] = {}
        self._origin_of: dict[Any, str] = {}
        # Stats: connections made (polite/connections/opened) and idle ones closed
        # (polite/connections/closed/<why>: rest, idle, cap).
        self.count = count

    def getConnection(
        self, key: Any, endpoint: IStreamClientEndpoint
    ) -> defer.Deferred[HTTP11ClientProtocol]:
        # Twisted's, without its automatic re-send (off: retryAutomatically), and a key
        # with no connection left is forgotten (a map entry a site would otherwise keep).
        connections = self._connections.get(key)
        while connections:
            connection = connections.pop(0)
            if not connections:
                del self._connections[key]
            self._timeouts.pop(connection).cancel()
            self._idle.pop(connection, None)
            self._forget_origin(connection)
            if connection.state == "QUIESCENT":
                return defer.succeed(connection)
        return self._newConnection(key, endpoint)

    def _putConnection(self, key: Any, connection: Any) -> None:
        if connection.state != "QUIESCENT" or self.max_idle <= 0 \
                or self.cachedConnectionTimeout <= 0 or self.maxPersistentPerHost <= 0:
            if connection.state != "QUIESCENT":
                super()._putConnection(key, connection)  # type: ignore[no-untyped-call]
            else:
                connection.transport.loseConnection()
            return
        connections = self._connections.setdefault(key, [])
        while len(connections) >= self.maxPersistentPerHost:
            self._drop(connections[0], key=key)
        connections = self._connections.setdefault(key, [])
        connections.append(connection)
        self._timeouts[connection] = self._reactor.callLater(
            self.cachedConnectionTimeout, self._drop, connection, "idle")
        self._idle[connection] = key
        while len(self._idle) > self.max_idle:
            self._drop(next(iter(self._idle)), "cap")

    def _removeConnection(self, key: Any, connection: Any) -> None:
        self._drop(connection, "idle")

    def _drop(self, connection: Any, why: str = "", key: Any = None) -> None:
        """Close an idle connection and forget it (``key``: its pool key, when the
        caller knows it)."""
        if why:
            self.count(f"polite/connections/closed/{why}")
        key = self._idle.pop(connection, key)
        self._forget_origin(connection)
        timer = self._timeouts.pop(connection, None)
        if timer is not None and timer.active():
            timer.cancel()
        connections = self._connections.get(key)
        if connections is not None:
            if connection in connections:
                connections.remove(connection)
            if not connections:
                del self._connections[key]
        connection.transport.loseConnection()

    def settle(self, connection: Any, keep: float, origin: str = "") -> None:
        """After an exchange: the idle ``connection`` is closed now unless it is to be
        kept (``keep`` > 0, :func:`polite_crawler.policy.descriptors.keep_for`); a kept
        one is remembered as ``origin``'s, for :meth:`rested`."""
        if connection not in self._idle:
            return
        if keep <= 0:
            self._drop(connection, "rest")
        elif origin:
            self._forget_origin(connection)
            self._by_origin[origin] = connection
            self._origin_of[connection] = origin

    def rested(self, origin: str) -> None:
        """``origin``'s next request is further away than the keep-alive time: the idle
        connection its last exchange left is closed now."""
        connection = self._by_origin.get(origin)
        if connection is not None:
            self._drop(connection, "rest")

    def _forget_origin(self, connection: Any) -> None:
        origin = self._origin_of.pop(connection, None)
        if origin is not None and self._by_origin.get(origin) is connection:
            del self._by_origin[origin]

    def _newConnection(
        self, key: Any, endpoint: IStreamClientEndpoint
    ) -> defer.Deferred[HTTP11ClientProtocol]:
        name, port = _key_host(key)
        self.count("polite/connections/opened")

        def quiescent(protocol: HTTP11ClientProtocol) -> None:
            self._putConnection(key, protocol)

        factory = _GuardedFactory(quiescent, repr(endpoint))  # type: ignore[no-untyped-call]
        factory.guard, factory.name, factory.port = self.guard, name, port
        connector: Any = endpoint
        direct, others = self._direct(endpoint, name, port)
        d: defer.Deferred[HTTP11ClientProtocol]
        if direct is None:
            d = connector.connect(factory)
        else:
            d = direct.connect(factory)
            if others:
                # The address the frontier bounds the server by did not answer: the name's
                # other addresses, as Twisted's endpoint tries them (within the same
                # connect timeout).
                def fallback(failure: Failure) -> Any:
                    failure.trap(error.ConnectError)  # type: ignore[no-untyped-call]
                    return connector.connect(factory)

                d.addErrback(fallback)
        clock: Any = self._reactor
        timer = clock.callLater(self.guard.connect_timeout, d.cancel)

        def settle(result: Any) -> Any:
            timed_out = not timer.active()
            if not timed_out:
                timer.cancel()
            failure: Failure | None = result if isinstance(result, Failure) else None
            if failure is None:
                return result
            refused = _find(failure.value, AddressRefusedError)
            if refused is not None:
                raise refused
            resolver = self.guard.resolver
            if isinstance(failure.value, error.DNSLookupError) and resolver is not None:
                reason = resolver.refusal_for(name)
                if reason is not None:
                    raise AddressRefusedError(reason, name)
            if timed_out:
                raise ConnectTimeoutError(
                    f"no connection to {name}:{port} within {self.guard.connect_timeout} s"
                )
            return result

        d.addBoth(settle)
        return d


    def _direct(self, endpoint: Any, name: str, port: int | None) -> tuple[Any, bool]:
        """A plain TCP endpoint to the address ``name`` is known to resolve to (TLS
        wrapped as ``endpoint`` is, so the server name for SNI and the certificate check
        stay the URL's), and whether the name has other addresses; (None, False) when
        the name's answer is not fresh in the resolver's cache or none of its addresses
        passes the address policy: Twisted's endpoint then resolves it (the lookup
        refreshes the cache; a refusal is recorded and reported as before).

        Twisted's name endpoint runs its resolution machinery for every connection (an
        endpoint and a receiver a connection, the resolver's filter over every address),
        about a quarter of a new connection's CPU; the frontier has had the name resolved
        and its address checked since the origin's first request. The peer address is
        checked again as the connection is made (:class:`_GuardedFactory`)."""
        resolver = self.guard.resolver
        if resolver is None or port is None:
            return None, False
        wrapper: Any = None
        if type(endpoint) is _LazyEndpoint:
            uri, made = endpoint.uri, endpoint.made_by
            if uri.scheme not in (b"http", b"https"):
                return None, False
            timeout, bind = made._connectTimeout, made._bindAddress
            if isinstance(bind, (bytes, str)):  # as Twisted's name endpoint reads it
                bind = (bind.decode() if isinstance(bind, bytes) else bind, 0)
        else:
            inner = endpoint
            if type(inner) is _WrapperEndpoint:
                wrapper, inner = inner._wrapperFactory, inner._wrappedEndpoint
            if type(inner) is not HostnameEndpoint:
                return None, False
            timeout, bind = inner._timeout, inner._bindAddress
        answer = resolver.known_answer(name)
        if not answer:
            return None, False
        check = self.guard.check
        address = next((a for a in answer if check(a, name, port) is None), None)
        if address is None:
            return None, False
        tcp: Any = TCP6ClientEndpoint if ":" in address else TCP4ClientEndpoint
        direct = tcp(self._reactor, address.split("%", 1)[0], port, timeout=timeout,
                     bindAddress=bind)
        if wrapper is not None:
            direct = _WrapperEndpoint(direct, wrapper)  # type: ignore[no-untyped-call]
        elif type(endpoint) is _LazyEndpoint and endpoint.uri.scheme == b"https":
            # TLS as Twisted's agent wraps it: the URL's host for SNI and verification.
            creator = endpoint.made_by._policyForHTTPS.creatorForNetloc(
                endpoint.uri.host, endpoint.uri.port)
            direct = wrapClientTLS(creator, direct)
        return direct, len(answer) > 1


class _LazyEndpoint:
    """A request's endpoint, made only when the pool has no connection for it.

    Twisted's agent makes one for every request before it asks the pool, a kept
    connection's too: a name endpoint (the host name read through IDNA, about 20 us)
    and, for https, the TLS connection creator (an OpenSSL context, about 60 us). Here
    the pool's new connection makes what it needs (:meth:`_GuardedPool._direct`, or
    Twisted's own endpoint for the URI)."""

    __slots__ = ("made_by", "uri")

    def __init__(self, made_by: Any, uri: Any) -> None:
        self.made_by = made_by  # the agent's endpoint factory (twisted.web.client)
        self.uri = uri  # twisted.web.client.URI

    def connect(self, protocol_factory: Any) -> Any:
        endpoint: Any = self.made_by.endpointForURI(self.uri)
        return endpoint.connect(protocol_factory)

    def __repr__(self) -> str:
        return f"<endpoint {self.uri.scheme!r}://{self.uri.host!r}:{self.uri.port}>"


class _LazyEndpointAgent(_BindAddressAgent):
    def _getEndpoint(self, uri: Any) -> Any:
        return _LazyEndpoint(self._endpointFactory, uri)


class _GuardedAgent(_ScrapyAgent):
    """Scrapy's agent, its direct requests' endpoints made only for a new connection
    (:class:`_LazyEndpoint`); a proxied request's as Scrapy makes them."""

    def _get_agent(self, request: Request, timeout: float) -> Any:
        if request.meta.get("proxy"):
            return super()._get_agent(request, timeout)
        from twisted.internet import reactor

        # Scrapy's direct agent (_ScrapyAgent._get_agent without a proxy), lazy.
        bind = normalize_bind_address(request.meta.get("bindaddress") or self._bindAddress)
        return _LazyEndpointAgent(reactor=reactor, contextFactory=self._contextFactory,
                                  connectTimeout=timeout, bindAddress=bind, pool=self._pool)


def _find(exc: BaseException | None, cls: type[BaseException]) -> Any:
    """The first ``cls`` inside an exception's causes and Twisted's wrapped reasons."""
    return next((item for item in walk_causes(exc) if isinstance(item, cls)), None)


_KEPT_ATTR = "_polite_kept_connections"


class KeptConnections:
    """The crawl's kept-alive connections as the gate sees them: after it settles an
    exchange, the frontier knows when the origin's next request may go (its rest, a
    Crawl-delay, a backoff or Retry-After wait, the latency factor, its host's rest, its
    server's round: ``FrontierView.next_request_at``), and a connection
    that would wait longer than POLITE_KEEPALIVE_IDLE for it is closed at once
    (``polite/connections/closed/rest``): it would hold a descriptor through the rest,
    and a server closes it anyway after its own keep-alive time (Apache's 5 s).

    One a crawl (:func:`kept_connections`); each guarded handler (one a scheme) adds its
    pool. A call costs a comparison, and a dictionary lookup a pool when the wait is the
    longer."""

    def __init__(self, keep_idle: float) -> None:
        self.keep_idle = keep_idle
        self.pools: list[_GuardedPool] = []

    def next_request_in(self, origin: str, wait: float) -> None:
        """``origin``'s next request may go in ``wait`` seconds at the soonest."""
        if wait > self.keep_idle:
            for pool in self.pools:
                pool.rested(origin)


def kept_connections(crawler: Crawler) -> KeptConnections:
    """The crawl's :class:`KeptConnections` (made on first use, kept on the crawler)."""
    kept: KeptConnections | None = getattr(crawler, _KEPT_ATTR, None)
    if kept is None:
        kept = KeptConnections(polite_settings(crawler.settings).getfloat(
            "POLITE_KEEPALIVE_IDLE"))
        setattr(crawler, _KEPT_ATTR, kept)
    return kept


def take_not_before(request: Request) -> float:
    """The time a request handed out ahead may be sent (``meta[NOT_BEFORE]``, taken out
    of the meta: a copy of the request, a retry, carries none); 0.0: at once."""
    return float(request.meta.pop(NOT_BEFORE, None) or 0.0)


async def hold_until_due(crawler: Crawler, request: Request,
                         not_before: float | None = None) -> None:
    """A request the frontier handed out ahead of its origin's time
    (``FrontierConfig.dispatch_lead``) waits here, in the download handler, until that
    time (by the frontier's clock): the steps between the scheduler and the handler
    (Scrapy's downloader, the event loop's queue behind pages being read) were taken
    before it, and only the handler's own timer and the write follow. The exchange's
    start (``polite_start``, ``polite_sent``) is then.

    ``not_before``: the time, as the caller already took it (:func:`take_not_before`);
    None: taken from the request here. The wait is measured now, when it starts."""
    if not_before is None:
        not_before = take_not_before(request)
    if not not_before:
        return
    ctx = polite_context(crawler)
    held = False
    # Asked again after each wait: the reactor's timers run on its own clock, which may
    # call a little before the frontier's clock has reached the time.
    while (wait := wait_before_send(not_before, ctx.clock())) > 0:
        from twisted.internet import reactor as _reactor

        reactor: Any = _reactor
        d: defer.Deferred[None] = defer.Deferred()
        call = reactor.callLater(wait, d.callback, None)
        try:
            await maybe_deferred_to_future(d)
        finally:
            if call.active():
                call.cancel()
        held = True
    if held and crawler.stats is not None:
        crawler.stats.inc_value("polite/dispatch/held_until_due")
    now = ctx.clock()
    request.meta["polite_start"] = now
    request.meta["polite_sent"] = now


class GuardedHTTPDownloadHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler with the address check, three timeouts and a head cap."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = polite_settings(crawler.settings)
        self.policy = address_policy(crawler)
        self.connect_timeout = settings.getfloat("POLITE_CONNECT_TIMEOUT")
        self.headers_timeout = settings.getfloat("POLITE_HEADERS_TIMEOUT")
        self.exchange_timeout = settings.getfloat("POLITE_EXCHANGE_TIMEOUT")
        head_cap = settings.getint("POLITE_MAX_HEADER_BYTES")
        self.guard = _ConnectionGuard(self.policy, head_cap, self.connect_timeout)
        from twisted.internet import reactor

        stats = crawler.stats
        pool = _GuardedPool(reactor, persistent=True, count=(
            stats.inc_value if stats is not None else (lambda key: None)))
        pool.maxPersistentPerHost = self._pool.maxPersistentPerHost
        # Kept-alive connections follow requests in flight (policy.descriptors): an idle
        # one waits POLITE_KEEPALIVE_IDLE at most, only for a host whose rest is
        # shorter, and no more of them than the descriptor budget holds.
        self.keep_idle = settings.getfloat("POLITE_KEEPALIVE_IDLE")
        self.rest_floor = {False: settings.getfloat("POLITE_REST_PAGE"),
                           True: settings.getfloat("POLITE_REST_API")}
        pool.cachedConnectionTimeout = self.keep_idle
        pool.max_idle = descriptor_plan(crawler).idle
        # The gate closes an idle connection whose origin's next request, as the
        # frontier settled it, is further away than that (KeptConnections).
        kept_connections(crawler).pools.append(pool)
        # Twisted re-sends an idempotent request that failed on a reused keep-alive
        # connection, at once and unseen by the gate: a second request with no rest.
        pool.retryAutomatically = False
        pool.guard = self.guard
        self._pool = self.pool = pool
        self.resolver = ensure_resolver(crawler, self.policy)
        self.guard.resolver = self.resolver
        # id(request) -> the protocol that read its head, until download_request returns
        self._exchanges: dict[int, _GuardedProtocol] = {}
        crawler.signals.connect(self._head_received, signal=signals.headers_received)

    def _head_received(self, request: Request, **_kwargs: Any) -> None:
        proto = self.guard.reading
        if proto is not None:
            self._exchanges[id(request)] = proto

    async def download_request(self, request: Request) -> Response:
        from twisted.internet import reactor as _reactor

        reactor: Any = _reactor
        limit = request.meta.get("download_timeout") or math.inf
        exchange = min(float(limit), self.exchange_timeout)
        request.meta["download_timeout"] = exchange
        request.meta.pop("download_latency", None)  # set again when this head arrives
        request.meta.pop("polite_transfer", None)  # a retry's copy carries the last one
        request.meta.pop("polite_received", None)
        not_before = take_not_before(request)
        # A request held until its time (hold_until_due) has that much longer for its head.
        held = max(not_before - polite_context(self.crawler).clock(), 0.0) if not_before else 0.0
        d: defer.Deferred[Response] = deferred_from_coro(
            self._download_if_held(request, not_before))
        head_late = False

        def head_check() -> None:
            nonlocal head_late
            if "download_latency" not in request.meta and not d.called:
                head_late = True
                d.cancel()

        timer = reactor.callLater(self.headers_timeout + held, head_check) \
            if self.headers_timeout < exchange else None
        try:
            response = await maybe_deferred_to_future(d)
            proto = self._exchanges.get(id(request))
            # The origin's next request waits for this one to settle, so nothing else
            # has used the connection since the response's last byte.
            if proto is not None:
                if proto.transfer is not None:
                    request.meta["polite_transfer"] = proto.transfer
                    request.meta["polite_received"] = proto.received
                # Its host rests at least the base rest before the next request: a
                # connection kept through a longer rest only holds a descriptor. A
                # longer rest than the base one is known once the gate has settled
                # the exchange (KeptConnections).
                self.pool.settle(proto, keep_for(
                    self.rest_floor[bool(request.meta.get("polite_api"))], self.keep_idle),
                    request.meta.get("polite_origin", ""))
            return response
        except AddressRefusedError as exc:
            record_refusal(self.crawler, request, exc)
            raise
        except BaseException as exc:  # the head timer's cancel arrives as asyncio's CancelledError
            if head_late:
                raise HeadersTimeoutError(
                    f"no response head from {request.url} within {self.headers_timeout} s"
                ) from None
            if not isinstance(exc, Exception):
                raise
            refused = _find(exc, AddressRefusedError)
            if refused is not None:
                record_refusal(self.crawler, request, refused)
                raise refused from None
            exhausted = exhaustion_in(exc)
            if exhausted is not None:
                budget = descriptor_budget(self.crawler)
                if budget is not None:
                    budget.exhausted(exhausted, f"the download handler ({request.url})")
                raise DescriptorsExhaustedError(
                    f"{request.url}: not sent, the process has no file descriptor left "
                    f"({exhausted})") from None
            for cls in (HeadersTooLargeError, ConnectTimeoutError):
                found = _find(exc, cls)
                if found is not None:
                    raise found from None
            if isinstance(exc, DownloadTimeoutError) and not isinstance(exc, TimeoutError):
                raise ExchangeTimeoutError(
                    f"{request.url} took longer than {exchange} s"
                ) from exc
            raise
        finally:
            self._exchanges.pop(id(request), None)
            if timer is not None and timer.active():
                timer.cancel()

    async def _download_if_held(self, request: Request, not_before: float) -> Response:
        """Scrapy's download, started only while the frontier still holds the request's
        origin. The check and the start of the exchange's timeout (Scrapy's agent arms
        it as it calls the pool, before its first suspension) run in one step of the
        event loop, so no pause of the process falls between them: an exchange started
        at T by a worker whose lease ends at V > T is cut by T + the exchange timeout.
        A request handed out ahead of its time waits for it first (hold_until_due),
        ``not_before`` as :meth:`download_request` took it."""
        await hold_until_due(self.crawler, request, not_before)
        frontier: FrontierService | None = polite_context(self.crawler).frontier
        if frontier is not None and not frontier.may_send(request):
            raise LeaseLapsedError(f"{request.url}: the frontier no longer holds its origin")
        # Scrapy's HTTP11DownloadHandler.download_request, with the guarded agent.
        spider = self.crawler.spider
        agent = _GuardedAgent(
            contextFactory=self._contextFactory,
            bindAddress=self._bind_address,
            pool=self._pool,
            maxsize=getattr(spider, "download_maxsize", self._default_maxsize),
            warnsize=getattr(spider, "download_warnsize", self._default_warnsize),
            fail_on_dataloss=self._fail_on_dataloss,
            crawler=self.crawler,
            tls_verbose_logging=self._tls_verbose_logging,
        )
        try:
            with wrap_twisted_exceptions():
                response: Response = await maybe_deferred_to_future(
                    agent.download_request(request))
                return response
        except ResponseDataLossError:
            if not self._fail_on_dataloss_warned:
                logger.warning(get_dataloss_msg(request.url))
                self._fail_on_dataloss_warned = True
            raise

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            release_resolver(self.resolver, self.policy)


__all__ = [
    "ConnectTimeoutError",
    "DescriptorsExhaustedError",
    "ExchangeTimeoutError",
    "GuardedHTTPDownloadHandler",
    "HeadersTimeoutError",
    "HeadersTooLargeError",
    "KeptConnections",
    "LeaseLapsedError",
    "kept_connections",
]
