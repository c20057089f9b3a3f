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
workers), which is a valid bound but flagged as not exact.

Worst case: no shuffle needs more than ``N (K - 1) / K`` symbols, and the cyclic batch shift
needs exactly that many (Attia and Tandon, Allerton 2016, arXiv:1609.09823).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._checks import check_int
from .matrix import check_shuffle_matrix, elastic_matrix

__all__ = [
    "EXACT_BOUND_MAX_K",
    "LowerBound",
    "lower_bound",
    "ordering_bound",
    "worst_case",
    "cyclic_shift_matrix",
]

#: Largest ``K`` for which :func:`lower_bound` runs the exact dynamic program.
EXACT_BOUND_MAX_K = 20


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
        Whether ``value`` is the maximum over all orderings.
    """

    S: np.ndarray
    value: int
    ordering: tuple[int, ...]
    exact: bool


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


def _exact_ordering(S: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """Dynamic program over subsets placed first: O(2^K K^2), vectorized layer by layer."""
    K = S.shape[0]
    if K == 1:
        return 0, (0,)
    full = 1 << K
    masks = np.arange(full, dtype=np.int64)
    bits = ((masks[:, None] >> np.arange(K)) & 1).astype(bool)
    popcount = bits.sum(axis=1)
    layer_order = np.argsort(popcount, kind="stable")
    bounds = np.searchsorted(popcount[layer_order], np.arange(K + 2))
    f = np.zeros(full, dtype=np.int64)
    last = np.zeros(full, dtype=np.int8)
    Sf = S.astype(np.float64)  # exact: loads stay far below 2^53
    for p in range(1, K + 1):
        U = layer_order[bounds[p] : bounds[p + 1]]
        B = bits[U]
        # placing v last among U adds S[v][j] for every j in U placed before it
        gain = np.rint(B.astype(np.float64) @ Sf.T).astype(np.int64)
        prev = f[U[:, None] ^ (1 << np.arange(K))]
        cand = np.where(B, prev + gain, -1)
        best = cand.argmax(axis=1)
        f[U] = cand[np.arange(U.size), best]
        last[U] = best
    order = []
    mask = full - 1
    while mask:
        v = int(last[mask])
        order.append(v)
        mask ^= 1 << v
    return int(f[full - 1]), tuple(order[::-1])


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


def lower_bound(S: object, *, exact: bool | None = None) -> LowerBound:
    """Return the best genie lower bound on the load of ``S`` over orderings of the workers.

    Parameters
    ----------
    S : array_like
        Shuffle matrix of non-negative ints; ``K_t x K_{t+1}`` when the number of workers
        changes (taken as :func:`coded_shuffle.matrix.elastic_matrix` of it).
    exact : bool, optional
        Force (``True``) or skip (``False``) the exact dynamic program; by default it runs when
        ``K <= EXACT_BOUND_MAX_K``. Forcing it above that size raises ``ValueError``.

    Returns
    -------
    LowerBound

    Examples
    --------
    Example 1 of Attia and Tandon (2016), where the coded load 6 meets the bound:

    >>> lb = lower_bound([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> lb.value, lb.exact
    (6, True)
    """
    S = elastic_matrix(S)
    K = S.shape[0]
    if exact is None:
        exact = K <= EXACT_BOUND_MAX_K
    elif not isinstance(exact, bool):
        raise TypeError(f"Argument 'exact' must be a bool or None, not {type(exact).__name__}.")
    if exact and K > EXACT_BOUND_MAX_K:
        raise ValueError(f"Argument 'exact' can be True only for K <= {EXACT_BOUND_MAX_K}, not K = {K}.")
    off = S.copy()
    np.fill_diagonal(off, 0)
    value, ordering = _exact_ordering(off) if exact else _heuristic_ordering(off)
    return LowerBound(S=S, value=value, ordering=ordering, exact=exact)


def worst_case(N: int, K: int) -> Fraction:
    """Return ``N (K - 1) / K``, the worst-case optimal load over all shuffles.

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
