"""Claim 3: the genie / acyclic-ordering lower bound, and its equality to W minus a minimum FAS.

Notation
--------
==================  =================================================================
``x_1 .. x_N``      the data points, independent and uniform on ``{0, 1}^d``
``C_k, D_k``        ``A_k^t`` (cache of worker ``k``) and ``A_k^{t+1}`` (what it needs)
``X``               everything the master sends; a scheme's load is ``R = H(X) / d``
``S[i][j]``         ``|C_i intersect D_j|``
``sigma``           an ordering ``(sigma_1, ..., sigma_K)`` of the workers
``pos(k)``          the place of worker ``k`` in ``sigma``
``G(S)``            the digraph on the workers with an arc ``i -> j`` of weight ``S[i][j]``
                    for every ``i != j`` (holder to receiver)
``B(sigma)``        ``sum of S[i][j] over i != j with pos(i) > pos(j)``: arcs from a holder
                    placed after its receiver ("backward" arcs)
``W``               total weight of ``G(S)``, the moved points
FAS                 feedback arc set: a set of arcs whose removal leaves ``G(S)`` acyclic
==================  =================================================================

Statement
---------
(a) For every ordering ``sigma`` and every scheme (encoder ``X = phi(x_1..x_N)``, decoders
    ``D_k = psi_k(X, C_k)``), ``R >= B(sigma)``.

(b) ``max_sigma B(sigma) = `` the largest weight of an acyclic subgraph of ``G(S)``
    ``= W - `` (least weight of a FAS of ``G(S)``).

Hence ``R*(S) >= LB(S) := max_sigma B(sigma) = W - minFAS(S)``; ``bounds.lower_bound`` returns
this value with an ordering attaining it.

Proof
-----
(a) Let ``M`` be the set of points held by a worker placed after the worker that needs them:
``M = {x in C_i intersect D_j : i != j, pos(i) > pos(j)}``; ``|M| = B(sigma)``. Let ``Z`` be
all the other points (a genie gives ``Z`` to everyone). Claim: ``M`` is a function of ``(X, Z)``.
Decode the workers in the order of ``sigma``. Worker ``sigma_a``'s cache splits into points
of ``Z`` and points of ``M``; a point of ``M`` held by ``sigma_a`` is needed by a worker placed
before ``sigma_a`` (that is the definition of ``M``), so it was recovered at an earlier
step. Hence from ``X``, ``Z`` and the earlier steps we rebuild ``C_{sigma_a}``, run
``psi_{sigma_a}`` and obtain ``D_{sigma_a}``, which contains every point of ``M`` that
``sigma_a`` needs. After ``K`` steps every point of ``M`` is recovered (each one is needed by
some worker). Therefore, with ``M`` independent of ``Z``,

    H(X) >= H(X | Z) >= I(X; M | Z) = H(M | Z) - H(M | X, Z) = H(M) - 0 = |M| d,

so ``R >= |M| = B(sigma)``.

(b) The backward arcs of an ordering form an acyclic subgraph: along any directed path of
backward arcs ``pos`` strictly decreases. Conversely, an acyclic subgraph ``H`` has a
topological order (every arc of ``H`` goes from an earlier to a later vertex); its reverse
``sigma`` makes every arc of ``H`` backward, so ``B(sigma) >= weight(H)``. So the maximum of
``B`` is the maximum acyclic subgraph weight. Finally ``H`` is acyclic exactly when its
complement ``G(S) - H`` is a FAS, and ``weight(H) = W - weight(G(S) - H)``.

The bound meets the coded scheme's load only if ``minFAS(S) = P + (cycles packed)``; claim 5
studies when it does. A weak-duality fact used there: every cycle of leftovers has a backward
arc in every ordering and each pair ``{i, j}`` contributes ``min(S_ij, S_ji)`` backward points
at least, so ``LB(S) <= W - P - (cycles packed)`` for every packing: the scheme never beats
the bound, as it must not.

Check
-----
Brute force over all ``K!`` orderings with ``itertools.permutations`` (independent of the
library's dynamic program): exhaustively over every 3 x 3 off-diagonal pattern with entries in
``0..3`` (4 096 matrices), over every 4 x 4 matrix with row and column sums ``b <= 2``, and on
seeded random 5 x 5 and 6 x 6 matrices; a second, independent route to ``W - minFAS`` by
enumerating all subsets of the arcs of 4-worker supports and testing acyclicity; that the
returned ordering attains the value (``ordering_bound`` and brute force agree); the paper's
Example 1 (bound 6); and the genie decoding of (a) carried out on points for the optimal
ordering (every cached point of ``M`` is needed by an earlier worker). The brute forces and the
enumeration of matrices are those of ``tests/oracles.py``, Example 1 that of ``tests/cases.py``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import lower_bound, ordering_bound
from coded_shuffle.matrix import placements_from_matrix
from coded_shuffle.plan import rates
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES
from tests.oracles import brute_bound, brute_w_minus_min_fas, magic_matrices


def check(S) -> None:
    lb = lower_bound(S)
    expect = brute_bound(S)
    assert lb.value == expect and lb.exact
    assert ordering_bound(S, lb.ordering) == expect
    assert expect <= rates(S, strategy="greedy").coded  # weak duality, proof of (b)


def test_example_1():
    # Attia and Tandon (2016), Example 1: the coded load 6 is optimal
    assert brute_bound(EXAMPLE_1) == lower_bound(EXAMPLE_1).value == EXAMPLE_1_VALUES["coded"]


def test_all_3x3_patterns():
    for cells in itertools.product(range(4), repeat=6):
        S = [[0, cells[0], cells[1]], [cells[2], 0, cells[3]], [cells[4], cells[5], 0]]
        check(S)


def test_all_4x4_magic_up_to_batch_2():
    n = 0
    for b in range(3):
        for S in magic_matrices(4, b):
            check(S)
            n += 1
    assert n == 1 + 24 + 282


@pytest.mark.parametrize("K", [5, 6])
def test_random(K):
    rng = np.random.default_rng(K)
    for _ in range(30):
        S = rng.integers(0, 6, size=(K, K)) * (rng.random((K, K)) < 0.6)
        check(S)


def test_min_fas_route():
    rng = np.random.default_rng(3)
    for _ in range(40):
        S = (rng.integers(0, 4, size=(4, 4)) * (rng.random((4, 4)) < 0.7)).tolist()
        assert brute_w_minus_min_fas(S) == brute_bound(S) == lower_bound(S).value


def test_genie_decoding_order_on_points():
    rng = np.random.default_rng(5)
    for _ in range(20):
        S = rng.integers(0, 3, size=(4, 4))
        lb = lower_bound(S)
        a, b = placements_from_matrix(S)
        before, after = np.asarray(a.owner), np.asarray(b.owner)
        pos = {w: p for p, w in enumerate(lb.ordering)}
        holder_pos = np.array([pos[int(w)] for w in before])
        receiver_pos = np.array([pos[int(w)] for w in after])
        in_M = (before != after) & (holder_pos > receiver_pos)
        assert int(in_M.sum()) == lb.value
        recovered: set[int] = set()
        for w in lb.ordering:
            cached_M = set(np.flatnonzero(in_M & (before == w)).tolist())
            assert cached_M <= recovered  # every cached point of M was recovered earlier
            recovered |= set(np.flatnonzero(in_M & (after == w)).tolist())
        assert recovered == set(np.flatnonzero(in_M).tolist())


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
