"""SimHash speed: this project's numpy SimHash against the ``simhash`` package; index lookups.

* fingerprints per CPU-second on the near-duplicate corpus (tests/neardup_corpus.py)
  and on the main text of the Python documentation (python3-doc), when installed;
* the ``simhash`` package (2.1.x, pure Python, md5 per feature) on the same word
  3-shingles, when importable: it is not a dependency, so install it aside, e.g.
  ``pip install --no-deps --target /tmp/simhash_pkg simhash`` and pass
  ``--simhash-path /tmp/simhash_pkg``;
* :class:`SimHashIndex` lookups at 100,000 (and 1,000,000) stored fingerprints.

    .venv/bin/python -m bench.simhash_speed [--simhash-path DIR] [--big]
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
from pathlib import Path
from typing import Any

import numpy as np

from polite_crawler.policy.simhash import MAX_DISTANCE, SHINGLE, SimHashIndex, simhash
from polite_crawler.policy.text import words

DOCS = Path("/usr/share/doc/python3/html")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _rate(texts: list[str], fn: Any) -> float:
    cpu0 = _cpu()
    for t in texts:
        fn(t)
    return len(texts) / (_cpu() - cpu0)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--simhash-path", help="a directory holding the simhash package")
    ap.add_argument("--big", action="store_true", help="also 1,000,000 stored fingerprints")
    a = ap.parse_args(argv)
    from tests.neardup_corpus import build_corpus

    sets = {"corpus": build_corpus(300).articles}
    files = sorted(DOCS.resolve().rglob("*.html")) if DOCS.exists() else []
    if files:
        from polite_crawler.extract import main_text

        sets["python-docs"] = [main_text(f.read_bytes()).text for f in files]
    package: Any = None
    if a.simhash_path:
        sys.path.insert(0, a.simhash_path)
    try:
        import simhash as package
    except ImportError:
        print("simhash package not importable: skipped (see the module docstring)")
    for name, texts in sets.items():
        kib = sum(len(t) for t in texts) / len(texts) / 1024
        print(f"{name}: {len(texts)} texts, {kib:.1f} KiB of text each")
        print(f"  numpy SimHash (this project)    {_rate(texts, simhash):8.0f} docs/CPU-s")
        if package is not None:
            def pkg(t: str) -> int:
                ws = words(t)
                feats = [" ".join(ws[i:i + SHINGLE]) for i in range(max(1, len(ws) - SHINGLE + 1))]
                return int(package.Simhash(feats).value)

            print(f"  simhash package, same shingles {_rate(texts, pkg):8.0f} docs/CPU-s")
            try:
                rate = f"{_rate(texts, lambda t: package.Simhash(t).value):8.0f} docs/CPU-s"
            except OverflowError as exc:  # its uint8 weights under numpy 2
                rate = f"fails: {exc}"
            print(f"  simhash package, its defaults  {rate}")
    for n in (100_000, 1_000_000) if a.big else (100_000,):
        rng = np.random.default_rng(1)
        stored = [int(x) for x in rng.integers(0, 1 << 63, size=n, dtype=np.int64)]
        idx = SimHashIndex(MAX_DISTANCE)
        cpu0 = _cpu()
        idx.add_many(stored)
        add = (_cpu() - cpu0) / n
        r = random.Random(2)
        queries = []
        for _ in range(2000):
            h = stored[r.randrange(n)]
            for b in r.sample(range(64), r.randint(0, MAX_DISTANCE)):
                h ^= 1 << b
            queries.append(h)
        cpu0 = _cpu()
        found = sum(1 for q in queries if idx.near(q))
        hit = (_cpu() - cpu0) / len(queries)
        cpu0 = _cpu()
        for q in rng.integers(0, 1 << 63, size=2000, dtype=np.int64):
            idx.near(int(q))
        miss = (_cpu() - cpu0) / 2000
        print(f"index, {n:,} stored (k={MAX_DISTANCE}, {idx.bands} bands, probe radius "
              f"{idx.radius}): add {add * 1e6:.1f} us, lookup {hit * 1e3:.3f} ms (near, found "
              f"{found}/{len(queries)}), {miss * 1e3:.3f} ms (no match)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
