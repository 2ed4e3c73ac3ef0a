"""``make bot-key``: a new Ed25519 signing key for Web Bot Auth (mode 0600, never overwritten).

``python -m polite_crawler.botkey [PATH]`` (default ``secrets/bot-key.pem``) writes
an unencrypted PKCS#8 PEM that only its owner may read, and refuses when PATH
exists: overwriting would lose the key the published directory names. It prints
the key's thumbprint (the ``keyid`` of every signature), never the key.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from polite_crawler.policy.signing import SigningError, generate_key_pem, load_key_file

DEFAULT_PATH = "secrets/bot-key.pem"


def write_new_key(path: str) -> str:
    """Create ``path`` with a new key (0600; the directory 0700 if new); its thumbprint."""
    target = Path(path)
    if target.exists() or target.is_symlink():
        raise SigningError(f"{path} exists; refusing to overwrite a signing key "
                           "(choose another path for a new key, e.g. for a rotation)")
    if not target.parent.exists():
        target.parent.mkdir(mode=0o700, parents=True)
    pem = generate_key_pem()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, pem)
    finally:
        os.close(fd)
    key = load_key_file(str(target))
    return key.thumbprint


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m polite_crawler.botkey",
                                     description="Generate an Ed25519 key for signing requests.")
    parser.add_argument("path", nargs="?", default=DEFAULT_PATH,
                        help=f"where to write the key (default {DEFAULT_PATH})")
    args = parser.parse_args(argv)
    try:
        thumbprint = write_new_key(args.path)
    except (SigningError, OSError) as exc:
        print(f"bot-key: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.path} (mode 0600), keyid {thumbprint}\n"
          f"Next: set POLITE_SIGNING_KEY = {args.path!r} in the settings, run make bot-page, "
          "and publish bot_page/.well-known/http-message-signatures-directory at the "
          "POLITE_SIGNATURE_AGENT origin.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
