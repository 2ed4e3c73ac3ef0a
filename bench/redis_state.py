"""What the robots.txt cache and the opt-out list cost in Redis.

Two workers, each with its own state directory (as if on two machines), crawl ``--hosts``
loopback sites of ``--pages`` pages (rest 0.1 s) through one redis-server on loopback;
the second starts once the first has read every robots.txt, so hosts move to it. A
``MONITOR`` client counts every command by the keys it names: the robots.txt cache's
(``polite:robots:{O}``), the opt-out list's (``polite:{optout}:*``) and the rest (the
frontier). Printed: robots.txt requests the test web saw per host, robots.txt cache
commands per host, opt-out commands per worker-second, and every command per page.
Also the opt-out middleware's request path with the list in Redis (no read due), in
microseconds a request, and ``scrapy forget`` on two live workers (``--runs``): the wait
for both acknowledgements and the command's time.

``python -m bench.redis_state [--hosts N] [--pages N] [--runs N]``
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _classify(line: bytes) -> str:
    if b'"polite:robots:' in line:
        return "robots"
    if b'"polite:{optout}:' in line:
        return "optout"
    return "other"


def _monitor(port: int, counts: Counter[str], stop: threading.Event) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"MONITOR\r\n")
        s.settimeout(0.2)
        buf = b""
        while not stop.is_set():
            try:
                data = s.recv(65536)
            except TimeoutError:
                continue
            if not data:
                return
            buf += data
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                if line.startswith(b"+") and b'"' in line:
                    counts[_classify(line)] += 1


def request_path(url: str, n: int) -> float:
    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from polite_crawler.middlewares.optout import OptOutMiddleware

    with tempfile.TemporaryDirectory() as tmp:
        crawler = get_crawler(Spider, {"POLITE_STATE_DIR": tmp, "POLITE_FRONTIER": url})
        mw = OptOutMiddleware(crawler)
        requests = [Request(f"https://ok{i % 50}.example/p{i}",
                            meta={"polite_origin": f"https://ok{i % 50}.example"})
                    for i in range(n)]
        t0 = time.perf_counter()
        for r in requests:
            mw.process_request(r)
        took = (time.perf_counter() - t0) / n
        mw.redis.close()  # type: ignore[union-attr]
    return took * 1e6


def crawl(hosts: int, pages: int) -> dict[str, Any]:
    from demo.web.server import TestWeb
    from tests.redis_server import RedisServer, redis_binary
    from tests.test_redis_frontier import chain_site

    binary = redis_binary()
    if binary is None:
        raise SystemExit("redis-server not installed (make system-deps)")
    names = [f"127.0.0.{i}" for i in range(1, hosts + 1)]
    server = RedisServer(binary, aof=False).start()
    counts: Counter[str] = Counter()
    stop = threading.Event()
    mon = threading.Thread(target=_monitor, args=(server.port, counts, stop), daemon=True)
    mon.start()
    tmp = Path(tempfile.mkdtemp(prefix="polite-bench-"))
    try:
        with TestWeb({h: chain_site(pages, h) for h in names}) as web:
            def cmd(name: str) -> list[str]:
                sets = {"POLITE_FRONTIER": server.url, "POLITE_CRAWL": "bench",
                        "POLITE_STATE_DIR": str(tmp / name), "POLITE_REST_PAGE": "0.1",
                        "POLITE_JITTER": "0", "POLITE_REDIS_LEASE_TTL": "2",
                        "POLITE_REDIS_SYNC_INTERVAL": "0.1", "POLITE_CLOCK_SKEW": "0.05",
                        "LOG_LEVEL": "WARNING", "LOG_FILE": str(tmp / f"{name}.log")}
                out = [sys.executable, "-m", "scrapy", "crawl", "site",
                       "-a", "url=" + ",".join(web.url(h) for h in names)]
                for k, v in sets.items():
                    out += ["-s", f"{k}={v}"]
                return out

            env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
            t0 = time.monotonic()
            a = subprocess.Popen(cmd("a"), cwd=ROOT, env=env)
            while len(web.entries(path="/robots.txt")) < hosts and a.poll() is None:
                time.sleep(0.05)
            b = subprocess.Popen(cmd("b"), cwd=ROOT, env=env)
            tb = time.monotonic()
            codes = [b.wait(600), a.wait(600)]
            t1 = time.monotonic()
            entries = web.entries()
        time.sleep(0.3)
    finally:
        stop.set()
        mon.join(2)
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    robots = Counter(e.host for e in entries if e.path == "/robots.txt")
    content = [e for e in entries if e.path != "/robots.txt"]
    worker_seconds = (t1 - t0) + (t1 - tb)
    return {"codes": codes, "robots_per_host": sorted(set(robots.values())),
            "pages": len(content), "robots_cmds_per_host": counts["robots"] / hosts,
            "optout_cmds_per_worker_s": counts["optout"] / worker_seconds,
            "cmds_per_page": sum(counts.values()) / max(len(content), 1),
            "robots_optout_share": (counts["robots"] + counts["optout"])
            / max(sum(counts.values()), 1)}


def forget_live(runs: int) -> list[dict[str, float]]:
    """``scrapy forget`` against two live workers (each on its own state directory and
    page store): the wait for both acknowledgements, and the whole command's time."""
    import json

    from demo.web.server import TestWeb
    from tests.commands_util import env, scrapy
    from tests.redis_server import RedisServer, redis_binary
    from tests.test_commands_forget_live import wide_site

    gone, kept = "127.0.0.1", "127.0.0.2"
    out = []
    for _ in range(runs):
        server = RedisServer(str(redis_binary()), aof=False).start()
        tmp = Path(tempfile.mkdtemp(prefix="polite-bench-"))
        try:
            with TestWeb({gone: wide_site(40, 0.15), kept: wide_site(80, 0.05)}) as web:
                def cmd(name: str, web: Any = web, url: str = server.url,
                        tmp: Path = tmp) -> list[str]:
                    sets = {"POLITE_FRONTIER": url, "POLITE_CRAWL": "bench",
                            "POLITE_STATE_DIR": str(tmp / name), "POLITE_REST_PAGE": "0.1",
                            "POLITE_JITTER": "0", "POLITE_REDIS_LEASE_TTL": "2",
                            "POLITE_REDIS_SYNC_INTERVAL": "0.1", "POLITE_CLOCK_SKEW": "0.05",
                            "LOG_LEVEL": "WARNING", "LOG_FILE": str(tmp / f"{name}.log")}
                    line = [sys.executable, "-m", "scrapy", "crawl", "site",
                            "-a", f"url={web.url(gone)},{web.url(kept)}"]
                    for k, v in sets.items():
                        line += ["-s", f"{k}={v}"]
                    return line

                workers = [subprocess.Popen(cmd("a"), cwd=ROOT, env=env())]
                try:
                    while len([e for e in web.entries(gone) if e.path.startswith("/p")]) < 3:
                        time.sleep(0.02)
                    workers.append(subprocess.Popen(cmd("b"), cwd=ROOT, env=env()))
                    time.sleep(3.0)  # the second worker is up and registered
                    t0 = time.perf_counter()
                    done = scrapy("forget", f"http://{gone}:{web.port}", "--json",
                                  "-s", f"POLITE_FRONTIER={server.url}")
                    total = time.perf_counter() - t0
                    data = json.loads(done.stdout)
                    for w in workers:
                        w.wait(120)
                finally:
                    for w in workers:
                        if w.poll() is None:
                            w.kill()
                            w.wait()
            out.append({"ack_wait": data["ack_wait"], "command": total,
                        "acknowledged": len(data["acknowledged"])})
        finally:
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.redis_state")
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=10)
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3, help="forget runs on a live cluster")
    args = parser.parse_args(argv)
    from tests.redis_server import RedisServer, redis_binary

    binary = redis_binary()
    if binary is None:
        raise SystemExit("redis-server not installed (make system-deps)")
    server = RedisServer(binary, aof=False).start()
    try:
        us = request_path(server.url, args.requests)
    finally:
        server.stop()
    print(f"opt-out request path with the list in Redis: {us:.2f} us a request "
          "(no Redis call: the version is polled on a thread)")
    r = crawl(args.hosts, args.pages)
    print(f"{args.hosts} hosts x {args.pages} pages, 2 workers on their own state "
          f"directories: exit {r['codes']}, {r['pages']} content requests, robots.txt asked "
          f"{r['robots_per_host']} times per host; robots.txt cache "
          f"{r['robots_cmds_per_host']:.1f} Redis commands per host; opt-out list "
          f"{r['optout_cmds_per_worker_s']:.1f} commands per worker-second; all commands "
          f"{r['cmds_per_page']:.1f} per page, of which robots.txt cache and opt-out list "
          f"{100 * r['robots_optout_share']:.1f}%")
    runs = forget_live(args.runs)
    waits = sorted(x["ack_wait"] for x in runs)
    print(f"forget on 2 live workers, {args.runs} runs: {[x['acknowledged'] for x in runs]} "
          f"acknowledged, in median {waits[len(waits) // 2]:.3f} s (max {waits[-1]:.3f} s); "
          f"the command took median "
          f"{sorted(x['command'] for x in runs)[len(runs) // 2]:.2f} s (Python start-up "
          "included)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
