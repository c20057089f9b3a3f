"""Greedy cycle packing at large K, against the previous dense algorithm, side by side.

For two epoch placements of N = 2000 K points (K = 1000, 2000, 5000 by default), measures in
the same run, wall and CPU seconds:

- matrix: the shuffle matrix and the leftover matrix ``Omega``;
- greedy: :func:`coded_shuffle._kernels.greedy_cycle_packing` on ``Omega`` (bitset adjacency
  updated as edges are used up, guided depth-first search, girth to skip empty lengths);
- old greedy: the previous kernel, kept below verbatim as the baseline (a dense K x K
  breadth-first search from every node for each length: about K^3); run up to ``--old-max-k``,
  it must return exactly the same cycles;
- bound: :func:`coded_shuffle.bounds.lower_bound` (compiled ordering heuristic) against the
  previous numpy heuristic, kept below, up to ``--old-max-k``: same ordering, same value;
- rates: :func:`coded_shuffle.plan.rates` (pairs, leftovers, greedy, cycles as tuples) plus the
  bound, the work of one ``rate`` row, against the 60 s target at K = 5000, N = 10^7;
- plan: :func:`coded_shuffle.plan.plan_delivery`, the full point-level plan (with
  :func:`coded_shuffle.plan.verify_plan` reported beside it).

First it runs the command ``coded-shuffle rate --workers 5000 --points 10000000`` end to end in
a subprocess (``--cli-workers``, 0 to skip) and reports its wall and CPU time and peak memory.
Compilation is warmed up first and not counted. The machine may be shared: CPU seconds are the
steadier figure.

Usage: python benchmarks/greedy_scale.py [--workers 1000,2000,5000] [--old-max-k 2000]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time

import numba
import numpy as np

from coded_shuffle._kernels import greedy_cycle_packing
from coded_shuffle.bounds import lower_bound, ordering_bound
from coded_shuffle.matrix import leftover_matrix, shuffle_matrix
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery, rates, verify_plan

# --------------------------------------------------------------------------- baselines (previous code)


@numba.njit(nogil=True)
def _push(buf, n, value):
    if n == buf.shape[0]:
        grown = np.empty(2 * buf.shape[0], dtype=buf.dtype)
        grown[:n] = buf
        buf = grown
    buf[n] = value
    return buf


@numba.njit(nogil=True)
def _take_cycle(W, cyc, L, nodes, n_nodes, lens, counts, n_cycles):
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


@numba.njit(nogil=True)
def _bfs(W, src, dst, max_edges, parent, dist, queue):
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


@numba.njit(nogil=True)
def old_greedy_cycle_packing(W):
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


def old_heuristic_ordering(S: np.ndarray) -> tuple[int, tuple[int, ...]]:
    """Eades-Lin-Smyth ordering, then single-worker moves while they raise the bound."""
    K = S.shape[0]
    # The bound counts S[i][j] when the receiver j comes before the holder i: arcs j -> i of S.T.
    A = S.T.astype(np.int64)
    alive = np.ones(K, dtype=bool)
    head: list[int] = []
    tail: list[int] = []
    out_w = A.sum(axis=1)
    in_w = A.sum(axis=0)
    while alive.any():
        idx = np.flatnonzero(alive)
        sinks = idx[out_w[idx] == 0]
        sources = idx[in_w[idx] == 0]
        if sinks.size:
            v = int(sinks[0])
            tail.append(v)
        elif sources.size:
            v = int(sources[0])
            head.append(v)
        else:
            v = int(idx[np.argmax(out_w[idx] - in_w[idx])])
            head.append(v)
        alive[v] = False
        out_w -= A[:, v]
        in_w -= A[v, :]
    order = np.array(head + tail[::-1], dtype=np.int64)
    # Local search: move one worker to its best position while that raises the bound. Inserting
    # v at position p among the others adds S[v][w] for the p workers w before it and S[w][v]
    # for those after it; both sums for every p come from one cumulative sum each.
    improved = True
    while improved:
        improved = False
        for v in range(K):
            p0 = int(np.flatnonzero(order == v)[0])
            rest = np.delete(order, p0)
            gains = np.zeros(K, dtype=np.int64)
            gains[1:] = np.cumsum(S[v, rest])
            gains[:-1] += np.cumsum(S[rest, v][::-1])[::-1]
            p = int(np.argmax(gains))
            if gains[p] > gains[p0]:
                order = np.insert(rest, p, v)
                improved = True
    return ordering_bound(S, order), tuple(order.tolist())


# --------------------------------------------------------------------------- measurement


def timed(fn):
    """Return ``(wall seconds, CPU seconds, result)`` of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def show(name: str, wall: float, cpu: float, extra: str = "") -> None:
    print(f"  {name:<28} {wall:8.2f} s wall {cpu:8.2f} s CPU  {extra}", flush=True)


