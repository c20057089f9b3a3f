"""An MPI loader's job storing ``M`` batches relaunched on another number of workers, its storage
at ``K'`` cut again from the workers' cache files, against the same re-cut in one process and
against a cold start, side by side in one launch for each change.

For each ``K -> K'`` of ``--changes``, one ``mpiexec -n max(K, K')+1`` launch runs three jobs of
:class:`coded_shuffle.loader.MPILoader` on the same records (ranks beyond a job's ``K + 1`` sit it
out, a sub-communicator): epochs 0 to 3 at ``K`` with ``cache_dir`` (each worker's storage in its
file); then, where ``K' < K``, the file of worker ``--lost`` removed (its host lost), epoch 4 at
``K'`` started from the files (:mod:`coded_shuffle.engine.recut_serve`: the master sends what no
file holds, once; the workers send each other the rest); then epoch 4 at ``K'`` from a cold start
(an empty ``cache_dir``: every piece of the storage from the master once, to the first worker that
stores it, and from that worker to the others, :mod:`coded_shuffle.engine.restore`). The files as
the relaunch found them are copied first, and the parent runs
:func:`coded_shuffle.engine.recover.recut_restart` on the copy: its bytes kept, from peers and
from the source must equal the relaunch's. Seconds: the master's, from the loader's start to its
job's end (one epoch; the workers check every piece; ``scipy.optimize``, which the re-cut's
labels use, imported before, a one-time cost of about 0.3 s a process).

Run:  python benchmarks/mpi_recut.py [--mib 16] [--record-bytes 8192] [--storage 2]
      [--changes 4:3,3:4] [--lost 2]
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


def child(mib: float, B: int, M: int, K: int, K_next: int, lost: int, folder: str) -> None:
    """The three jobs, under ``mpiexec``; the master prints one JSON line."""
    import numpy as np
    import scipy.optimize  # noqa: F401 - a one-time import of the re-cut's labels, before the clock
    from mpi4py import MPI

    from coded_shuffle.loader import MPILoader
    from coded_shuffle.transport import MPITransport

    world = MPI.COMM_WORLD
    N = int(mib * (1 << 20)) // B
    rows = np.random.default_rng(0).integers(0, 256, (N, B), dtype=np.uint8) if world.rank == 0 else None
    files, cold_dir = Path(folder) / "cache", Path(folder) / "cold"

    def job(workers: int, start: int, epochs: int, cache_dir: Path) -> tuple[MPILoader | None, float]:
        comm = world.Split(0 if world.rank <= workers else MPI.UNDEFINED, world.rank)
        if comm == MPI.COMM_NULL:
            return None, 0.0
        link = MPITransport(comm)
        loader = MPILoader(rows, epochs=epochs, start_epoch=start, seed=1, transport=link, storage=M,
                           cache_dir=cache_dir)  # fmt: skip
        tic = time.perf_counter()
        if loader.is_master:
            loader.serve()
        else:
            for _ in loader:
                pass
        return loader, time.perf_counter() - tic

    job(K, 0, 4, files)
    world.Barrier()
    if world.rank == 0:
        if K_next < K:
            (files / f"worker-{lost}.cache").unlink()
        shutil.copytree(files, Path(folder) / "before")
    world.Barrier()
    warm, warm_s = job(K_next, 4, 1, files)
    world.Barrier()
    cold, cold_s = job(K_next, 4, 1, cold_dir)
    if world.rank != 0:
        return
    assert warm is not None and cold is not None
    start, cold_start = warm.held_start, cold.held_start
    assert start is not None and cold_start is not None and start.verified
    got = {"K": K, "K_next": K_next, "M": M, "N": N, "start": start.to_dict(), "warm_s": warm_s,  # type: ignore[union-attr]
           "cold_s": cold_s, "cold_source": cold_start.source_bytes,
           "cold_peers": cold_start.peer_bytes}  # type: ignore[union-attr]  # fmt: skip
    print(json.dumps(got), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=16)
    ap.add_argument("--record-bytes", type=int, default=8192)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--changes", default="4:3,3:4")
    ap.add_argument("--lost", type=int, default=2)
    ap.add_argument("--child", nargs=3, metavar=("K", "K_NEXT", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    B, M = args.record_bytes, args.storage
    if args.child:
        K, K_next, folder = int(args.child[0]), int(args.child[1]), args.child[2]
        child(args.mib, B, M, K, K_next, args.lost, folder)
        return
    import numpy as np

    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine.recover import recut_restart

    mpiexec = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    N = int(args.mib * (1 << 20)) // B
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (N, B), dtype=np.uint8))
    load = os.getloadavg()[0]
    print(f"{args.mib:g} MiB of {B} B records, M = {M}, {os.cpu_count()} cores, load {load:.1f}")
    print(f"{'K->K':>5} {'kept MB':>8} {'peers MB':>8} {'source MB':>9} {'bound MB':>8} {'in-proc':>7} "
          f"{'recut s':>7} {'cold src MB':>11} {'cold peers MB':>13} {'cold s':>7} "
          f"{'moved/cold':>10}")  # fmt: skip
    for change in args.changes.split(","):
        K, K_next = (int(x) for x in change.split(":"))
        with tempfile.TemporaryDirectory() as folder:
            cmd = [mpiexec, "-n", str(max(K, K_next) + 1), sys.executable, "-m", "mpi4py", __file__,
                   "--mib", str(args.mib), "--record-bytes", str(B), "--storage", str(M), "--lost",
                   str(args.lost), "--child", str(K), str(K_next), folder]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            ref, _, _ = recut_restart(ds, Path(folder) / "before", K=K, K_next=K_next, M=M, seed=1, epoch=3)
        s = r["start"]
        names = ("kept_bytes", "peer_bytes", "source_bytes", "download_bound", "source_bound")
        same = "equal" if all(s[k] == getattr(ref, k) for k in names) else "DIFFER"
        moved, cold = s["peer_bytes"] + s["source_bytes"], r["cold_source"] + r["cold_peers"]
        print(f"{K:>2}->{K_next:<2} {s['kept_bytes'] / 1e6:8.2f} {s['peer_bytes'] / 1e6:8.2f} "
              f"{s['source_bytes'] / 1e6:9.2f} {s['download_bound'] / 1e6:8.2f} {same:>7} "
              f"{r['warm_s']:7.3f} {r['cold_source'] / 1e6:11.2f} {r['cold_peers'] / 1e6:13.2f} "
              f"{r['cold_s']:7.3f} {moved / cold:10.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
