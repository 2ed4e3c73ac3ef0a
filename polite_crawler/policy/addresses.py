"""Which addresses the crawler may reach (the SSRF guard's rules).

A crawler fetches whatever strangers' pages point at; a link, a redirect or a
sitemap entry must not steer it into the operator's own network (a cloud
metadata service at 169.254.169.254, a router at 10.0.0.1, an admin page on
127.0.0.1). The rule: an address that is not public unicast is refused unless
the operator allowed it, by naming its host as a start URL or by listing its
network in POLITE_ALLOW_NETWORKS.

The rule is applied twice (see docs/ARCHITECTURE.md): to the host as written,
before anything is queued or sent (every spelling of an IP literal first
normalised the way a resolver would read it: ``2852039166``, ``0251.0376.0251.0376``,
``0xa9fea9fe``, ``127.1``, ``[::ffff:a9fe:a9fe]``, trailing dots, percent-encoding,
full-width digits), and to the address a name resolved to and the connection
actually reached, so DNS (rebinding included) cannot steer it either.

Reasons are short stable words used in stats keys and the access log
(``refused:<reason>``); an address reached through DNS is refused as
``dns-<reason>``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from polite_crawler.policy.idn import IDNAError, to_ascii
from polite_crawler.policy.network import Network, parse_networks

if TYPE_CHECKING:
    from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_DEFAULT_PORTS = {"http": 80, "https": 443}
ALLOWED_SCHEMES = frozenset(_DEFAULT_PORTS)

# Longest host name DNS can carry (RFC 1035 section 2.3.4: 255 octets on the wire).
MAX_HOST_LENGTH = 253


def _nets(*cidrs: str) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(c) for c in cidrs)


# Special-purpose IPv4 blocks (IANA registry, RFC 6890 and successors), the
# reason each is refused. Checked in order; the first match names the reason.
_V4_BLOCKS: tuple[tuple[str, tuple[Network, ...]], ...] = (
    # RFC 1122 "this network"; a connect to 0.0.0.0 reaches localhost on Linux.
    ("unspecified", _nets("0.0.0.0/8")),
    ("loopback", _nets("127.0.0.0/8")),  # RFC 1122
    ("private", _nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),  # RFC 1918
    ("cgnat", _nets("100.64.0.0/10")),  # RFC 6598 shared address space
    ("link-local", _nets("169.254.0.0/16")),  # RFC 3927; cloud metadata lives here
    ("documentation", _nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24")),  # RFC 5737
    ("benchmark", _nets("198.18.0.0/15")),  # RFC 2544
    ("broadcast", _nets("255.255.255.255/32")),  # RFC 919
    ("multicast", _nets("224.0.0.0/4")),  # RFC 5771
    # IETF protocol assignments (RFC 6890), 6to4 relay anycast (RFC 7526), class E.
    ("reserved", _nets("192.0.0.0/24", "192.88.99.0/24", "240.0.0.0/4")),
)

# IPv6: only global unicast (2000::/3) can be public; inside it these blocks are
# not. Addresses that embed an IPv4 address (mapped, NAT64, 6to4) are judged by
# the IPv4 address they lead to.
_V6_GLOBAL = ipaddress.ip_network("2000::/3")
_V6_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_V6_6TO4 = ipaddress.ip_network("2002::/16")  # RFC 3056
_V6_BLOCKS: tuple[tuple[str, tuple[Network, ...]], ...] = (
    ("unspecified", _nets("::/128")),
    ("loopback", _nets("::1/128")),
    ("private", _nets("fc00::/7", "fec0::/10", "64:ff9b:1::/48")),  # RFC 4193, 3879, 8215
    ("link-local", _nets("fe80::/10")),  # RFC 4291
    ("multicast", _nets("ff00::/8")),
    ("documentation", _nets("2001:db8::/32", "3fff::/20")),  # RFC 3849, 9637
    ("benchmark", _nets("2001:2::/48")),  # RFC 5180
    # IETF protocol assignments incl. Teredo (RFC 2928, 4380), ORCHID, SRv6 SIDs (RFC 9602).
    ("reserved", _nets("2001::/23", "5f00::/16")),
)

# Names that by standard never reach a public host (RFC 6761, RFC 8375,
# ICANN's .internal) and the loopback names /etc/hosts carries by default.
_SPECIAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
_SPECIAL_SUFFIXES = (".localhost", ".local", ".internal", ".home.arpa", ".invalid")

# Letters, digits, hyphen (RFC 952/1123) and the underscore some real hosts
# carry, after IDNA. Anything else (space, backslash, "@", "%", control
# characters) is refused: resolvers read such hosts differently (glibc's
# inet_aton reads "127.0.0.1 x" as 127.0.0.1).
_NAME_CHARS = re.compile(r"[a-z0-9_.-]+")
# A URL whose authority is a plain lower-case host (letters, digits, ".", "-", "_") and
# an optional port, right after "http://" or "https://" and ended by "/", "?", "#" or
# the URL's end: urlsplit gives it the same scheme, host and port (nothing it strips or
# reads otherwise, no credentials, no brackets), so AddressPolicy.check_url reads it
# without urlsplit.
_PLAIN_URL = re.compile(r"(https?)://([a-z0-9._-]+)(?::([0-9]{1,5}))?(?=[/?#]|\Z)", re.ASCII)
# Full stops that IDNA treats as label separators (UTS #46).
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


@dataclass(frozen=True)
class Host:
    """A host as the policy reads it.

    ``text`` is the normal form: an IP address in its standard text (an
    IPv4-mapped IPv6 address as the IPv4 address), or a lower-case name
    without trailing dots. ``ip`` is set when the host is an IP literal in any
    spelling; ``invalid`` when no resolver should be handed it at all.
    """

    text: str
    ip: IPAddress | None = None
    invalid: bool = False


class AddressRefused(Exception):
    """An exchange the address policy refused; nothing was sent.

    Glue raises a subclass that Scrapy also treats as an ignored request.
    A verdict for it: the origin is unreachable by policy for the run
    (``refused:<reason>``), not a failure of the site.
    """

    def __init__(self, reason: str, host: str = "", address: str = "") -> None:
        self.reason = reason
        self.host = host
        self.address = address
        where = f"{host} ({address})" if address and address != host else host
        super().__init__(f"address policy refused {where}: {reason}")


# --- parsing ------------------------------------------------------------------


def _ipv4_number(part: str) -> int | None:
    """One part of an IPv4 literal as a resolver reads it (0x hex, leading-0 octal)."""
    if not part:
        return None
    radix = 10
    if part[:2] in ("0x", "0X"):
        part, radix = part[2:], 16
    elif len(part) > 1 and part[0] == "0":
        part, radix = part[1:], 8
    if not part:
        return 0
    digits = {10: "0123456789", 8: "01234567", 16: "0123456789abcdefABCDEF"}[radix]
    if any(c not in digits for c in part):
        return None
    return int(part, radix)


def _ends_in_number(host: str) -> bool:
    last = host.rsplit(".", 1)[-1]
    if last and last.isascii() and last.isdigit():
        return True
    return _ipv4_number(last) is not None and last[:2] in ("0x", "0X")


def parse_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """Read ``host`` as inet_aton and the WHATWG URL standard do, or None.

    >>> parse_ipv4("2852039166"), parse_ipv4("0251.0376.0251.0376"), parse_ipv4("127.1")
    (IPv4Address('169.254.169.254'), IPv4Address('169.254.169.254'), IPv4Address('127.0.0.1'))
    >>> parse_ipv4("0x7f.0.0.1"), parse_ipv4("example.org"), parse_ipv4("256.0.0.1")
    (IPv4Address('127.0.0.1'), None, None)
    """
    if not host.isascii():
        return None
    parts = host.split(".")
    if len(parts) > 4:
        return None
    numbers = []
    for part in parts:
        n = _ipv4_number(part)
        if n is None or n > 0xFFFFFFFF:
            return None
        numbers.append(n)
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        return None
    value = numbers[-1]
    for i, n in enumerate(numbers[:-1]):
        value += n * 256 ** (3 - i)
    return ipaddress.IPv4Address(value)


def _decode(host: str) -> str | None:
    """Percent-decoding (repeated, bounded), NFKC and IDNA dots; None if it never settles."""
    for _ in range(4):
        decoded = unquote(host, errors="strict") if "%" in host else host
        if decoded == host:
            break
        host = decoded
    else:
        return None
    return unicodedata.normalize("NFKC", host).translate(_DOTS)


def parse_host(host: str) -> Host:
    """The normal form of a host as written in a URL (see :class:`Host`).

    >>> parse_host("[::FFFF:A9FE:A9FE]").text, parse_host("%31%32%37.0.0.1.").text
    ('169.254.169.254', '127.0.0.1')
    >>> parse_host("Example.ORG.").text, parse_host("1.2.3.999").invalid
    ('example.org', True)
    """
    raw = host.strip()
    if raw.startswith("[") and raw.endswith("]"):
        raw = raw[1:-1]
    try:
        decoded = _decode(raw)
    except UnicodeDecodeError:
        decoded = None
    if decoded is None or not decoded or len(decoded) > 4 * MAX_HOST_LENGTH:
        return Host(host, invalid=True)
    if ":" in decoded:  # only IPv6 literals have colons in a host
        addr, _, _zone = decoded.partition("%")  # a zone id says which link, not which address
        try:
            ip6 = ipaddress.IPv6Address(addr)
        except ValueError:
            return Host(decoded.lower(), invalid=True)
        mapped = ip6.ipv4_mapped
        if mapped is not None:
            return Host(str(mapped), mapped)
        return Host(str(ip6), ip6)
    name = decoded.lower().rstrip(".")
    if not name or ".." in name or name.startswith("."):
        return Host(name or decoded, invalid=True)
    if not name.isascii():
        # UTS #46 non-transitional (policy.idn), on the name as written: its own case
        # mapping, not str.lower's.
        try:
            name = to_ascii(decoded).lower().rstrip(".")
        except IDNAError:
            return Host(name, invalid=True)
    if len(name) > MAX_HOST_LENGTH or not _NAME_CHARS.fullmatch(name):
        return Host(name, invalid=True)
    if _ends_in_number(name):
        ip4 = parse_ipv4(name)
        if ip4 is None:  # looks like an address but is none: resolvers disagree on these
            return Host(name, invalid=True)
        return Host(str(ip4), ip4)
    return Host(name)


def parse_address(address: str | IPAddress) -> IPAddress | None:
    """A resolved address (text or object) as an IP, IPv4-mapped IPv6 unwrapped."""
    if isinstance(address, str):
        host = parse_host(address)
        return host.ip
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


# --- classification ---------------------------------------------------------------


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _V6_NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _V6_6TO4:
        return ip.sixtofour
    return None


def classify_address(ip: IPAddress) -> str | None:
    """The reason ``ip`` is not a public unicast address, or None when it is.

    >>> classify_address(ipaddress.ip_address("169.254.169.254"))
    'link-local'
    >>> classify_address(ipaddress.ip_address("64:ff9b::a00:1")), classify_address(
    ...     ipaddress.ip_address("93.184.215.14"))
    ('private', None)
    """
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            return classify_address(inner)
        for reason, nets in _V6_BLOCKS:
            if any(ip in net for net in nets):
                return reason
        return None if ip in _V6_GLOBAL else "reserved"
    for reason, nets in _V4_BLOCKS:
        if any(ip in net for net in nets):
            return reason
    return None


def classify_name(name: str) -> str | None:
    """``special-name`` for names that never lead to a public host."""
    if name in _SPECIAL_NAMES or name.endswith(_SPECIAL_SUFFIXES):
        return "special-name"
    return None


# A host as written -> its parsed form and, when valid, the reason its address or
# name is not public (parse_host, then classify_address or classify_name: both depend
# on the string alone). Asked for every request and every redirect hop, by a crawl that
# reaches the same hosts again and again; bounded.
@functools.lru_cache(maxsize=8192)
def _judge_host(host: str) -> tuple[Host, str | None]:
    parsed = parse_host(host)
    reason: str | None = None
    if not parsed.invalid and parsed.text:
        reason = (classify_address(parsed.ip) if parsed.ip is not None
                  else classify_name(parsed.text))
    return parsed, reason


# --- the policy ---------------------------------------------------------------------


class AddressPolicy:
    """The address rules of one crawl: what it may reach, and what the operator allowed.

    ``allow_networks`` (POLITE_ALLOW_NETWORKS) are reachable whatever their
    kind. A start URL allows its own host on its own port (http and https
    default ports count as one), and nothing else on that host: a link to
    ``http://127.0.0.1:22/`` from a start URL on port 8080 is refused.
    A start host given as a name may reach internal addresses only when the
    first answer it resolved to was entirely internal (an intranet host the
    operator named); a public name that later resolves inward (DNS
    rebinding) is refused.
    """

    def __init__(
        self,
        allow_networks: Iterable[str | Network] = (),
        start_urls: Iterable[str] = (),
        max_url_length: int = 0,
    ) -> None:
        self.allow_networks: list[Network] = [
            n if not isinstance(n, str) else parse_networks([n])[0] for n in allow_networks
        ]
        self.max_url_length = max_url_length
        self._start: dict[str, set[int]] = {}  # host normal form -> allowed ports
        self._pins: dict[str, bool] = {}  # start name -> may reach internal addresses
        for url in start_urls:
            self.add_start_url(url)

    # operator's allowances
    def add_start_url(self, url: str) -> str | None:
        """Allow the host (and port) of a start URL; returns its normal form."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return None
        host = parse_host(parts.hostname or "")
        scheme = parts.scheme.lower()
        if host.invalid or not host.text or scheme not in ALLOWED_SCHEMES:
            return None
        ports = self._start.setdefault(host.text, set())
        if port is None or port == _DEFAULT_PORTS[scheme]:
            ports.update(_DEFAULT_PORTS.values())
        else:
            ports.add(port)
        return host.text

    @property
    def start_hosts(self) -> frozenset[str]:
        return frozenset(self._start)

    def _start_allows(self, host: str, port: int | None) -> bool:
        ports = self._start.get(host)
        return ports is not None and (port is None or port in ports)

    def _allowed_network(self, ip: IPAddress) -> bool:
        return any(ip in net for net in self.allow_networks if ip.version == net.version)

    # the host as written
    def check_url(self, url: str) -> str | None:
        """Reason to refuse ``url`` before anything is sent, or None.

        >>> p = AddressPolicy(start_urls=["http://127.0.0.1:8080/"])
        >>> p.check_url("http://127.0.0.1:8080/a"), p.check_url("http://2852039166/")
        (None, 'link-local')
        >>> p.check_url("http://127.0.0.1:22/"), p.check_url("file:///etc/passwd")
        ('loopback', 'scheme')
        """
        if self.max_url_length and len(url) > self.max_url_length:
            return "url-too-long"
        plain = _PLAIN_URL.match(url)
        if plain is not None:
            # The common URL, read as urlsplit reads it (every request is asked).
            scheme, host, digits = plain.groups()
            if digits is None:
                return self.check_host(host, _DEFAULT_PORTS[scheme])
            if int(digits) <= 0xFFFF:
                return self.check_host(host, int(digits))
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            return "invalid-host"
        scheme = parts.scheme.lower()
        if scheme not in ALLOWED_SCHEMES:
            return "scheme"
        netloc = parts.netloc
        if "\\" in netloc or any(c.isspace() or ord(c) < 0x20 for c in netloc):
            return "invalid-host"
        if "@" in netloc:  # credentials in a URL: readers disagree about where the host starts
            return "userinfo"
        if port is None:
            port = _DEFAULT_PORTS[scheme]
        return self.check_host(parts.hostname or "", port)

    def check_host(self, host: str, port: int | None = None) -> str | None:
        """Reason to refuse ``host`` (as written, any spelling), or None."""
        parsed, reason = _judge_host(host)
        if parsed.invalid or not parsed.text:
            return "invalid-host"
        if parsed.ip is not None:
            if reason is None or self._allowed_network(parsed.ip):
                return None
        elif reason is None:
            return None
        if self._start_allows(parsed.text, port):
            return None
        return reason

    # the address DNS returned / the connection reached
    def note_resolution(self, name: str, addresses: Iterable[str | IPAddress]) -> None:
        """Record the first answer for a start host named by name (see the class doc)."""
        host = _judge_host(name)[0]
        if host.ip is not None or host.text not in self._start or host.text in self._pins:
            return
        ips = [ip for ip in (parse_address(a) for a in addresses) if ip is not None]
        if ips:
            self._pins[host.text] = all(classify_address(ip) is not None for ip in ips)

    def check_address(
        self, address: str | IPAddress, name: str | None = None, port: int | None = None
    ) -> str | None:
        """Reason to refuse connecting to ``address``, reached as ``name``, or None.

        Asked for every address of every new connection: an address in text is read
        and classified once (``_judge_host``'s cache), as a host as written is."""
        if isinstance(address, str):
            parsed, reason = _judge_host(address)
            ip = parsed.ip
            if ip is None:
                return "dns-invalid"
        else:
            ip = parse_address(address)
            if ip is None:
                return "dns-invalid"
            reason = classify_address(ip)
        if reason is None or self._allowed_network(ip):
            return None
        if self._start_allows(str(ip), port):
            return None  # the operator named this very address
        if name is not None:
            host = _judge_host(name)[0]
            if host.ip is None and self._start_allows(host.text, port):
                self.note_resolution(host.text, [ip])
                if self._pins.get(host.text):
                    return None
        return f"dns-{reason}"

    def filter_addresses(
        self, name: str, addresses: Iterable[str | IPAddress], port: int | None = None
    ) -> tuple[list[str | IPAddress], dict[str, str]]:
        """Split resolved addresses into the allowed ones and {refused address: reason}."""
        addresses = list(addresses)
        self.note_resolution(name, addresses)
        allowed: list[str | IPAddress] = []
        refused: dict[str, str] = {}
        for address in addresses:
            reason = self.check_address(address, name, port)
            if reason is None:
                allowed.append(address)
            else:
                refused[str(address)] = reason
        return allowed, refused


__all__ = [
    "ALLOWED_SCHEMES",
    "AddressPolicy",
    "AddressRefused",
    "Host",
    "IPAddress",
    "classify_address",
    "classify_name",
    "parse_address",
    "parse_host",
    "parse_ipv4",
]
