"""The test web over TLS: a self-signed certificate made at test time, on loopback.

:func:`self_signed` writes a certificate and key (EC P-256, valid for a day,
for the given names and addresses); :class:`TLSTestWeb` serves the same
:class:`~demo.web.server.Site` objects as the plain test web, every
host on one port, HTTPS only (a plain-HTTP request gets no answer), with the
same request log.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
from typing import TYPE_CHECKING, Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from demo.web.server import Site, TestWeb, _HostServer

if TYPE_CHECKING:
    import socket
    from pathlib import Path


def self_signed(directory: Path, names: list[str], addresses: list[str]) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` for ``names`` and ``addresses`` into ``directory``."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0] if names else "test")])
    now = datetime.datetime.now(datetime.UTC)
    alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    alt += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)  # self-signed: its own issuer
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def server_context(cert: Path, key: Path) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


class _TLSHostServer(_HostServer):
    def __init__(self, addr: tuple[str, int], site: Site, web: TestWeb,
                 context: ssl.SSLContext) -> None:
        self.context = context
        super().__init__(addr, site, web)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        # The handshake runs in the handler's thread, on its first read, so a
        # client that never completes one holds up no other connection.
        return self.context.wrap_socket(sock, server_side=True,
                                        do_handshake_on_connect=False), addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a refused or aborted handshake is the client's choice, not a test failure


class TLSTestWeb(TestWeb):
    """:class:`TestWeb` speaking HTTPS with ``context`` on every host."""

    __test__ = False

    def __init__(self, sites: dict[str, Site], context: ssl.SSLContext, port: int = 0) -> None:
        super().__init__(sites, port)
        self.context = context

    def url(self, host: str, path: str = "/") -> str:
        return f"https://{host}:{self.port}{path}"

    def start(self) -> TLSTestWeb:
        for host, site in self.sites.items():
            srv = _TLSHostServer((host, self.port), site, self, self.context)
            if self.port == 0:
                self.port = srv.server_address[1]
            self._servers.append(srv)
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                                 daemon=True, name=f"testweb-tls-{host}")
            t.start()
            self._threads.append(t)
        return self
