"""The planner's time with a storage of ``M`` batches against the plan of one batch, same shuffle.

For ``N`` records on ``K`` workers (default ``N = 10^6``, ``K = 16``, ``M = 2``: the case of
issue 18), epochs 0 -> 1 of ``epoch_placement``, in one run: ``plan_delivery`` (one batch stored,
pairs and cycles), then ``plan_storage`` on the piece placement (the loads, the strategy ``best``
choosing between group symbols with chains and rounds, and every transmission as arrays), each
timed ``--repeats`` times (the median is kept). Prints both times, their ratio, and the loads.

Measured (2 shared cores): ``N = 10^6, K = 16, M = 2``: ``plan_delivery`` 0.01 s (its kernels
loaded), ``plan_storage`` 14.3 s (about 1900 times), 4.4 million transmissions, 2 GB at its
peak. The issue sets no target;
the time is mostly the array sorts of the 14 million missing pieces and the choice between the
two strategies (both are planned).

Run:  python benchmarks/storage_planner.py [--points 1000000] [--workers 16] [--storage 2] [--repeats 1]
"""

from __future__ import annotations

import argparse
import statistics
import time

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery
from coded_shuffle.storage import piece_placement, plan_storage


def timed(fn, repeats):  # type: ignore[no-untyped-def]
    times, out = [], None
    for _ in range(repeats):
        tic = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - tic)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    N, K, M = args.points, args.workers, args.storage
    a, b = (epoch_placement(N, K, seed=0, epoch=t) for t in (0, 1))
    plan_delivery(a, b)  # the compiled kernels load here
    t1, p1 = timed(lambda: plan_delivery(a, b), args.repeats)
    pp = piece_placement(a, M=M)
    tm, pm = timed(lambda: plan_storage(pp, b), args.repeats)
    print(f"N = {N}, K = {K}, epochs 0 -> 1")
    print(f"M = 1: plan_delivery {t1:8.2f} s, {p1.n_symbols} symbols ({p1.n_symbols / N:.4f} N records)")
    C = pp.pieces
    print(
        f"M = {M}: plan_storage  {tm:8.2f} s, {pm.n_symbols} symbols of 1/{C} record "
        f"({pm.n_symbols / C / N:.4f} N records, strategy {pm.chosen})"
    )
    print(f"ratio: {tm / t1:.1f}")


if __name__ == "__main__":
    main()
