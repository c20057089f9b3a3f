"""Pairs and cycles: the loads of a shuffle (:func:`rates`) and its point-level delivery plan
(:func:`plan_delivery`), with the strategies by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from itertools import chain
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..matrix import (
    MAX_POINTS,
    check_shuffle_matrix,
    elastic_matrix,
    leftover_matrix,
    pair_minima,
    placements_from_matrix,
)
from ..orders.placement import Placement, owner_dtype
from .exact import _pack_exact
from .greedy import _pack_greedy
from .lp import _pack_lp
from .packing import CyclePacking, _readonly
from .sizes import longest_first

#: Cycle packing strategies by name.
STRATEGIES: dict[str, Callable[[np.ndarray], CyclePacking]] = {
    "greedy": _pack_greedy,
    "lp": _pack_lp,
    "exact": _pack_exact,
}


def pack_cycles(omega: object, *, strategy: str = "greedy", progress: bool = False) -> CyclePacking:
    """Choose cycles in the leftover matrix ``omega`` with the named strategy.

    Parameters
    ----------
    omega : array_like
        Square matrix of non-negative ints, usually :func:`coded_shuffle.matrix.leftover_matrix`.
    strategy : str
        A key of :data:`STRATEGIES`: ``"greedy"`` (shortest cycles first), ``"lp"`` (the fractional
        packing rounded and completed greedily, seconds) or ``"exact"`` (integer programs).
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


