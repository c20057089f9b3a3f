"""Point-level delivery plan at scale, against the floor of one np.bincount pass.

For two epoch placements of N points on K workers (default N = 10^8, K = 64), measures in the
same run:

- floor: ``np.bincount(owner_t * K + owner_t1)`` over the same owner arrays (the key built with
  the same chunking as :func:`coded_shuffle.matrix.shuffle_matrix`), i.e. one counting pass;
- plan: :func:`coded_shuffle.plan.plan_delivery`, the full point-level plan (shuffle matrix,
  counting sort by (holder, receiver), order-2 pairs, cycle packing, leftovers dealt to cycles);
- verify: :func:`coded_shuffle.plan.verify_plan` on it (reported, not part of the ratio).

Prints the ratio plan / floor (target <= 5) and the peak resident memory of the process
(target <= 4 GB). Each timing is the best of ``--repeat`` runs; the first compiled call is
warmed up on a small input first, so compile time is excluded.

Usage: python benchmarks/plan_scale.py [--points N] [--workers K] [--repeat R] [--strategy S]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery, verify_plan


def best_of(repeat: int, fn):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def bincount_floor(a: np.ndarray, b: np.ndarray, K: int) -> np.ndarray:
    chunk = 1 << 24
    counts = np.zeros(K * K, dtype=np.int64)
    for lo in range(0, a.shape[0], chunk):
        key = a[lo : lo + chunk].astype(np.int64)
        key *= K
        key += b[lo : lo + chunk]
        counts += np.bincount(key, minlength=K * K)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10**8)
    parser.add_argument("--workers", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strategy", default="greedy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    N, K = args.points, args.workers

    warm_a = epoch_placement(1000, K, seed=1, epoch=0)
    warm_b = epoch_placement(1000, K, seed=1, epoch=1)
    plan_delivery(warm_a, warm_b, strategy=args.strategy)

    t0 = time.perf_counter()
    a = epoch_placement(N, K, seed=args.seed, epoch=0)
    b = epoch_placement(N, K, seed=args.seed, epoch=1)
    t_orders = time.perf_counter() - t0

    t_floor, counts = best_of(args.repeat, lambda: bincount_floor(a.owner, b.owner, K))
    t_plan, plan = best_of(args.repeat, lambda: plan_delivery(a, b, strategy=args.strategy))
    assert np.array_equal(plan.S.ravel(), counts)
    t0 = time.perf_counter()
    verify_plan(plan)
    t_verify = time.perf_counter() - t0
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9

    r = plan.rates
    print(f"N = {N:,}  K = {K}  strategy = {args.strategy}  (best of {args.repeat})")
    print(f"  epoch placements (2)     {t_orders:8.2f} s   (not in the ratio)")
    print(f"  floor: one bincount      {t_floor:8.2f} s")
    print(f"  full point-level plan    {t_plan:8.2f} s")
    print(f"  verify_plan              {t_verify:8.2f} s   (not in the ratio)")
    print(f"  ratio plan / floor       {t_plan / t_floor:8.2f}     target <= 5")
    print(f"  peak RSS                 {peak_gb:8.2f} GB  target <= 4")
    print(f"  loads: uncoded {r.uncoded:,}  paired {r.paired:,}  coded {r.coded:,}  cycles {r.cycles_used:,}")


if __name__ == "__main__":
    main()
