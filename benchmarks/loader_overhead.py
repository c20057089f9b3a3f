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
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.loader import InProcessLoader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--record-bytes", type=int, default=4096)
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--transitions", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
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
