"""Per-link URL reads on the links of the python3-doc pages, as four sites would link them.

``python -m bench.link_reads [LABEL]``: the links :func:`extract_links` finds on every
page of /usr/share/doc/python3/html under four hosts; for each, :func:`host_of`,
:func:`continues_trail` (page, link) and :func:`url_trap` of its canonical form. Best
of 5 rounds, process time, microseconds a link and milliseconds a page. Run it from two
trees in turn (``PYTHONPATH=<tree>``) to compare versions (bench/PROFILE.md).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from polite_crawler.policy import urls
from polite_crawler.policy.links import extract_links
from polite_crawler.policy.traps import TrapLimits, continues_trail, url_trap
from polite_crawler.policy.urls import canonicalize, host_of

DOCS = Path("/usr/share/doc/python3/html")
SITES = 4


def main(argv: list[str]) -> int:
    label = argv[0] if argv else "this tree"
    files = sorted(DOCS.rglob("*.html"))
    if not files:
        print(f"no HTML under {DOCS}: apt-get install python3-doc", file=sys.stderr)
        return 1
    pairs: list[tuple[str, str]] = []
    for site in range(SITES):
        for f in files:
            page = f"http://site-{site:02d}.test/{f.relative_to(DOCS)}"
            links = extract_links(f.read_bytes(), page, "utf-8", max_links=5000).links
            pairs.extend((page, link.url) for link in links)
    canon = [canonicalize(link) for _, link in pairs]
    limits = TrapLimits(max_depth=10, max_url_length=2000, max_query_params=5,
                        max_segment_repeats=3)
    best: dict[str, float] = {}
    for _ in range(5):
        memo = getattr(urls, "_HOSTS", None)
        if isinstance(memo, dict):
            memo.clear()
        for name, run in (("host_of", lambda: [host_of(c) for _, c in pairs]),
                          ("continues_trail", lambda: [continues_trail(p, c) for p, c in pairs]),
                          ("url_trap", lambda: [url_trap(c, 2, limits) for c in canon])):
            t0 = time.process_time()
            run()
            best[name] = min(best.get(name, float("inf")), time.process_time() - t0)
    n, pages = len(pairs), SITES * len(files)
    each = ", ".join(f"{k} {v / n * 1e6:.2f} us" for k, v in best.items())
    print(f"{label}: {n} links, {n / pages:.1f} a page; {each}; "
          f"{sum(best.values()) / pages * 1e3:.3f} ms a page")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
