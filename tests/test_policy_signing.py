"""Web Bot Auth signing rules: RFC 9421 and the draft's test vectors, keys, directory."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given, settings
from hypothesis import strategies as st

from polite_crawler.policy import signing
from polite_crawler.policy.signing import (
    PublicKey,
    RequestSigner,
    SigningError,
    SigningKey,
    authority_of,
    component_id,
    field_value,
    load_key_file,
    load_keys,
    origin_of,
    parse_key_pem,
    path_of,
    signature_base,
    signature_params,
)
from tests.signing_verifier import keys_from_directory, verify_request

DATA = Path(__file__).parent / "data" / "signing"
RFC = json.loads((DATA / "rfc9421_b26_ed25519.json").read_text())
WBA = json.loads((DATA / "webbotauth_ed25519.json").read_text())


def _rfc_key() -> SigningKey:
    key = parse_key_pem(RFC["private_key_pem"].encode(), "rfc9421-test-key")
    assert isinstance(key, SigningKey)
    return key


def _write_key(path: Path, data: bytes, mode: int = 0o600) -> str:
    path.write_bytes(data)
    os.chmod(path, mode)
    return str(path)


def test_rfc9421_b26_signature_base_and_signature() -> None:
    """RFC 9421 B.2.6: the base rebuilt from the test request, signed: the RFC's bytes."""
    req = RFC["request"]
    headers: dict[str, list[str]] = {}
    for name, value in req["headers"]:
        headers.setdefault(name.lower(), []).append(value)
    values = []
    for name in RFC["components"]:
        if name == "@method":
            value = req["method"].upper()
        elif name == "@path":
            value = path_of(req["url"])
        elif name == "@authority":
            value = authority_of(req["url"])
        else:
            value = field_value(headers[name])
        values.append((component_id(name), value))
    params = signature_params([cid for cid, _ in values], RFC["params"])
    base = signature_base(values, params)
    assert base == RFC["signature_base"]
    assert f'{RFC["label"]}={params}' == RFC["signature_input"]
    key = _rfc_key()
    sig = base64.b64encode(key.sign(base.encode())).decode()
    assert f'{RFC["label"]}=:{sig}:' == RFC["signature"]  # Ed25519 is deterministic
    public = parse_key_pem(RFC["public_key_pem"].encode(), "rfc9421-test-key.pub")
    assert public == key.public
    assert key.public.verify(base64.b64decode(sig), base.encode())
    assert not key.public.verify(base64.b64decode(sig), base.encode().replace(b"/foo", b"/fop"))


def test_webbotauth_draft_vector() -> None:
    """The draft's Ed25519 vector: Signature-Agent dictionary, keyid thumbprint, tag."""
    key = _rfc_key()
    assert key.thumbprint == WBA["thumbprint"]
    signer = RequestSigner(key, WBA["signature_agent_origin"], label=WBA["label"],
                           agent_key=WBA["agent_key"],
                           components=("@authority", "signature-agent"))
    base, _ = signer.base("GET", f"https://{WBA['authority']}/", WBA["created"],
                          WBA["expires"], WBA["nonce"])
    assert base == WBA["signature_base"]
    got = signer.headers("GET", f"https://{WBA['authority']}/", WBA["created"],
                         nonce=WBA["nonce"], expires=WBA["expires"])
    assert got == {"Signature-Agent": WBA["signature_agent"],
                   "Signature-Input": WBA["signature_input"],
                   "Signature": WBA["signature"]}


def test_thumbprint_rfc8037() -> None:
    # RFC 8037 appendix A.3
    assert signing.jwk_thumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo") \
        == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_signed_headers_verify_independently() -> None:
    key = _rfc_key()
    signer = RequestSigner(key, "https://crawler.example.org", ttl=60)
    url = "https://news.example.com:8443/a/b;x?q=1"
    hdrs = signer.headers("GET", url, 1_800_000_000.7)
    assert hdrs["Signature-Agent"] == 'sig1="https://crawler.example.org"'
    assert hdrs["Signature-Input"].startswith(
        'sig1=("@method" "@authority" "@path" "signature-agent";key="sig1");created=1800000000;'
        f'keyid="{key.thumbprint}";alg="ed25519";expires=1800000060;nonce="')
    assert hdrs["Signature-Input"].endswith(';tag="web-bot-auth"')
    received = {"host": "news.example.com:8443", **{k.lower(): v for k, v in hdrs.items()}}
    directory = keys_from_directory(signing.directory_json([key.public]))
    ok = verify_request("GET", "/a/b;x?q=1", received, directory, now=1_800_000_010)
    assert ok.verified, ok.reason
    # Two requests never share a nonce.
    assert signer.headers("GET", url, 1)["Signature-Input"] != \
        signer.headers("GET", url, 1)["Signature-Input"]


