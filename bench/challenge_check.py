"""What the challenge check costs a page: ``policy.challenges.detect_challenge`` on a
200 with no challenge header, as the gate calls it for every answer.

Pages: the python3-doc pages (``bench.realweb_nginx.DOCS``; their first 32 KiB, the
head the gate decodes, 93 KB a page whole) and the small pages of real text the polite
workload serves (``write_small_pages``, 5.4 KB). Process time over every page, ``--calls``
passes, best of ``--rounds``; with ``--old``, that tree's ``challenges.py`` is measured
too, old and new alternated round by round, and every verdict compared first (a
difference fails the run). The module imports nothing of the package, so an older
tree's file loads on its own (``git archive <commit> | tar -x -C /tmp/<dir>``).

``python -m bench.challenge_check [--old /tmp/<dir>] [--rounds 7] [--calls 5]``
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
MODULE = Path("polite_crawler/policy/challenges.py")

Detect = Callable[[int, dict[str, str], bytes], "str | None"]


def load(tree: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, tree / MODULE)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no {MODULE} under {tree}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def pages() -> dict[str, list[bytes]]:
    from bench.realweb_nginx import DOCS, write_small_pages

    docs = sorted(DOCS.resolve().rglob("*.html"))
    if not docs:
        raise SystemExit(f"no pages under {DOCS} (Debian's python3-doc)")
    with tempfile.TemporaryDirectory() as tmp:
        write_small_pages(Path(tmp), 300)
        small = [p.read_bytes() for p in sorted(Path(tmp).glob("*.html"))]
    return {"large": [p.read_bytes()[:32 * 1024] for p in docs], "small": small}


def cost(detect: Detect, heads: list[bytes], calls: int) -> float:
    """Microseconds a page, process time, over ``calls`` passes of ``heads``."""
    headers: dict[str, str] = {}
    t0 = time.process_time()
    for _ in range(calls):
        for head in heads:
            detect(200, headers, head)
    return (time.process_time() - t0) / (calls * len(heads)) * 1e6


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.challenge_check")
    parser.add_argument("--old", type=Path, help="a tree to compare with (old)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=5)
    args = parser.parse_args(argv)
    sets = pages()
    trees = {"new": ROOT} if args.old is None else {"old": args.old, "new": ROOT}
    detects: dict[str, Detect] = {
        label: load(tree, f"_challenges_{label}").detect_challenge
        for label, tree in trees.items()}
    if "old" in detects:
        for heads in sets.values():
            for head in heads:
                for status in (200, 403, 404, 503):
                    old, new = (detects[k](status, {}, head) for k in ("old", "new"))
                    if old != new:
                        raise SystemExit(f"verdicts differ on a page ({status}): {old} / {new}")
    best = {(label, kind): float("inf") for label in detects for kind in sets}
    for _ in range(args.rounds):
        for label, detect in detects.items():
            for kind, heads in sets.items():
                best[label, kind] = min(best[label, kind], cost(detect, heads, args.calls))
    for kind, heads in sets.items():
        size = sum(map(len, heads)) / len(heads) / 1024
        line = ", ".join(f"{label} {best[label, kind]:.1f} us" for label in detects)
        ratio = (f" (new / old {best['new', kind] / best['old', kind]:.3f})"
                 if "old" in detects else "")
        print(f"{kind} pages ({len(heads)}, head {size:.1f} KiB): {line} a page{ratio}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
