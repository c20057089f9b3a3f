"""The ``lp`` cycle packing: the fractional packing rounded, then completed greedily.

Between ``greedy`` (shortest cycles first, no program) and ``exact`` (integer programs, up to a
minute): one linear program, the fractional cycle packing over every 2- and 3-cycle and the
cycles that column generation adds (:func:`coded_shuffle.plan.exact._fractional_packing`) in
at most :data:`LP_ROUNDS` rounds: a count of work, not seconds, so that the same input gives the
same packing however loaded the machine is. Its solution is rounded (the whole part of every column,
then the columns of the largest fractional parts while they fit), and what the rounded cycles
leave is packed by ``greedy``, so that no cycle is left in the leftovers. The better of that and
greedy's own packing is kept, so ``lp`` is never worse than ``greedy``. The program's value,
bounded from its dual prices, rounded down, is an upper bound on every packing
(:attr:`~coded_shuffle.plan.CyclePacking.upper_bound`); a packing that meets it is proven
optimal.

On uniformly random reshuffles (``N = 1000 K``, ``benchmarks/packing_scale.py``) it comes
within 0.1 % of the ``exact`` strategy's coded load at ``K = 64`` in about 2 s; past
:data:`LP_MAX_COLUMNS` starting cycles the program is not built and greedy's packing is kept,
with a note.
"""

from __future__ import annotations

import numpy as np

from .exact import _Columns, _fractional_packing, _packing_upper_bound, _triangle_count, _whole_bound
from .greedy import _greedy
from .packing import CyclePacking, is_cycle_packing

#: Rounds of column generation of the ``lp`` strategy's linear program (each solves the program
#: and adds the cycles its dual prices price below one). Random reshuffles at ``K <= 64`` settle
#: in at most a few; past the limit the rounding starts from the last solution, with a note.
LP_ROUNDS = 20
#: Most starting cycles (2- and 3-cycles) of the ``lp`` program; past it, greedy's packing is
#: kept with a note. ``K = 64`` starts from about 10 000. A count of rounds does not bound one
#: large solve (about 9 s of CPU at ``K = 96``, 80 s at ``K = 128``), so the program stops here.
LP_MAX_COLUMNS = 40_000


def _rounded(cols: _Columns, x: np.ndarray, A: object) -> np.ndarray:
    """Uses per column: the whole part of ``x``, then the largest fractional parts while they fit."""
    uses = np.floor(x + 1e-7)
    cap = cols.w - np.asarray(A @ uses).ravel()  # type: ignore[operator]
    frac = x - uses
    for k in np.argsort(-frac):
        if frac[k] <= 1e-7:
            break
        arcs = cols.arcs(int(k))
        if np.all(cap[arcs] >= 1):
            cap[arcs] -= 1
            uses[k] += 1
    return uses


def _completed(omega: np.ndarray, cycles: list[tuple[int, ...]], counts: list[int]) -> tuple[list, list]:
    """``cycles`` with greedy's packing of what they leave of ``omega`` added."""
    rest = omega.copy()
    for cyc, c in zip(cycles, counts, strict=True):
        rest[list(cyc), list(cyc[1:] + cyc[:1])] -= c
    more, more_counts = _greedy(rest)
    return cycles + more, counts + more_counts


def _lp(omega: np.ndarray) -> tuple[list[tuple[int, ...]], list[int], bool, str | None, int]:
    """Cycles, counts, whether proven optimal, a note, and the most cycles any packing can have."""
    g_cycles, g_counts = _greedy(omega)
    top = _packing_upper_bound(omega)
    if sum(g_counts) == top:
        return g_cycles, g_counts, True, None, top
    support = omega > 0
    n_short = _triangle_count(support) + int(np.count_nonzero(np.triu(support & support.T, 1)))
    if n_short > LP_MAX_COLUMNS:
        note = f"lp: the program would start from more than {LP_MAX_COLUMNS} cycles ({n_short}); kept greedy"
        return g_cycles, g_counts, False, note, top
    cols = _Columns(omega)
    cols.short_cycles(support)
    value, x, A, spent = _fractional_packing(cols, cols.w, rounds=LP_ROUNDS)
    bound = min(top, _whole_bound(value)) if np.isfinite(value) else top
    cycles, counts = _completed(omega, *cols.packing(_rounded(cols, x, A)))
    if not is_cycle_packing(omega, cycles, counts):
        raise AssertionError("the rounded fractional packing is infeasible")
    if sum(counts) <= sum(g_counts):
        cycles, counts = g_cycles, g_counts
    n = sum(counts)
    if n >= bound:
        return cycles, counts, True, None, n
    note = f"lp: {n} cycles, at most {bound} possible (the fractional packing)"
    if spent:
        note += f"; column generation stopped after its {LP_ROUNDS} rounds"
    return cycles, counts, False, note, bound


def _pack_lp(omega: np.ndarray) -> CyclePacking:
    cycles, counts, optimal, note, bound = _lp(omega)
    return CyclePacking(
        omega, tuple(cycles), tuple(counts), "lp", "lp", optimal=optimal, note=note, upper_bound=bound
    )
