"""Tests of coded_shuffle.storage: excess storage (docs/storage.md).

The oracles here are written from the definitions of docs/storage.md with itertools, independently of
the library: pieces ``r_T`` for the ``t``-subsets ``T`` of the workers other than the owner, the
genie bound by enumeration of every ordering, the uncoded load counted piece by piece, and GF(2)
ranks with galois.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import galois
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound
from coded_shuffle.errors import InvalidPlanError
from coded_shuffle.matrix import placements_from_matrix, shuffle_matrix
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import rates
from coded_shuffle.storage import (
    check_piece_placement,
    group_counts,
    piece_demand,
    piece_placement,
    plan_storage,
    storage_lower_bound,
    storage_ordering_bound,
    storage_rates,
    storage_worst_case,
    update_storage,
    verify_storage_plan,
)
from tests.oracles import brute_pieces, brute_storage_bound, gf2_decodable

GF2 = galois.GF2


# --------------------------------------------------------------------------- oracles


def random_equal_S(K, b, rng):
    """A sum of ``b`` random permutation matrices: every batch of size ``b``."""
    S = np.zeros((K, K), dtype=np.int64)
    for _ in range(b):
        S[np.arange(K), rng.permutation(K)] += 1
    return S


def random_reshuffle(N, K, rng):
    a = np.repeat(np.arange(K), N // K)
    S = np.zeros((K, K), dtype=np.int64)
    np.add.at(S, (a, rng.permutation(a)), 1)
    return S


# --------------------------------------------------------------------------- bad input


def test_storage_exceptions():
    S = [[0, 1], [1, 0]]
    with pytest.raises(ValueError, match="'M'"):
        storage_rates(S, M=0)
    with pytest.raises(ValueError, match="'M'"):
        storage_rates(S, M=3)
    with pytest.raises(TypeError, match="'M'.*memory sharing"):
        storage_rates(S, M=1.5)
    for not_an_int in (2.0, True, np.int64(2).astype(float)):  # refused as subpackets refuses them
        with pytest.raises(TypeError, match="'M' \\(storage\\) must be an int"):
            storage_rates(S, M=not_an_int)
    with pytest.raises(TypeError, match="'M'"):
        storage_rates(S, M="2")
    with pytest.raises(ValueError, match="'M'.*number of workers changes"):
        storage_rates([[1, 0, 1], [0, 1, 1]], M=2)
    with pytest.raises(ValueError, match="'M'.*number of workers changes"):
        storage_lower_bound([[1, 0, 1], [0, 1, 1]], M=2)
    with pytest.raises(ValueError, match="'M'"):
        storage_worst_case(4, 2, 0)
    with pytest.raises(ValueError, match="'M'"):
        piece_placement(placement_from_owner([0, 1], 2), M=3)
    with pytest.raises(ValueError, match="'strategy'"):
        storage_rates(S, M=2, strategy="nope")
    with pytest.raises(TypeError, match="'placement'"):
        piece_placement([0, 1], M=1)
    pp = piece_placement(placement_from_owner([0, 1, 2], 3), M=2)
    with pytest.raises(ValueError, match="'placement_next'.*changing K"):
        piece_demand(pp, placement_from_owner([0, 1, 2], 4))
    # M = 1 still accepts a changing K, as today
    assert storage_rates([[1, 0, 1], [0, 1, 1]], M=1).coded == rates([[1, 0, 1], [0, 1, 1]]).coded


# --------------------------------------------------------------------------- placement and update


@pytest.mark.parametrize(("K", "M"), [(3, 1), (3, 2), (4, 2), (4, 3), (5, 3), (5, 5)])
def test_placement_against_definition_and_update_keeps_it(K, M):
    t = M - 1
    N = 3 * K + 1
    p = epoch_placement(N, K, seed=1, epoch=0)
    pp = piece_placement(p, M=M)
    owner = p.owner.tolist()
    for r in range(N):  # the definition: r_T at {o} u T, every t-subset T of the others once
        o = owner[r]
        got = sorted(tuple(w for w in range(K) if int(h) >> w & 1) for h in pp.holders[r])
        want = sorted(
            tuple(sorted({o, *T})) for T in itertools.combinations([w for w in range(K) if w != o], t)
        )
        assert got == want
    for epoch in range(1, 5):
        nxt = epoch_placement(N, K, seed=1, epoch=epoch)
        demand = piece_demand(pp, nxt)
        S = shuffle_matrix(pp.placement, nxt)
        assert len(demand) == len(brute_pieces(S, t))
        new = update_storage(pp, nxt)
        check_piece_placement(new)  # every worker holds exactly its share, checked every epoch
        held_before = [set(pp.held_by(k).tolist()) for k in range(K)]
        for k in range(K):  # what a worker holds after = what it held + what it received - dropped
            got = set(new.held_by(k).tolist())
            received = {int(x) for x, j, _ in demand.tolist() if j == k}
            assert received <= got <= held_before[k] | received
        pp = new


def test_checker_catches_a_bad_placement():
    pp = piece_placement(placement_from_owner([0, 1, 2, 0], 3), M=2)
    H = pp.holders.copy()
    H[0, 0] = H[0, 1]
    bad = type(pp)(placement=pp.placement, M=2, holders=H)
    with pytest.raises(InvalidPlanError):
        check_piece_placement(bad)


# --------------------------------------------------------------------------- loads and bound


@pytest.mark.parametrize(("K", "M"), [(3, 2), (4, 2), (4, 3), (5, 2), (5, 3), (5, 4)])
def test_bound_and_uncoded_against_brute_force(K, M, rng):
    t = M - 1
    C = math.comb(K - 1, t)
    for _ in range(6):
        S = rng.integers(0, 3, size=(K, K))
        b = storage_lower_bound(S, M=M)
        assert b.pieces == brute_storage_bound(S, t)
        assert storage_ordering_bound(S, b.ordering, M=M) == b.pieces
        r = storage_rates(S, M=M)
        assert r.uncoded == Fraction(len(brute_pieces(S, t)), C)
        assert b.value <= r.coded <= r.grouped <= r.uncoded


def test_t0_reduces_to_todays_scheme(rng):
    for K in (2, 3, 5, 7):
        for _ in range(10):
            S = rng.integers(0, 6, size=(K, K))
            assert storage_lower_bound(S, M=1).pieces == lower_bound(S).value
            r, today = storage_rates(S, M=1), rates(S)
            assert (r.coded, r.grouped, r.uncoded) == (today.coded, today.paired, today.uncoded)
    # the group symbols at t = 0 are the order-2 symbols and the leftovers alone
    from coded_shuffle.storage.planner import _groups_plan, group_counts

    for _ in range(10):
        S = rng.integers(0, 6, size=(5, 5))
        off = S.copy()
        np.fill_diagonal(off, 0)
        assert _groups_plan(group_counts(off, M=1), 0).sent == rates(S).paired


def test_worst_case_formula():
    for K in range(1, 9):
        for M in range(1, K + 1):
            t = M - 1
            assert storage_worst_case(K * 6, K, M) == Fraction(6 * (K - 1 - t), t + 1)
    assert storage_worst_case(30, 5, 1) == Fraction(24)


@pytest.mark.parametrize("K", list(range(2, 17)))
def test_cyclic_shift_costs_exactly_R_t(K):
    N = K  # one record a worker (a few for small K)
    for t in range(0, K - 1):
        n = N * (3 if K <= 6 else 1)
        Z = cyclic_shift_matrix(n, K)
        R = storage_worst_case(n, K, t + 1)
        strategy = "best" if K <= 8 else "rounds"
        assert storage_rates(Z, M=t + 1, strategy=strategy).coded == R
        assert storage_lower_bound(Z, M=t + 1).value == R


@settings(max_examples=40, deadline=None)
@given(
    K=st.integers(2, 6),
    M=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    b=st.integers(1, 5),
)
def test_bound_coded_grouped_uncoded_in_order(K, M, seed, b):
    M = min(M, K)
    S = random_equal_S(K, b, np.random.default_rng(seed))
    r = storage_rates(S, M=M)
    assert storage_lower_bound(S, M=M).value <= r.coded <= r.grouped <= r.uncoded
    assert r.coded <= storage_worst_case(K * b, K, M)  # the rounds never pass R(t) (claim 7)
    assert storage_rates(S, M=M, strategy="rounds").coded <= storage_worst_case(K * b, K, M)


# --------------------------------------------------------------------------- plans decode


@pytest.mark.parametrize("strategy", ["groups", "rounds", "best"])
@pytest.mark.parametrize(("K", "M"), [(3, 1), (3, 2), (4, 2), (4, 3), (5, 2), (5, 3)])
def test_plans_decode_simulated_and_certified(K, M, strategy, rng):
    for trial in range(4):
        S = random_equal_S(K, int(rng.integers(1, 4)), rng) if trial % 2 else rng.integers(0, 3, (K, K))
        a, b = placements_from_matrix(S)
        pp = piece_placement(a, M=M)
        plan = plan_storage(pp, b, strategy=strategy)
        assert plan.n_symbols == storage_rates(S, M=M, strategy=strategy).coded_symbols
        verify_storage_plan(plan, seed=trial)
        if pp.N * pp.pieces <= 400:
            assert gf2_decodable(plan)


def test_random_reshuffles_decode_over_epochs():
    K, M, N = 5, 3, 60
    pp = piece_placement(epoch_placement(N, K, seed=3, epoch=0), M=M)
    for epoch in range(1, 4):
        nxt = epoch_placement(N, K, seed=3, epoch=epoch)
        plan = plan_storage(pp, nxt)
        verify_storage_plan(plan, seed=epoch)
        pp = update_storage(pp, nxt)
        check_piece_placement(pp)


def test_verify_catches_a_missing_transmission():
    a, b = placements_from_matrix(cyclic_shift_matrix(4, 4))
    plan = plan_storage(piece_placement(a, M=2), b)
    broken = type(plan)(
        storage=plan.storage,
        placement_next=plan.placement_next,
        S=plan.S,
        strategy=plan.strategy,
        chosen=plan.chosen,
        offsets=plan.offsets[1:] - plan.offsets[1],
        terms=plan.terms[plan.offsets[1] :],
        demand=plan.demand,
        rates=plan.rates,
    )
    from coded_shuffle.errors import DecodeError

    with pytest.raises(DecodeError):
        verify_storage_plan(broken)
    assert not gf2_decodable(broken)


@pytest.mark.parametrize("K", [4, 5, 6, 7, 8])
def test_random_reshuffle_meets_the_target(K):
    # issue 18: coded / lower_bound <= 1.01 on uniformly random reshuffles, N = 1000 K, M = 2, 3
    rng = np.random.default_rng(K)
    for M in (2, 3):
        S = random_reshuffle(1000 * K, K, rng)
        r, b = storage_rates(S, M=M), storage_lower_bound(S, M=M)
        assert b.value <= r.coded <= Fraction(101, 100) * b.value


@pytest.mark.parametrize(("K", "M", "N", "seed"), [(4, 2, 40, 0), (5, 2, 50, 2), (5, 2, 100, 0)])
def test_cut_leftovers_decode(K, M, N, seed):
    # the second round of the groups strategy (leftovers cut into singles) is exercised here
    from coded_shuffle.storage.planner import _groups_plan, group_counts

    S = random_reshuffle(N, K, np.random.default_rng(seed))
    off = S.copy()
    np.fill_diagonal(off, 0)
    assert _groups_plan(group_counts(off, M=M), M - 1).split
    a, b = placements_from_matrix(S)
    plan = plan_storage(piece_placement(a, M=M), b, strategy="groups")
    assert plan.n_symbols == storage_rates(S, M=M, strategy="groups").coded_symbols
    verify_storage_plan(plan, seed=seed)
    if N * plan.storage.pieces <= 200:
        assert gf2_decodable(plan)


def test_loads_with_storage_dispatch_to_the_scheme_of_the_storage():
    """coded_shuffle.loads is the one place that takes a storage: M = 1 is plan and bounds, M > 1
    the storage's functions; plan and bounds take no storage (one type a function)."""
    import inspect

    from coded_shuffle import lower_bound, plan_delivery, plan_from_matrix, worst_case
    from coded_shuffle.loads import (
        bound_with_storage,
        plan_with_storage,
        rates_with_storage,
        worst_case_with_storage,
    )
    from coded_shuffle.orders import epoch_placement
    from coded_shuffle.storage import (
        piece_placement,
        plan_storage,
        storage_lower_bound,
        storage_rates,
        storage_worst_case,
        verify_storage_plan,
    )

    for f in (rates, lower_bound, worst_case, plan_delivery, plan_from_matrix):
        assert "storage" not in inspect.signature(f).parameters, f.__name__
    S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
    r, r2 = rates_with_storage(S, storage=2), storage_rates(S, M=2)
    assert (r.coded, r.uncoded, r.grouped, r.chosen) == (r2.coded, r2.uncoded, r2.grouped, r2.chosen)
    assert rates_with_storage(S).coded == rates(S).coded == 6
    assert bound_with_storage(S, storage=2).pieces == storage_lower_bound(S, M=2).pieces
    assert bound_with_storage(S).value == lower_bound(S).value == 6
    assert worst_case_with_storage(12, 4, storage=3) == storage_worst_case(12, 4, 3)
    assert worst_case_with_storage(12, 4) == worst_case(12, 4) == 9
    a, b = (epoch_placement(120, 4, seed=1, epoch=t) for t in (0, 1))
    plan = plan_with_storage(a, b, storage=2)
    assert plan.transmissions == plan_storage(piece_placement(a, M=2), b).transmissions
    verify_storage_plan(plan)
    assert plan_with_storage(a, b).n_symbols == plan_delivery(a, b).n_symbols
    with pytest.raises(ValueError, match=r"'M' \(storage\) must be at most K = 3"):
        rates_with_storage(S, storage=4)
    with pytest.raises(TypeError, match="'placement_t' must be a Placement"):
        plan_with_storage(S, b, storage=2)


