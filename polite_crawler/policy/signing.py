"""Web Bot Auth: every request signed with RFC 9421 HTTP Message Signatures.

A site (or its CDN) proves a request came from this crawler by checking its
signature against the public key the operator publishes in a key directory
(a JWK Set at ``<origin>/.well-known/http-message-signatures-directory``).
The header forms follow draft-meunier-webbotauth-httpsig-protocol (formerly
draft-meunier-web-bot-auth-architecture, with the directory of
draft-meunier-http-message-signatures-directory):

    Signature-Agent: sig1="https://crawler.example.org"
    Signature-Input: sig1=("@method" "@authority" "@path" "signature-agent";key="sig1")\
        ;created=...;keyid="<RFC 7638 thumbprint>";alg="ed25519";expires=...\
        ;nonce="...";tag="web-bot-auth"
    Signature: sig1=:<Ed25519 signature of the signature base>:

``Signature-Agent`` is a Dictionary whose member, keyed by the signature's
label, is the origin where the directory lives. The structured-field
serialisation here covers only what these three fields need (RFC 9651:
strings, integers, byte sequences, inner lists, parameters), and the signature
base is RFC 9421 section 2.5. The private key never leaves :class:`SigningKey`:
its repr, and every error raised here, name the key by its thumbprint and path.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from polite_crawler.policy.identity import is_loopback_host

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

TAG = "web-bot-auth"
ALG = "ed25519"
LABEL = "sig1"
DIRECTORY_PATH = "/.well-known/http-message-signatures-directory"
DIRECTORY_MEDIA_TYPE = "application/http-message-signatures-directory+json"
# What the signature covers: the draft's minimum (@authority and this label's
# Signature-Agent member) plus @method and @path, which it recommends so that a
# captured signature cannot be replayed against other resources of the site.
COMPONENTS: tuple[str, ...] = ("@method", "@authority", "@path", "signature-agent")
DEFAULT_TTL = 60  # seconds from created to expires
MAX_TTL = 24 * 3600

_KEY_RE = re.compile(r"^[a-z*][a-z0-9_.*-]*$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


class SigningError(ValueError):
    """Signing cannot be set up as configured (the message never holds key material)."""


# --- structured fields (RFC 9651), the parts these fields use ----------------------

def sf_string(value: str) -> str:
    """An sf-string (RFC 9651 section 4.1.6).

    >>> sf_string('say "hi"')
    '"say \\\\"hi\\\\""'
    """
    if any(not 0x20 <= ord(c) <= 0x7E for c in value):
        raise SigningError(f"not representable as a structured-field string: {value!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def sf_key(key: str) -> str:
    if not _KEY_RE.match(key):
        raise SigningError(f"not a structured-field key: {key!r}")
    return key


def sf_bare_item(value: str | int | bool | bytes) -> str:
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, int):
        if abs(value) >= 10**15:
            raise SigningError(f"integer out of the structured-field range: {value}")
        return str(value)
    if isinstance(value, bytes):
        return ":" + base64.b64encode(value).decode("ascii") + ":"
    return sf_string(value)


def sf_params(params: Iterable[tuple[str, str | int | bool | bytes]]) -> str:
    """``;key=value`` parameters; a true boolean is the bare key (RFC 9651 4.1.1.2).

    >>> sf_params([("created", 1), ("req", True), ("keyid", "k")])
    ';created=1;req;keyid="k"'
    """
    out = []
    for key, value in params:
        if value is True:
            out.append(f";{sf_key(key)}")
        else:
            out.append(f";{sf_key(key)}={sf_bare_item(value)}")
    return "".join(out)


def component_id(name: str, params: Iterable[tuple[str, str | int | bool | bytes]] = ()) -> str:
    """A component identifier as it appears in the signature base and Signature-Input.

    >>> component_id("signature-agent", [("key", "sig1")])
    '"signature-agent";key="sig1"'
    """
    return sf_string(name) + sf_params(params)


def signature_params(components: Sequence[str],
                     params: Iterable[tuple[str, str | int | bool | bytes]]) -> str:
    """The ``@signature-params`` value: an inner list of component ids, then parameters."""
    return "(" + " ".join(components) + ")" + sf_params(params)


def signature_base(components: Sequence[tuple[str, str]], params_value: str) -> str:
    """RFC 9421 section 2.5: one ``id: value`` line per component, then @signature-params.

    ``components`` holds (serialised component id, component value) pairs.
    """
    lines = []
    for cid, value in components:
        if "\n" in value or "\r" in value:
            raise SigningError(f"component {cid} has a line break in its value")
        lines.append(f"{cid}: {value}")
    lines.append(f'"@signature-params": {params_value}')
    return "\n".join(lines)


def field_value(values: Sequence[str]) -> str:
    """An HTTP field's component value: each line trimmed, repeats joined (RFC 9421 2.1)."""
    return ", ".join(v.strip(" \t") for v in values)


