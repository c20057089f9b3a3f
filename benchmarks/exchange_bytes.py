"""The exchange's senders on pieces of many sizes: chosen by bytes against chosen by counts.

With a storage of ``M`` batches and records of many sizes, each record is cut by its own length
and a missing piece may come from any of its holders. The least busiest upload in bytes is
``plan.upload_bound(..., sizes=...)``; ``plan.assign_senders`` reaches the least whole busiest
upload in counts of pieces, or, given the pieces' ``sizes``, balances their bytes. For each
transition of random reshuffles (epochs ``0 -> 1 -> 2 -> 3``), the busiest upload of each
assignment in bytes over that bound, and the CPU seconds of each, in one run.

Records: uniform (1 to 3000 random bytes) and lognormal(5, 1) token documents of uint16 (16 to
1024 tokens), ``--records`` of each.

Run:  python benchmarks/exchange_bytes.py [--records 20000] [--workers 4,8] [--storage 2,3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from coded_shuffle.engine.holding import holding_for
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import assign_senders, upload_bound


def sizes_of(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "uniform":
        return rng.integers(1, 3001, n)
    return 2 * np.clip(rng.lognormal(5, 1, n), 16, 1024).astype(np.int64)


def busiest(sender: np.ndarray, lens: np.ndarray, K: int) -> int:
    return int(np.bincount(sender, weights=lens, minlength=K).max(initial=0))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--workers", default="4,8")
    ap.add_argument("--storage", default="2,3")
    ap.add_argument("--transitions", type=int, default=3)
    args = ap.parse_args()
    print(f"{'records':>9} {'K':>3} {'M':>2} {'t':>2} {'bound MB':>10} {'by counts':>10} {'by bytes':>9} "
          f"{'s counts':>9} {'s bytes':>8}")  # fmt: skip
    for kind in ("uniform", "lognormal"):
        sizes = sizes_of(kind, args.records, np.random.default_rng(0))
        for K in (int(k) for k in args.workers.split(",")):
            for M in (int(m) for m in args.storage.split(",")):
                holding = holding_for(K=K, storage=M, sizes=sizes)
                lengths = holding.unit_lengths
                held = holding.start(epoch_placement(sizes.size, K, seed=0, epoch=0))
                for t in range(1, args.transitions + 1):
                    nxt = holding.following(held, epoch_placement(sizes.size, K, seed=0, epoch=t))
                    units, wanter, holders = holding.demand(held, nxt)
                    lens = lengths[units]
                    bound = upload_bound(holders, K=K, sizes=lens)
                    tic = time.process_time()
                    counts = assign_senders(wanter, holders, K=K)
                    mid = time.process_time()
                    by_bytes = assign_senders(wanter, holders, K=K, sizes=lens)
                    end = time.process_time()
                    print(f"{kind:>9} {K:>3} {M:>2} {t:>2} {float(bound) / 1e6:>10.4f} "
                          f"{busiest(counts.sender, lens, K) / float(bound):>10.4f} "
                          f"{busiest(by_bytes.sender, lens, K) / float(bound):>9.4f} "
                          f"{mid - tic:>9.3f} {end - mid:>8.3f}")  # fmt: skip
                    held = nxt


if __name__ == "__main__":
    main()
