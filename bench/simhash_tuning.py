"""Choose SimHash normalisation, shingle size and distance by measurement.

On the corpus of tests/neardup_corpus.py (articles on one template; variants
differ by a date, a byline, one sentence, or date and byline): for each
setting, the recall of variants at each distance and the number of false
positives (pairs of different articles within that distance).

    .venv/bin/python -m bench.simhash_tuning [--articles 300]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from polite_crawler.policy.simhash import simhash
from tests.neardup_corpus import build_corpus


def _fingerprints(texts: list[str], digits: bool, shingle: int) -> np.ndarray:
    return np.array([simhash(t, shingle=shingle, digits=digits) for t in texts], dtype=np.uint64)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--articles", type=int, default=300)
    ap.add_argument("--seed", type=int, default=8)
    args = ap.parse_args(argv)
    corpus = build_corpus(args.articles, args.seed)
    n = len(corpus.articles)
    print(f"corpus: {n} articles, {len(corpus.variants)} variants, "
          f"{np.mean([len(a.split()) for a in corpus.articles]):.0f} words on average")
    kinds = sorted({v.kind for v in corpus.variants})
    base_of = np.array([v.base for v in corpus.variants])
    print("digits  shingle  k  recall  " + "  ".join(f"{k:>11}" for k in kinds)
          + "  false_pos  min_nondup")
    for digits in (False, True):
        for shingle in (1, 2, 3, 4, 5):
            fa = _fingerprints(corpus.articles, digits, shingle)
            fv = _fingerprints([v.text for v in corpus.variants], digits, shingle)
            d_var = np.bitwise_count(fv ^ fa[base_of])
            # Non-duplicates: article x article (i < j) and variant x other articles.
            d_aa = np.bitwise_count(fa[:, None] ^ fa[None, :])[np.triu_indices(n, 1)]
            d_va = np.bitwise_count(fv[:, None] ^ fa[None, :])
            other = base_of[:, None] != np.arange(n)[None, :]
            d_non = np.concatenate([d_aa, d_va[other]])
            q = np.quantile(d_non, [0.0001, 0.001, 0.01])
            print(f"{digits!s:>6}  {shingle:>7}  non-duplicate distance quantiles 1e-4/1e-3/1e-2:"
                  f" {q[0]:.0f}/{q[1]:.0f}/{q[2]:.0f}")
            for k in range(3, 13):
                recall = float(np.mean(d_var <= k))
                per = [float(np.mean(d_var[[v.kind == kd for v in corpus.variants]] <= k))
                       for kd in kinds]
                fp = int(np.sum(d_non <= k))
                if not 5 <= k <= 10:
                    continue
                print(f"{digits!s:>6}  {shingle:>7}  {k:>2}  {recall:6.3f}  "
                      + "  ".join(f"{p:11.3f}" for p in per)
                      + f"  {fp:9d}  {int(d_non.min()):10d}")
    # Speed of the chosen fingerprint.
    texts = corpus.articles
    t0 = time.process_time()
    for t in texts:
        simhash(t)
    dt = time.process_time() - t0
    print(f"fingerprint speed: {len(texts) / dt:.0f} docs/CPU-s "
          f"({np.mean([len(t) for t in texts]) / 1024:.1f} KiB of text each)")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
