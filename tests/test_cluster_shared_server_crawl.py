"""Two cluster workers on one small shared server: real worker processes, a real
redis-server and PostgreSQL, six name-based sites on one loopback address (the
resolver's injected lookup, demo.names), a server of one worker slot, 120 ms a page,
whose latency grows as our requests queue. Judged from the server's own count: the
workers together press it as one process does (one request at a time: a server this
slow is never probed past the limit it has proven, policy.servers.probe_worth), and
every site is crawled whole."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

import pytest

from demo.names import write_table
from demo.web.server import TestWeb
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)
from tests.test_redis_frontier import ROOT, wait_for, worker_cmd
from tests.test_server_bound_crawl import ADDRESS, PAGES, SharedHost

if TYPE_CHECKING:
    from pathlib import Path

# ruff: noqa: F811

NAMES = [f"s{i:02d}.test" for i in range(6)]
SERVICE = 0.12  # seconds a page: above policy.servers' probe latency (100 ms)


class _Names:
    """What worker_cmd reads of a web: the start URLs, one a name."""

    def __init__(self, port: int) -> None:
        self.port = port

    def url(self, host: str, path: str = "/") -> str:
        return f"http://{host}:{self.port}{path}"


@pytest.mark.slow
def test_two_workers_press_a_shared_server_as_one_process(tmp_path: Path, redis_url: str,
                                                          pg_uri: str) -> None:
    host = SharedHost(workers=1, service=SERVICE)
    web = TestWeb({ADDRESS: host}).start()
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           **write_table(tmp_path / "dns.json", {n: [ADDRESS] for n in NAMES})}
    names = _Names(web.port)
    procs = []
    try:
        for name in ("a", "b"):
            cmd = worker_cmd(names, tmp_path, name, redis_url, pg_uri,
                             POLITE_DNS_LOOKUP="demo.names.dns_lookup",
                             POLITE_BOT_URL="https://bot.example/")
            cmd[cmd.index("-a") + 1] = "url=" + ",".join(names.url(n) for n in NAMES)
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env))
            if name == "a":
                wait_for((tmp_path / "access-a.jsonl").exists)
        assert [p.wait(timeout=240) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        web.stop()
    served = {(n, p) for n, p, _s, _e in host.served}
    for n in NAMES:  # every site whole
        assert {(n, "/"), *((n, f"/p{i}") for i in range(PAGES))} <= served, n
    total = len(host.served)
    print(f"\nshared server, two workers: {host.most} open at most, {host.queued} of "
          f"{total} queued")
    # One request at a time, so none of ours waits for the one slot. Before, each
    # process (and then the pair) probed a second request after eight flat answers,
    # which found the one slot busy: 2 at once, and requests queued (7 of 48 at eight
    # names, 9 of 96 at sixteen).
    assert host.most == 1, host.most
    assert host.queued == 0, (host.queued, total)
