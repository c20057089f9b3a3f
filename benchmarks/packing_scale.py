"""Exact cycle packing and exact lower bound at scale, side by side with greedy.

For uniformly random reshuffles (``epoch_placement`` of epochs 0 and 1, ``N = 1000 K``,
default ``K = 16, 32, 64`` and ``--seeds`` seeds each), measures in the same run:

- greedy: ``pack_cycles(omega)``, shortest cycles first, and its seconds;
- exact: ``pack_cycles(omega, strategy="exact")`` (fractional packing bound, rounded and
  integer packings, circulation program; HiGHS), its seconds, whether it proved its packing
  optimal (target: proven in <= 10 s), the most cycles it proved possible (``max<=``), and how
  many cycles greedy is short of it;
- bound (``--bound``): ``lower_bound(S, exact=True)``, the linear ordering program for
  ``K > 20`` (target: exact in <= 60 s), its seconds, and the certificate ``coded == bound``
  of the exact packing.

Prints one line per shuffle, then per ``K``: how often greedy is short and by how much, the
exact/greedy time ratio, and how many packings and bounds were proven. ``--node-limit`` caps
the branch-and-bound nodes of each integer program of the two (default: the library's
``EXACT_NODE_LIMIT``); a count of work, so the results do not depend on the machine's load.

Usage: python benchmarks/packing_scale.py [--workers 16,32,64] [--seeds S] [--bound]
       [--node-limit NODES]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import coded_shuffle.plan.exact as plan_mod
from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import leftover_matrix, shuffle_matrix
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import pack_cycles


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="16,32,64", help="worker counts K (default 16,32,64)")
    ap.add_argument("--seeds", type=int, default=5, help="random shuffles per K (default 5)")
    ap.add_argument("--bound", action="store_true", help="also prove the lower bound")
    ap.add_argument("--node-limit", type=int, default=None,
                    help="branch-and-bound nodes an integer program, for packing and bound")  # fmt: skip
    args = ap.parse_args()
    if args.node_limit is not None:
        plan_mod.EXACT_NODE_LIMIT = args.node_limit
    limit = plan_mod.EXACT_NODE_LIMIT
    print(f"node limit {limit} for the packing, for the bound; N = 1000 K; random reshuffles")
    print(
        f"{'K':>3} {'seed':>4} {'leftover':>8} {'greedy':>7} {'s':>6} {'exact':>6} {'s':>6} {'proven':>6} "
        f"{'max<=':>6} {'short':>5}"
        + (f" {'bound':>7} {'exact':>5} {'s':>6} {'cert':>4}" if args.bound else "")
    )
    pack_cycles([[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # compile greedy's kernel outside the timings
    for K in [int(k) for k in args.workers.split(",")]:
        stats = []
        for seed in range(args.seeds):
            a = epoch_placement(1000 * K, K, seed=seed, epoch=0)
            b = epoch_placement(1000 * K, K, seed=seed, epoch=1)
            S = shuffle_matrix(a, b)
            omega = leftover_matrix(S)
            tg, g = timed(lambda omega=omega: pack_cycles(omega))
            te, e = timed(lambda omega=omega: pack_cycles(omega, strategy="exact"))
            short = e.cycles_used - g.cycles_used
            line = (
                f"{K:>3} {seed:>4} {int(omega.sum()):>8} {g.cycles_used:>7} {tg:>6.2f} {e.cycles_used:>6} "
                f"{te:>6.2f} {'yes' if e.optimal else 'no':>6} {e.upper_bound:>6} {short:>5}"
            )
            row = {"tg": tg, "te": te, "short": short, "proven": e.optimal, "fast": e.optimal and te <= 10}
            if args.bound:
                tb, lb = timed(lambda S=S: lower_bound(S, exact=True, node_limit=limit))
                off = S.copy()
                np.fill_diagonal(off, 0)
                coded = int(off.sum()) - int(np.triu(np.minimum(S, S.T), 1).sum()) - e.cycles_used
                cert = coded == lb.value
                flags = ("yes" if lb.exact else "no", "yes" if cert else "-")
                line += f" {lb.value:>7} {flags[0]:>5} {tb:>6.2f} {flags[1]:>4}"
                row |= {"tb": tb, "bound_exact": lb.exact, "bound_fast": lb.exact and tb <= 60, "cert": cert}
            print(line, flush=True)
            stats.append(row)
        n = len(stats)
        proven = [r for r in stats if r["proven"]]
        shorts = [r["short"] for r in proven if r["short"] > 0]
        beaten = sum(r["short"] > 0 for r in stats if not r["proven"])
        ratio = np.median([r["te"] / r["tg"] for r in stats])
        fast = sum(r["fast"] for r in stats)
        print(
            f"K = {K}: exact proven in {len(proven)}/{n}, within 10 s in {fast}/{n}; "
            f"greedy short of the proven maximum in {len(shorts)}/{len(proven)}"
            + (f" (by {min(shorts)} to {max(shorts)} cycles, mean {np.mean(shorts):.1f})" if shorts else "")
            + (f", of an unproven better packing in {beaten}/{n - len(proven)}" if len(proven) < n else "")
            + f"; exact/greedy time, median {ratio:.0f}x"
        )
        if args.bound:
            print(
                f"K = {K}: bound exact in {sum(r['bound_exact'] for r in stats)}/{n}, within 60 s in "
                f"{sum(r['bound_fast'] for r in stats)}/{n}; "
                f"coded == bound in {sum(r['cert'] for r in stats)}/{n}"
            )


if __name__ == "__main__":
    main()
