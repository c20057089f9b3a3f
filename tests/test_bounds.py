from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.bounds import (
    EXACT_BOUND_MAX_K,
    EXACT_BOUND_NODE_LIMIT,
    _ordering_program,
    cyclic_shift_matrix,
    lower_bound,
    ordering_bound,
    worst_case,
)
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES
from tests.oracles import brute_bound, brute_w_minus_min_fas


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    st.integers(1, 6).flatmap(
        lambda K: st.lists(st.lists(st.integers(0, 6), min_size=K, max_size=K), min_size=K, max_size=K)
    )
)
def test_lower_bound_against_all_orderings(S):
    lb = lower_bound(S)
    assert lb.exact
    assert lb.value == brute_bound(S)
    assert ordering_bound(S, lb.ordering) == lb.value
    heuristic = lower_bound(S, exact=False)
    assert not heuristic.exact
    assert heuristic.value <= lb.value
    assert ordering_bound(S, heuristic.ordering) == heuristic.value


def test_bound_is_W_minus_min_feedback_arc_set(rng):
    for _ in range(20):
        K = int(rng.integers(2, 5))
        S = rng.integers(0, 4, (K, K)).tolist()
        assert lower_bound(S).value == brute_w_minus_min_fas(S) == brute_bound(S)


def test_exact_dynamic_program_at_largest_K(rng):
    # A planted ordering: only arcs from later holders to earlier receivers carry weight.
    K = EXACT_BOUND_MAX_K
    perm = rng.permutation(K)
    S = np.zeros((K, K), dtype=np.int64)
    for a in range(K):
        for b in range(a):
            S[perm[a], perm[b]] = rng.integers(1, 5)
    lb = lower_bound(S)
    assert lb.exact and lb.value == S.sum()
    assert tuple(perm.tolist()) == lb.ordering


def test_paper_example1_bound():
    # Example 1 (Attia and Tandon 2016): the coded load 6 is optimal.
    assert lower_bound(EXAMPLE_1).value == EXAMPLE_1_VALUES["lower_bound"] == EXAMPLE_1_VALUES["coded"]


@pytest.mark.parametrize("K", [1, 2, 3, 7, 25, 40])
def test_cyclic_shift_bound(K):
    N = 5 * K
    lb = lower_bound(cyclic_shift_matrix(N, K))
    assert lb.value == N * (K - 1) // K
    assert lb.exact == (K <= EXACT_BOUND_MAX_K)


def test_worst_case_values():
    assert worst_case(15, 3) == Fraction(10)
    assert worst_case(10, 4) == Fraction(15, 2)
    assert worst_case(7, 1) == 0


def test_lower_bound_exceptions():
    with pytest.raises(ValueError, match="'node_limit' must be at least 1, not 0"):
        lower_bound([[0]], exact=True, node_limit=0)
    with pytest.raises(TypeError, match="'node_limit' must be an int, not float"):
        lower_bound([[0]], node_limit=2.5)
    # a wall-clock budget is gone: accepted for a release with a warning, and changes nothing
    S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
    with pytest.warns(DeprecationWarning, match="'time_limit' of lower_bound is deprecated and ignored"):
        assert lower_bound(S, time_limit=1e-12).value == lower_bound(S).value == 6
    with pytest.raises(TypeError, match="'exact'"):
        lower_bound([[0]], exact="yes")
    with pytest.raises(ValueError, match="'S'"):
        lower_bound([[0, -1]])
    with pytest.raises(ValueError, match="'ordering'"):
        ordering_bound([[0, 1], [1, 0]], [0, 0])
    with pytest.raises(TypeError, match="'ordering'"):
        ordering_bound([[0, 1], [1, 0]], None)
    with pytest.raises(ValueError, match="'K'"):
        worst_case(4, 0)
    with pytest.raises(ValueError, match="'N'"):
        cyclic_shift_matrix(7, 3)


def reference_heuristic_ordering(S):
    """The heuristic ordering written out with numpy, step by step, as its docstring states it.

    Eades, Lin and Smyth on the arcs j -> i of weight S[i][j]: the smallest sink goes to the
    tail, else the smallest source to the head, else the first worker of largest out - in weight
    to the head; then single-worker moves to the first best position while they raise the bound.
    """
    S = np.array(S, dtype=np.int64)
    K = S.shape[0]
    A = S.T
    alive = np.ones(K, dtype=bool)
    head, tail = [], []
    out_w, in_w = A.sum(axis=1), A.sum(axis=0)
    while alive.any():
        idx = np.flatnonzero(alive)
        sinks, sources = idx[out_w[idx] == 0], idx[in_w[idx] == 0]
        if sinks.size:
            v = int(sinks[0])
            tail.append(v)
        else:
            v = int(sources[0]) if sources.size else int(idx[np.argmax(out_w[idx] - in_w[idx])])
            head.append(v)
        alive[v] = False
        out_w = out_w - A[:, v]
        in_w = in_w - A[v, :]
    order = head + tail[::-1]
    improved = True
    while improved:
        improved = False
        for v in range(K):
            rest = [w for w in order if w != v]
            scores = [sum(S[v, w] for w in rest[:p]) + sum(S[w, v] for w in rest[p:]) for p in range(K)]
            p = int(np.argmax(scores))
            if scores[p] > scores[order.index(v)]:
                order = rest[:p] + [v] + rest[p:]
                improved = True
    return order


