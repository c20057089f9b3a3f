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

import time
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._checks import check_int
from .matrix import check_shuffle_matrix, elastic_matrix

__all__ = [
    "EXACT_BOUND_MAX_K",
    "EXACT_BOUND_TIME_LIMIT",
    "EXACT_BOUND_PROGRAM_MAX_K",
    "LowerBound",
    "lower_bound",
    "ordering_bound",
    "worst_case",
    "cyclic_shift_matrix",
]

#: Largest ``K`` for which :func:`lower_bound` runs the exact dynamic program.
EXACT_BOUND_MAX_K = 20
#: Seconds of HiGHS time the feedback arc set program gets (``lower_bound(S, exact=True)``).
EXACT_BOUND_TIME_LIMIT = 60.0
#: Largest ``K`` for which ``lower_bound(S, exact=True)`` builds the feedback arc set program.
EXACT_BOUND_PROGRAM_MAX_K = 128


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


def _shortest_cycles(support: np.ndarray, arcs: Iterable[tuple[int, int]]) -> list[tuple[int, ...]]:
    """For each arc ``u -> v`` of ``support``, a shortest cycle through it (if any), listed from ``u``."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    arcs = list(arcs)
    if not arcs:
        return []
    dist, pred = shortest_path(csr_matrix(support.astype(np.int8)), unweighted=True, return_predecessors=True)
    out = []
    for u, v in arcs:
        if not np.isfinite(dist[v, u]):
            continue
        path = [u]  # walk back from u to v along the shortest path v -> ... -> u
        while path[-1] != v:
            path.append(int(pred[v, path[-1]]))
        out.append((u, *path[::-1][:-1]))
    return out


def _ilp_ordering(S: np.ndarray, time_limit: float) -> tuple[int, tuple[int, ...], bool, str | None]:
    """Minimum feedback arc set of the leftovers by integer programming with lazy cycle rows.

    Each pair of workers contributes ``min(S_ij, S_ji)`` to every ordering, so only the leftover
    digraph ``Omega = max(S - S.T, 0)`` matters: its arcs ``i -> j`` count when ``i`` is placed
    after ``j``, and the best ordering drops a minimum-weight set of arcs that leaves ``Omega``
    acyclic. The program asks every listed cycle to lose an arc; it starts from the triangles
    and a shortest cycle through each arc the heuristic ordering drops, and after each solve adds
    a shortest cycle through every arc still on a cycle, until what is kept is acyclic (Baharev,
    Schichl, Neumaier and Achterberg, ACM J. Exp. Algorithmics 26, 2021). Each solve's optimum
    bounds the minimum from below, so it stops as soon as that meets the heuristic's set.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    start = time.monotonic()
    h_value, h_order = _heuristic_ordering(S)
    omega = np.maximum(S - S.T, 0)
    np.fill_diagonal(omega, 0)
    total = int(omega.sum())
    h_drop = total - ordering_bound(omega, h_order)  # weight of the arcs the heuristic drops
    ii, jj = np.nonzero(omega)
    if h_drop == 0:
        return h_value, h_order, True, None
    arc_id = np.full(omega.shape, -1, dtype=np.int64)
    arc_id[ii, jj] = np.arange(ii.size)
    support = omega > 0
    pos = np.empty(S.shape[0], dtype=np.int64)
    pos[list(h_order)] = np.arange(S.shape[0])
    rows: dict[tuple[int, ...], None] = {}

    def add(cycles: Iterable[tuple[int, ...]]) -> int:
        n = len(rows)
        for cyc in cycles:
            k = cyc.index(min(cyc))
            rows[cyc[k:] + cyc[:k]] = None
        return len(rows) - n

    tri_i, tri_j, tri_k = np.nonzero(support[:, :, None] & support[None, :, :] & support.T[:, None, :])
    first = (tri_i < tri_j) & (tri_i < tri_k)
    add(zip(tri_i[first].tolist(), tri_j[first].tolist(), tri_k[first].tolist(), strict=True))
    dropped = [(int(i), int(j)) for i, j in zip(ii, jj, strict=True) if pos[i] < pos[j]]
    add(_shortest_cycles(support, dropped))
    rounds = 0
    while True:
        left = time_limit - (time.monotonic() - start)
        if left <= 0:
            break
        rounds += 1
        cycles = list(rows)
        r = np.repeat(np.arange(len(cycles)), [len(c) for c in cycles])
        c = np.concatenate([arc_id[list(cyc), list(cyc[1:] + cyc[:1])] for cyc in cycles])
        A = coo_matrix((np.ones(r.size), (r, c)), shape=(len(cycles), ii.size)).tocsr()
        res = milp(
            c=omega[ii, jj].astype(float),
            constraints=LinearConstraint(A, 1, np.inf),
            integrality=np.ones(ii.size),
            bounds=Bounds(0, 1),
            options={"time_limit": left},
        )
        if res.status != 0 or res.x is None:
            break
        if int(round(res.fun)) >= h_drop:  # the relaxation already needs the heuristic's weight
            return h_value, h_order, True, None
        kept = support.copy()
        cut = np.rint(res.x).astype(bool)
        kept[ii[cut], jj[cut]] = False
        n_comp, label = connected_components(kept, directed=True, connection="strong")
        on_cycle = [(int(i), int(j)) for i, j in zip(*np.nonzero(kept), strict=True) if label[i] == label[j]]
        if not on_cycle:  # kept arcs acyclic: place j before i for every kept i -> j
            order = _topological(kept)[::-1]
            return ordering_bound(S, order), tuple(order), True, None
        if not add(_shortest_cycles(kept, on_cycle)):
            raise AssertionError("a cycle of the kept arcs was already a row of the program")
    note = (
        f"bound: the feedback arc set program was not solved within {time_limit:g} s "
        f"({rounds} rounds, {len(rows)} cycle rows); the bound comes from a heuristic ordering"
    )
    return h_value, h_order, False, note