@pytest.mark.parametrize(("field", "value"), [
    ("signature-agent", 'sig1="https://evil.example"'),
    ("host", "other.example.com:8443"),
    ("host", "news.example.com"),
])
def test_tampered_request_fails(field: str, value: str) -> None:
    key = _rfc_key()
    signer = RequestSigner(key, "https://crawler.example.org")
    hdrs = signer.headers("GET", "https://news.example.com:8443/a", 1_800_000_000)
    received = {"host": "news.example.com:8443", **{k.lower(): v for k, v in hdrs.items()}}
    directory = keys_from_directory(signing.directory_json([key.public]))
    assert verify_request("GET", "/a", received, directory, now=1_800_000_001).verified
    received[field] = value
    out = verify_request("GET", "/a", received, directory, now=1_800_000_001)
    assert not out.verified
    assert out.reason == "bad-signature"


def test_other_path_method_or_expiry_fails() -> None:
    key = _rfc_key()
    signer = RequestSigner(key, "https://crawler.example.org", ttl=60)
    hdrs = signer.headers("GET", "https://e.example/a", 1_800_000_000)
    received = {"host": "e.example", **{k.lower(): v for k, v in hdrs.items()}}
    directory = keys_from_directory(signing.directory_json([key.public]))
    assert not verify_request("GET", "/b", received, directory, now=1_800_000_001).verified
    assert not verify_request("POST", "/a", received, directory, now=1_800_000_001).verified
    late = verify_request("GET", "/a", received, directory, now=1_800_000_061)
    assert (late.verified, late.reason) == (False, "expired")
    assert verify_request("GET", "/a", received, {}, now=1_800_000_001).reason == "unknown-key"


def test_origin_checks() -> None:
    assert origin_of("https://crawler.example.org") == "https://crawler.example.org"
    assert origin_of("https://crawler.example.org:443/") == "https://crawler.example.org"
    assert origin_of("http://127.0.0.1:8900/") == "http://127.0.0.1:8900"
    for bad in ("http://crawler.example.org", "ftp://x.example", "https://x.example/bot/",
                "https://x.example/?a", "https://u:p@x.example", "crawler.example.org"):
        with pytest.raises(SigningError):
            origin_of(bad)


def test_key_file_mode_refused(tmp_path: Path) -> None:
    pem = signing.generate_key_pem()
    path = _write_key(tmp_path / "k.pem", pem, 0o640)
    with pytest.raises(SigningError, match=r"readable by group or others \(mode 0640\)") as err:
        load_key_file(path)
    assert pem.decode() not in str(err.value)
    os.chmod(path, 0o600)
    assert isinstance(load_key_file(path), SigningKey)


def test_not_ed25519_refused(tmp_path: Path) -> None:
    ec_pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    path = _write_key(tmp_path / "ec.pem", ec_pem)
    with pytest.raises(SigningError, match=r"ECDSA key.*Ed25519") as err:
        load_key_file(path)
    assert "PRIVATE" not in str(err.value)
    garbage = _write_key(tmp_path / "g.pem", b"-----BEGIN PRIVATE KEY-----\nAAAA\n"
                                          b"-----END PRIVATE KEY-----\n")
    with pytest.raises(SigningError, match="not a readable PEM private key") as err2:
        load_key_file(garbage)
    assert "AAAA" not in str(err2.value)
    with pytest.raises(SigningError, match="cannot read"):
        load_key_file(str(tmp_path / "missing.pem"))


def test_rotation_first_signs_all_published(tmp_path: Path) -> None:
    new = _write_key(tmp_path / "new.pem", signing.generate_key_pem())
    old_key = load_key_file(_write_key(tmp_path / "old.pem", signing.generate_key_pem()))
    assert isinstance(old_key, SigningKey)
    old_pub = tmp_path / "old.pub.pem"
    old_pub.write_text(RFC["public_key_pem"])
    os.chmod(old_pub, 0o644)  # a public key may be world-readable
    ring = load_keys([new, str(old_pub)])
    assert ring.signing.path == new
    assert [k.thumbprint for k in ring.published] == [ring.signing.thumbprint, WBA["thumbprint"]]
    with pytest.raises(SigningError, match="must be a private key"):
        load_keys([str(old_pub), new])
    doc = json.loads(signing.directory_json(ring.published))
    assert [k["kid"] for k in doc["keys"]] == [k.thumbprint for k in ring.published]
    assert all(set(k) == {"kty", "crv", "x", "kid", "use"} for k in doc["keys"])


