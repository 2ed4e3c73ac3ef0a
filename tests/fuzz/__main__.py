"""``python -m tests.fuzz [--seconds N] [TARGET ...]``: fuzz each parser for a bounded time.

Every target runs in its own process (libFuzzer exits when it is done or when it
finds a crash) for ``--seconds`` (default 20, or FUZZ_SECONDS). A crashing input
is written to ``tests/fuzz/findings/<target>-crash-<sha1>``: turn it into a
regression test, fix the parser, delete the file. The corpus lives in a
temporary directory (nothing is written to the tree unless something crashes).
Exit status 1 when any target crashed, 2 when atheris is not installed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz.targets import MISSING, TARGETS

FINDINGS = Path(__file__).parent / "findings"


def _run(name: str, seconds: int) -> tuple[bool, str]:
    FINDINGS.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as corpus:
        cmd = [sys.executable, "-m", "tests.fuzz.atheris_main", name,
               f"-max_total_time={seconds}", "-rss_limit_mb=2048", "-timeout=20",
               "-max_len=65536", f"-artifact_prefix={FINDINGS}/{name}-", "-print_final_stats=1",
               corpus]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                              timeout=seconds + 120, check=False,
                              cwd=Path(__file__).parents[2])
        took = time.monotonic() - t0
    out = proc.stderr + proc.stdout
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)
    cov = re.findall(r"cov: (\d+)", out)
    crashed = proc.returncode != 0
    summary = (f"{name:14s} {'CRASH' if crashed else 'ok':5s} {took:6.1f} s  "
               f"runs {runs[-1] if runs else '?':>9s}  cov {cov[-1] if cov else '?':>6s}")
    if crashed:
        tail = "\n".join(out.splitlines()[-40:])
        summary += f"\n{tail}\n"
    return not crashed, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    parser.add_argument("targets", nargs="*", help=f"default: all of {', '.join(TARGETS)}")
    parser.add_argument("--seconds", type=int, default=int(os.environ.get("FUZZ_SECONDS", "20")))
    args = parser.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("atheris is not installed: pip install -e '.[fuzz]' (make fuzz does)")
        return 2
    names = args.targets or list(TARGETS)
    for name, why in MISSING.items():
        if name in names or not args.targets:
            print(f"{name:14s} skip  ({why})")
    ok = True
    for name in names:
        if name not in TARGETS:
            continue
        good, summary = _run(name, args.seconds)
        ok = ok and good
        print(summary, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
