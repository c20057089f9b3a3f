"""The epochs of a job: each epoch's order, its batches, and what every worker holds under a scheme.

Every driver walks the same schedule (the in-process engine, the MPI job and its job of peers,
both loaders and, through them, the PyTorch dataset): epoch ``t``'s global order comes from
``(seed, t)`` alone (:func:`coded_shuffle.orders.epoch_order`), worker ``k``'s batch is the
``k``-th contiguous run of it, and what the workers hold is the scheme's placement model
(:mod:`coded_shuffle.engine.holding`) started at the first epoch and followed from each epoch to
the next.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..matrix import shuffle_matrix
from ..network import Network, TransitionTimes, predict, predict_bytes
from ..orders import OrderSpec, Placement, epoch_order, placement_from_permutation
from .schemes import Scheme, scheme_for

__all__ = ["Epoch", "EpochSchedule"]


@dataclass(frozen=True)
class Epoch:
    """One epoch of a schedule: its number, global order, batches, and what the workers hold."""

    t: int
    order: np.ndarray
    placement: Placement
    held: Any

    def batch(self, worker: int) -> np.ndarray:
        """Worker ``worker``'s record ids of this epoch, in the epoch's order."""
        cut = np.concatenate(([0], np.cumsum(self.placement.sizes())))  # contiguous runs of the order
        return self.order[int(cut[worker]) : int(cut[worker + 1])].astype(np.int64)


@dataclass(frozen=True)
class EpochSchedule:
    """The epochs ``start, start + 1, ...`` of ``N`` records on ``K`` workers under ``scheme``.

    The batches are runs of equal counts, or, with ``sizes`` (each record's bytes) and
    ``balance="bytes"``, of equal bytes within one record
    (:func:`~coded_shuffle.orders.epoch_batch_sizes`).

    Examples
    --------
    >>> from coded_shuffle.engine import scheme_for
    >>> s = EpochSchedule(N=6, K=2, seed=0, spec=OrderSpec(), scheme=scheme_for("coded", K=2))
    >>> [(e.t, e.batch(0).size) for e in s.epochs(start=3, count=2)]
    [(3, 3), (4, 3)]
    """

    N: int
    K: int
    seed: int
    spec: OrderSpec
    scheme: Scheme
    sizes: np.ndarray | None = None
    balance: str = "count"

    def epoch(self, t: int, previous: Epoch | None = None) -> Epoch:
        """Epoch ``t``: what the workers hold starts from scratch, or follows ``previous``."""
        order = np.asarray(epoch_order(self.N, seed=self.seed, epoch=t, spec=self.spec))
        placement = placement_from_permutation(order, self.K, sizes=self.sizes, balance=self.balance)
        scheme = self.scheme
        held = scheme.start(placement) if previous is None else scheme.following(previous.held, placement)
        return Epoch(t=t, order=order, placement=placement, held=held)

    def epochs(self, *, start: int, count: int) -> Iterator[Epoch]:
        """Epochs ``start .. start + count - 1``, each following the one before."""
        previous = None
        for t in range(start, start + count):
            previous = self.epoch(t, previous)
            yield previous


def predicted_times(
    N: int, K: int, *, seed: int, spec: OrderSpec, epoch: int, record_bytes: int, network: Network,
    strategy: str = "greedy", sizes: np.ndarray | None = None,
) -> TransitionTimes:  # fmt: skip
    """The time bound and each mode's predicted time (:func:`coded_shuffle.network.predict`) of
    transition ``epoch -> epoch + 1`` of these epochs, records of ``record_bytes``, on
    ``network``: what ``mode="auto"`` chooses from before the job starts. ``sizes``: the bytes of
    each of the ``N`` records, where they differ; every link's load then counts them
    (:func:`coded_shuffle.network.predict_bytes`) and ``record_bytes`` is not used.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> t = predicted_times(6000, 4, seed=0, spec=OrderSpec(), epoch=0, record_bytes=1024,
    ...                     network=Network.parse("master=1000,up=1000,down=1000"))
    >>> t.choice, t.bound_seconds <= min(t.predicted_seconds.values())
    ('exchange', True)
    """
    schedule = EpochSchedule(N=N, K=K, seed=seed, spec=spec, scheme=scheme_for("coded", K=K))
    now = schedule.epoch(epoch)
    nxt = schedule.epoch(epoch + 1, now).placement
    if sizes is not None:
        return predict_bytes(now.placement, nxt, sizes=sizes, network=network, strategy=strategy)
    return predict(shuffle_matrix(now.placement, nxt), record_bytes=record_bytes, network=network,
                   strategy=strategy)  # fmt: skip


def check_network(network: object, choice: object, *, name: str) -> Network | None:
    """``network`` for a run whose ``name`` (the mode or the scheme) is ``choice``: None, or a
    :class:`~coded_shuffle.network.Network`; ``auto`` needs one. Raises naming the argument.

    Examples
    --------
    >>> check_network(None, "coded", name="mode") is None
    True
    >>> check_network(None, "auto", name="scheme")
    Traceback (most recent call last):
    ...
    ValueError: Argument 'scheme' can be 'auto' only with a 'network' to predict the times on.
    """
    if network is None:
        if choice == "auto":
            raise ValueError(
                f"Argument {name!r} can be 'auto' only with a 'network' to predict the times on."
            )
        return None
    if not isinstance(network, Network):
        raise TypeError(f"Argument 'network' must be a Network or None, not {type(network).__name__}.")
    return network
