"""An MPI loader's job restarted from its workers' cache files after one host was lost, against a
cold start, side by side in one launch for each ``K`` and ``M``.

For ``K`` in ``--workers`` and ``M`` in ``--storage``, one ``mpiexec -n K+1`` launch runs three
jobs of :class:`coded_shuffle.loader.MPILoader` on the same records: epochs 0 to 3 with
``cache_dir`` (each worker's batch, or its storage of ``M`` batches, in its file); then, the last
worker's file removed (its host lost, its rank back empty), epoch 4 restarted from the files
(``M = 1``: the records no worker holds from the source, then the transition to epoch 4; ``M > 1``:
the storage of epoch 3 restored from the workers' pieces, their peers' and the source, then the
transition); then epoch 4 from a cold start (no ``cache_dir``: every worker's batch or storage
dealt from the master). Bytes: from the source (the master's rows), from peers (the workers'
exchange of pieces), the first transition's wire bytes; seconds: the master's, from the loader's
start to its job's end (the workers verify every record before the job ends).

Run:  python benchmarks/mpi_storage_restart.py [--mib 16] [--record-bytes 4096] [--workers 4,8]
      [--storage 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(mib: float, B: int, M: int, folder: str) -> None:
    """The three jobs, under ``mpiexec``; the master prints one JSON line."""
    import numpy as np

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    N = int(mib * (1 << 20)) // B
    rows = np.random.default_rng(0).integers(0, 256, (N, B), dtype=np.uint8) if link.is_master else None
    files = Path(folder)

    def job(start: int, epochs: int, **kw: object) -> tuple[MPILoader, float]:
        loader = MPILoader(rows, epochs=epochs, start_epoch=start, seed=1, transport=link, storage=M, **kw)
        tic = time.perf_counter()
        if loader.is_master:
            loader.serve()
        else:
            for _ in loader:
                pass
        return loader, time.perf_counter() - tic

    first, _ = job(0, 4, cache_dir=files)
    if first.worker == link.K - 1:
        (files / f"worker-{first.worker}.cache").unlink()
    warm, warm_s = job(4, 1, cache_dir=files)
    cold, cold_s = job(4, 1)
    if not link.is_master:
        return
    start = warm.held_start
    assert start is not None and all(r.verified for r in warm.reports)
    peers = getattr(start, "peer_bytes", 0)
    wire = warm.reports[0].wire_bytes if warm.reports else 0
    got = {"K": link.K, "M": M, "source": start.source_bytes, "peers": peers, "wire": wire,
           "warm_s": warm_s, "cold_s": cold_s, "cold_bytes": _dealt(cold, N, B, M)}  # fmt: skip
    print(json.dumps(got), flush=True)


def _dealt(loader: object, N: int, B: int, M: int) -> int:
    """The bytes a cold start deals: every worker's batch (``M = 1``) or storage (``M`` batches'
    worth of pieces, each record's pieces padded to whole pieces)."""
    from coded_shuffle.engine import scheme_for

    scheme = scheme_for("coded", K=loader.K, storage=M, record_bytes=B)  # type: ignore[attr-defined]
    return M * N * scheme.pieces * scheme.piece_bytes(B)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--record-bytes", type=int, default=4096)
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--storage", default="1,2")
    ap.add_argument("--child", nargs=2, metavar=("M", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.mib, args.record_bytes, int(args.child[0]), args.child[1])
        return
    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    print(f"{args.mib:g} MiB of {args.record_bytes} B records, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"{'K':>3} {'M':>2} {'source MB':>9} {'peers MB':>9} {'trans MB':>9} {'restart s':>9} "
          f"{'cold MB':>9} {'cold s':>7} {'bytes r/c':>9}")  # fmt: skip
    for K in (int(k) for k in args.workers.split(",")):
        for M in (int(m) for m in args.storage.split(",")):
            with tempfile.TemporaryDirectory() as folder:
                cmd = [mpiexec, "-n", str(K + 1), sys.executable, "-m", "mpi4py", __file__,
                       "--mib", str(args.mib), "--record-bytes", str(args.record_bytes),
                       "--child", str(M), folder]  # fmt: skip
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            restart = r["source"] + r["peers"] + r["wire"]
            print(f"{K:>3} {M:>2} {r['source'] / 1e6:9.2f} {r['peers'] / 1e6:9.2f} {r['wire'] / 1e6:9.2f} "
                  f"{r['warm_s']:9.3f} {r['cold_bytes'] / 1e6:9.2f} {r['cold_s']:7.3f} "
                  f"{restart / r['cold_bytes']:9.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
