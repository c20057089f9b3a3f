"""The known values of tests/cases.py, recomputed from their sources without the library."""

from __future__ import annotations

from fractions import Fraction
from types import SimpleNamespace

import numpy as np

from tests.cases import (
    EXAMPLE_1,
    EXAMPLE_1_RECEIVER_RUNS,
    EXAMPLE_1_VALUES,
    GREEDY_SHORT_K6,
    GREEDY_SHORT_K6_BEST,
    GREEDY_SHORT_K6_VALUES,
    OMEGA_GAP_K7,
    OMEGA_GAP_K7_VALUES,
    S_GAP_K7,
    shuffle_from_leftovers,
)
from tests.oracles import (
    brute_bound,
    brute_leftovers,
    brute_load,
    brute_max_packing,
    brute_tau,
    brute_w_minus_min_fas,
    enumeration_packing,
    simple_cycles,
)


def loads(S):
    """``W`` (moved points), ``P`` (order-2 symbols) and the leftover matrix of ``S``."""
    W = sum(int(S[i][j]) for i in range(len(S)) for j in range(len(S)) if i != j)
    return W, W - brute_load(S, 0), np.array(brute_leftovers(S))


def cycle_arcs(cycle):
    return [(cycle[k], cycle[(k + 1) % len(cycle)]) for k in range(len(cycle))]


def assert_leftover_shape(omega, arcs, batch):
    """Balanced, no 2-cycles, out-degrees at most ``batch``, ``arcs`` arcs of weight 1."""
    om = np.array(omega)
    assert (om.sum(axis=0) == om.sum(axis=1)).all() and om.max(initial=0) == 1
    assert int(om.sum()) == arcs and not (om * om.T).any() and om.sum(axis=1).max() == batch
    S = shuffle_from_leftovers(om, batch)
    assert S.min() >= 0 and (S.sum(axis=0) == batch).all() and (S.sum(axis=1) == batch).all()
    assert loads(S)[2].tolist() == om.tolist()


def test_example_1_values():
    v = EXAMPLE_1_VALUES
    S = np.array(EXAMPLE_1)
    K, N = len(S), int(S.sum())
    W, P, omega = loads(S)
    # the entries the paper states (1-based S_{2,1} = 2, S_{1,2} = 1) and its order-2 symbols per pair
    assert (S[1, 0], S[0, 1]) == (2, 1)
    assert [min(S[i, j], S[j, i]) for i, j in [(0, 1), (0, 2), (1, 2)]] == [1, 1, 2]
    assert (K, N, W, P) == (v["K"], v["N"], v["uncoded"], v["pairs"])
    assert int(omega.sum()) == v["leftovers"] and W - P == v["paired"]
    assert (S.sum(axis=0) == S.sum(axis=1)).all()  # conserved
    cycles = simple_cycles(omega)
    assert cycles == [(0, 2, 1)] and brute_max_packing(omega) == v["cycles"]
    assert len(cycles[0]) == v["leftovers"] and len(cycles[0]) - 1 == v["peel_steps"]
    assert brute_load(S, v["cycles"]) == v["coded"]
    assert brute_bound(S) == brute_w_minus_min_fas(EXAMPLE_1) == v["lower_bound"] == v["coded"]
    assert Fraction(N * (K - 1), K) == v["worst_case"]
    assert tuple((S.sum(axis=0) - np.diag(S)).tolist()) == v["needed"]


def test_example_1_receiver_runs(receiver_runs_reference):
    # the symbols by hand: order-2 for workers 0-1, 0-2, 1-2, 1-2, then the 3-cycle's two symbols
    by_hand = SimpleNamespace(
        pair_i=np.array([0, 0, 1, 1]),
        pair_j=np.array([1, 2, 2, 2]),
        cycle_ptr=np.array([0, 3]),
        cycle_workers=np.array([0, 2, 1]),
        uncoded_to=np.array([], dtype=np.int64),
    )
    assert tuple(receiver_runs_reference(by_hand, 0, 6)) == EXAMPLE_1_RECEIVER_RUNS


def test_greedy_trap_values():
    v = GREEDY_SHORT_K6_VALUES
    om = np.array(GREEDY_SHORT_K6)
    assert_leftover_shape(om, v["arcs"], v["batch"])
    # the best packing by hand: three cycles of the matrix, each arc used once
    arcs = [a for c in GREEDY_SHORT_K6_BEST for a in cycle_arcs(c)]
    assert sorted(arcs) == sorted(zip(*np.nonzero(om), strict=True)) and len(GREEDY_SHORT_K6_BEST) == 3
    assert brute_max_packing(om) == v["max_packing"] == int(brute_tau(om[None])[0]) == v["tau"]
    # greedy by hand: the first 3-cycle met is (0, 1, 3); what it leaves has one cycle only
    assert min(c for c in simple_cycles(om) if len(c) == 3) == (0, 1, 3)
    rest = om.copy()
    for u, w in cycle_arcs((0, 1, 3)):
        rest[u, w] -= 1
    assert simple_cycles(rest) == [(0, 2, 3, 5, 1, 4)] and 1 + brute_max_packing(rest) == v["greedy_cycles"]


def test_gap_matrix_values():
    v = OMEGA_GAP_K7_VALUES
    om = np.array(OMEGA_GAP_K7)
    assert_leftover_shape(om, v["arcs"], v["batch"])
    assert len(simple_cycles(om)) == v["simple_cycles"]
    assert brute_max_packing(om) == enumeration_packing(om) == v["max_packing"]
    assert Fraction(enumeration_packing(om, integral=False)).limit_denominator(100) == v["fractional_packing"]
    assert int(brute_tau(om[None])[0]) == v["tau"]
    copies = v["max_packing_of_copies"]
    assert brute_max_packing(2 * om) == enumeration_packing(2 * om) == copies[2]
    assert enumeration_packing(3 * om) == copies[3]
    S = np.array(S_GAP_K7)
    assert S.tolist() == shuffle_from_leftovers(om, v["batch"]).tolist() and int(S.sum()) == v["N"]
    W, P, _ = loads(S)
    assert (W, P) == (v["uncoded"], v["pairs"])
    assert brute_bound(S) == W - P - v["tau"] == v["lower_bound"]
    assert brute_load(S, v["max_packing"]) == v["coded"] > v["lower_bound"]
    assert W - P - Fraction(copies[2], 2) == v["coded_halves"]
