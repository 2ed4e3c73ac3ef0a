"""The real-web bench's nginx: what it serves, and that it stops on every way out."""

from __future__ import annotations

import gzip
import http.client
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bench.realweb_nginx import (
    NGINX,
    Nginx,
    free_port,
    host_order,
    hosts_for,
    make_readable_tmp,
    raw_size,
    read_log,
    write_site_files,
    write_small_pages,
)
from tests.services import needs

pytestmark = needs(not NGINX.exists(), "nginx is not installed (scripts/system-deps.sh bench)")

if TYPE_CHECKING:
    from collections.abc import Iterator

DOCS = Path("/usr/share/doc/python3/html")


@pytest.fixture
def web_dir() -> Iterator[Path]:
    """A directory nginx's workers (nobody, when the tests run as root) can read."""
    path = make_readable_tmp("realweb-test-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@needs(not DOCS.is_dir(), "python3-doc is not installed (scripts/system-deps.sh)")
def test_sites_robots_sitemaps_and_the_log(web_dir: Path) -> None:
    tmp_path = web_dir
    hosts, port = hosts_for(2), free_port()
    paths = write_small_pages(tmp_path / "pages", 3, size=2000)
    nginx = Nginx(tmp_path, hosts, port, tmp_path / "pages")
    assert write_site_files(nginx.sites, hosts, port, paths) == 6
    with nginx:
        conn = http.client.HTTPConnection(hosts[1], port, timeout=5)
        conn.request("GET", "/robots.txt")
        robots = conn.getresponse().read().decode()
        assert f"Sitemap: http://{hosts[1]}:{port}/sitemap.xml" in robots
        conn.request("GET", "/sitemap.xml")
        sitemap = conn.getresponse().read().decode()
        assert f"<loc>http://{hosts[1]}:{port}/p2.html</loc>" in sitemap
        assert f"http://{hosts[0]}:" not in sitemap  # each site its own
        conn.request("GET", "/p1.html", headers={"Accept-Encoding": "gzip",
                                                 "User-Agent": "test-agent"})
        resp = conn.getresponse()
        body = resp.read()
        assert resp.getheader("Content-Type") == "text/html"  # no charset, as nginx sends it
        assert resp.getheader("Content-Encoding") == "gzip"
        assert b"<p>" in gzip.decompress(body)
        pid = nginx.proc.pid if nginx.proc else -1
    assert not _alive(pid)
    hits = read_log(nginx.access_log)
    assert [h.path for h in hits] == ["/robots.txt", "/sitemap.xml", "/p1.html"]
    assert hits[-1].is_page and hits[-1].host == hosts[1] and hits[-1].agent == "test-agent"


def test_nginx_stops_when_the_bench_fails(web_dir: Path) -> None:
    tmp_path = web_dir
    (tmp_path / "pages").mkdir()
    nginx = Nginx(tmp_path, hosts_for(1), free_port(), tmp_path / "pages")
    with pytest.raises(RuntimeError, match="bench failed"), nginx:
        assert nginx.proc is not None
        pid = nginx.proc.pid
        assert _alive(pid)
        raise RuntimeError("bench failed")
    assert not _alive(pid)
    assert not (tmp_path / "nginx.pid").exists()  # nginx removed it on its way out


def test_each_site_lists_its_pages_in_its_own_stable_order(web_dir: Path) -> None:
    paths = ["/"] + [f"/p{i}.html" for i in range(1, 40)]
    hosts, port = hosts_for(3), 8000
    orders = {h: host_order(h, paths) for h in hosts}
    for order in orders.values():
        assert order[0] == "/" and sorted(order) == sorted(paths)
    assert len({tuple(o) for o in orders.values()}) == 3  # a different order on each host
    assert host_order(hosts[0], paths) == orders[hosts[0]]  # the same from run to run
    write_site_files(web_dir / "sites", hosts, port, paths)
    listed = re.findall(r"<loc>http://[^/]+(/[^<]*)</loc>",
                        (web_dir / "sites" / hosts[1] / "sitemap.xml").read_text())
    assert listed == orders[hosts[1]]
    write_site_files(web_dir / "sites", hosts, port, paths, order="sorted")
    listed = re.findall(r"<loc>http://[^/]+(/[^<]*)</loc>",
                        (web_dir / "sites" / hosts[1] / "sitemap.xml").read_text())
    assert listed == paths
    assert raw_size(web_dir / "sites" / hosts[1], "/sitemap.xml") == \
        (web_dir / "sites" / hosts[1] / "sitemap.xml").stat().st_size
    assert raw_size(web_dir, "/nothing.html") is None


@needs(not DOCS.is_dir(), "python3-doc is not installed (scripts/system-deps.sh)")
def test_scrapys_floor_fetches_only_the_pages_it_is_given(web_dir: Path) -> None:
    """The bench's floor (``bench.realweb_stock --floor``) asks for the listed URLs and
    nothing else: no robots.txt, no sitemap, no link of the pages."""
    hosts, port = hosts_for(2), free_port()
    paths = write_small_pages(web_dir / "pages", 4, size=1000)
    nginx = Nginx(web_dir, hosts, port, web_dir / "pages")
    write_site_files(nginx.sites, hosts, port, paths)
    roots = web_dir / "roots.txt"
    roots.write_text("".join(f"http://{h}:{port}/\n" for h in hosts))
    listed = [f"http://{hosts[0]}:{port}/p2.html", f"http://{hosts[1]}:{port}/",
              f"http://{hosts[1]}:{port}/p3.html"]
    urls = web_dir / "floor-urls.txt"
    urls.write_text("\n".join(listed) + "\n")
    with nginx:
        done = subprocess.run(
            [sys.executable, "-m", "bench.realweb_stock", "--urls", str(roots),
             "--floor", str(urls), "--log-file", str(web_dir / "floor.log")],
            cwd=Path(__file__).resolve().parent.parent, timeout=120, check=False)
        assert done.returncode == 0
    hits = read_log(nginx.access_log)
    assert sorted((h.host, h.path) for h in hits) == sorted(
        [(hosts[0], "/p2.html"), (hosts[1], "/"), (hosts[1], "/p3.html")])
    assert all(h.status == 200 and h.agent == "StockScrapyBench/1.0" for h in hits)
