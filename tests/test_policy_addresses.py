"""The address policy: every spelling of an internal address is refused unless allowed."""

from __future__ import annotations

import ipaddress
from urllib.parse import quote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from polite_crawler.policy.addresses import (
    AddressPolicy,
    AddressRefused,
    classify_address,
    parse_host,
    parse_ipv4,
)

# --- classification of each special block ---------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "cgnat"),
        ("100.127.255.255", "cgnat"),
        ("169.254.169.254", "link-local"),
        ("192.0.2.1", "documentation"),
        ("198.51.100.7", "documentation"),
        ("203.0.113.9", "documentation"),
        ("198.18.0.1", "benchmark"),
        ("198.19.255.255", "benchmark"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("255.255.255.255", "broadcast"),
        ("240.0.0.1", "reserved"),
        ("192.0.0.170", "reserved"),
        ("192.88.99.1", "reserved"),
        ("::", "unspecified"),
        ("::1", "loopback"),
        ("fc00::1", "private"),
        ("fd12:3456:789a::1", "private"),
        ("fec0::1", "private"),
        ("fe80::1", "link-local"),
        ("febf::1", "link-local"),
        ("ff02::1", "multicast"),
        ("2001:db8::1", "documentation"),
        ("3fff::1", "documentation"),
        ("2001::1", "reserved"),  # Teredo
        ("100::1", "reserved"),  # discard-only, outside 2000::/3
        ("::7f00:1", "reserved"),  # IPv4-compatible (deprecated)
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:a9fe:a9fe", "link-local"),
        ("64:ff9b::10.0.0.1", "private"),  # NAT64 to a private address
        ("64:ff9b:1::1", "private"),  # local-use NAT64
        ("2002:a9fe:a9fe::1", "link-local"),  # 6to4 around a link-local address
        ("2002:7f00:1::", "loopback"),
    ],
)
def test_special_blocks_refused(address: str, reason: str) -> None:
    assert classify_address(ipaddress.ip_address(address)) == reason
    assert AddressPolicy().check_host(address) == reason
    assert AddressPolicy().check_address(address) == f"dns-{reason}"


@pytest.mark.parametrize(
    "address",
    [
        "93.184.215.14",
        "8.8.8.8",
        "1.1.1.1",
        "100.63.255.255",  # just below CGNAT
        "100.128.0.0",  # just above
        "172.15.255.255",
        "172.32.0.0",
        "169.253.255.255",
        "223.255.255.255",
        "2606:2800:21f:cb07:6820:80da:af6b:8b2c",
        "2a00:1450:4001:82b::200e",
        "64:ff9b::8.8.8.8",  # NAT64 to a public address
        "2002:808:808::1",  # 6to4 of 8.8.8.8
    ],
)
def test_public_addresses_allowed(address: str) -> None:
    assert classify_address(ipaddress.ip_address(address)) is None
    assert AddressPolicy().check_host(address) is None
    assert AddressPolicy().check_address(address) is None


# --- every spelling -----------------------------------------------------------------

METADATA_SPELLINGS = [
    "169.254.169.254",
    "2852039166",
    "0xa9fea9fe",
    "0XA9FEA9FE",
    "0251.0376.0251.0376",
    "00000251.0376.0251.0376",
    "0xa9.0xfe.0xa9.0xfe",
    "0xa9.254.0251.0xfe",
    "169.254.43518",  # a.b.16bit
    "169.16689662",  # a.24bit
    "0xa9.0xfea9fe",
    "169.254.169.254.",
    "169.254.169.254...",
    "[::ffff:169.254.169.254]",
    "[::ffff:a9fe:a9fe]",
    "[::FFFF:A9FE:A9FE]",
    "[0:0:0:0:0:ffff:a9fe:a9fe]",
    "%31%36%39.254.169.254",
    "%2531%2536%2539.254.169.254",  # encoded twice
    "\uff11\uff16\uff19.\uff12\uff15\uff14.\uff11\uff16\uff19.\uff12\uff15\uff14",  # full-width
    "169\u3002254\u3002169\u3002254",  # ideographic full stops
    "[64:ff9b::a9fe:a9fe]",
    "[2002:a9fe:a9fe::]",
]


@pytest.mark.parametrize("spelling", METADATA_SPELLINGS)
def test_metadata_service_every_spelling(spelling: str) -> None:
    policy = AddressPolicy(start_urls=["http://127.0.0.1:8080/"])
    host = parse_host(spelling)
    if not spelling.startswith(("[64:", "[2002:")):
        assert host.text == "169.254.169.254"
    assert policy.check_host(spelling) == "link-local"
    url = f"http://{spelling}/latest/meta-data/"
    assert policy.check_url(url) in ("link-local", "invalid-host")


