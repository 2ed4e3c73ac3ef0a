"""Web Bot Auth in real crawls: a server that verifies every request it receives.

The server rebuilds each request's RFC 9421 signature base from what it received
and checks it with the key from the directory file ``make bot-page`` wrote
(``tests.signing_verifier``, which shares no code with the crawler's signer).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa

from demo.web.server import Req, Resp, Site, page
from polite_crawler.botkey import write_new_key
from polite_crawler.botpage import main as botpage_main
from polite_crawler.middlewares.signing import SigningMiddleware
from polite_crawler.policy.signing import DIRECTORY_PATH, SigningError
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.signing_verifier import Outcome, keys_from_directory, verify_request

SCALE = 0.05
AGENT = "http://127.0.0.9:8443"  # where the directory would be served (loopback: http allowed)


class VerifyingSite(Site):
    """Verifies every request against the key directory file, then serves ``routes``."""

    def __init__(self, routes: dict[str, Any], directory: Path) -> None:
        super().__init__(routes)
        self.directory = directory
        self.outcomes: list[tuple[str, int, Outcome]] = []
        self._lock = threading.Lock()

    def handle(self, req: Req) -> Resp:
        keys = keys_from_directory(self.directory.read_text())
        out = verify_request(req.method, req.path, req.headers, keys, now=time.time())
        resp = super().handle(req)
        with self._lock:
            self.outcomes.append((req.path, resp.status, out))
        return resp


class _Flaky:
    """503 with Retry-After the first time, then the page."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, req: Req) -> Resp:
        self.calls += 1
        if self.calls == 1:
            return Resp(503, b"busy", headers={"Retry-After": "1"})
        return Resp(200, page("Flaky", "back again after a rest"))


def _routes(name: str) -> dict[str, Any]:
    return {
        "/robots.txt": "User-agent: *\nAllow: /\n",
        "/": page("Home", f"welcome to {name}", ["/a", "/old", "/flaky"]),
        "/a": page("A", f"alpha page of {name}"),
        "/old": lambda req: Resp(301, b"", headers={"Location": f"http://{req.host}:{req.port}/new"}),
        "/new": page("New", f"the moved page of {name}"),
        "/flaky": _Flaky(),
    }


def _setup(tmp_path: Path) -> tuple[str, Path]:
    """A key (make bot-key) and its directory (make bot-page) in tmp_path."""
    key = str(tmp_path / "secrets" / "bot-key.pem")
    write_new_key(key)
    assert os.stat(key).st_mode & 0o777 == 0o600
    botpage_main([str(tmp_path / "bot" / "index.html"), "-s", f"POLITE_SIGNING_KEY={key}",
                  "-s", f"POLITE_SIGNATURE_AGENT={AGENT}"])
    directory = tmp_path / "bot" / DIRECTORY_PATH.lstrip("/")
    assert directory.exists()
    return key, directory


def _settings(tmp_path: Path, key: str, directory: Path, **extra: Any) -> dict[str, Any]:
    return {
        "POLITE_STATE_DIR": str(tmp_path / "state"),
        "POLITE_TEST_WAIT_SCALE": SCALE,
        "POLITE_SIGNING_KEY": key,
        "POLITE_SIGNATURE_AGENT": AGENT,
        "POLITE_SIGNATURE_DIRECTORY": str(directory),
        "POLITE_ACCESS_LOG": str(tmp_path / "access.jsonl"),
        "POLITE_STATS_FILE": str(tmp_path / "stats.json"),
        "FEEDS": {str(tmp_path / "items.jsonl"): {"format": "jsonlines"}},
        "LOG_LEVEL": "DEBUG",
        **extra,
    }


def _secret_forms(key_path: str) -> list[bytes]:
    pem = Path(key_path).read_bytes()
    private = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(private, ed25519.Ed25519PrivateKey)
    raw = private.private_bytes(serialization.Encoding.Raw, serialization.PrivateFormat.Raw,
                                serialization.NoEncryption())
    body = b"".join(line for line in pem.splitlines() if not line.startswith(b"-----"))
    return [pem, body, raw, raw.hex().encode(), base64.b64encode(raw),
            base64.urlsafe_b64encode(raw).rstrip(b"=")]


