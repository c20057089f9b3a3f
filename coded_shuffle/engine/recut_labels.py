"""Which slot of a record each label of the storage at ``K'`` goes to, in a re-cut (:mod:`.recut`).

The storage at ``K'`` (:func:`~coded_shuffle.storage.piece_placement`) gives record ``r`` the labels
``T_0 .. T_{P'-1}`` (``t``-subsets of the workers other than its owner), label ``T_q`` to slot
``q``, the bytes ``[q w', (q + 1) w')``. Any other assignment of the same labels to the same slots
is a storage at ``K'`` as good: every worker holds exactly as many pieces (the labels a record
has are the same), and the scheme follows it from epoch to epoch as any other
(:func:`~coded_shuffle.storage.update_storage` asks nothing of which slot a label is on). In a
re-cut the workers hold bytes of the records cut at ``K``, so the assignment sets what they keep:
``kept`` (the default) gives each record the assignment of its labels to its slots that keeps
the most bytes where they are (a linear assignment a record, ``P' x P'``: the bytes of slot ``q``
the members of label ``T`` hold, summed over the slots); ``placement`` keeps that of
:func:`~coded_shuffle.storage.piece_placement`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["LABELS", "kept_labels", "slot_bytes"]


def slot_bytes(seg: Any, have: Sequence[np.ndarray], P: int, K: int) -> np.ndarray:
    """``(N, P, K)``: the bytes of slot ``q`` of record ``r`` (of the new cut) that worker ``w`` of
    the ``K`` holds, by the segments ``seg`` (:class:`~.recut.Segments`) of the old pieces ``have[w]``."""
    N = int(seg.record.max(initial=-1)) + 1
    out = np.zeros(N * P * K, dtype=np.int64)
    for w in range(min(K, len(have))):
        has = np.isin(seg.old, have[w])
        np.add.at(out, (seg.record[has] * P + seg.new[has] % P) * K + w, seg.lengths[has])
    return out.reshape(N, P, K)


def kept_labels(held: Any, seg: Any, have: Sequence[np.ndarray]) -> Any:
    """``held`` (a :class:`~coded_shuffle.storage.PiecePlacement` on ``K`` workers, one word of
    holders) with each record's labels assigned to its slots so that the workers keep the most
    bytes of ``have`` (module docstring); beyond 64 workers, ``held`` as it is.

    Examples
    --------
    One record of 2 slots at ``K' = 3``, owner 0: worker 1 holds slot 1's bytes, worker 2 slot 0's;
    the placement gives slot 0 to ``{0, 1}``: swapped, each keeps what it holds.

    >>> from coded_shuffle.engine.recut import byte_cuts, segments
    >>> from coded_shuffle.orders import placement_from_owner
    >>> from coded_shuffle.storage import piece_placement
    >>> pp = piece_placement(placement_from_owner([0], 3), M=2)
    >>> s = segments(byte_cuts(np.array([4]), 2, width=2), byte_cuts(np.array([4]), 2, width=2))
    >>> have = [np.empty(0, np.int64), np.array([1]), np.array([0])]
    >>> [bin(int(h)) for h in kept_labels(pp, s, have).holders[0]]
    ['0b101', '0b11']
    """
    from scipy.optimize import linear_sum_assignment

    from ..storage import PiecePlacement

    H = np.asarray(held.holders)
    if H.ndim != 2 or held.pieces < 2:
        return held
    K, P = held.K, held.pieces
    owner = np.asarray(held.placement.owner, dtype=np.int64)
    bits = ((H[:, :, None] >> np.arange(K, dtype=np.uint64)[None, None, :]) & np.uint64(1)).astype(np.int64)
    bits[np.arange(owner.size), :, owner] = 0  # the owner holds every slot, whichever its labels
    gain = np.einsum("rqw,rsw->rqs", slot_bytes(seg, have, P, K), bits)  # label of slot s on slot q
    better = np.flatnonzero((gain.max(axis=2) > np.einsum("rqq->rq", gain)).any(axis=1))
    out = H.copy()
    for r in better.tolist():
        rows, cols = linear_sum_assignment(gain[r], maximize=True)
        out[r, rows] = H[r, cols]
    out.flags.writeable = False
    return PiecePlacement(placement=held.placement, M=held.M, holders=out, racks=held.racks)


#: How a re-cut assigns the labels of the storage at ``K'`` to the slots of a record, by name.
LABELS = {"kept": kept_labels, "placement": lambda held, seg, have: held}