def _topological(support: np.ndarray) -> list[int]:
    """An order of the workers with ``i`` before ``j`` for every arc ``i -> j`` of an acyclic support."""
    indeg = support.sum(axis=0).astype(np.int64)
    ready = list(np.flatnonzero(indeg == 0))
    order: list[int] = []
    while ready:
        v = int(ready.pop())
        order.append(v)
        for w in np.flatnonzero(support[v]):
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)
    if len(order) != support.shape[0]:
        raise AssertionError("the support has a cycle")
    return order


def lower_bound(
    S: object, *, exact: bool | None = None, time_limit: float = EXACT_BOUND_TIME_LIMIT
) -> LowerBound:
    """Return the best genie lower bound on the load of ``S`` over orderings of the workers.

    Parameters
    ----------
    S : array_like
        Shuffle matrix of non-negative ints; ``K_t x K_{t+1}`` when the number of workers
        changes (taken as :func:`coded_shuffle.matrix.elastic_matrix` of it).
    exact : bool, optional
        ``None`` (default): the exact dynamic program for ``K <= EXACT_BOUND_MAX_K``, a heuristic
        ordering above. ``True``: exact at any ``K``, by the dynamic program up to
        ``EXACT_BOUND_MAX_K`` and above it by a minimum feedback arc set program with lazily
        added cycle rows, solved by HiGHS, for ``K <= EXACT_BOUND_PROGRAM_MAX_K``; if that is
        not solved within ``time_limit`` seconds (or ``K`` is larger), the heuristic bound is
        returned with ``exact=False`` and a ``note``. ``False``: the
        heuristic ordering only.
    time_limit : float
        Seconds for the feedback arc set program (default :data:`EXACT_BOUND_TIME_LIMIT`).

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
    if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not time_limit > 0:
        raise ValueError(f"Argument 'time_limit' must be a positive number of seconds, not {time_limit!r}.")
    off = S.copy()
    np.fill_diagonal(off, 0)
    if K <= EXACT_BOUND_MAX_K and exact is not False:
        value, ordering = _exact_ordering(off)
        return LowerBound(S=S, value=value, ordering=ordering, exact=True)
    if exact and K <= EXACT_BOUND_PROGRAM_MAX_K:
        value, ordering, proven, note = _ilp_ordering(off, float(time_limit))
        return LowerBound(S=S, value=value, ordering=ordering, exact=proven, note=note)
    value, ordering = _heuristic_ordering(off)
    if exact:
        note = (
            f"bound: K = {K} is above {EXACT_BOUND_PROGRAM_MAX_K}, the largest for the feedback arc set "
            "program; the bound comes from a heuristic ordering"
        )
        return LowerBound(S=S, value=value, ordering=ordering, exact=False, note=note)
    return LowerBound(S=S, value=value, ordering=ordering, exact=False)


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
