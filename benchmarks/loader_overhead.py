"""What the training-loop view costs on top of the engine, in the same run.

One dataset of ``--mib`` MiB of ``--record-bytes`` records (a ``.npy`` file, read as a memmap by
both) and ``--workers`` workers; each repeat times, in turn:

- engine: :func:`coded_shuffle.engine.run` for ``--transitions`` transitions (plan, encode,
  deliver, decode, verify every record, check every worker's holdings);
- loader: an :class:`coded_shuffle.loader.InProcessLoader` through ``--transitions + 1``
  epochs, the same transitions plus what a training job gets: every worker's rows gathered in
  the epoch's order as arrays of the file's dtype (epoch 0 read from the file is timed too).

Engine and loader alternate within each repeat (which goes first alternates too), so both see
the same machine load. A figure is
the best of ``--repeat`` repeats; ``ratio`` is best loader time / best engine time, and
``spread`` the lowest and highest ratio of the engine and loader timed in the same repeat. The loader's
coded bytes are checked equal to the engine's. Target: ratio at most 1.25 (the rows in epoch
order are one gather of the batch, against a transition that plans, encodes, decodes and
checksums the same records).

Run:  python benchmarks/loader_overhead.py [--mib 64] [--record-bytes 4096] [--workers 8] [--json]

With ``--prefetch`` (needs PyTorch and MPI) it measures instead the stall at each epoch boundary
of a training job: ``mpiexec -n K+1`` ranks, a :class:`coded_shuffle.torch.CodedIterableDataset`
on each, and on every worker, for each epoch, ``set_epoch`` (the stall: from the end of the
previous epoch's training to this epoch's batch in hand) then a training epoch of ``--train``
seconds (a step that waits, as one on an accelerator does, longer than the delivery). The same
run times ``prefetch=False`` and ``prefetch=True`` jobs in turn, ``--repeat`` times each; a
figure is the median stall over the epochs after the first (which both read from the file) and
the workers. Target: with prefetch at most 20 % of the stall without.

Run:  python benchmarks/loader_overhead.py --prefetch [--mib 32] [--workers 3] [--train 0.5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.loader import InProcessLoader


def stall_job(path: str, epochs: int, train: float, repeat: int) -> None:
    """One rank of the ``--prefetch`` job (under mpiexec): rank 0 serves, the workers time their stalls."""
    from coded_shuffle.torch import CodedIterableDataset
    from coded_shuffle.transport import MPITransport

    link = MPITransport()
    stalls: dict[str, list[float]] = {"off": [], "on": []}
    for i in range(2 * repeat):
        mode = ("off", "on")[(i + i // 2) % 2]  # off on on off off on ...: each first in turn
        ds = CodedIterableDataset(path if link.is_master else None, epochs=epochs, seed=i,
                                  prefetch=mode == "on", transport=link)  # fmt: skip
        if ds.is_master:
            ds.serve()
        else:
            for e in range(epochs):
                tic = time.perf_counter()
                ds.set_epoch(e)
                if e:
                    stalls[mode].append(time.perf_counter() - tic)
                time.sleep(train)  # the epoch's training
        link.sync()
    got = link.comm.gather(stalls, root=0)
    if link.is_master:
        out = {m: [s for g in got[1:] for s in g[m]] for m in ("off", "on")}
        print(json.dumps(out))


def prefetch_main(a: argparse.Namespace) -> None:
    N = (a.mib << 20) // a.record_bytes
    rows = np.random.default_rng(0).integers(0, 1 << 31, size=(N, a.record_bytes // 4), dtype=np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.npy"
        np.save(path, rows)
        mpiexec = Path(sys.executable).parent / "mpiexec"
        cmd = [str(mpiexec), "-n", str(a.workers + 1), sys.executable, "-m", "mpi4py", __file__,
               "--stall-job", str(path), str(a.epochs), str(a.train), str(a.repeat)]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=1800, env=os.environ)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        got = json.loads(proc.stdout.strip().splitlines()[-1])
    off, on = statistics.median(got["off"]), statistics.median(got["on"])
    out = {
        "N": N, "record_bytes": a.record_bytes, "K": a.workers, "epochs": a.epochs,
        "train_seconds": a.train, "stall_without_prefetch": off, "stall_with_prefetch": on,
        "ratio": on / off, "worst_with_prefetch": max(got["on"]), "target": 0.2,
    }  # fmt: skip
    if a.json:
        print(json.dumps(out))
    else:
        print(
            f"N = {N} records of {a.record_bytes} B, K = {a.workers}, {a.epochs} epochs of {a.train} s "
            f"training, x{a.repeat}: median stall at an epoch boundary {off * 1e3:.1f} ms without "
            f"prefetch, {on * 1e3:.1f} ms with (ratio {out['ratio']:.3f}, "
            f"worst {out['worst_with_prefetch'] * 1e3:.1f} ms; "
            f"target <= 0.2: {'met' if out['ratio'] <= 0.2 else 'NOT met'})"
        )


def main() -> None:
    if sys.argv[1:2] == ["--stall-job"]:
        path, epochs, train, repeat = sys.argv[2:6]
        stall_job(path, int(epochs), float(train), int(repeat))
        return
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--record-bytes", type=int, default=4096)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--transitions", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    p.add_argument("--prefetch", action="store_true", help="the epoch-boundary stall, with and without")
    p.add_argument("--epochs", type=int, default=5, help="epochs of a --prefetch job")
    p.add_argument("--train", type=float, default=0.5, help="seconds of training an epoch (--prefetch)")
    a = p.parse_args()
    if a.prefetch:
        prefetch_main(a)
        return
    N = (a.mib << 20) // a.record_bytes
    rows = np.random.default_rng(0).integers(0, 1 << 31, size=(N, a.record_bytes // 4), dtype=np.int32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.npy"
        np.save(path, rows)
        del rows
        # Warm-up (compiled kernels loaded), not timed.
        list(InProcessLoader(path, K=a.workers, epochs=2, seed=99))
        engine_s, loader_s = [], []
        for i in range(a.repeat):
            # Engine and loader alternate, and which goes first alternates too.
            for which in ("engine", "loader") if i % 2 == 0 else ("loader", "engine"):
                tic = time.perf_counter()
                if which == "engine":
                    ref = run(load_dataset(path), K=a.workers, epochs=a.transitions, seed=1)
                    engine_s.append(time.perf_counter() - tic)
                else:
                    loader = InProcessLoader(path, K=a.workers, epochs=a.transitions + 1, seed=1)
                    n_rows = sum(len(b) for ep in loader for b in ep.batches)
                    loader_s.append(time.perf_counter() - tic)
            assert n_rows == N * (a.transitions + 1)
            assert [r.coded_bytes for r in loader.reports] == [t.coded_bytes for t in ref.transitions]
            assert ref.verified and all(r.verified for r in loader.reports)
    out = {
        "N": N,
        "record_bytes": a.record_bytes,
        "K": a.workers,
        "transitions": a.transitions,
        "engine_seconds": min(engine_s),
        "loader_seconds": min(loader_s),
        "ratio": min(loader_s) / min(engine_s),
        "spread": [
            min(x / e for x, e in zip(loader_s, engine_s, strict=True)),
            max(x / e for x, e in zip(loader_s, engine_s, strict=True)),
        ],
        "target": 1.25,
    }
    if a.json:
        print(json.dumps(out))
    else:
        print(
            f"N = {N} records of {a.record_bytes} B, K = {a.workers}, {a.transitions} transitions: "
            f"engine {out['engine_seconds']:.3f} s, loader {out['loader_seconds']:.3f} s, "
            f"ratio {out['ratio']:.2f}, spread {out['spread'][0]:.2f}..{out['spread'][1]:.2f} "
            f"(target <= 1.25: {'met' if out['ratio'] <= 1.25 else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
