"""``make cluster-demo``: the demo web crawled by two workers sharing a Redis frontier.

Starts, on loopback, Debian's redis-server (the bundled ``deploy/redis/redis.conf``,
its data in the output directory) and a throwaway PostgreSQL (the shared page store;
as the ``postgres`` user when run as root), serves the demo web, runs two
``scrapy crawl site`` workers with ``POLITE_FRONTIER=redis://...`` and the same
command line, and prints the demo's per-host summary, then which worker served each
host. Everything it started is stopped by its PID.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from demo.crawl import (
    HARD_TIMEOUT,
    CrawlRun,
    Records,
    _interrupt,
    crawl_command,
    demo_settings,
    read_jsonl,
    read_stats,
    read_stops,
    robots_answers,
    summary,
)
from demo.web.demo import DEMO_HOSTS, FULL, SMALL, demo_web, set_bot_page
from demo.web.server import overlaps
from polite_crawler.defaults import DEMO_PORT

ROOT = Path(__file__).resolve().parent.parent
WORKERS = ("w1", "w2")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes] | None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing answers on port {port}")


def start_redis(out: Path) -> tuple[subprocess.Popen[bytes], int]:
    binary = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(binary).exists():
        raise RuntimeError("redis-server is not installed (make system-deps)")
    port = free_port()
    data = out / "redis"
    data.mkdir(parents=True, exist_ok=True)
    conf = ROOT / "deploy" / "redis" / "redis.conf"
    proc = subprocess.Popen([binary, str(conf), "--port", str(port), "--dir", str(data),
                             "--daemonize", "no", "--logfile", str(data / "redis.log")],
                            stdin=subprocess.DEVNULL)
    wait_port(port, proc)
    return proc, port


class Postgres:
    """A throwaway PostgreSQL on loopback (Debian's binaries), stopped by pg_ctl."""

    def __init__(self) -> None:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found:
            raise RuntimeError("PostgreSQL is not installed (make system-deps)")
        self.bin = Path(found[-1]).parent
        self.root = os.geteuid() == 0
        self.dir = Path(tempfile.mkdtemp(prefix="polite-cluster-pg-"))
        self.port = free_port()

    def _run(self, *args: str) -> None:
        cmd = list(args)
        if self.root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def start(self) -> str:
        if self.root:
            shutil.chown(self.dir, "postgres", "postgres")
        data = str(self.dir / "data")
        self._run(str(self.bin / "initdb"), "-D", data, "-A", "trust", "-U", "postgres",
                  "-E", "UTF8", "--no-sync", "--locale=C")
        opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.dir} -c fsync=off"
        self._run(str(self.bin / "pg_ctl"), "-D", data, "-o", opts, "-l",
                  str(self.dir / "log"), "-w", "-t", "60", "start")
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast",
                      "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def stop_proc(proc: subprocess.Popen[bytes], grace: float = 15.0) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def merged_stats(paths: list[Path]) -> dict[str, Any] | None:
    """The workers' stats files summed (numbers) or kept from the first (the rest)."""
    out: dict[str, Any] = {}
    found = False
    for path in paths:
        stats = read_stats(path)
        if stats is None:
            continue
        found = True
        for k, v in stats.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k in out:
                out[k] += v
            else:
                out.setdefault(k, v)
    return out if found else None


def who_served(out: Path) -> str:
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    for w in WORKERS:
        for rec in read_jsonl(out / f"access-{w}.jsonl") or []:
            counts[rec.get("origin", "?")][w] += 1
    lines = ["", "Which worker served each host (requests, robots.txt included):"]
    for origin in sorted(counts):
        parts = ", ".join(f"{w} {n}" for w, n in sorted(counts[origin].items()))
        lines.append(f"  {origin:34} {parts}")
    return "\n".join(lines)


