"""Piece-level delivery plans with a storage of ``M`` batches, and their verification.

A plan is a list of transmissions, each the XOR of some pieces (piece id ``r * C + p``, ``C``
pieces a record), built by the strategy of :mod:`.planner` that gave the loads. The checker
:func:`verify_storage_plan` knows nothing of how a plan was built: it draws a random 64-bit value
for every piece and lets every worker solve, over GF(2), the transmissions with its cache
substituted; every piece the worker misses must come out with its value.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from .._checks import check_choice
from .._gf2 import solve_gf2
from ..errors import DecodeError, InvalidPlanError
from ..matrix import shuffle_matrix
from ..orders.placement import Placement
from ..plan import STRATEGIES, plan_delivery
from ._common import members, subsets
from .placement import PiecePlacement, piece_demand
from .planner import (
    STORAGE_STRATEGIES,
    _groups_plan,
    _round_cost,
    _rounds,
    _symbol_types,
    boundary_rank,
    storage_rates,
)

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
    strategy, chosen : str
        The strategy asked for, and the one the plan follows.
    transmissions : tuple of tuple of int
        Each transmission, the piece ids it XORs.
    demand : numpy.ndarray
        :func:`~coded_shuffle.storage.piece_demand` rows ``(piece id, wanter, holders)``.
    """

    storage: PiecePlacement
    placement_next: Placement
    strategy: str
    chosen: str
    transmissions: tuple[tuple[int, ...], ...]
    demand: np.ndarray

    @property
    def n_symbols(self) -> int:
        """Transmissions, in pieces."""
        return len(self.transmissions)


def _xor(*parts: list[int]) -> tuple[int, ...]:
    out: set[int] = set()
    for p in parts:
        out ^= set(p)
    return tuple(sorted(out))


def _groups_transmissions(demand: np.ndarray, off: np.ndarray, t: int) -> list[tuple[int, ...]]:
    want: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
    for pid, j, H in demand.tolist():
        want[H | (1 << j)][j].append(pid)
    gp = _groups_plan(off, t)
    index = {node: n for n, node in enumerate(gp.nodes)}
    by_node: dict[int, list[list[int]]] = defaultdict(list)
    out: list[tuple[int, ...]] = []
    for G, per in want.items():
        counts = {i: len(v) for i, v in per.items()}
        for R, mult in _symbol_types(counts):
            top = min(counts[i] for i in members(R))  # symbols top - mult .. top - 1 have receivers R
            for k in range(top - mult, top):
                sym = [per[i][k] for i in members(R)]
                if (G, R) in index:
                    by_node[index[(G, R)]].append(sym)
                else:
                    out.append(tuple(sorted(sym)))
    for chain, mult in gp.chains:
        for _ in range(mult):
            syms = [by_node[n].pop() for n in chain]
            out += [_xor(a, b) for a, b in zip(syms, syms[1:], strict=False)]
    # the second round: cut symbols into singles, chain them with the leftover singles
    by_child: dict[int, list[list[int]]] = defaultdict(list)
    for n, k in gp.split.items():
        receivers = members(gp.nodes[n][1])
        for _ in range(k):
            sym = by_node[n].pop()
            for i, piece in zip(receivers, sym, strict=True):
                by_child[gp.nodes2.index((n, i))].append([piece])
    for x, (n, who) in enumerate(gp.nodes2):
        if who is None:
            by_child[x] = by_node[n]  # the same list: what a chain takes leaves the type
    for chain, mult in gp.chains2:
        for _ in range(mult):
            syms = [by_child[x].pop() for x in chain]
            out += [_xor(a, b) for a, b in zip(syms, syms[1:], strict=False)]
    for x, (_, who) in enumerate(gp.nodes2):
        if who is not None:
            out += [tuple(s) for s in by_child[x]]
    for syms in by_node.values():
        out += [tuple(sorted(s)) for s in syms]
    return out


