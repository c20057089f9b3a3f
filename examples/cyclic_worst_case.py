"""The cyclic batch shift: the worst case, where the coded load N (K - 1) / K meets the bound.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823: the worst-case optimal load N (K - 1) / K,
attained by the shuffle in which worker k's next batch is worker k + 1's current batch.

Run: ``python examples/cyclic_worst_case.py``
"""

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound, worst_case
from coded_shuffle.plan import plan_from_matrix, verify_plan

b = 4  # points per batch
print(f"{'K':>2} {'N':>4} {'uncoded':>8} {'paired':>7} {'coded':>6} {'bound':>6} {'N(K-1)/K':>9}")
for K in range(3, 9):
    N = K * b
    S = cyclic_shift_matrix(N, K)
    plan = plan_from_matrix(S)
    verify_plan(plan)
    r = plan.rates
    lb = lower_bound(S).value
    print(f"{K:>2} {N:>4} {r.uncoded:>8} {r.paired:>7} {r.coded:>6} {lb:>6} {str(worst_case(N, K)):>9}")
    # no pairs: the leftovers are b copies of one K-cycle, each sent as K - 1 symbols
    assert r.pairs == 0 and r.cycles_used == b and plan.n_cycles == b
    assert r.uncoded == r.paired == N
    assert r.coded == lb == worst_case(N, K)
