"""``coded-shuffle run --cache-dir``: a job restarted from its workers' cache files against a cold
start, side by side for each ``K`` and ``M``.

For ``K`` in ``--workers`` and ``M`` in ``--storage``, on the same random records (``--points`` of
``--record-bytes``, seed 1):

1. ``coded-shuffle run -K K --transitions 3 --storage M --cache-dir DIR``: epochs 0 to 3, each
   worker's batch (or its storage) of every epoch in its file;
2. ``run --start-epoch 3 --transitions 1 --cache-dir DIR``, every file kept (``kept``), and the
   same from a copy of ``DIR`` without the last worker's file (``lost``: its host lost);
3. ``run --start-epoch 3 --transitions 1`` with no ``--cache-dir`` (``cold``): every worker's
   batch (or storage) dealt from the master.

With ``--variable``, records of many sizes instead: ``--points`` files of ``B / 4`` to ``7 B / 4``
random bytes (uniform, seed 1; mean about ``B``), one record a file, given as ``--data`` (with
``M > 1`` each record cut by its own length).

MB: from the source (the restart's ``held_start``; a cold start's deal, every unit of every
worker; records of many sizes at their own bytes, which travel zero-padded to the widest in that
setup step), from the peers (a storage restored), and the wire bytes of the restart's transitions
up to epoch 4 (with ``M = 1`` the transition from the holdings to epoch 3, then 3 -> 4), and their
seconds (the master's, from the rows); job s: the whole command, launch included.

Run:  python benchmarks/run_cache_restart.py [--points 16384] [--record-bytes 1024]
      [--workers 4,8] [--storage 1,2] [--variable]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def job(K: int, argv: list[str]) -> tuple[dict | None, list[dict], float]:
    """One ``coded-shuffle run`` of ``K`` workers: its ``held_start`` (None without one), its rows
    and its seconds, launch included."""
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", str(K), "--seed", "1", *argv, "--json", "-"]
    tic = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True).stdout
    seconds = time.perf_counter() - tic
    lines = [json.loads(line) for line in out.splitlines()]
    start = next((x["held_start"] for x in lines if "held_start" in x), None)
    rows = [x for x in lines if "epoch" in x]
    assert all(r["verified"] for r in rows)
    return start, rows, seconds


def dealt(K: int, M: int, N: int, B: int) -> int:
    """The bytes a cold start deals: every worker's batch, or its storage of ``M`` batches' worth of
    pieces (each record's pieces padded to whole pieces)."""
    from coded_shuffle.engine import scheme_for

    scheme = scheme_for("coded", K=K, storage=M, record_bytes=B)
    return M * N * scheme.pieces * scheme.piece_bytes(B)


def write_files(folder: Path, N: int, B: int) -> np.ndarray:
    """``N`` files of ``B // 4`` to ``7 B // 4`` random bytes in ``folder``; their sizes."""
    rng = np.random.default_rng(1)
    sizes = rng.integers(max(1, B // 4), 7 * B // 4 + 1, N)
    for i, n in enumerate(sizes):
        (folder / f"{i:06d}.bin").write_bytes(rng.bytes(int(n)))
    return sizes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=16384)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--storage", default="1,2")
    ap.add_argument("--variable", action="store_true", help="records of many sizes, one a file")
    args = ap.parse_args()
    N, B = args.points, args.record_bytes
    files = tempfile.TemporaryDirectory() if args.variable else None
    sizes = None if files is None else write_files(Path(files.name), N, B)
    what = f"of {B} B"
    if sizes is not None:
        what = f"of {int(sizes.min())} to {int(sizes.max())} B, mean {sizes.mean():.0f} B"
    print(f"{N} records {what}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'K':>3} {'M':>2} {'start':>6} {'source MB':>9} {'peers MB':>9} {'wire MB':>8} "
          f"{'trans s':>8} {'job s':>6}")  # fmt: skip
    for K in (int(k) for k in args.workers.split(",")):
        for M in (int(m) for m in args.storage.split(",")):
            data = ["-N", str(N), "-B", str(B), "--storage", str(M)]
            if files is not None:
                data = ["--data", files.name, "--storage", str(M)]
            with tempfile.TemporaryDirectory() as tmp:
                kept, lost = Path(tmp, "kept"), Path(tmp, "lost")
                job(K, [*data, "--transitions", "3", "--cache-dir", str(kept)])
                shutil.copytree(kept, lost)
                (lost / f"worker-{K - 1}.cache").unlink()
                again = ["--start-epoch", "3", "--transitions", "1"]
                runs = {name: job(K, [*data, *again, "--cache-dir", str(d)]) for name, d in (("kept", kept),
                                                                                            ("lost", lost))}
                runs["cold"] = job(K, [*data, *again])
            for name, (start, rows, seconds) in runs.items():
                whole = dealt(K, M, N, B) if sizes is None else M * int(sizes.sum())
                source = whole if start is None else start["source_bytes"]
                peers = 0 if start is None else start.get("peer_bytes", 0)
                wire, trans = sum(r["wire_bytes"] for r in rows), sum(r["seconds"] for r in rows)
                print(f"{K:>3} {M:>2} {name:>6} {source / 1e6:9.2f} {peers / 1e6:9.2f} {wire / 1e6:8.2f} "
                      f"{trans:8.3f} {seconds:6.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
