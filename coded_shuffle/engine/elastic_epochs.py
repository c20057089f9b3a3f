"""Epochs whose number of workers changes: ``K_t`` workers at epoch ``t``, on one job's ``K`` slots.

Notation
--------
=========  ==========================================================================
``K_t``    workers of epoch ``t``: worker ``k < K_t`` reads the ``k``-th run of the epoch's
           order cut into ``K_t`` batches (:func:`~coded_shuffle.orders.order_placement`)
``K``      the job's slots (its ranks' workers), ``max_t K_t``; a slot ``k >= K_t`` holds
           nothing at epoch ``t``
=========  ==========================================================================

A job across processes keeps its ranks (``mpiexec -n K + 1``) and changes how many of them hold a
batch. The transition ``t -> t + 1`` is then an ordinary one on ``K`` slots: a worker that leaves
(``k >= K_{t+1}``) holds its batch and wants nothing, one that joins (``k >= K_t``) holds nothing
and wants its batch, so the shuffle matrix is the rectangular ``K_t x K_{t+1}`` one of
:func:`~coded_shuffle.matrix.elastic_matrix` padded with zero rows and columns, and its genie
bound (:func:`~coded_shuffle.bounds.lower_bound`, every report's ``lower_bound``) is the bound of
the rectangular shuffle. A leaving worker can pair with no one (it wants nothing), so its records
go uncoded, as from the source of :func:`~coded_shuffle.engine.elastic.elastic_transition`; in the
exchange it sends them itself before it leaves. Records of different sizes go whole, each of its
own length, as at a fixed ``K``; a transition's bound in bytes is then the genie bound of the same
padded matrix counted in bytes (:func:`~coded_shuffle.matrix.shuffle_matrix` with ``sizes``), that
of the rectangular shuffle weighted by size. One batch a worker (``M = 1``): the pieces of a
storage are labelled by subsets of the other ``K - 1`` workers and do not follow a change of
``K`` (:mod:`.elastic`); in one process a change of ``K`` with a storage is a re-cut of the bytes
the workers hold (:func:`~.recut.recut_run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_int
from ..orders import epoch_order, placement_from_owner, placement_from_permutation
from .schedule import Epoch, EpochSchedule

__all__ = ["ElasticSchedule", "check_worker_counts"]


def check_worker_counts(workers: object, *, N: int, transitions: int | None = None) -> tuple[int, ...]:
    """``workers`` (one count of workers an epoch) checked: ints ``1 <= K_t <= N``, at least one,
    and ``transitions + 1`` of them when ``transitions`` is given. Raises naming ``workers``.

    Examples
    --------
    >>> check_worker_counts([4, 3, 4], N=10, transitions=2)
    (4, 3, 4)
    >>> check_worker_counts([4, 3], N=10, transitions=2)
    Traceback (most recent call last):
    ...
    ValueError: Argument 'workers' must give 3 worker counts (one an epoch), not 2.
    """
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence) or not workers:
        raise ValueError("Argument 'workers' must be a sequence of at least one worker count.")
    counts = tuple(check_int(K, "workers", minimum=1) for K in workers)
    if max(counts) > N:
        raise ValueError(f"Argument 'workers' must be at most N = {N} each, not {max(counts)}.")
    if transitions is not None and len(counts) != transitions + 1:
        raise ValueError(
            f"Argument 'workers' must give {transitions + 1} worker counts (one an epoch), not {len(counts)}."
        )
    return counts


@dataclass(frozen=True)
class ElasticSchedule(EpochSchedule):
    """The epochs ``start, start + 1, ...`` of ``N`` records, ``workers[i]`` workers at epoch
    ``start + i`` (the last count after), on ``K = max(workers)`` slots under ``scheme`` (one
    batch a worker, made for ``K`` workers): an :class:`~.schedule.EpochSchedule` whose epochs
    each have their number of workers (records cut in equal counts).

    Examples
    --------
    >>> from coded_shuffle.engine import scheme_for
    >>> from coded_shuffle.orders import OrderSpec
    >>> s = ElasticSchedule(N=12, K=4, seed=0, spec=OrderSpec(), scheme=scheme_for("coded", K=4),
    ...                     workers=(4, 2, 3), start=5)
    >>> [(e.t, e.placement.sizes().tolist()) for e in s.epochs(start=5, count=3)]
    [(5, [3, 3, 3, 3]), (6, [6, 6, 0, 0]), (7, [4, 4, 4, 0])]
    """

    workers: tuple[int, ...] = ()
    start: int = 0

    def __post_init__(self) -> None:
        counts = check_worker_counts(self.workers, N=self.N)
        if max(counts) != self.K:
            raise ValueError(
                f"Argument 'workers' must have K = {self.K} as its largest count, not {max(counts)}."
            )
        if self.scheme.M != 1 or self.sizes is not None:
            raise ValueError("Argument 'scheme' must keep one batch a worker of records cut in equal counts.")
        object.__setattr__(self, "workers", counts)

    def workers_at(self, t: int) -> int:
        """``K_t``, the workers of epoch ``t``."""
        return self.workers[min(max(t - self.start, 0), len(self.workers) - 1)]

    def epoch(self, t: int, previous: Epoch | None = None) -> Epoch:
        """Epoch ``t``: its order cut into ``K_t`` batches, the slots after them empty."""
        order = np.asarray(epoch_order(self.N, seed=self.seed, epoch=t, spec=self.spec))
        cut = placement_from_permutation(order, self.workers_at(t))
        placement = placement_from_owner(np.asarray(cut.owner, dtype=np.int64), self.K)
        held = (
            self.scheme.start(placement)
            if previous is None
            else self.scheme.following(previous.held, placement)
        )
        return Epoch(t=t, order=order, placement=placement, held=held)
