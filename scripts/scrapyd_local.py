"""Start a local scrapyd with the project's configuration (``make scrapyd``).

``python scripts/scrapyd_local.py [--root DIR] [--port N]`` reads
``DIR/scrapyd.conf`` (default: the current directory), creates the directories
it names, exports the shared state directory to every job and replaces itself
with ``python -m scrapyd`` running in ``DIR`` (scrapyd and its job processes
find their configuration as ``./scrapyd.conf``).

It refuses to start when:

* the bind address is not loopback: this is a local scrapyd; put a reverse
  proxy with TLS in front of it to reach it from elsewhere;
* only one of the username and the password is set (scrapyd would silently
  run without authentication). Set both as SCRAPYD_USERNAME and
  SCRAPYD_PASSWORD (or in the file) and scrapyd requires them on every call.

Every job gets ``POLITE_STATE_DIR`` (environment) as an absolute path: the
``[polite_crawler] state_dir`` option, unless the environment already sets it.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from configparser import ConfigParser
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

CONF_NAME = "scrapyd.conf"
_DIR_OPTIONS = ("eggs_dir", "dbs_dir", "logs_dir", "jobs_dir")


class ConfigError(Exception):
    """The scrapyd configuration would not give a local, protected scrapyd."""


def _is_loopback(address: str) -> bool:
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def prepare(
    root: Path, environ: dict[str, str], port: int | None = None
) -> tuple[dict[str, str], bool]:
    """Check ``root/scrapyd.conf`` and create its directories.

    Return scrapyd's environment and whether it will require authentication.
    """
    conf_path = root / CONF_NAME
    if not conf_path.is_file():
        raise ConfigError(f"{conf_path}: no such file")
    cp = ConfigParser()
    cp.read(conf_path, encoding="utf-8")

    def option(name: str, section: str = "scrapyd") -> str:
        return cp.get(section, name, fallback="").strip()

    env = dict(environ)
    # scrapyd gives these environment variables precedence over the file.
    bind = env.get("SCRAPYD_BIND_ADDRESS") or option("bind_address") or "127.0.0.1"
    if not _is_loopback(bind):
        raise ConfigError(f"bind_address {bind!r} is not loopback; this scrapyd is local only")
    if env.get("SCRAPYD_UNIX_SOCKET_PATH") or option("unix_socket_path"):
        raise ConfigError("unix_socket_path is not supported here; use the loopback port")
    username = env.get("SCRAPYD_USERNAME") or option("username")
    password = env.get("SCRAPYD_PASSWORD") or option("password")
    if bool(username) != bool(password):
        raise ConfigError(
            "set both SCRAPYD_USERNAME and SCRAPYD_PASSWORD, or neither "
            "(with only one, scrapyd runs without authentication)"
        )
    if port is not None:
        env["SCRAPYD_HTTP_PORT"] = str(port)

    for name in _DIR_OPTIONS:
        value = option(name)
        if value:
            (root / value).mkdir(parents=True, exist_ok=True)
    items = option("items_dir")
    if items and "://" not in items:
        (root / items).mkdir(parents=True, exist_ok=True)

    state = env.get("POLITE_STATE_DIR") or option("state_dir", "polite_crawler")
    if not state:
        raise ConfigError(
            "no shared state directory: set [polite_crawler] state_dir or POLITE_STATE_DIR "
            "(jobs coordinate their politeness through it)"
        )
    state_path = (root / Path(state).expanduser()).resolve()
    state_path.mkdir(parents=True, exist_ok=True)
    env["POLITE_STATE_DIR"] = str(state_path)
    return env, bool(username)


def command(extra: Sequence[str] = ()) -> list[str]:
    # No pidfile: twistd would otherwise write ./twistd.pid into the project.
    return [sys.executable, "-m", "scrapyd", "--pidfile=", *extra]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python scripts/scrapyd_local.py",
                                     description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--root", default=".", help="directory holding scrapyd.conf")
    parser.add_argument("--port", type=int, default=None, help="override http_port")
    args, extra = parser.parse_known_args(argv)
    root = Path(args.root).resolve()
    try:
        env, auth = prepare(root, dict(os.environ), args.port)
    except ConfigError as exc:
        print(f"scrapyd_local: {exc}", file=sys.stderr)
        return 2
    print(f"scrapyd_local: root {root}, POLITE_STATE_DIR {env['POLITE_STATE_DIR']}, "
          f"authentication {'required' if auth else 'off'}", file=sys.stderr)
    os.chdir(root)
    argv_ = command(extra)
    os.execve(argv_[0], argv_, env)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
