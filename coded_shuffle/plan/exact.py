"""The ``exact`` cycle packing: the fractional packing by column generation, rounding, and
integer programs over listed cycles and over rooted circulations (HiGHS, through scipy)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .greedy import _greedy
from .packing import CyclePacking, is_cycle_packing

#: Branch-and-bound nodes each integer program of the ``exact`` strategy may explore before it
#: keeps its best packing unproven. A count of work, not seconds: the same input gives the same
#: packing however loaded the machine is.
EXACT_NODE_LIMIT = 20_000
#: Rounds of column generation of a fractional packing (each adds the cycles the dual prices
#: price below one); once they are spent the bound comes from the prices of the last round.
COLUMN_ROUNDS = 200
#: Most variables of an integer program over all cycles listed or of the circulation program: a
#: node limit does not bound the work of the root node (at ``K = 64`` the circulation program's
#: 39 000 variables had not finished their root in 150 s), so larger programs are not built and
#: the packing found by rounding is kept, with its bound.
EXACT_MILP_MAX_VARIABLES = 10_000
#: Most steps of :func:`_dive` (each fixes at least one cycle).
DIVE_MAX_STEPS = 1_000
#: Largest program the ``exact`` strategy builds (columns: the 2- and 3-cycles it starts from;
#: variables of the circulation program: edge-root pairs); past it, greedy's packing is kept
#: with a note. ``K = 64`` needs about 10 000 and 40 000, ``K = 256`` about 700 000 and millions.
EXACT_MAX_VARIABLES = 1_000_000
#: Fractional packing value at which :func:`_dive` hands what is left to one integer program.
DIVE_RESIDUAL = 60.0
#: Fractional uses above which :func:`_dive` rounds columns up when none is whole.
DIVE_ROUND_UP = 0.9


def _packing_upper_bound(omega: np.ndarray) -> int:
    """Cycles no packing can exceed: every cycle has 3 edges, or 2 where 2-cycles exist."""
    shortest = 2 if np.any((omega > 0) & (omega.T > 0)) else 3
    return int(omega.sum()) // shortest


def _whole_bound(value: float) -> int:
    """The whole number of cycles a float bound on a packing allows, with room for the float's own
    rounding (relative ``1e-9``): so that no bound below the optimum proves a packing."""
    return int(np.floor(value * (1 + 1e-9) + 1e-6))


def _split_circulation(flow: np.ndarray, tally: dict[tuple[int, ...], int]) -> None:
    """Split an integer circulation (a ``K x K`` array, consumed) into simple cycles, each taken as
    many times as its lightest arc allows, counted into ``tally`` (at most ``K^2`` cycles found,
    whatever the flow)."""
    while True:
        starts = np.flatnonzero(flow.sum(axis=1))
        if not starts.size:
            return
        path = [int(starts[0])]
        where = {path[0]: 0}
        while True:
            v = int(np.flatnonzero(flow[path[-1]])[0])
            if v in where:
                cyc = path[where[v] :]
                arcs = (np.array(cyc), np.roll(np.array(cyc), -1))
                k = int(flow[arcs].min())
                flow[arcs] -= k
                tally[tuple(cyc)] = tally.get(tuple(cyc), 0) + k
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


def _rooted_milp(omega: np.ndarray) -> tuple[dict[tuple[int, ...], int], bool, float]:
    """Maximum cycle packing as one circulation per root worker, solved by HiGHS.

    Workers are ranked (heaviest first); root ``r`` carries a circulation on the workers ranked
    from ``r`` on, and the objective counts the flow leaving each root. Every cycle is counted
    at its first-ranked worker, so the program is exact without listing any cycle and without
    symmetric copies of one packing. Returns the cycles found with their counts, whether HiGHS
    proved them optimal, and its bound on the optimum.
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
        return {}, True, 0.0
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
        options={"node_limit": EXACT_NODE_LIMIT, "mip_rel_gap": 0.0},  # proven means optimal
    )
    bound = -float(res.mip_dual_bound) if res.mip_dual_bound is not None else np.inf
    if res.x is None:
        return {}, False, bound
    x = np.rint(res.x).astype(np.int64)
    tally: dict[tuple[int, ...], int] = {}
    for root in np.unique(vr):
        flow = np.zeros_like(omega)
        sel = (vr == root) & (x > 0)
        flow[ii[va[sel]], jj[va[sel]]] = x[sel]
        _split_circulation(flow, tally)
    return tally, res.status == 0, bound


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


