"""The epochs of a job: each epoch's order, its batches, and what every worker holds under a scheme.

Every driver walks the same schedule (the in-process engine, the MPI job and its job of peers,
both loaders and, through them, the PyTorch dataset): epoch ``t``'s global order comes from
``(seed, t)`` alone (:func:`coded_shuffle.orders.epoch_order`), worker ``k``'s batch is the
``k``-th contiguous run of it, and what the workers hold is the scheme's placement model
(:mod:`coded_shuffle.engine.holding`) started at the first epoch and followed from each epoch to
the next.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._predictions import Loads
from ..matrix import shuffle_matrix
from ..network import Network, TransitionTimes, predict, predict_bytes, times_of
from ..orders import OrderSpec, Placement, epoch_order, placement_from_permutation
from .schemes import Scheme, scheme_for
from .state import unit_lengths

__all__ = ["Epoch", "EpochSchedule", "predicted_times", "storage_times"]


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
    strategy: str = "greedy", sizes: np.ndarray | None = None, storage: int = 1, balance: str = "count",
) -> TransitionTimes:  # fmt: skip
    """The time bound and each mode's predicted time (:func:`coded_shuffle.network.predict`) of
    transition ``epoch -> epoch + 1`` of these epochs, records of ``record_bytes``, on
    ``network``: what ``mode="auto"`` chooses from before the job starts. ``sizes``: the bytes of
    each of the ``N`` records, where they differ; every link's load then counts them
    (:func:`coded_shuffle.network.predict_bytes`) and ``record_bytes`` is not used. ``storage``:
    ``M``, batches each worker stores; above 1, the times of its pieces (:func:`storage_times`).
    ``balance``: how the epochs are cut into batches, of equal counts or (``"bytes"``) of equal
    bytes within one record (:class:`EpochSchedule`), as the job that is timed cuts them.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> t = predicted_times(6000, 4, seed=0, spec=OrderSpec(), epoch=0, record_bytes=1024,
    ...                     network=Network.parse("master=1000,up=1000,down=1000"))
    >>> t.choice, t.bound_seconds <= min(t.predicted_seconds.values())
    ('exchange', True)
    """
    scheme = scheme_for("coded", K=K)
    if storage > 1:  # pieces of records of many sizes cut by their own lengths
        scheme = scheme_for("coded", K=K, storage=storage, record_bytes=record_bytes, sizes=sizes)
    cut = None  # the batches cut by count, else by the records' bytes (all of record_bytes, or sizes)
    if balance != "count":
        cut = np.full(N, record_bytes, dtype=np.int64) if sizes is None else sizes
    schedule = EpochSchedule(N=N, K=K, seed=seed, spec=spec, scheme=scheme, sizes=cut, balance=balance)
    now = schedule.epoch(epoch)
    if storage > 1:
        after = schedule.epoch(epoch + 1, now)
        width = scheme.piece_bytes(record_bytes)
        return storage_times(scheme, now.held, after.held, network=network, width=width, strategy=strategy)
    nxt = schedule.epoch(epoch + 1, now).placement
    if sizes is not None:
        return predict_bytes(now.placement, nxt, sizes=sizes, network=network, strategy=strategy)
    return predict(shuffle_matrix(now.placement, nxt), record_bytes=record_bytes, network=network,
                   strategy=strategy)  # fmt: skip


def storage_times(
    scheme: Scheme, held: Any, held_next: Any, *, network: Network, width: int,
    coded_bytes: int | None = None, strategy: str = "greedy",
) -> TransitionTimes:  # fmt: skip
    """The time bound and each mode's predicted time of a transition with a storage of ``M > 1``
    batches under ``scheme``, from ``held`` to ``held_next`` (its piece placements), on ``network``
    (without racks), every link's load in the bytes of the pieces a worker misses: pieces of
    ``width`` bytes, or each record cut by its own length (the scheme's
    :func:`~coded_shuffle.engine.state.unit_lengths`).

    With ``d_j`` the bytes worker ``j`` misses (the pieces of its next batch whose holders it is
    not among):

    - **bound**: ``max_j d_j / down`` (a downlink carries at least what its worker misses), and,
      where the workers cannot send, ``L / master`` with ``L`` the genie bound of the pieces'
      demand in bytes (:func:`~coded_shuffle.storage.demand_lower_bound`, weighted by their sizes);
    - ``coded``: the coded plan's bytes (``coded_bytes``, else planned here with ``strategy``,
      :func:`~coded_shuffle.storage.plan_storage`; none beyond
      :data:`~coded_shuffle.storage.STORAGE_MAX_K` workers) on the master's uplink and every
      downlink (each worker hears every symbol, with ``snooping`` too), without multicast on the
      relays' uplinks;
    - ``exchange``: ``d_j`` on each downlink, and the busiest upload of the senders the exchange
      chooses (:func:`~coded_shuffle.plan.assign_senders`, the least busiest upload, in bytes);
    - no ``uncoded`` nor ``split``: neither takes a storage.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> s = EpochSchedule(N=60, K=3, seed=0, spec=OrderSpec(), scheme=scheme_for("coded", K=3, storage=2))
    >>> now = s.epoch(0)
    >>> t = storage_times(s.scheme, now.held, s.epoch(1, now).held, width=1000,
    ...                   network=Network.parse("master=100,up=100,down=100"))
    >>> t.choice, t.bound_seconds == t.predicted_seconds["exchange"], t.predicted_seconds["uncoded"]
    ('exchange', True, inf)
    """
    check_storage_network(network, scheme.M)
    lengths = unit_lengths(scheme)
    units, wanter, _, assigned = scheme.exchange_plan(held, held_next)  # type: ignore[attr-defined]
    size = np.full(units.size, width, dtype=np.int64) if lengths is None else np.asarray(lengths)[units]
    missing = float(np.bincount(wanter, weights=size, minlength=held.K).max(initial=0))
    upload = float(assigned.uploads.max(initial=0)) * (width if lengths is None else 1)
    if coded_bytes is None:
        from ..storage import STORAGE_MAX_K

        if held.K <= STORAGE_MAX_K:  # beyond, no coded plan of a storage (the exchange's alone)
            coded_bytes = _storage_coded_bytes(held, held_next, lengths, width, strategy)
    master, up, down = (0.0 if r is None else r * 1e6 / 8 for r in (network.master, network.up, network.down))
    coded = math.inf if coded_bytes is None else float(coded_bytes)
    loads = Loads(missing, upload, float(size.sum()), coded, coded, master, up, down, network.multicast)
    cuts = [missing / down]
    if not up and master:
        from ..storage import demand_lower_bound, piece_demand

        demand = piece_demand(held, held_next.placement)
        weights = None if lengths is None else np.asarray(lengths)[demand[:, 0]]
        lower = demand_lower_bound(demand, held.K, weights=weights)[0] * (width if lengths is None else 1)
        cuts.append(lower / master)
    return times_of(loads, cuts, ("coded", "exchange"))


def check_storage_network(network: Network, M: int) -> None:
    """Refuse, naming the argument, a ``network`` with racks for a storage of ``M > 1`` batches,
    which :func:`storage_times` times on one switch.

    >>> try:
    ...     check_storage_network(Network.parse("up=100,down=100,racks=2x2,rack-up=400"), 2)
    ... except ValueError as e:
    ...     print(str(e).split(" (")[0])
    Argument 'network' must have no racks with storage = 2
    """
    if M != 1 and network.racks is not None:
        raise ValueError(
            f"Argument 'network' must have no racks with storage = {M} (a storage is timed on one switch), "
            f"not {network.racks_part!r}."
        )


def _storage_coded_bytes(held: Any, held_next: Any, lengths: Any, width: int, strategy: str) -> int:
    """The bytes of the coded plan of a storage's transition (:func:`~coded_shuffle.storage.plan_storage`),
    each symbol as long as its longest piece where their ``lengths`` differ."""
    from ..codec import symbol_lengths
    from ..storage import plan_storage

    plan = plan_storage(held, held_next.placement, packing=strategy, sizes=lengths)
    if lengths is None:
        return int(plan.n_symbols) * width
    return int(symbol_lengths(plan.offsets, plan.terms, lengths).sum())


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
