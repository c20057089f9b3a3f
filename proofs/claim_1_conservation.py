"""Claim 1: leftover conservation with equal batches, and what breaks with unequal batches.

Notation
--------
==============  ====================================================================
``S[i][j]``     points held by worker ``i`` at epoch ``t`` and needed by ``j`` at ``t+1``
``r_i``         ``sum_j S[i][j] = |A_i^t|``, the batch of ``i`` now (row sum)
``c_i``         ``sum_j S[j][i] = |A_i^{t+1}|``, the batch of ``i`` next (column sum)
``M[i][j]``     ``min(S[i][j], S[j][i])`` for ``i != j``, ``M[i][i] = 0``
``Omega``       ``S - M`` off the diagonal, zero on it (the leftover matrix)
``out_i``       ``sum_j Omega[i][j]``, leftovers worker ``i`` holds for others
``in_i``        ``sum_j Omega[j][i]``, leftovers worker ``i`` needs from others
``delta_i``     ``out_i - in_i``, the conservation defect of worker ``i``
==============  ====================================================================

Statement
---------
(a) For every square non-negative integer matrix ``S``,

        delta_i = r_i - c_i        for every worker i.

(b) Hence leftover conservation (``out_i = in_i`` for all ``i``) holds exactly when every worker
    holds as many points now as it needs next (``r_i = c_i``). In particular it holds when all
    batches have one size ``N / K``, and also when ``K`` does not divide ``N`` as long as each
    worker keeps its batch size from one epoch to the next (the library cuts every epoch with
    the same sizes, ``batch_sizes(N, K)``, so its placements are always conserved).

(c) When conservation holds, ``Omega`` is the weighted adjacency matrix of a digraph with
    in-degree = out-degree at every vertex and no 2-cycles (``Omega[i][j] * Omega[j][i] = 0``),
    so it splits into directed simple cycles of length at least 3: every leftover point is
    carried by some cycle, and any procedure that removes cycles while one exists ends with
    nothing left.

(d) What breaks when ``r != c`` (a worker's batch grows or shrinks between epochs): ``Omega`` is
    no longer balanced, every removal of cycles leaves at least

        D = sum_i max(delta_i, 0) = (1/2) sum_i |r_i - c_i|

    leftover points that no cycle can carry, and they must be sent uncoded. The worst-case
    guarantee of claim 4 then fails: ``S = [[0, 2], [1, 0]]`` (worker 0 holds two points and
    needs one, worker 1 the reverse) has ``N = 3``, ``K = 2`` and needs 2 symbols
    (lower bound 2: worker 1 needs both of worker 0's points, which nobody else holds), more
    than ``N (K - 1) / K = 1.5``.

Proof
-----
(a) For ``i != j`` write ``S[i][j] = M[i][j] + Omega[i][j]``. ``M`` is symmetric, so the row
sum and the column sum of ``M`` at ``i`` are the same number ``m_i``. Then, summing the
off-diagonal entries of row ``i`` and of column ``i``,

    r_i - S[i][i] = m_i + out_i,        c_i - S[i][i] = m_i + in_i,

and subtracting gives ``out_i - in_i = r_i - c_i``.

(b) is (a) read both ways. With a fixed vector of batch sizes ``s`` for both epochs,
``r = c = s``.

(c) ``Omega[i][j] = S[i][j] - min(S[i][j], S[j][i])`` and ``Omega[j][i]`` the same with ``i, j``
swapped; the smaller of the two differences is 0, so at most one direction survives for each
pair and there are no 2-cycles. Balanced digraph with an arc ``u -> v``: walk from ``v``
along arcs of positive weight; each vertex entered has in-degree >= 1 hence out-degree >= 1,
so the walk never gets stuck and, the graph being finite, revisits a vertex; the part of the
walk between the two visits is a simple directed cycle. Subtracting one unit along a cycle
keeps every vertex balanced (it removes one in-arc and one out-arc at each vertex of the cycle).
Induction on the total weight: the weight falls to 0. No 2-cycles and no loops, so each cycle
has length >= 3.

(d) Removing one unit along a cycle leaves every ``delta_i`` unchanged. If ``R`` is what is
left, ``sum_j R[i][j] >= max(delta_i, 0)`` (out-degree at least out minus in), and summing over
``i`` gives ``weight(R) >= D``. For the example: ``M = [[0, 1], [1, 0]]``, ``Omega = [[0, 1],
[0, 0]]``, ``delta = (1, -1)``, ``D = 1``; one order-2 symbol plus one uncoded point = 2
symbols. Lower bound: with the ordering (1, 0), worker 1 is decoded first with the genie giving
it nothing it lacks, and the 2 points it needs are held by worker 0 only (claim 3), so any
scheme sends at least 2 symbols.

Check
-----
Exhaustively over every 3 x 3 matrix with entries in ``0..2`` (19 683 matrices) and every
2 x 2 matrix with entries in ``0..4``: the library's ``leftover_matrix``,
``conservation_defect`` and ``is_conserved`` against the definitions computed entry by entry in
plain Python; for every conserved ``Omega`` a cycle decomposition by the walk of (c),
independent of the library, that ends with nothing left and only cycles of length >= 3; for
every non-conserved ``Omega`` that the library's packings leave at least ``D`` uncoded; the
placements of ``epoch_placement`` with ``K`` not dividing ``N`` are conserved; the 2 x 2 example
of (d) by brute force over orderings. ``Omega`` entry by entry and the brute-force bound are those
of ``tests/oracles.py``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pytest

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import (
    conservation_defect,
    is_conserved,
    leftover_matrix,
    shuffle_matrix,
)
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import rates
from tests.oracles import brute_bound, brute_leftovers

# --------------------------------------------------------------------------- brute force


def brute_decompose(omega: list[list[int]]) -> tuple[list[tuple[int, ...]], int]:
    """Peel cycles by walking along positive arcs (proof of (c)); return cycles and what is left.

    Walks start at the first arc left; a walk that gets stuck (possible only when the digraph
    is not balanced) deletes the arc it started from into the remainder.
    """
    R = [row[:] for row in omega]
    K = len(R)
    cycles: list[tuple[int, ...]] = []
    stuck = 0
    while True:
        arcs = [(i, j) for i in range(K) for j in range(K) if R[i][j] > 0]
        if not arcs:
            return cycles, stuck
        u, v = arcs[0]
        walk = [u, v]
        while walk[-1] not in walk[:-1]:
            nxt = [j for j in range(K) if R[walk[-1]][j] > 0]
            if not nxt:
                break
            walk.append(nxt[0])
        if walk[-1] not in walk[:-1]:
            R[u][v] -= 1  # no cycle through this walk: set one unit aside
            stuck += 1
            continue
        start = walk.index(walk[-1])
        cyc = tuple(walk[start:-1])
        for k, w in enumerate(cyc):
            R[w][cyc[(k + 1) % len(cyc)]] -= 1
        cycles.append(cyc)


def all_matrices(K: int, top: int):
    for cells in itertools.product(range(top + 1), repeat=K * K):
        yield [list(cells[i * K : (i + 1) * K]) for i in range(K)]


# --------------------------------------------------------------------------- checks


@pytest.mark.parametrize(("K", "top"), [(2, 4), (3, 2)])
def test_defect_is_row_minus_column_sum(K, top):
    for S in all_matrices(K, top):
        omega = brute_leftovers(S)
        assert leftover_matrix(S).tolist() == omega
        r = [sum(S[i]) for i in range(K)]
        c = [sum(S[j][i] for j in range(K)) for i in range(K)]
        out = [sum(omega[i]) for i in range(K)]
        inn = [sum(omega[j][i] for j in range(K)) for i in range(K)]
        delta = [out[i] - inn[i] for i in range(K)]
        assert delta == [r[i] - c[i] for i in range(K)]  # (a)
        assert conservation_defect(S).tolist() == delta
        assert is_conserved(S) == (r == c)  # (b)
        for i, j in itertools.combinations(range(K), 2):
            assert omega[i][j] * omega[j][i] == 0  # (c): no 2-cycles


def test_conserved_leftovers_split_into_cycles():
    n_conserved = 0
    uncoded: dict[tuple[int, ...], tuple[int, int]] = {}  # rates depend on S only through Omega
    for S in all_matrices(3, 2):
        omega = brute_leftovers(S)
        cycles, left = brute_decompose(omega)
        D = sum(max(sum(omega[i]) - sum(omega[j][i] for j in range(3)), 0) for i in range(3))
        assert left >= D  # (d), for the independent peeling
        key = tuple(itertools.chain(*omega))
        if key not in uncoded:
            uncoded[key] = tuple(rates(S, strategy=s).uncoded_leftovers for s in ("greedy", "exact"))
        if is_conserved(S):
            n_conserved += 1
            assert left == 0 and all(len(c) >= 3 for c in cycles)  # (c)
            assert uncoded[key] == (0, 0)
        else:
            assert min(uncoded[key]) >= D  # (d)
    assert n_conserved > 0


@pytest.mark.parametrize(("N", "K"), [(10, 3), (11, 4), (7, 2), (13, 5), (15, 3)])
def test_library_placements_are_conserved_even_when_K_does_not_divide_N(N, K):
    for seed in range(3):
        a = epoch_placement(N, K, seed=seed, epoch=0)
        b = epoch_placement(N, K, seed=seed, epoch=1)
        S = shuffle_matrix(a, b)
        assert is_conserved(S)
        assert rates(S).uncoded_leftovers == 0


def test_unequal_batches_break_the_worst_case():
    S = [[0, 2], [1, 0]]
    N, K = 3, 2
    assert not is_conserved(S)
    r = rates(S, strategy="exact")
    assert (r.pairs, r.uncoded_leftovers, r.coded) == (1, 1, 2)
    best = brute_bound(S)  # brute force over the two orderings (claim 3): holders after receivers
    assert best == lower_bound(S).value == 2
    assert best > N * (K - 1) / K


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
