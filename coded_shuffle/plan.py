"""Delivery plans: order-2 symbols for pairs of workers, then leftovers combined along cycles.

Notation
--------
==============  =====================================================================
``S``           shuffle matrix, ``S[i][j]`` points held by ``i`` and needed by ``j``
``W``           uncoded load, the off-diagonal sum of ``S``
``P``           order-2 symbols, ``sum_{i<j} min(S_ij, S_ji)``
``Omega``       leftover matrix (:func:`coded_shuffle.matrix.leftover_matrix`)
cycle           workers ``w_1 -> w_2 -> ... -> w_l -> w_1`` with ``Omega[w_k][w_{k+1}] > 0``
==============  =====================================================================

A cycle carries one leftover point ``m_k`` per edge (held by ``w_k``, needed by ``w_{k+1}``)
in the ``l - 1`` symbols ``m_1 + m_2, ..., m_{l-1} + m_l``; worker ``w_{k+1}`` reads ``m_k`` off
symbol ``k`` and worker ``w_1`` peels the chain to reach ``m_l``. Each cycle saves one symbol:

    uncoded = W,   paired = W - P,   coded = W - P - (cycles used).

Leftovers that no cycle covers (possible only when batches are unequal, so that conservation
fails) are sent uncoded; :class:`Rates` says how many.

Sub-packets (``subpackets=q``): every record is cut into ``q`` equal pieces and the scheme runs
on the pieces, whose shuffle matrix is ``q S``. The order-2 phase pairs pieces exactly as it
pairs records (``q P`` piece symbols), the leftovers become ``q Omega``, and each cycle packed in
``q Omega`` saves one piece. In records, with ``n`` the cycles of ``q Omega``:

    coded = W - P - n / q,

a :class:`fractions.Fraction` when ``q > 1``. Since ``n / q`` is at most the fractional cycle
packing of ``Omega``, this can beat the integral scheme (``proofs/claim_5_optimality.py``).
Piece ``k`` of point ``p`` is numbered ``p * q + k`` in a sub-packet plan.

Strategies choose the cycles, by name through :data:`STRATEGIES`:

``greedy``
    shortest cycles first: repeatedly take a cycle of the smallest length present in the support
    of what is left, as many times as its lightest edge allows.
``exact``
    a maximum cycle packing, proven when it can be, within :data:`EXACT_TIME_LIMIT` seconds:

    1. greedy; if it meets the counting bound (every cycle has at least 3 edges: no 2-cycles
       are left after the order-2 phase) nothing else runs;
    2. the fractional packing, a linear program over cycles (HiGHS, ``scipy.optimize.linprog``)
       solved by column generation: it starts from every 2- and 3-cycle and adds the shortest
       cycle under the dual prices through each edge whose cycles cost less than one. Its
       value, bounded from the dual prices so that solver tolerances cannot inflate it, rounded
       down, is an upper bound on every packing;
    3. a packing by rounding the fractional one (whole parts fixed, then the largest fractions
       rounded up, the fractional packing of what is left solved again) and the integer program
       over every cycle listed (``scipy.optimize.milp``); a packing that meets the bound of 2. is
       proven optimal;
    4. below that bound, an integer program that lists no cycle: workers are ranked, and each
       worker ``r`` roots one integer circulation on the workers ranked after it; the
       circulations share the leftover edges and the objective counts the flow leaving each
       root, so every cycle is counted once, at its first-ranked worker, and each circulation
       is split into simple cycles. It can prove a packing optimal below the bound.

    Every packing is checked. When time runs out first, the best packing found is kept, or
    greedy's if that is better, and :attr:`CyclePacking.note` says so with the best bound; a
    program of more than :data:`EXACT_MAX_VARIABLES` columns or variables is not built
    (greedy's packing, with a note). It is never worse than ``greedy``.

Reference: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823 (Example 1: uncoded 11, paired 7, coded 6).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from typing import Any

import numpy as np

from ._checks import check_choice, check_int
from .errors import InvalidPlanError
from .matrix import (
    check_shuffle_matrix,
    elastic_matrix,
    leftover_matrix,
    pair_minima,
    placements_from_matrix,
)
from .orders.placement import Placement, owner_dtype

__all__ = [
    "STRATEGIES",
    "EXACT_TIME_LIMIT",
    "PROGRESS_MIN_LEFTOVERS",
    "EXACT_MAX_VARIABLES",
    "CyclePacking",
    "Rates",
    "DeliveryPlan",
    "pack_cycles",
    "is_cycle_packing",
    "rates",
    "plan_delivery",
    "plan_from_matrix",
    "verify_plan",
    "decoding_steps",
]

#: Seconds of HiGHS time the ``exact`` strategy allows before it keeps its best packing unproven.
EXACT_TIME_LIMIT = 60.0
#: Largest program the ``exact`` strategy builds (columns: the 2- and 3-cycles it starts from;
#: variables of the circulation program: edge-root pairs); past it, greedy's packing is kept
#: with a note. ``K = 64`` needs about 10 000 and 40 000, ``K = 256`` about 700 000 and millions.
EXACT_MAX_VARIABLES = 1_000_000
#: Fractional packing value at which :func:`_dive` hands what is left to one integer program.
DIVE_RESIDUAL = 60.0
#: Fractional uses above which :func:`_dive` rounds columns up when none is whole.
DIVE_ROUND_UP = 0.9


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


# --------------------------------------------------------------------------- cycle packing


@dataclass(frozen=True, eq=False)
class CyclePacking:
    """Cycles chosen in a leftover matrix, each with how many times it is used.

    Attributes
    ----------
    omega : numpy.ndarray
        The leftover matrix packed.
    cycles : tuple of tuple of int
        Each cycle as its workers ``(w_1, ..., w_l)``; the edges are ``w_k -> w_{k+1}`` and
        ``w_l -> w_1``.
    counts : tuple of int
        How many times each cycle is used.
    strategy : str
        The strategy asked for.
    method : str
        The strategy that produced the packing (``greedy`` after a fallback of ``exact``).
    optimal : bool
        Whether the packing is proven to use the most cycles possible.
    note : str or None
        Why ``exact`` did not prove its packing optimal, if it did not (with its bound).
    upper_bound : int or None
        The most cycles any packing of ``omega`` can have, as ``exact`` proved it (equal to
        :attr:`cycles_used` when ``optimal``); None from ``greedy``.
    """

    omega: np.ndarray
    cycles: tuple[tuple[int, ...], ...]
    counts: tuple[int, ...]
    strategy: str
    method: str
    optimal: bool
    note: str | None = None
    upper_bound: int | None = None

    @property
    def cycles_used(self) -> int:
        """Number of cycles used, counted with multiplicity: the symbols saved."""
        return int(sum(self.counts))

    @property
    def covered(self) -> int:
        """Number of leftover points carried by the cycles."""
        lengths = np.fromiter(map(len, self.cycles), dtype=np.int64, count=len(self.cycles))
        return int(lengths @ np.asarray(self.counts, dtype=np.int64))

    @property
    def remainder(self) -> int:
        """Number of leftover points no cycle carries: they are sent uncoded."""
        return int(self.omega.sum()) - self.covered


def is_cycle_packing(omega: object, cycles: Iterable[Sequence[int]], counts: Iterable[int]) -> bool:
    """Return whether ``cycles`` used ``counts`` times fit inside the leftover matrix ``omega``.

    Every cycle must have at least two distinct workers, no repeated worker, only edges of
    positive weight, and the uses of each edge must not exceed its weight.

    Examples
    --------
    >>> omega = [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    >>> is_cycle_packing(omega, [(0, 2, 1)], [1])
    True
    >>> is_cycle_packing(omega, [(0, 1, 2)], [1])
    False
    """
    om = check_shuffle_matrix(omega, "omega")
    K = om.shape[0]
    used = np.zeros_like(om)
    cycle_list, count_list = list(cycles), list(counts)
    if len(cycle_list) != len(count_list):
        return False
    for cyc, c in zip(cycle_list, count_list, strict=True):
        if len(cyc) < 2 or len(set(cyc)) != len(cyc) or int(c) < 0:
            return False
        if any(not 0 <= w < K for w in cyc):
            return False
        for k, w in enumerate(cyc):
            used[w, cyc[(k + 1) % len(cyc)]] += int(c)
    return bool(np.all(used <= om))


#: Leftover points from which ``progress=True`` shows the greedy packing on standard error.
PROGRESS_MIN_LEFTOVERS = 1_000_000


def _greedy(omega: np.ndarray, progress: bool = False) -> tuple[list[tuple[int, ...]], list[int]]:
    """Shortest cycles first (:func:`coded_shuffle._kernels.greedy_cycle_packing`).

    No cycle comes twice: a cycle taken leaves one of its edges used up.
    """
    from ._kernels import greedy_cycle_packing

    W = np.array(omega, dtype=np.int64)
    total = int(W.sum())
    if progress and total >= PROGRESS_MIN_LEFTOVERS:
        from ._progress import Progress

        K = W.shape[0]
        with Progress(f"packing leftover cycles, K = {K}", total=total, unit="leftovers") as bar:
            nodes, lengths, counts = greedy_cycle_packing(W, bar.advance)
    else:
        nodes, lengths, counts = greedy_cycle_packing(W)
    # Cycles come in order of length: one block of equal lengths at a time, a column a worker.
    cycles: list[tuple[int, ...]] = []
    first = 0
    for L, n in zip(*np.unique(lengths, return_counts=True), strict=True):
        block = nodes[first : first + L * n].reshape(n, L)
        cycles.extend(zip(*(block[:, k].tolist() for k in range(L)), strict=True))
        first += L * n
    return cycles, counts.tolist()


def _packing_upper_bound(omega: np.ndarray) -> int:
    """Cycles no packing can exceed: every cycle has 3 edges, or 2 where 2-cycles exist."""
    shortest = 2 if np.any((omega > 0) & (omega.T > 0)) else 3
    return int(omega.sum()) // shortest


def _split_circulation(flow: np.ndarray) -> list[tuple[int, ...]]:
    """Split an integer circulation (a ``K x K`` array, consumed) into simple cycles."""
    cycles: list[tuple[int, ...]] = []
    while True:
        starts = np.flatnonzero(flow.sum(axis=1))
        if not starts.size:
            return cycles
        path = [int(starts[0])]
        where = {path[0]: 0}
        while True:
            v = int(np.flatnonzero(flow[path[-1]])[0])
            if v in where:
                cyc = path[where[v] :]
                for k, w in enumerate(cyc):
                    flow[w, cyc[(k + 1) % len(cyc)]] -= 1
                cycles.append(tuple(cyc))
                break
            where[v] = len(path)
            path.append(v)


def _root_ranks(omega: np.ndarray) -> np.ndarray:
    """Rank of each worker as a root, heaviest (most leftovers in and out) first."""
    K = omega.shape[0]
    rank = np.empty(K, dtype=np.int64)
    rank[np.argsort(-(omega.sum(axis=1) + omega.sum(axis=0)), kind="stable")] = np.arange(K)
    return rank


def _rooted_size(omega: np.ndarray) -> int:
    """At least the number of variables of :func:`_rooted_milp`: edge ``i -> j`` has one per root
    ranked at or before both ends."""
    rank = _root_ranks(omega)
    ii, jj = np.nonzero(omega)
    return int((np.minimum(rank[ii], rank[jj]) + 1).sum())


def _rooted_milp(omega: np.ndarray, time_limit: float) -> tuple[list[tuple[int, ...]], bool, float]:
    """Maximum cycle packing as one circulation per root worker, solved by HiGHS.

    Workers are ranked (heaviest first); root ``r`` carries a circulation on the workers ranked
    from ``r`` on, and the objective counts the flow leaving each root. Every cycle is counted
    at its first-ranked worker, so the program is exact without listing any cycle and without
    symmetric copies of one packing. Returns the cycles found, whether HiGHS proved them
    optimal, and its bound on the optimum.
    """
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    K = omega.shape[0]
    ii, jj = np.nonzero(omega)
    E = ii.size
    out_w, in_w = omega.sum(axis=1), omega.sum(axis=0)
    rank = _root_ranks(omega)
    var_root, var_arc = [], []
    for root in np.argsort(rank):
        if not out_w[root] or not in_w[root]:
            continue
        arcs = np.flatnonzero((rank[ii] >= rank[root]) & (rank[jj] >= rank[root]))
        if not np.any(ii[arcs] == root):
            continue
        var_root.append(np.full(arcs.size, root))
        var_arc.append(arcs)
    if not var_root:  # no root has an edge leaving it among the workers after it: no cycle
        return [], True, 0.0
    vr, va = np.concatenate(var_root), np.concatenate(var_arc)
    n = vr.size
    cols = np.arange(n)
    # rows: arc capacities, then flow conservation of root r at worker v (row E + r K + v)
    rows = np.concatenate([va, E + vr * K + ii[va], E + vr * K + jj[va]])
    vals = np.concatenate([np.ones(n), np.ones(n), -np.ones(n)])
    A = coo_matrix((vals, (rows, np.tile(cols, 3))), shape=(E + K * K, n)).tocsr()
    lo = np.concatenate([np.full(E, -np.inf), np.zeros(K * K)])
    hi = np.concatenate([omega[ii, jj].astype(float), np.zeros(K * K)])
    used = np.diff(A.indptr) > 0
    res = milp(
        c=-(ii[va] == vr).astype(float),
        constraints=LinearConstraint(A[used], lo[used], hi[used]),
        integrality=np.ones(n),
        bounds=Bounds(0, np.minimum(omega[ii[va], jj[va]], out_w[vr]).astype(float)),
        options={"time_limit": time_limit},
    )
    bound = -float(res.mip_dual_bound) if res.mip_dual_bound is not None else np.inf
    if res.x is None:
        return [], False, bound
    x = np.rint(res.x).astype(np.int64)
    cycles: list[tuple[int, ...]] = []
    for root in np.unique(vr):
        flow = np.zeros_like(omega)
        sel = (vr == root) & (x > 0)
        flow[ii[va[sel]], jj[va[sel]]] = x[sel]
        cycles += _split_circulation(flow)
    return cycles, res.status == 0, bound


class _Columns:
    """Cycles of ``omega`` as columns over its arcs (rows), for the packing programs.

    A cycle is kept once, listed from its smallest worker; column ``k`` has a one in the row of
    each of its arcs.
    """

    def __init__(self, omega: np.ndarray) -> None:
        self.K = omega.shape[0]
        self.ii, self.jj = np.nonzero(omega)
        self.w = omega[self.ii, self.jj].astype(np.float64)
        self.arc_id = np.full(omega.shape, -1, dtype=np.int64)
        self.arc_id[self.ii, self.jj] = np.arange(self.ii.size)
        self.cycles: dict[tuple[int, ...], None] = {}
        self._rows: list[np.ndarray] = []

    @property
    def E(self) -> int:
        return int(self.ii.size)

    def add(self, cycle: Sequence[int]) -> bool:
        k = cycle.index(min(cycle))
        cyc = tuple(cycle[k:]) + tuple(cycle[:k])
        if cyc in self.cycles:
            return False
        self.cycles[cyc] = None
        self._rows.append(self.arc_id[list(cyc), list(cyc[1:] + cyc[:1])])
        return True

    def short_cycles(self, support: np.ndarray) -> None:
        """Add every 2-cycle and 3-cycle of ``support``."""
        ti, tj = np.nonzero(np.triu(support & support.T, 1))
        for pair in zip(ti.tolist(), tj.tolist(), strict=True):
            self.add(pair)
        ti, tj, tk = np.nonzero(support[:, :, None] & support[None, :, :] & support.T[:, None, :])
        first = (ti < tj) & (ti < tk)
        for triangle in zip(ti[first].tolist(), tj[first].tolist(), tk[first].tolist(), strict=True):
            self.add(triangle)

    def matrix(self) -> Any:
        from scipy.sparse import csr_matrix

        n = len(self._rows)
        if not n:
            return csr_matrix((self.E, 0))
        rows = np.concatenate(self._rows)
        cols = np.repeat(np.arange(n), [r.size for r in self._rows])
        return csr_matrix((np.ones(rows.size), (rows, cols)), shape=(self.E, n))

    def arcs(self, k: int) -> np.ndarray:
        """Rows (arcs) of column ``k``."""
        return self._rows[k]

    def packing(self, uses: np.ndarray) -> tuple[list[tuple[int, ...]], list[int]]:
        """Cycles and counts of the columns with positive ``uses``."""
        listed = list(self.cycles)
        keep = np.flatnonzero(uses > 0)
        return [listed[k] for k in keep], [int(uses[k]) for k in keep]


def _triangle_count(support: np.ndarray) -> int:
    """Number of 3-cycles of ``support`` (each counted once), without listing them."""
    B = support.astype(np.float64)
    return int(round(float(((B @ B) * B.T).sum()) / 3))


def _fitting(A: Any, cap: np.ndarray) -> np.ndarray:
    """Columns of ``A`` whose every arc has capacity left in ``cap``."""
    return np.flatnonzero(np.asarray(A.T @ (cap < 0.5).astype(np.float64)).ravel() == 0)


def _fractional_packing(cols: _Columns, cap: np.ndarray, deadline: float) -> tuple[float, np.ndarray, Any]:
    """Maximum fractional cycle packing within the arc capacities ``cap``, by column generation.

    The linear program ``max sum x_c`` subject to ``sum_{c through a} x_c <= cap_a`` is solved
    over the columns listed (HiGHS's interior point method), and a shortest cycle under the
    dual prices through every arc whose cycles cost less than one is added, until none does.
    Returns an upper bound on the fractional optimum that holds whatever the solver's
    tolerances: ``cap . y / mu`` for the (clipped) dual prices ``y``, ``mu`` the least price of
    any cycle, computed by shortest paths (so ``y / mu`` is a feasible dual). Also returns the
    last primal solution over all columns and the column matrix.
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    K, ii, jj = cols.K, cols.ii, cols.jj
    live = cap > 0.5
    eps = 1e-9
    while True:
        A = cols.matrix()
        n = A.shape[1]
        x, y = np.zeros(n), np.zeros(cols.E)
        usable = _fitting(A, cap)
        if usable.size:
            res = linprog(
                -np.ones(usable.size), A_ub=A[:, usable], b_ub=cap, bounds=(0, None), method="highs-ipm"
            )
            if res.status != 0:
                raise AssertionError(f"the fractional packing program failed: {res.message}")
            x[usable] = res.x
            y = np.maximum(-res.ineqlin.marginals, 0.0)
        # Shortest cycle through each live arc u -> v under the prices: y_uv + dist(v, u). The
        # small eps keeps zero prices as arcs (a sparse zero is no arc) and adds < K eps a cycle.
        G = csr_matrix((y[live] + eps, (ii[live], jj[live])), shape=(K, K))
        dist, pred = shortest_path(G, method="D", return_predecessors=True)
        price = np.where(live, y + dist[jj, ii], np.inf)
        if not np.isfinite(price).any():  # no cycle within the capacities
            return 0.0, x, A
        added = 0
        if time.monotonic() < deadline:
            for a in np.flatnonzero(price < 1 - 1e-7):
                u, v = int(ii[a]), int(jj[a])
                path = [u]
                while path[-1] != v:
                    path.append(int(pred[v, path[-1]]))
                added += cols.add([u, *path[::-1][:-1]])
        if not added:
            mu = float(price.min()) - K * eps
            return (float(cap @ y) / mu if mu > 0 else np.inf), x, A


def _column_milp(
    cols: _Columns, A: Any, cap: np.ndarray, time_limit: float
) -> tuple[np.ndarray | None, bool]:
    """Most cycles among the listed columns within ``cap`` (integer program, HiGHS): uses per
    column, or None, and whether HiGHS proved them the best among these columns."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    usable = _fitting(A, cap)
    if not usable.size:  # no cycle fits: nothing is the best
        return np.zeros(A.shape[1]), True
    if time_limit <= 0:
        return None, False
    res = milp(
        -np.ones(usable.size),
        constraints=LinearConstraint(A[:, usable], -np.inf, cap),
        integrality=np.ones(usable.size),
        bounds=Bounds(0, np.inf),
        options={"time_limit": time_limit},
    )
    if res.x is None:
        return None, False
    uses = np.zeros(A.shape[1])
    uses[usable] = np.rint(res.x)
    return uses, res.status == 0


def _dive(cols: _Columns, deadline: float) -> np.ndarray:
    """A packing by rounding the fractional one: fix the whole part of every column, or round up
    the largest fractional ones, solve the fractional packing of what is left, again; once that
    is at most :data:`DIVE_RESIDUAL` cycles, finish with the integer program on what is left.
    Returns uses per column (of the columns listed by then)."""
    cap = cols.w.copy()
    uses = np.zeros(0)
    while time.monotonic() < deadline:
        value, x, A = _fractional_packing(cols, cap, deadline)
        uses = np.concatenate([uses, np.zeros(A.shape[1] - uses.size)])
        if value < 1 - 1e-9:
            break
        if value <= DIVE_RESIDUAL:
            rest, _ = _column_milp(cols, A, cap, deadline - time.monotonic())
            if rest is not None:
                uses += rest
            break
        step = np.floor(x + 1e-7)
        if not step.any():  # round up the largest fractional columns, one by one while they fit
            left = cap.copy()
            for k in np.argsort(-x)[: max(1, int(np.count_nonzero(x > DIVE_ROUND_UP)))]:
                arcs = cols.arcs(int(k))
                if x[k] > 0 and np.all(left[arcs] >= 1):
                    left[arcs] -= 1
                    step[k] = 1
            if not step.any():
                break
        cap = cap - A @ step
        uses += step
    return uses


def _exact(omega: np.ndarray) -> tuple[list[tuple[int, ...]], list[int], bool, str | None, int]:
    """Maximum cycle packing, proven, or the best packing found with a note saying why not; last,
    the most cycles any packing can have, as proven.

    Stages, all within :data:`EXACT_TIME_LIMIT` seconds: greedy; the fractional packing by
    column generation, whose value rounded down bounds every packing; a packing by rounding
    the fractional one (:func:`_dive`); the integer program over every cycle listed so far; and,
    while the best packing is short of the bound, the circulation program
    (:func:`_rooted_milp`), which can prove a packing optimal below it.
    """
    deadline = time.monotonic() + EXACT_TIME_LIMIT
    g_cycles, g_counts = _greedy(omega)
    found = sum(g_counts)
    top = _packing_upper_bound(omega)
    if found == top:  # greedy meets the counting bound: nothing to solve
        return g_cycles, g_counts, True, None, found
    support = omega > 0
    n_short = _triangle_count(support) + int(np.count_nonzero(np.triu(support & support.T, 1)))
    if n_short > EXACT_MAX_VARIABLES:
        note = (
            f"exact: the packing programs would start from more than {EXACT_MAX_VARIABLES} "
            f"cycles ({n_short}); fell back to greedy"
        )
        return g_cycles, g_counts, False, note, top
    cols = _Columns(omega)
    cols.short_cycles(support)
    value, _, _ = _fractional_packing(cols, cols.w, deadline)
    bound = min(top, int(np.floor(value + 1e-6))) if np.isfinite(value) else top
    best: tuple[list[tuple[int, ...]], list[int]] = (g_cycles, g_counts)
    method = "greedy"

    def keep(cycles: list[tuple[int, ...]], counts: list[int], how: str) -> None:
        nonlocal best, method
        if not is_cycle_packing(omega, cycles, counts):
            raise AssertionError(f"the {how} returned an infeasible packing")
        if sum(counts) > sum(best[1]):
            best, method = (cycles, counts), "exact"

    if found < bound:
        keep(*cols.packing(_dive(cols, deadline)), "rounded fractional packing")
    if sum(best[1]) < bound and time.monotonic() < deadline:
        uses, _ = _column_milp(cols, cols.matrix(), cols.w, deadline - time.monotonic())
        if uses is not None:
            keep(*cols.packing(uses), "integer program over listed cycles")
    proven = sum(best[1]) >= bound
    if not proven and time.monotonic() < deadline and _rooted_size(omega) <= EXACT_MAX_VARIABLES:
        cycles, proven_here, rooted_bound = _rooted_milp(omega, deadline - time.monotonic())
        tally: dict[tuple[int, ...], int] = {}
        for cyc in cycles:
            tally[cyc] = tally.get(cyc, 0) + 1
        keep(list(tally), list(tally.values()), "circulation program")
        if proven_here:
            proven = True
        else:
            bound = min(bound, int(np.floor(rooted_bound + 1e-6)))
    if proven:
        return best[0], best[1], True, None, sum(best[1])
    n = sum(best[1])
    if method == "greedy":
        note = (
            f"exact: no packing better than greedy's {n} cycles found within {EXACT_TIME_LIMIT:g} s "
            f"(at most {bound} cycles possible); fell back to greedy"
        )
    else:
        note = (
            f"exact: not proven within {EXACT_TIME_LIMIT:g} s: {n} cycles found, at most {bound} "
            "possible; best packing found kept"
        )
    return best[0], best[1], False, note, bound


def _pack_greedy(omega: np.ndarray, progress: bool = False) -> CyclePacking:
    cycles, counts = _greedy(omega, progress)
    return CyclePacking(omega, tuple(cycles), tuple(counts), "greedy", "greedy", optimal=not omega.any())


def _pack_exact(omega: np.ndarray) -> CyclePacking:
    cycles, counts, optimal, note, bound = _exact(omega)
    method = "greedy" if note is not None and "fell back" in note else "exact"
    return CyclePacking(
        omega, tuple(cycles), tuple(counts), "exact", method, optimal=optimal, note=note, upper_bound=bound
    )


#: Cycle packing strategies by name.
STRATEGIES: dict[str, Callable[[np.ndarray], CyclePacking]] = {
    "greedy": _pack_greedy,
    "exact": _pack_exact,
}


def pack_cycles(omega: object, *, strategy: str = "greedy", progress: bool = False) -> CyclePacking:
    """Choose cycles in the leftover matrix ``omega`` with the named strategy.

    Parameters
    ----------
    omega : array_like
        Square matrix of non-negative ints, usually :func:`coded_shuffle.matrix.leftover_matrix`.
    strategy : str
        A key of :data:`STRATEGIES`: ``"greedy"`` or ``"exact"``.
    progress : bool
        Announce the ``greedy`` packing on standard error when it is long (from
        :data:`PROGRESS_MIN_LEFTOVERS` leftover points), with a bar on a terminal.

    Returns
    -------
    CyclePacking

    Examples
    --------
    >>> p = pack_cycles([[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    >>> p.cycles, p.counts
    (((0, 2, 1),), (1,))

    Shortest cycles first can be short of the maximum; ``exact`` proves its packing:

    >>> omega = [[0, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 0], [0, 0, 0, 1, 0, 0],
    ...          [1, 0, 0, 0, 0, 1], [1, 0, 0, 0, 0, 0], [0, 1, 0, 0, 0, 0]]
    >>> pack_cycles(omega).cycles_used
    2
    >>> p = pack_cycles(omega, strategy="exact")
    >>> p.cycles_used, p.optimal
    (3, True)
    """
    om = check_shuffle_matrix(omega, "omega")
    if np.any(np.diagonal(om)):
        raise ValueError("Argument 'omega' must have a zero diagonal.")
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    if progress and strategy == "greedy":
        return _pack_greedy(om, progress=True)
    return STRATEGIES[strategy](om)


# --------------------------------------------------------------------------- rates


@dataclass(frozen=True, eq=False)
class Rates:
    """Loads of one transition, in symbols of one record each, with the inputs that gave them.

    With ``subpackets = q > 1`` the loads are still in records: ``coded`` and
    ``uncoded_leftovers`` are then :class:`fractions.Fraction` (a piece is ``1/q`` record), and
    ``cycles_used`` and the packing are those of ``q Omega``.

    Attributes
    ----------
    S : numpy.ndarray
        The shuffle matrix.
    strategy : str
        The cycle packing strategy asked for.
    uncoded : int
        ``W``: every moved point sent alone.
    pairs : int
        Order-2 symbols.
    paired : int
        Load after the order-2 phase, leftovers sent alone.
    leftovers : int
        Points left after the order-2 phase (the sum of ``Omega``).
    cycles_used : int
        Cycles used by the leftover combining phase (of ``q Omega``; each saves one piece).
    coded : int or Fraction
        Load after leftover combining: ``paired - cycles_used / subpackets``; an int when
        ``subpackets`` is 1, a Fraction otherwise.
    uncoded_leftovers : int or Fraction
        Leftover points no cycle carries, sent uncoded (non-zero only without conservation); a
        Fraction of records when ``subpackets > 1``.
    conserved : bool
        Whether leftover conservation holds (equal row and column sums of ``S``).
    packing : CyclePacking
        The cycles chosen, in ``Omega`` (``q Omega`` with sub-packets).
    subpackets : int
        Pieces per record, ``q``.
    """

    S: np.ndarray
    strategy: str
    uncoded: int
    pairs: int
    paired: int
    leftovers: int
    cycles_used: int
    coded: int | Fraction
    uncoded_leftovers: int | Fraction
    conserved: bool
    packing: CyclePacking
    subpackets: int = 1

    @property
    def K(self) -> int:
        """Number of workers."""
        return int(self.S.shape[0])

    @property
    def N(self) -> int:
        """Number of points."""
        return int(self.S.sum())


def rates(
    S: object, *, strategy: str = "greedy", subpackets: int = 1, progress: bool = False
) -> Rates:
    """Return the uncoded, paired and coded loads of the shuffle matrix ``S``.

    ``S`` may be ``K_t x K_{t+1}`` when the number of workers changes; it is then taken as
    :func:`coded_shuffle.matrix.elastic_matrix` of it (``Rates.S`` is that square matrix).
    ``progress`` is passed on to :func:`pack_cycles`.

    Parameters
    ----------
    S : array_like
        The shuffle matrix.
    strategy : str
        Cycle packing strategy, a key of :data:`STRATEGIES`.
    subpackets : int
        Pieces per record, ``q >= 1``: the cycles are packed in ``q Omega`` and each saves
        ``1/q`` record (module docstring). The loads stay in records, exact.

    Examples
    --------
    Example 1 of Attia and Tandon (2016):

    >>> r = rates([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> r.uncoded, r.paired, r.coded
    (11, 7, 6)

    Two pieces a record on a 3-cycle: two cycles of pieces save two half records, as one cycle
    of whole records does.

    >>> r = rates([[0, 1, 0], [0, 0, 1], [1, 0, 0]], subpackets=2)
    >>> r.coded, r.cycles_used
    (Fraction(2, 1), 2)
    """
    S = elastic_matrix(S)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    q = check_int(subpackets, "subpackets", minimum=1)
    off = S.copy()
    np.fill_diagonal(off, 0)
    W = int(off.sum())
    P = int(np.triu(pair_minima(S), 1).sum())
    omega = leftover_matrix(S)
    if q > 1 and int(S.max(initial=0)) > (2**62 - 1) // q:
        raise ValueError(f"Argument 'subpackets' is too large for this matrix: {q} pieces overflow 2**62.")
    packing = pack_cycles(q * omega if q > 1 else omega, strategy=strategy, progress=progress)
    n = packing.cycles_used
    conserved = bool(np.array_equal(omega.sum(axis=0), omega.sum(axis=1)))
    coded: int | Fraction = W - P - n if q == 1 else W - P - Fraction(n, q)
    lone: int | Fraction = packing.remainder if q == 1 else Fraction(packing.remainder, q)
    return Rates(
        S=S,
        strategy=strategy,
        uncoded=W,
        pairs=P,
        paired=W - P,
        leftovers=int(omega.sum()),
        cycles_used=n,
        coded=coded,
        uncoded_leftovers=lone,
        conserved=conserved,
        packing=packing,
        subpackets=q,
    )


# --------------------------------------------------------------------------- point-level plans


@dataclass(frozen=True, eq=False)
class DeliveryPlan:
    """Every transmission of one transition, at the level of actual points.

    Symbols are numbered in the order they are sent: the ``P`` order-2 symbols, then the cycle
    symbols cycle by cycle, then the uncoded points.

    With ``subpackets = q > 1`` every array below names pieces, not points: piece ``k`` of point
    ``p`` is ``p * q + k``, held and needed by the workers of ``p``; every symbol is one piece
    long and :attr:`load` converts the symbol count to records.

    Attributes
    ----------
    placement_t, placement_t1 : Placement
        The placements of epochs ``t`` and ``t + 1``.
    rates : Rates
        The loads, with ``S`` and the cycle packing.
    pair_x, pair_y : numpy.ndarray
        Order-2 symbol ``s`` is ``pair_x[s] + pair_y[s]``: ``pair_x[s]`` is held by ``pair_i[s]`` and
        needed by ``pair_j[s]``, ``pair_y[s]`` the other way round.
    pair_i, pair_j : numpy.ndarray
        The two workers of each order-2 symbol, ``pair_i < pair_j``.
    cycle_ptr : numpy.ndarray
        Cycle ``c`` covers ``cycle_points[cycle_ptr[c]:cycle_ptr[c + 1]] = (m_1, ..., m_l)``.
    cycle_points, cycle_workers : numpy.ndarray
        ``m_k`` and the worker ``w_k`` that holds it; ``m_k`` is needed by ``w_{k+1}`` (cyclically).
    uncoded_points, uncoded_from, uncoded_to : numpy.ndarray
        Points sent alone, their holder and the worker that needs them.
    subpackets : int
        Pieces per record, ``q``.
    """

    placement_t: Placement
    placement_t1: Placement
    rates: Rates
    pair_x: np.ndarray
    pair_y: np.ndarray
    pair_i: np.ndarray
    pair_j: np.ndarray
    cycle_ptr: np.ndarray
    cycle_points: np.ndarray
    cycle_workers: np.ndarray
    uncoded_points: np.ndarray
    uncoded_from: np.ndarray
    uncoded_to: np.ndarray
    subpackets: int = 1

    @property
    def K(self) -> int:
        """Number of workers: the larger of ``K_t`` and ``K_{t+1}``."""
        return max(self.placement_t.K, self.placement_t1.K)

    @property
    def N(self) -> int:
        """Number of points."""
        return self.placement_t.N

    @property
    def S(self) -> np.ndarray:
        """The shuffle matrix."""
        return self.rates.S

    @property
    def strategy(self) -> str:
        """The cycle packing strategy asked for."""
        return self.rates.strategy

    @property
    def n_cycles(self) -> int:
        """Number of cycles in the leftover combining phase."""
        return int(self.cycle_ptr.shape[0] - 1)

    @property
    def n_symbols(self) -> int:
        """Number of symbols sent, each one piece long: ``subpackets`` times the coded load."""
        return int(
            self.pair_x.shape[0] + self.cycle_points.shape[0] - self.n_cycles + self.uncoded_points.shape[0]
        )

    @property
    def load(self) -> int | Fraction:
        """Symbols sent, in records: ``n_symbols / subpackets`` (an int when ``subpackets`` is 1).

        Examples
        --------
        >>> plan_from_matrix([[0, 1, 0], [0, 0, 1], [1, 0, 0]], subpackets=2).load
        Fraction(2, 1)
        """
        return self.n_symbols if self.subpackets == 1 else Fraction(self.n_symbols, self.subpackets)

    def piece_owners(self) -> tuple[np.ndarray, np.ndarray]:
        """Return the holder and the receiver of every item the arrays name (piece or point).

        Examples
        --------
        >>> plan = plan_from_matrix([[0, 1], [1, 0]], subpackets=2)
        >>> [a.tolist() for a in plan.piece_owners()]
        [[0, 0, 1, 1], [1, 1, 0, 0]]
        """
        a, b = self.placement_t.owner, self.placement_t1.owner
        if self.subpackets == 1:
            return a, b
        return np.repeat(a, self.subpackets), np.repeat(b, self.subpackets)

    def cycle_symbol_positions(self) -> np.ndarray:
        """Return ``q`` for each cycle symbol ``cycle_points[q] + cycle_points[q + 1]``, in order."""
        keep = np.ones(self.cycle_points.shape[0], dtype=bool)
        keep[self.cycle_ptr[1:] - 1] = False
        return np.flatnonzero(keep)

    def transmissions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(a, b, phase)``: symbol ``s`` is ``a[s] + b[s]`` (``b[s] = -1``: ``a[s]`` alone).

        ``phase`` is 0 for order-2 symbols, 1 for cycle symbols, 2 for uncoded points.

        Examples
        --------
        >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
        >>> a, b, phase = plan.transmissions()
        >>> len(a), phase.tolist()
        (6, [0, 0, 0, 0, 1, 1])
        """
        q = self.cycle_symbol_positions()
        a = np.concatenate([self.pair_x, self.cycle_points[q], self.uncoded_points]).astype(np.int64)
        b = np.concatenate(
            [self.pair_y, self.cycle_points[q + 1], np.full(self.uncoded_points.shape[0], -1)]
        ).astype(np.int64)
        phase = np.concatenate(
            [
                np.zeros(self.pair_x.shape[0], np.int8),
                np.ones(q.shape[0], np.int8),
                np.full(self.uncoded_points.shape[0], 2, np.int8),
            ]
        )
        return a, b, phase


def _check_placements(placement_t: object, placement_t1: object) -> tuple[Placement, Placement]:
    for name, p in (("placement_t", placement_t), ("placement_t1", placement_t1)):
        if not isinstance(p, Placement):
            raise TypeError(f"Argument {name!r} must be a Placement, not {type(p).__name__}.")
    assert isinstance(placement_t, Placement) and isinstance(placement_t1, Placement)
    if placement_t1.N != placement_t.N:
        raise ValueError(
            f"Argument 'placement_t1' must place the same N = {placement_t.N} points, not {placement_t1.N}."
        )
    return placement_t, placement_t1


def plan_delivery(
    placement_t: Placement,
    placement_t1: Placement,
    *,
    strategy: str = "greedy",
    subpackets: int = 1,
    progress: bool = False,
) -> DeliveryPlan:
    """Plan the delivery of epoch ``t + 1``'s batches from the caches of epoch ``t``.

    One counting sort groups the moved points by (holder, receiver); the ``k``-th point of group
    ``(i, j)`` is paired with the ``k``-th point of group ``(j, i)``; the leftovers of each group
    are dealt, in order, to the cycles the strategy chose; what remains is sent uncoded.

    Parameters
    ----------
    placement_t, placement_t1 : Placement
        Placements of the same ``N`` points. Their ``K`` may differ (elastic ``K``): a joining
        worker starts with an empty cache, a leaving worker's cache is gone, as in
        :func:`coded_shuffle.matrix.elastic_matrix`; ``plan.K`` is the larger of the two.
    strategy : str
        Cycle packing strategy, a key of :data:`STRATEGIES`.
    subpackets : int
        Pieces per record, ``q >= 1``: the plan is made on the ``N q`` pieces (piece ``k`` of
        point ``p`` is ``p * q + k``), with the cycles of ``q Omega``. It needs ``q`` times the
        memory of a plan of whole records.
    progress : bool
        Passed on to :func:`pack_cycles`: announce a long packing on standard error.

    Returns
    -------
    DeliveryPlan

    Examples
    --------
    >>> from coded_shuffle.orders import epoch_placement
    >>> a = epoch_placement(1000, 4, seed=0, epoch=0)
    >>> b = epoch_placement(1000, 4, seed=0, epoch=1)
    >>> plan = plan_delivery(a, b)
    >>> verify_plan(plan)
    >>> plan.n_symbols == plan.rates.coded
    True
    """
    from ._kernels import count_cells, deal_cycles, gather_runs, sort_moved

    placement_t, placement_t1 = _check_placements(placement_t, placement_t1)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    q = check_int(subpackets, "subpackets", minimum=1)
    K = max(placement_t.K, placement_t1.K)
    a, b = placement_t.owner, placement_t1.owner

    counts = np.zeros(K * K, dtype=np.int64)
    count_cells(a, b, K, counts)
    r = rates(_readonly(counts.reshape(K, K)), strategy=strategy, subpackets=q, progress=progress)
    if q > 1:  # from here on, the N q pieces: their matrix is q S, their leftovers q Omega
        a, b = np.repeat(a, q), np.repeat(b, q)
        counts = counts * q
    N = a.shape[0]
    S = _readonly(counts.reshape(K, K))

    moved_counts = S.copy()
    np.fill_diagonal(moved_counts, 0)
    start = np.zeros(K * K + 1, dtype=np.int64)
    np.cumsum(moved_counts.ravel(), out=start[1:])
    order = np.empty(int(start[-1]), dtype=np.int32 if N < 2**31 else np.int64)
    sort_moved(a, b, K, start, order)

    wdt = owner_dtype(K)
    M = pair_minima(S)
    omega = leftover_matrix(S)

    # Order-2 phase: the k-th point of group (i, j) with the k-th point of group (j, i).
    iu, ju = np.nonzero(np.triu(M, 1))
    m = M[iu, ju]
    pair_x = gather_runs(order, start[iu * K + ju], m)
    pair_y = gather_runs(order, start[ju * K + iu], m)
    pair_i = np.repeat(iu.astype(wdt), m)
    pair_j = np.repeat(ju.astype(wdt), m)

    # Leftover phase: deal each group's leftovers, in order, to the chosen cycles.
    next_left = start[:-1] + M.ravel()
    cycles = r.packing.cycles
    lengths = np.fromiter(map(len, cycles), dtype=np.int64, count=len(cycles))
    nodes = np.fromiter(chain.from_iterable(cycles), dtype=np.int64, count=int(lengths.sum()))
    cycle_points, cycle_workers, cycle_ptr = deal_cycles(
        order,
        next_left,
        K,
        nodes,
        lengths,
        np.asarray(r.packing.counts, dtype=np.int64),
        np.empty(0, order.dtype),
        np.empty(0, wdt),
    )
    next_left = next_left.reshape(K, K)

    # What no cycle carries goes uncoded.
    rest = start[:-1].reshape(K, K) + M + omega - next_left
    ie, je = np.nonzero(rest)
    uncoded_points = gather_runs(order, next_left[ie, je], rest[ie, je])
    uncoded_from = np.repeat(ie.astype(wdt), rest[ie, je])
    uncoded_to = np.repeat(je.astype(wdt), rest[ie, je])

    return DeliveryPlan(
        placement_t=placement_t,
        placement_t1=placement_t1,
        rates=r,
        pair_x=_readonly(pair_x),
        pair_y=_readonly(pair_y),
        pair_i=_readonly(pair_i),
        pair_j=_readonly(pair_j),
        cycle_ptr=_readonly(cycle_ptr),
        cycle_points=_readonly(cycle_points),
        cycle_workers=_readonly(cycle_workers),
        uncoded_points=_readonly(uncoded_points),
        uncoded_from=_readonly(uncoded_from),
        uncoded_to=_readonly(uncoded_to),
        subpackets=q,
    )


#: Most points :func:`plan_from_matrix` plans. A point-level plan holds about 32 bytes a point at
#: its peak (3.2 GB at 10^8 points, ``benchmarks/plan_scale.py``), so 2^30 points is about 34 GB;
#: :func:`rates` gives the loads of a matrix of any size without point-level arrays.
PLAN_MAX_POINTS = 1 << 30


def plan_from_matrix(S: object, *, strategy: str = "greedy", subpackets: int = 1) -> DeliveryPlan:
    """Plan the delivery for a given shuffle matrix, on the points of :func:`placements_from_matrix`.

    ``strategy`` and ``subpackets`` are those of :func:`plan_delivery`. ``S`` may hold at most
    :data:`PLAN_MAX_POINTS` pieces in all (points times ``subpackets``); beyond that it is
    refused before anything is allocated (:func:`rates` computes the loads of any matrix).

    Examples
    --------
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> plan.pair_x.size, plan.n_cycles, plan.n_symbols
    (4, 1, 6)
    """
    S = check_shuffle_matrix(S)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    q = check_int(subpackets, "subpackets", minimum=1)
    if float(S.sum(dtype=np.float64)) * q > PLAN_MAX_POINTS:
        N = int(S.astype(object).sum())  # exact: an int64 sum of large entries may overflow
        raise ValueError(
            f"Argument 'S' must hold at most {PLAN_MAX_POINTS // q} points in all with {q} "
            f"subpacket(s) (a point-level plan takes about 32 bytes a piece; rates() gives the "
            f"loads of any matrix), not {N}."
        )
    placement_t, placement_t1 = placements_from_matrix(S)
    return plan_delivery(placement_t, placement_t1, strategy=strategy, subpackets=q)


def _flaw(message: str, where: np.ndarray) -> InvalidPlanError:
    idx = np.flatnonzero(where)
    shown = ", ".join(str(int(i)) for i in idx[:5])
    more = "" if idx.size <= 5 else f" and {idx.size - 5} more"
    return InvalidPlanError(f"{message}: at {shown}{more}.")


def verify_plan(plan: DeliveryPlan) -> None:
    """Check that ``plan`` delivers every moved point exactly once, and that every symbol decodes.

    Checks, vectorized over all transmissions:

    - every point of an order-2 symbol is held by one of its two workers and needed by the other;
    - along each cycle, ``m_k`` is held by ``w_k`` and needed by ``w_{k+1}``, so that each symbol
      ``m_k + m_{k+1}`` is decoded by ``w_{k+1}`` in one step and the chain by ``w_1`` by peeling;
    - every uncoded point goes from its holder to the worker that needs it;
    - the points delivered are exactly the moved points, each once;
    - the number of symbols equals the coded load of ``plan.rates``.

    With sub-packets the same checks run on the pieces (every piece of a moved point delivered
    once, by symbols that decode), the symbols are counted in pieces against ``subpackets``
    times the coded load, and the plan and its rates must agree on ``subpackets``.

    Raises
    ------
    InvalidPlanError
        Naming the first flaw found and where it is.

    Examples
    --------
    >>> verify_plan(plan_from_matrix([[0, 2], [2, 0]]))
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    q = plan.subpackets
    if isinstance(q, bool) or not isinstance(q, int) or q < 1 or plan.rates.subpackets != q:
        raise InvalidPlanError(
            f"plan has subpackets = {q!r}, its rates {plan.rates.subpackets!r}: "
            "both must be the same int >= 1."
        )
    a, b = plan.piece_owners()
    N = int(a.shape[0])
    point_arrays = {
        "pair_x": plan.pair_x,
        "pair_y": plan.pair_y,
        "cycle_points": plan.cycle_points,
        "uncoded_points": plan.uncoded_points,
    }
    for name, arr in point_arrays.items():
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= N):
            raise _flaw(f"{name} names points outside [0, {N})", (arr < 0) | (arr >= N))
    if not plan.pair_x.shape == plan.pair_y.shape == plan.pair_i.shape == plan.pair_j.shape:
        raise InvalidPlanError("pair arrays differ in length.")
    if not plan.uncoded_points.shape == plan.uncoded_from.shape == plan.uncoded_to.shape:
        raise InvalidPlanError("uncoded arrays differ in length.")
    if plan.cycle_points.shape != plan.cycle_workers.shape:
        raise InvalidPlanError("cycle_points and cycle_workers differ in length.")

    x, y, i, j = plan.pair_x, plan.pair_y, plan.pair_i, plan.pair_j
    for message, bad in (
        ("order-2 symbol pairs a worker with itself", i == j),
        ("order-2 symbol: pair_x not held by pair_i", a[x] != i),
        ("order-2 symbol: pair_x not needed by pair_j", b[x] != j),
        ("order-2 symbol: pair_y not held by pair_j", a[y] != j),
        ("order-2 symbol: pair_y not needed by pair_i", b[y] != i),
    ):
        if bad.any():
            raise _flaw(message, bad)

    ptr = plan.cycle_ptr
    if ptr.size == 0 or ptr[0] != 0 or ptr[-1] != plan.cycle_points.size or np.any(np.diff(ptr) < 2):
        raise InvalidPlanError("cycle_ptr must rise from 0 to len(cycle_points) in steps of at least 2.")
    if plan.cycle_points.size:
        m, w = plan.cycle_points, plan.cycle_workers
        nxt = np.arange(1, m.size + 1)
        nxt[ptr[1:] - 1] = ptr[:-1]  # w_l hands on to w_1
        if (bad := a[m] != w).any():
            raise _flaw("cycle point not held by its worker (symbol undecodable)", bad)
        if (bad := b[m] != w[nxt]).any():
            raise _flaw("cycle point not needed by the next worker of its cycle", bad)

    u, uf, ut = plan.uncoded_points, plan.uncoded_from, plan.uncoded_to
    for message, bad in (
        ("uncoded point not held by uncoded_from", a[u] != uf),
        ("uncoded point not needed by uncoded_to", b[u] != ut),
        ("uncoded point does not move", uf == ut),
    ):
        if bad.any():
            raise _flaw(message, bad)

    delivered = np.zeros(N, dtype=np.int64)
    for arr in point_arrays.values():
        delivered += np.bincount(arr, minlength=N)
    moved = a != b
    if (bad := moved & (delivered == 0)).any():
        raise _flaw("moved points never delivered", bad)
    if (bad := delivered > 1).any():
        raise _flaw("points delivered more than once", bad)
    if (bad := ~moved & (delivered > 0)).any():
        raise _flaw("points delivered that do not move", bad)
    if plan.n_symbols != q * plan.rates.coded:
        raise InvalidPlanError(
            f"plan sends {plan.n_symbols} symbols of 1/{q} record, its rates say {plan.rates.coded} records."
        )


def decoding_steps(plan: DeliveryPlan, worker: int) -> list[tuple[int, int, int]]:
    """Return how ``worker`` decodes its new points, step by step, in order.

    Each step is ``(symbol, known, recovered)``: XOR symbol number ``symbol`` (numbering of
    :meth:`DeliveryPlan.transmissions`) with point ``known`` (in the cache or recovered by an
    earlier step) to obtain point ``recovered``. Uncoded points appear as ``(symbol, -1, point)``.
    With sub-packets the steps name pieces (``p * q + k``).

    Examples
    --------
    Example 1 of Attia and Tandon (2016): the first worker of the cycle peels two symbols.

    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> [s for s in decoding_steps(plan, 0) if s[0] >= 4]
    [(4, 4, 13), (5, 13, 6)]
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    from ._checks import check_int

    worker = check_int(worker, "worker", minimum=0)
    if worker >= plan.K:
        raise ValueError(f"Argument 'worker' must be less than K = {plan.K}, not {worker}.")
    steps: list[tuple[int, int, int]] = []
    for s in np.flatnonzero(plan.pair_i == worker):
        steps.append((int(s), int(plan.pair_x[s]), int(plan.pair_y[s])))
    for s in np.flatnonzero(plan.pair_j == worker):
        steps.append((int(s), int(plan.pair_y[s]), int(plan.pair_x[s])))
    steps.sort()
    P = int(plan.pair_x.shape[0])
    ptr, m, w = plan.cycle_ptr, plan.cycle_points, plan.cycle_workers
    for c in range(plan.n_cycles):
        lo, hi = int(ptr[c]), int(ptr[c + 1])
        first_symbol = P + lo - c  # cycle c's symbols follow those of the c cycles before it
        for k in range(lo, hi):
            if w[k] != worker:
                continue
            if k > lo:  # holds m_k, reads m_{k-1} off symbol m_{k-1} + m_k
                steps.append((first_symbol + k - 1 - lo, int(m[k]), int(m[k - 1])))
            else:  # w_1 peels the chain m_1 -> m_2 -> ... -> m_l
                for q in range(lo, hi - 1):
                    steps.append((first_symbol + q - lo, int(m[q]), int(m[q + 1])))
    first_uncoded = P + m.shape[0] - plan.n_cycles
    for u in np.flatnonzero(plan.uncoded_to == worker).tolist():
        steps.append((first_uncoded + u, -1, int(plan.uncoded_points[u])))
    return steps