@pytest_twisted.ensureDeferred
async def test_every_request_verifies(web_factory, tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    key, directory = _setup(tmp_path)
    one = VerifyingSite(_routes("one"), directory)
    routes = _routes("two")  # its robots.txt moved: the redirect hop is signed too
    routes["/robots.txt"] = lambda req: Resp(
        302, b"", headers={"Location": f"http://{req.host}:{req.port}/rules.txt"})
    routes["/rules.txt"] = Resp(200, b"User-agent: *\nAllow: /\n", content_type="text/plain")
    two = VerifyingSite(routes, directory)
    web = web_factory({"127.0.0.1": one, "127.0.0.2": two})
    result = await run_crawl(SiteSpider, _settings(tmp_path, key, directory),
                             url=f"{web.url('127.0.0.1')},{web.url('127.0.0.2')}")
    outcomes = one.outcomes + two.outcomes
    paths = [(p, s) for p, s, _ in outcomes]
    assert ("/robots.txt", 200) in [(p, s) for p, s, _ in one.outcomes]
    assert {("/robots.txt", 302), ("/rules.txt", 200)} <= {(p, s) for p, s, _ in two.outcomes}
    for site in (one, two):
        seen = [(p, s) for p, s, _ in site.outcomes]
        assert ("/old", 301) in seen and ("/new", 200) in seen  # the redirect's both hops
        assert ("/flaky", 503) in seen and ("/flaky", 200) in seen  # the retry after 503
        assert ("/a", 200) in seen
    failed = [(p, o.reason) for p, _, o in outcomes if not o.verified]
    assert failed == [], failed
    assert {o.agent for _, _, o in outcomes} == {AGENT}
    nonces = [o.nonce for _, _, o in outcomes]
    assert len(set(nonces)) == len(nonces)  # a retry is signed afresh
    stats = result.stats
    assert stats["polite/signing/signed"] == len(outcomes) == len(web.entries())
    assert len(paths) >= 14
    # The secret appears in no output of the crawl.
    outputs = {
        "log": caplog.text.encode(),
        "stats": json.dumps(stats, default=str).encode(),
        "stats file": (tmp_path / "stats.json").read_bytes(),
        "access log": (tmp_path / "access.jsonl").read_bytes(),
        "feed export": (tmp_path / "items.jsonl").read_bytes(),
        "bot page": (tmp_path / "bot" / "index.html").read_bytes(),
        "directory": directory.read_bytes(),
    }
    assert outputs["feed export"] and outputs["access log"] and outputs["log"]
    for form in _secret_forms(key):
        for name, data in outputs.items():
            assert form not in data, f"key material in the {name}"
    assert "Signing every request (Web Bot Auth)" in caplog.text


@pytest_twisted.ensureDeferred
async def test_without_a_key_nothing_is_signed(web_factory, tmp_path) -> None:
    web = web_factory({"127.0.0.1": Site(_routes("one"))})
    result = await run_crawl(SiteSpider, {"POLITE_STATE_DIR": str(tmp_path),
                                          "POLITE_TEST_WAIT_SCALE": SCALE},
                             url=web.url("127.0.0.1"))
    entries = web.entries()
    assert len(entries) >= 6
    for e in entries:
        assert not {"signature", "signature-input", "signature-agent"} & set(e.headers)
    assert "polite/signing/signed" not in result.stats
    mws = result.crawler.engine.downloader.middleware.middlewares  # type: ignore[union-attr]
    assert not any(isinstance(m, SigningMiddleware) for m in mws)


async def _refused(web_factory, settings: dict[str, Any], match: str) -> None:
    web = web_factory({"127.0.0.1": Site(_routes("one"))})
    with pytest.raises(SigningError, match=match) as err:
        await run_crawl(SiteSpider, settings, url=web.url("127.0.0.1"))
    assert web.entries() == []  # refused at start: nothing sent
    return err  # type: ignore[return-value]


@pytest_twisted.ensureDeferred
async def test_key_readable_by_others_refused_at_start(web_factory, tmp_path) -> None:
    key, directory = _setup(tmp_path)
    os.chmod(key, 0o644)
    err: Any = await _refused(web_factory, _settings(tmp_path, key, directory),
                              r"readable by group or others \(mode 0644\).*chmod 600")
    for form in _secret_forms(key):
        assert form not in str(err.value).encode()


@pytest_twisted.ensureDeferred
async def test_key_not_ed25519_refused_at_start(web_factory, tmp_path) -> None:
    key = tmp_path / "rsa.pem"
    key.write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    os.chmod(key, 0o600)
    await _refused(web_factory, _settings(tmp_path, str(key), tmp_path / "none"),
                   "holds an RSA key.*Ed25519")


@pytest_twisted.ensureDeferred
async def test_signature_agent_not_https_refused_at_start(web_factory, tmp_path) -> None:
    key, directory = _setup(tmp_path)
    await _refused(web_factory, _settings(tmp_path, key, directory,
                                          POLITE_SIGNATURE_AGENT="http://crawler.example.org"),
                   "is not https")


@pytest_twisted.ensureDeferred
async def test_key_missing_from_directory_refused_at_start(web_factory, tmp_path) -> None:
    _, directory = _setup(tmp_path)
    other = str(tmp_path / "secrets" / "other.pem")
    write_new_key(other)
    await _refused(web_factory, _settings(tmp_path, other, directory),
                   "is not in the key directory")
