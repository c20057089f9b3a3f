"""Exhaustive sweep for claim 5: greedy and exact cycle packing against the lower bound.

Run by hand (minutes, not a test)::

    python proofs/sweep_optimality.py            # the sweep stated in claim 5
    python proofs/sweep_optimality.py 5 4        # one K up to one batch size

For each ``K`` and each batch size ``b`` up to the limit, every balanced leftover matrix without
2-cycles and with out-degrees ``<= b`` is listed (by claim 5 (a) these are exactly the leftover
matrices of the conserved shuffles with batches of at most ``b`` points), one matrix is kept per
relabelling of the workers, ``tau`` is computed by brute force over all ``K!`` orderings and the
library's greedy and exact packings are compared with it. Any matrix where a packing falls
short is printed in full. The last line says what was covered and how long it took.
"""

from __future__ import annotations

import os
import sys
import time

#: ``K -> (largest batch size swept, largest b for which exact runs on every class)``.
PLAN = {4: (20, 20), 5: (7, 7), 6: (2, 2)}


def main(argv: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout
    from proofs.claim_5_optimality import sweep

    plan = {int(argv[0]): (int(argv[1]), int(argv[1]))} if argv else PLAN
    start = time.perf_counter()
    short = 0
    for K, (bmax, exact_upto) in plan.items():
        total = classes = 0
        for b in range(1, bmax + 1):
            t0 = time.perf_counter()
            res = sweep(K, b, exact_all=b <= exact_upto)
            total, classes = res["matrices"], res["classes"]
            print(
                f"K={K} b={b}: {res['matrices']} leftover matrices, {res['classes']} classes, "
                f"exact run on {res['exact_runs']}, greedy short of bound {len(res['greedy_short'])}, "
                f"exact short of bound {len(res['exact_short'])}, greedy short of exact "
                f"{res['greedy_short_of_exact']} ({time.perf_counter() - t0:.1f} s)",
                flush=True,
            )
            for om in res["exact_short"]:
                print("  EXACT PACKING MISSES THE BOUND:", om, flush=True)
                short += 1
            for om in res["greedy_short"]:
                print("  greedy misses the bound:", om, flush=True)
        print(
            f"K={K}: covered every conserved shuffle with batches <= {bmax} "
            f"({total} leftover matrices, {classes} classes at b={bmax})",
            flush=True,
        )
    print(f"done in {time.perf_counter() - start:.0f} s; exact packing short of the bound: {short}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