@pytest.mark.parametrize(
    "spelling",
    ["127.1", "127.0.1", "0x7f.1", "0177.0.0.1", "2130706433", "017700000001", "0x7f000001",
     "127.000.000.001", "[::ffff:7f00:1]", "[::1]", "localhost", "LOCALHOST.", "db.localhost",
     "printer.local", "metadata.google.internal", "nas.home.arpa", "0", "0x0", "0.0.0.0",
     "[::]", "[0::0]"],
)
def test_loopback_and_unspecified_spellings(spelling: str) -> None:
    reason = AddressPolicy().check_host(spelling)
    assert reason in ("loopback", "unspecified", "special-name")


@pytest.mark.parametrize(
    "host",
    ["1.2.3.999", "256.1.1.1", "1.2.3.4.5", "08.1.1.1", "0x1g.1.1.1", "127.0.0.1%20x",
     "127.0.0.1 x", "127..0.1", ".127.0.0.1", "a b", "evil\\@127.0.0.1", "%zz", "%ff%fe",
     "[::ffff:1.2.3.999]", "[fe80::1::2]", "x" * 300, "4294967296"],
)
def test_invalid_hosts_refused(host: str) -> None:
    assert AddressPolicy().check_host(host) == "invalid-host"


def test_ipv6_zone_id_is_ignored() -> None:
    assert AddressPolicy().check_host("fe80::1%25eth0") == "link-local"
    assert AddressPolicy().check_url("http://[fe80::1%25eth0]:80/") == "link-local"


def test_idn_names_are_punycode() -> None:
    assert parse_host("BÜCHER.example").text == "xn--bcher-kva.example"
    assert AddressPolicy().check_host("bücher.example") is None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "scheme"),
        ("gopher://127.0.0.1:70/", "scheme"),
        ("ftp://example.org/", "scheme"),
        ("data:text/html,hi", "scheme"),
        ("http://example.org@169.254.169.254/", "userinfo"),
        ("http://169.254.169.254@example.org/", "userinfo"),
        ("http://user:pw@example.org/", "userinfo"),
        ("http://127.0.0.1\\@example.org/", "invalid-host"),
        ("http://[::1/", "invalid-host"),
        ("http://example.org:99999/", "invalid-host"),
        ("http://10.0.0.1/", "private"),
        ("https://[fd00::1]:8443/", "private"),
        ("http://2852039166/", "link-local"),
        ("http://0x7f.1:8080/", "loopback"),
    ],
)
def test_urls_refused(url: str, reason: str) -> None:
    assert AddressPolicy().check_url(url) == reason


def test_url_length_cap() -> None:
    policy = AddressPolicy(max_url_length=100)
    assert policy.check_url("http://example.org/" + "a" * 200) == "url-too-long"
    assert policy.check_url("http://example.org/short") is None


# --- the operator's allowances ------------------------------------------------------


def test_start_host_allowed_on_its_port_only() -> None:
    policy = AddressPolicy(start_urls=["http://127.0.0.1:8080/"])
    assert policy.start_hosts == {"127.0.0.1"}
    assert policy.check_url("http://127.0.0.1:8080/x") is None
    assert policy.check_url("http://2130706433:8080/x") is None  # the same address, spelt otherwise
    assert policy.check_url("http://[::ffff:127.0.0.1]:8080/x") is None
    assert policy.check_url("http://127.0.0.1:22/") == "loopback"  # another service on the host
    assert policy.check_url("http://127.0.0.3:8080/") == "loopback"  # another loopback host
    assert policy.check_address("127.0.0.1", "127.0.0.1", 8080) is None
    assert policy.check_address("127.0.0.3", "127.0.0.3", 8080) == "dns-loopback"


def test_start_host_default_ports_count_as_one() -> None:
    policy = AddressPolicy(start_urls=["http://10.1.2.3/"])
    assert policy.check_url("https://10.1.2.3/login") is None  # http -> https upgrade
    assert policy.check_url("http://10.1.2.3:8080/") == "private"


def test_allow_networks() -> None:
    policy = AddressPolicy(allow_networks=["10.0.0.0/8", "fd00::/8"])
    assert policy.check_url("http://10.9.8.7:1234/") is None
    assert policy.check_url("http://0x0a.0x090807/") is None
    assert policy.check_url("http://[fd00::5]/") is None
    assert policy.check_url("http://192.168.0.1/") == "private"
    assert policy.check_address("10.0.0.5", "anything.example") is None
    assert policy.check_address("169.254.169.254", "anything.example") == "dns-link-local"


