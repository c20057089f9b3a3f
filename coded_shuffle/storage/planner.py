"""Delivery with a storage of ``M = 1 + t`` batches: group symbols, chains, boundary rounds.

Notation
--------
==============  ======================================================================
``G``           a ``(t + 2)``-set of workers, a group
``c_i(G)``      pieces worker ``i`` of ``G`` wants that are held exactly by ``G \\ {i}``:
                ``sum of S[o][i] over o in G, o != i`` (one piece per record moved ``o -> i``)
``u``           a group symbol: the XOR of at most one such piece per member; its receivers
                ``R`` are the members with a piece in it; a member outside ``R`` knows ``u``
                fully, a receiver knows every term but its own, a worker outside ``G`` nothing
``C``           ``C(K - 1, t)``, pieces of a record; loads are in records, pieces ``1 / C``
==============  ======================================================================

Strategies, by name through :data:`STORAGE_STRATEGIES` (at ``t = 0`` every one is today's pairs
and cycles, :func:`coded_shuffle.plan.rates`, which they then call):

``groups``
    Group symbols: group ``G`` sends ``max_i c_i(G)`` symbols, the ``k``-th holding the ``k``-th
    piece of every member with more than ``k`` (at ``t = 0`` the order-2 symbols and the
    leftovers alone). Then chains of the partial symbols (fewer than ``t + 2`` receivers): a
    chain ``u_1, ..., u_l`` in which every receiver of every ``u_k`` knows some other ``u_m``
    fully is sent as ``u_1 + u_2, ..., u_{l-1} + u_l`` (one symbol saved; each receiver peels from
    the symbol it knows to its own). Chains are packed shortest first (pairs, fewest partners
    first; then 3; then longer, by breadth-first search, among at most
    :data:`LONG_CHAIN_MAX_NODES` types), greedily; at ``t = 0`` they are the
    leftover cycles. A second round cuts the leftover symbols of two receivers into single pieces
    (one symbol more each) and chains those with the other leftovers; it is kept only when it
    saves more than it costs.
``rounds``
    The moved records split into partial permutation rounds (repeated maximum matchings of what
    is left); a round activates every group containing some moved pair ``{o, j}`` and sends, from
    its group symbols ``u_G``, ``Y_P = XOR of u_G over the active G containing P`` for the
    ``(t + 1)``-sets ``P`` of an information set of the boundary vectors: it costs their GF(2)
    rank, at most ``C(K - 1, t + 1)`` (the sets avoiding worker 0 always suffice). On the cyclic
    shift this is ``R(t)``.
``batches``
    With fewer pieces a record than labels only (:func:`~coded_shuffle.storage.piece_placement`):
    today's pairs and cycles of whole records (:func:`coded_shuffle.plan.plan_delivery`; every
    owner still holds every piece of its batch), piece by piece, leaving out of a pair or a lone
    symbol the pieces their new owner already holds. Where the demand is spread over more groups
    than it has records (``N`` small against ``K^3``) the group symbols find few partners and this
    sends less.
``best``
    The smaller of ``groups`` and ``rounds`` (default); with fewer pieces, of ``groups`` and
    ``batches``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations, islice
from math import comb

import numpy as np

from .._checks import check_choice
from ..plan import STRATEGIES, holder_words, rates
from ._common import (
    demand_words,
    distinct_sets,
    lone_words,
    members,
    pieces_per_record,
    square_storage,
    unique_rows,
)
from .rounds import RANK_MAX_CELLS, _rounds_plan, boundary_rank

__all__ = [
    "STORAGE_STRATEGIES",
    "StorageRates",
    "storage_rates",
    "group_counts",
    "demand_counts",
    "boundary_rank",
    "RANK_MAX_CELLS",
    "CHAIN_MAX_NODES",
    "LONG_CHAIN_MAX_NODES",
]

#: Most symbol types the chains are packed among (the ``K = 16``, ``t = 2`` range).
CHAIN_MAX_NODES = 6000

#: Most symbol types among which chains longer than 3 are searched (a breadth-first search each).
LONG_CHAIN_MAX_NODES = 2000

#: Receivers of the leftover symbols the second round of ``groups`` cuts into single pieces (a
#: cut costs one symbol more per receiver beyond the first; with three or more it rarely pays).
CUT_RECEIVERS = 2

#: Most groups (``C(K, t + 2)``) whose counts :func:`storage_rates` makes from a shuffle matrix (a
#: minute or so on one core; ``K = 1024`` at ``M = 2`` has 178 million).
GROUPS_MAX = 1 << 25

#: Cells (groups times members squared) :func:`group_counts` sums in one numpy call.
GROUP_CHUNK_CELLS = 1 << 22


def group_counts(S: object, *, M: int) -> dict[int, dict[int, int]]:
    """Return ``{G: {i: c_i(G)}}`` over the ``(t + 2)``-sets ``G`` (bitmasks) with some demand.

    Examples
    --------
    >>> group_counts([[0, 0, 1], [1, 0, 0], [0, 1, 0]], M=2)
    {7: {0: 1, 1: 1, 2: 1}}
    """
    _, off, t = square_storage(S, M)
    K = off.shape[0]
    out: dict[int, dict[int, int]] = {}
    if t + 2 > K:
        return out
    groups = combinations(range(K), t + 2)
    chunk = max(1, GROUP_CHUNK_CELLS // (t + 2) ** 2)
    while True:  # a chunk of groups at a time, in lexicographic order: c[n, i] = sum over o of S[o][i]
        g = np.array(list(islice(groups, chunk)), dtype=np.int64).reshape(-1, t + 2)
        if not g.size:
            return out
        c = off[g[:, :, None], g[:, None, :]].sum(axis=1)
        for n in np.flatnonzero(c.any(axis=1)).tolist():
            members_n = g[n].tolist()
            out[sum(1 << i for i in members_n)] = dict(zip(members_n, c[n].tolist(), strict=True))


def demand_counts(demand: np.ndarray) -> dict[int, dict[int, int]]:
    """Return ``{G: {i: c_i(G)}}`` counted on the demand itself: the rows ``(piece, wanter i,
    holders H)`` of :func:`~coded_shuffle.storage.piece_demand` with ``H u {i} = G`` (``H`` one
    column, or ``W`` words beyond 64 workers).

    For a placement with every label it is :func:`group_counts` of the shuffle matrix; with fewer
    pieces a record the counts are those of the labels the pieces have.

    Examples
    --------
    >>> demand_counts(np.array([[0, 1, 5], [3, 2, 3], [4, 0, 6]]))
    {7: {0: 1, 1: 1, 2: 1}}
    """
    d = np.asarray(demand, dtype=np.int64)
    d = d.reshape(-1, 3) if d.ndim < 2 else d
    groups, g = demand_groups(d)
    wide = 64 * groups.shape[1]  # more than any worker
    cnt = np.bincount(g * wide + d[:, 1], minlength=groups.shape[0] * wide).reshape(-1, wide)
    gs, js = np.nonzero(cnt)
    out: dict[int, dict[int, int]] = {}
    sets = distinct_sets(groups)[0]
    for x, i, n in zip(gs.tolist(), js.tolist(), cnt[gs, js].tolist(), strict=True):
        out.setdefault(sets[x], {})[i] = n
    return out


def demand_groups(demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(groups, index)``: the distinct ``G = H u {wanter}`` of the demand rows, increasing (rows
    of ``W`` uint64 words), and each row's position among them."""
    H = demand_words(demand)
    G = H | lone_words(demand[:, 1], H.shape[1])
    return unique_rows(G)


