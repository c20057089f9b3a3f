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
            from ._feistel_kernels import walk_compiled

            keys = np.array(self.keys, dtype=np.uint64)
            walk_compiled(flat, out, keys, self.bits, self.N, inverse)
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