def test_names_are_checked_after_resolution() -> None:
    policy = AddressPolicy(start_urls=["https://example.org/"])
    assert policy.check_url("https://attacker.example/") is None  # a name: DNS decides
    assert policy.check_address("10.0.0.1", "attacker.example", 443) == "dns-private"
    assert policy.check_address("::ffff:169.254.169.254", "attacker.example") == "dns-link-local"
    assert policy.check_address("93.184.215.14", "attacker.example") is None


def test_public_start_name_cannot_rebind_inward() -> None:
    policy = AddressPolicy(start_urls=["https://example.org/"])
    allowed, refused = policy.filter_addresses("example.org", ["93.184.215.14"], 443)
    assert allowed == ["93.184.215.14"] and refused == {}
    # The next answer (a short TTL later) points inward: refused.
    allowed, refused = policy.filter_addresses("example.org", ["127.0.0.1", "10.0.0.1"], 443)
    assert allowed == []
    assert refused == {"127.0.0.1": "dns-loopback", "10.0.0.1": "dns-private"}


def test_mixed_answer_keeps_only_public() -> None:
    policy = AddressPolicy(start_urls=["https://example.org/"])
    allowed, refused = policy.filter_addresses("example.org", ["10.0.0.1", "93.184.215.14"], 443)
    assert allowed == ["93.184.215.14"]
    assert refused == {"10.0.0.1": "dns-private"}


def test_intranet_start_name_may_stay_internal() -> None:
    policy = AddressPolicy(start_urls=["http://wiki.corp.example/"])
    allowed, _ = policy.filter_addresses("wiki.corp.example", ["10.1.1.1"], 80)
    assert allowed == ["10.1.1.1"]
    assert policy.check_address("10.1.1.2", "wiki.corp.example", 80) is None
    # ... but only on the start URL's ports, and only for that name.
    assert policy.check_address("10.1.1.1", "wiki.corp.example", 22) == "dns-private"
    assert policy.check_address("10.1.1.1", "other.corp.example", 80) == "dns-private"


def test_start_special_name_allowed() -> None:
    policy = AddressPolicy(start_urls=["http://localhost:8900/"])
    assert policy.check_url("http://localhost:8900/a") is None
    assert policy.check_address("127.0.0.1", "localhost", 8900) is None
    assert policy.check_url("http://localhost:8901/a") == "special-name"


def test_bad_start_urls_are_ignored() -> None:
    policy = AddressPolicy()
    assert policy.add_start_url("file:///etc/passwd") is None
    assert policy.add_start_url("http://[::1/") is None
    assert policy.add_start_url("http://1.2.3.999/") is None
    assert policy.start_hosts == frozenset()


def test_refusal_exception_carries_reason() -> None:
    exc = AddressRefused("dns-private", "attacker.example", "10.0.0.1")
    assert exc.reason == "dns-private"
    assert "attacker.example (10.0.0.1)" in str(exc)


# --- properties over generated spellings -----------------------------------------------


def _spell_part(value: int, style: str, upper: bool) -> str:
    if style == "hex":
        text = f"{value:x}"
        return ("0X" if upper else "0x") + (text.upper() if upper else text)
    if style == "oct":
        return f"0{value:o}"
    return str(value)


@st.composite
def ipv4_spellings(draw: st.DrawFn, value: int) -> str:
    """A spelling of the IPv4 address ``value`` that resolvers read as that address."""
    octets = list(ipaddress.IPv4Address(value).packed)
    nparts = draw(st.integers(1, 4))
    if nparts == 1:
        numbers = [value]
    elif nparts == 2:
        numbers = [octets[0], value & 0xFFFFFF]
    elif nparts == 3:
        numbers = [octets[0], octets[1], value & 0xFFFF]
    else:
        numbers = octets
    parts = [
        _spell_part(n, draw(st.sampled_from(["dec", "oct", "hex"])), draw(st.booleans()))
        for n in numbers
    ]
    text = ".".join(parts) + "." * draw(st.integers(0, 2))
    how = draw(st.sampled_from(["plain", "percent", "fullwidth", "mapped"]))
    if how == "percent":
        text = "".join(quote(c, safe="") if draw(st.booleans()) else c for c in text)
        text = text.replace(".", "%2e") if draw(st.booleans()) else text
    elif how == "fullwidth":
        text = "".join(chr(ord(c) + 0xFEE0) if c.isdigit() else c for c in text)
    elif how == "mapped":
        ip = ipaddress.IPv4Address(value)
        hexed = f"[::ffff:{value >> 16:x}:{value & 0xFFFF:x}]"
        text = f"[::ffff:{ip}]" if draw(st.booleans()) else hexed
    return text


