"""Where a rest's overrun goes, from a kept small-site run (the rest's timers).

    .venv/bin/python -m bench.realweb --workload polite --skip-stock --keep DIR
    .venv/bin/python -m bench.rest_split DIR [--by-second]

Matches each host's requests in nginx's log (start, end) with the crawler's access
log (``sent``, ``done``, ``rest``), one request in flight per host so the orders agree,
and splits each gap beyond the rest set:

* nginx's end -> the gate's ``done`` (the reactor reaching the response);
* nginx's end + the rest -> the next ``sent`` (the dispatch late: the frontier's wake,
  the engine's loop, the downloader middlewares up to the gate);
* ``sent`` -> nginx's start (the gate to the socket: signing, the handler, the write).

``--by-second`` lists, per second of the run (by due time), the requests more than
0.5 s late: it shows whether lateness is spread or comes in one round.
"""

from __future__ import annotations

import argparse
import glob
import json
from collections import defaultdict
from pathlib import Path
from typing import Any


def _quantiles(values: list[float]) -> str:
    v = sorted(values)
    n = len(v)
    if not n:
        return "(none)"
    return f"median {v[n // 2]:.3f} p90 {v[int(n * 0.9)]:.3f} p99 {v[int(n * 0.99)]:.3f}"


def _read(run: Path) -> tuple[dict[str, list[tuple[float, float]]], dict[str, list[Any]]]:
    served: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for line in (run / "polite" / "access.log").read_text().splitlines():
        parts = line.split()
        end, took = float(parts[1]), float(parts[2])
        served[parts[0]].append((end - took, end))
    ours: dict[str, list[Any]] = defaultdict(list)
    for path in glob.glob(str(run / "polite" / "*" / "state" / "access-*.jsonl")):
        for line in Path(path).read_text().splitlines():
            record = json.loads(line)
            if record.get("sent") is None:
                continue
            host = record["origin"].split("//", 1)[1].rsplit(":", 1)[0]
            ours[host].append(record)
    return served, ours


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench.rest_split", description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a directory kept by bench.realweb --keep")
    ap.add_argument("--by-second", action="store_true")
    args = ap.parse_args()
    served, ours = _read(args.run)
    over: list[float] = []
    to_gate: list[float] = []
    to_sent: list[float] = []
    to_wire: list[float] = []
    late: dict[int, list[float]] = defaultdict(list)
    t0 = min((r["sent"] for v in ours.values() for r in v), default=0.0)
    for host, entries in served.items():
        mine = sorted(ours.get(host, []), key=lambda r: r["sent"])
        if len(mine) != len(entries):
            continue  # a host whose logs do not pair up (should not happen)
        for (_s1, end), (start2, _e2), a, b in zip(entries, entries[1:], mine, mine[1:],
                                                   strict=False):
            rest = a["rest"] or 0.0
            over.append(start2 - end - rest)
            to_gate.append(a["done"] - end)
            to_sent.append(b["sent"] - (end + rest))
            to_wire.append(start2 - b["sent"])
            late[int(end + rest - t0)].append(b["sent"] - (end + rest))
    print(f"gaps {len(over)}")
    print("overrun (nginx start - end - rest):", _quantiles(over))
    print("nginx end -> gate done:            ", _quantiles(to_gate))
    print("nginx end + rest -> next sent:     ", _quantiles(to_sent))
    print("sent -> nginx start:               ", _quantiles(to_wire))
    if args.by_second:
        for second in sorted(late):
            values = late[second]
            n = sum(1 for x in values if x > 0.5)
            if n:
                print(f"  second {second}: {len(values)} due, {n} over 0.5 s late, "
                      f"worst {max(values):.2f} s")


if __name__ == "__main__":
    main()