def test_directory_mismatch_refused(tmp_path: Path) -> None:
    ring = load_keys([_write_key(tmp_path / "k.pem", signing.generate_key_pem())])
    other = PublicKey(_rfc_key().public.raw)
    with pytest.raises(SigningError, match="is not in the key directory"):
        signing.check_directory(ring, signing.directory_json([other]), "dir.json")
    signing.check_directory(ring, signing.directory_json([other, ring.signing.public]), "d")
    leaked = {"keys": [{**ring.signing.public.jwk(), "d": "secret"}]}
    with pytest.raises(SigningError, match="publishes a private key") as err:
        signing.check_directory(ring, json.dumps(leaked), "d")
    assert "secret" not in str(err.value)


def test_signing_key_never_shows_its_bytes() -> None:
    key = _rfc_key()
    assert repr(key) == f"<SigningKey ed25519 {WBA['thumbprint']}>"
    with pytest.raises(TypeError):
        import pickle

        pickle.dumps(key)


def test_signer_from_settings_defaults_to_bot_url_origin(tmp_path: Path) -> None:
    path = _write_key(tmp_path / "k.pem", signing.generate_key_pem())
    signer, _ = signing.signer_from_settings([path], "", "https://crawler.example.org/bot/")
    assert signer.agent == "https://crawler.example.org"
    with pytest.raises(SigningError, match="not https"):
        signing.signer_from_settings([path], "", "http://crawler.example.org/bot/")
    with pytest.raises(SigningError, match="not https"):
        signing.signer_from_settings([path], "http://crawler.example.org", "")


def test_encrypted_and_openssh_keys(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    encrypted = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"))
    with pytest.raises(SigningError, match="is encrypted"):
        load_key_file(_write_key(tmp_path / "enc.pem", encrypted))
    openssh = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption())
    with pytest.raises(SigningError, match="readable by group or others"):
        load_key_file(_write_key(tmp_path / "id_ed25519", openssh, 0o604))
    key = load_key_file(_write_key(tmp_path / "id_ed25519", openssh))
    assert isinstance(key, SigningKey)
    assert key.public.raw == private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@pytest.mark.parametrize("ttl", [0, -5, 24 * 3600 + 1])
def test_signature_lifetime_bounded(ttl: int) -> None:
    with pytest.raises(SigningError, match="POLITE_SIGNATURE_TTL"):
        RequestSigner(_rfc_key(), "https://crawler.example.org", ttl=ttl)


_SEGMENT = st.text(alphabet="abcXYZ019-._~%!$&'()*+,;=:@", min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(scheme=st.sampled_from(["http", "https"]),
       host=st.sampled_from(["example.com", "news.example.org", "127.0.0.1", "[::1]"]),
       port=st.one_of(st.none(), st.integers(1, 65535)),
       segments=st.lists(_SEGMENT, max_size=5),
       query=st.one_of(st.none(), _SEGMENT),
       method=st.sampled_from(["GET", "HEAD", "POST"]))
def test_any_request_verifies(scheme: str, host: str, port: int | None, segments: list[str],
                              query: str | None, method: str) -> None:
    """Whatever the URL, the independent verifier accepts what the signer made."""
    key = _rfc_key()
    signer = RequestSigner(key, "https://crawler.example.org")
    netloc = host if port is None else f"{host}:{port}"
    path = "/" + "/".join(segments)
    target = path if query is None else f"{path}?{query}"
    hdrs = signer.headers(method, f"{scheme}://{netloc}{target}", 1_800_000_000)
    default = {"http": 80, "https": 443}[scheme]
    sent_host = host if port in (None, default) else netloc  # as an HTTP client writes Host
    received = {"host": sent_host, **{k.lower(): v for k, v in hdrs.items()}}
    directory = keys_from_directory(signing.directory_json([key.public]))
    out = verify_request(method, target, received, directory, now=1_800_000_001)
    assert out.verified, out.reason
