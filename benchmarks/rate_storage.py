"""``coded-shuffle rate`` with a storage of ``M`` batches against the same command without.

Runs ``coded-shuffle rate --points N --workers K`` and the same with ``--storage M`` (default
``N = 10^7``, ``K = 64``, ``M = 2``), alternating, ``--repeats`` times each, every run a process
of its own as a user starts it; prints each run's wall seconds and peak resident memory, then the
medians and the ratio storage / without. One run of each is made first and not counted, so that
the compiled kernels are in their cache.

Measured (2 shared cores, other jobs running; docs/benchmarks.md, "Rates with storage"): at
``N = 10^7`` the command with storage took 14 to 26 times as long as without while its loads and
bound ran Python loops, and about twice as long (median 2.16x) once they were compiled or counted
in closed form; at ``N = 10^8``, 1.2 times.

Run:  python benchmarks/rate_storage.py [--points 10000000] [--workers 64] [--storage 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def timed(argv: list[str]) -> tuple[float, float]:
    """``(wall seconds, peak resident MB)`` of one process running ``argv``."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed with status {proc.returncode}")
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000_000)
    ap.add_argument("--workers", type=int, default=64)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    base = [
        sys.executable,
        "-m",
        "coded_shuffle",
        "rate",
        "--points",
        str(args.points),
        "--workers",
        str(args.workers),
    ]
    runs = {"without": base, f"storage {args.storage}": base + ["--storage", str(args.storage)]}
    for argv in runs.values():
        timed(argv)  # kernels compiled and cached, files read once
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.repeats):
        for name, argv in runs.items():
            s, mb = timed(argv)
            seconds[name].append(s)
            print(f"run {r + 1}  {name:>10}  {s:7.2f} s  {mb:7.0f} MB", flush=True)
    med = {name: statistics.median(v) for name, v in seconds.items()}
    names = list(runs)
    print(f"median: {names[0]} {med[names[0]]:.2f} s, {names[1]} {med[names[1]]:.2f} s, "
          f"ratio {med[names[1]] / med[names[0]]:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