def test_storage_rates_read_as_rates_do():
    """Code written for Rates reads a storage's rates too: rates(S, storage=M) had no .paired."""
    S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]

    def core(r):
        return r.uncoded, r.paired, r.coded, r.K, r.N

    one, two = rates(S), storage_rates(S, M=2)
    assert core(one) == (11, 7, 6, 3, 15)  # Example 1 of Attia and Tandon (2016)
    assert two.paired == two.grouped and (two.K, two.N) == (3, 15)
    assert two.coded <= two.paired <= two.uncoded


# --------------------------------------------------------------------------- the compiled and
# counted steps of the loads, against the loops they replace


def test_round_group_count_against_listing(rng):
    from coded_shuffle.storage.rounds import _round_group_count, _round_groups

    for _ in range(300):
        K = int(rng.integers(2, 10))
        t = int(rng.integers(0, K - 1))
        perm = rng.permutation(K)  # a partial permutation: paths and cycles
        edges = [(o, int(perm[o])) for o in range(K) if perm[o] != o and rng.random() < 0.7]
        assert _round_group_count(edges, K, t) == len(_round_groups(edges, K, t))
    star = [(0, 1), (0, 2), (0, 3), (4, 0)]  # degree 4: listed
    assert _round_group_count(star, 6, 1) == len(_round_groups(star, 6, 1)) == 4 * 4 - 3 - 3


