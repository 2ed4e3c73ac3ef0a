"""The canonical form of real links: nanoseconds per URL.

``python -m bench.urls_canonical [--repeat N] [--against REV] [--docs DIR]``. The
hrefs of the Python documentation's HTML pages (python3-doc, 500-odd pages),
joined to ``https://docs.python.org/3/<page>`` as the crawler joins them, and
kept when http(s): every URL is canonicalised once per run, best of N runs.
``--against REV`` also times ``policy/urls.py`` as it is at git revision REV
(for a before/after figure on the same URLs and machine). The share of URLs the
fast path takes is reported too, the general path timed alone, and the figures
for the distinct URLs with their fragment cut (most of these hrefs point into a page).
"""

from __future__ import annotations

import argparse
import contextlib
import html
import re
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urljoin

if TYPE_CHECKING:
    from collections.abc import Callable

DOCS = Path("/usr/share/doc/python3/html")
_HREF = re.compile(rb"""href\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.IGNORECASE)


def real_hrefs(root: Path = DOCS) -> list[str]:
    urls: list[str] = []
    for page in sorted(root.rglob("*.html")):
        base = "https://docs.python.org/3/" + page.relative_to(root).as_posix()
        for m in _HREF.finditer(page.read_bytes()):
            raw = (m.group(1) or m.group(2) or b"").decode("utf-8", "replace")
            url = urljoin(base, html.unescape(raw).strip())
            if url.startswith(("http://", "https://")):
                urls.append(url)
    return urls


def _module_at(rev: str) -> types.ModuleType:
    src = subprocess.run(["git", "show", f"{rev}:polite_crawler/policy/urls.py"],
                         check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType(f"urls_at_{rev}")
    exec(compile(src, f"urls.py@{rev}", "exec"), mod.__dict__)
    return mod


def time_per_url(canonicalize: Callable[[str], str], urls: list[str], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for url in urls:
            with contextlib.suppress(ValueError):
                canonicalize(url)
        best = min(best, time.perf_counter_ns() - t0)
    return best / len(urls)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.urls_canonical")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--against", default=None, help="git revision to time as well")
    ap.add_argument("--docs", type=Path, default=DOCS)
    args = ap.parse_args(argv)
    if not args.docs.is_dir():
        print(f"no HTML documentation at {args.docs} (Debian package python3-doc)")
        return 0
    from polite_crawler.policy import urls as current

    hrefs = real_hrefs(args.docs)
    unique = sorted(set(hrefs))
    fast = sum(current._fast(u, current._NONE) is not None for u in unique)
    print(f"{len(hrefs)} hrefs, {len(unique)} distinct; fast path takes "
          f"{100 * fast / len(unique):.1f} % of the distinct ones")
    def general(url: str) -> str:  # the general path alone, as links the fast path refuses
        return current._canonicalize_slow(url, url, url.split(":", 1)[0], current._NONE)

    rows = [("current", current.canonicalize), ("general path", general)]
    if args.against:
        rows.append((args.against, _module_at(args.against).canonicalize))
    bare = sorted({u.partition("#")[0] for u in unique})
    for name, fn in rows:
        every = time_per_url(fn, hrefs, args.repeat)
        distinct = time_per_url(fn, unique, args.repeat)
        nofrag = time_per_url(fn, bare, args.repeat)
        print(f"{name:>13}: {every:6.0f} ns per href, {distinct:6.0f} ns per distinct URL, "
              f"{nofrag:6.0f} ns per distinct URL without its fragment ({len(bare)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