@st.composite
def address_and_spelling(draw: st.DrawFn, network: str = "0.0.0.0/0") -> tuple[int, str]:
    net = ipaddress.IPv4Network(network)
    value = draw(st.integers(int(net.network_address), int(net.broadcast_address)))
    return value, draw(ipv4_spellings(value))


@given(address_and_spelling())
@example((0xA9FEA9FE, "2852039166"))
@example((0x7F000001, "0x7f.1"))
def test_every_spelling_reads_as_the_address(pair: tuple[int, str]) -> None:
    value, spelling = pair
    ip = ipaddress.IPv4Address(value)
    host = parse_host(spelling)
    assert not host.invalid, spelling
    assert host.ip == ip, spelling
    assert AddressPolicy().check_host(spelling) == classify_address(ip)


@given(st.data(), st.sampled_from(["10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16"]))
def test_allowed_networks_hold_for_every_spelling(data: st.DataObject, network: str) -> None:
    _, spelling = data.draw(address_and_spelling(network))
    assert AddressPolicy(allow_networks=[network]).check_host(spelling) is None
    assert AddressPolicy().check_host(spelling) is not None


@given(st.integers(0, 2**32 - 1))
def test_parse_ipv4_matches_dotted(value: int) -> None:
    ip = ipaddress.IPv4Address(value)
    assert parse_ipv4(str(ip)) == ip
    assert parse_ipv4(str(value)) == ip
    assert parse_ipv4(hex(value)) == ip


@given(st.text(max_size=80))
@example("[::ffff:")
@example("%")
@example("0x" + "f" * 300)
def test_parse_host_never_raises_and_settles(text: str) -> None:
    host = parse_host(text)
    if not host.invalid:
        again = parse_host(host.text)
        assert again.text == host.text
        assert again.ip == host.ip
        policy = AddressPolicy()
        assert policy.check_host(text) == policy.check_host(host.text)


@given(st.text(max_size=120))
def test_check_url_never_raises(text: str) -> None:
    policy = AddressPolicy(start_urls=["http://127.0.0.1:8080/"], max_url_length=2000)
    reason = policy.check_url(text)
    assert reason is None or isinstance(reason, str)
    reason = policy.check_url("http://" + text + "/")
    assert reason is None or isinstance(reason, str)


@given(st.ip_addresses())
def test_check_address_agrees_with_classification(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    reason = AddressPolicy().check_address(str(ip), "x.example")
    expected = classify_address(ip)
    assert reason == (None if expected is None else f"dns-{expected}")
    # Stricter than the standard library, never looser: whatever it calls
    # not global is refused (it calls a few IETF anycast addresses global).
    inner = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped else ip
    if not inner.is_global:
        assert expected is not None


# --- the plain URL's short way (check_url without urlsplit) reads as urlsplit does ---------
_URL_CHARS = "abcxyz019.-_:/?#@[]%\\ \t\n\r\x00ABC\uff0e\u3002"


@settings(max_examples=600, deadline=None)
@given(scheme=st.sampled_from(["http", "https", "HTTP", "ftp", "http:"]),
       authority=st.one_of(
           st.text(alphabet=_URL_CHARS, max_size=24),
           st.from_regex(r"[a-z0-9._-]{1,12}(:[0-9]{0,6})?", fullmatch=True),
           st.sampled_from(["127.0.0.1", "127.1", "2852039166", "localhost", "a.local",
                            "example.org", "127.0.0.1:8080", "127.0.0.1:22", "0x7f.1"])),
       rest=st.text(alphabet=_URL_CHARS, max_size=8))
def test_check_url_short_way_agrees_with_urlsplit(scheme: str, authority: str,
                                                   rest: str) -> None:
    policy = AddressPolicy(allow_networks=["10.0.0.0/8"],
                           start_urls=["http://127.0.0.1:8080/", "http://intranet.local/"])
    url = f"{scheme}://{authority}{rest}"
    # A leading space takes the urlsplit way (urlsplit strips it as check_url does).
    assert policy.check_url(url) == policy.check_url(" " + url), url