# --- derived components (RFC 9421 section 2.2) --------------------------------------

def authority_of(url: str) -> str:
    """``@authority``: host (lower case) and port, the scheme's default port left out.

    >>> authority_of("https://Example.COM:443/a?b"), authority_of("http://127.0.0.1:8080/")
    ('example.com', '127.0.0.1:8080')
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(parts.scheme.lower()):
        return host
    return f"{host}:{port}"


def path_of(url: str) -> str:
    """``@path``: the target URI's path, ``/`` when empty (RFC 9421 2.2.6).

    >>> path_of("https://example.com/foo?param=Value"), path_of("https://example.com")
    ('/foo', '/')
    """
    return urlsplit(url).path or "/"


def origin_of(url: str, *, setting: str = "POLITE_SIGNATURE_AGENT") -> str:
    """The ASCII serialisation of ``url``'s origin (RFC 6454 6.2), checked for signing.

    The key directory is served over https (the draft requires it); plain http
    is accepted for loopback hosts only (tests, the demo). A path other than
    ``/``, a query, a fragment or credentials are refused: a ``directory``
    member names an origin, nothing else.

    >>> origin_of("https://Crawler.Example.org/")
    'https://crawler.example.org'
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host:
        raise SigningError(f"{setting} {url!r} is not an https origin (https://host[:port])")
    if scheme != "https" and not is_loopback_host(host):
        raise SigningError(
            f"{setting} {url!r} is not https: sites fetch the key directory from it, and "
            "the Web Bot Auth drafts require https (plain http is accepted for loopback only)"
        )
    if parts.username or parts.password or parts.query or parts.fragment \
            or parts.path not in ("", "/"):
        raise SigningError(
            f"{setting} {url!r} must be an origin only (scheme://host[:port]); the key "
            f"directory is served at its {DIRECTORY_PATH}"
        )
    return f"{scheme}://{authority_of(url.strip())}"


# --- keys and the key directory (RFC 7517, RFC 7638, RFC 8037) ------------------------

def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key, as published in the key directory."""

    raw: bytes  # 32 bytes

    @property
    def x(self) -> str:
        return b64url(self.raw)

    @property
    def thumbprint(self) -> str:
        """RFC 7638 JWK SHA-256 thumbprint (members crv, kty, x; RFC 8037 appendix A.3)."""
        return jwk_thumbprint(self.x)

    def jwk(self) -> dict[str, str]:
        return {"kty": "OKP", "crv": "Ed25519", "x": self.x, "kid": self.thumbprint,
                "use": "sig"}

    def verify(self, signature: bytes, data: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except InvalidSignature:
            return False
        return True


def jwk_thumbprint(x: str) -> str:
    """The base64url SHA-256 thumbprint of an Ed25519 JWK (RFC 7638, RFC 8037 A.3).

    >>> jwk_thumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
    'kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k'
    """
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x},
                           separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode("ascii")).digest())


class SigningKey:
    """An Ed25519 private key. Its repr and str name its thumbprint, never its bytes."""

    __slots__ = ("_key", "path", "public")

    def __init__(self, key: Ed25519PrivateKey, path: str = "") -> None:
        self._key = key
        self.path = path
        self.public = PublicKey(key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw))

    @property
    def thumbprint(self) -> str:
        return self.public.thumbprint

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def __repr__(self) -> str:
        return f"<SigningKey ed25519 {self.thumbprint}>"

    __str__ = __repr__

    def __reduce__(self) -> Any:  # never pickled into a queue, a JOBDIR or a stats dump
        raise TypeError("a SigningKey is not serialisable")


def generate_key_pem() -> bytes:
    """A new Ed25519 private key as unencrypted PKCS#8 PEM (``make bot-key``)."""
    return Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())


