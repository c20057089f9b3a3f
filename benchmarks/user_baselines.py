"""The bytes a training job pays for its per-epoch reshuffle today, beside ours, in one run.

For ``--records`` records of ``--record-bytes`` bytes (the dataset, ``D`` bytes) on ``K = 4, 8,
16`` workers, the transitions ``0 -> 1 -> ... -> E`` of ``--seed`` under each order (a uniform
random reshuffle, and streaming's shard-aware ``py1e`` where the library has it), per epoch:

- ``local copy``: a ``DistributedSampler`` job with the whole dataset on every host: nothing moves,
  ``K x D`` stored;
- ``shared storage``: a ``DistributedSampler`` job reading each new batch from shared storage:
  every record of every new batch, ``D`` an epoch through the storage's port;
- ``uncoded``: the master sends each record whose worker changed to its new holder;
- ``coded``: the master's coded broadcast (order-2 XORs and cycles, :mod:`coded_shuffle.plan`);
- ``exchange``: the workers send each other what each misses, every port busy at once (no
  master); its busiest link is the download bound, the most bytes one worker misses.

With ``M = 2`` batches stored a worker (where it applies: uncoded, coded and the exchange) the
records are cut into pieces each held by two workers (:mod:`coded_shuffle.storage`).

The baselines are counted here from the placements alone (records whose owner changed, batch
bytes); ours come from :func:`coded_shuffle.loads.byte_loads`, whose uncoded count with ``M = 1``
is checked against the count here. Columns, means over the transitions, as multiples of ``D``:
``moved`` (bytes sent over the network an epoch, all links), ``busiest`` (the most bytes one
link carries: the storage's or the master's port, or for the exchange the busiest worker's
download), ``stored`` (bytes kept, every host and the storage together).

Run:  python benchmarks/user_baselines.py [--records 100000] [--record-bytes 1024] [--transitions 2]
      [--json]
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
from coded_shuffle.orders import EPOCH_ORDERS, OrderSpec, order_placement

WORKERS = (4, 8, 16)
ORDERS = ("permutation", *(o for o in ("py1e",) if o in EPOCH_ORDERS))


def baselines(owners: list[np.ndarray], K: int, sizes: np.ndarray) -> dict[str, dict[str, float]]:
    """The user's own: counted from the owners of each epoch's records (no library call)."""
    D = float(sizes.sum())
    E = len(owners) - 1
    moved = sum(float(sizes[a != b].sum()) for a, b in zip(owners, owners[1:], strict=False)) / E
    return {
        "local copy": {"moved": 0.0, "busiest": 0.0, "stored": K * D},
        "shared storage": {"moved": D, "busiest": D, "stored": D + D},
        "uncoded": {"moved": moved, "busiest": moved, "stored": D + D},
    }


def ours(placements: list, sizes: np.ndarray, M: int) -> dict[str, dict[str, float]]:
    D = float(sizes.sum())
    pairs = zip(placements, placements[1:], strict=False)
    loads = [byte_loads(a, b, sizes=sizes, storage=M, padded=False) for a, b in pairs]
    E = len(loads)

    def mean(f) -> float:
        return sum(float(f(x)) for x in loads) / E

    rows = {
        "uncoded": {"moved": mean(lambda x: x.uncoded_bytes), "stored": D + M * D},
        "coded": {"moved": mean(lambda x: x.coded_bytes), "stored": D + M * D},
        "exchange": {"moved": mean(lambda x: x.uncoded_bytes),
                     "busiest": mean(lambda x: x.download_bound_bytes), "stored": M * D},
    }  # fmt: skip
    rows["uncoded"]["busiest"] = rows["uncoded"]["moved"]
    rows["coded"]["busiest"] = rows["coded"]["moved"]
    return rows


def measure(N: int, B: int, K: int, order: str, E: int, seed: int) -> list[dict]:
    sizes = np.full(N, B, dtype=np.int64)
    spec = OrderSpec(order)
    placements = [order_placement(N, K, seed=seed, epoch=e, spec=spec) for e in range(E + 1)]
    D = float(sizes.sum())
    base = baselines([p.owner for p in placements], K, sizes)
    out = []
    for M in (1, 2):
        mine = ours(placements, sizes, M)
        if M == 1:  # the library's uncoded move is the records whose owner changed
            assert abs(mine["uncoded"]["moved"] - base["uncoded"]["moved"]) < 1e-6 * D
        rows = {**({k: v for k, v in base.items() if k != "uncoded"} if M == 1 else {}), **mine}
        for name, r in rows.items():
            out.append({"K": K, "order": order, "M": M, "method": name,
                        **{c: r[c] / D for c in ("moved", "busiest", "stored")}})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--record-bytes", type=int, default=1024)
    p.add_argument("--transitions", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = [r for K in WORKERS for o in ORDERS
            for r in measure(a.records, a.record_bytes, K, o, a.transitions, a.seed)]  # fmt: skip
    if a.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"N = {a.records:,} records of {a.record_bytes} B (D = {a.records * a.record_bytes / 1e6:.1f} MB), "
          f"{a.transitions} transitions, seed {a.seed}; bytes an epoch as multiples of D")  # fmt: skip
    print(f"{'K':>3} {'order':>12} {'M':>2} {'method':>15} {'moved':>7} {'busiest':>8} {'stored':>7}")
    for r in rows:
        print(f"{r['K']:>3} {r['order']:>12} {r['M']:>2} {r['method']:>15} {r['moved']:>7.3f} "
              f"{r['busiest']:>8.3f} {r['stored']:>7.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
