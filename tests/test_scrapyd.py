"""Scheduled with a real scrapyd on loopback.

One scrapyd (``python scripts/scrapyd_local.py``, the project's scrapyd.conf,
a free port, temporary directories, a username and password) serves the whole module.
The egg is built and deployed with ``scrapyd-deploy`` from a copy of the working tree,
as ``make deploy`` does. Jobs run ``scrapy crawl`` from that egg in their own
processes; loopback rests come as ``setting=`` parameters of schedule.json.
Everything is judged from the test web's own request log.
"""

from __future__ import annotations

import configparser
import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from demo.web.server import Resp, Site, etag_for, overlaps, page, short_rests
from tests.test_spider_api_example import PAGES, PER_PAGE, api_site

if TYPE_CHECKING:
    from collections.abc import Iterator

    from demo.web.server import LogEntry, TestWeb

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROJECT = "polite_crawler"
USER, PASSWORD = "operator", "test-only-secret"
REST = 0.3  # the page rest every job gets here (loopback allows it)
REVISIT = 1.0  # the revisit interval of the recrawl test (a day, by default)
SLACK = 0.01  # clock and socket granularity between the crawler's and the server's view
JOB_TIMEOUT = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job_settings(**extra: Any) -> dict[str, Any]:
    return {
        "POLITE_REST_PAGE": REST,
        "POLITE_REST_API": REST / 2,
        "POLITE_JITTER": 0,
        "LOG_LEVEL": "INFO",
        **extra,
    }


