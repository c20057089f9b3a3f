"""Compiled loops over points (numba), imported lazily by the modules that need them.

Each kernel states the numpy expression it equals; the tests use that expression as the oracle.
numba arrives with galois; its first call compiles once and is cached on disk.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

from ._jit import load_light


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


_ONE = np.uint64(1)


@numba.njit(cache=True, nogil=True)
def _push(buf, n, value):  # pragma: no cover - compiled
    if n == buf.shape[0]:
        grown = np.empty(2 * buf.shape[0], dtype=buf.dtype)
        grown[:n] = buf
        buf = grown
    buf[n] = value
    return buf


@numba.njit(cache=True, nogil=True)
def _low_bit(x):  # pragma: no cover - compiled
    """Index of the lowest set bit of the non-zero ``uint64`` ``x``."""
    n = 0
    if (x & np.uint64(0xFFFFFFFF)) == 0:
        n += 32
        x >>= np.uint64(32)
    if (x & np.uint64(0xFFFF)) == 0:
        n += 16
        x >>= np.uint64(16)
    if (x & np.uint64(0xFF)) == 0:
        n += 8
        x >>= np.uint64(8)
    if (x & np.uint64(0xF)) == 0:
        n += 4
        x >>= np.uint64(4)
    if (x & np.uint64(0x3)) == 0:
        n += 2
        x >>= np.uint64(2)
    if (x & _ONE) == 0:
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def _next_bit(row, start):  # pragma: no cover - compiled
    """Smallest ``v >= start`` whose bit is set in the bitset ``row``, or -1."""
    w = start >> 6
    if w >= row.shape[0]:
        return -1
    word = row[w] & ~((_ONE << np.uint64(start & 63)) - _ONE)
    while True:
        if word:
            return (w << 6) + _low_bit(word)
        w += 1
        if w == row.shape[0]:
            return -1
        word = row[w]


@numba.njit(cache=True, nogil=True)
def _next_both(row_a, row_b, start):  # pragma: no cover - compiled
    """Smallest ``v >= start`` whose bit is set in both bitsets ``row_a`` and ``row_b``, or -1."""
    w = start >> 6
    if w >= row_a.shape[0]:
        return -1
    word = row_a[w] & row_b[w] & ~((_ONE << np.uint64(start & 63)) - _ONE)
    while True:
        if word:
            return (w << 6) + _low_bit(word)
        w += 1
        if w == row_a.shape[0]:
            return -1
        word = row_a[w] & row_b[w]


@numba.njit(cache=True, nogil=True)
def support_bits(W):  # pragma: no cover - compiled
    """Return bitsets ``(out_bits, in_bits)`` of the support of ``W``, diagonal left out.

    Bit ``v`` of row ``u`` (word ``v // 64``, bit ``v % 64``) of ``out_bits`` is
    ``W[u, v] > 0 and u != v``; ``in_bits`` is the same of ``W.T``.
    """
    K = W.shape[0]
    nw = (K + 63) >> 6
    out_bits = np.zeros((K, nw), dtype=np.uint64)
    in_bits = np.zeros((K, nw), dtype=np.uint64)
    for u in range(K):
        word = np.uint64(0)
        for v in range(K):
            if W[u, v] > 0 and u != v:
                word |= _ONE << np.uint64(v & 63)
            if v & 63 == 63 or v == K - 1:
                out_bits[u, v >> 6] = word
                word = np.uint64(0)
    for u in range(K):
        bit = _ONE << np.uint64(u & 63)
        v = _next_bit(out_bits[u], 0)
        while v >= 0:
            in_bits[v, u >> 6] |= bit
            v = _next_bit(out_bits[u], v + 1)
    return out_bits, in_bits


@numba.njit(cache=True, nogil=True)
def _take_cycle(W, out_bits, in_bits, cyc, L, nodes, n_nodes, lens, counts, n_cycles):  # pragma: no cover
    """Use the cycle ``cyc[:L]`` as often as its lightest edge allows; clear the edges used up."""
    c = W[cyc[L - 1], cyc[0]]
    for k in range(L - 1):
        c = min(c, W[cyc[k], cyc[k + 1]])
    for k in range(L):
        u = cyc[k]
        v = cyc[(k + 1) % L]
        W[u, v] -= c
        if W[u, v] == 0:
            out_bits[u, v >> 6] &= ~(_ONE << np.uint64(v & 63))
            in_bits[v, u >> 6] &= ~(_ONE << np.uint64(u & 63))
        nodes = _push(nodes, n_nodes, u)
        n_nodes += 1
    lens = _push(lens, n_cycles, L)
    counts = _push(counts, n_cycles, c)
    return nodes, n_nodes, lens, counts, n_cycles + 1


@numba.njit(cache=True, nogil=True)
def greedy_round(W, out_bits, in_bits, L, lo, hi, label, touched, vis, nxt, path, resume):  # pragma: no cover
    """Take the cycles of length ``L`` through the edges ``(i, j)``, ``lo <= i < hi``, in order.

    ``W`` must hold no cycle shorter than ``L`` (``L >= 3``; for ``L = 2``, pairs ``i < j``).
    For each edge ``(i, j)`` in increasing ``(i, j)``, while ``W[i, j] > 0`` and a path of ``L - 1``
    edges leads from ``j`` back to ``i``, the cycle ``(i, j, ...)`` closed by the
    lexicographically smallest such path is used as often as its lightest edge allows: the
    path a breadth-first search from ``j`` finds when it visits the out-neighbours of each node
    in increasing order. ``W``, ``out_bits`` and ``in_bits`` (:func:`support_bits` of ``W``) are
    updated in place.

    The path is found by a depth-first search in increasing order guided by ``label``: the
    distances to ``i`` from a breadth-first search backwards over ``in_bits`` (depth ``L - 2``).
    Using cycles only removes edges, so a label is a lower bound of the distance now; with no
    cycle shorter than ``L``, a node at ``d`` edges from ``j`` lies at least ``L - 1 - d`` edges
    from ``i``, so the labels keep every node of a valid path and the first path found is the
    smallest. A node the search leaves without reaching ``i`` in ``r`` edges has its label raised
    to ``r + 1``. The last two edges are checked exactly against ``in_bits[i]``.

    Scratch: ``label`` (``K`` entries, all ``> K`` on entry and on return), ``touched`` (``K``),
    ``vis`` and ``nxt`` (one bitset row each), ``path`` and ``resume`` (``L`` entries each).
    Returns ``(nodes, lengths, counts, covered)``, ``covered`` the edge uses taken in all.
    """
    nw = out_bits.shape[1]
    nodes = np.empty(64, dtype=np.int64)
    lens = np.empty(16, dtype=np.int64)
    counts = np.empty(16, dtype=np.int64)
    n_nodes = 0
    n_cycles = 0
    cyc = np.empty(L, dtype=np.int64)
    for i in range(lo, hi):
        j = _next_bit(out_bits[i], 0 if L > 2 else i + 1)
        if j < 0 or _next_bit(in_bits[i], 0) < 0:
            continue
        cyc[0] = i
        if L == 2:
            while j >= 0:
                if W[j, i] > 0:
                    cyc[1] = j
                    nodes, n_nodes, lens, counts, n_cycles = _take_cycle(
                        W, out_bits, in_bits, cyc, 2, nodes, n_nodes, lens, counts, n_cycles
                    )
                j = _next_bit(out_bits[i], j + 1)
            continue
        # Distances to i, backwards, up to L - 2 edges: touched[start:end] is one level.
        nt = 0
        if L > 3:
            for w in range(nw):
                vis[w] = 0
            vis[i >> 6] |= _ONE << np.uint64(i & 63)
            label[i] = 0
            touched[0] = i
            nt = 1
            start = 0
            for depth in range(1, L - 1):
                end = nt
                for w in range(nw):
                    nxt[w] = 0
                for f in range(start, end):
                    u = touched[f]
                    for w in range(nw):
                        nxt[w] |= in_bits[u, w]
                for w in range(nw):
                    x = nxt[w] & ~vis[w]
                    vis[w] |= x
                    while x:
                        v = (w << 6) + _low_bit(x)
                        x &= x - _ONE
                        label[v] = depth
                        touched[nt] = v
                        nt += 1
                if nt == end:
                    break
                start = end
        while j >= 0:
            # The first step of the smallest path only grows as cycles through (i, j) are taken.
            resume[0] = 0
            while W[i, j] > 0:
                # Depth-first search from j: path[t] lies r = L - 1 - t edges from i.
                path[0] = j
                t = 0
                found = False
                while True:
                    cur = path[t]
                    r = L - 1 - t
                    if r == 2:
                        v = _next_both(out_bits[cur], in_bits[i], resume[t] if t == 0 else 0)
                        if v >= 0:
                            path[t + 1] = v
                            found = True
                            break
                    else:
                        v = _next_bit(out_bits[cur], resume[t])
                        while v >= 0 and label[v] > r - 1:
                            v = _next_bit(out_bits[cur], v + 1)
                        if v >= 0:
                            resume[t] = v + 1
                            t += 1
                            path[t] = v
                            resume[t] = 0
                            continue
                    # No path of r edges from cur to i.
                    if label[cur] <= r:
                        label[cur] = r + 1
                    if t == 0:
                        break
                    t -= 1
                if not found:
                    break
                resume[0] = path[1]
                for q in range(L - 1):
                    cyc[q + 1] = path[q]
                nodes, n_nodes, lens, counts, n_cycles = _take_cycle(
                    W, out_bits, in_bits, cyc, L, nodes, n_nodes, lens, counts, n_cycles
                )
            j = _next_bit(out_bits[i], j + 1)
        big = label.shape[0] + 1
        for f in range(nt):
            label[touched[f]] = big
    covered = 0
    for c in range(n_cycles):
        covered += lens[c] * counts[c]
    return nodes[:n_nodes], lens[:n_cycles], counts[:n_cycles], covered


@numba.njit(cache=True, nogil=True)
def girth(out_bits, in_bits):  # pragma: no cover - compiled
    """Number of edges of the shortest cycle of the graph ``out_bits``, or ``K + 1`` if it has none.

    Nodes without an in- or out-edge among the others are trimmed first, repeatedly; then a
    breadth-first search from each node ``s`` stops at the first node with an edge back to ``s``.
    """
    K = out_bits.shape[0]
    indeg = np.zeros(K, dtype=np.int64)
    outdeg = np.zeros(K, dtype=np.int64)
    for u in range(K):
        v = _next_bit(out_bits[u], 0)
        while v >= 0:
            outdeg[u] += 1
            indeg[v] += 1
            v = _next_bit(out_bits[u], v + 1)
    alive = np.ones(K, dtype=np.bool_)
    stack = np.empty(K, dtype=np.int64)
    ns = 0
    for u in range(K):
        if indeg[u] == 0 or outdeg[u] == 0:
            alive[u] = False
            stack[ns] = u
            ns += 1
    while ns:
        ns -= 1
        u = stack[ns]
        v = _next_bit(out_bits[u], 0)
        while v >= 0:
            indeg[v] -= 1
            if alive[v] and indeg[v] == 0:
                alive[v] = False
                stack[ns] = v
                ns += 1
            v = _next_bit(out_bits[u], v + 1)
        v = _next_bit(in_bits[u], 0)
        while v >= 0:
            outdeg[v] -= 1
            if alive[v] and outdeg[v] == 0:
                alive[v] = False
                stack[ns] = v
                ns += 1
            v = _next_bit(in_bits[u], v + 1)
    # Adjacency lists of the nodes left.
    ptr = np.zeros(K + 1, dtype=np.int64)
    for u in range(K):
        ptr[u + 1] = ptr[u]
        if alive[u]:
            v = _next_bit(out_bits[u], 0)
            while v >= 0:
                if alive[v]:
                    ptr[u + 1] += 1
                v = _next_bit(out_bits[u], v + 1)
    adj = np.empty(ptr[K], dtype=np.int64)
    for u in range(K):
        q = ptr[u]
        if alive[u]:
            v = _next_bit(out_bits[u], 0)
            while v >= 0:
                if alive[v]:
                    adj[q] = v
                    q += 1
                v = _next_bit(out_bits[u], v + 1)
    best = K + 1
    dist = np.full(K, -1, dtype=np.int64)
    queue = np.empty(K, dtype=np.int64)
    for s in range(K):
        if not alive[s]:
            continue
        dist[s] = 0
        queue[0] = s
        head, tail = 0, 1
        while head < tail:
            u = queue[head]
            head += 1
            if in_bits[s, u >> 6] & (_ONE << np.uint64(u & 63)):
                best = min(best, dist[u] + 1)
                break
            if dist[u] + 2 >= best:
                continue  # no shorter cycle beyond u, but others of its level may close one
            for q in range(ptr[u], ptr[u + 1]):
                v = adj[q]
                if dist[v] < 0:
                    dist[v] = dist[u] + 1
                    queue[tail] = v
                    tail += 1
        for q in range(tail):
            dist[queue[q]] = -1
    return best


def greedy_cycle_packing(
    W: np.ndarray, progress: Callable[[int], object] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shortest cycles first in the support of ``W`` (modified in place: what is left).

    For each length ``L`` in increasing order, from 2, every edge ``(i, j)`` in increasing
    ``(i, j)`` has the cycles of length ``L`` through it taken, each as many times as its lightest
    edge allows, until no cycle of length ``L`` remains (:func:`greedy_round`); the cycle taken
    closes the edge with the lexicographically smallest path of ``L - 1`` edges from ``j`` to
    ``i``. A length with no cycle is skipped to the shortest cycle left (:func:`girth`).
    ``progress``, if given, is called with the number of edge uses taken since its last call.

    Returns ``(nodes, lengths, counts)``: cycle ``c`` is the next ``lengths[c]`` entries of
    ``nodes``, used ``counts[c]`` times.
    """
    K = W.shape[0]
    out_bits, in_bits = support_bits(W)
    label = np.full(K, K + 1, dtype=np.int64)
    touched = np.empty(K, dtype=np.int64)
    vis = np.empty(out_bits.shape[1], dtype=np.uint64)
    nxt = np.empty(out_bits.shape[1], dtype=np.uint64)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    chunk = 64

    def run(L: int) -> bool:
        path = np.empty(L, dtype=np.int64)
        resume = np.empty(L, dtype=np.int64)
        took = False
        for lo in range(0, K, chunk):
            nodes, lens, counts, covered = greedy_round(
                W, out_bits, in_bits, L, lo, min(K, lo + chunk), label, touched, vis, nxt, path, resume
            )
            if lens.size:
                parts.append((nodes, lens, counts))
                took = True
                if progress is not None:
                    progress(int(covered))
        return took

    run(2)
    run(3)
    L = 4
    while L <= K:
        if not run(L):
            L = int(girth(out_bits, in_bits))
            if L > K:
                break
            run(L)
        L += 1
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty.copy(), empty.copy()
    nodes, lens, counts = (np.concatenate([p[k] for p in parts]) for k in range(3))
    return nodes, lens, counts


@numba.njit(cache=True, nogil=True)
def eades_ordering(S):  # pragma: no cover - compiled
    """Eades, Lin and Smyth's ordering for the arcs ``j -> i`` of weight ``S[i, j]``.

    With ``out_w`` the column sums and ``in_w`` the row sums of ``S`` over the workers left,
    repeatedly: the smallest worker with ``out_w == 0`` goes to the tail (filled from the end),
    else the smallest with ``in_w == 0`` to the head, else the first worker of largest
    ``out_w - in_w`` to the head. Returns the head followed by the tail.
    """
    K = S.shape[0]
    out_w = np.zeros(K, dtype=np.int64)
    in_w = np.zeros(K, dtype=np.int64)
    for x in range(K):
        for u in range(K):
            out_w[u] += S[x, u]
            in_w[x] += S[x, u]
    alive = np.ones(K, dtype=np.bool_)
    order = np.empty(K, dtype=np.int64)
    n_head = 0
    n_tail = 0
    for _ in range(K):
        sink = -1
        source = -1
        best = -1
        for u in range(K):
            if not alive[u]:
                continue
            if out_w[u] == 0:
                sink = u
                break
            if source < 0 and in_w[u] == 0:
                source = u
            if best < 0 or out_w[u] - in_w[u] > out_w[best] - in_w[best]:
                best = u
        if sink >= 0:
            v = sink
            n_tail += 1
            order[K - n_tail] = v
        else:
            v = source if source >= 0 else best
            order[n_head] = v
            n_head += 1
        alive[v] = False
        for u in range(K):
            out_w[u] -= S[v, u]
            in_w[u] -= S[u, v]
    return order


@numba.njit(cache=True, nogil=True)
def improve_ordering(D, order):  # pragma: no cover - compiled
    """Move single workers of ``order`` (in place) to their best position while that helps.

    ``D`` is ``S - S.T`` (any signed integer type wide enough). Passes over ``v = 0 .. K - 1``
    until one changes nothing. Inserting ``v`` at position ``p`` among the others (``rest``, in
    order) scores ``sum(S[v, rest[:p]]) + sum(S[rest[p:], v])``, which is the column sum of ``v``
    plus ``sum(D[v, rest[:p]])``; ``v`` moves to the first position of highest score if that
    beats its own. Returns the number of passes.
    """
    K = D.shape[0]
    pos = np.empty(K, dtype=np.int64)
    for p in range(K):
        pos[order[p]] = p
    passes = 0
    improved = True
    while improved:
        improved = False
        passes += 1
        for v in range(K):
            p0 = pos[v]
            Dv = D[v]
            best = 0
            best_p = 0
            here = 0
            g = 0
            for p in range(p0):
                g += Dv[order[p]]
                if g > best:
                    best = g
                    best_p = p + 1
            here = g
            for p in range(p0 + 1, K):
                g += Dv[order[p]]
                if g > best:
                    best = g
                    best_p = p
            if best > here:
                improved = True
                if best_p < p0:
                    for p in range(p0, best_p, -1):
                        order[p] = order[p - 1]
                        pos[order[p]] = p
                else:
                    for p in range(p0, best_p):
                        order[p] = order[p + 1]
                        pos[order[p]] = p
                order[best_p] = v
                pos[v] = best_p
    return passes


@numba.njit(cache=True, nogil=True)
def deal_cycles(order, next_left, K, nodes, lens, counts, points_like, workers_like):  # pragma: no cover
    """Deal the leftovers of each cell, in order, to the cycles, as many uses as each has.

    Cycle ``c`` (the next ``lens[c]`` entries ``w_1 .. w_l`` of ``nodes``) is used ``counts[c]``
    times; each use takes, for ``k = 1 .. l``, the point ``order[next_left[w_k * K + w_{k+1}]]``
    (``w_{l+1} = w_1``) and advances that offset by one. Returns ``(points, workers, ptr)``:
    use ``u`` covers ``points[ptr[u]:ptr[u + 1]]``, held by ``workers[ptr[u]:ptr[u + 1]]``.
    The dtypes of the outputs are those of ``points_like`` and ``workers_like``.
    """
    n_uses = 0
    n_points = 0
    for c in range(lens.shape[0]):
        n_uses += counts[c]
        n_points += counts[c] * lens[c]
    points = np.empty(n_points, dtype=points_like.dtype)
    workers = np.empty(n_points, dtype=workers_like.dtype)
    ptr = np.empty(n_uses + 1, dtype=np.int64)
    ptr[0] = 0
    q = 0
    u = 0
    first = 0
    for c in range(lens.shape[0]):
        L = lens[c]
        for _ in range(counts[c]):
            for k in range(L):
                w = nodes[first + k]
                cell = w * K + nodes[first + (k + 1) % L]
                points[q] = order[next_left[cell]]
                workers[q] = w
                next_left[cell] += 1
                q += 1
            u += 1
            ptr[u] = q
        first += L
    return points, workers, ptr


@numba.njit(cache=True, nogil=True)
def ordering_value(S, order):  # pragma: no cover - compiled
    """Sum of ``S[i, j]`` over the workers ``i`` placed after ``j`` in ``order``.

    Equals ``np.tril(S[np.ix_(order, order)], -1).sum()``.
    """
    K = S.shape[0]
    pos = np.empty(K, dtype=np.int64)
    for p in range(K):
        pos[order[p]] = p
    total = 0
    for i in range(K):
        for j in range(K):
            if pos[i] > pos[j]:
                total += S[i, j]
    return total


load_light(globals())  # the cached machine code loads without numba's compiler (coded_shuffle._jit)
