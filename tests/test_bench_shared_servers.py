"""The shared-servers bench's own machinery: its server keeps W workers honestly and logs
what a site owner's log would show, and its figures read that log as documented.

The server is the bench's real child process on loopback; the figures are checked on
logs written by hand, where the right answer is known."""

from __future__ import annotations

import http.client
import os
import threading
from typing import TYPE_CHECKING

import pytest

from bench.shared_servers import (
    ROOT,
    Machine,
    Req,
    Servers,
    edge_figures,
    gaps_by_name,
    page_paths,
    peak_busy,
    read_log,
    site_ideal_fraction,
    small_figures,
)
from demo.spans import most_open

if TYPE_CHECKING:
    from pathlib import Path


def _get(address: str, port: int, host: str, path: str, agent: str = "T") -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(address, port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{port}", "User-Agent": agent})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


@pytest.fixture
def machine() -> Machine:
    m = Machine("small", "127.0.77.9", 2, 0.2, 3)
    m.sites = [("names", "http", f"n{i}.test") for i in range(6)]
    m.sites.append(("port1", "http", m.address))
    return m


def test_a_request_waits_for_one_of_the_w_workers(machine: Machine, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Servers(tmp_path, [machine], env) as servers:
        port = servers.ports["small"]["names"]
        threads = [threading.Thread(target=_get, args=(machine.address, port, f"n{i}.test",
                                                       "/robots.txt"))
                   for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    reqs, conns = read_log(servers.log)
    assert len(reqs) == 6 and len(conns) == 6
    assert {r.host for r in reqs} == {f"n{i}.test" for i in range(6)}
    # Service (a worker held) never overlaps beyond W; the rest waited in the queue.
    assert most_open((r.start, r.end) for r in reqs) == 2
    assert most_open((r.arrival, r.end) for r in reqs) > 2
    assert sum(r.queued for r in reqs) == 4
    assert all(r.end - r.start >= 0.2 for r in reqs)
    # Latency grows with the queue: the last served waited two rounds of service. (How
    # soon the first came back is the test machine's speed, not the server's model.)
    latencies = sorted(r.end - r.arrival for r in reqs)
    assert latencies[0] >= 0.2 and latencies[-1] >= 0.55


def test_each_site_its_robots_sitemap_and_pages(machine: Machine, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with Servers(tmp_path, [machine], env) as servers:
        names, other = servers.ports["small"]["names"], servers.ports["small"]["port1"]
        status, robots = _get(machine.address, names, "n1.test", "/robots.txt")
        assert status == 200
        assert f"Sitemap: http://n1.test:{names}/sitemap.xml".encode() in robots
        _s, sitemap = _get(machine.address, names, "n1.test", "/sitemap.xml")
        for path in page_paths(3):
            assert f"<loc>http://n1.test:{names}{path}</loc>".encode() in sitemap
        _s, home = _get(machine.address, names, "n1.test", "/")
        assert b'href="/p1.html"' in home and b'href="/p2.html"' in home
        assert len(home) > 4000
        _s, robots = _get(machine.address, other, machine.address, "/robots.txt")
        assert f"Sitemap: http://{machine.address}:{other}/sitemap.xml".encode() in robots
        # A name the machine does not host on that port: 404, a worker's time all the same.
        status, _b = _get(machine.address, other, "n1.test", "/")
        assert status == 404
    reqs, _c = read_log(servers.log)
    assert [(r.host, r.port, r.status) for r in reqs][-1] == ("n1.test", other, 404)


def _req(host: str, arrival: float, end: float, *, port: int = 80, path: str = "/",
         queued: bool = False, start: float | None = None, machine: str = "small") -> Req:
    return Req(machine, arrival, arrival if start is None else start, end, queued, host, port,
               "http", path, 200, 100, "PoliteCrawler/1", 1)


def test_most_open_counts_spans_at_once() -> None:
    assert most_open([]) == 0
    assert most_open([(0, 1), (1, 2)]) == 1  # one ends as the next starts
    assert most_open([(0, 3), (1, 2), (1.5, 4), (3.5, 5)]) == 3


def test_gaps_are_per_host_name_across_ports() -> None:
    reqs = [_req("a.test", 0, 1, port=80), _req("a.test", 2, 3, port=81),
            _req("a.test", 2.5, 4, port=82), _req("b.test", 0, 1)]
    gaps, overlaps = gaps_by_name(reqs)
    assert sorted(gaps) == [-0.5, 1.0]
    assert overlaps == 1


def test_small_figures_from_a_log() -> None:
    m = Machine("small", "127.0.77.1", 2, 0.15, 2)
    m.sites = [("names", "http", "a.test"), ("names", "http", "b.test")]
    reqs = [
        _req("a.test", 0.0, 0.2, path="/robots.txt"),
        _req("b.test", 0.1, 0.5, start=0.2, queued=True, path="/robots.txt"),
        _req("a.test", 4.0, 4.2, path="/"), _req("a.test", 8.0, 8.2, path="/p1.html"),
        _req("b.test", 1.0, 1.2, path="/"),  # 0.5 s after its robots.txt: a short gap
        _req("a.test", 0.0, 1.0, machine="edge"),  # another machine: not counted
    ]
    f = small_figures(m, reqs, [])
    assert (f.requests, f.pages, f.offered) == (5, 3, 4)
    assert (f.sites_whole, f.sites) == (1, 2)
    assert f.most_open == 2 and f.most_open_name == 1
    assert f.queued == 1
    assert f.span == pytest.approx(8.2)
    busy = 0.2 + 0.3 + 0.2 + 0.2 + 0.2
    assert f.share_workers == pytest.approx(busy / (2 * 8.2))
    assert (f.short_gaps, f.overlaps, f.gaps) == (1, 0, 3)


def test_a_site_at_its_polite_ideal_scores_one() -> None:
    # Four requests, each 3 s (the rest) after the previous one's end: 3 x 3 s over 9.03 s.
    items = [_req("e.test", 3.01 * i, 3.01 * i + 0.01, machine="edge") for i in range(4)]
    assert site_ideal_fraction(items) == pytest.approx(9 / 9.04)
    slow = [_req("e.test", 6.0 * i, 6.0 * i + 0.01, machine="edge") for i in range(4)]
    assert site_ideal_fraction(slow) == pytest.approx(9 / 18.01)
    m = Machine("edge", "127.0.78.1", 64, 0.005, 4)
    m.sites = [("names", "http", "e.test"), ("names", "http", "f.test")]
    other = [_req("f.test", 6.0 * i, 6.0 * i + 0.01, machine="edge") for i in range(4)]
    f = edge_figures(m, items + other)
    assert f.median == pytest.approx((9 / 9.04 + 9 / 18.01) / 2)


def test_peak_busy_is_the_busiest_window() -> None:
    spans = [(0.0, 1.0), (20.0, 21.0), (22.0, 23.5), (29.0, 31.0)]
    assert peak_busy(spans, window=10.0) == pytest.approx(1.0 + 1.5 + 1.0)