def _rounds_transmissions(pp: PiecePlacement, nxt: Placement, S: np.ndarray, t: int) -> list[tuple[int, ...]]:
    K, C = pp.K, pp.pieces
    old = np.asarray(pp.placement.owner, dtype=np.int64)
    new = np.asarray(nxt.owner, dtype=np.int64)
    records: dict[tuple[int, int], list[int]] = defaultdict(list)
    for r in np.flatnonzero(old != new).tolist():
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
                    H = int(pp.holders[r, p])
                    if not H >> j & 1:
                        u[H | (1 << j)].append(r * C + p)
            L = sorted(u)
            if how == "groups":
                out += [tuple(sorted(u[G])) for G in L]
                continue
            if how == "rank":
                faces = boundary_rank(L, K, t, basis=True)[1]
            else:
                faces = list(subsets(list(range(1, K)), t + 1))
            for P in faces:
                sym = _xor(*[u[G] for G in L if G & P == P])
                if sym:
                    out.append(sym)
    return out


def plan_storage(
    storage: PiecePlacement, placement_next: Placement, *, strategy: str = "best", packing: str = "greedy"
) -> StoragePlan:
    """Plan the delivery of ``placement_next``'s batches from the pieces of ``storage``.

    The plan follows the strategy :func:`~coded_shuffle.storage.storage_rates` chose for the
    shuffle matrix of the two placements, and sends exactly its ``coded_symbols`` pieces.

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> from coded_shuffle.storage import piece_placement
    >>> pp = piece_placement(placement_from_owner([0, 1, 2, 3], 4), M=2)
    >>> plan = plan_storage(pp, placement_from_owner([3, 0, 1, 2], 4))
    >>> plan.n_symbols, plan.chosen
    (3, 'rounds')
    >>> verify_storage_plan(plan)
    """
    if not isinstance(storage, PiecePlacement):
        raise TypeError(f"Argument 'storage' must be a PiecePlacement, not {type(storage).__name__}.")
    strategy = check_choice(strategy, "strategy", STORAGE_STRATEGIES)
    packing = check_choice(packing, "packing", STRATEGIES)
    demand = piece_demand(storage, placement_next)
    S = shuffle_matrix(storage.placement, placement_next)
    r = storage_rates(S, M=storage.M, strategy=strategy, packing=packing)
    off = np.array(S, dtype=np.int64)
    np.fill_diagonal(off, 0)
    t = storage.t
    if t == 0:
        a, b, _ = plan_delivery(storage.placement, placement_next, strategy=packing).transmissions()
        sent = [(int(x),) if y < 0 else tuple(sorted((int(x), int(y)))) for x, y in zip(a, b, strict=True)]
    elif r.chosen == "groups":
        sent = _groups_transmissions(demand, off, t)
    else:
        sent = _rounds_transmissions(storage, placement_next, np.asarray(S), t)
    if len(sent) != r.coded_symbols:
        raise InvalidPlanError(f"the plan sends {len(sent)} pieces, not the {r.coded_symbols} of its loads")
    return StoragePlan(
        storage=storage,
        placement_next=placement_next,
        strategy=strategy,
        chosen=r.chosen,
        transmissions=tuple(sent),
        demand=demand,
    )


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
    for pid, j, _ in plan.demand.tolist():
        needs[j].append(pid)
    H = pp.holders
    C = pp.pieces
    for w, wanted in needs.items():
        per_block: dict[int, list[int]] = defaultdict(list)
        for pid in wanted:
            per_block[find(pid)].append(pid)
        for root, pids in per_block.items():
            got = _solve(blocks.get(root, []), sent, w, H, C, value)
            for pid in pids:
                if got.get(pid) != value[pid]:
                    raise DecodeError(f"worker {w} cannot decode piece {pid} (record {pid // C})")


def _xor_values(ids: tuple[int, ...], value: list[int]) -> int:
    v = 0
    for x in ids:
        v ^= value[x]
    return v


def _solve(rows: list[int], sent: list, w: int, H: np.ndarray, C: int, value: list[int]) -> dict[int, int]:
    """Worker ``w``'s values of the unknown pieces determined by the transmissions ``rows``."""
    local: dict[int, int] = {}
    eqs = []
    for s in rows:
        ids, v = sent[s]
        m = 0
        for x in ids:
            if int(H[x // C, x % C]) >> w & 1:
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
