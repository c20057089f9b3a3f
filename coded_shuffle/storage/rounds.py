"""The ``rounds`` strategy of a storage of ``M = 1 + t`` batches (:mod:`.planner`'s docstring): the
moved records split into partial permutation rounds (:func:`_rounds`), each round's active groups
(:func:`_round_groups`, counted without listing them by :func:`_round_group_count`) and its cost,
the GF(2) rank of their boundary vectors (:func:`boundary_rank`) or a bound on it
(:func:`_round_cost`).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from math import comb

import numpy as np

from ._common import members, subsets

__all__ = ["RANK_MAX_CELLS", "boundary_rank"]

#: Largest boundary matrix (rows times columns) whose GF(2) rank is computed; beyond, a round
#: costs ``min(active groups, C(K - 1, t + 1))``, both proven to decode (less the faces avoiding
#: worker 0 that no active group holds: their sums are empty and not sent).
RANK_MAX_CELLS = 1 << 18


def boundary_rank(groups: list[int], K: int, t: int, *, basis: bool = False) -> tuple[int, list[int]]:
    """GF(2) rank of the boundary vectors of ``groups`` (``(t + 2)``-sets) and, if asked, an
    information set: ``(t + 1)``-sets whose columns span every column.

    Examples
    --------
    The three edges of a triangle at ``t = 0``: rank 2, a cycle of 3 leftovers costs 2.

    >>> boundary_rank([0b011, 0b110, 0b101], 3, 0)[0]
    2
    """
    row = {G: n for n, G in enumerate(groups)}
    cols: dict[int, int] = defaultdict(int)
    for G, n in row.items():
        for i in members(G):
            cols[G & ~(1 << i)] |= 1 << n
    pivots: dict[int, int] = {}
    info = []
    for P in sorted(cols):
        v = cols[P]
        while v:
            top = v.bit_length() - 1
            if top not in pivots:
                pivots[top] = v
                info.append(P)
                break
            v ^= pivots[top]
    return len(pivots), (info if basis else [])


def _round_groups(edges: list[tuple[int, int]], K: int, t: int) -> list[int]:
    """The ``(t + 2)``-sets containing some moved pair ``{o, j}`` of a round."""
    active = set()
    for o, j in edges:
        rest = [w for w in range(K) if w not in (o, j)]
        for T in subsets(rest, t):
            active.add(T | (1 << o) | (1 << j))
    return sorted(active)


def _round_group_count(edges: list[tuple[int, int]], K: int, t: int) -> int:
    """``len(_round_groups(edges, K, t))`` without listing them: the ``(t + 2)``-sets that hold
    some moved pair are all of them but the independent sets of the pairs' graph.

    A round moves each worker's records at most once out and once in, so the graph of its pairs
    has degree at most 2: paths and cycles, whose independent sets of each size come from the
    recurrences ``I(P_n) = I(P_{n-1}) + x I(P_{n-2})`` and ``I(C_n) = I(P_{n-1}) + x I(P_{n-3})``
    (polynomials in ``x``, the coefficient of ``x^s`` counting the sets of ``s`` workers). A
    graph of higher degree is listed.
    """
    size = t + 2
    near: list[set[int]] = [set() for _ in range(K)]
    for o, j in edges:
        near[o].add(j)
        near[j].add(o)
    if any(len(n) > 2 for n in near):
        return len(_round_groups(edges, K, t))

    paths, cycles = _independent_sets(K, size)
    total = [1]
    seen = [False] * K
    for v in range(K):
        if seen[v]:
            continue
        size_v, stack = 0, [v]  # the component of v: a path, or a cycle when every degree is 2
        seen[v] = True
        cycle = True
        while stack:
            u = stack.pop()
            size_v += 1
            cycle &= len(near[u]) == 2
            for w in near[u]:
                if not seen[w]:
                    seen[w] = True
                    stack.append(w)
        total = _times(total, cycles[size_v] if cycle else paths[size_v], size)
    independent = total[size] if len(total) > size else 0
    return comb(K, size) - independent


def _plus(a: list[int], b: list[int], size: int) -> list[int]:
    """``a + b``, polynomials as coefficient lists, truncated past ``x^size``."""
    n = min(max(len(a), len(b)), size + 1)
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def _times(a: list[int], b: list[int], size: int) -> list[int]:
    """``a b``, truncated past ``x^size``."""
    out = [0] * min(len(a) + len(b) - 1, size + 1)
    for i, u in enumerate(a[: size + 1]):
        for k, v in enumerate(b[: size + 1 - i]):
            out[i + k] += u * v
    return out


@functools.lru_cache(maxsize=64)
def _independent_sets(K: int, size: int) -> tuple[list[list[int]], list[list[int]]]:
    """``I(P_n)`` and ``I(C_n)`` for ``n <= K``, truncated past ``x^size`` (``I(C_n)`` for ``n >= 3``)."""
    paths = [[1], [1, 1]]
    while len(paths) <= K:
        paths.append(_plus(paths[-1], [0] + paths[-2], size))
    cycles: list[list[int]] = [[], [], []]
    cycles += [_plus(paths[n - 1], [0] + paths[n - 3], size) for n in range(3, K + 1)]
    return paths, cycles


def _round_cost(edges: tuple[tuple[int, int], ...], K: int, t: int, memo: dict) -> tuple[int, str]:
    """Pieces a round costs and how it is sent: ``'rank'``, ``'groups'`` or ``'avoid0'``."""
    if edges in memo:
        return memo[edges]
    n = _round_group_count(list(edges), K, t)
    # the faces that avoid worker 0 and meet some active group: those holding a worker of a moved
    # pair (with its partner, or inside the pair, they lie in such a group); the rest send nothing
    untouched = K - 1 - len({w for e in edges for w in e} - {0})
    cap = comb(K - 1, t + 1) - comb(untouched, t + 1)
    if n * comb(K, t + 1) <= RANK_MAX_CELLS:
        out = (boundary_rank(_round_groups(list(edges), K, t), K, t)[0], "rank")
    elif n <= cap:
        out = (n, "groups")
    else:
        out = (cap, "avoid0")
    memo[edges] = out
    return out


def _rounds(S: np.ndarray) -> list[tuple[tuple[tuple[int, int], ...], int]]:
    """Partial permutation rounds ``(edges o -> j, o != j; multiplicity)`` covering the moved records.

    Repeated maximum matchings of the support of what is left of ``S``, diagonal included: with
    equal batches ``b`` the matrix is ``b``-regular, every matching is perfect (Hall, Birkhoff)
    and the multiplicities add up to ``b``, so the rounds cost at most ``R(t)`` (claim 7).
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    rest = np.array(S, dtype=np.int64)
    off = rest.copy()
    np.fill_diagonal(off, 0)
    out = []
    K = rest.shape[0]
    while off.any():
        held = rest > 0  # its support as a sparse matrix, row by row (no dense conversion)
        rows = np.r_[0, np.cumsum(held.sum(axis=1))]
        support = csr_matrix((np.ones(int(rows[-1]), dtype=bool), np.nonzero(held)[1], rows), shape=(K, K))
        match = maximum_bipartite_matching(support, perm_type="column")
        pairs = [(o, int(j)) for o, j in enumerate(match.tolist()) if j >= 0]
        k = min(int(rest[o, j]) for o, j in pairs)
        for o, j in pairs:
            rest[o, j] -= k
            if o != j:
                off[o, j] -= k
        edges = tuple((o, j) for o, j in pairs if o != j)
        if edges:
            out.append((edges, k))
    return out


def _rounds_plan(S: np.ndarray, t: int) -> tuple[int, list]:
    K = S.shape[0]
    memo: dict = {}
    total = 0
    rounds = _rounds(S)
    for edges, k in rounds:
        total += k * _round_cost(edges, K, t, memo)[0]
    return total, rounds