def _fractional_packing(
    cols: _Columns, cap: np.ndarray, *, rounds: int = COLUMN_ROUNDS
) -> tuple[float, np.ndarray, Any, bool]:
    """Maximum fractional cycle packing within the arc capacities ``cap``, by column generation.

    The linear program ``max sum x_c`` subject to ``sum_{c through a} x_c <= cap_a`` is solved
    over the columns listed (HiGHS's interior point method), and a shortest cycle under the
    dual prices through every arc whose cycles cost less than one is added, until none does.
    Returns an upper bound on the fractional optimum that holds whatever the solver's
    tolerances: ``cap . y / mu`` for the (clipped) dual prices ``y``, ``mu`` the least price of
    any cycle, computed by shortest paths (so ``y / mu`` is a feasible dual). Also returns the
    last primal solution over all columns, the column matrix, and whether the ``rounds`` of
    column generation ran out before no cycle was priced below one (the bound is then that of
    the last prices: any non-negative prices give a valid bound, scaled as above). Every step is
    a count, never a clock, so the result does not depend on the machine's load.
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    K, ii, jj = cols.K, cols.ii, cols.jj
    live = cap > 0.5
    eps = 1e-9
    for done in range(rounds + 1):
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
            x[usable] = np.maximum(res.x, 0.0)
            y = np.maximum(-np.asarray(res.ineqlin.marginals), 0.0)
        # Shortest cycle through each live arc u -> v under the prices: y_uv + dist(v, u). The
        # small eps keeps zero prices as arcs (a sparse zero is no arc) and adds < K eps a cycle.
        G = csr_matrix((y[live] + eps, (ii[live], jj[live])), shape=(K, K))
        dist, pred = shortest_path(G, method="D", return_predecessors=True)
        price = np.where(live, y + dist[jj, ii], np.inf)
        if not np.isfinite(price).any():  # no cycle within the capacities
            return 0.0, x, A, False
        added = 0
        if done < rounds:
            for a in np.flatnonzero(price < 1 - 1e-7):
                u, v = int(ii[a]), int(jj[a])
                path = [u]
                while path[-1] != v:
                    path.append(int(pred[v, path[-1]]))
                added += cols.add([u, *path[::-1][:-1]])
        if not added:
            mu = float(price.min()) - K * eps
            spent = done == rounds and bool(np.any(price < 1 - 1e-7))
            return (float(cap @ y) / mu if mu > 0 else np.inf), x, A, spent
    raise AssertionError("unreachable: the last round adds no cycle")


def _column_milp(cols: _Columns, A: Any, cap: np.ndarray) -> tuple[np.ndarray | None, bool]:
    """Most cycles among the listed columns within ``cap`` (integer program, HiGHS): uses per
    column, or None, and whether HiGHS proved them the best among these columns."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    usable = _fitting(A, cap)
    if not usable.size:  # no cycle fits: nothing is the best
        return np.zeros(A.shape[1]), True
    res = milp(
        -np.ones(usable.size),
        constraints=LinearConstraint(A[:, usable], -np.inf, cap),
        integrality=np.ones(usable.size),
        bounds=Bounds(0, np.inf),
        options={"node_limit": EXACT_NODE_LIMIT},
    )
    if res.x is None:
        return None, False
    uses = np.zeros(A.shape[1])
    uses[usable] = np.rint(res.x)
    return uses, res.status == 0


def _dive(cols: _Columns) -> np.ndarray:
    """A packing by rounding the fractional one: fix the whole part of every column, or round up
    the largest fractional ones, solve the fractional packing of what is left, again; once that
    is at most :data:`DIVE_RESIDUAL` cycles, finish with the integer program on what is left.
    Returns uses per column (of the columns listed by then)."""
    cap = cols.w.copy()
    uses = np.zeros(0)
    for _ in range(DIVE_MAX_STEPS):
        value, x, A, _ = _fractional_packing(cols, cap)
        uses = np.concatenate([uses, np.zeros(A.shape[1] - uses.size)])
        if value < 1 - 1e-9:
            break
        if value <= DIVE_RESIDUAL:
            rest, _ = _column_milp(cols, A, cap)
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

    Stages, each bounded by a count of work (:data:`EXACT_NODE_LIMIT` nodes an integer program,
    :data:`COLUMN_ROUNDS` rounds of column generation), never by a clock: greedy; the fractional packing by
    column generation, whose value rounded down bounds every packing; a packing by rounding
    the fractional one (:func:`_dive`); the integer program over every cycle listed so far; and,
    while the best packing is short of the bound, the circulation program
    (:func:`_rooted_milp`), which can prove a packing optimal below it.
    """
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
    value, _, _, _ = _fractional_packing(cols, cols.w)
    bound = min(top, _whole_bound(value)) if np.isfinite(value) else top
    best: tuple[list[tuple[int, ...]], list[int]] = (g_cycles, g_counts)
    method = "greedy"

    def keep(cycles: list[tuple[int, ...]], counts: list[int], how: str) -> None:
        nonlocal best, method
        if not is_cycle_packing(omega, cycles, counts):
            raise AssertionError(f"the {how} returned an infeasible packing")
        if sum(counts) > sum(best[1]):
            best, method = (cycles, counts), "exact"

    if found < bound:
        keep(*cols.packing(_dive(cols)), "rounded fractional packing")
    if sum(best[1]) < bound and cols.matrix().shape[1] <= EXACT_MILP_MAX_VARIABLES:
        uses, _ = _column_milp(cols, cols.matrix(), cols.w)
        if uses is not None:
            keep(*cols.packing(uses), "integer program over listed cycles")
    proven = sum(best[1]) >= bound
    if not proven and _rooted_size(omega) <= min(EXACT_MAX_VARIABLES, EXACT_MILP_MAX_VARIABLES):
        tally, proven_here, rooted_bound = _rooted_milp(omega)
        keep(list(tally), list(tally.values()), "circulation program")
        if proven_here:
            proven = True
        else:
            bound = min(bound, _whole_bound(rooted_bound))
    if proven:
        return best[0], best[1], True, None, sum(best[1])
    n = sum(best[1])
    if method == "greedy":
        note = (
            f"exact: no packing better than greedy's {n} cycles found within {EXACT_NODE_LIMIT} nodes "
            f"(at most {bound} cycles possible); fell back to greedy"
        )
    else:
        note = (
            f"exact: not proven within {EXACT_NODE_LIMIT} nodes an integer program: {n} cycles found, "
            f"at most {bound} possible; best packing found kept"
        )
    return best[0], best[1], False, note, bound


def _pack_exact(omega: np.ndarray) -> CyclePacking:
    cycles, counts, optimal, note, bound = _exact(omega)
    method = "greedy" if note is not None and "fell back" in note else "exact"
    return CyclePacking(
        omega, tuple(cycles), tuple(counts), "exact", method, optimal=optimal, note=note, upper_bound=bound
    )
