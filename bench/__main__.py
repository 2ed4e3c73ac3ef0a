"""Run every benchmark with its default (a few minutes each) arguments.

``python -m bench`` runs all; ``python -m bench NAME ...`` runs the named ones.
Each benchmark is a module ``bench/<name>.py`` with a ``main(argv) -> int``.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def _names() -> list[str]:
    here = Path(__file__).parent
    return sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))


def main(argv: list[str]) -> int:
    names = argv or _names()
    failed = []
    for name in names:
        mod = importlib.import_module(f"bench.{name}")
        if not hasattr(mod, "main"):
            continue
        print(f"== bench.{name}", flush=True)
        t0 = time.perf_counter()
        rc = mod.main([])
        print(f"== bench.{name}: exit {rc} in {time.perf_counter() - t0:.1f}s\n", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
