"""Piece-level delivery plans with a storage of ``M`` batches, and their verification.

A plan is a list of transmissions, each the XOR of some pieces (piece id ``r * C + p``, ``C``
pieces a record), built by the strategy of :mod:`.planner` that gave the loads. The checker
:func:`verify_storage_plan` knows nothing of how a plan was built: it draws a random 64-bit value
for every piece and lets every worker solve, over GF(2), the transmissions with its cache
substituted; every piece the worker misses must come out with its value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from math import comb
from typing import NamedTuple

import numpy as np

from .._checks import check_choice
from .._gf2 import solve_gf2
from ..errors import DecodeError, InvalidPlanError
from ..matrix import shuffle_matrix
from ..orders.placement import Placement
from ..plan import STRATEGIES, holder_set, plan_delivery
from ._common import demand_words, distinct_sets, lone_words, members, words3
from .bound import StorageBound, demand_lower_bound, storage_lower_bound
from .placement import PiecePlacement, piece_demand
from .planner import (
    STORAGE_STRATEGIES,
    StorageRates,
    _groups_plan,
    _GroupsPlan,
    _storage_rates,
    demand_counts,
    demand_groups,
)
from .rounds import _round_cost, _rounds, boundary_rank

__all__ = ["StoragePlan", "plan_storage", "verify_storage_plan"]


@dataclass(frozen=True, eq=False)
class StoragePlan:
    """The transmissions of one transition with a storage of ``M`` batches.

    Attributes
    ----------
    storage : PiecePlacement
        The pieces before the transition.
    placement_next : Placement
        The batches after it.
    S : numpy.ndarray
        The shuffle matrix of the two placements.
    strategy, chosen : str
        The strategy asked for, and the one the plan follows.
    offsets, terms : numpy.ndarray
        The transmissions, each the XOR of the pieces ``terms[offsets[s]:offsets[s + 1]]``
        (``int64``; ``offsets`` has one entry more than there are transmissions).
    demand : numpy.ndarray
        :func:`~coded_shuffle.storage.piece_demand` rows ``(piece id, wanter, holders)``.
    rates : StorageRates
        The loads the plan sends (``coded_symbols`` pieces).
    """

    storage: PiecePlacement
    placement_next: Placement
    S: np.ndarray
    strategy: str
    chosen: str
    offsets: np.ndarray
    terms: np.ndarray
    demand: np.ndarray
    rates: StorageRates

    @property
    def n_symbols(self) -> int:
        """Transmissions, in pieces."""
        return int(self.offsets.size - 1)

    def lower_bound(self, *, exact: bool | None = None) -> StorageBound:
        """The genie bound of this transition, in pieces of this placement: that of the shuffle
        matrix with every label (:func:`~coded_shuffle.storage.storage_lower_bound`), that of the
        demand with fewer pieces a record (:func:`~coded_shuffle.storage.demand_lower_bound`)."""
        pp = self.storage
        if pp.every_label:
            return storage_lower_bound(self.S, M=pp.M, exact=exact)
        pieces, ordering, is_exact = demand_lower_bound(self.demand, pp.K, exact=exact)
        return StorageBound(
            S=self.S, M=pp.M, pieces=pieces, value=Fraction(pieces, pp.pieces), ordering=ordering,
            exact=is_exact,
        )  # fmt: skip

    @cached_property
    def transmissions(self) -> tuple[tuple[int, ...], ...]:
        """Each transmission as the increasing piece ids it XORs (Python ints; small plans)."""
        t = self.terms.tolist()
        o = self.offsets.tolist()
        return tuple(tuple(sorted(t[a:b])) for a, b in zip(o, o[1:], strict=False))


def _csr(sent: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Transmissions as ``(offsets, terms)``."""
    counts = np.fromiter((len(x) for x in sent), dtype=np.int64, count=len(sent))
    offsets = np.zeros(len(sent) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    terms = np.fromiter((i for x in sent for i in x), dtype=np.int64, count=int(offsets[-1]))
    return _ro(offsets), _ro(terms)


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _xor(*parts: list[int]) -> tuple[int, ...]:
    out: set[int] = set()
    for p in parts:
        out ^= set(p)
    return tuple(sorted(out))


class _Cells(NamedTuple):
    """The compiled cells of a demand (:func:`._kernels.cells`): ``counts`` (groups x ``size``
    members, flat), each group's words (groups x ``W``), and per row its group, member and rank in
    its cell."""

    counts: np.ndarray
    mask: np.ndarray
    g_of: np.ndarray
    m_of: np.ndarray
    k_of: np.ndarray
    size: int


def _cells(demand: np.ndarray) -> _Cells | None:
    """The compiled cells of a demand, or None where its table of groups would be too large (then
    the array sorts serve)."""
    from ._kernels import MAX_CELLS, binomials, cells

    if not demand.shape[0]:
        return None
    H = demand_words(demand)  # holder sets, rows of W words
    j = np.ascontiguousarray(demand[:, 1])
    top = np.bitwise_or.reduce(H, axis=0).tolist()  # the workers that hold some piece, by word
    K = max([int(j.max()) + 1] + [64 * w + int(x).bit_length() for w, x in enumerate(top) if x])
    size = int(np.bitwise_count(H[0]).sum()) + 1
    if comb(K, size) * size > MAX_CELLS:
        return None
    counts, mask, g_of, m_of, k_of = cells(j, H, size, binomials(K, size), comb(K, size))
    return _Cells(counts, mask, g_of, m_of, k_of, size)


def _cell_counts(cell: _Cells) -> dict[int, dict[int, int]]:
    """:func:`~coded_shuffle.storage.demand_counts` read off the compiled cells."""
    table = cell.counts.reshape(-1, cell.size)
    out: dict[int, dict[int, int]] = {}
    for g in np.flatnonzero(table.any(axis=1)).tolist():
        G = holder_set(cell.mask, g)
        out[G] = {w: n for w, n in zip(members(G), table[g].tolist(), strict=True) if n}
    return out


def _group_symbols(
    demand: np.ndarray, cell: _Cells | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every group symbol: ``(offsets, terms, G, R)``, arrays over the symbols.

    The ``k``-th piece (in demand order) of every member ``i`` of ``G`` that wants more than
    ``k`` pieces held exactly by ``G \\ {i}`` goes into symbol ``(G, k)``, its terms in the
    members' order; ``R`` is the set of its receivers (``G`` and ``R`` rows of ``W`` words, as
    the demand's holder sets). By the compiled counting sort of the
    demand's cells (``cell``, or :func:`_cells` of it) when its table of groups fits, else by
    array sorts (:func:`_group_symbols_sorted`, the same arrays).
    """
    from ._kernels import group_symbols

    cell = _cells(demand) if cell is None else cell
    if cell is None:
        return _group_symbols_sorted(demand)
    pid = np.ascontiguousarray(demand[:, 0])
    return group_symbols(pid, cell.counts, cell.mask, cell.g_of, cell.m_of, cell.k_of, cell.size)  # type: ignore[no-any-return]


def _group_symbols_sorted(demand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every group symbol: ``(offsets, terms, G, R)``, arrays over the symbols.

    The ``k``-th piece (in demand order) of every member ``i`` of ``G`` that wants more than
    ``k`` pieces held exactly by ``G \\ {i}`` goes into symbol ``(G, k)``, its terms in the
    members' order; ``R`` is the set of its receivers.
    """
    pid, j = demand[:, 0], demand[:, 1]
    groups, g = demand_groups(demand)
    W = groups.shape[1]
    wide = 64 * W  # more than any worker
    order = np.argsort(g * wide + j, kind="stable")  # by G, then wanter; demand order within
    cell = (g * wide + j)[order]
    n = order.size
    start = np.ones(n, dtype=bool)
    start[1:] = cell[1:] != cell[:-1]
    firsts = np.flatnonzero(start)
    k = np.arange(n) - firsts[np.cumsum(start) - 1]
    width = int(k.max()) + 1 if n else 1
    o2 = np.argsort((g[order] * width + k) * wide + j[order])  # by G, then k, then wanter: no ties
    rows = order[o2]
    g2, k2 = g[rows], k[o2]
    head = np.ones(n, dtype=bool)
    head[1:] = (g2[1:] != g2[:-1]) | (k2[1:] != k2[:-1])
    offsets = np.append(np.flatnonzero(head), n).astype(np.int64)
    bit = lone_words(j[rows], W)
    R = np.bitwise_or.reduceat(bit, offsets[:-1], axis=0) if n else np.empty((0, W), np.uint64)
    return offsets, pid[rows].astype(np.int64), groups[g2[head]], R


def _groups_transmissions(
    demand: np.ndarray, gp: _GroupsPlan, cell: _Cells | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``groups`` plan on pieces, as ``(offsets, terms)``: the plan in counts ``gp`` replayed.

    The group symbols are made at once (:func:`_group_symbols`); the chains and cuts, over the
    partial symbols only, pick symbols of each type from the end of its list. A transmission is
    one symbol, one piece, or the XOR of two of them (``u_a + u_b`` along a chain).
    """
    s_off, s_terms, s_G, s_R = _group_symbols(demand, cell)
    index = {node: n for n, node in enumerate(gp.nodes)}
    n_sym = s_off.size - 1
    node_of = np.full(n_sym, -1, dtype=np.int64)
    if n_sym and index:
        Gu, gi = distinct_sets(s_G)
        Ru, ri = distinct_sets(s_R)
        keys, inv = np.unique(gi * len(Ru) + ri, return_inverse=True)
        pairs_of = zip((keys // len(Ru)).tolist(), (keys % len(Ru)).tolist(), strict=True)
        types = ((Gu[a], Ru[b]) for a, b in pairs_of)
        ids = np.array([index.get(node, -1) for node in types], dtype=np.int64)
        node_of = ids[inv.reshape(-1)]
    partial = np.flatnonzero(node_of >= 0)
    avail: dict[int, list[int]] = defaultdict(list)  # symbols of each type, not yet used
    for x, nd in zip(partial.tolist(), node_of[partial].tolist(), strict=True):
        avail[nd].append(x)
    used = np.zeros(n_sym, dtype=bool)
    pairs: list[tuple[int, int]] = []  # units: a symbol s >= 0, or a piece p as -(p + 1)

    def take(unit_list: list[int]) -> int:
        u = unit_list.pop()
        if u >= 0:
            used[u] = True
        return u

    for chain, mult in gp.chains:
        for _ in range(mult):
            units = [take(avail[nd]) for nd in chain]
            pairs += list(zip(units, units[1:], strict=False))
    # the second round: cut symbols into singles, chain them with the leftover singles
    child = {key: x for x, key in enumerate(gp.nodes2)}
    by_child: dict[int, list[int]] = defaultdict(list)
    for nd, k in gp.split.items():
        receivers = members(gp.nodes[nd][1])
        for _ in range(k):
            u = take(avail[nd])
            for i, piece in zip(receivers, s_terms[s_off[u] : s_off[u + 1]].tolist(), strict=True):
                by_child[child[(nd, i)]].append(-(piece + 1))
    for x, (nd, who) in enumerate(gp.nodes2):
        if who is None:
            by_child[x] = avail[nd]  # the same list: what a chain takes leaves the type
    for chain, mult in gp.chains2:
        for _ in range(mult):
            units = [take(by_child[x]) for x in chain]
            pairs += list(zip(units, units[1:], strict=False))
    singles = [-u - 1 for x, (_, who) in enumerate(gp.nodes2) if who is not None for u in by_child[x]]
    # assemble: every unused symbol whole, then the XORs of pairs, then the singles
    keep = np.flatnonzero(~used)
    counts = np.diff(s_off)[keep]
    whole_off = np.concatenate([[0], np.cumsum(counts)])
    whole = s_terms[np.repeat(s_off[keep] - whole_off[:-1], counts) + np.arange(int(counts.sum()))]
    more = [[*_unit_terms(a, s_off, s_terms), *_unit_terms(b, s_off, s_terms)] for a, b in pairs]
    more += [[p] for p in singles]
    m_off, m_terms = _csr(more)
    offsets = np.concatenate([whole_off, whole_off[-1] + m_off[1:]]).astype(np.int64)
    return _ro(offsets), _ro(np.concatenate([whole, m_terms]).astype(np.int64))


def _unit_terms(u: int, s_off: np.ndarray, s_terms: np.ndarray) -> list[int]:
    return s_terms[s_off[u] : s_off[u + 1]].tolist() if u >= 0 else [-u - 1]


def _rounds_transmissions(
    pp: PiecePlacement, nxt: Placement, S: np.ndarray, t: int, sizes: np.ndarray | None = None
) -> list[tuple[int, ...]]:
    K, C = pp.K, pp.pieces
    old = np.asarray(pp.placement.owner, dtype=np.int64)
    new = np.asarray(nxt.owner, dtype=np.int64)
    records: dict[tuple[int, int], list[int]] = defaultdict(list)
    moved = np.flatnonzero(old != new)
    if sizes is not None:  # each round takes the longest record left of every pair: similar sizes
        moved = moved[np.argsort(sizes[moved], kind="stable")]
    for r in moved.tolist():
        records[(int(old[r]), int(new[r]))].append(r)
    memo: dict = {}
    out: list[tuple[int, ...]] = []
    for edges, mult in _rounds(S):
        _, how = _round_cost(edges, K, t, memo)
        for _ in range(mult):
            u: dict[int, list[int]] = defaultdict(list)
            for o, j in edges:
                r = records[(o, j)].pop()
                for p in range(C):
                    H = holder_set(pp.holders[r], p)
                    if not H >> j & 1:
                        u[H | (1 << j)].append(r * C + p)
            L = sorted(u)
            if how == "groups":
                out += [tuple(sorted(u[G])) for G in L]
                continue
            face: dict[int, set[int]] = defaultdict(set)  # Y_P: the XOR of u_G over the G holding P
            for G in L:
                for i in members(G):
                    face[G & ~(1 << i)] ^= set(u[G])
            if how == "rank":
                faces = boundary_rank(L, K, t, basis=True)[1]
            else:  # the faces avoiding worker 0, in lexicographic order; the others' sums are empty
                faces = sorted((P for P in face if not P & 1), key=members)
            out += [tuple(sorted(face[P])) for P in faces if face.get(P)]
    return out


def plan_storage(
    storage: PiecePlacement,
    placement_next: Placement,
    *,
    strategy: str = "best",
    packing: str = "greedy",
    sizes: object = None,
) -> StoragePlan:
    """Plan the delivery of ``placement_next``'s batches from the pieces of ``storage``.

    With a piece for every label the plan follows the strategy
    :func:`~coded_shuffle.storage.storage_rates` chose for the shuffle matrix of the two
    placements; with fewer pieces a record, the ``groups`` strategy on the counts of the demand
    (:func:`~coded_shuffle.storage.demand_counts`) or ``batches``, the smaller under ``best``. It
    sends exactly the ``coded_symbols`` pieces of its loads, :attr:`StoragePlan.rates`.

    ``sizes``: the bytes of every piece (by id), for pieces of many sizes, whose symbol is as
    long as its longest term. The plan then puts pieces of about one size together, as the plan
    of one batch pairs records (``plan_delivery(..., sizes=...)``), with the same number of
    symbols: the pieces each worker wants of each group are taken longest first, so that the
    ``k``-th symbol of a group XORs the ``k``-th longest piece of each member; a round of the
    ``rounds`` strategy takes the longest record left of each pair of workers; ``batches`` and
    one batch pair records by size.

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> from coded_shuffle.storage import piece_placement
    >>> pp = piece_placement(placement_from_owner([0, 1, 2, 3], 4), M=2)
    >>> plan = plan_storage(pp, placement_from_owner([3, 0, 1, 2], 4))
    >>> plan.n_symbols, plan.chosen
    (3, 'rounds')
    >>> verify_storage_plan(plan)

    Whole records (one piece each), each on two workers: four of the six moved records are
    already held by their new owner, the other two go in one XOR.

    >>> whole = piece_placement(placement_from_owner([0, 0, 1, 1, 2, 2], 3), M=2, pieces=1)
    >>> plan = plan_storage(whole, placement_from_owner([1, 2, 2, 0, 0, 1], 3))
    >>> plan.n_symbols, plan.rates.coded, plan.lower_bound().value
    (1, Fraction(1, 1), Fraction(1, 1))
    >>> verify_storage_plan(plan)
    """
    if not isinstance(storage, PiecePlacement):
        raise TypeError(f"Argument 'storage' must be a PiecePlacement, not {type(storage).__name__}.")
    strategy = check_choice(strategy, "strategy", STORAGE_STRATEGIES)
    packing = check_choice(packing, "packing", STRATEGIES)
    demand = piece_demand(storage, placement_next)
    S = shuffle_matrix(storage.placement, placement_next)
    t = storage.t
    lens, rec = _sizes(sizes, storage)
    grouped = demand if lens is None else demand[np.argsort(-lens[demand[:, 0]], kind="stable")]
    gp: _GroupsPlan | None
    if not storage.every_label:
        r, offsets, terms = _demand_plan(
            storage, placement_next, grouped, np.asarray(S), strategy, packing, rec
        )
    else:
        r, gp = _storage_rates(S, storage.M, strategy, packing)
        if t == 0:
            a, b, _ = plan_delivery(
                storage.placement, placement_next, strategy=packing, sizes=rec
            ).transmissions()
            pairs = zip(a, b, strict=True)
            offsets, terms = _csr([(int(x),) if y < 0 else (int(x), int(y)) for x, y in pairs])
        elif r.chosen == "groups":
            assert gp is not None  # made by the strategy that chose it
            offsets, terms = _groups_transmissions(grouped, gp)
        else:
            offsets, terms = _csr(_rounds_transmissions(storage, placement_next, np.asarray(S), t, rec))
    if offsets.size - 1 != r.coded_symbols:
        sent = offsets.size - 1
        raise InvalidPlanError(f"the plan sends {sent} pieces, not the {r.coded_symbols} of its loads")
    return StoragePlan(
        storage=storage,
        placement_next=placement_next,
        S=r.S,
        strategy=strategy,
        chosen=r.chosen,
        offsets=offsets,
        terms=terms,
        demand=demand,
        rates=r,
    )


def _sizes(sizes: object, pp: PiecePlacement) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(bytes of each piece, bytes of each record)`` of ``sizes``, checked; None for one size."""
    if sizes is None:
        return None, None
    from .._checks import check_int_array

    lens = check_int_array(sizes, "sizes", ndim=1).astype(np.int64)
    if lens.shape[0] != pp.N * pp.pieces or (lens.size and int(lens.min()) < 0):
        raise ValueError(f"Argument 'sizes' must hold a size >= 0 for each of the {pp.N * pp.pieces} pieces.")
    return lens, lens.reshape(pp.N, pp.pieces).sum(axis=1)


def _demand_plan(
    pp: PiecePlacement, nxt: Placement, demand: np.ndarray, S: np.ndarray, strategy: str, packing: str,
    rec: np.ndarray | None = None,
) -> tuple[StorageRates, np.ndarray, np.ndarray]:  # fmt: skip
    """The loads and transmissions of a placement with fewer pieces than labels: ``groups`` on the
    counts of the demand, ``batches``, or the smaller (the rounds need a piece for every label)."""
    if strategy == "rounds":
        raise ValueError(
            f"Argument 'strategy' must be 'groups', 'batches' or 'best' with {pp.pieces} pieces a "
            f"record: the rounds need one for each of the C(K - 1, t) labels."
        )
    cell = _cells(demand)
    gp = _groups_plan(demand_counts(demand) if cell is None else _cell_counts(cell), pp.t)
    plans = {}
    if strategy in ("groups", "best"):
        plans["groups"] = (gp.sent - gp.saved, lambda: _groups_transmissions(demand, gp, cell))
    if strategy in ("batches", "best"):
        off, terms = _batch_transmissions(pp, nxt, packing, rec)
        plans["batches"] = (off.size - 1, lambda: (off, terms))
    chosen = min(plans, key=lambda name: plans[name][0])  # groups first on a tie
    sent, make = plans[chosen]
    P = pp.pieces
    r = StorageRates(
        S=S, M=pp.M, strategy=strategy, chosen=chosen, pieces=P, uncoded=Fraction(int(demand.shape[0]), P),
        grouped=Fraction(gp.sent, P), coded=Fraction(sent, P), coded_symbols=sent,
    )  # fmt: skip
    offsets, terms = make()
    return r, offsets, terms


def _batch_transmissions(
    pp: PiecePlacement, nxt: Placement, packing: str, rec: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``batches`` strategy: each symbol of today's plan, piece by piece.

    Symbol ``a + b`` of whole records becomes ``a_p + b_p`` for every piece slot ``p``; in an
    order-2 or a lone symbol a piece its new owner holds is left out (the other term's wanter
    holds the whole record of the first: it owned it), and a symbol left empty is not sent. The
    symbols of a cycle keep every term: a receiver peels along the chain through pieces it does
    not want.
    """
    a, b, phase = plan_delivery(pp.placement, nxt, strategy=packing, sizes=rec).transmissions()
    P = pp.pieces
    new = np.asarray(nxt.owner, dtype=np.int64)
    H = words3(pp.holders)
    cycle = (phase == 1)[:, None]
    b0 = np.maximum(b, 0)

    def needed(x: np.ndarray) -> np.ndarray:  # (symbol, slot): the piece is sent
        j = new[x]
        word = H[x, :, j // 64] if x.size else np.zeros((0, P), dtype=np.uint64)  # new owner's word
        return ((word >> (j % 64).astype(np.uint64)[:, None]) & np.uint64(1) == 0) | cycle

    ka, kb = needed(a), needed(b0) & (b >= 0)[:, None]
    sent = (ka | kb).reshape(-1)
    ka, kb = ka.reshape(-1)[sent], kb.reshape(-1)[sent]
    offsets = np.zeros(ka.size + 1, dtype=np.int64)
    np.cumsum(ka.astype(np.int64) + kb, out=offsets[1:])
    rows = np.flatnonzero(sent)  # symbol * P + slot
    sym, slot = rows // P, rows % P
    terms = np.empty(int(offsets[-1]), dtype=np.int64)
    terms[offsets[:-1][ka]] = (a[sym] * P + slot)[ka]
    terms[(offsets[:-1] + ka)[kb]] = (b0[sym] * P + slot)[kb]
    return _ro(offsets), _ro(terms)


def verify_storage_plan(plan: StoragePlan, *, seed: int = 0) -> None:
    """Raise unless every worker recovers every piece it misses, with its value.

    Each worker solves, by GF(2) elimination on each group of transmissions that share pieces,
    the transmissions with its cache substituted (a decoding simulation on random 64-bit values).
    :class:`~coded_shuffle.errors.DecodeError` names the first worker and piece that fail.
    """
    pp = plan.storage
    n_ids = pp.N * pp.pieces
    value = np.random.default_rng(seed).integers(0, 2**63, size=max(n_ids, 1), dtype=np.int64).tolist()
    sent = [(ids, _xor_values(ids, value)) for ids in plan.transmissions]
    if any(not ids for ids, _ in sent):
        raise InvalidPlanError("a transmission is empty")
    parent = list(range(n_ids))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ids, _ in sent:
        for x in ids[1:]:
            a, b = find(ids[0]), find(x)
            if a != b:
                parent[a] = b
    blocks: dict[int, list[int]] = defaultdict(list)
    for s, (ids, _) in enumerate(sent):
        blocks[find(ids[0])].append(s)
    needs: dict[int, list[int]] = defaultdict(list)
    for pid, j in plan.demand[:, :2].tolist():
        needs[j].append(pid)
    H = words3(pp.holders)
    C = pp.pieces
    for w, wanted in needs.items():
        held = ((H[..., w // 64] >> np.uint64(w % 64)) & np.uint64(1)).reshape(-1).astype(bool).tolist()
        per_block: dict[int, list[int]] = defaultdict(list)
        for pid in wanted:
            per_block[find(pid)].append(pid)
        for root, pids in per_block.items():
            got = _solve(blocks.get(root, []), sent, held, value)
            for pid in pids:
                if got.get(pid) != value[pid]:
                    raise DecodeError(f"worker {w} cannot decode piece {pid} (record {pid // C})")


def _xor_values(ids: tuple[int, ...], value: list[int]) -> int:
    v = 0
    for x in ids:
        v ^= value[x]
    return v


def _solve(rows: list[int], sent: list, held: list[bool], value: list[int]) -> dict[int, int]:
    """A worker's values of the unknown pieces determined by the transmissions ``rows`` (``held``:
    whether it holds each piece)."""
    local: dict[int, int] = {}
    eqs = []
    for s in rows:
        ids, v = sent[s]
        m = 0
        for x in ids:
            if held[x]:
                v ^= value[x]  # the worker holds it
            else:
                m |= 1 << local.setdefault(x, len(local))
        if m:
            eqs.append((m, v))
    solved = {}
    for u, c in solve_gf2([m for m, _ in eqs]).items():
        v = 0
        for i in range(c.bit_length()):
            if c >> i & 1:
                v ^= eqs[i][1]
        solved[u] = v
    back = {n: x for x, n in local.items()}
    return {back[n]: v for n, v in solved.items()}