def test_group_counts_against_each_group(rng):
    for K, M in ((3, 2), (7, 3), (9, 9), (12, 2)):
        S = rng.integers(0, 3, (K, K)) * (rng.random((K, K)) < 0.4)
        off = S.copy()
        np.fill_diagonal(off, 0)
        expected = {}
        for g in itertools.combinations(range(K), M + 1):
            c = off[np.ix_(g, g)].sum(axis=0)
            if c.any():
                expected[sum(1 << i for i in g)] = dict(zip(g, c.tolist(), strict=True))
        got = group_counts(S, M=M)
        assert got == expected and list(got) == list(expected)  # in lexicographic order of the groups


def _chains_oracle(A, m, order):
    """The pairs and chains of 3 of ``_pack_chains``, by the numpy statements of the kernels."""
    m = list(m)
    n = len(m)
    mutual = A & A.T
    alive = np.array([v > 0 for v in m])
    degree = (mutual & alive[None, :]).sum(axis=1)
    out = []
    while (cand := np.flatnonzero(alive & (degree > 0))).size:
        a = int(cand[np.argmin(degree[cand])])
        partners = np.flatnonzero(mutual[a] & alive)
        b = int(partners[np.argmin(degree[partners])])
        k = min(m[a], m[b])
        m[a] -= k
        m[b] -= k
        out.append(((a, b), k))
        for x in (a, b):
            if not m[x]:
                alive[x] = False
                degree -= mutual[:, x]
    for a in order:
        while m[a]:
            outs, ins = np.flatnonzero(A[a] & alive), np.flatnonzero(A[:, a] & alive)
            hit = np.argwhere(A[np.ix_(outs, ins)])
            hit = hit[outs[hit[:, 0]] != ins[hit[:, 1]]] if hit.size else hit
            if not hit.size:
                break
            b, c = int(outs[hit[0, 0]]), int(ins[hit[0, 1]])
            k = min(m[a], m[b], m[c])
            for x in (a, b, c):
                m[x] -= k
                alive[x] = m[x] > 0
            out.append(((a, b, c), k))
    assert n == len(m)
    return out, m


