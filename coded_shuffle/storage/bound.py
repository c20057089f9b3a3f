"""The genie bound with side information on pieces, and the worst case ``R(t)``.

For an ordering ``sigma`` of the workers, count the pieces each worker wants whose holders all
come after it; no scheme sends fewer (the genie argument of ``proofs/claim_3_lower_bound.py`` on
pieces, ``proofs/claim_8_storage_converse.py``). Worker ``j``
wants, from each worker ``o`` with ``S[o][j]`` records for it, one piece held by ``{o} u T`` for
every ``t``-subset ``T`` of the workers other than ``o`` and ``j``; so with ``a_j`` workers after
``j`` the count is

    B(sigma) = sum over j of C(a_j - 1, t) * sum of S[o][j] over o after j     (pieces),

and the bound is its maximum over orderings, in records ``B / C(K - 1, t)``. At ``t = 0`` it is
:func:`coded_shuffle.bounds.lower_bound`.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import comb

import numpy as np

from .._checks import check_int, check_int_array
from ..bounds import EXACT_BOUND_MAX_K, lower_bound, subset_dp
from ._common import check_storage, demand_words, pieces_per_record, set_members, square_storage, unique_rows

__all__ = ["StorageBound", "storage_ordering_bound", "storage_lower_bound", "storage_worst_case"]


@dataclass(frozen=True, eq=False)
class StorageBound:
    """The genie bound on pieces of ``S`` with a storage of ``M`` batches.

    Attributes
    ----------
    S : numpy.ndarray
        The shuffle matrix.
    M : int
        Storage, in batches.
    pieces : int
        The bound in pieces (of ``1 / C(K - 1, t)`` record).
    value : Fraction
        The bound in records.
    ordering : tuple of int
        An ordering that attains ``pieces`` (:func:`storage_ordering_bound`).
    exact : bool
        Whether it is the maximum over all orderings (the dynamic program, ``K <= 20``).
    """

    S: np.ndarray
    M: int
    pieces: int
    value: Fraction
    ordering: tuple[int, ...]
    exact: bool


def storage_ordering_bound(S: object, ordering: object, *, M: int) -> int:
    """Return ``B(sigma)`` in pieces for one ordering (module docstring).

    Brute-force equivalent: count, for each worker ``j`` and each piece it wants, whether the
    piece's holder set lies among the workers after ``j``.

    Examples
    --------
    >>> storage_ordering_bound([[0, 0, 1], [1, 0, 0], [0, 1, 0]], [0, 1, 2], M=2)
    1
    """
    _, off, t = square_storage(S, M)
    K = off.shape[0]
    try:
        order = [int(w) for w in ordering]  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        raise TypeError("Argument 'ordering' must be a sequence of worker indices.") from None
    if sorted(order) != list(range(K)):
        raise ValueError(f"Argument 'ordering' must be a permutation of 0..{K - 1}.")
    return _pieces(off, np.array(order, dtype=np.int64), _weights(off, t))


def _weights(off: np.ndarray, t: int) -> np.ndarray:
    """``C(a - 1, t)`` for the worker at each position, ``a`` the workers after it: int64 where
    every sum of them times records fits, else Python ints (object), so that the sums stay exact."""
    K = off.shape[0]
    w = [comb(K - 2 - pos, t) if K - 2 - pos >= t else 0 for pos in range(K)]
    wide = max(w) * int(off.sum()) >= 1 << 62
    return np.array(w, dtype=object if wide else np.int64)


def _pieces(off: np.ndarray, order: np.ndarray, w: np.ndarray) -> int:
    """``B(sigma)`` of one ordering: the records each worker wants from those after it (the
    column sums below the diagonal of ``S`` reordered, exact in int64) weighted by position."""
    wanted = np.tril(off[np.ix_(order, order)], -1).sum(axis=0)
    if w.dtype == object:
        return sum(int(a) * int(b) for a, b in zip(w.tolist(), wanted.tolist(), strict=True))
    return int(w @ wanted)


def _exact(off: np.ndarray, t: int) -> tuple[int, tuple[int, ...]]:
    """Dynamic program over the set ``U`` placed last: ``f(U + v) = max f(U) + C(|U|-1, t) S[U, v]``
    (:func:`coded_shuffle.bounds.subset_dp` with ``G = S``, ``v`` the first of the set)."""
    value, picked = subset_dp(off, lambda p: comb(p - 2, t) if p - 2 >= t else 0)
    return value, tuple(picked)


def _searched(off: np.ndarray, t: int) -> tuple[int, tuple[int, ...]]:
    """The ordering of the ``t = 0`` bound, improved by moving single workers while it helps: the
    first move that raises the bound, in order of worker and place, with every place of one worker
    valued at once (:func:`_place_values`)."""
    order = np.array(lower_bound(off, exact=False).ordering, dtype=np.int64)
    w = _weights(off, t)
    best = _pieces(off, order, w)
    K = order.size
    improved = True
    while improved:
        improved = False
        for a in range(K):
            b = 0
            while b < K:  # the first place from b on that raises the bound, again after a move
                values = _place_values(off, order, a, w)
                up = [p for p in np.flatnonzero(values > best).tolist() if p >= b and p != a]
                if not up:
                    break
                p = up[0]
                order = np.insert(np.delete(order, a), p, order[a])
                best, improved, b = int(values[p]), True, p + 1
    return best, tuple(order.tolist())


def _place_values(off: np.ndarray, order: np.ndarray, a: int, w: np.ndarray) -> np.ndarray:
    """``B`` of ``order`` with its worker ``x`` at position ``a`` moved to each position ``p``.

    With ``r`` the others in order and ``base[i]`` the records ``r_i`` wants from the ``r`` after
    it, ``r_i`` sits at ``i`` before ``p`` (wanting ``S[x][r_i]`` more) and at ``i + 1`` from it::

        B(p) = sum_{i < p} w[i] (base[i] + S[x][r_i]) + sum_{i >= p} w[i + 1] base[i]
               + w[p] sum_{i >= p} S[r_i][x]

    Brute-force equivalent: ``_pieces(off, np.insert(np.delete(order, a), p, order[a]), w)``.
    """
    x, rest = order[a], np.delete(order, a)
    base = np.tril(off[np.ix_(rest, rest)], -1).sum(axis=0)
    kind = w.dtype
    gets, gives = off[x, rest].astype(kind), off[rest, x].astype(kind)
    base = base.astype(kind)
    zero = np.zeros(1, dtype=kind)
    head = np.concatenate([zero, np.cumsum(w[:-1] * (base + gets))])
    tail = np.concatenate([np.cumsum((w[1:] * base)[::-1])[::-1], zero])
    wanted_by_x = np.concatenate([np.cumsum(gives[::-1])[::-1], zero])
    return head + tail + w * wanted_by_x


def storage_lower_bound(S: object, *, M: int, exact: bool | None = None) -> StorageBound:
    """Return the best genie bound with side information over orderings of the workers.

    Exact by dynamic program over subsets for ``K <= EXACT_BOUND_MAX_K`` (``O(2^K K^2)``); beyond,
    or with ``exact=False``, the bound of a searched ordering (valid, not exact).

    Examples
    --------
    The cyclic shift of 4 workers, one record each, storage 2: ``R(1) = 1`` record.

    >>> b = storage_lower_bound([[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], M=2)
    >>> b.pieces, b.value, b.exact
    (3, Fraction(1, 1), True)
    """
    Sq, off, t = square_storage(S, M)
    K = off.shape[0]
    if exact is not None and not isinstance(exact, bool):
        raise TypeError(f"Argument 'exact' must be a bool or None, not {type(exact).__name__}.")
    if exact and K > EXACT_BOUND_MAX_K:
        raise ValueError(f"Argument 'exact' can be True only for K <= {EXACT_BOUND_MAX_K}, not K = {K}.")
    if K <= EXACT_BOUND_MAX_K and exact is not False:
        pieces, ordering = _exact(off, t)
        is_exact = True
    else:
        pieces, ordering = _searched(off, t)
        is_exact = False
    return StorageBound(
        S=Sq,
        M=t + 1,
        pieces=pieces,
        value=Fraction(pieces, pieces_per_record(K, t)),
        ordering=ordering,
        exact=is_exact,
    )


def storage_worst_case(N: int, K: int, M: int) -> Fraction:
    """Return ``R(t) = (N / K) (K - 1 - t) / (t + 1)``, ``t = M - 1``: the worst-case load in records.

    Attained by the cyclic batch shift (``proofs/claim_7_storage_achievability.py``,
    ``proofs/claim_8_storage_converse.py``).

    Examples
    --------
    >>> storage_worst_case(8000, 8, 1), storage_worst_case(8000, 8, 2), storage_worst_case(8000, 8, 8)
    (Fraction(7000, 1), Fraction(3000, 1), Fraction(0, 1))
    """
    N = check_int(N, "N", minimum=0)
    K = check_int(K, "K", minimum=1)
    t = check_storage(M, K)
    return Fraction(N * (K - 1 - t), K * (t + 1))


#: Largest ``K`` for which :func:`demand_lower_bound` maximises over every ordering (the dynamic
#: program keeps ``K 2^K`` sums).
DEMAND_EXACT_MAX_K = 16


def demand_lower_bound(
    demand: object, K: int, *, exact: bool | None = None, weights: object = None
) -> tuple[int, tuple[int, ...], bool]:
    """Return the genie bound of a demand, in pieces: ``(pieces, ordering, exact)``.

    ``weights``: a size for every row of the demand (the bytes of its piece, for pieces of many
    sizes); the bound is then in those units, the sizes of the pieces counted instead of their
    number (the same genie argument: the pieces a worker decodes from what comes after it in the
    ordering carry at least their bytes).

    ``demand`` holds the rows ``(piece, wanter, holder bitmask)`` of
    :func:`~coded_shuffle.storage.piece_demand` (beyond 64 workers, ``W`` words of holders). For an
    ordering of the workers, every piece whose holders all come after its wanter counts; no scheme
    sends fewer (the genie argument of ``proofs/claim_8_storage_converse.py``, which asks nothing of
    the holder sets but that every piece has one wanter). With every label this is
    :func:`storage_lower_bound`; with fewer pieces a record it is the bound of the labels the pieces
    have. The maximum over orderings by dynamic program over the set placed last for
    ``K <= DEMAND_EXACT_MAX_K``; beyond, or with ``exact=False``, the best of single-worker moves from the
    ordering of the bound of one batch.

    Examples
    --------
    Three whole records, each wanted by a worker that does not hold it: one symbol is enough.

    >>> demand_lower_bound([[0, 1, 5], [1, 2, 3], [2, 0, 6]], 3)
    (1, (0, 1, 2), True)
    >>> demand_lower_bound([[0, 1, 5], [1, 2, 3], [2, 0, 6]], 3, weights=[10, 30, 20])[0]
    30
    """
    K = check_int(K, "K", minimum=1)
    d = np.asarray(demand, dtype=np.int64)
    d = d.reshape(-1, 3) if d.ndim < 2 else d
    if exact is not None and not isinstance(exact, bool):
        raise TypeError(f"Argument 'exact' must be a bool or None, not {type(exact).__name__}.")
    if exact and K > DEMAND_EXACT_MAX_K:
        raise ValueError(f"Argument 'exact' can be True only for K <= {DEMAND_EXACT_MAX_K}, not K = {K}.")
    holders, h = unique_rows(demand_words(d))  # the distinct holder sets, rows of words
    if weights is None:
        cnt = np.bincount(h * K + d[:, 1], minlength=holders.shape[0] * K).reshape(-1, K)
    else:
        wt = check_int_array(weights, "weights", ndim=1).astype(np.int64)
        if wt.shape[0] != d.shape[0] or (wt.size and int(wt.min()) < 0):
            raise ValueError(f"Argument 'weights' must hold a size >= 0 for each of the {d.shape[0]} rows.")
        cnt = np.zeros(holders.shape[0] * K, dtype=np.int64)
        np.add.at(cnt, h * K + d[:, 1], wt)
        cnt = cnt.reshape(-1, K)
    hs, js = np.nonzero(cnt)
    w = cnt[hs, js]  # (wanter js, holder set hs) with multiplicity w
    if K <= DEMAND_EXACT_MAX_K and exact is not False:
        keys = np.stack([js, holders[hs, 0].astype(np.int64)], axis=1)  # one word: K <= 16
        value, order = _demand_dp(keys, w, K)
        return value, order, True
    return _demand_searched(js, set_members(holders, K)[hs], w, K)


def _demand_dp(keys: np.ndarray, w: np.ndarray, K: int) -> tuple[int, tuple[int, ...]]:
    """``f(U + v) = max over v of f(U) + g_v(U)``, ``U`` the workers placed last, ``v`` the first
    of ``U + v``, ``g_v(U)`` the pieces ``v`` wants held inside ``U`` (a sum over subsets)."""
    full = 1 << K
    g = np.zeros((K, full), dtype=np.int64)
    np.add.at(g, (keys[:, 0], keys[:, 1]), w)
    for b in range(K):  # g_v(U) = sum over H inside U
        step = 1 << b
        view = g.reshape(K, -1, 2 * step)
        view[:, :, step:] += view[:, :, :step]
    f = np.full(full, -1, dtype=np.int64)
    f[0] = 0
    pick = np.zeros(full, dtype=np.int8)
    masks = np.arange(full, dtype=np.int64)
    popcount = np.zeros(full, dtype=np.int64)
    for b in range(K):
        popcount += (masks >> b) & 1
    for p in range(1, K + 1):
        U = masks[popcount == p]
        best = np.full(U.size, -1, dtype=np.int64)
        arg = np.zeros(U.size, dtype=np.int8)
        for v in range(K):
            has = (U >> v) & 1 == 1
            rest = U[has] ^ (1 << v)
            cand = f[rest] + g[v, rest]
            better = cand > best[has]
            idx = np.flatnonzero(has)[better]
            best[idx], arg[idx] = cand[better], v
        f[U], pick[U] = best, arg
    order, mask = [], full - 1
    while mask:
        v = int(pick[mask])
        order.append(v)
        mask ^= 1 << v
    return int(f[full - 1]), tuple(order)


def _demand_value(wanter: np.ndarray, held: np.ndarray, w: np.ndarray, order: list[int], K: int) -> int:
    """The bound of one ordering: the pieces whose holders (``held``: their workers, padded with
    ``K``) all come after their wanter."""
    pos = np.full(K + 1, K, dtype=np.int64)
    pos[np.asarray(order)] = np.arange(K)
    first = pos[held].min(axis=1, initial=K)
    return int(w[first > pos[wanter]].sum())


#: Passes of single-worker moves :func:`demand_lower_bound` makes beyond the exact range.
DEMAND_SEARCH_PASSES = 2


def _demand_searched(
    wanter: np.ndarray, held: np.ndarray, w: np.ndarray, K: int
) -> tuple[int, tuple[int, ...], bool]:
    S = np.zeros((K + 1, K), dtype=np.int64)  # the records each wanter wants from each holder
    size = held.shape[1]
    np.add.at(S, (held.reshape(-1), np.repeat(wanter, size)), np.repeat(w, size))
    order = list(lower_bound(S[:K], exact=False).ordering)
    best = _demand_value(wanter, held, w, order, K)
    for _ in range(DEMAND_SEARCH_PASSES):
        improved = False
        for a in range(K):
            for b in range(K):
                if a != b:
                    trial = order.copy()
                    trial.insert(b, trial.pop(a))
                    value = _demand_value(wanter, held, w, trial, K)
                    if value > best:
                        order, best, improved = trial, value, True
        if not improved:
            break
    return best, tuple(order), False