def _symbol_types(counts: dict[int, int]) -> list[tuple[int, int]]:
    """The group symbols of one group as ``(receiver mask, multiplicity)``, fewest receivers first."""
    levels = sorted(set(counts.values()) | {0}, reverse=True)
    out = []
    for hi, lo in zip(levels, levels[1:], strict=False):
        R = 0
        for i, c in counts.items():
            if c >= hi:
                R |= 1 << i
        out.append((R, hi - lo))
    return out


def _knows(u: tuple[int, int], v: tuple[int, int]) -> bool:
    """Whether every receiver of ``u = (G, R)`` knows ``v`` fully: ``R_u`` inside ``G_v \\ R_v``."""
    return u[1] & ~(v[0] & ~v[1]) == 0


def _pack_chains(nodes: list[tuple[int, int]], mult: list[int]) -> list[tuple[tuple[int, ...], int]]:
    """Chains (cycles of the 'knows fully' digraph): length 2, then 3, then longer, greedily.

    Only the :data:`CHAIN_MAX_NODES` symbol types of largest multiplicity take part.
    """
    m = list(mult)
    out: list[tuple[tuple[int, ...], int]] = []
    keep = sorted(range(len(nodes)), key=lambda a: -m[a])[:CHAIN_MAX_NODES]
    n = len(keep)
    if n < 2:
        return out
    G = _words_of([nodes[a][0] for a in keep])
    R = _words_of([nodes[a][1] for a in keep])
    known = G & ~R
    A = np.ones((n, n), dtype=bool)
    mutual = np.ones((n, n), dtype=bool)  # A and its transpose, made as A is (a transpose is slow)
    for w in range(G.shape[1]):  # every word of the sets
        Rw, kw = R[:, w], known[:, w]
        for lo in range(0, n, 512):
            A[lo : lo + 512] &= (Rw[lo : lo + 512, None] & ~kw[None, :]) == 0
            mutual[lo : lo + 512] &= (Rw[None, :] & ~kw[lo : lo + 512, None]) == 0
    mutual &= A
    np.fill_diagonal(A, False)
    np.fill_diagonal(mutual, False)
    m = [mult[a] for a in keep]
    order = sorted(range(n), key=lambda a: -m[a])
    # pairs: the type with the fewest partners left first, with its partner of fewest partners;
    # then chains of 3 (compiled: :func:`._kernels.chain_pairs`, :func:`._kernels.chain_triples`)
    from ._kernels import chain_pairs, chain_triples

    left = np.array(m, dtype=np.int64)
    alive = left > 0
    degree = (mutual & alive[None, :]).sum(axis=1).astype(np.int64)
    rows = np.zeros((n, 3), dtype=np.int64)
    for a, b, k in rows[: chain_pairs(mutual, left, alive, degree, rows)].tolist():
        out.append(((a, b), k))
    rows = np.zeros((n, 4), dtype=np.int64)
    for a, b, c, k in rows[: chain_triples(A, left, alive, np.array(order, dtype=np.int64), rows)].tolist():
        out.append(((a, b, c), k))
    m = left.tolist()
    for a in order if n <= LONG_CHAIN_MAX_NODES else []:  # then longer chains, shortest first
        while m[a]:
            cycle = _shortest_cycle(A, alive, a)
            if cycle is None:
                break
            k = min(m[x] for x in cycle)
            for x in cycle:
                m[x] -= k
                alive[x] = m[x] > 0
            out.append((tuple(cycle), k))
    return [(tuple(keep[a] for a in chain), k) for chain, k in out]


