"""The exchange's rounds: the units each worker sends each other cut into rounds of matchings, in
which every worker sends once and receives once (:func:`exchange_rounds`, Birkhoff and von
Neumann's decomposition of the padded demand), and their checker (:func:`is_round_schedule`).
``proofs/claim_12_exchange_rounds.py`` checks that the rounds carry the demand in the busiest
port's time.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

__all__ = ["ROUND_MERGE_FRACTION", "exchange_rounds", "is_round_schedule"]


#: A round's latency in :func:`exchange_rounds`, as a fraction of the busiest line: rounds that
#: carry less than it (or than twice, four times ... as much, whichever ends soonest, each round
#: counted with this latency) are folded into the others (each pair's units added to its transfer
#: in a larger round, where that grows the round by at most the same fraction; the rest regrouped
#: into as few matchings as a greedy colouring finds): each round costs a latency of its own,
#: about 1 % of the busiest port's time on namespaced hosts at 300 Mbit/s (5 to 12 ms a round,
#: docs/benchmarks.md), and a decomposition ends in many small rounds (9 at ``K = 4``, 24 at
#: ``K = 8`` on random reshuffles).
ROUND_MERGE_FRACTION = 0.01


def _check_demand(demand: object) -> np.ndarray:
    """``demand`` as a square ``int64`` matrix of non-negative entries and a zero diagonal."""
    if isinstance(demand, (str, bytes)) or demand is None:
        what = type(demand).__name__
        raise TypeError(f"Argument 'demand' must be a square matrix of integers, not {what}.")
    D = np.asarray(demand)
    if D.ndim != 2 or D.shape[0] != D.shape[1]:
        raise ValueError(f"Argument 'demand' must be a square matrix, not of shape {D.shape}.")
    if D.size and not (np.issubdtype(D.dtype, np.integer) or D.dtype == bool):
        raise TypeError(f"Argument 'demand' must be a square matrix of integers, not of {D.dtype}.")
    D = D.astype(np.int64)
    if D.size and int(D.min()) < 0:
        raise ValueError(f"Argument 'demand' must have no negative entry, not {int(D.min())}.")
    if np.any(np.diagonal(D)):
        raise ValueError("Argument 'demand' must have a zero diagonal: a worker sends itself nothing.")
    return D


def _padded(D: np.ndarray) -> np.ndarray:
    """``D`` plus non-negative padding that brings every row and column sum to the largest line
    sum ``L`` (north-west corner rule on the deficits: deterministic)."""
    A = D.copy()
    L = int(max(D.sum(axis=0).max(initial=0), D.sum(axis=1).max(initial=0)))
    rows, cols = (L - A.sum(axis=1)).tolist(), (L - A.sum(axis=0)).tolist()
    i = j = 0
    K = D.shape[0]
    while i < K and j < K:
        if rows[i] == 0:
            i += 1
        elif cols[j] == 0:
            j += 1
        else:
            c = min(rows[i], cols[j])
            A[i, j] += c
            rows[i] -= c
            cols[j] -= c
    return A


def _bottleneck_matching(A: np.ndarray) -> np.ndarray:
    """A perfect matching on the support of ``A`` (a non-negative matrix of equal positive line
    sums) whose smallest entry is the largest possible: ``match[i]`` is row ``i``'s column."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import maximum_bipartite_matching

    values = np.unique(A[A > 0])
    lo, hi, best = 0, values.size - 1, None
    while lo <= hi:  # the largest threshold whose support still has a perfect matching
        mid = (lo + hi) // 2
        m = maximum_bipartite_matching(csr_matrix(A >= values[mid]), perm_type="column")
        if np.all(m >= 0):
            best, lo = m, mid + 1
        else:
            hi = mid - 1
    if best is None:  # pragma: no cover - Birkhoff: equal line sums always admit one
        raise AssertionError("no perfect matching on the support of a matrix of equal line sums")
    return np.asarray(best, dtype=np.int64)