def rates(S: object, *, strategy: str = "greedy", subpackets: int = 1, progress: bool = False) -> Rates:
    """Return the uncoded, paired and coded loads of the shuffle matrix ``S``.

    ``S`` may be ``K_t x K_{t+1}`` when the number of workers changes; it is then taken as
    :func:`coded_shuffle.matrix.elastic_matrix` of it (``Rates.S`` is that square matrix).
    ``progress`` is passed on to :func:`pack_cycles`. A storage of ``M > 1`` batches a worker
    has its own loads, :func:`coded_shuffle.storage.storage_rates`;
    :func:`coded_shuffle.loads.rates_with_storage` takes either.

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
    if q > 1 and q * int(omega.sum()) > MAX_POINTS:
        raise ValueError(
            f"Argument 'subpackets' must be at most {MAX_POINTS // int(omega.sum())} for this matrix "
            f"(the leftover pieces count at most 2**53 = {MAX_POINTS}), not {q}."
        )
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
    sizes: object = None,
    progress: bool = False,
) -> DeliveryPlan:
    """Plan the delivery of epoch ``t + 1``'s batches from the caches of epoch ``t``.

    A storage of ``M > 1`` batches a worker is planned by
    :func:`coded_shuffle.storage.plan_storage` (:func:`coded_shuffle.loads.plan_with_storage`
    takes either).

    One counting sort groups the moved points by (holder, receiver); the ``k``-th point of group
    ``(i, j)`` is paired with the ``k``-th point of group ``(j, i)``; the leftovers of each group
    are dealt, in order, to the cycles the strategy chose; what remains is sent uncoded.

    With ``sizes`` (records of different sizes) each group is taken longest first, so a pair
    joins records of about one size: a symbol costs the longer of its records, and pairing the
    ``k``-th longest with the ``k``-th longest sends, on lognormal token documents at ``K = 8``,
    1.01 times the size-weighted genie bound in payload where pairing regardless of size sends
    1.47 times it (``benchmarks/variable_coding.py``). The pairs are listed in that order, the
    order in which both workers' packed caches lay those records out (:mod:`.sizes`). The
    counts, hence the loads in symbols, are those without ``sizes``.

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
    sizes : array_like, optional
        Bytes of each of the ``N`` points (non-negative ints): pair records of similar sizes.
        Ties keep the points' order, so the plan is a function of the placements and the sizes
        (sizes of 64 KiB and more are compared to 0.034 %).
    progress : bool
        Passed on to :func:`pack_cycles`: announce a long packing on standard error.

    Returns
    -------
    DeliveryPlan

    Examples
    --------
    >>> from coded_shuffle.plan import verify_plan
    >>> from coded_shuffle.orders import epoch_placement
    >>> a = epoch_placement(1000, 4, seed=0, epoch=0)
    >>> b = epoch_placement(1000, 4, seed=0, epoch=1)
    >>> plan = plan_delivery(a, b)
    >>> verify_plan(plan)
    >>> plan.n_symbols == plan.rates.coded
    True

    Records of similar sizes go together, longest first (500 B with 490 B, 10 B with 12 B):

    >>> from coded_shuffle.orders import placement_from_owner
    >>> p0 = placement_from_owner([0, 0, 1, 1], 2)
    >>> p1 = placement_from_owner([1, 1, 0, 0], 2)
    >>> sized = plan_delivery(p0, p1, sizes=[10, 500, 490, 12])
    >>> sized.pair_x.tolist(), sized.pair_y.tolist()
    ([1, 0], [2, 3])
    """
    from .._kernels import count_cells, gather_runs, sort_moved

    placement_t, placement_t1 = _check_placements(placement_t, placement_t1)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    q = check_int(subpackets, "subpackets", minimum=1)
    K = max(placement_t.K, placement_t1.K)
    a, b = placement_t.owner, placement_t1.owner
    by_sizes = None if sizes is None else longest_first(sizes, placement_t.N)

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
    if by_sizes is None:
        sort_moved(a, b, K, start, order)
    else:  # the counting sort is stable: group the points taken longest first
        by_size = by_sizes if q == 1 else (by_sizes[:, None] * q + np.arange(q)).ravel()
        sort_moved(a[by_size], b[by_size], K, start, order)
        order = by_size[order].astype(order.dtype, copy=False)

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

    cycle_points, cycle_workers, cycle_ptr, uncoded_points, uncoded_from, uncoded_to = _leftovers(
        order, start, M, omega, r.packing, wdt
    )
    arrays = dict(
        pair_x=pair_x, pair_y=pair_y, pair_i=pair_i, pair_j=pair_j,
        cycle_ptr=cycle_ptr, cycle_points=cycle_points, cycle_workers=cycle_workers,
        uncoded_points=uncoded_points, uncoded_from=uncoded_from, uncoded_to=uncoded_to,
    )  # fmt: skip
    return DeliveryPlan(
        placement_t=placement_t,
        placement_t1=placement_t1,
        rates=r,
        subpackets=q,
        **{name: _readonly(arr) for name, arr in arrays.items()},
    )


def _leftovers(
    order: np.ndarray, start: np.ndarray, M: np.ndarray, omega: np.ndarray, packing: Any, wdt: Any
) -> tuple[np.ndarray, ...]:
    """The leftover phase: each group's leftovers (the units of ``order`` past its ``M`` pairs,
    group ``(i, j)`` starting at ``start[i K + j]``), in order, dealt to the cycles of
    ``packing``; what no cycle carries goes uncoded. Returns the cycle arrays (points, workers,
    pointers) and the uncoded ones (points, from, to)."""
    from .._kernels import deal_cycles, gather_runs

    K = M.shape[0]
    next_left = start[:-1] + M.ravel()
    cycles = packing.cycles
    lengths = np.fromiter(map(len, cycles), dtype=np.int64, count=len(cycles))
    nodes = np.fromiter(chain.from_iterable(cycles), dtype=np.int64, count=int(lengths.sum()))
    cycle_points, cycle_workers, cycle_ptr = deal_cycles(
        order, next_left, K, nodes, lengths, np.asarray(packing.counts, dtype=np.int64),
        np.empty(0, order.dtype), np.empty(0, wdt),
    )  # fmt: skip
    next_left = next_left.reshape(K, K)
    # What no cycle carries goes uncoded.
    rest = start[:-1].reshape(K, K) + M + omega - next_left
    ie, je = np.nonzero(rest)
    uncoded_points = gather_runs(order, next_left[ie, je], rest[ie, je])
    uncoded_from = np.repeat(ie.astype(wdt), rest[ie, je])
    uncoded_to = np.repeat(je.astype(wdt), rest[ie, je])
    return cycle_points, cycle_workers, cycle_ptr, uncoded_points, uncoded_from, uncoded_to


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