def test_heuristic_ordering_as_specified(rng):
    """The compiled ordering (K > 20) is the one of its specification, ties broken alike."""
    for trial in range(12):
        K = int(rng.integers(21, 36))
        S = rng.integers(0, 3 if trial % 2 else 40, (K, K)) * (rng.random((K, K)) < rng.random())
        if trial == 0:
            S = cyclic_shift_matrix(3 * K, K)
        np.fill_diagonal(S, 0)
        from coded_shuffle.bounds import _heuristic_ordering

        value, ordering = _heuristic_ordering(S)
        assert list(ordering) == reference_heuristic_ordering(S)
        assert value == ordering_bound(S, ordering)
        # The default bound starts there and searches on: never lower, and the value of its ordering.
        lb = lower_bound(S)
        assert not lb.exact and lb.value >= value
        assert lb.value == ordering_bound(S, lb.ordering)


def test_ordering_kernels_against_numpy(rng):
    from coded_shuffle._kernels import ordering_value

    for _ in range(20):
        K = int(rng.integers(1, 30))
        S = rng.integers(0, 9, (K, K))
        order = rng.permutation(K)
        assert ordering_value(S, order) == int(np.tril(S[np.ix_(order, order)], -1).sum())


# --------------------------------------------------------------------------- ordering program


def test_ordering_program_against_dynamic_program(rng):
    for _ in range(40):
        K = int(rng.integers(2, 13))
        S = rng.integers(0, int(rng.integers(1, 30)), (K, K))
        np.fill_diagonal(S, 0)
        value, ordering, proven, note = _ordering_program(S, EXACT_BOUND_NODE_LIMIT)
        assert proven and note is None
        assert value == lower_bound(S).value == ordering_bound(S, ordering)


def test_ordering_program_on_a_tournament_of_triangles():
    # Omega = the cyclic tournament on 7 workers (i -> i+1, i+2, i+3): every ordering drops at
    # least 6 of its 21 arcs (brute force over all orderings below), so the bound is 15
    K = 7
    S = np.zeros((K, K), dtype=np.int64)
    for i in range(K):
        for d in (1, 2, 3):
            S[i, (i + d) % K] = 1
    assert brute_bound(S.tolist()) == 15
    value, ordering, proven, _ = _ordering_program(S, EXACT_BOUND_NODE_LIMIT)
    assert (value, proven) == (15, True)


def test_searched_ordering_against_dynamic_program(rng):
    from coded_shuffle.bounds import _heuristic_ordering, _searched_ordering

    for _ in range(30):
        K = int(rng.integers(3, 13))
        S = rng.integers(0, int(rng.integers(1, 30)), (K, K))
        np.fill_diagonal(S, 0)
        value, ordering = _searched_ordering(S, rounds=50)
        assert sorted(ordering) == list(range(K)) and value == ordering_bound(S, ordering)
        assert _heuristic_ordering(S)[0] <= value <= lower_bound(S).value


def test_ordering_program_beats_a_poor_start(rng, monkeypatch):
    # started from the identity ordering, the program itself must find the best one and prove it
    import coded_shuffle.bounds as bounds_mod

    monkeypatch.setattr(
        bounds_mod, "_searched_ordering", lambda S: (ordering_bound(S, range(len(S))), tuple(range(len(S))))
    )
    for _ in range(10):
        K = int(rng.integers(5, 12))
        S = rng.integers(0, 20, (K, K))
        np.fill_diagonal(S, 0)
        best = lower_bound(S).value
        value, ordering, proven, note = _ordering_program(S, EXACT_BOUND_NODE_LIMIT)
        assert proven and note is None and value == best == ordering_bound(S, ordering)


def test_exact_bound_beyond_the_dynamic_program(rng):
    # A planted ordering with K above the dynamic program's range: the bound is all of S
    K = EXACT_BOUND_MAX_K + 5
    perm = rng.permutation(K)
    S = np.zeros((K, K), dtype=np.int64)
    for a in range(K):
        for b in range(a):
            S[perm[a], perm[b]] = rng.integers(1, 5)
    S[perm[0], perm[K - 1]] = 1  # one arc against the order: it must be dropped
    lb = lower_bound(S, exact=True)
    assert lb.exact and lb.note is None
    assert lb.value == S.sum() - 1 == ordering_bound(S, lb.ordering)
    assert not lower_bound(S).exact


@pytest.mark.parametrize("K", [21, 30])
def test_cyclic_shift_exact_beyond_the_dynamic_program(K):
    lb = lower_bound(cyclic_shift_matrix(3 * K, K), exact=True)
    assert lb.exact and lb.value == 3 * (K - 1)


def test_exact_bound_out_of_work_says_so(rng, monkeypatch):
    # HiGHS stopped at its node limit with no better ordering (status 1, no solution): random
    # matrices this small are settled at the root, so the solver's answer is stood in for
    import scipy.optimize
    from scipy.optimize import OptimizeResult

    seen = {}

    def stopped(*args, options, **kw):
        seen.update(options)
        return OptimizeResult(status=1, x=None, message="node limit reached")

    monkeypatch.setattr(scipy.optimize, "milp", stopped)
    K = EXACT_BOUND_MAX_K + 2
    S = rng.integers(0, 9, (K, K))
    lb = lower_bound(S, exact=True, node_limit=7)
    assert seen == {"node_limit": 7, "mip_rel_gap": 0.0}  # optimal means proven, no gap
    assert not lb.exact and "not solved within 7 nodes" in lb.note
    # the best ordering found is kept: the local search's, never below the heuristic's
    assert lb.value == ordering_bound(S, lb.ordering) >= lower_bound(S, exact=False).value


def test_exact_bound_above_the_program_size_says_so():
    K = 33
    lb = lower_bound(cyclic_shift_matrix(K, K), exact=True)
    assert not lb.exact and "above 32" in lb.note
    assert lb.value == K - 1 == ordering_bound(cyclic_shift_matrix(K, K), lb.ordering)
