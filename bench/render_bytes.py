"""What a rendered page costs the site: bytes and requests served per page, CPU and memory.

The client-rendered test site (:mod:`demo.web.rendered`: an HTML shell,
its script, a JSON call, plus a stylesheet, an image, a web font, a favicon, and
an analytics tag on another loopback host) with ``--pages`` stories, read four ways,
each in its own process:

1. ``plain``: the crawler fetches each shell (no browser; an empty main text);
2. ``rendered``: the crawler renders each page (``meta["polite_render"]``);
3. ``unblocked``: Playwright with one default context, nothing blocked, each page
   opened, loaded to network idle and closed (cache shared across pages);
4. ``fresh``: the same with a fresh default context for every page (a renderer that
   opens a context per page).

Bytes are the body bytes on the wire from the server's own log (gzip when the
client asks for it), per page; robots.txt and the crawler's /sitemap.xml probe
are left out of the per-page figures. "Shell + data" is what the page needs: the
shell and its JSON (the plain fetch's bytes plus the JSON's). CPU is user + system
time of the crawler's process and, separately, of the browser's processes (all
descendants, sampled every 100 ms; the sampler's own CPU left out); memory is
the browser's peak PSS.

    .venv/bin/python -m bench.render_bytes [--pages 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
SITE, BEACON = "127.0.19.11", "127.0.19.12"
TICK = os.sysconf("SC_CLK_TCK")


class _Sampler(threading.Thread):
    """CPU seconds and peak memory of this process's descendants (the browser)."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.cpu: dict[int, float] = {}
        self.peak = 0
        self.own_cpu = 0.0  # this thread's, taken off the crawler's CPU
        self._halt = threading.Event()

    def run(self) -> None:
        from polite_crawler.render.memory import _children_table, _resident

        while not self._halt.wait(0.1):
            table = _children_table()
            todo, pids = list(table.get(os.getpid(), [])), []
            while todo:
                pid = todo.pop()
                pids.append(pid)
                todo.extend(table.get(pid, []))
            total = 0
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
                    self.cpu[pid] = (int(fields[11]) + int(fields[12])) / TICK
                except (OSError, ValueError, IndexError):
                    continue
                total += _resident(pid)
            self.peak = max(self.peak, total)
            self.own_cpu = time.thread_time()

    def stop(self) -> dict[str, float]:
        self._halt.set()
        self.join()
        return {"browser_cpu": sum(self.cpu.values()), "browser_peak": self.peak,
                "sampler_cpu": self.own_cpu}


def _self_cpu() -> float:
    t = os.times()
    return t.user + t.system


def crawl_main(argv: list[str]) -> int:
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from polite_crawler.items import page_item
    from tests.crawl import project_settings_dict

    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", nargs="+")
    ap.add_argument("--render", action="store_true")
    ap.add_argument("--state")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    texts: list[int] = []

    class BenchSpider(scrapy.Spider):
        name = "render_bench"
        start_urls = a.urls

        async def start(self) -> Any:
            for i, url in enumerate(self.start_urls):
                meta = {"polite_render": True, "polite_render_wait": "#root[data-ready]"} \
                    if a.render else {}
                yield scrapy.Request(url, meta=meta, priority=-i, callback=self.parse)

        def parse(self, response: Any) -> Any:
            item = page_item(response)
            texts.append(len(str(item["text"] or "").split()))
            yield item

    sampler = _Sampler()
    sampler.start()
    cpu0 = _self_cpu()
    process = CrawlerProcess(project_settings_dict(
        POLITE_STATE_DIR=a.state, LOG_LEVEL="WARNING", POLITE_REST_PAGE=0.05,
        POLITE_RENDER="meta" if a.render else "", POLITE_RENDER_BROWSER=CHROMIUM,
        POLITE_RENDER_BLOCK_HOSTS=[BEACON]))
    result: dict[str, Any] = {}

    def closed(spider: Any) -> None:  # the browser is still up: sample it now
        result.update(sampler.stop())
        stats = crawler.stats.get_stats() if crawler.stats else {}
        result["memory_stat"] = stats.get("polite/render/memory_max_bytes", 0)
        result["blocked"] = {k.rsplit("/", 1)[1]: v for k, v in stats.items()
                             if k.startswith("polite/render/blocked/")}

    crawler = process.create_crawler(BenchSpider)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler)
    process.start()
    result["crawler_cpu"] = _self_cpu() - cpu0 - result.get("sampler_cpu", 0.0)
    result["words"] = texts
    Path(a.out).write_text(json.dumps(result))
    return 0


