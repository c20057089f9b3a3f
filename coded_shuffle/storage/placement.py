"""The piece placement of a storage of ``M = 1 + t`` batches, its demand, and its update.

Record ``r`` owned by worker ``o`` is cut into ``C(K - 1, t)`` pieces ``r_T``, one for each
``t``-subset ``T`` of the workers other than ``o``; ``r_T`` is stored at ``o`` and at every worker
of ``T``: its holder set is ``H = {o} u T``. Here a piece is a slot ``p`` of its record and
``holders[r, p]`` is the bitmask of ``H``; slot ``p`` starts as the ``p``-th ``t``-subset in
lexicographic order, and keeps its identity through the updates while its label changes.

Fewer pieces: with ``pieces = P < C(K - 1, t)`` a record is cut into ``P`` pieces only, whose labels
are ``P`` distinct ``t``-subsets of the others, taken in turn along the owner's batch so that
every other worker holds close to ``t / (K - 1)`` of it (``P = 1``: whole records, each on
``t + 1`` workers). Pieces are larger (small records stay above a useful size) and the
placement smaller (``N P`` holder sets); the storage of a worker is then ``M`` batches up to the
rounding of the turns and a few pieces (:func:`update_storage` chooses who drops a delivered
piece to keep it so; :func:`storage_excess` measures it), and
the loads are those of the demand itself (:func:`~coded_shuffle.storage.plan_storage`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import check_racks
from ..errors import InvalidPlanError
from ..orders.placement import Placement
from ..plan import holder_words, lone_holders
from ._common import check_storage, lone_words, members, pieces_per_record, subsets, words3

__all__ = [
    "PiecePlacement",
    "piece_placement",
    "check_piece_placement",
    "storage_share",
    "storage_excess",
    "piece_demand",
    "update_storage",
]


@dataclass(frozen=True, eq=False)
class PiecePlacement:
    """Which workers hold each piece of each record, for a storage of ``M`` batches.

    Attributes
    ----------
    placement : Placement
        The batches: ``placement.owner[r]`` is the worker that trains on record ``r``.
    M : int
        Storage of a worker, in batches (``t = M - 1``).
    holders : numpy.ndarray
        Read-only ``N x P`` uint64 bitmasks, ``P = C(K - 1, t)`` or fewer (module docstring):
        ``holders[r, p]`` is the holder set of piece ``p`` of record ``r``. Beyond 64 workers,
        ``N x P x W`` words of 64 bits (``W = ceil(K / 64)``; worker ``k`` is bit ``k % 64`` of
        word ``k // 64``, as :func:`~coded_shuffle.plan.holder_words`).
    """

    placement: Placement
    M: int
    holders: np.ndarray
    #: The hosts of each rack (in the order of the workers) the labels were placed across, so that
    #: each piece's holders span as many racks as they can (:func:`piece_placement`), or None: one
    #: switch, or a placement the scheme fixes (a piece for every label). The update keeps them so.
    racks: tuple[int, ...] | None = None

    @property
    def K(self) -> int:
        """Number of workers."""
        return self.placement.K

    @property
    def N(self) -> int:
        """Number of records."""
        return self.placement.N

    @property
    def t(self) -> int:
        """``M - 1``: a piece is held by ``t + 1`` workers."""
        return self.M - 1

    @property
    def pieces(self) -> int:
        """Pieces of one record, ``P``: ``C(K - 1, t)`` or fewer."""
        return int(self.holders.shape[1])

    @property
    def every_label(self) -> bool:
        """Whether a record has a piece for every ``t``-subset of the others (``P = C(K - 1, t)``)."""
        return self.pieces == pieces_per_record(self.K, self.t)

    def held_by(self, k: int) -> np.ndarray:
        """Return the piece ids ``r * pieces + p`` held by worker ``k``, increasing."""
        if self.holders.ndim == 3:  # words of 64 workers
            return np.flatnonzero((self.holders[..., k // 64] >> np.uint64(k % 64)) & np.uint64(1))
        return np.flatnonzero((self.holders >> np.uint64(k)) & np.uint64(1))


def _check_placement(placement: object, name: str = "placement") -> Placement:
    if not isinstance(placement, Placement):
        raise TypeError(f"Argument {name!r} must be a Placement, not {type(placement).__name__}.")
    return placement


def piece_placement(
    placement: Placement, *, M: int, pieces: int | None = None, racks: object = None
) -> PiecePlacement:
    """Return the placement of docs/storage.md: ``r_T`` at ``{owner(r)} u T``.

    With ``pieces`` unset (or ``C(K - 1, t)``) a record has a piece for every ``t``-subset ``T`` of
    the workers other than its owner. With ``pieces = P`` fewer, the ``i``-th record of worker
    ``o``'s batch (in id order) has the labels ``(i P + p) mod C(K - 1, t)``, ``p < P``, among the
    subsets in lexicographic order: distinct, and in turn along the batch.

    ``racks`` (hosts a rack, in the order of the workers, as
    :attr:`coded_shuffle.network.Network.racks`): with fewer pieces than labels and racks of one
    size, the labels are taken from the workers outside the owner's rack, so that the new owner's
    rack likely holds each piece it misses and an exchange can take it there
    (:func:`rack_labels`); with a piece for every label the scheme fixes every holder set, and
    the racks change nothing (nor where they cannot be so taken: ``PiecePlacement.racks`` is then
    None).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> pp = piece_placement(placement_from_owner([0, 1, 2], 3), M=2)
    >>> pp.pieces, [bin(int(h)) for h in pp.holders[0]]
    (2, ['0b11', '0b101'])
    >>> whole = piece_placement(placement_from_owner([0, 0, 1, 1], 3), M=2, pieces=1)
    >>> [bin(int(h)) for h in whole.holders[:, 0]]
    ['0b11', '0b101', '0b11', '0b110']
    >>> racked = piece_placement(placement_from_owner([0, 0, 2, 2], 4), M=2, pieces=1, racks=(2, 2))
    >>> racked.racks, [bin(int(h)) for h in racked.holders[:, 0]]  # 0 and 1 share a rack, 2 and 3
    ((2, 2), ['0b101', '0b1001', '0b101', '0b110'])
    """
    placement = _check_placement(placement)
    K = placement.K
    t = check_storage(M, K)
    C = pieces_per_record(K, t)
    P = C if pieces is None else check_pieces(pieces, C)
    sizes = check_racks(racks, K)
    W = max(1, -(-K // 64))
    need = placement.N * P * W * 8
    if need > HOLDERS_MAX_BYTES:
        raise ValueError(
            f"Argument 'M' (storage) = {M} cuts each of the N = {placement.N} records into {P} pieces "
            f"(C({K - 1}, {t}) = {C} labels): their holder sets would take {_bytes(need)}, over "
            f"{_bytes(HOLDERS_MAX_BYTES)}; pass fewer 'pieces' a record, or a smaller M."
        )
    owner = np.asarray(placement.owner, dtype=np.int64)
    table = rack_labels(sizes, t=t, pieces=P) if sizes is not None and P < C else None
    if P == C:
        holders = _label_table(K, t)[owner]
    else:
        order = np.argsort(owner, kind="stable")
        first = np.searchsorted(owner[order], np.arange(K))
        rank = np.empty(owner.size, dtype=np.int64)
        rank[order] = np.arange(owner.size) - first[owner[order]]
        if table is not None and sizes is not None:  # windows of the owner's rack's cycle, the owner added
            n, s = table.shape[1], sizes[0]
            rack = owner // s  # racks of one size
            start = (owner - rack * s) * n // s  # the owners of a rack start apart
            cols = (rank[:, None] * P + np.arange(P)[None, :] + start[:, None]) % n
            words = holder_words(table.reshape(-1).tolist(), K=K)
            words = words.reshape(table.shape + words.shape[1:])[rack[:, None], cols]
            own = lone_holders(owner, K=K)
            holders = words | (own[:, None] if own.ndim == 1 else own[:, None, :])
        elif K * C <= LABEL_TABLE_MAX:  # every label of every owner, then the columns of each record
            cols = (rank[:, None] * P + np.arange(P)[None, :]) % C
            holders = _label_table(K, t)[owner[:, None], cols]
        else:  # only the labels the records use, each unranked (C(K - 1, t) is too many to list)
            used = [[(i * P + p) % C for p in range(P)] for i in rank.tolist()]
            keys = sorted({(o, c) for o, row in zip(owner.tolist(), used, strict=True) for c in row})
            at = {key: n for n, key in enumerate(keys)}
            words = holder_words([_unrank(c, o, K, t) for o, c in keys], K=K)
            index = [[at[(o, c)] for c in row] for o, row in zip(owner.tolist(), used, strict=True)]
            holders = words[np.array(index, dtype=np.int64).reshape(-1, P)]
    holders.flags.writeable = False
    racked = None if table is None else sizes
    return PiecePlacement(placement=placement, M=t + 1, holders=holders, racks=racked)


def rack_labels(racks: tuple[int, ...], *, t: int, pieces: int) -> np.ndarray | None:
    """The labels the owners of each rack take in turn (rows: racks), as int bitmasks, or None
    where they cannot be taken across racks.

    With ``R >= 2`` racks of ``s`` hosts, the ``n = K - s`` workers outside rack ``a`` are put in a
    cycle that visits the other racks in turn (host 0 of racks ``a + 1, ..., a - 1``, then host 1,
    ...), and label ``c`` is the window of ``t`` workers of the cycle from its ``c``-th: every
    worker of the cycle is in ``t`` of the ``n`` windows (the owners' records spread evenly, so each
    worker stores ``M`` batches as in one switch), ``min(t, R - 1)`` racks a window, and ``P``
    consecutive windows are distinct labels. The ``i``-th record of an owner, host ``h`` of its
    rack, takes the windows from ``i P + h n / s`` (the owners of a rack start apart, so that the
    turns' remainders fall on different workers). None with racks of several sizes (the workers of a
    small rack would store more), one rack, ``t = 0``, or fewer than ``P`` windows (or ``t + 1``
    workers) outside a rack.

    Examples
    --------
    >>> [[bin(x) for x in row] for row in rack_labels((2, 2), t=1, pieces=2)]
    [['0b100', '0b1000'], ['0b1', '0b10']]
    """
    R = len(racks)
    s = racks[0]
    n = R * s - s
    if R < 2 or len(set(racks)) > 1 or t < 1 or pieces > n or t > n or (t == n and pieces > 1):
        return None
    out = np.zeros((R, n), dtype=object)
    for a in range(R):
        cycle = [((a + off) % R) * s + host for host in range(s) for off in range(1, R)]
        for c in range(n):
            out[a, c] = sum(1 << cycle[(c + m) % n] for m in range(t))
    return out


#: The pieces by which an old owner may store more over its share than the holder in the new
#: owner's rack before it drops a delivered piece itself (the update on racks, :func:`update_storage`).
RACK_SLACK = 16

#: Most bytes of holder sets :func:`piece_placement` makes (``8 N P W``): every rank keeps them.
HOLDERS_MAX_BYTES = 8 << 30

#: Most labels (``K C(K - 1, t)``) :func:`piece_placement` lists in one table; beyond, with fewer
#: pieces a record, it unranks the labels the records use.
LABEL_TABLE_MAX = 1 << 20


def _bytes(n: int) -> str:
    for unit, size in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _label_table(K: int, t: int) -> np.ndarray:
    """The holder sets ``{o} u T`` of every owner ``o`` (rows) and every label ``T`` (columns, the
    ``t``-subsets of the others in lexicographic order), in the form of ``holder_words``."""
    C = pieces_per_record(K, t)
    labels = [T | (1 << o) for o in range(K) for T in subsets([w for w in range(K) if w != o], t)]
    words = holder_words(labels, K=K)
    return words.reshape(K, C) if words.ndim == 1 else words.reshape(K, C, -1)


def _unrank(c: int, o: int, K: int, t: int) -> int:
    """The holder set ``{o} u T`` of label ``c``: ``T`` the ``c``-th ``t``-subset, in lexicographic
    order, of the workers other than ``o`` (``list(combinations(others, t))[c]``)."""
    from math import comb

    ground = [w for w in range(K) if w != o]
    out, start = 1 << o, 0
    for left in range(t, 0, -1):  # the smallest next member whose subsets reach past c
        for x in range(start, len(ground)):
            n = comb(len(ground) - x - 1, left - 1)
            if c < n:
                out |= 1 << ground[x]
                start = x + 1
                break
            c -= n
    return out


def check_pieces(pieces: object, C: int, *, name: str = "pieces") -> int:
    """Return ``pieces`` (pieces a record, ``1 <= P <= C``), or raise naming ``name``."""
    from .._checks import check_int

    P = check_int(pieces, name, minimum=1)
    if P > C:
        raise ValueError(
            f"Argument {name!r} must be at most C(K - 1, t) = {C} pieces a record (one for each label), "
            f"not {P}."
        )
    return P


def storage_share(N_k: int, N: int, K: int, t: int) -> int:
    """Pieces a worker with a batch of ``N_k`` records holds: ``N_k C(K-1, t) + (N - N_k) C(K-2, t-1)``."""
    from math import comb

    return N_k * comb(K - 1, t) + (N - N_k) * (comb(K - 2, t - 1) if t >= 1 else 0)


def check_piece_placement(pp: PiecePlacement) -> None:
    """Raise :class:`~coded_shuffle.errors.InvalidPlanError` unless ``pp`` is a placement of
    docs/storage.md.

    Checks, for every record ``r`` owned by ``o``: every piece is held by ``o`` and ``t`` others,
    and the labels ``H \\ {o}`` of its pieces are distinct ``t``-subsets of the workers other than
    ``o``: all ``C(K - 1, t)`` of them, and then every worker holds exactly its share
    (:func:`storage_share`); or ``P`` fewer (the share is then :func:`storage_excess`'s to tell).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> check_piece_placement(piece_placement(placement_from_owner([0, 1, 2, 0], 3), M=2))
    """
    K, t, C = pp.K, pp.t, pp.pieces
    if not 1 <= C <= pieces_per_record(K, t):
        raise InvalidPlanError(f"records have {C} pieces, not 1 to C(K - 1, t) = {pieces_per_record(K, t)}")
    owner = np.asarray(pp.placement.owner, dtype=np.int64)
    H = words3(pp.holders)
    own = lone_holders(owner, K=K).reshape(owner.size, 1, -1)
    if np.any(~(H & own).any(axis=2)):
        raise InvalidPlanError("a piece is not held by the owner of its record")
    labels = H & ~own
    if np.any(np.bitwise_count(labels).sum(axis=2) != t):
        raise InvalidPlanError(f"a piece is not held by exactly t + 1 = {t + 1} workers")
    flat = labels.reshape(-1, labels.shape[2])
    ids = np.unique(flat, axis=0, return_inverse=True)[1] if flat.shape[1] > 1 else flat[:, 0]
    srt = np.sort(ids.reshape(labels.shape[:2]), axis=1)
    if C > 1 and np.any(srt[:, 1:] == srt[:, :-1]):
        raise InvalidPlanError("two pieces of one record have the same label")
    if not pp.every_label:
        return
    sizes = pp.placement.sizes()
    held = _held_counts(H, K)
    for k in range(K):
        have = int(held[k])
        want = storage_share(int(sizes[k]), pp.N, K, t)
        if have != want:
            raise InvalidPlanError(f"worker {k} holds {have} pieces, not its share {want}")


def _held_counts(holders: np.ndarray, K: int) -> np.ndarray:
    """The pieces each of the ``K`` workers holds, from the holder sets (compiled), a word at a time."""
    from ._kernels import holder_counts

    if holders.ndim == 2:
        return holder_counts(np.ascontiguousarray(holders, dtype=np.uint64), K)
    counts = [holder_counts(np.ascontiguousarray(holders[..., w]), min(64, K - 64 * w))
              for w in range(holders.shape[2])]  # fmt: skip
    return np.concatenate(counts)


def storage_excess(pp: PiecePlacement) -> float:
    """The largest storage of a worker, in records (pieces of ``1 / P``), over ``M`` times the
    largest batch, minus one: 0 with every label and equal batches; with fewer pieces the
    rounding of the first placement's turns, and a few pieces after the updates (docs/storage.md,
    Measured with fewer pieces).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> storage_excess(piece_placement(placement_from_owner([0, 1, 2, 0, 1, 2], 3), M=2))
    0.0
    """
    held = _held_counts(pp.holders, pp.K).tolist()
    batch = int(pp.placement.sizes().max()) if pp.N else 0
    return max(held) / (pp.pieces * pp.M * batch) - 1 if batch else 0.0


def piece_demand(pp: PiecePlacement, placement_next: Placement) -> np.ndarray:
    """Return the pieces the workers miss for ``placement_next``, as rows ``(piece id, wanter, holders)``.

    Worker ``j``, new owner of record ``r``, misses the pieces of ``r`` whose holder set does not
    contain it: ``C(K - 2, t)`` of them when ``r`` moves, none when it stays. The piece id is
    ``r * pieces + p``; the holders a 64-bit mask as int64, or beyond 64 workers its ``W`` words
    (rows of ``2 + W`` columns).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> pp = piece_placement(placement_from_owner([0, 1, 2], 3), M=2)
    >>> piece_demand(pp, placement_from_owner([1, 2, 0], 3)).tolist()
    [[1, 1, 5], [2, 2, 3], [5, 0, 6]]
    """
    placement_next = _check_placement(placement_next, "placement_next")
    if placement_next.K != pp.K or placement_next.N != pp.N:
        raise ValueError(
            f"Argument 'placement_next' must place the same N = {pp.N} records on K = {pp.K} workers "
            f"(a changing K needs M = 1), not N = {placement_next.N}, K = {placement_next.K}."
        )
    new = np.asarray(placement_next.owner, dtype=np.int64)
    if pp.holders.ndim == 2:  # one word: as ever
        bit = np.uint64(1) << new.astype(np.uint64)
        flat = pp.holders.reshape(-1)  # piece r * pieces + p, its holders
        pid = np.flatnonzero((pp.holders & bit[:, None]).reshape(-1) == 0)
        words = flat[pid].view(np.int64).reshape(-1, 1)  # 64-bit masks, as int64
    else:
        W = pp.holders.shape[2]
        hit = (pp.holders & lone_words(new, W).reshape(new.size, 1, W)).any(axis=2)
        pid = np.flatnonzero(~hit.reshape(-1))
        words = pp.holders.reshape(-1, W)[pid].view(np.int64)
    out = np.empty((pid.size, 2 + words.shape[1]), dtype=np.int64)
    out[:, 0] = pid
    out[:, 1] = new[pid // pp.pieces]
    out[:, 2:] = words
    return out


def update_storage(pp: PiecePlacement, placement_next: Placement) -> PiecePlacement:
    """Return the placement after delivery, by relabelling only (no traffic).

    Record ``r`` moves ``o -> j``. A piece with ``j`` in its holder set ``H`` keeps its holders
    (its label becomes ``H \\ {j}``); a piece with ``j`` not in ``H`` was delivered to ``j``, and
    one of its old holders drops its copy: ``H -> (H \\ {d}) u {j}``. With a piece for every
    label ``d = o`` (claim 6: every worker then holds exactly its share). With fewer pieces ``d`` is
    ``o`` too, unless another holder of the piece stores more over its share than ``o`` by more
    than a piece and the record's labels stay distinct: then the most loaded of them drops it
    (``_kernels.rebalance``), which keeps every worker's storage within about a piece of ``M``
    batches (docs/storage.md, Fewer pieces). Every rank computes the same, from ``pp`` and the
    new owners.

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> pp = piece_placement(placement_from_owner([0, 1, 2], 3), M=2)
    >>> nxt = update_storage(pp, placement_from_owner([1, 2, 0], 3))
    >>> check_piece_placement(nxt)
    >>> [bin(int(h)) for h in nxt.holders[0]]
    ['0b11', '0b110']
    """
    placement_next = _check_placement(placement_next, "placement_next")
    piece_demand(pp, placement_next)  # the same checks
    old = np.asarray(pp.placement.owner, dtype=np.int64)
    new = np.asarray(placement_next.owner, dtype=np.int64)
    H = words3(pp.holders)
    jb = lone_holders(new, K=pp.K).reshape(new.size, 1, -1)
    ob = lone_holders(old, K=pp.K).reshape(old.size, 1, -1)
    moved = ~(H & jb).any(axis=2, keepdims=True)
    out = np.where(moved, (H & ~ob) | jb, H).astype(np.uint64)
    if not pp.every_label and pp.t >= 1 and pp.N:
        K, t, P, N = pp.K, pp.t, pp.pieces, pp.N
        held = _held_counts(out if pp.holders.ndim == 3 else out[..., 0], K)
        sizes = np.asarray(placement_next.sizes(), dtype=np.int64)
        excess = held * (K - 1) - P * (sizes * (K - 1) + (N - sizes) * t)
        if pp.racks is None:
            from ._kernels import rebalance

            rebalance(out, np.ascontiguousarray(H), old, new, excess, K - 1)
        else:
            from ._rack_drops import rack_drops

            R = len(pp.racks)
            rack = np.repeat(np.arange(R), pp.racks)
            bits = holder_words([sum(1 << int(k) for k in np.flatnonzero(rack == a)) for a in range(R)], K=K)
            slack = RACK_SLACK * (K - 1)
            rack_drops(
                out, np.ascontiguousarray(H), old, new, bits.reshape(R, -1), rack, excess, K - 1, slack
            )
    if pp.holders.ndim == 2:
        out = out.reshape(pp.holders.shape)
    out.flags.writeable = False
    return PiecePlacement(placement=placement_next, M=pp.M, holders=out, racks=pp.racks)


def _labels(pp: PiecePlacement, r: int) -> list[list[int]]:
    """The holder sets of record ``r``'s pieces, as lists of workers (for printing)."""
    from ..plan import holder_set

    return [members(holder_set(pp.holders[r], p)) for p in range(pp.pieces)]
