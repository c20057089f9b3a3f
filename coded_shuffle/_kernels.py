"""Compiled loops over points (numba), imported lazily by the modules that need them.

Each kernel states the numpy expression it equals; the tests use that expression as the oracle.
numba arrives with galois; its first call compiles once and is cached on disk.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def count_cells(owner_t, owner_t1, K_t1, counts):  # pragma: no cover - compiled
    """Add to ``counts`` what ``np.bincount(owner_t * K_t1 + owner_t1)`` counts, in one pass."""
    for p in range(owner_t.shape[0]):
        counts[np.int64(owner_t[p]) * K_t1 + owner_t1[p]] += 1


@numba.njit(cache=True, nogil=True)
def sort_moved(owner_t, owner_t1, K_t1, start, order):  # pragma: no cover - compiled
    """Counting sort of the moved points by cell ``owner_t * K_t1 + owner_t1``.

    ``start`` holds the run offsets of each cell (diagonal cells empty); afterwards
    ``order[start[k]:start[k+1]]`` lists, increasing, the points of cell ``k`` with
    ``owner_t[n] != owner_t1[n]``: ``np.flatnonzero((key == k) & moved)``.
    """
    fill = start[:-1].copy()
    for p in range(owner_t.shape[0]):
        i = np.int64(owner_t[p])
        j = np.int64(owner_t1[p])
        if i != j:
            k = i * K_t1 + j
            order[fill[k]] = p
            fill[k] += 1


@numba.njit(cache=True, nogil=True)
def gather_runs(values, starts, lengths):  # pragma: no cover - compiled
    """Concatenate ``values[starts[r]:starts[r] + lengths[r]]`` over the runs ``r``."""
    total = 0
    for r in range(starts.shape[0]):
        total += lengths[r]
    out = np.empty(total, dtype=values.dtype)
    w = 0
    for r in range(starts.shape[0]):
        s = starts[r]
        for q in range(lengths[r]):
            out[w] = values[s + q]
            w += 1
    return out