def browser_main(argv: list[str]) -> int:
    from playwright.async_api import async_playwright

    ap = argparse.ArgumentParser()
    ap.add_argument("--urls", nargs="+")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--out")
    a = ap.parse_args(argv)
    sampler = _Sampler()
    sampler.start()
    cpu0 = _self_cpu()

    async def run() -> None:
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=CHROMIUM, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"])
            context = None if a.fresh else await browser.new_context()
            for url in a.urls:
                ctx = context or await browser.new_context()
                page = await ctx.new_page()
                await page.goto(url, wait_until="networkidle")
                await page.close()
                if context is None:
                    await ctx.close()
            result.update(sampler.stop())
            await browser.close()

    result: dict[str, Any] = {}
    asyncio.run(run())
    result["crawler_cpu"] = _self_cpu() - cpu0 - result.get("sampler_cpu", 0.0)
    Path(a.out).write_text(json.dumps(result))
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--crawl"]:
        return crawl_main(argv[1:])
    if argv[:1] == ["--browser"]:
        return browser_main(argv[1:])
    from demo.web.rendered import BeaconSite, RenderedSite
    from demo.web.server import TestWeb

    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=20)
    a = ap.parse_args(argv)
    if not os.path.exists(CHROMIUM):
        print(f"skipped: {CHROMIUM} is missing (apt-get install chromium)")
        return 0
    site = RenderedSite("http://x", stories=a.pages)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    rows: dict[str, dict[str, Any]] = {}
    with TestWeb({SITE: site, BEACON: BeaconSite()}) as web, \
            tempfile.TemporaryDirectory(prefix="render-bench-") as tmp:
        site.__init__(f"http://{BEACON}:{web.port}", stories=a.pages)
        urls = [web.url(SITE, f"/story/{n}") for n in range(1, a.pages + 1)]
        modes = {
            "plain": ["--crawl", "--state", f"{tmp}/plain"],
            "rendered": ["--crawl", "--render", "--state", f"{tmp}/rendered"],
            "unblocked": ["--browser"],
            "fresh": ["--browser", "--fresh"],
        }
        for name, args in modes.items():
            start = len(web.log)
            out = f"{tmp}/{name}.json"
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "bench.render_bytes", *args, "--out", out,
                            "--urls", *urls], cwd=ROOT, env=env, check=True)
            row: dict[str, Any] = json.loads(Path(out).read_text())
            log = [e for e in web.log[start:] if e.path not in ("/robots.txt", "/sitemap.xml")]
            row["wall"] = time.perf_counter() - t0
            row["site_bytes"] = sum(e.bytes_sent for e in log if e.host == SITE)
            row["site_requests"] = sum(e.host == SITE for e in log)
            row["third_bytes"] = sum(e.bytes_sent for e in log if e.host != SITE)
            row["third_requests"] = sum(e.host != SITE for e in log)
            row["json_bytes"] = sum(e.bytes_sent for e in log if e.path.startswith("/api/story/"))
            rows[name] = row

    n = a.pages
    need = (rows["plain"]["site_bytes"] + rows["rendered"]["json_bytes"]) / n
    print(f"{n} client-rendered pages; 'shell + data' (shell and its JSON, as served) "
          f"= {need:.0f} bytes a page")
    print(f"{'mode':<11}{'site B/page':>12}{'req/page':>9}{'3rd-party B/page':>17}"
          f"{'3rd req':>8}{'x need':>8}{'crawler CPU ms/p':>17}{'browser CPU ms/p':>17}"
          f"{'browser peak MB':>16}{'wall s':>8}")
    for name, r in rows.items():
        total = r["site_bytes"] + r["third_bytes"]
        print(f"{name:<11}{r['site_bytes'] / n:>12.0f}{r['site_requests'] / n:>9.2f}"
              f"{r['third_bytes'] / n:>17.0f}{r['third_requests'] / n:>8.2f}"
              f"{total / n / need:>8.2f}{1000 * r['crawler_cpu'] / n:>17.1f}"
              f"{1000 * r.get('browser_cpu', 0.0) / n:>17.1f}"
              f"{r.get('browser_peak', 0) / 1e6:>16.0f}{r['wall']:>8.1f}")
    ours = rows["rendered"]["site_bytes"] + rows["rendered"]["third_bytes"]
    for name in ("unblocked", "fresh"):
        theirs = rows[name]["site_bytes"] + rows[name]["third_bytes"]
        print(f"rendered / {name}: {ours / theirs:.3f} of the bytes")
    words = rows["rendered"].get("words") or []
    print(f"rendered main text: {min(words, default=0)}..{max(words, default=0)} words a page "
          f"(plain: {max(rows['plain'].get('words') or [0])}); blocked by the crawler: "
          f"{rows['rendered'].get('blocked')}; memory stat (max PSS after a render): "
          f"{rows['rendered'].get('memory_stat', 0) / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