def same_packing(a, b) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def warm_up() -> None:
    K = 40
    a = epoch_placement(40 * K, K, seed=1, epoch=0)
    b = epoch_placement(40 * K, K, seed=1, epoch=1)
    plan_delivery(a, b)
    lower_bound(shuffle_matrix(a, b))
    old_greedy_cycle_packing(leftover_matrix(shuffle_matrix(a, b)).astype(np.int64))


def measure(K: int, N: int, seed: int, old_max_k: int) -> None:
    print(f"K = {K}, N = {N:,}", flush=True)
    a = epoch_placement(N, K, seed=seed, epoch=0)
    b = epoch_placement(N, K, seed=seed, epoch=1)
    w, c, omega = timed(lambda: leftover_matrix(shuffle_matrix(a, b)))
    show("matrix and leftovers", w, c, f"{int(omega.sum()):,} leftovers, {np.count_nonzero(omega):,} edges")
    W_new = omega.astype(np.int64)
    w_new, c_new, new = timed(lambda: greedy_cycle_packing(W_new))
    show("greedy", w_new, c_new, f"{int(new[2].sum()):,} cycles, longest {int(new[1].max(initial=0))}")
    if K <= old_max_k:
        W_old = omega.astype(np.int64)
        w_old, c_old, old = timed(lambda: old_greedy_cycle_packing(W_old))
        same = same_packing(old, new) and np.array_equal(W_old, W_new)
        show("old greedy", w_old, c_old, f"same cycles: {same}")
        print(f"  {'ratio old / new greedy':<28} {w_old / w_new:8.1f} x wall {c_old / c_new:8.1f} x CPU")
        if not same:
            raise SystemExit("the greedy packings differ")
    S = shuffle_matrix(a, b)
    w_lb, c_lb, lb = timed(lambda: lower_bound(S))
    show("bound (ordering heuristic)", w_lb, c_lb, f"value {lb.value:,}")
    if K <= old_max_k:
        off = S.copy()
        np.fill_diagonal(off, 0)
        w_ob, c_ob, (value, ordering) = timed(lambda: old_heuristic_ordering(off))
        same = value == lb.value and ordering == lb.ordering
        show("old bound (numpy)", w_ob, c_ob, f"same ordering and value: {same}")
        print(f"  {'ratio old / new bound':<28} {w_ob / w_lb:8.1f} x wall {c_ob / c_lb:8.1f} x CPU")
        if not same:
            raise SystemExit("the bounds differ")
    w_r, c_r, r = timed(lambda: (rates(S), lower_bound(S)))
    target = "  target <= 60 s" if (K, N) == (5000, 10**7) else ""
    show("rates + bound (a rate row)", w_r, c_r, f"coded {r[0].coded:,}, bound {r[1].value:,}{target}")
    w_p, c_p, plan = timed(lambda: plan_delivery(a, b))
    w_v, c_v, _ = timed(lambda: verify_plan(plan))
    show("plan_delivery", w_p, c_p, f"{plan.n_symbols:,} symbols")
    show("verify_plan", w_v, c_v, "passed")


def run_cli(K: int, N: int) -> None:
    cmd = [sys.executable, "-m", "coded_shuffle", "rate", "--workers", str(K), "--points", str(N)]
    print("$ coded-shuffle " + " ".join(cmd[3:]), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    target = "  target <= 60 s" if (K, N) == (5000, 10**7) else ""
    show("command end to end", wall, cpu, f"peak RSS {after.ru_maxrss / 1e6:.2f} GB{target}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1000,2000,5000", help="comma-separated K values, or ''")
    parser.add_argument("--points-per-worker", type=int, default=2000)
    parser.add_argument("--old-max-k", type=int, default=2000, help="largest K for the old algorithms")
    parser.add_argument("--cli-workers", type=int, default=5000)
    parser.add_argument("--cli-points", type=int, default=10**7)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warm_up()
    if args.cli_workers:  # first, while this process is small: a forked child counts its pages
        run_cli(args.cli_workers, args.cli_points)
    for K in (int(k) for k in args.workers.split(",") if k):
        measure(K, args.points_per_worker * K, args.seed, args.old_max_k)


if __name__ == "__main__":
    main()