def run(out: Path, port: int, small: bool, timeout: float) -> tuple[int, str]:
    from polite_crawler.botpage import load_settings, render_bot_page

    out = out.resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    redis_proc, redis_port = start_redis(out)
    pg = Postgres()
    web = None
    workers: list[subprocess.Popen[bytes]] = []
    try:
        store = pg.start()
        token = load_settings({}).get("POLITE_BOT_NAME")
        web = demo_web(port, SMALL if small else FULL, token)
        web.start()
        port = web.port
        hosts_file = out / "hosts.txt"
        hosts_file.write_text("".join(f"{web.url(h.address)}\n" for h in DEMO_HOSTS),
                              encoding="utf-8")
        base = demo_settings(out, web.port, {
            "POLITE_FRONTIER": f"redis://127.0.0.1:{redis_port}/0",
            "POLITE_CRAWL": "cluster-demo",
            "POLITE_STORE": store,
        })
        set_bot_page(web, render_bot_page(load_settings(base)).encode())
        print(f"Redis on 127.0.0.1:{redis_port}, PostgreSQL on 127.0.0.1:{pg.port}, demo web "
              f"on port {web.port}; 2 workers crawling (logs in {out}) ...", flush=True)
        env = {**os.environ, "SCRAPY_SETTINGS_MODULE": "polite_crawler.settings"}
        started = time.monotonic()
        for w in WORKERS:
            settings = {**base, "POLITE_ACCESS_LOG": str(out / f"access-{w}.jsonl"),
                        "POLITE_STATS_FILE": str(out / f"stats-{w}.json"),
                        "LOG_FILE": str(out / f"crawl-{w}.log")}
            workers.append(subprocess.Popen(
                crawl_command(hosts_file, out / f"pages-{w}.jsonl", settings), env=env,
                stdin=subprocess.DEVNULL))
            time.sleep(1.0)  # the state directory's SQLite files created by one first
        codes = []
        for proc in workers:
            left = max(timeout - (time.monotonic() - started), 1.0)
            try:
                codes.append(proc.wait(timeout=left))
            except subprocess.TimeoutExpired:
                codes.append(stop_proc(proc))
        seconds = time.monotonic() - started
        robots = robots_answers(web)
        web_log = list(web.log)
    finally:
        for proc in workers:
            stop_proc(proc)
        if web is not None:
            web.stop()
        stop_proc(redis_proc)
        pg.stop()
    access: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for w in WORKERS:
        access += read_jsonl(out / f"access-{w}.jsonl") or []
        items += read_jsonl(out / f"pages-{w}.jsonl") or []
    # The files the summary names: the workers' own, merged.
    (out / "access.jsonl").write_text("".join(json.dumps(r) + "\n" for r in access),
                                      encoding="utf-8")
    (out / "pages.jsonl").write_text("".join(json.dumps(r) + "\n" for r in items),
                                     encoding="utf-8")
    (out / "crawl.log").write_text("".join(
        (out / f"crawl-{w}.log").read_text(encoding="utf-8", errors="replace")
        for w in WORKERS if (out / f"crawl-{w}.log").exists()), encoding="utf-8")
    stats = merged_stats([out / f"stats-{w}.json" for w in WORKERS])
    (out / "stats.json").write_text(json.dumps(stats or {}, default=str), encoding="utf-8")
    stops: dict[str, str] = {}
    for w in WORKERS:
        stops.update(read_stops(out / f"crawl-{w}.log"))
    rec = Records(web_log=web_log, robots=robots, access_log=access,
                  stats=stats, items=items, store={},
                  store_note="in PostgreSQL (a throwaway server, dropped at the end)",
                  token=token, port=port, stops=stops)
    worst = next((c for c in codes if c != 0), 0)
    crawl_run = CrawlRun(returncode=worst, seconds=seconds, command=["2 workers"])
    text = summary(rec, crawl_run, out) + who_served(out)
    clash = overlaps(web_log)
    text += f"\n\nWorkers' exit codes: {codes}; overlapping requests on one host: {len(clash)}"
    return (0 if all(c == 0 for c in codes) and not clash else 1), text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.cluster",
                                     description=__doc__)
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("POLITE_DEMO_PORT") or DEMO_PORT))
    parser.add_argument("--out", type=Path, default=Path("demo-output/cluster"))
    parser.add_argument("--small", action="store_true", help="the tests' small demo web")
    parser.add_argument("--timeout", type=float, default=HARD_TIMEOUT)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        code, text = run(args.out, args.port, args.small, args.timeout)
    except Exception as exc:  # everything started is stopped already
        print(f"CLUSTER DEMO FAILED: {exc}")
        return 1
    print(text)
    return code


if __name__ == "__main__":
    sys.exit(main())
