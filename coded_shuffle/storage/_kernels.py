"""Compiled loops of the storage planner (numba), imported lazily by :mod:`.plan`.

Each kernel states the numpy expression it equals; the tests use that expression as the oracle.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._jit import load_light

#: Most cells (groups times members) the compiled group symbols count in one table.
MAX_CELLS = 1 << 24


def binomials(K: int, r: int) -> np.ndarray:
    """``C[b, i] = C(b, i)`` for ``b < K``, ``i <= r`` (int64)."""
    out = np.zeros((max(K, 1), r + 1), dtype=np.int64)
    for b in range(K):
        for i in range(r + 1):
            out[b, i] = math.comb(b, i)
    return out


@numba.njit(cache=True, nogil=True)
def cells(wanter, holders, size, binom, n_groups):  # pragma: no cover - compiled
    """The cells of a demand: row ``n`` (wanted by ``wanter[n]``, held by the ``W`` words
    ``holders[n]``: worker ``k`` is bit ``k % 64`` of word ``k // 64``) belongs to group
    ``G = holders | 1 << wanter`` of ``size`` workers, numbered by its colex rank
    ``sum C(b_i, i + 1)`` over its workers ``b_0 < b_1 < ...`` (which orders groups as their
    bitmasks), as member ``m`` (the wanter's place among them), ``k``-th of its cell ``(G, m)`` in
    demand order. Returns ``counts`` (``n_groups x size``, flat: the rows of each cell, what
    :func:`~coded_shuffle.storage.demand_counts` counts), each group's words (``n_groups x W``),
    and per row ``g, m, k``.
    """
    n, W = holders.shape
    one = np.uint64(1)
    counts = np.zeros(n_groups * size, dtype=np.int64)
    mask = np.zeros((n_groups, W), dtype=np.uint64)
    g_of = np.empty(n, dtype=np.int64)
    m_of = np.empty(n, dtype=np.int64)
    k_of = np.empty(n, dtype=np.int64)
    for r in range(n):
        j = wanter[r]
        jw, jb = j // 64, one << np.uint64(j % 64)
        g, i, m = 0, 0, 0
        for w in range(W):
            x = holders[r, w] | jb if w == jw else holders[r, w]
            b = w * 64
            while x:
                if x & one:
                    g += binom[b, i + 1]
                    if b < j:
                        m += 1
                    i += 1
                x >>= one
                b += 1
        for w in range(W):
            mask[g, w] = holders[r, w] | jb if w == jw else holders[r, w]
        g_of[r], m_of[r] = g, m
        k_of[r] = counts[g * size + m]
        counts[g * size + m] += 1
    return counts, mask, g_of, m_of, k_of


@numba.njit(cache=True, nogil=True)
def group_symbols(pid, counts, mask, g_of, m_of, k_of, size):  # pragma: no cover - compiled
    """The group symbols of the cells of :func:`cells` by counting sort: what
    ``plan._group_symbols_sorted`` computes by sorts. Symbol ``(G, k)`` holds the ``k``-th piece of
    every member with more than ``k``, members in order; symbols go by ``G``, then ``k``. Returns
    ``(offsets, terms, G of each symbol, receivers of each)``, sets as rows of ``W`` words.
    """
    n = pid.shape[0]
    n_groups, W = mask.shape
    one = np.uint64(1)
    first = np.zeros(n_groups + 1, dtype=np.int64)  # the first symbol of each group
    for g in range(n_groups):
        most = 0
        for m in range(size):
            most = max(most, counts[g * size + m])
        first[g + 1] = first[g] + most
    n_sym = first[n_groups]
    offsets = np.zeros(n_sym + 1, dtype=np.int64)
    G_sym = np.empty((n_sym, W), dtype=np.uint64)
    R_sym = np.zeros((n_sym, W), dtype=np.uint64)
    for g in range(n_groups):
        for k in range(first[g + 1] - first[g]):
            s = first[g] + k
            m, c = 0, 0
            for w in range(W):
                G_sym[s, w] = mask[g, w]
                x, b = mask[g, w], np.uint64(0)
                while x:
                    if x & one:
                        if counts[g * size + m] > k:
                            R_sym[s, w] |= one << b
                            c += 1
                        m += 1
                    x >>= one
                    b += one
            offsets[s + 1] = c
    for s in range(n_sym):
        offsets[s + 1] += offsets[s]
    terms = np.empty(n, dtype=np.int64)
    for r in range(n):
        g, m, k = g_of[r], m_of[r], k_of[r]
        at = 0
        for q in range(m):
            if counts[g * size + q] > k:
                at += 1
        terms[offsets[first[g] + k] + at] = pid[r]
    return offsets, terms, G_sym, R_sym


@numba.njit(inline="always")
def drop_piece(out, H, r, p, d, j):  # pragma: no cover - compiled
    """Piece ``p`` of record ``r`` dropped by holder ``d`` and taken by the new owner ``j``,
    ``out[r, p] = H[r, p] & ~(1 << d) | 1 << j``, where the record's labels stay distinct (no other
    piece's holders in ``out`` equal these, the new owner left out: it holds every piece after);
    returns whether it was done (holder sets of ``(N, P, W)`` words)."""
    P, W = H.shape[1], H.shape[2]
    one = np.uint64(1)
    dw, db = d // 64, one << np.uint64(d % 64)
    jw, jb = j // 64, one << np.uint64(j % 64)
    for q in range(P):
        if q == p:
            continue
        same = True
        for w in range(W):
            c = H[r, p, w] & ~db if w == dw else H[r, p, w]
            if w == jw:
                same = same and (c & ~jb) == (out[r, q, w] & ~jb)
            else:
                same = same and c == out[r, q, w]
        if same:
            return False
    for w in range(W):
        c = H[r, p, w] & ~db if w == dw else H[r, p, w]
        out[r, p, w] = c | jb if w == jw else c
    return True


@numba.njit(cache=True, nogil=True)
def rebalance(out, H, old, new, excess, step):  # pragma: no cover - compiled
    """The drops of an update chosen to keep the storage even: ``out`` holds the holder sets after
    the update that makes the old owner drop each delivered piece; ``excess[k]`` is worker ``k``'s
    storage after it, over its share, times ``step = K - 1``. Holder sets are ``(N, P, W)`` words
    (worker ``k`` is bit ``k % 64`` of word ``k // 64``; ``W = 1`` up to 64 workers).

    In record order, a delivered piece (its new owner ``j`` not among its holders ``H``) is dropped
    instead by its other holder ``d`` of the largest excess when ``excess[d] > excess[o] + step``
    (``o`` the old owner; the move lowers the larger of the two) and the record's labels stay
    distinct: ``out[r, p] = H[r, p] & ~(1 << d) | 1 << j``. Returns the pieces moved so.
    """
    N, P, W = H.shape
    one = np.uint64(1)
    moved = 0
    for r in range(N):
        o, j = old[r], new[r]
        jw, jb = j // 64, one << np.uint64(j % 64)
        for p in range(P):
            if H[r, p, jw] & jb:
                continue  # held by the new owner: not delivered
            best, top = -1, 0
            for w in range(W):
                x, d = H[r, p, w], w * 64
                while x:
                    if x & one and d != o and (best < 0 or excess[d] > top):
                        best, top = d, excess[d]
                    x >>= one
                    d += 1
            if best < 0 or top <= excess[o] + step:
                continue
            if not drop_piece(out, H, r, p, best, j):
                continue
            excess[best] -= step
            excess[o] += step
            moved += 1
    return moved


@numba.njit(cache=True, nogil=True)
def holder_counts(holders, K):  # pragma: no cover - compiled
    """``[((holders >> k) & 1).sum() for k in range(K)]``: the pieces each worker holds."""
    out = np.zeros(K, dtype=np.int64)
    flat = holders.ravel()
    one = np.uint64(1)
    for i in range(flat.shape[0]):
        x, k = flat[i], 0
        while x:
            if x & one:
                out[k] += 1
            x >>= one
            k += 1
    return out


@numba.njit(cache=True, nogil=True)
def chain_pairs(mutual, m, alive, degree, out):  # pragma: no cover - compiled
    """The pairs of :func:`coded_shuffle.storage.planner._pack_chains`, in place on ``m``,
    ``alive`` and ``degree``; rows ``(a, b, k)`` of ``out``, their number returned. Equals::

        while (cand := np.flatnonzero(alive & (degree > 0))).size:
            a = cand[np.argmin(degree[cand])]
            partners = np.flatnonzero(mutual[a] & alive)
            b = partners[np.argmin(degree[partners])]
            k = min(m[a], m[b]); m[a] -= k; m[b] -= k; out.append((a, b, k))
            for x in (a, b):
                if not m[x]: alive[x] = False; degree -= mutual[:, x]
    """
    n = m.shape[0]
    count = 0
    while True:
        a = -1
        for x in range(n):
            if alive[x] and degree[x] > 0 and (a < 0 or degree[x] < degree[a]):
                a = x
        if a < 0:
            return count
        b = -1
        for y in range(n):
            if mutual[a, y] and alive[y] and (b < 0 or degree[y] < degree[b]):
                b = y
        k = min(m[a], m[b])
        m[a] -= k
        m[b] -= k
        out[count, 0], out[count, 1], out[count, 2] = a, b, k
        count += 1
        for x in (a, b):
            if m[x] == 0:
                alive[x] = False
                for z in range(n):  # mutual is symmetric: its row, read in order
                    if mutual[x, z]:
                        degree[z] -= 1


@numba.njit(cache=True, nogil=True)
def chain_triples(A, m, alive, order, out):  # pragma: no cover - compiled
    """The chains of 3 of :func:`coded_shuffle.storage.planner._pack_chains`, in place on ``m``
    and ``alive``; rows ``(a, b, c, k)`` of ``out``, their number returned. Equals::

        for a in order:
            while m[a]:
                outs, ins = np.flatnonzero(A[a] & alive), np.flatnonzero(A[:, a] & alive)
                hit = np.argwhere(A[np.ix_(outs, ins)])
                hit = hit[outs[hit[:, 0]] != ins[hit[:, 1]]]
                if not hit.size: break
                b, c = outs[hit[0, 0]], ins[hit[0, 1]]
                k = min(m[a], m[b], m[c]); m[[a, b, c]] -= k; alive[[a, b, c]] = m[[a, b, c]] > 0
                out.append((a, b, c, k))
    """
    n = m.shape[0]
    count = 0
    ins = np.empty(n, dtype=np.int64)
    for a in order:
        while m[a] > 0:
            n_in = 0
            for c in range(n):
                if A[c, a] and alive[c]:
                    ins[n_in] = c
                    n_in += 1
            b_hit, c_hit = -1, -1
            for b in range(n):
                if not (A[a, b] and alive[b]):
                    continue
                for i in range(n_in):
                    c = ins[i]
                    if A[b, c] and b != c:
                        b_hit, c_hit = b, c
                        break
                if b_hit >= 0:
                    break
            if b_hit < 0:
                break
            k = min(m[a], m[b_hit], m[c_hit])
            for x in (a, b_hit, c_hit):
                m[x] -= k
                alive[x] = m[x] > 0
            out[count, 0], out[count, 1], out[count, 2], out[count, 3] = a, b_hit, c_hit, k
            count += 1
    return count


load_light(globals())  # the cached machine code loads without numba's compiler (coded_shuffle._jit)
