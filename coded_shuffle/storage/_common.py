"""Argument checks and subset helpers of the storage scheme (sets of workers are int bitmasks)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import numpy as np

from ..matrix import check_shuffle_matrix, elastic_matrix

#: Largest ``K`` with excess storage (``M > 1``) in the planner and the engine: their holder sets
#: are bitmasks of 64 bits. The piece placement itself (:mod:`.placement`) takes any ``K``.
STORAGE_MAX_K = 64


def check_storage(M: Any, K: int, *, name: str = "M", wide: bool = False) -> int:
    """Return ``t = M - 1`` for a storage of ``M`` whole batches on ``K`` workers, or raise naming
    the argument ``name`` (``'M' (storage)`` for ``M``). ``wide``: any ``K`` (holder sets of
    several words, :mod:`.placement`), else at most :data:`STORAGE_MAX_K` with ``M > 1``.

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
    if M > 1 and K > STORAGE_MAX_K and not wide:
        raise ValueError(
            f"Argument {arg} must be 1 with K = {K} workers: excess storage supports at most "
            f"K = {STORAGE_MAX_K}."
        )
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