class Scrapyd:
    """A scrapyd process of this test module and its JSON API."""

    def __init__(self, root: Path, port: int) -> None:
        self.root = root
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.auth = (USER, PASSWORD)
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: set[int] = set()

    # --- process -----------------------------------------------------------
    def start(self, env: dict[str, str]) -> None:
        self.output = (self.root / "scrapyd.out").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(REPO / "scripts" / "scrapyd_local.py"), "--root", str(self.root),
             "--port", str(self.port)],
            cwd=self.root, env=env, stdout=self.output, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.daemon_output()
            with contextlib.suppress(requests.ConnectionError):
                if requests.get(f"{self.url}/daemonstatus.json", auth=self.auth,
                                timeout=5).status_code == 200:
                    return
            time.sleep(0.2)
        raise AssertionError("scrapyd did not start:\n" + self.daemon_output())

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            for job in self.get("listjobs.json", project=PROJECT)["running"]:
                self.post("cancel.json", project=PROJECT, job=job["id"])
            deadline = time.monotonic() + 30
            while self.get("listjobs.json", project=PROJECT)["running"]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        # Job processes this scrapyd started and that outlived it.
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        self.output.close()

    def daemon_output(self) -> str:
        return (self.root / "scrapyd.out").read_text(errors="replace")[-5000:]

    # --- API ---------------------------------------------------------------
    def get(self, endpoint: str, **params: str) -> dict[str, Any]:
        resp = requests.get(f"{self.url}/{endpoint}", params=params, auth=self.auth, timeout=30)
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data

    def post(self, endpoint: str, data: list[tuple[str, str]] | None = None,
             **fields: str) -> dict[str, Any]:
        resp = requests.post(f"{self.url}/{endpoint}", data=[*(data or []), *fields.items()],
                             auth=self.auth, timeout=60)
        resp.raise_for_status()
        out: dict[str, Any] = resp.json()
        assert out.get("status") == "ok", out
        return out

    def schedule(self, spider: str, settings: dict[str, Any], jobid: str | None = None,
                 **args: str) -> str:
        data = [("project", PROJECT), ("spider", spider)]
        data += [("setting", f"{k}={v}") for k, v in settings.items()]
        if jobid:
            data.append(("jobid", jobid))
        data += list(args.items())
        return str(self.post("schedule.json", data)["jobid"])

    def finished_count(self, jobid: str) -> int:
        jobs = self.get("listjobs.json", project=PROJECT)
        for job in jobs["running"]:
            if job.get("pid"):
                self.pids.add(int(job["pid"]))
        return sum(1 for job in jobs["finished"] if job["id"] == jobid)

    def wait_finished(self, jobid: str, runs: int = 1, timeout: float = JOB_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while self.finished_count(jobid) < runs:
            if time.monotonic() > deadline:
                raise AssertionError(f"job {jobid} did not finish:\n{self.job_log('site', jobid)}")
            time.sleep(0.25)

    def wait_running(self, jobid: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not any(j["id"] == jobid for j in self.get("listjobs.json")["running"]):
            assert time.monotonic() < deadline, f"job {jobid} never ran"
            time.sleep(0.1)

    def job_log(self, spider: str, jobid: str) -> str:
        path = self.root / "var" / "logs" / PROJECT / spider / f"{jobid}.log"
        return path.read_text(errors="replace") if path.exists() else f"(no log at {path})"


def _copy_project(dest: Path, port: int) -> None:
    """The working tree as scrapyd-deploy would see it, aimed at this scrapyd."""
    dest.mkdir()
    shutil.copytree(REPO / PROJECT, dest / PROJECT,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, dest / name)
    cfg = (REPO / "scrapy.cfg").read_text()
    cfg = cfg.replace("url = http://127.0.0.1:6800", f"url = http://127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in cfg
    (dest / "scrapy.cfg").write_text(cfg)


@pytest.fixture(scope="module")
def scrapyd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scrapyd]:
    root = tmp_path_factory.mktemp("scrapyd")
    shutil.copy(REPO / "scrapyd.conf", root / "scrapyd.conf")
    server = Scrapyd(root, _free_port())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCRAPYD_", "POLITE_"))}
    # HOME: no ~/.scrapyd.conf or ~/.netrc of the machine's user takes part.
    env.update(HOME=str(root), SCRAPYD_USERNAME=USER, SCRAPYD_PASSWORD=PASSWORD,
               PYTHONUNBUFFERED="1")
    server.start(env)
    try:
        _copy_project(root / "project", server.port)
        deploy = subprocess.run(
            [str(BIN / "scrapyd-deploy")], cwd=root / "project", env=env,
            capture_output=True, text=True, timeout=300, check=False,
        )
        assert deploy.returncode == 0, deploy.stderr + deploy.stdout
        assert '"status": "ok"' in deploy.stdout, deploy.stdout
        yield server
    finally:
        server.stop()


def test_repository_deploy_url_has_no_trailing_slash() -> None:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(REPO / "scrapy.cfg")
    url = cp.get("deploy", "url")
    assert url.startswith("http://127.0.0.1:") and not url.endswith("/")


def test_scrapyd_requires_the_password(scrapyd: Scrapyd) -> None:
    url = f"{scrapyd.url}/daemonstatus.json"
    assert requests.get(url, timeout=10).status_code == 401
    assert requests.get(url, auth=(USER, "wrong"), timeout=10).status_code == 401
    assert requests.get(url, auth=scrapyd.auth, timeout=10).json()["status"] == "ok"
    # The egg is there: deployed through the password, and both spiders listed.
    spiders = scrapyd.get("listspiders.json", project=PROJECT)["spiders"]
    assert {"site", "api_example"} <= set(spiders)


def _pages_site(prefix: str, n: int, delay: float = 0.0) -> Site:
    paths = [f"/{prefix}/{i}" for i in range(n)]
    routes: dict[str, Any] = {
        "/": page(f"{prefix} home", links=paths),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    }
    for p in paths:
        routes[p] = Resp(200, page(p), delay=delay)
    return Site(routes)


def _content(entries: list[LogEntry]) -> list[LogEntry]:
    return [e for e in entries if e.path != "/robots.txt"]


def _violations(entries: list[LogEntry]) -> str:
    bad_overlap = overlaps(entries)
    bad_rest = short_rests(entries, REST, slack=SLACK)
    lines = [f"overlap {a.origin}: {a.path} [{a.started:.3f}-{a.finished:.3f}] "
             f"{b.path} started {b.started:.3f}" for a, b in bad_overlap[:10]]
    lines += [f"short rest {a.origin}: {a.path} -> {b.path} gap {gap:.3f}"
              for a, b, gap in bad_rest[:10]]
    return "\n".join(lines)


def test_two_jobs_on_shared_hosts_keep_one_request_in_flight_and_the_rest(
    scrapyd: Scrapyd, web_factory: type[TestWeb]
) -> None:
    a, b, c = "127.0.0.21", "127.0.0.22", "127.0.0.23"
    n = 10
    # Host b, the shared one, holds job one for at least 40 rests (12 s): a job's
    # process starts seconds after it is scheduled on a loaded machine, and with
    # b as small as the others job one had left b before job two reached it.
    sizes = {a: n, b: 40, c: n}
    prefixes = {a: "a", b: "b", c: "c"}
    web = web_factory({h: _pages_site(prefixes[h], sizes[h], 0.02) for h in prefixes})
    # The From header tells the two jobs' requests apart in the server's log. A job
    # holds a host for a turn of POLITE_LEASE_TTL while it has work for it: a turn of
    # 3 s (renewed at checkpoints of 0.5 s) hands b from one job to the other within
    # job one's 12 s on it.
    turns = {"POLITE_LEASE_TTL": 3, "POLITE_CHECKPOINT_INTERVAL": 0.5}
    job1 = scrapyd.schedule("site", job_settings(POLITE_CONTACT="job-one@example.org",
                                                 **turns),
                            url=f"{web.url(a)},{web.url(b)}")
    job2 = scrapyd.schedule("site", job_settings(POLITE_CONTACT="job-two@example.org",
                                                 **turns),
                            url=f"{web.url(b)},{web.url(c)}")
    scrapyd.wait_finished(job1)
    scrapyd.wait_finished(job2)
    logs = {job: scrapyd.job_log("site", job) for job in (job1, job2)}
    for job, log in logs.items():
        assert "'finish_reason': 'finished'" in log, f"{job}:\n{log[-4000:]}"

    entries = web.entries()
    for host, prefix in prefixes.items():
        got = {e.path for e in web.entries(host)}
        assert {f"/{prefix}/{i}" for i in range(n)} <= got, (host, sorted(got))
    # Both jobs were on host b at the same time: otherwise this proves nothing.
    on_b = _content(web.entries(b))
    one = [e for e in on_b if e.headers.get("from") == "job-one@example.org"]
    two = [e for e in on_b if e.headers.get("from") == "job-two@example.org"]
    assert one and two, [e.headers.get("from") for e in on_b]
    assert one[0].started < two[-1].started and two[0].started < one[-1].started, \
        "the two jobs did not overlap on the shared host"
    problems = _violations(entries)
    assert not problems, problems


def test_cancelled_job_resumes_with_the_same_job_id(
    scrapyd: Scrapyd, web_factory: type[TestWeb]
) -> None:
    d = "127.0.0.24"
    n = 24
    web = web_factory({d: _pages_site("r", n, 0.05)})
    every = {"/", *(f"/r/{i}" for i in range(n))}
    settings = job_settings(POLITE_REST_DURATION_FACTOR=1)
    jobid = "resume-me"
    scrapyd.schedule("site", settings, jobid=jobid, url=web.url(d))
    scrapyd.wait_running(jobid)
    deadline = time.monotonic() + JOB_TIMEOUT
    while len(_content(web.entries(d))) < 6:
        assert time.monotonic() < deadline, scrapyd.job_log("site", jobid)
        time.sleep(0.05)
    assert scrapyd.post("cancel.json", project=PROJECT, job=jobid)["prevstate"] == "running"
    scrapyd.wait_finished(jobid, runs=1)
    log1 = scrapyd.job_log("site", jobid)
    assert "'finish_reason': 'shutdown'" in log1, log1[-4000:]
    first = _content(web.entries(d))
    first_paths = [e.path for e in first]
    assert len(first) < n, "the job ended before it was cancelled"
    jobdir = scrapyd.root / "var" / "jobs" / PROJECT / "site" / jobid
    assert jobdir.is_dir() and any(jobdir.iterdir())

    scrapyd.schedule("site", settings, jobid=jobid, url=web.url(d))
    scrapyd.wait_finished(jobid, runs=2)
    log2 = scrapyd.job_log("site", jobid)
    assert log2.count("'finish_reason': 'finished'") == 1, log2[-4000:]
    second = _content(web.entries(d))[len(first):]
    second_paths = [e.path for e in second]

    assert len(first_paths) == len(set(first_paths))
    assert len(second_paths) == len(set(second_paths))
    # Resumed: nothing fetched before is fetched again, the rest is fetched once.
    assert not set(first_paths) & set(second_paths), sorted(set(first_paths) & set(second_paths))
    # (the spider's /sitemap.xml probe, a 404 here, is a request like any other: once)
    assert (set(first_paths) | set(second_paths)) - {"/sitemap.xml"} == every
    assert len(second) < len(every)
    problems = _violations(web.entries(d))
    assert not problems, problems


def test_api_example_is_deployed_and_scheduled_like_any_spider(
    scrapyd: Scrapyd, web_factory: type[TestWeb]
) -> None:
    host = "127.0.0.25"
    port_of: dict[str, int] = {}
    web = web_factory({host: api_site(port_of)})
    port_of["port"] = web.port
    jobid = scrapyd.schedule("api_example", job_settings(), url=web.url(host, "/api/things/"))
    scrapyd.wait_finished(jobid)
    items = scrapyd.root / "var" / "items" / PROJECT / "api_example" / f"{jobid}.jl"
    assert items.is_file(), scrapyd.job_log("api_example", jobid)
    assert len(items.read_text().splitlines()) == PAGES * PER_PAGE
    entries = web.entries()
    assert entries[0].path == "/robots.txt"
    assert not overlaps(entries)
    assert not short_rests(entries, REST / 2, slack=SLACK)


def test_recrawl_with_a_new_job_id_is_conditional(
    scrapyd: Scrapyd, web_factory: type[TestWeb]
) -> None:
    """What the cron line and the systemd timer do: a fresh job id over the shared store."""
    # Runs as soon as the conditional-request middleware (its own issue) exists.
    pytest.importorskip("polite_crawler.middlewares.conditional",
                        reason="conditional requests not built yet")
    host = "127.0.0.26"
    # Distinct texts: pages that differ only by a digit are one page to the
    # duplicate detection (digits are normalised), and a duplicate is not stored.
    topics = ["otters and rivers", "granite quarries", "lighthouse keepers", "beekeeping"]
    bodies = {f"/v/{i}": page(f"v{i}", f"A long article about {t}, unlike the others.")
              for i, t in enumerate(topics)}
    routes: dict[str, Any] = {
        "/": Resp(200, page("home", links=list(bodies)), etag=etag_for(b"home")),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    }
    for path, body in bodies.items():
        routes[path] = Resp(200, body, etag=etag_for(body), last_modified=1_700_000_000)
    web = web_factory({host: Site(routes)})
    # The shipped timer runs daily, past the default revisit interval (a day); here a
    # page is due again after a second, as rests are shorter on loopback. (With the
    # defaults, a recrawl minutes later sends nothing: every page is "not_due".)
    settings = job_settings(POLITE_REVISIT_DEFAULT=REVISIT, POLITE_REVISIT_MIN=REVISIT)
    first = scrapyd.schedule("site", settings, url=web.url(host))
    scrapyd.wait_finished(first)
    seen = len(web.entries())
    second = scrapyd.schedule("site", settings, url=web.url(host))
    scrapyd.wait_finished(second)
    again = [e for e in web.entries()[seen:] if e.path in bodies]
    # Every stored page was asked for again, conditionally, and came back 304.
    assert {e.path for e in again} == set(bodies), scrapyd.job_log("site", second)[-4000:]
    assert all(e.headers.get("if-none-match") or e.headers.get("if-modified-since")
               for e in again), [(e.path, e.headers) for e in again]
    assert all(e.status == 304 for e in again), [(e.path, e.status) for e in again]


def _cron_job(path: Path) -> tuple[dict[str, str], str]:
    """The variables and the command of the single job line of a cron.d file."""
    env: dict[str, str] = {}
    commands = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if eq and name.isidentifier() and " " not in name:
            env[name] = value
            continue
        fields = line.split(None, 6)
        assert len(fields) == 7, line  # 5 time fields, the user, the command
        commands.append(fields[6])
    assert len(commands) == 1
    return env, commands[0]


def _systemd_exec(path: Path) -> tuple[dict[str, str], list[str]]:
    """Environment= and the ExecStart= argv of a unit, with systemd's $$ unescaped."""
    env: dict[str, str] = {}
    argv: list[str] = []
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "Environment":
            name, _, val = value.partition("=")
            env[name] = val
        elif key == "ExecStart":
            argv = shlex.split(value.replace("$$", "$"))
    assert argv
    return env, argv


def test_shipped_cron_line_and_systemd_unit_schedule_a_recrawl(
    scrapyd: Scrapyd, web_factory: type[TestWeb], tmp_path: Path
) -> None:
    hosts = ("127.0.0.27", "127.0.0.28")
    web = web_factory({h: _pages_site("t", 3) for h in hosts})
    sites = tmp_path / "sites.txt"
    sites.write_text("".join(f"{web.url(h)}\n" for h in hosts))
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {PASSWORD}\n")
    netrc.chmod(0o600)
    ours = {"SCRAPYD": scrapyd.url, "SITES": str(sites), "NETRC": str(netrc),
            "BOT_URL": "https://crawler.example.org/bot/", "HOME": str(tmp_path),
            "PATH": os.environ["PATH"]}
    before = {j["id"] for state in scrapyd.get("listjobs.json").values()
              if isinstance(state, list) for j in state}

    cron_env, cron_command = _cron_job(REPO / "deploy" / "cron" / "polite-recrawl.cron")
    assert cron_env["SCRAPYD"] == "http://127.0.0.1:6800"
    run = subprocess.run(["/bin/sh", "-c", cron_command], capture_output=True, text=True,
                         env={**cron_env, **ours, "CONTACT": "cron@example.org"}, timeout=60,
                         check=False)
    assert run.returncode == 0 and not run.stdout, run.stdout + run.stderr

    unit_env, argv = _systemd_exec(REPO / "deploy" / "systemd" / "polite-recrawl.service")
    assert unit_env["SCRAPYD"] == "http://127.0.0.1:6800"
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                         env={**unit_env, **ours, "CONTACT": "timer@example.org"})
    assert run.returncode == 0, run.stdout + run.stderr
    assert '"jobid"' in run.stderr  # scrapyd's answer went to the journal

    jobs = scrapyd.get("listjobs.json")
    new = {j["id"] for state in jobs.values() if isinstance(state, list) for j in state} - before
    assert len(new) == 2, new
    # The shipped lines carry the production rests (3 s and more): see both jobs crawl
    # the sites file with their own contact, then cancel them. The two jobs share one
    # page store and robots.txt cache, so the second may find "/" just stored (not due)
    # and robots.txt cached: any request of each job shows its contact.
    deadline = time.monotonic() + JOB_TIMEOUT
    while {e.headers.get("from") for e in web.entries()} != {
        "cron@example.org", "timer@example.org"
    }:
        assert time.monotonic() < deadline, [(e.path, e.headers.get("from")) for e in web.entries()]
        time.sleep(0.1)
    for jobid in new:
        scrapyd.post("cancel.json", project=PROJECT, job=jobid)
    for jobid in new:
        scrapyd.wait_finished(jobid)
    # (the spider's /sitemap.xml probe, a 404 here, is a request like any other)
    paths = {e.path for e in web.entries()}
    assert all(p in ("/", "/robots.txt", "/sitemap.xml") or p.startswith("/t/") for p in paths), \
        sorted(paths)
    problems = _violations(web.entries())
    assert not problems, problems

    # A scrapyd that refuses the call makes both fail loudly.
    bad = {**ours, "CONTACT": "x@example.org", "SITES": str(sites)}
    bad_netrc = tmp_path / "bad-netrc"
    bad_netrc.write_text(f"machine 127.0.0.1 login {USER} password wrong\n")
    bad_netrc.chmod(0o600)
    bad["NETRC"] = str(bad_netrc)
    run = subprocess.run(["/bin/sh", "-c", cron_command], capture_output=True, text=True,
                         env={**cron_env, **bad}, timeout=60, check=False)
    assert run.returncode != 0 and "polite-recrawl" in run.stdout
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                         env={**unit_env, **bad})
    assert run.returncode != 0
