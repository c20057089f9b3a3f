"""Claim 7: achievability with a storage of M = 1 + t batches: plans decode; the cyclic shift costs R(t).

Notation
--------
==============  ====================================================================
``K, t, C``     workers; ``M = 1 + t``; ``C = C(K - 1, t)`` pieces a record (claim 6)
``G``           a ``(t + 2)``-set of workers; ``P`` a ``(t + 1)``-set
``x(G, i)``     a piece wanted by ``i`` in ``G`` and held exactly by ``G \\ {i}``
``u_G``         a group symbol: ``XOR of x(G, i)`` over its receivers ``R_G``, a subset of ``G``
                (at most one piece per receiver)
round           a partial permutation: each worker ``i`` receives at most one record, from
                ``o_i``; it activates the groups ``L`` containing some pair ``{o_i, i}``, and
                ``R_G = {i in G : o_i in G}`` (``x(G, i)`` is the piece of ``o_i``'s record
                labelled ``G \\ {i, o_i}``)
``Y_P``         ``XOR of u_G over G in L containing P``; ``B_L`` the 0/1 matrix, rows ``L``,
                columns ``P``, ``B[G][P] = [P inside G]`` (the boundary vectors ``dG``)
``R(t)``        ``(N / K) (K - 1 - t) / (t + 1)`` records
==============  ====================================================================

Statement
---------
(a) Knowledge. A member ``w`` of ``G`` outside ``R_G`` knows ``u_G`` (it holds every term); a
    receiver ``i`` knows every term of ``u_G`` but ``x(G, i)``.

(b) Group symbols decode: receiver ``i`` of ``u_G`` gets ``x(G, i)`` from ``u_G`` and (a).

(c) Chains decode: if every receiver of every symbol of ``u_1, ..., u_l`` knows (a) some other
    ``u_m`` fully, the ``l - 1`` symbols ``u_k + u_{k+1}`` let each of them recover every ``u_k``,
    then its own piece; a chain saves one symbol.

(d) Rounds decode. For a round, sending ``Y_P`` for the ``P`` of any set whose columns span the
    columns of ``B_L`` (an information set: ``rank B_L`` symbols; or all ``P`` avoiding a fixed
    worker ``w``: ``C(K - 1, t + 1)`` symbols) lets every receiver decode. Hence a round costs at
    most ``min(|L|, rank B_L) <= C(K - 1, t + 1)`` pieces.

(e) The cyclic batch shift (``N`` a multiple of ``K``) is ``N / K`` rounds and costs at most
    ``(N / K) C(K - 1, t + 1) / C(K - 1, t) = R(t)`` records; with claim 8, exactly.

(f) At ``t = 0``: group symbols are the order-2 symbols, chains of single leftovers are the
    leftover cycles, and a round of a permutation with cycles of lengths ``l`` costs
    ``sum (l - 1)`` (a 2-cycle: one pair symbol), today's loads; the library calls
    :func:`coded_shuffle.plan.rates` at ``M = 1``.

Proof
-----
(a) The term ``x(G, k)`` for ``k`` in ``R_G`` is held by ``G \\ {k}``, which contains every member
but ``k``. Worker outside ``G`` may know nothing: no term's holder set contains it.

(b) Immediate from (a). (c) Let receiver ``r`` know ``u_a``. From ``u_a`` and the consecutive sums
it computes ``u_{a+1}, u_{a+2}, ...`` and ``u_{a-1}, ...``: every ``u_k``; in particular those it
receives in, and then its pieces by (a).

(d) Every ``Y_P`` is computable: ``Y`` is linear in the columns (``Y_P = col_P . u``), so a column
that is a sum of sent columns gives the sum of their ``Y``. For the sets avoiding ``w`` this is
the cone identity: for ``P`` containing ``w``, with ``Q = P \\ {w}``,
``col_P = sum over y not in P of col_{Q u {y}}``. Entry ``G``: both sides vanish unless ``Q`` is
in ``G``; then ``G = Q u {a, b}``, the right side counts the ``y`` in ``{a, b} \\ {w}``: one if ``w`` is
in ``G`` (then ``P`` is in ``G``), two (zero mod 2) if not. Now let ``i`` be a receiver of
``u_G``, ``s = o_i``, and ``P = G \\ {s}`` (it contains ``i``). The groups of ``L`` containing
``P`` are ``G`` and ``G' = P u {y}``, ``y`` not in ``G``; ``G'`` contains ``i`` but not ``o_i = s``,
so ``i`` is no receiver of ``u_G'`` and knows it (a). So ``Y_P + sum of those u_G'`` is ``u_G``,
and ``x(G, i)`` follows. Costs: sending every ``u_G`` also works, ``|L|``; the rank of
``B_L`` is at most ``C(K - 1, t + 1)`` since the sets avoiding ``w`` span the columns.

(e) The shift's moved records split into ``N / K`` perfect rounds ``o_i = i + 1``; by (d) each costs
at most ``C(K - 1, t + 1)`` pieces; ``C(K-1, t+1) / C(K-1, t) = (K - 1 - t) / (t + 1)``.

(f) At ``t = 0``, ``G = {i, j}``, ``x(G, j)`` is a record held by ``i`` wanted by ``j``: the
busiest member of a pair sends ``max(S_ij, S_ji)``, ``min`` of them paired. A chain of single
leftovers ``u_k`` (held by ``a_k``, wanted by ``a_{k+1}``) needs ``a_{k+1}`` to know some other
``u_m`` fully: the one it holds, ``u_{k+1}``: a directed cycle. ``B_L`` is the incidence matrix
of the undirected graph of the round, of rank (vertices - components).

Check
-----
With ``galois``: on the cyclic shift for ``K = 3..6``, every ``t <= K - 2`` and ``N = K, 2K``, the
piece-level plan sends ``(N/K) C(K-1, t+1)`` pieces and every worker's GF(2) rank certificate
holds (``rank G_k == rank [G_k; E_need]``, built from the transmissions only); every partial
permutation of ``K = 4`` (150 random ones for ``K = 5, 6``) as a round, certified the same way, costs at
most ``C(K - 1, t + 1)`` pieces; the cone identity on the full ``B`` for ``K <= 7`` and every ``t``;
random shuffles for both strategies certified by rank and by the decoding simulation of
:func:`coded_shuffle.storage.verify_storage_plan`; at ``t = 0`` the loads equal
:func:`coded_shuffle.plan.rates` and the group symbols of (f) the paired load.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import cyclic_shift_matrix
from coded_shuffle.matrix import placements_from_matrix
from coded_shuffle.plan import rates
from coded_shuffle.storage import piece_placement, plan_storage, storage_rates, verify_storage_plan
from coded_shuffle.storage.planner import _groups_plan, group_counts
from tests.oracles import gf2_decodable


def plan_of(S, M, strategy):
    a, b = placements_from_matrix(np.asarray(S))
    plan = plan_storage(piece_placement(a, M=M), b, strategy=strategy)
    verify_storage_plan(plan)
    return plan


@pytest.mark.parametrize("K", [3, 4, 5, 6])
def test_cyclic_shift_meets_R_t_certified(K):
    for t in range(K - 1):
        for N in (K, 2 * K):
            plan = plan_of(cyclic_shift_matrix(N, K), t + 1, "rounds")
            assert plan.n_symbols == (N // K) * math.comb(K - 1, t + 1)
            if N * math.comb(K - 1, t) <= 400:
                assert gf2_decodable(plan)


@pytest.mark.parametrize("K", [4, 5, 6])
def test_every_partial_permutation_round_decodes(K):
    rng = np.random.default_rng(K)
    if K <= 4:
        perms = itertools.product(range(-1, K), repeat=K)  # -1: the worker receives nothing
    else:
        perms = (tuple(int(o) if rng.random() < 0.8 else -1 for o in rng.permutation(K)) for _ in range(150))
    seen = 0
    for src in perms:
        S = np.zeros((K, K), dtype=np.int64)
        if any(o == i for i, o in enumerate(src)) or all(o < 0 for o in src):
            continue
        for i, o in enumerate(src):
            if o >= 0:
                S[o, i] += 1
        if len({o for o in src if o >= 0}) < sum(o >= 0 for o in src):
            continue  # a round: every holder sends at most one record
        for i in range(K):
            S[i, i] += 2  # batches of some size; only the moved records matter
        t = int(rng.integers(1, K - 1))
        plan = plan_of(S, t + 1, "rounds")
        assert plan.n_symbols <= math.comb(K - 1, t + 1)
        if seen % 7 == 0:
            assert gf2_decodable(plan)
        seen += 1
    assert seen > 50


@pytest.mark.parametrize("K", [3, 4, 5, 6, 7])
def test_cone_identity(K):
    for t in range(K - 1):
        G = [frozenset(c) for c in itertools.combinations(range(K), t + 2)]
        for w in range(K):
            for P in itertools.combinations(range(K), t + 1):
                if w not in P:
                    continue
                Q = frozenset(P) - {w}
                lhs = np.array([frozenset(P) <= g for g in G], dtype=np.int64)
                rhs = sum(
                    np.array([(Q | {y}) <= g for g in G], dtype=np.int64) for y in range(K) if y not in P
                )
                assert ((lhs - rhs) % 2 == 0).all()


@pytest.mark.parametrize("strategy", ["groups", "rounds"])
def test_random_shuffles_certified(strategy):
    rng = np.random.default_rng(7)
    for _ in range(12):
        K = int(rng.integers(3, 6))
        t = int(rng.integers(1, K - 1))
        S = rng.integers(0, 3, (K, K))
        plan = plan_of(S, t + 1, strategy)
        if plan.storage.N * plan.storage.pieces <= 300:
            assert gf2_decodable(plan)


def test_t0_is_todays_scheme():
    rng = np.random.default_rng(0)
    for _ in range(30):
        K = int(rng.integers(2, 8))
        S = rng.integers(0, 5, (K, K))
        r, today = storage_rates(S, M=1), rates(S)
        assert r.coded == today.coded and r.grouped == today.paired
        off = S.copy()
        np.fill_diagonal(off, 0)
        assert _groups_plan(group_counts(off, M=1), 0).sent == today.paired


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
