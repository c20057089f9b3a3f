"""The piece placement of a storage of ``M = 1 + t`` batches, its demand, and its update.

Record ``r`` owned by worker ``o`` is cut into ``C(K - 1, t)`` pieces ``r_T``, one for each
``t``-subset ``T`` of the workers other than ``o``; ``r_T`` is stored at ``o`` and at every worker
of ``T``: its holder set is ``H = {o} u T``. Here a piece is a slot ``p`` of its record and
``holders[r, p]`` is the bitmask of ``H``; slot ``p`` starts as the ``p``-th ``t``-subset in
lexicographic order, and keeps its identity through the updates while its label changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InvalidPlanError
from ..orders.placement import Placement
from ._common import check_storage, members, pieces_per_record, subsets

__all__ = [
    "PiecePlacement",
    "piece_placement",
    "check_piece_placement",
    "storage_share",
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
        Read-only ``N x C(K - 1, t)`` uint64 bitmasks: ``holders[r, p]`` is the holder set of
        piece ``p`` of record ``r``.
    """

    placement: Placement
    M: int
    holders: np.ndarray

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
        """Pieces of one record, ``C(K - 1, t)``."""
        return int(self.holders.shape[1])

    def held_by(self, k: int) -> np.ndarray:
        """Return the piece ids ``r * pieces + p`` held by worker ``k``, increasing."""
        return np.flatnonzero((self.holders >> np.uint64(k)) & np.uint64(1))


def _check_placement(placement: object, name: str = "placement") -> Placement:
    if not isinstance(placement, Placement):
        raise TypeError(f"Argument {name!r} must be a Placement, not {type(placement).__name__}.")
    return placement


def piece_placement(placement: Placement, *, M: int) -> PiecePlacement:
    """Return the placement of docs/storage.md: ``r_T`` at ``{owner(r)} u T`` for every ``t``-subset ``T``.

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> pp = piece_placement(placement_from_owner([0, 1, 2], 3), M=2)
    >>> pp.pieces, [bin(int(h)) for h in pp.holders[0]]
    (2, ['0b11', '0b101'])
    """
    placement = _check_placement(placement)
    K = placement.K
    t = check_storage(M, K)
    C = pieces_per_record(K, t)
    table = np.zeros((K, C), dtype=np.uint64)
    for o in range(K):
        others = [w for w in range(K) if w != o]
        table[o] = [T | (1 << o) for T in subsets(others, t)]
    holders = table[np.asarray(placement.owner, dtype=np.int64)]
    holders.flags.writeable = False
    return PiecePlacement(placement=placement, M=t + 1, holders=holders)


def storage_share(N_k: int, N: int, K: int, t: int) -> int:
    """Pieces a worker with a batch of ``N_k`` records holds: ``N_k C(K-1, t) + (N - N_k) C(K-2, t-1)``."""
    from math import comb

    return N_k * comb(K - 1, t) + (N - N_k) * (comb(K - 2, t - 1) if t >= 1 else 0)


def check_piece_placement(pp: PiecePlacement) -> None:
    """Raise :class:`~coded_shuffle.errors.InvalidPlanError` unless ``pp`` is the placement of
    docs/storage.md.

    Checks, for every record ``r`` owned by ``o``: every piece is held by ``o`` and ``t`` others,
    the labels ``H \\ {o}`` are the ``C(K - 1, t)`` distinct ``t``-subsets of the workers other
    than ``o``; and every worker holds exactly its share (:func:`storage_share`).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> check_piece_placement(piece_placement(placement_from_owner([0, 1, 2, 0], 3), M=2))
    """
    K, t, C = pp.K, pp.t, pp.pieces
    if C != pieces_per_record(K, t):
        raise InvalidPlanError(f"records have {C} pieces, not C(K - 1, t) = {pieces_per_record(K, t)}")
    owner = np.asarray(pp.placement.owner, dtype=np.int64)
    H = pp.holders.astype(np.uint64)
    own = np.uint64(1) << owner.astype(np.uint64)
    if np.any((H[:, :] & own[:, None]) == 0):
        raise InvalidPlanError("a piece is not held by the owner of its record")
    labels = H & ~own[:, None]
    popc = np.zeros(labels.shape, dtype=np.int64)
    for k in range(K):
        popc += ((labels >> np.uint64(k)) & np.uint64(1)).astype(np.int64)
    if np.any(popc != t):
        raise InvalidPlanError(f"a piece is not held by exactly t + 1 = {t + 1} workers")
    srt = np.sort(labels, axis=1)
    if C > 1 and np.any(srt[:, 1:] == srt[:, :-1]):
        raise InvalidPlanError("two pieces of one record have the same label")
    sizes = pp.placement.sizes()
    for k in range(K):
        have = int(((H >> np.uint64(k)) & np.uint64(1)).sum())
        want = storage_share(int(sizes[k]), pp.N, K, t)
        if have != want:
            raise InvalidPlanError(f"worker {k} holds {have} pieces, not its share {want}")


def piece_demand(pp: PiecePlacement, placement_next: Placement) -> np.ndarray:
    """Return the pieces the workers miss for ``placement_next``, as rows ``(piece id, wanter, holders)``.

    Worker ``j``, new owner of record ``r``, misses the pieces of ``r`` whose holder set does not
    contain it: ``C(K - 2, t)`` of them when ``r`` moves, none when it stays. The piece id is
    ``r * pieces + p``.

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
    bit = np.uint64(1) << new.astype(np.uint64)
    miss = (pp.holders & bit[:, None]) == 0
    r, p = np.nonzero(miss)
    out = np.stack([r * pp.pieces + p, new[r], pp.holders[r, p].astype(np.int64)], axis=1)
    return out.astype(np.int64)


def update_storage(pp: PiecePlacement, placement_next: Placement) -> PiecePlacement:
    """Return the placement after delivery, by relabelling only (no traffic).

    Record ``r`` moves ``o -> j``. A piece with ``j`` in its holder set ``H`` keeps its holders
    (its label becomes ``H \\ {j}``); a piece with ``j`` not in ``H`` was delivered to ``j``, and
    ``o`` drops its copy: ``H -> (H \\ {o}) u {j}``.

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
    old = np.asarray(pp.placement.owner, dtype=np.uint64)
    new = np.asarray(placement_next.owner, dtype=np.uint64)
    one = np.uint64(1)
    jb, ob = (one << new)[:, None], (one << old)[:, None]
    H = pp.holders
    moved = (H & jb) == 0
    out = np.where(moved, (H & ~ob) | jb, H).astype(np.uint64)
    out.flags.writeable = False
    return PiecePlacement(placement=placement_next, M=pp.M, holders=out)


def _labels(pp: PiecePlacement, r: int) -> list[list[int]]:
    """The holder sets of record ``r``'s pieces, as lists of workers (for printing)."""
    return [members(int(h)) for h in pp.holders[r]]
