"""The compiled loops of the Feistel permutation (:mod:`coded_shuffle.orders.feistel`).

Kept apart so that importing the orders (and so ``import coded_shuffle`` and the command line's
``--help``) does not import numba: :mod:`~coded_shuffle.orders.feistel` and
:func:`~coded_shuffle.matrix.feistel_shuffle_matrix` import this module where they first run a
compiled loop.
"""

from __future__ import annotations

import numba
import numpy as np

from .._jit import load_light

__all__ = ["count_transitions", "walk_block", "walk_compiled"]


#: Lanes of a block: each round of the network runs over a block at once (the loop vectorises),
#: so the latency of one index's chain of rounds is hidden behind the others'.
_LANES = 512


@numba.njit(cache=True, nogil=True)
def _rounds(x, n, keys, bits, inverse):  # pragma: no cover - compiled
    """``x[:n]`` through the network of :meth:`FeistelPermutation._network` once, in place."""
    high = np.uint64(bits - bits // 2)
    low = np.uint64(bits // 2)
    one = np.uint64(1)
    s33 = np.uint64(33)
    m1 = np.uint64(0xFF51AFD7ED558CCD)
    m2 = np.uint64(0xC4CEB9FE1A85EC53)
    R = keys.shape[0]
    for r in range(R):
        i = R - 1 - r if inverse else r
        k = keys[i]
        if i % 2 == 0:  # parts of `high` and `low` bits entering round i
            wa, wb = high, low
        else:  # the widths swapped
            wa, wb = low, high
        top = np.uint64(64) - wa
        if not inverse:  # (hi, lo) -> (lo, hi ^ F(lo))
            mask = (one << wb) - one
            for b in range(n):
                v = x[b]
                lo = v & mask
                f = lo ^ k
                f ^= f >> s33
                f *= m1
                f ^= f >> s33
                f *= m2
                f ^= f >> s33
                x[b] = ((v >> wb) ^ (f >> top)) | (lo << wa)
        else:  # (lo, t) -> (t ^ F(lo), lo)
            mask = (one << wa) - one
            for b in range(n):
                v = x[b]
                lo = v >> wa
                f = lo ^ k
                f ^= f >> s33
                f *= m1
                f ^= f >> s33
                f *= m2
                f ^= f >> s33
                x[b] = (((v & mask) ^ (f >> top)) << wb) | lo


@numba.njit(cache=True, nogil=True)
def walk_block(x, n, keys, bits, N, inverse, vals, lanes):  # pragma: no cover - compiled
    """``x[:n] = pi(x[:n])`` in place (``pi^{-1}`` when ``inverse``; uint64 values in ``[0, N)``).

    The rounds run over all lanes, then over the lanes that fell outside ``[0, N)``, gathered
    into ``vals`` (their lane in ``lanes``; both scratch of at least ``n``), until none is left:
    cycle walking a block at a time, vectorised however many lanes walk on.
    """
    _rounds(x, n, keys, bits, inverse)
    bound = np.uint64(N)
    m = 0
    for b in range(n):
        if x[b] >= bound:
            vals[m] = x[b]
            lanes[m] = b
            m += 1
    while m > 0:
        _rounds(vals, m, keys, bits, inverse)
        left = 0
        for t in range(m):
            v = vals[t]
            if v < bound:
                x[lanes[t]] = v
            else:
                vals[left] = v
                lanes[left] = lanes[t]
                left += 1
        m = left


@numba.njit(cache=True, nogil=True, parallel=True)
def walk_compiled(idx, out, keys, bits, N, inverse):  # pragma: no cover - compiled
    """``out[p] = pi(idx[p])`` (``pi^{-1}`` when ``inverse``): blocks of lanes, on all cores."""
    n_blocks = (idx.shape[0] + _LANES - 1) // _LANES
    for blk in numba.prange(n_blocks):
        a = blk * _LANES
        n = min(_LANES, idx.shape[0] - a)
        x = np.empty(_LANES, dtype=np.uint64)
        vals = np.empty(_LANES, dtype=np.uint64)
        lanes = np.empty(_LANES, dtype=np.int64)
        for b in range(n):
            x[b] = np.uint64(idx[a + b])
        walk_block(x, n, keys, bits, N, inverse, vals, lanes)
        for b in range(n):
            out[a + b] = np.int64(x[b])


@numba.njit(cache=True, nogil=True)
def _floor_div(y, d, inv):  # pragma: no cover - compiled
    """``y // d`` for ``|y| < 2^53`` and ``d >= 1``, ``inv = 1 / d``: the float quotient is within
    one of it, and one step either way makes it exact (no division: the loop vectorises)."""
    j = np.int64(np.float64(y) * inv)
    j -= np.int64(j * d > y)
    j += np.int64((j + 1) * d <= y)
    return j


@numba.njit(cache=True, nogil=True)
def count_transitions(lo, hi, keys_t, keys_t1, bits, N, K_t, K_t1, counts):  # pragma: no cover - compiled
    """Count, for each position ``p`` in ``[lo, hi)``, the cell of the transition ``t -> t + 1``.

    Position ``p`` of epoch ``t`` holds point ``n = pi_t(p)``, which epoch ``t + 1`` places at
    ``q = pi_{t+1}^{-1}(n)``; ``counts[owner_t(p) * K_t1 + owner_{t+1}(q)]`` gains one. Both
    permutations are of ``[0, N)``, ``N <= 2^53`` (``bits`` wide, round keys ``keys_t`` and
    ``keys_t1``). Equal to ``counts += np.bincount(positions_to_owners(p, N, K_t) * K_t1 +
    positions_to_owners(pi_t1.inverse(pi_t.forward(p)), N, K_t1), minlength=K_t * K_t1)`` over
    ``p = np.arange(lo, hi)``, with no array of points: a block of lanes at a time, inside one
    batch of epoch ``t``.

    The owner of a position ``q`` among ``K`` batches, the first ``r = N mod K`` of ``s + 1``
    positions and the others of ``s = N // K``, is ``max(q // (s + 1), (q - r) // s)``: the
    first term is the owner below ``r (s + 1)``, the second above, and each is the smaller
    elsewhere (:func:`~coded_shuffle.orders.epochs.positions_to_owners` takes the two cases).
    """
    size_t = N // K_t
    r_t = N % K_t
    edge_t = r_t * (size_t + 1)
    size_1 = N // K_t1
    r_1 = N % K_t1
    big_1 = size_1 + 1
    inv_size = 1.0 / size_1
    inv_big = 1.0 / big_1
    x = np.empty(_LANES, dtype=np.uint64)
    vals = np.empty(_LANES, dtype=np.uint64)
    j = np.empty(_LANES, dtype=np.int64)  # the owners, and scratch of the walk
    p = lo
    while p < hi:
        if p < edge_t:  # batch i of position p, and where it ends
            i = p // (size_t + 1)
            end = (i + 1) * (size_t + 1)
        else:
            i = r_t + (p - edge_t) // size_t
            end = edge_t + (i - r_t + 1) * size_t
        n = min(end, hi, p + _LANES) - p
        for b in range(n):
            x[b] = np.uint64(p + b)
        walk_block(x, n, keys_t, bits, N, False, vals, j)
        walk_block(x, n, keys_t1, bits, N, True, vals, j)
        for b in range(n):
            q = np.int64(x[b])
            j[b] = max(_floor_div(q, big_1, inv_big), _floor_div(q - r_1, size_1, inv_size))
        row = counts[i * K_t1 : (i + 1) * K_t1]
        for b in range(n):
            row[j[b]] += 1
        p += n


load_light(globals())  # the cached machine code loads without numba's compiler (coded_shuffle._jit)
