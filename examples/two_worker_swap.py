"""Two workers swap their whole batches: N/2 coded symbols instead of N.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823: the order-2 symbol x + y of Example 1, and
the worst case N (K - 1) / K, which for K = 2 is N / 2.

Run: ``python examples/two_worker_swap.py``
"""

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound, worst_case
from coded_shuffle.plan import decoding_steps, plan_from_matrix, verify_plan

N = 10
S = cyclic_shift_matrix(N, 2)  # [[0, 5], [5, 0]]: each worker needs the other's whole batch
plan = plan_from_matrix(S)
verify_plan(plan)
a, b, _ = plan.transmissions()
print(f"S = {S.tolist()}")
print(f"uncoded: {plan.rates.uncoded} symbols; coded: {plan.n_symbols} symbols; "
      f"lower bound: {lower_bound(S).value}; N(K-1)/K = {worst_case(N, 2)}")
for s in range(len(a)):
    print(f"  symbol {s}: x{a[s]} + x{b[s]}   (x{a[s]} held by w0, x{b[s]} held by w1)")
for k in range(2):
    steps = decoding_steps(plan, k)
    print(f"worker w{k}: " + ", ".join(f"symbol {s} + x{kn} -> x{rec}" for s, kn, rec in steps))

assert plan.rates.uncoded == N
assert plan.n_symbols == lower_bound(S).value == worst_case(N, 2) == N // 2