def exchange_rounds(
    demand: object, *, merge_below: float = ROUND_MERGE_FRACTION
) -> list[dict[int, tuple[int, int]]]:
    """The exchange's demand cut into rounds in which every worker sends once and receives once.

    ``demand[i][j]`` units (records, or pieces) go from worker ``i`` to worker ``j``. The matrix
    is padded to equal line sums ``L`` (its largest row or column sum), and the padded matrix,
    ``L`` times a doubly stochastic one, is decomposed as Birkhoff and von Neumann decompose it:
    a perfect matching on its support (the one whose smallest entry is largest), ``c`` times that
    permutation taken away, until nothing is left, every ``c`` an integer. Each pair's real units
    fill its rounds in order and the padding the rest, so a round sends at most ``c`` real units on
    each of its pairs, and the rounds' ``c`` add up to ``L``: with every worker's port of the same
    rate, rounds that each last their largest transfer end at the busiest port's units over
    its rate (``proofs/claim_12_exchange_rounds.py``). Each round costs a latency too,
    ``merge_below * L`` (as a share of the busiest port's units), and the rounds whose largest
    transfer is less than ``f * L`` are folded into the others, for ``f`` of ``merge_below``, twice
    as much, four times ... up to half: their transfers, summed by pair, the largest first, each
    added to the pair's transfer in the larger round it grows least, where that grows the round
    by at most ``f * L``; the rest regrouped into matchings by a greedy colouring, after them.
    Of these (and the rounds unfolded) the rounds kept are those that end soonest, each lasting
    its largest transfer and ``merge_below * L``. Fewer rounds, each a latency, for a little more
    than ``L`` in the fluid model: with the default, on random reshuffles of 25000 units (five
    seeds), 3 or 4 rounds instead of 9 at ``K = 4`` (+0.4 to +1.9 %), 7 (the least: ``K - 1``)
    instead of 24 to 26 at ``K = 8`` (+1.9 to +4.0 %), 15 instead of 40 to 42 at ``K = 16``
    (+8.5 to +12.3 %). Nothing is split but into whole units.

    Parameters
    ----------
    demand : array_like of int, shape (K, K)
        Units from each worker to each other; a zero diagonal.
    merge_below : float
        A round's latency as a fraction of ``L``, the least below which a round is folded into
        the others (0: none folded).

    Returns
    -------
    list of dict
        One entry a round, in order: ``{sender: (receiver, units)}``, every ``units`` positive,
        no receiver twice in a round. Computed from ``demand`` alone: the same on every worker.

    See Also
    --------
    is_round_schedule : the checker.

    Examples
    --------
    Every worker sends each other three units, and worker 0 sends worker 1 two more: worker
    0's upload and worker 1's download are the busiest (``L = 8`` units), and rounds whose
    largest transfers add up to 8 carry everything. The decomposition's third round (worker 0's
    two more) is folded into the second, where worker 0 sends worker 1 anyway: one round less.

    >>> D = [[0, 5, 3], [3, 0, 3], [3, 3, 0]]
    >>> exchange_rounds(D, merge_below=0)
    [{0: (2, 3), 1: (0, 3), 2: (1, 3)}, {0: (1, 3), 1: (2, 3), 2: (0, 3)}, {0: (1, 2)}]
    >>> rounds = exchange_rounds(D)
    >>> rounds
    [{0: (2, 3), 1: (0, 3), 2: (1, 3)}, {0: (1, 5), 1: (2, 3), 2: (0, 3)}]
    >>> sum(max(u for _, u in r.values()) for r in rounds), is_round_schedule(D, rounds)
    (8, True)
    """
    D = _check_demand(demand)
    merge = _check_fraction(merge_below)
    K = D.shape[0]
    if not D.any():
        return []
    A = _padded(D)
    L = int(A[0].sum())
    slices: list[tuple[int, np.ndarray]] = []  # (c, match) of each round of the padded matrix
    while A.any():
        match = _bottleneck_matching(A)
        c = int(A[np.arange(K), match].min())
        A[np.arange(K), match] -= c
        slices.append((c, match))
    left = D.copy()  # each pair's real units, into its rounds in order
    rounds: list[dict[int, tuple[int, int]]] = []
    for c, match in slices:
        r = {}
        for i, j in enumerate(match.tolist()):
            n = min(int(left[i, j]), c)
            if n:
                r[i] = (j, n)
                left[i, j] -= n
        if r:
            rounds.append(r)
    best, least = rounds, _lasts(rounds, merge * L)
    below = merge
    while 0 < below <= _FOLD_MOST:  # folded under merge * L, then under twice as much, ...
        small = [r for r in rounds if max(n for _, n in r.values()) < below * L]
        if small and len(small) < len(rounds):
            kept = [dict(r) for r in rounds if max(n for _, n in r.values()) >= below * L]
            folded = _folded(kept, small, below * L)
            took = _lasts(folded, merge * L)  # every round a latency of merge * L
            if took < least:  # kept only if it saves time
                best, least = folded, took
        below *= 2
    return best


