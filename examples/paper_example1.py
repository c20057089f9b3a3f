"""Example 1 of the paper, printed as the paper prints it, then decoded on bytes.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823, Example 1 (K = 3 workers, N = 15 points):
uncoded 11 symbols, paired (order-2) coding 7, the proposed coded scheme 6.

Run: ``python examples/paper_example1.py``
"""

import numpy as np

from coded_shuffle.bounds import lower_bound
from coded_shuffle.codec import decode_worker, encode_plan, load_dataset
from coded_shuffle.matrix import leftover_matrix
from coded_shuffle.plan import decoding_steps, plan_from_matrix, verify_plan

# One shuffle matrix consistent with the paper's Example 1 (S[i][j]: held by w_i, needed by w_j).
S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
plan = plan_from_matrix(S)
verify_plan(plan)
holder = np.asarray(plan.placement_t.owner)
receiver = np.asarray(plan.placement_t1.owner)


def name(n: int) -> str:
    """The paper's x_{i,j}: held by w_i, needed by w_j. Workers are numbered from 0 here, as
    everywhere in the package: the paper's w_1, w_2, w_3 are w0, w1, w2."""
    return f"x{n}[{holder[n]}->{receiver[n]}]"


r = plan.rates
print("Shuffle matrix S (rows: holder now, columns: receiver next):")
for row in S:
    print("   ", row)
print(f"uncoded load  R_uncoded = {r.uncoded}   (sum of the off-diagonal entries)")
print(f"paired load   R_paired  = {r.paired}   ({r.pairs} order-2 symbols + {r.leftovers} leftovers alone)")
print(f"coded load    R_coded   = {r.coded}   ({r.pairs} order-2 symbols + {r.coded - r.pairs} cycle symbols)"
      )
print(f"lower bound             = {lower_bound(S).value}")
print("leftover matrix Omega:", leftover_matrix(S).tolist())

a, b, phase = plan.transmissions()
titles = {0: "order-2 phase", 1: "leftover combining phase", 2: "uncoded leftovers"}
for p in (0, 1, 2):
    sent = np.flatnonzero(phase == p)
    if sent.size:
        print(f"{titles[p]}:")
        for s in sent:
            sent_as = f"{name(a[s])} + {name(b[s])}" if b[s] >= 0 else name(a[s])
            print(f"  symbol {s}: {sent_as}")

for k in range(plan.K):
    print(f"worker w{k} decodes:")
    for s, known, rec in decoding_steps(plan, k):
        how = "read" if known < 0 else f"symbol {s} + {name(known)}"
        print(f"  {how:>24} -> {name(rec)}")

# Byte level: random 8-byte records, the frames the master sends, each worker's decoder.
records = np.random.default_rng(2016).integers(0, 256, size=(plan.N, 8), dtype=np.uint8)
ds = load_dataset(records)
frames = encode_plan(plan, ds, epoch=1)
rounds = []
for k in range(plan.K):
    res = decode_worker(
        ds.cache(plan.placement_t.batch(k)),
        frames,
        need=plan.placement_t1.batch(k),
        worker=k,
        checksums=ds.checksums,
    )
    assert res.ok and np.array_equal(res.cache.data, records[plan.placement_t1.batch(k)])
    rounds.append(res.rounds)
print(f"byte-level decoding: every worker rebuilt its next batch; peeling rounds per worker {rounds}")

assert (r.uncoded, r.paired, r.coded) == (11, 7, 6)
assert lower_bound(S).value == 6 and max(rounds) == 2
