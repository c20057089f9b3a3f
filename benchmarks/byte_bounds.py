"""Loads and bounds in bytes beside the counts, on records of unequal sizes (no timing).

For ``--records`` records on ``--workers`` workers, random reshuffles (epochs 0 -> 1 of
``--seeds`` seeds), two size distributions:

- ``tokens``: lognormal(5, 1) token counts clamped to 16..1024, uint16 tokens (2 bytes each), the
  lengths of a public sampler benchmark (mean about 456 B);
- ``blobs``: uniform 2 to 20 KiB.

For each, with ``M = 1`` and ``M = 2`` batches stored and the batches cut by count and by bytes
(:func:`coded_shuffle.orders.order_placement` with ``balance``), it prints (means over the seeds):

- ``bound_B / (bound x mean)``: the genie bound weighted by size
  (``proofs/claim_14_byte_bound.py``) over the bound in records times the mean record size;
- ``coded_B / bound_B``: the coded load of the records cut into one-byte pieces over it;
- ``padded / bound_B``: today's plan of whole records, each symbol as long as its longest record
  (``M = 1``);
- ``uncoded / bound_B``; ``download``: the download bound over the bytes of a batch ``B / K``;
- ``spread``: the largest minus the smallest batch, in bytes, over the largest record.

Run:  python benchmarks/byte_bounds.py [--records 100000] [--workers 8] [--seeds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from coded_shuffle.loads import byte_loads
from coded_shuffle.orders import order_placement


def sizes_of(kind: str, N: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng([37, seed])
    if kind == "tokens":
        return 2 * np.clip(rng.lognormal(5, 1, N), 16, 1024).astype(np.int64)
    return rng.integers(2 << 10, (20 << 10) + 1, N)


def measure(kind: str, N: int, K: int, M: int, balance: str, seed: int) -> dict[str, float]:
    d = sizes_of(kind, N, seed)
    a, b = (order_placement(N, K, seed=seed, epoch=e, sizes=d, balance=balance) for e in (0, 1))
    x = byte_loads(a, b, sizes=d, storage=M, padded=M == 1)
    bound = float(x.lower_bound_bytes)
    spread = int(x.batch_bytes.max() - x.batch_bytes.min())
    return {
        "bound_B/(bound x mean)": bound / (float(x.bound.value) * float(d.mean())),
        "coded_B/bound_B": float(x.coded_bytes) / bound,
        "padded/bound_B": float("nan") if x.padded_bytes is None else x.padded_bytes / bound,
        "uncoded/bound_B": float(x.uncoded_bytes) / bound,
        "download/(B/K)": float(x.download_bound_bytes) / (float(d.sum()) / K),
        "spread/max record": spread / int(d.max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    for kind in ("tokens", "blobs"):
        for M in (1, 2):
            for balance in ("count", "bytes"):
                runs = [measure(kind, args.records, args.workers, M, balance, s) for s in range(args.seeds)]
                mean = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
                rows.append({"sizes": kind, "M": M, "balance": balance, **mean})
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    keys = list(rows[0])
    print("  ".join(f"{k:>22}" for k in keys))
    for r in rows:
        print("  ".join(f"{r[k]:>22.4f}" if isinstance(r[k], float) else f"{r[k]!s:>22}" for k in keys))


if __name__ == "__main__":
    main()