def test_chain_kernels_against_their_statements(rng):
    from coded_shuffle.storage._kernels import chain_pairs, chain_triples

    for _ in range(40):
        n = int(rng.integers(2, 40))
        A = rng.random((n, n)) < rng.uniform(0.05, 0.5)
        np.fill_diagonal(A, False)
        m = rng.integers(0, 5, n)
        order = sorted(range(n), key=lambda a: -m[a])
        expected, left_expected = _chains_oracle(A, m.tolist(), order)
        left = m.astype(np.int64)
        alive = left > 0
        mutual = A & A.T
        degree = (mutual & alive[None, :]).sum(axis=1).astype(np.int64)
        rows = np.zeros((n, 3), dtype=np.int64)
        got = [((a, b), k) for a, b, k in rows[: chain_pairs(mutual, left, alive, degree, rows)].tolist()]
        rows = np.zeros((n, 4), dtype=np.int64)
        count = chain_triples(A, left, alive, np.array(order, dtype=np.int64), rows)
        got += [((a, b, c), k) for a, b, c, k in rows[:count].tolist()]
        assert got == expected and left.tolist() == left_expected


def test_searched_storage_bound_against_single_moves(rng):
    from coded_shuffle.storage.bound import _searched

    def moves(off, t):  # first improvement over single-worker moves, an ordering at a time
        order = list(lower_bound(off, exact=False).ordering)
        best = storage_ordering_bound(off, order, M=t + 1)
        improved = True
        while improved:
            improved = False
            for a in range(len(order)):
                for b in range(len(order)):
                    if a != b:
                        trial = order.copy()
                        trial.insert(b, trial.pop(a))
                        value = storage_ordering_bound(off, trial, M=t + 1)
                        if value > best:
                            order, best, improved = trial, value, True
        return best, tuple(order)

    for K, t, high in ((5, 1, 4), (9, 3, 6), (14, 2, 3), (16, 7, 2**44)):
        S = rng.integers(0, high, (K, K))
        np.fill_diagonal(S, 0)
        if high > 2**40:  # past int64 as pieces: C(14, 7) times 2**53 records
            S = S * (2**53 // int(S.sum()))
        assert _searched(S, t) == moves(S, t)
