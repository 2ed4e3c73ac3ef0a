"""A throwaway redis-server on loopback for the Redis frontier's tests.

Debian's ``redis-server`` (``make system-deps`` installs it), started on 127.0.0.1 on a
port the OS picked, in a private directory, with AOF persistence there (so a test can
restart it and find its data) and no RDB snapshots; stopped by its PID. ``conf`` starts it
with a config file instead (the production one, ``deploy/redis/redis.conf``: AOF with
``appendfsync everysec``), its address, directory and log still the test's own;
``kill()`` stops it with SIGKILL (what the last second wrote may be lost). Tests that need
it skip with the reason when the binary or the ``redis`` client is absent (fail under
CI=true: tests/services.py).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.services import unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found is None and Path("/usr/bin/redis-server").exists():
        found = "/usr/bin/redis-server"
    return found


class RedisServer:
    def __init__(self, binary: str, *, aof: bool = True, conf: Path | None = None) -> None:
        self.binary = binary
        self.aof = aof
        self.conf = conf
        self.dir = Path(tempfile.mkdtemp(prefix="polite-redis-"))
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        # Options after the config file override it: the address, directory and log.
        cmd = [self.binary, *([str(self.conf)] if self.conf is not None else []),
               "--bind", "127.0.0.1", "--port", str(self.port),
               "--dir", str(self.dir), "--save", "", "--daemonize", "no",
               "--protected-mode", "yes", "--logfile", str(self.dir / "log")]
        if self.aof and self.conf is None:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.dir / "log").read_text(errors="replace") if (
                    self.dir / "log").exists() else ""
                raise RuntimeError(f"redis-server exited: {log[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(64).startswith(b"+PONG"):
                        return self
            except OSError:
                pass
            time.sleep(0.02)
        self.stop_process()
        raise RuntimeError("redis-server did not answer in time")

    def stop_process(self) -> None:
        """Stop this server by its PID (SIGTERM, then SIGKILL); its directory stays."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL by its PID: no shutdown, the AOF as the last fsync left it."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait(timeout=10)

    def restart(self) -> None:
        """Stop and start again on the same port and directory (the AOF is replayed)."""
        self.stop_process()
        self.start()

    def stop(self) -> None:
        try:
            self.stop_process()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def client(self) -> Any:
        import redis

        return redis.Redis.from_url(self.url)


PRODUCTION_CONF = Path(__file__).resolve().parent.parent / "deploy" / "redis" / "redis.conf"


def _serve(conf: Path | None = None) -> Iterator[RedisServer]:
    binary = redis_binary()
    if binary is None:
        unavailable("redis-server not installed (make system-deps)")
    try:
        import redis  # noqa: F401
    except ImportError:
        unavailable("the redis client is not installed (extra 'redis')")
    server = RedisServer(binary, conf=conf).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_server_session() -> Iterator[RedisServer]:
    yield from _serve()


@pytest.fixture
def redis_url(redis_server_session: RedisServer) -> str:
    """The session's server, emptied for this test."""
    redis_server_session.client().flushall()
    return redis_server_session.url


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A server of this test's own (for tests that restart or kill it)."""
    yield from _serve()


@pytest.fixture
def redis_production() -> Iterator[RedisServer]:
    """A server of this test's own with deploy/redis/redis.conf (appendfsync everysec)."""
    yield from _serve(PRODUCTION_CONF)
