"""Lower bounds on the load of any delivery scheme, and the worst case.

Notation
--------
=================  ==================================================================
``S[i][j]``        points held by ``i`` and needed by ``j`` (:mod:`coded_shuffle.matrix`)
``sigma``          an ordering of the ``K`` workers
``R*(S)``          the least load of any scheme for ``S``, in symbols of one record
=================  ==================================================================

For any ordering ``sigma`` a genie argument (index coding: decode the workers in the order of
``sigma``, each one given the caches of the workers after it) gives

    R*(S) >= sum over workers j of sum of S[i][j] over holders i placed after j in sigma,

so the bound is the best ordering: the maximum acyclic subgraph of the weighted digraph ``S``,
``W`` minus a minimum feedback arc set. It is computed exactly by dynamic programming over
subsets for ``K <= EXACT_BOUND_MAX_K`` (about a second at that size on a 2-core machine), and
beyond that from a good ordering (Eades, Lin and Smyth's heuristic improved by moving single
workers, then by iterated local search, :func:`search_rounds` rounds), which is a valid bound
but flagged as not exact. With ``exact=True`` it is proven
beyond that range too, when it can be, by a linear ordering program (HiGHS) seeded by an
ordering improved by local search.

Worst case: no shuffle needs more than ``N (K - 1) / K`` symbols, and the cyclic batch shift
needs exactly that many (Attia and Tandon, Allerton 2016, arXiv:1609.09823).

Records of different sizes: the bound of the matrix in bytes (``S[i][j]`` the bytes of the
records ``i`` holds and ``j`` needs, :func:`coded_shuffle.matrix.shuffle_matrix` with ``sizes``)
is the genie bound weighted by size, in bytes, valid for every scheme
(``proofs/claim_14_byte_bound.py``); :func:`coded_shuffle.loads.byte_loads` gives it beside
the bound in records.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._checks import check_int
from .matrix import check_shuffle_matrix, elastic_matrix

__all__ = [
    "EXACT_BOUND_MAX_K",
    "EXACT_BOUND_NODE_LIMIT",
    "EXACT_BOUND_PROGRAM_MAX_K",
    "LowerBound",
    "lower_bound",
    "ordering_bound",
    "worst_case",
    "cyclic_shift_matrix",
    "optimality_gap",
    "search_rounds",
]

#: Largest ``K`` for which :func:`lower_bound` runs the exact dynamic program.
EXACT_BOUND_MAX_K = 20
#: Branch-and-bound nodes the ordering program may explore (``lower_bound(S, exact=True)``): a
#: count of work, not seconds, so that the same matrix gets the same bound on a loaded machine.
EXACT_BOUND_NODE_LIMIT = 20_000
#: Largest ``K`` for which ``lower_bound(S, exact=True)`` builds the ordering program (its rows
#: are the ``K (K - 1) (K - 2) / 6`` triples of workers).
EXACT_BOUND_PROGRAM_MAX_K = 32


@dataclass(frozen=True, eq=False)
class LowerBound:
    """A lower bound on the load of the shuffle matrix ``S``, with the ordering that gives it.

    Attributes
    ----------
    S : numpy.ndarray
        The shuffle matrix.
    value : int
        The bound, in symbols.
    ordering : tuple of int
        Workers in the order of the genie argument; :func:`ordering_bound` of it is ``value``.
    exact : bool
        Whether ``value`` is proven to be the maximum over all orderings.
    note : str or None
        Why an exact bound was asked for and not proven, if it was not.
    """

    S: np.ndarray
    value: int
    ordering: tuple[int, ...]
    exact: bool
    note: str | None = None


def ordering_bound(S: object, ordering: object) -> int:
    """Return the genie bound of one ordering: ``S[i][j]`` summed over ``i`` placed after ``j``.

    Brute-force equivalent: ``sum(S[o[b]][o[a]] for a < b)`` over positions ``a, b``.

    Examples
    --------
    >>> ordering_bound([[0, 1], [3, 0]], [0, 1])
    3
    >>> ordering_bound([[0, 1], [3, 0]], [1, 0])
    1
    """
    S = check_shuffle_matrix(S)
    K = S.shape[0]
    try:
        order = np.array([int(w) for w in ordering], dtype=np.int64)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise TypeError("Argument 'ordering' must be a sequence of worker indices.") from None
    if sorted(order.tolist()) != list(range(K)):
        raise ValueError(f"Argument 'ordering' must be a permutation of 0..{K - 1}.")
    P = S[np.ix_(order, order)]  # P[a][b] = S[o[a]][o[b]]
    return int(np.tril(P, -1).sum())  # holder at b after receiver at a: P[b][a], b > a


def subset_dp(G: np.ndarray, weight: Callable[[int], int] = lambda p: 1) -> tuple[int, list[int]]:
    """The dynamic program over subsets of the genie bounds: O(2^K K^2), layer by layer.

    ``f(U) = max over v in U of f(U - v) + weight(|U|) * sum_{u in U} G[u][v]``, for every subset
    ``U`` of the ``K`` workers; returns ``f`` of all of them and the workers picked, from the full
    set down (the ``v`` of the full set first). :func:`lower_bound` runs it with ``G = S^T`` (``U``
    the workers placed first, ``v`` the last of them); the bound on pieces of
    :mod:`coded_shuffle.storage` with ``G = S`` and a weight by layer (``U`` placed last, ``v``
    their first). The sums are exact in float64 below 2^53 (:data:`coded_shuffle.matrix.MAX_POINTS`);
    where ``weight`` times them might pass int64, ``f`` is kept in two int64 words (exact, slower).

    Examples
    --------
    >>> subset_dp(np.array([[0, 2], [1, 0]]))
    (2, [1, 0])
    >>> subset_dp(np.array([[0, 2**52], [2**52, 0]]), lambda p: 3**18) == (2**52 * 3**18, [0, 1])
    True
    """
    K = G.shape[0]
    if K == 1:
        return 0, [0]
    full = 1 << K
    masks = np.arange(full, dtype=np.int64)
    bits = ((masks[:, None] >> np.arange(K)) & 1).astype(bool)
    popcount = bits.sum(axis=1)
    layer_order = np.argsort(popcount, kind="stable")
    bounds = np.searchsorted(popcount[layer_order], np.arange(K + 2))
    weights = [int(weight(p)) for p in range(K + 1)]
    total = int(G.sum(dtype=np.float64))  # exact: G counts at most MAX_POINTS
    wide = max(weights) * total >= 1 << 62
    if wide and max(weights) >= 1 << (62 - _WORD):  # weight * (gain & low) stays below 2**62
        raise ValueError(f"Argument 'weight' must stay below 2**{62 - _WORD}, not {max(weights)}.")
    f = np.zeros(full, dtype=np.int64)
    f_hi = np.zeros(full, dtype=np.int64) if wide else f  # f = f_hi * 2**_WORD + f, wide
    pick = np.zeros(full, dtype=np.int8)
    Gf = G.astype(np.float64)
    low = (1 << _WORD) - 1
    for p in range(1, K + 1):
        U = layer_order[bounds[p] : bounds[p + 1]]
        B = bits[U]
        gain = np.rint(B.astype(np.float64) @ Gf).astype(np.int64)
        before = U[:, None] ^ (1 << np.arange(K))
        rows = np.arange(U.size)
        if not wide:
            cand = np.where(B, f[before] + weights[p] * gain, -1)
            best = cand.argmax(axis=1)
            f[U] = cand[rows, best]
        else:  # two words: the low one below 2**_WORD, the carry into the high one
            lo = f[before] + weights[p] * (gain & low)
            hi = f_hi[before] + weights[p] * (gain >> _WORD) + (lo >> _WORD)
            lo &= low
            hi = np.where(B, hi, -1)
            top = hi.max(axis=1)
            best = np.where(B & (hi == top[:, None]), lo, -1).argmax(axis=1)
            f[U], f_hi[U] = lo[rows, best], hi[rows, best]
        pick[U] = best
    picked = []
    mask = full - 1
    while mask:
        v = int(pick[mask])
        picked.append(v)
        mask ^= 1 << v
    value = int(f[full - 1]) + (int(f_hi[full - 1]) << _WORD if wide else 0)
    return value, picked


#: Bits of the low word of :func:`subset_dp`'s values when they might pass int64.
_WORD = 32


def _exact_ordering(S: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """The best ordering: placing ``v`` last among the workers ``U`` placed first adds ``S[v][j]``
    for every ``j`` in ``U`` (:func:`subset_dp` with ``G = S^T``)."""
    value, picked = subset_dp(S.T)
    return value, tuple(picked[::-1])


def _heuristic_ordering(S: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """Eades-Lin-Smyth ordering, then single-worker moves while they raise the bound.

    The bound counts ``S[i][j]`` when the receiver ``j`` comes before the holder ``i``: the arcs
    ``j -> i``. Both steps are compiled (:func:`coded_shuffle._kernels.eades_ordering`,
    :func:`coded_shuffle._kernels.improve_ordering`), ``O(K^2)`` a pass, and so is the value,
    :func:`ordering_bound` of the ordering (:func:`coded_shuffle._kernels.ordering_value`).
    """
    from ._kernels import eades_ordering, improve_ordering, ordering_value

    S = np.ascontiguousarray(S, dtype=np.int64)
    order = eades_ordering(S)
    D = S - S.T
    # The moves read one row of D per worker and pass: the narrowest type keeps it in cache.
    top = int(np.abs(D).max()) if D.size else 0
    narrow = next(t for t in (np.int8, np.int16, np.int32, np.int64) if top <= np.iinfo(t).max)
    improve_ordering(D.astype(narrow, copy=False), order)
    return int(ordering_value(S, order)), tuple(order.tolist())


#: Rounds of the iterated local search that seeds the ordering program.
SEARCH_ROUNDS = 1000


def search_rounds(K: int) -> int:
    """Rounds of local search of the default bound above ``EXACT_BOUND_MAX_K`` workers.

    A round costs ``O(K^2)``: :data:`SEARCH_ROUNDS` up to ``K = 316``, fewer above (``10^8 / K^2``,
    at least 20), so that the search stays well under a second to a few seconds. Deterministic.

    Examples
    --------
    >>> search_rounds(64), search_rounds(1024), search_rounds(5000)
    (1000, 95, 20)
    """
    return max(20, min(SEARCH_ROUNDS, 10**8 // max(1, K) ** 2))


def _searched_ordering(S: np.ndarray, rounds: int = SEARCH_ROUNDS) -> tuple[int, tuple[int, ...]]:
    """The heuristic ordering improved by iterated local search.

    Each round moves two to five random workers of the current ordering to random places,
    applies the single-worker moves of :func:`_heuristic_ordering` until none helps, and keeps
    the result when its bound is not lower (Schiavinotto and Stützle, "The linear ordering
    problem: instances, search space analysis and algorithms", J. Math. Model. Algorithms 3,
    2004). Deterministic: the moves come from a fixed seed.
    """
    from ._kernels import improve_ordering, ordering_value

    value, start = _heuristic_ordering(S)
    S = np.ascontiguousarray(S, dtype=np.int64)
    D = S - S.T
    K = S.shape[0]
    if K < 3:
        return value, start
    rng = np.random.default_rng(0)
    best = current = np.array(start, dtype=np.int64)
    best_value = current_value = value
    for _ in range(rounds):
        trial = current.copy()
        for _ in range(int(rng.integers(2, 6))):
            i, j = (int(v) for v in rng.integers(0, K, 2))
            trial = np.insert(np.delete(trial, i), j, trial[i])
        improve_ordering(D, trial)
        trial_value = int(ordering_value(S, trial))
        if trial_value >= current_value:
            current, current_value = trial, trial_value
            if trial_value > best_value:
                best, best_value = trial.copy(), trial_value
    return best_value, tuple(best.tolist())


def _ordering_program(S: np.ndarray, node_limit: int) -> tuple[int, tuple[int, ...], bool, str | None]:
    """The best ordering, as a linear ordering problem solved by HiGHS.

    A 0/1 variable ``x_ij`` for each pair ``i < j`` says that ``i`` comes before ``j``; the bound
    then counts ``S[j][i]``, else ``S[i][j]``. For every triple ``a < b < c`` the row
    ``0 <= x_ab + x_bc - x_ac <= 1`` forbids a cycle of precedences, and with these rows the 0/1
    points are exactly the orderings (Grötschel, Jünger and Reinelt, Operations Research 32,
    1984). One more row asks for a bound above that of the ordering found by local search
    (:func:`_searched_ordering`), so the program either finds a better ordering, and its optimum
    is the bound, or is infeasible, which proves the searched ordering the best.
    """
    from itertools import combinations

    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix, vstack

    h_value, h_order = _searched_ordering(S)
    K = S.shape[0]
    iu, ju = np.triu_indices(K, 1)
    var = np.full((K, K), -1, dtype=np.int64)
    var[iu, ju] = np.arange(iu.size)
    base = int(S[iu, ju].sum())
    gain = S[ju, iu] - S[iu, ju]
    if K < 3 or not gain.any():
        return h_value, h_order, True, None
    # In units of the gains' common divisor, exactly: the program's numbers stay small.
    unit = int(np.gcd.reduce(np.abs(gain)))
    gain = (gain // unit).astype(np.float64)
    need = -((base - h_value - 1) // unit)  # ceil((h_value + 1 - base) / unit)
    a, b, c = np.array(list(combinations(range(K), 3)), dtype=np.int64).T
    rows = np.repeat(np.arange(a.size), 3)
    cols = np.stack([var[a, b], var[b, c], var[a, c]], axis=1).ravel()
    triangles = coo_matrix((np.tile([1.0, 1.0, -1.0], a.size), (rows, cols)), shape=(a.size, iu.size))
    A = vstack([triangles, coo_matrix(gain[None, :])]).tocsr()
    lo = np.concatenate([np.zeros(a.size), [need]])
    hi = np.concatenate([np.ones(a.size), [np.inf]])
    res = milp(
        -gain,
        constraints=LinearConstraint(A, lo, hi),
        integrality=np.ones(iu.size),
        bounds=Bounds(0, 1),
        options={"node_limit": node_limit, "mip_rel_gap": 0.0},  # proven means optimal
    )
    if res.status == 2:  # nothing beats the heuristic ordering
        return h_value, h_order, True, None
    if res.x is not None:
        x = np.rint(res.x).astype(np.int64)
        before = np.zeros((K, K), dtype=np.int64)  # before[i][j]: i placed before j
        before[iu, ju] = x
        before[ju, iu] = 1 - x
        order = tuple(int(v) for v in np.argsort(before.sum(axis=0), kind="stable"))
        value = ordering_bound(S, order)
        if value > h_value:  # else the solver's tolerances let an ordering no better through
            if res.status == 0:
                return value, order, True, None
            h_value, h_order = value, order
    note = (
        f"bound: the ordering program was not solved within {node_limit} nodes; the bound comes from "
        "the best ordering found"
    )
    return h_value, h_order, False, note


def lower_bound(
    S: object,
    *,
    exact: bool | None = None,
    node_limit: int = EXACT_BOUND_NODE_LIMIT,
    time_limit: object = None,
) -> LowerBound:
    """Return the best genie lower bound on the load of ``S`` over orderings of the workers.

    A storage of ``M > 1`` batches a worker has its own bound on pieces,
    :func:`coded_shuffle.storage.storage_lower_bound`
    (:func:`coded_shuffle.loads.bound_with_storage` takes either).

    Parameters
    ----------
    S : array_like
        Shuffle matrix of non-negative ints; ``K_t x K_{t+1}`` when the number of workers
        changes (taken as :func:`coded_shuffle.matrix.elastic_matrix` of it).
    exact : bool, optional
        ``None`` (default): the exact dynamic program for ``K <= EXACT_BOUND_MAX_K``, a heuristic
        ordering improved by local search above. ``True``: exact at any ``K``, by the dynamic program up to
        ``EXACT_BOUND_MAX_K`` and above it, for ``K <= EXACT_BOUND_PROGRAM_MAX_K``, by a linear
        ordering program solved by HiGHS that must beat an ordering found by local search; if
        that is not settled within ``node_limit`` nodes of branch and bound (or ``K`` is larger),
        the bound of the best ordering found is returned with ``exact=False`` and a ``note``.
        ``False``: the searched ordering only, at any ``K``.
    node_limit : int
        Branch-and-bound nodes for the ordering program (default :data:`EXACT_BOUND_NODE_LIMIT`):
        a count of work, so the bound does not depend on the machine's load.
    time_limit : optional
        Deprecated and ignored (a wall-clock budget made the bound depend on the load); a
        :class:`DeprecationWarning` says so. Use ``node_limit``.

    Returns
    -------
    LowerBound

    Examples
    --------
    Example 1 of Attia and Tandon (2016), where the coded load 6 meets the bound:

    >>> lb = lower_bound([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> lb.value, lb.exact
    (6, True)

    The cyclic shift of 25 workers needs ``N (K - 1) / K``, proven beyond the dynamic program:

    >>> lb = lower_bound(cyclic_shift_matrix(50, 25), exact=True)
    >>> lb.value, lb.exact
    (48, True)
    """
    S = elastic_matrix(S)
    K = S.shape[0]
    if exact is not None and not isinstance(exact, bool):
        raise TypeError(f"Argument 'exact' must be a bool or None, not {type(exact).__name__}.")
    node_limit = check_int(node_limit, "node_limit", minimum=1)
    if time_limit is not None:
        warnings.warn(
            "Argument 'time_limit' of lower_bound is deprecated and ignored: the ordering program is "
            "bounded by 'node_limit' (a count of work), so the bound does not depend on the load.",
            DeprecationWarning,
            stacklevel=2,
        )
    off = S.copy()
    np.fill_diagonal(off, 0)
    if K <= EXACT_BOUND_MAX_K and exact is not False:
        value, ordering = _exact_ordering(off)
        return LowerBound(S=S, value=value, ordering=ordering, exact=True)
    if exact and K <= EXACT_BOUND_PROGRAM_MAX_K:
        value, ordering, proven, note = _ordering_program(off, node_limit)
        return LowerBound(S=S, value=value, ordering=ordering, exact=proven, note=note)
    value, ordering = _searched_ordering(off, search_rounds(K))
    if exact:
        note = (
            f"bound: K = {K} is above {EXACT_BOUND_PROGRAM_MAX_K}, the largest for the ordering "
            "program; the bound comes from a heuristic ordering"
        )
        return LowerBound(S=S, value=value, ordering=ordering, exact=False, note=note)
    return LowerBound(S=S, value=value, ordering=ordering, exact=False)


def worst_case(N: int, K: int) -> Fraction:
    """Return ``N (K - 1) / K``, the worst-case optimal load over all shuffles.

    With a storage of ``M = 1 + t > 1`` batches a worker it is ``R(t)``,
    :func:`coded_shuffle.storage.storage_worst_case`.

    Examples
    --------
    >>> worst_case(15, 3)
    Fraction(10, 1)
    """
    N = check_int(N, "N", minimum=0)
    K = check_int(K, "K", minimum=1)
    return Fraction(N * (K - 1), K)


def cyclic_shift_matrix(N: int, K: int) -> np.ndarray:
    """Return ``S`` of the cyclic batch shift: worker ``k``'s next batch is worker ``k + 1``'s.

    ``N`` must be a multiple of ``K``; then ``S[(k + 1) % K][k] = N / K``.

    Examples
    --------
    >>> cyclic_shift_matrix(6, 3).tolist()
    [[0, 0, 2], [2, 0, 0], [0, 2, 0]]
    """
    N = check_int(N, "N", minimum=0)
    K = check_int(K, "K", minimum=1)
    if N % K:
        raise ValueError(f"Argument 'N' must be a multiple of K = {K}, not {N}.")
    S = np.zeros((K, K), dtype=np.int64)
    k = np.arange(K)
    S[(k + 1) % K, k] = N // K
    return S


def optimality_gap(load: object, bound: object) -> float:
    """Return ``load / bound - 1``: how far a load can be from the best possible, at most.

    ``bound`` is a valid lower bound on the load of every scheme (:func:`lower_bound`), so the
    optimal load lies in ``[bound, load]`` and the true distance of ``load`` from it is at most the
    gap. A gap of 0 is the certificate ``load == bound``: no scheme sends fewer symbols. The
    quotient is exact (fractions) before the one rounding to float; a zero bound gives 0 for a zero
    load and ``inf`` otherwise.

    Examples
    --------
    >>> optimality_gap(6, 6)
    0.0
    >>> optimality_gap(11, 10)
    0.1
    >>> from fractions import Fraction
    >>> optimality_gap(Fraction(21, 2), 10)
    0.05
    """
    num, den = Fraction(load), Fraction(bound)  # type: ignore[arg-type, call-overload]
    if num < 0 or den < 0:
        raise ValueError(f"Arguments 'load' and 'bound' must be non-negative, not {num} and {den}.")
    if den == 0:
        return 0.0 if num == 0 else math.inf
    return float(num / den - 1)