#: The largest share of the busiest line below which :func:`exchange_rounds` tries folding rounds.
_FOLD_MOST = 0.5


def _lasts(rounds: list[dict[int, tuple[int, int]]], latency: float) -> float:
    """The time of ``rounds`` in units: each its largest transfer and ``latency``."""
    return sum(max(n for _, n in r.values()) + latency for r in rounds)


def _folded(
    kept: list[dict[int, tuple[int, int]]], small: list[dict[int, tuple[int, int]]], cost: float
) -> list[dict[int, tuple[int, int]]]:
    """The rounds ``kept`` with the transfers of the rounds ``small`` folded in: each pair's units of
    ``small`` (the largest first) added to its transfer in the kept round whose largest transfer
    that grows least (the earliest on a tie), where a kept round matches the pair; the pairs no
    kept round matches regrouped into matchings by a greedy colouring, the largest first, after
    them. Every round stays a matching (a pair's units join its own transfer, or a round in which
    neither end is used yet), and the pairs' sums are unchanged."""
    total: dict[tuple[int, int], int] = {}
    for r in small:
        for i, (j, n) in r.items():
            total[i, j] = total.get((i, j), 0) + n
    top = [max(n for _, n in r.values()) for r in kept]
    base = list(top)  # a kept round grows by at most ``cost`` in all
    homes: dict[tuple[int, int], list[int]] = {}
    for k, r in enumerate(kept):
        for i, (j, _) in r.items():
            homes.setdefault((i, j), []).append(k)
    merged: list[tuple[dict[int, tuple[int, int]], set[int]]] = []
    for (i, j), n in sorted(total.items(), key=lambda kv: (-kv[1], kv[0])):
        k = min(homes.get((i, j), []), key=lambda k: (max(0, kept[k][i][1] + n - top[k]), k), default=-1)
        if k >= 0 and kept[k][i][1] + n <= base[k] + cost:
            kept[k][i] = (j, kept[k][i][1] + n)
            top[k] = max(top[k], kept[k][i][1])
            continue
        for r, into in merged:  # the first merged round where both are free
            if i not in r and j not in into:
                r[i] = (j, n)
                into.add(j)
                break
        else:
            merged.append(({i: (j, n)}, {j}))
    return kept + [dict(sorted(r.items())) for r, _ in merged]


def _check_fraction(value: object) -> float:
    """``merge_below`` checked: a number from 0 to 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise TypeError(f"Argument 'merge_below' must be a number, not {type(value).__name__}.")
    if not 0 <= value <= 1:
        raise ValueError(f"Argument 'merge_below' must be from 0 to 1, not {value!r}.")
    return float(value)


def is_round_schedule(demand: object, rounds: object) -> bool:
    """Whether ``rounds`` carry exactly ``demand``, every worker sending at most once and
    receiving at most once a round (the form :func:`exchange_rounds` returns).

    Examples
    --------
    >>> is_round_schedule([[0, 2], [1, 0]], [{0: (1, 1), 1: (0, 1)}, {0: (1, 1)}])
    True
    >>> is_round_schedule([[0, 2], [1, 0]], [{0: (1, 2), 1: (0, 1)}, {0: (1, 1)}])
    False
    """
    D = _check_demand(demand)
    K = D.shape[0]
    got = np.zeros_like(D)
    if not isinstance(rounds, (list, tuple)):
        return False
    for r in rounds:
        if not isinstance(r, dict):
            return False
        into = set()
        for i, t in r.items():
            if not isinstance(t, tuple) or len(t) != 2:
                return False
            j, n = t
            ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (i, j, n))
            if not ok or not (0 <= i < K and 0 <= j < K and i != j and n > 0) or j in into:
                return False
            into.add(j)
            got[i, j] += n
    return bool(np.array_equal(got, D))
