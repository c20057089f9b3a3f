"""Four workers that each store two batches: the cyclic shift in R(1) = 1 record instead of 8/3.

Source: the excess-storage model of Elmahdy and Mohajer, "On the Fundamental Limits of Coded
Data Shuffling for Distributed Learning Systems", IEEE Trans. Inf. Theory 2020 (arXiv
1807.04255), worst case R(t) = (N/K)(K-1-t)/(t+1), as docs/storage.md gives it and
proved in proofs/claim_6..8.

K = 4 workers, N = 4 records (one a worker), storage M = 2 batches (t = 1). Record r of worker o
is cut into C(3, 1) = 3 pieces r_T, T = {x} for each other worker x, held by {o, x}: every worker
stores its own record whole and one piece of each other record, 1 + 3 * 1/3 = 2 records. In the
cyclic shift worker k trains next on worker k+1's record; it already holds one of its pieces and
misses two. Uncoded that is 8 pieces (8/3 records); the master sends 3 (one record), and no
scheme can send fewer.

Run: ``python examples/storage_example.py``
"""

import itertools
from fractions import Fraction

import numpy as np

from coded_shuffle.bounds import cyclic_shift_matrix
from coded_shuffle.codec import load_dataset
from coded_shuffle.engine.inprocess import drive
from coded_shuffle.engine.protocol import MasterOptions
from coded_shuffle.engine.schemes import scheme_for
from coded_shuffle.engine.state import records_of_pieces, storage_dataset
from coded_shuffle.matrix import placements_from_matrix
from coded_shuffle.storage import (
    check_piece_placement,
    piece_placement,
    plan_storage,
    storage_lower_bound,
    storage_rates,
    storage_worst_case,
    update_storage,
    verify_storage_plan,
)
from coded_shuffle.transport import InProcessTransport

K, N, M = 4, 4, 2
S = cyclic_shift_matrix(N, K)
before, after = placements_from_matrix(S)
pp = piece_placement(before, M=M)
C = pp.pieces
owner = before.owner.tolist()


def name(pid):
    r, p = divmod(pid, C)
    holders = [w for w in range(K) if int(pp.holders[r, p]) >> w & 1]
    return f"r{r}[{''.join(map(str, holders))}]"  # record r, held by these workers


print(f"S = {S.tolist()}  (record r is held by worker {owner})")
for k in range(K):
    print(f"worker {k} stores: " + " ".join(name(x) for x in pp.held_by(k).tolist()))

plan = plan_storage(pp, after)
verify_storage_plan(plan)
sent = plan.transmissions
print(f"\nthe master sends {len(sent)} pieces ({plan.chosen}):")
for s, ids in enumerate(sent):
    print(f"  Y{s} = " + " + ".join(name(x) for x in ids))

print("\ndecoding (a needed piece = a sum of transmissions plus pieces the worker holds):")
decoded = 0
for k in range(K):
    held = set(pp.held_by(k).tolist())
    for pid, j, _ in plan.demand.tolist():
        if j != k:
            continue
        for n in range(1, len(sent) + 1):
            hit = None
            for combo in itertools.combinations(range(len(sent)), n):
                total: set = set()
                for s in combo:
                    total ^= set(sent[s])
                if pid in total and total - {pid} <= held:
                    hit = (combo, sorted(total - {pid}))
                    break
            if hit:
                break
        assert hit is not None, f"worker {k} cannot decode {name(pid)}"
        combo, known = hit
        uses = " + ".join(f"Y{s}" for s in combo) + "".join(f" + {name(x)}" for x in known)
        print(f"  worker {k}: {uses} -> {name(pid)}")
        decoded += 1

r = storage_rates(S, M=M)
bound = storage_lower_bound(S, M=M)
print(
    f"\nuncoded {r.uncoded} records, coded {r.coded}, lower bound {bound.value}, "
    f"R(1) = {storage_worst_case(N, K, M)}"
)

nxt = update_storage(pp, after)  # relabelling only: no traffic
check_piece_placement(nxt)
print(
    "after the update, worker 0 stores: "
    + " ".join(
        f"r{x // C}[{''.join(str(w) for w in range(K) if int(nxt.holders[x // C, x % C]) >> w & 1)}]"
        for x in nxt.held_by(0).tolist()
    )
)

assert decoded == 8 and r.uncoded == Fraction(8, 3)
assert len(sent) == 3 and r.coded == bound.value == storage_worst_case(N, K, M) == 1

# The same transition as bytes: records of 768 bytes cut into pieces of 256, the master's frame
# (wire format version 3) on an in-process link, every worker decoding its share from it.
records = load_dataset(np.random.default_rng(1).integers(0, 256, (N, 768), dtype=np.uint8))
pieces = storage_dataset(records, K, M)
caches = [pieces.cache(pp.held_by(k)) for k in range(K)]
link = InProcessTransport(K)
report, new = drive(
    link, scheme_for("coded", K=K, storage=M), pieces, caches, (pp, nxt), epoch=1, opts=MasterOptions()
)
print(
    f"\nas bytes: {report.wire_symbols} symbols of {pieces.record_bytes} B on the wire "
    f"({report.wire.payload_bytes} B of payload, {report.wire.header_bytes} B of framing), "
    f"verified: {report.verified}"
)
for k in range(K):
    batch = after.batch(k)
    assert np.array_equal(records_of_pieces(new[k], batch, C, 768), records.data[batch])
assert report.verified and report.wire_symbols == 3 and report.wire.payload_bytes == 3 * 256