def _kind_of(key: object) -> str:
    from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa

    kinds = ((rsa.RSAPrivateKey, "RSA"), (rsa.RSAPublicKey, "RSA"),
             (ec.EllipticCurvePrivateKey, "ECDSA"), (ec.EllipticCurvePublicKey, "ECDSA"),
             (dsa.DSAPrivateKey, "DSA"), (dsa.DSAPublicKey, "DSA"),
             (ed448.Ed448PrivateKey, "Ed448"), (ed448.Ed448PublicKey, "Ed448"))
    for cls, name in kinds:
        if isinstance(key, cls):
            return name
    return "unsupported"


def parse_key_pem(data: bytes, path: str) -> SigningKey | PublicKey:
    """A PEM private key (it signs) or public key (published only, during a rotation)."""
    if b"PUBLIC KEY-----" in data and b"PRIVATE KEY-----" not in data:
        try:
            public: Any = serialization.load_pem_public_key(data)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise SigningError(f"key file {path} is not a readable PEM public key") from None
        if not isinstance(public, Ed25519PublicKey):
            raise SigningError(
                f"key file {path} holds an {_kind_of(public)} public key; Web Bot Auth "
                "signing here uses Ed25519 keys only (make bot-key writes one)")
        return PublicKey(public.public_bytes(serialization.Encoding.Raw,
                                             serialization.PublicFormat.Raw))
    try:
        if b"-----BEGIN OPENSSH PRIVATE KEY-----" in data:  # ssh-keygen -t ed25519
            private: Any = serialization.load_ssh_private_key(data, password=None)
        else:
            private = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise SigningError(
            f"key file {path} is encrypted; the crawler needs an unencrypted PEM key, "
            "protected by its file mode (0600)") from None
    except (ValueError, UnsupportedAlgorithm):
        raise SigningError(f"key file {path} is not a readable PEM private key") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise SigningError(
            f"key file {path} holds an {_kind_of(private)} key; Web Bot Auth signing here "
            "uses Ed25519 keys only (make bot-key writes one)")
    return SigningKey(private, path)


def load_key_file(path: str) -> SigningKey | PublicKey:
    """Read a key file; a private key readable by group or others is refused."""
    try:
        with open(path, "rb") as fh:
            mode = os.fstat(fh.fileno()).st_mode
            data = fh.read(64 * 1024)
    except OSError as exc:
        raise SigningError(f"cannot read key file {path}: {exc.strerror}") from None
    if b"PRIVATE KEY-----" in data and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SigningError(
            f"key file {path} is readable by group or others (mode "
            f"{stat.S_IMODE(mode):04o}); a private key must be the crawler's alone: "
            f"chmod 600 {path}")
    return parse_key_pem(data, path)


@dataclass(frozen=True)
class KeyRing:
    """The signing key (the newest) and every key the directory publishes."""

    signing: SigningKey
    published: tuple[PublicKey, ...]


