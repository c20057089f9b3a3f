"""Argument checks and subset helpers of the storage scheme.

Sets of workers are Python int bitmasks in the small (a group, a label), and in arrays the holder
sets of :mod:`coded_shuffle.plan`'s exchange (:func:`~coded_shuffle.plan.holder_words`): rows of
``W = ceil(K / 64)`` words of 64 bits, worker ``k`` bit ``k % 64`` of word ``k // 64``. The
storage's arrays always carry the words (``W = 1`` up to 64 workers, a view of one-word masks).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np

from ..matrix import check_shuffle_matrix, elastic_matrix
from ..plan import lone_holders
from ..plan.exchange import _groups

#: The most workers whose holder sets are one 64-bit mask each (``plan.EXCHANGE_MAX_K``); beyond,
#: rows of ``ceil(K / 64)`` words. Excess storage itself takes any ``K``.
STORAGE_MAX_K = 64


def check_storage(M: Any, K: int, *, name: str = "M") -> int:
    """Return ``t = M - 1`` for a storage of ``M`` whole batches on ``K`` workers, or raise naming
    the argument ``name`` (``'M' (storage)`` for ``M``). Any ``K``: the placement, the planner and
    the exchange take holder sets of several words.

    ``M`` is an int, as ``subpackets`` is: a bool or a float (even ``2.0``) is refused, a
    fractional one with a word on memory sharing, which is not supported.
    """
    arg = "'M' (storage)" if name == "M" else repr(name)
    if isinstance(M, bool) or not isinstance(M, numbers.Integral):
        hint = ""
        if isinstance(M, numbers.Real) and not isinstance(M, bool) and not float(M).is_integer():
            hint = ": a whole number of batches (memory sharing between two storages is not supported)"
        raise TypeError(f"Argument {arg} must be an int, not {type(M).__name__}{hint}.")
    M = int(M)
    if M < 1:
        raise ValueError(f"Argument {arg} must be at least 1 batch, not {M}.")
    if M > K:
        raise ValueError(f"Argument {arg} must be at most K = {K} batches, not {M}.")
    return M - 1


def pieces_per_record(K: int, t: int) -> int:
    """``C(K - 1, t)``: the pieces ``r_T`` of one record."""
    return math.comb(K - 1, t)


def mask(workers: Any) -> int:
    """The bitmask of a set of workers."""
    out = 0
    for w in workers:
        out |= 1 << int(w)
    return out


def members(m: int) -> list[int]:
    """The workers of a bitmask, increasing."""
    out = []
    while m:
        low = m & -m
        out.append(low.bit_length() - 1)
        m ^= low
    return out


def subsets(ground: list[int], size: int) -> Iterator[int]:
    """The ``size``-subsets of ``ground`` as bitmasks, in lexicographic order of ``ground``."""
    for c in combinations(ground, size):
        yield mask(c)


def square_storage(S: object, M: object) -> tuple[np.ndarray, np.ndarray, int]:
    """``(S made square, off-diagonal S, t)``; refuses ``M > 1`` when the number of workers changes."""
    S = check_shuffle_matrix(S, square=False)
    if S.shape[0] != S.shape[1]:
        check_storage(M, max(S.shape))
        if M != 1:
            raise ValueError(
                f"Argument 'M' (storage) must be 1 when the number of workers changes ({S.shape[0]} -> "
                f"{S.shape[1]}): the piece placement needs the same K in both epochs."
            )
        S = elastic_matrix(S)
    t = check_storage(M, S.shape[0])
    Sq = np.array(S, dtype=np.int64)
    Sq.flags.writeable = False
    off = Sq.copy()
    np.fill_diagonal(off, 0)
    return Sq, off, t


def words3(holders: np.ndarray) -> np.ndarray:
    """Holder sets as ``(N, P, W)`` words: a view of one-word masks (``W = 1``) as of several."""
    H = np.asarray(holders, dtype=np.uint64)
    return H if H.ndim == 3 else H.reshape(*H.shape, 1)


def demand_words(demand: np.ndarray) -> np.ndarray:
    """The holder sets of the rows ``(piece, wanter, W words)`` of
    :func:`~coded_shuffle.storage.piece_demand`, as ``(rows, W)`` uint64 words."""
    return np.ascontiguousarray(demand[:, 2:]).view(np.uint64)


def lone_words(worker: np.ndarray, W: int) -> np.ndarray:
    """The sets ``{worker[i]}`` as rows of ``W`` words (:func:`~coded_shuffle.plan.lone_holders`)."""
    return lone_holders(worker, K=64 * W).reshape(-1, W)


def distinct_sets(words: np.ndarray) -> tuple[list[int], np.ndarray]:
    """``(sets, inverse)``: the distinct rows of ``words`` as Python int bitmasks, increasing, and
    each row's position among them (the exchange's grouping of holder sets)."""
    sets, inverse, _ = _groups(words[:, 0] if words.shape[1] == 1 else words)
    return sets, np.asarray(inverse, dtype=np.int64).reshape(-1)


def unique_rows(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, inverse)``: the distinct rows of ``(n, W)`` words in increasing order of the sets
    they are (the highest word first), and each row's position among them."""
    if words.shape[1] == 1:
        rows, inverse = np.unique(words[:, 0], return_inverse=True)
        return rows.reshape(-1, 1), inverse.reshape(-1).astype(np.int64)
    rows, inverse = np.unique(words[:, ::-1], axis=0, return_inverse=True)
    return np.ascontiguousarray(rows[:, ::-1]), inverse.reshape(-1).astype(np.int64)


def set_members(words: np.ndarray, K: int) -> np.ndarray:
    """The workers of each row of ``(n, W)`` words, increasing, padded with ``K`` to the largest
    set's size: an ``(n, size)`` int64 array."""
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), axis=1, bitorder="little")[:, :K]
    sizes = bits.sum(axis=1, dtype=np.int64)
    out = np.full((words.shape[0], int(sizes.max(initial=0))), K, dtype=np.int64)
    rows, cols = np.nonzero(bits)
    place = np.arange(rows.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    out[rows, place] = cols
    return out