def _words_of(sets: list[int]) -> np.ndarray:
    """Python int bitmasks as rows of as many 64-bit words as the widest needs."""
    W = max(1, -(-max(x.bit_length() for x in sets) // 64))
    return holder_words(sets, K=64 * W).reshape(-1, W)


def _shortest_cycle(A: np.ndarray, alive: np.ndarray, a: int) -> list[int] | None:
    """A shortest cycle through ``a`` in the digraph ``A`` restricted to ``alive`` (breadth first)."""
    n = A.shape[0]
    parent = np.full(n, -1, dtype=np.int64)
    seen = ~alive.copy()
    seen[a] = True
    frontier = np.array([a])
    while frontier.size:
        reach = A[frontier] & ~seen  # rows: frontier nodes
        if A[frontier, a].any():
            last = int(frontier[np.flatnonzero(A[frontier, a])[0]])
            path = [last]
            while path[-1] != a:
                path.append(int(parent[path[-1]]))
            return path[::-1]
        rows, cols = np.nonzero(reach)
        cols, first = np.unique(cols, return_index=True)
        parent[cols] = frontier[rows[first]]
        seen[cols] = True
        frontier = cols
    return None


@dataclass(frozen=True)
class _GroupsPlan:
    """The ``groups`` strategy in counts: what :mod:`.plan` replays on pieces.

    ``nodes[n] = (G, R)``, the partial symbol types, ``mult[n]`` of each; ``chains`` over them;
    then, if it pays, a second round on what is left: ``split[n]`` symbols of type ``n`` cut into
    their single pieces, and ``chains2`` over ``nodes2``, each ``(n, None)`` (a leftover of type
    ``n``, whole) or ``(n, i)`` (the piece of receiver ``i`` of a cut symbol of type ``n``).
    """

    sent: int
    saved: int
    nodes: list[tuple[int, int]]
    mult: list[int]
    chains: list
    nodes2: list[tuple[int, int | None]]
    chains2: list
    split: dict[int, int]


def _groups_plan(counts: dict[int, dict[int, int]], t: int) -> _GroupsPlan:
    """The ``groups`` strategy on the counts ``{G: {i: c_i(G)}}`` (:func:`group_counts` or
    :func:`demand_counts`): group symbols, chains, then chains of cut leftovers when they pay."""
    sent = 0
    nodes: list[tuple[int, int]] = []
    mult: list[int] = []
    full_size = t + 2
    for G, c in counts.items():
        for R, k in _symbol_types(c):
            sent += k
            if R.bit_count() < full_size:
                nodes.append((G, R))
                mult.append(k)
    chains = _pack_chains(nodes, mult)
    saved = sum(k for _, k in chains)
    left = list(mult)
    for chain, k in chains:
        for n in chain:
            left[n] -= k
    # Second round: a leftover with two receivers cut into two singles costs one symbol more;
    # the singles may chain where the whole could not. Kept only if it saves in all.
    nodes2: list[tuple[int, int | None]] = []
    types2: list[tuple[int, int]] = []
    mult2: list[int] = []
    for n, (G, R) in enumerate(nodes):
        if not left[n]:
            continue
        for i in members(R) if R.bit_count() == CUT_RECEIVERS else [None]:
            nodes2.append((n, i))
            types2.append((G, R if i is None else 1 << i))
            mult2.append(left[n])
    chains2 = _pack_chains(types2, mult2)
    use: dict[int, int] = defaultdict(int)
    for chain, k in chains2:
        for x in chain:
            use[x] += k
    split: dict[int, int] = {}
    for x, (n, i) in enumerate(nodes2):
        if i is not None and use[x]:
            split[n] = max(split.get(n, 0), use[x])
    extra = sum((nodes[n][1].bit_count() - 1) * k for n, k in split.items())
    gain = sum(k for _, k in chains2) - extra
    if gain <= 0:
        return _GroupsPlan(sent, saved, nodes, mult, chains, [], [], {})
    return _GroupsPlan(sent, saved + gain, nodes, mult, chains, nodes2, chains2, split)


#: Storage strategies by name (module docstring).
STORAGE_STRATEGIES: dict[str, str] = {
    "groups": "group symbols, then chains of the partial ones",
    "rounds": "partial permutation rounds, each sent by boundary combining",
    "batches": "fewer pieces a record only: the pairs and cycles of whole batches, pieces held left out",
    "best": "the smaller of groups and rounds (of groups and batches with fewer pieces a record)",
}


@dataclass(frozen=True, eq=False)
class StorageRates:
    """Loads of one transition with a storage of ``M`` batches, in records, exact.

    Attributes
    ----------
    S : numpy.ndarray
        The shuffle matrix.
    M : int
        Storage, in batches.
    strategy : str
        The strategy asked for; ``chosen`` the one whose plan gave ``coded``.
    chosen : str
        ``'groups'``, ``'rounds'``, or ``'pairs-and-cycles'`` at ``t = 0``.
    pieces : int
        ``C(K - 1, t)``, pieces of one record.
    uncoded : Fraction
        Every missing piece sent alone: ``W C(K - 2, t) / C(K - 1, t) = W (K - 1 - t) / (K - 1)``.
    grouped : Fraction
        Group symbols alone (no chains); at ``t = 0`` the paired load.
    coded : Fraction
        The load of the chosen plan.
    coded_symbols : int
        ``coded`` in pieces.

    The fields a :class:`~coded_shuffle.plan.Rates` has and code written for one reads are here
    too: ``uncoded``, ``paired`` (the first phase alone: the group symbols without the chains,
    :attr:`grouped`), ``coded``, ``K`` and ``N``.
    """

    S: np.ndarray
    M: int
    strategy: str
    chosen: str
    pieces: int
    uncoded: Fraction
    grouped: Fraction
    coded: Fraction
    coded_symbols: int

    @property
    def K(self) -> int:
        """Number of workers."""
        return int(self.S.shape[0])

    @property
    def N(self) -> int:
        """Number of records."""
        return int(self.S.sum())

    @property
    def paired(self) -> Fraction:
        """The load of the first phase alone, as :attr:`Rates.paired <coded_shuffle.plan.Rates>`
        is: the group symbols without the chains of the leftovers (:attr:`grouped`; at ``t = 0``
        exactly the paired load)."""
        return self.grouped


def storage_rates(S: object, *, M: int, strategy: str = "best", packing: str = "greedy") -> StorageRates:
    """Return the uncoded, grouped and coded loads of ``S`` with a storage of ``M`` batches.

    Parameters
    ----------
    S : array_like
        Shuffle matrix; ``K_t x K_{t+1}`` only with ``M = 1``.
    M : int
        Storage of each worker, whole batches, ``1 <= M <= K``.
    strategy : str
        A key of :data:`STORAGE_STRATEGIES`.
    packing : str
        The cycle packing of :func:`coded_shuffle.plan.rates` used at ``t = 0``.

    Examples
    --------
    Example 1 of Attia and Tandon (2016) at ``M = 1`` is today's scheme (6 records); at
    ``M = 2`` records have two pieces and the group symbols alone send 4 of them:

    >>> S = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]
    >>> storage_rates(S, M=1).coded, storage_rates(S, M=2).coded
    (Fraction(6, 1), Fraction(2, 1))
    """
    return _storage_rates(S, M, strategy, packing)[0]


def _storage_rates(S: object, M: int, strategy: str, packing: str) -> tuple[StorageRates, _GroupsPlan | None]:
    """:func:`storage_rates`, with the ``groups`` plan in counts when it was made (for :mod:`.plan`)."""
    Sq, off, t = square_storage(S, M)
    strategy = check_choice(strategy, "strategy", STORAGE_STRATEGIES)
    packing = check_choice(packing, "packing", STRATEGIES)
    if strategy == "batches":
        raise ValueError(
            "Argument 'strategy' can be 'batches' only for a placement with fewer pieces a record "
            "(plan_storage): its load depends on which pieces the new owners hold, not on S alone."
        )
    K = off.shape[0]
    C = pieces_per_record(K, t)
    if t >= 1 and comb(K, t + 2) > GROUPS_MAX:
        raise ValueError(
            f"Argument 'M' (storage) = {t + 1} with K = {K} workers needs the counts of C({K}, {t + 2}) = "
            f"{comb(K, t + 2)} groups of M + 1 workers (at most {GROUPS_MAX}): a smaller M."
        )
    W = int(off.sum())
    uncoded = Fraction(W * comb(K - 2, t), C) if K >= 2 else Fraction(0)
    if t == 0:
        r = rates(Sq, strategy=packing)
        return StorageRates(
            S=Sq,
            M=1,
            strategy=strategy,
            chosen="pairs-and-cycles",
            pieces=1,
            uncoded=uncoded,
            grouped=Fraction(r.paired),
            coded=Fraction(r.coded),
            coded_symbols=int(r.coded),
        ), None
    best, chosen, gp = -1, "groups", None
    if strategy in ("groups", "best"):
        gp = _groups_plan(group_counts(off, M=t + 1), t)
        best = gp.sent - gp.saved
    # the group symbols alone: each group sends as many as its busiest member needs
    sent = gp.sent if gp is not None else sum(max(c.values()) for c in group_counts(off, M=t + 1).values())
    if strategy in ("rounds", "best"):
        rounds_total, _ = _rounds_plan(Sq, t)
        if best < 0 or rounds_total < best:
            best, chosen = rounds_total, "rounds"
    return StorageRates(
        S=Sq,
        M=t + 1,
        strategy=strategy,
        chosen=chosen,
        pieces=C,
        uncoded=uncoded,
        grouped=Fraction(sent, C),
        coded=Fraction(best, C),
        coded_symbols=best,
    ), gp
