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


@numba.njit(cache=True, nogil=True)
def peel_worker(a, b, cache_ids, need_ids, M):  # pragma: no cover - compiled
    """Peel the symbols ``x[a[s]] ^ x[b[s]]`` (``b[s] < 0``: ``x[a[s]]`` alone) for one worker.

    Ids lie in ``[0, M)``; ``cache_ids`` and ``need_ids`` are increasing. Brute-force equivalent,
    in rounds over sets (``known`` starts as ``cache_ids``, the frontier too):

    - lone: the first symbol ``s`` (lowest index) with ``b[s] < 0`` of each id ``a[s]`` in
      ``need_ids`` and not in ``cache_ids``;
    - round ``r``: the not yet touched symbols with ``b >= 0`` and an endpoint in the frontier are
      touched; each with exactly one endpoint in ``known`` decodes the other one, ``new``, unless
      ``new`` is a lone id; of several symbols decoding one ``new`` the lowest index wins;
      ``known |= news``, frontier = news; stop when a round decodes nothing;
    - useful: walking the rounds backwards, a step is useful when its ``new`` is in ``need_ids``
      or is the known endpoint ``kn`` of a useful later step.

    Returns ``(lone_sym, sym, kn, new, rnd, n_rounds)``: lone symbols, then the useful steps
    (round ``rnd`` from 1, in increasing rounds) and the number of rounds that decoded anything.
    ``tests/test_codec.py`` checks it against that set computation written with numpy.
    """
    S = a.shape[0]
    level = np.full(M, -1, dtype=np.int32)  # -1 unknown, 0 held, r decoded in round r
    for i in range(cache_ids.shape[0]):
        level[cache_ids[i]] = 0
    needf = np.zeros(M, dtype=np.uint8)
    for i in range(need_ids.shape[0]):
        needf[need_ids[i]] = 1
    lonef = np.zeros(M, dtype=np.uint8)
    lone = np.empty(S, dtype=np.int64)
    n_lone = 0
    deg = np.zeros(M + 1, dtype=np.int64)
    for s in range(S):
        p = a[s]
        if b[s] < 0:
            if needf[p] and level[p] != 0 and not lonef[p]:
                lonef[p] = 1
                lone[n_lone] = s
                n_lone += 1
        else:
            deg[p + 1] += 1
            deg[b[s] + 1] += 1
    for i in range(M):
        deg[i + 1] += deg[i]
    fill = deg[:M].copy()
    adj = np.empty(deg[M], dtype=np.int64)
    for s in range(S):
        if b[s] >= 0:
            adj[fill[a[s]]] = s
            fill[a[s]] += 1
            adj[fill[b[s]]] = s
            fill[b[s]] += 1
    done = np.zeros(S, dtype=np.uint8)
    cand = np.full(M, -1, dtype=np.int64)  # winning symbol of a new id in the current round
    st_sym = np.empty(16, dtype=np.int64)
    st_new = np.empty(16, dtype=np.int64)
    st_kn = np.empty(16, dtype=np.int64)
    st_rnd = np.empty(16, dtype=np.int64)
    n_st = 0
    frontier = cache_ids.copy()
    news = np.empty(16, dtype=np.int64)
    r = 0
    while frontier.shape[0]:
        n_new = 0
        for i in range(frontier.shape[0]):
            p = frontier[i]
            for q in range(deg[p], deg[p + 1]):
                s = adj[q]
                if done[s]:
                    continue
                done[s] = 1
                ka = level[a[s]] >= 0
                kb = level[b[s]] >= 0
                if ka == kb:
                    continue
                nw = b[s] if ka else a[s]
                if lonef[nw]:
                    continue
                if cand[nw] < 0:
                    if n_new == news.shape[0]:
                        grown = np.empty(2 * n_new, dtype=np.int64)
                        grown[:n_new] = news
                        news = grown
                    news[n_new] = nw
                    n_new += 1
                    cand[nw] = s
                elif s < cand[nw]:
                    cand[nw] = s
        if n_new == 0:
            break
        r += 1
        if n_st + n_new > st_sym.shape[0]:
            cap = 2 * (n_st + n_new)
            g1 = np.empty(cap, dtype=np.int64)
            g2 = np.empty(cap, dtype=np.int64)
            g3 = np.empty(cap, dtype=np.int64)
            g4 = np.empty(cap, dtype=np.int64)
            g1[:n_st] = st_sym[:n_st]
            g2[:n_st] = st_new[:n_st]
            g3[:n_st] = st_kn[:n_st]
            g4[:n_st] = st_rnd[:n_st]
            st_sym, st_new, st_kn, st_rnd = g1, g2, g3, g4
        for i in range(n_new):
            nw = news[i]
            s = cand[nw]
            cand[nw] = -1
            level[nw] = r
            st_sym[n_st] = s
            st_new[n_st] = nw
            st_kn[n_st] = a[s] if b[s] == nw else b[s]
            st_rnd[n_st] = r
            n_st += 1
        frontier = news[:n_new].copy()
    # Keep the steps that lead to needed points: walk the rounds backwards.
    usef = needf.copy()
    keep = np.zeros(n_st, dtype=np.uint8)
    n_keep = 0
    for i in range(n_st - 1, -1, -1):
        if usef[st_new[i]]:
            keep[i] = 1
            usef[st_kn[i]] = 1
            n_keep += 1
    sym = np.empty(n_keep, dtype=np.int64)
    kn = np.empty(n_keep, dtype=np.int64)
    new = np.empty(n_keep, dtype=np.int64)
    rnd = np.empty(n_keep, dtype=np.int64)
    w = 0
    for i in range(n_st):
        if keep[i]:
            sym[w] = st_sym[i]
            kn[w] = st_kn[i]
            new[w] = st_new[i]
            rnd[w] = st_rnd[i]
            w += 1
    return lone[:n_lone].copy(), sym, kn, new, rnd, r
