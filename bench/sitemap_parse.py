"""CPU per sitemap entry of the parse alone (:func:`polite_crawler.policy.sitemaps.parse_sitemap`).

A urlset of ``--entries`` URLs (``<loc>`` and ``<lastmod>`` each, one host) parsed in this
process, best of ``--repeat``; CPU seconds per 100,000 entries. What the crawl adds after
the parse (URL rules, the frontier's seen set and queue) is measured end to end by
``python -m bench.realweb --workload discovery``.

    .venv/bin/python -m bench.sitemap_parse [--entries N] [--repeat K]
"""

from __future__ import annotations

import argparse
import resource
import sys

from polite_crawler.policy.sitemaps import parse_sitemap


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sitemap(base: str, n: int) -> bytes:
    entries = "".join(f"<url><loc>{base}/p{i}/page-{i}.html</loc><lastmod>2026-01-02</lastmod>"
                      "</url>\n" for i in range(n))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/'
            f'schemas/sitemap/0.9">\n{entries}</urlset>\n').encode()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.sitemap_parse")
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    base = "http://127.0.1.7:8080"
    body = sitemap(base, a.entries)
    best = float("inf")
    for _ in range(max(a.repeat, 1)):
        cpu = _cpu()
        result = parse_sitemap(body, f"{base}/sitemap.xml", scope=f"{base}/",
                               max_urls=a.entries)
        best = min(best, _cpu() - cpu)
    n = len(result.pages)
    print(f"{n} entries ({len(body) / 1e6:.1f} MB): {best * 1e6 / n:.2f} us an entry, "
          f"{best * 100_000 / n:.2f} CPU-s per 100,000 (best of {a.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
