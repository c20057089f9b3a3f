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


@numba.njit(cache=True, nogil=True)
def _push(buf, n, value):  # pragma: no cover - compiled
    if n == buf.shape[0]:
        grown = np.empty(2 * buf.shape[0], dtype=buf.dtype)
        grown[:n] = buf
        buf = grown
    buf[n] = value
    return buf


@numba.njit(cache=True, nogil=True)
def _take_cycle(W, cyc, L, nodes, n_nodes, lens, counts, n_cycles):  # pragma: no cover - compiled
    c = W[cyc[L - 1], cyc[0]]
    for k in range(L - 1):
        c = min(c, W[cyc[k], cyc[k + 1]])
    for k in range(L):
        W[cyc[k], cyc[(k + 1) % L]] -= c
        nodes = _push(nodes, n_nodes, cyc[k])
        n_nodes += 1
    lens = _push(lens, n_cycles, L)
    counts = _push(counts, n_cycles, c)
    return nodes, n_nodes, lens, counts, n_cycles + 1


@numba.njit(cache=True, nogil=True)
def _bfs(W, src, dst, max_edges, parent, dist, queue):  # pragma: no cover - compiled
    """Shortest path src -> dst in the support of W, lowest-index parents; its edge count or -1."""
    K = W.shape[0]
    for v in range(K):
        dist[v] = -1
    dist[src] = 0
    head, tail = 0, 1
    queue[0] = src
    while head < tail:
        u = queue[head]
        head += 1
        if dist[u] >= max_edges:
            break
        for v in range(K):
            if dist[v] < 0 and W[u, v] > 0:
                dist[v] = dist[u] + 1
                parent[v] = u
                if v == dst:
                    return dist[v]
                queue[tail] = v
                tail += 1
    return -1


@numba.njit(cache=True, nogil=True)
def greedy_cycle_packing(W):  # pragma: no cover - compiled
    """Shortest cycles first in the support of ``W`` (modified in place: what is left).

    Lengths 2 and 3 by direct search, then longer ones by breadth-first search: for each length
    ``L`` in increasing order, every edge lying on a cycle of length ``L`` has such cycles taken
    as many times as the lightest edge allows, until no cycle of length ``L`` remains. Returns
    ``(nodes, lengths, counts)``: cycle ``c`` is the next ``lengths[c]`` entries of ``nodes``.
    """
    K = W.shape[0]
    nodes = np.empty(64, dtype=np.int64)
    lens = np.empty(16, dtype=np.int64)
    counts = np.empty(16, dtype=np.int64)
    n_nodes = 0
    n_cycles = 0
    cyc = np.empty(K, dtype=np.int64)
    for i in range(K):
        for j in range(i + 1, K):
            if W[i, j] > 0 and W[j, i] > 0:
                cyc[0] = i
                cyc[1] = j
                nodes, n_nodes, lens, counts, n_cycles = _take_cycle(
                    W, cyc, 2, nodes, n_nodes, lens, counts, n_cycles
                )
    for i in range(K):
        for j in range(K):
            if W[i, j] <= 0:
                continue
            for k in range(K):
                if W[j, k] > 0 and W[k, i] > 0 and k != i and k != j:
                    cyc[0] = i
                    cyc[1] = j
                    cyc[2] = k
                    nodes, n_nodes, lens, counts, n_cycles = _take_cycle(
                        W, cyc, 3, nodes, n_nodes, lens, counts, n_cycles
                    )
                    if W[i, j] == 0:
                        break
    parent = np.empty(K, dtype=np.int64)
    dist = np.empty(K, dtype=np.int64)
    queue = np.empty(K, dtype=np.int64)
    allpairs = np.empty((K, K), dtype=np.int64)
    L = 4
    while L <= K:
        # Distances from every node; they only grow as cycles are taken, so each is a lower bound.
        best = K + 1
        for j in range(K):
            _bfs(W, j, -1, K, parent, dist, queue)
            for v in range(K):
                allpairs[j, v] = dist[v]
        for i in range(K):
            for j in range(K):
                if W[i, j] > 0 and allpairs[j, i] >= 0 and allpairs[j, i] + 1 < best:
                    best = allpairs[j, i] + 1
        if best > K:
            break
        L = best
        for i in range(K):
            for j in range(K):
                if W[i, j] <= 0 or allpairs[j, i] < 0 or allpairs[j, i] + 1 != L:
                    continue
                while W[i, j] > 0:
                    d = _bfs(W, j, i, L - 1, parent, dist, queue)
                    if d != L - 1:
                        break
                    cyc[0] = i
                    v = i
                    for q in range(L - 1, 0, -1):
                        v = parent[v]
                        cyc[q] = v
                    nodes, n_nodes, lens, counts, n_cycles = _take_cycle(
                        W, cyc, L, nodes, n_nodes, lens, counts, n_cycles
                    )
        L += 1
    return nodes[:n_nodes], lens[:n_cycles], counts[:n_cycles]