def load_keys(paths: Sequence[str]) -> KeyRing:
    """POLITE_SIGNING_KEY's files: the first signs; every one is published.

    Rotation: put the new key first and keep the previous one (its private key,
    or only its public half as a ``PUBLIC KEY`` PEM) after it until verifiers'
    copies of the directory have expired; then drop it.
    """
    if not paths:
        raise SigningError("POLITE_SIGNING_KEY names no key file")
    keys = [load_key_file(p) for p in paths]
    first = keys[0]
    if not isinstance(first, SigningKey):
        raise SigningError(
            f"POLITE_SIGNING_KEY's first file ({paths[0]}) must be a private key: it is the "
            "newest key, the one that signs; public keys may follow it (published only)")
    published: list[PublicKey] = []
    for key in keys:
        public = key.public if isinstance(key, SigningKey) else key
        if public not in published:
            published.append(public)
    return KeyRing(first, tuple(published))


def directory_json(keys: Iterable[PublicKey]) -> str:
    """The key directory: a JWK Set of public keys, ``kid`` their thumbprints."""
    return json.dumps({"keys": [k.jwk() for k in keys]}, indent=2) + "\n"


def directory_thumbprints(text: str, path: str) -> list[str]:
    """The thumbprints of the Ed25519 keys a key directory lists (checked, not trusted)."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise SigningError(f"key directory {path} is not JSON") from None
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list):
        raise SigningError(f"key directory {path} is not a JWK Set (no \"keys\" list)")
    out = []
    for jwk in keys:
        if not isinstance(jwk, dict):
            raise SigningError(f"key directory {path} holds an entry that is not a JWK")
        if "d" in jwk:
            raise SigningError(
                f"key directory {path} publishes a private key (a JWK with \"d\"); "
                "remove it, regenerate the directory with make bot-page, and rotate that key")
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519" \
                and isinstance(jwk.get("x"), str):
            out.append(jwk_thumbprint(jwk["x"]))
    return out


def check_directory(ring: KeyRing, text: str, path: str) -> None:
    """Refuse a signing key that the published key directory does not list."""
    listed = directory_thumbprints(text, path)
    if ring.signing.thumbprint not in listed:
        raise SigningError(
            f"the signing key {ring.signing.path} (thumbprint {ring.signing.thumbprint}) "
            f"is not in the key directory {path} (it lists "
            f"{', '.join(listed) or 'no Ed25519 key'}): sites could not verify any "
            "request. Run make bot-page with the same POLITE_SIGNING_KEY and publish "
            "the directory again")


# --- signing ---------------------------------------------------------------------------

def new_nonce() -> str:
    return base64.b64encode(os.urandom(32)).decode("ascii")


class RequestSigner:
    """Signs requests for one key and one Signature-Agent (RFC 9421 section 3.1).

    Everything that does not change between requests is serialised once.
    """

    def __init__(
        self,
        key: SigningKey,
        agent: str,
        *,
        ttl: int = DEFAULT_TTL,
        label: str = LABEL,
        agent_key: str | None = None,
        components: Sequence[str] = COMPONENTS,
        nonce: Callable[[], str] = new_nonce,
    ) -> None:
        if not 0 < ttl <= MAX_TTL:
            # RFC 9421 leaves it open; the drafts recommend at most 24 h, and a short life
            # bounds how long a captured signature can be replayed.
            raise SigningError(
                f"POLITE_SIGNATURE_TTL must be between 1 and {MAX_TTL} s, not {ttl}")
        self.key = key
        self.agent = agent
        self.ttl = int(ttl)
        self.label = sf_key(label)
        member = sf_key(agent_key or label)
        self.agent_header = f"{member}={sf_string(agent)}"
        self._agent_value = sf_string(agent)
        self._nonce = nonce
        self._components: list[tuple[str, str]] = []
        for name in components:
            if name == "signature-agent":
                self._components.append((component_id(name, [("key", member)]), ""))
            elif name in ("@method", "@authority", "@path", "@target-uri", "@scheme"):
                self._components.append((component_id(name), name))
            else:
                raise SigningError(f"cannot cover component {name!r}")
        self._ids = " ".join(cid for cid, _ in self._components)
        self._keyid = sf_string(key.thumbprint)

    def params_value(self, created: int, expires: int, nonce: str) -> str:
        # The parameter order of the draft's test vectors.
        return (f"({self._ids});created={created};keyid={self._keyid};alg=\"{ALG}\""
                f";expires={expires};nonce={sf_string(nonce)};tag=\"{TAG}\"")

    def base(self, method: str, url: str, created: int, expires: int, nonce: str, *,
             authority: str | None = None) -> tuple[str, str]:
        """(signature base, @signature-params value) for one request."""
        lines = []
        for cid, name in self._components:
            if name == "":
                value = self._agent_value
            elif name == "@method":
                value = method.upper()
            elif name == "@authority":
                value = authority if authority is not None else authority_of(url)
            elif name == "@path":
                value = path_of(url)
            elif name == "@scheme":
                value = urlsplit(url).scheme.lower()
            else:
                value = url
            lines.append(f"{cid}: {value}")
        params = self.params_value(created, expires, nonce)
        lines.append(f'"@signature-params": {params}')
        return "\n".join(lines), params

    def headers(self, method: str, url: str, now: float, *, authority: str | None = None,
                nonce: str | None = None, expires: int | None = None) -> dict[str, str]:
        """The three fields that sign a request sent now: Signature-Agent, -Input, Signature.

        ``nonce`` and ``expires`` are for test vectors; by default a fresh nonce, and
        ``now`` plus the signer's lifetime.
        """
        created = int(now)
        base, params = self.base(method, url, created,
                                 expires if expires is not None else created + self.ttl,
                                 nonce if nonce is not None else self._nonce(),
                                 authority=authority)
        signature = base64.b64encode(self.key.sign(base.encode("ascii"))).decode("ascii")
        return {
            "Signature-Agent": self.agent_header,
            "Signature-Input": f"{self.label}={params}",
            "Signature": f"{self.label}=:{signature}:",
        }


def signer_from_settings(
    key_paths: Sequence[str], agent: str, bot_url: str, *, ttl: int = DEFAULT_TTL,
    directory: tuple[str, str] | None = None,
) -> tuple[RequestSigner, KeyRing]:
    """Check the signing settings and build the signer, or raise :class:`SigningError`.

    ``agent`` is POLITE_SIGNATURE_AGENT (empty: the origin of ``bot_url``);
    ``directory`` the (path, text) of the key directory file when it exists.
    """
    ring = load_keys(key_paths)
    if agent:
        origin = origin_of(agent)
    else:
        parts = urlsplit(bot_url)
        try:
            origin = origin_of(f"{parts.scheme}://{parts.netloc}",
                               setting="POLITE_SIGNATURE_AGENT (the origin of POLITE_BOT_URL "
                                       "by default)")
        except SigningError as exc:
            raise SigningError(
                f"{exc}; set POLITE_SIGNATURE_AGENT to the https origin that serves the key "
                "directory") from None
    if directory is not None:
        check_directory(ring, directory[1], directory[0])
    return RequestSigner(ring.signing, origin, ttl=ttl), ring


def parse_key_paths(value: str | Sequence[str] | None) -> list[str]:
    """POLITE_SIGNING_KEY as a list: one path, or several separated by commas.

    >>> parse_key_paths("new.pem, old.pub.pem"), parse_key_paths("")
    (['new.pem', 'old.pub.pem'], [])
    """
    if not value:
        return []
    items = value.split(",") if isinstance(value, str) else [str(v) for v in value]
    return [p.strip() for p in items if p and p.strip()]


def describe(ring: KeyRing, agent: str) -> Mapping[str, str]:
    """What is safe to show about the signing setup (logs, bot page): no key material."""
    return {"keyid": ring.signing.thumbprint, "agent": agent,
            "directory": agent.rstrip("/") + DIRECTORY_PATH}
