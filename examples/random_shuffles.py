"""Uniformly random reshuffles: about a 2x gain over uncoded, nearly all of it from pairs.

The gain uncoded/coded is taken with the exact packing; the leftover share is the part of the
saving ``uncoded - coded`` that comes from combining leftovers along cycles.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823 (the scheme); the numbers are ours: each
epoch is a fresh uniform permutation cut into K equal batches, as in random reshuffling.

Run: ``python examples/random_shuffles.py``
"""

import numpy as np

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import rates

N = 2520  # divisible by every K below
seeds = range(4)
print("mean loads over seeds, in symbols; coded with greedy and with exact cycle packing")
print(f"{'K':>2} {'uncoded':>8} {'paired':>8} {'greedy':>8} {'exact':>8} {'bound':>8} {'gain':>5}"
      f" {'leftover share':>15}")
gains, shares = [], []
for K in (2, 3, 4, 5, 6, 8, 10):
    rows = []
    for seed in seeds:
        before = epoch_placement(N, K, seed=seed, epoch=0)
        S = shuffle_matrix(before, epoch_placement(N, K, seed=seed, epoch=1))
        r = rates(S)
        rows.append((r.uncoded, r.paired, r.coded, rates(S, strategy="exact").coded, lower_bound(S).value))
    u, p, g, c, lb = np.mean(rows, axis=0)
    gain = u / c
    share = (p - c) / (u - c)  # part of the saving that the leftover phase adds
    gains.append(gain)
    shares.append(share)
    print(f"{K:>2} {u:>8.1f} {p:>8.1f} {g:>8.1f} {c:>8.1f} {lb:>8.1f} {gain:>5.2f} {100 * share:>14.2f}%")
    assert all(lb_ <= c_ <= g_ <= p_ <= u_ for u_, p_, g_, c_, lb_ in rows)
    assert all(c_ == lb_ for *_, c_, lb_ in rows)  # exact packing meets the bound on every one

print(f"gain uncoded/coded: {min(gains):.2f} .. {max(gains):.2f}; "
      f"leftover phase adds {100 * min(shares):.2f}% .. {100 * max(shares):.2f}% of the saving")
assert all(1.8 < g < 2.1 for g in gains)
assert max(shares) < 0.1
