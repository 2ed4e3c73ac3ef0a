"""A throwaway PostgreSQL server on loopback for the page-store tests.

Started once per test session with the Debian binaries
(/usr/lib/postgresql/*/bin: initdb, pg_ctl) in a private directory, as the
``postgres`` user when the tests run as root; stopped and deleted at the end.
Tests that need it skip with the reason when the binaries are absent
(``make system-deps`` installs them; under CI=true they fail: tests/services.py).
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.services import unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self, bin_dir: Path) -> None:
        self.bin = bin_dir
        self.root = os.geteuid() == 0
        # Not under pytest's tmp_path: its parent is private to root, and the server
        # must not run as root.
        self.dir = Path(tempfile.mkdtemp(prefix="polite-pg-"))
        self.data = self.dir / "data"
        self.port = _free_port()
        self._names = itertools.count()

    def _run(self, *args: str) -> None:
        cmd = [str(a) for a in args]
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if self.root:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run(self.bin / "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync", "--locale=C")
        self.resume()
        return self

    def resume(self) -> None:
        """Start the server (again) on its port and data directory."""
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} "
                "-c fsync=off -c full_page_writes=off")
        self._run(self.bin / "pg_ctl", "-D", str(self.data), "-o", opts, "-l",
                  str(self.dir / "log"), "-w", "-t", "60", "start")

    def halt(self) -> None:
        """Stop the server (fast: its sessions are cut), its data kept for resume()."""
        self._run(self.bin / "pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def stop(self) -> None:
        try:
            self._run(self.bin / "pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass  # already stopped (halt)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def uri(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        import psycopg

        name = f"t{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.uri(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
        return self.uri(name)


def _serve() -> Iterator[PostgresServer]:
    bin_dir = _bin_dir()
    if bin_dir is None:
        unavailable("PostgreSQL server binaries not installed (make system-deps)")
    server = PostgresServer(bin_dir).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    yield from _serve()


@pytest.fixture
def pg_own() -> Iterator[PostgresServer]:
    """A server of this test's own (for tests that stop and restart it)."""
    yield from _serve()


@pytest.fixture
def pg_uri(pg_server: PostgresServer) -> str:
    """A fresh, empty database on the session's server."""
    return pg_server.new_database()
