"""make bot-key and the key directory make bot-page writes beside the bot page."""

from __future__ import annotations

import json
import os
import re
from html import unescape
from pathlib import Path

import pytest

from polite_crawler.botkey import main as botkey_main
from polite_crawler.botkey import write_new_key
from polite_crawler.botpage import load_settings, render_bot_page
from polite_crawler.botpage import main as botpage_main
from polite_crawler.policy.signing import DIRECTORY_PATH, SigningError, load_keys
from tests.signing_verifier import keys_from_directory


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", html)))


def test_bot_key_mode_and_no_overwrite(tmp_path: Path, capsys) -> None:
    path = tmp_path / "secrets" / "bot-key.pem"
    old = os.umask(0o022)
    try:
        assert botkey_main([str(path)]) == 0
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    pem = path.read_bytes()
    out = capsys.readouterr().out
    assert "keyid " + load_keys([str(path)]).signing.thumbprint in out
    assert pem.decode().splitlines()[1] not in out
    assert botkey_main([str(path)]) == 1
    assert "refusing to overwrite" in capsys.readouterr().err
    assert path.read_bytes() == pem
    with pytest.raises(SigningError, match="refusing to overwrite"):
        write_new_key(str(path))


def test_bot_page_writes_the_directory(tmp_path: Path) -> None:
    new = str(tmp_path / "new.pem")
    old = str(tmp_path / "old.pem")
    write_new_key(new)
    write_new_key(old)
    ring = load_keys([new, old])
    out = tmp_path / "bot" / "index.html"
    botpage_main([str(out), "-s", f"POLITE_SIGNING_KEY={new},{old}",
                  "-s", "POLITE_BOT_URL=https://crawler.example.org/bot/"])
    directory = out.parent / DIRECTORY_PATH.lstrip("/")
    doc = json.loads(directory.read_text())
    assert [k["kid"] for k in doc["keys"]] == [k.thumbprint for k in ring.published]
    assert all("d" not in k for k in doc["keys"])  # public keys only
    assert set(keys_from_directory(directory.read_text())) == {k.thumbprint for k in ring.published}
    text = _text(out.read_text())
    assert f"keyid (the key's RFC 7638 thumbprint) {ring.signing.thumbprint}" in text
    assert ("https://crawler.example.org/.well-known/http-message-signatures-directory"
            in text)
    assert 'Signature-Agent header sig1="https://crawler.example.org"' in text
    assert f"also lists {ring.published[1].thumbprint} , a key being retired" in text
    assert 'tag="web-bot-auth"' in text and "RFC 9421 section 2.5" in text
    for path in (new, old):
        body = Path(path).read_text().splitlines()[1]
        assert body not in out.read_text() and body not in directory.read_text()


def test_bot_page_without_key_says_unsigned(tmp_path: Path) -> None:
    text = _text(render_bot_page(load_settings({})))
    assert "has not set up request signing" in text
    out = tmp_path / "index.html"
    botpage_main([str(out)])
    assert not (tmp_path / ".well-known").exists()


def test_bot_page_refuses_a_bad_key(tmp_path: Path) -> None:
    key = tmp_path / "k.pem"
    write_new_key(str(key))
    os.chmod(key, 0o644)
    with pytest.raises(SystemExit, match="readable by group or others"):
        botpage_main([str(tmp_path / "index.html"), "-s", f"POLITE_SIGNING_KEY={key}"])
