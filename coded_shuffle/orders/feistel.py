"""Random-access epoch permutations: a keyed Feistel bijection on ``[0, N)`` with cycle walking.

:func:`~coded_shuffle.orders.permutation.epoch_permutation` materialises ``N`` int64 values
(0.8 GB and ~8 s at ``N = 1e8``). A Feistel permutation stores only its round keys: ``pi(i)``
and ``pi^{-1}(j)`` are computed for any chunk of indices, so a worker can produce just its own
positions, and the permutation can be streamed chunk by chunk in ``O(chunk)`` memory.

Construction
------------
=============  ==================================================================
``N``          domain size; the permutation maps ``[0, N)`` onto itself
``w``          width in bits: the smallest ``w >= 2`` with ``2^w >= N``; halves of
               ``ceil(w/2)`` and ``floor(w/2)`` bits
``k_1..k_R``   round keys, 64-bit words drawn from ``epoch_rng(seed, epoch)``
``F_i(x)``     top bits of ``fmix64(x XOR k_i)`` (MurmurHash3's 64-bit finaliser)
=============  ==================================================================

A value ``x < 2^w`` is split into a high part ``L`` and a low part ``R``; each of the ``R``
rounds maps ``(L, R) -> (R, L XOR F_i(R))`` (an unbalanced network when ``w`` is odd: the two
widths swap every round), a bijection whatever ``F_i`` is (Luby and Rackoff, 1988,
"How to construct pseudorandom permutations from pseudorandom functions"; four rounds of a
pseudorandom function give a strong pseudorandom permutation; the default is eight). The
network permutes ``[0, 2^w)``; cycle walking (Black and Rogaway, 2002, "Ciphers with arbitrary
finite domains") restricts it to ``[0, N)``: re-apply the network until the value falls below
``N``. As ``2^w < 2 N``, fewer than two applications are needed on average. The inverse runs
the rounds backwards, with the same walk.

This is a statistical shuffle for data order, not a cipher: the keys come from ``(seed, epoch)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .._checks import check_int, check_int_array
from .permutation import epoch_rng

__all__ = ["FeistelPermutation", "feistel_permutation"]

_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_MAX_N = 1 << 62


def _fmix64(x: np.ndarray) -> np.ndarray:
    x = x ^ (x >> _S33)
    x *= _M1
    x ^= x >> _S33
    x *= _M2
    x ^= x >> _S33
    return x


#: Inputs of at least this many indices run the compiled loop (same network, same values).
_COMPILED_FROM = 1 << 12


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
def _walk_compiled(idx, out, keys, bits, N, inverse):  # pragma: no cover - compiled
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


@dataclass(frozen=True)
class FeistelPermutation:
    """A keyed bijection ``pi`` of ``[0, N)``, evaluated on demand.

    Attributes
    ----------
    N : int
        Domain size.
    seed, epoch : int
        The keys are drawn from ``epoch_rng(seed, epoch)``.
    rounds : int
        Number of Feistel rounds.
    bits : int
        Width ``w`` of the network, ``2^w >= N``.
    keys : tuple of int
        The round keys.
    """

    N: int
    seed: int
    epoch: int
    rounds: int
    bits: int
    keys: tuple[int, ...]

    def _widths(self, i: int) -> tuple[int, int]:
        """Widths (high, low) of the two parts entering round ``i``."""
        high = self.bits - self.bits // 2
        low = self.bits // 2
        return (high, low) if i % 2 == 0 else (low, high)

    def _network(self, x: np.ndarray, *, inverse: bool) -> np.ndarray:
        steps = range(self.rounds - 1, -1, -1) if inverse else range(self.rounds)
        for i in steps:
            wa, wb = self._widths(i)
            k = np.uint64(self.keys[i])
            top = np.uint64(64 - wa)
            if not inverse:  # (hi, lo) -> (lo, hi ^ F(lo))
                lo = x & np.uint64((1 << wb) - 1)
                f = _fmix64(lo ^ k)
                f >>= top
                x >>= np.uint64(wb)
                x ^= f
                lo <<= np.uint64(wa)
                x |= lo
            else:  # (lo, t) -> (t ^ F(lo), lo)
                lo = x >> np.uint64(wa)
                f = _fmix64(lo ^ k)
                f >>= top
                x &= np.uint64((1 << wa) - 1)
                x ^= f
                x <<= np.uint64(wb)
                x |= lo
        return x

    def _walk(self, idx: Any, *, inverse: bool) -> np.ndarray:
        arr = np.asarray(idx)
        arr = check_int_array(arr, "idx", ndim=arr.ndim)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.N):
            raise ValueError(
                f"Argument 'idx' must hold indices in [0, {self.N}), not [{arr.min()}, {arr.max()}]."
            )
        flat = np.ascontiguousarray(arr.ravel(), dtype=np.int64)
        out = np.empty(flat.shape[0], dtype=np.int64)
        if flat.shape[0] >= _COMPILED_FROM:
            keys = np.array(self.keys, dtype=np.uint64)
            _walk_compiled(flat, out, keys, self.bits, self.N, inverse)
        else:  # small inputs: no compilation
            x = self._network(flat.astype(np.uint64), inverse=inverse)
            todo = np.flatnonzero(x >= self.N)
            while todo.size:
                x[todo] = self._network(x[todo], inverse=inverse)
                todo = todo[x[todo] >= self.N]
            out[:] = x
        return out.reshape(arr.shape)

    def forward(self, idx: Any) -> np.ndarray:
        """Return ``pi(i)`` for each index ``i`` of ``idx`` (int64, same shape).

        Examples
        --------
        >>> p = feistel_permutation(10, seed=0, epoch=0)
        >>> sorted(p.forward(range(10)).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """
        return self._walk(idx, inverse=False)

    def inverse(self, idx: Any) -> np.ndarray:
        """Return ``pi^{-1}(j)`` for each index ``j`` of ``idx`` (int64, same shape).

        Examples
        --------
        >>> p = feistel_permutation(1000, seed=3, epoch=1)
        >>> bool((p.inverse(p.forward(range(1000))) == range(1000)).all())
        True
        """
        return self._walk(idx, inverse=True)

    def chunks(self, chunk_size: int = 1 << 20) -> Iterator[np.ndarray]:
        """Yield ``pi(0), pi(1), ..., pi(N - 1)`` in consecutive chunks of ``chunk_size`` values.

        Examples
        --------
        >>> p = feistel_permutation(7, seed=1, epoch=2)
        >>> [c.size for c in p.chunks(3)]
        [3, 3, 1]
        """
        size = check_int(chunk_size, "chunk_size", minimum=1)
        for a in range(0, self.N, size):
            yield self.forward(np.arange(a, min(self.N, a + size), dtype=np.int64))


def feistel_permutation(N: int, *, seed: int, epoch: int, rounds: int = 8) -> FeistelPermutation:
    """Return the Feistel permutation of ``[0, N)`` for ``epoch`` under ``seed``.

    Parameters
    ----------
    N : int
        Domain size, ``0 <= N <= 2^62``.
    seed, epoch : int
        Non-negative; the round keys are drawn from ``epoch_rng(seed, epoch)``.
    rounds : int
        Number of Feistel rounds, at least 4 (default 8).

    Examples
    --------
    >>> p = feistel_permutation(5, seed=7, epoch=0)
    >>> order = p.forward([0, 1, 2, 3, 4])
    >>> sorted(order.tolist()), p.inverse(order).tolist()
    ([0, 1, 2, 3, 4], [0, 1, 2, 3, 4])
    """
    N = check_int(N, "N", minimum=0)
    if N > _MAX_N:
        raise ValueError(f"Argument 'N' must be at most {_MAX_N}, not {N}.")
    rounds = check_int(rounds, "rounds", minimum=4)
    bits = max(2, (N - 1).bit_length())
    keys = epoch_rng(seed, epoch).integers(0, 1 << 64, size=rounds, dtype=np.uint64)
    return FeistelPermutation(
        N=N,
        seed=int(seed),
        epoch=int(epoch),
        rounds=rounds,
        bits=bits,
        keys=tuple(int(k) for k in keys),
    )
