"""An independent Web Bot Auth verifier for the tests (what a site or its CDN does).

It shares no code with :mod:`polite_crawler.policy.signing`: the fields are parsed
and re-serialised with ``http-sfv`` (RFC 9651), the signature base is rebuilt from
the request as the server received it (RFC 9421 section 2.5: the Host header for
``@authority``, the request line for ``@method`` and ``@path``), the key is found by
its RFC 7638 thumbprint computed here from the published JWK Set, and the signature
is checked with ``cryptography``'s Ed25519.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import http_sfv
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

if TYPE_CHECKING:
    from collections.abc import Mapping


@dataclass
class Outcome:
    verified: bool
    reason: str = ""
    agent: str = ""  # the Signature-Agent member the signature covers
    keyid: str = ""
    nonce: str = ""


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(jwk: Mapping[str, Any]) -> str:
    # RFC 7638 section 3: the required members in lexicographic order, no whitespace.
    text = f'{{"crv":"{jwk["crv"]}","kty":"{jwk["kty"]}","x":"{jwk["x"]}"}}'
    digest = hashlib.sha256(text.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def keys_from_directory(text: str) -> dict[str, Ed25519PublicKey]:
    """{thumbprint: public key} of a key directory (a JWK Set)."""
    out = {}
    for jwk in json.loads(text)["keys"]:
        assert "d" not in jwk, "the directory publishes a private key"
        if jwk.get("kty") == "OKP" and jwk.get("crv") == "Ed25519":
            tp = thumbprint(jwk)
            assert jwk.get("kid", tp) == tp, "kid is not the thumbprint"
            out[tp] = Ed25519PublicKey.from_public_bytes(_b64url_decode(jwk["x"]))
    return out


def verify_request(
    method: str, target: str, headers: Mapping[str, str],
    keys: Mapping[str, Ed25519PublicKey], now: float, *, skew: float = 5.0,
) -> Outcome:
    """Verify a received request (``headers`` lower-case, ``target`` from the request line)."""
    sig_input = headers.get("signature-input")
    sig_field = headers.get("signature")
    agent_field = headers.get("signature-agent")
    if not sig_input or not sig_field or not agent_field:
        return Outcome(False, "unsigned")
    inputs = http_sfv.Dictionary()
    sigs = http_sfv.Dictionary()
    agents = http_sfv.Dictionary()
    try:
        inputs.parse(sig_input.encode())
        sigs.parse(sig_field.encode())
        agents.parse(agent_field.encode())
    except ValueError:
        return Outcome(False, "unparsable")
    if len(inputs) != 1:
        return Outcome(False, "not-one-signature")
    label = next(iter(inputs))
    covered = inputs[label]
    params = covered.params
    if label not in sigs or label not in agents:
        return Outcome(False, "label-mismatch")
    if params.get("tag") != "web-bot-auth" or params.get("alg") != "ed25519":
        return Outcome(False, "not-web-bot-auth")
    for needed in ("created", "expires", "keyid", "nonce"):
        if needed not in params:
            return Outcome(False, f"no-{needed}")
    names = [(i.value, dict(i.params)) for i in covered]
    if ("@authority", {}) not in names or ("signature-agent", {"key": label}) not in names:
        return Outcome(False, "too-little-covered")
    if params["created"] > now + skew:
        return Outcome(False, "from-the-future")
    if params["expires"] <= now:
        return Outcome(False, "expired")
    key = keys.get(params["keyid"])
    if key is None:
        return Outcome(False, "unknown-key")
    lines = []
    for item in covered:
        name, iparams = item.value, dict(item.params)
        if name == "@method":
            value = method.upper()
        elif name == "@authority":
            value = headers.get("host", "").lower()
        elif name == "@path":
            value = target.split("?", 1)[0] or "/"
        elif "key" in iparams:
            field = http_sfv.Dictionary()
            field.parse(headers[name].encode())
            value = str(field[iparams["key"]])
        elif name.startswith("@"):
            return Outcome(False, f"unsupported-{name}")
        else:
            value = headers[name].strip()
        lines.append(f"{item}: {value}")
    lines.append(f'"@signature-params": {covered}')
    base = "\n".join(lines).encode()
    try:
        key.verify(sigs[label].value, base)
    except InvalidSignature:
        return Outcome(False, "bad-signature")
    return Outcome(True, "", str(agents[label].value), params["keyid"], params["nonce"])
