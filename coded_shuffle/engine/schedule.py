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
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from .._predictions import Loads, _RackTerms
from ..matrix import shuffle_matrix
from ..network import MODES, Network, TransitionTimes, explain, predict, predict_bytes, times_of
from ..orders import OrderSpec, Placement, epoch_order, placement_from_permutation
from ..plan import holder_words, rack_link_loads
from .schemes import Scheme, scheme_for
from .state import unit_lengths

__all__ = ["Epoch", "EpochSchedule", "exchange_rack_loads", "predicted_times", "storage_times"]


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
    ``M``, batches each worker stores; above 1, the times of its pieces (:func:`storage_times`),
    on racks each mode's on the placement it runs on (the exchange's pieces placed across them,
    the coded broadcast's as on one switch; the bound the lesser of the two).
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
    if storage > 1:
        times = _stored(schedule, schedule.epoch(epoch), network, record_bytes, strategy=strategy)
        if network.racks is None:
            return times
        exchange = scheme_for("exchange", K=K, storage=storage, record_bytes=record_bytes, sizes=sizes,
                              network=network)  # fmt: skip
        return _on_own_placements(times, replace(schedule, scheme=exchange), epoch, network, record_bytes)
    now = schedule.epoch(epoch)
    nxt = schedule.epoch(epoch + 1, now).placement
    if sizes is not None:
        return predict_bytes(now.placement, nxt, sizes=sizes, network=network, strategy=strategy)
    return predict(shuffle_matrix(now.placement, nxt), record_bytes=record_bytes, network=network,
                   strategy=strategy)  # fmt: skip


def _stored(
    schedule: EpochSchedule, now: Epoch, network: Network, record_bytes: int, *, strategy: str = "greedy",
    modes: tuple[str, ...] = ("coded", "exchange"),
) -> TransitionTimes:  # fmt: skip
    """:func:`storage_times` of the transition from epoch ``now`` of ``schedule`` (a storage's)."""
    after = schedule.epoch(now.t + 1, now)
    width = schedule.scheme.piece_bytes(record_bytes)
    return storage_times(schedule.scheme, now.held, after.held, network=network, width=width,
                         strategy=strategy, modes=modes)  # fmt: skip


def _on_own_placements(
    coded: TransitionTimes, schedule: EpochSchedule, epoch: int, network: Network, record_bytes: int
) -> TransitionTimes:  # fmt: skip
    """A storage's times on racks, each mode on the placement it runs on: the coded broadcast's
    (``coded``, of a placement blind to the racks) and the exchange's, timed here on
    ``schedule`` (the exchange on ``network``, whose pieces are placed across its racks,
    :func:`~coded_shuffle.storage.piece_placement`); the bound the lesser of the two placements'
    (each mode's time is at least its own placement's). Where the racks leave the placement
    as it is (a piece for every label, or workers that cannot send), ``coded`` as it is."""
    now = schedule.epoch(epoch)
    if getattr(now.held, "racks", None) is None:
        return coded
    own = _stored(schedule, now, network, record_bytes, modes=("exchange",))
    predicted = {**coded.predicted_seconds, "exchange": own.predicted_seconds["exchange"]}
    choice = min(MODES, key=lambda m: predicted[m])
    links = {**coded.binding_links, "exchange": own.binding_links["exchange"]}
    bound = min(coded.bound_seconds, own.bound_seconds)
    return TransitionTimes(bound, predicted, choice, explain(predicted, choice), binding_links=links)


def storage_times(
    scheme: Scheme, held: Any, held_next: Any, *, network: Network, width: int,
    coded_bytes: int | None = None, strategy: str = "greedy", modes: tuple[str, ...] = ("coded", "exchange"),
) -> TransitionTimes:  # fmt: skip
    """The time bound and each mode's predicted time of a transition with a storage of ``M > 1``
    batches under ``scheme``, from ``held`` to ``held_next`` (its piece placements), on ``network``,
    every link's load in the bytes of the pieces a worker misses: pieces of ``width`` bytes, or
    each record cut by its own length (the scheme's
    :func:`~coded_shuffle.engine.state.unit_lengths`).

    With ``d_j`` the bytes worker ``j`` misses (the pieces of its next batch whose holders it is
    not among):

    - **bound**: ``max_j d_j / down`` (a downlink carries at least what its worker misses), and,
      where the workers cannot send, ``L / master`` with ``L`` the genie bound of the pieces'
      demand in bytes (:func:`~coded_shuffle.storage.demand_lower_bound`, weighted by their sizes);
      with racks also, for each rack ``r``, ``In_r / rack-down`` (the bytes its workers miss of
      pieces no worker of it holds) and ``Out_r / (min(rack-up, |r| up) + master)`` (the bytes
      workers outside it miss of pieces only its workers hold): each such piece crosses that link
      or comes from the master (``proofs/claim_15_storage_rack_time.py``, claim 13 of one batch);
    - ``coded``: the coded plan's bytes (``coded_bytes``, else planned here with ``strategy``,
      :func:`~coded_shuffle.storage.plan_storage`; none beyond
      :data:`~coded_shuffle.storage.STORAGE_MAX_K` workers) on the master's uplink and every
      downlink (each worker hears every symbol, with ``snooping`` too), without multicast on the
      relays' uplinks; with racks, once on every rack's downlink (and, without multicast, on the
      uplinks of a chain of relays in rack order);
    - ``exchange``: ``d_j`` on each downlink, and the busiest upload of the senders the exchange
      chooses (:func:`~coded_shuffle.plan.assign_senders`, the least busiest upload, in bytes);
      with racks, those the exchange on them chooses (the scheme's own where it is the exchange
      on ``network``, else :func:`~coded_shuffle.plan.assign_senders_racks`, in bytes where the
      pieces' sizes differ) and the bytes they send out of and into each rack
      (:func:`exchange_rack_loads`);
    - no ``uncoded`` nor ``split``: neither takes a storage.

    ``modes``: those predicted (the others ``inf``); without ``coded`` no coded plan is made.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> s = EpochSchedule(N=60, K=3, seed=0, spec=OrderSpec(), scheme=scheme_for("coded", K=3, storage=2))
    >>> now = s.epoch(0)
    >>> t = storage_times(s.scheme, now.held, s.epoch(1, now).held, width=1000,
    ...                   network=Network.parse("master=100,up=100,down=100"))
    >>> t.choice, t.bound_seconds == t.predicted_seconds["exchange"], t.predicted_seconds["uncoded"]
    ('exchange', True, inf)
    >>> racked = Network.parse("master=100,up=100,down=100,racks=2+1,rack-up=10,rack-down=20")
    >>> r = storage_times(s.scheme, now.held, s.epoch(1, now).held, width=1000, network=racked)
    >>> r.binding_links["exchange"], r.bound_seconds <= r.predicted_seconds["exchange"]
    ('rack-up', True)
    """
    lengths = unit_lengths(scheme)
    units, wanter, holders, assigned = scheme.exchange_plan(held, held_next)  # type: ignore[attr-defined]
    size = np.full(units.size, width, dtype=np.int64) if lengths is None else np.asarray(lengths)[units]
    missing = float(np.bincount(wanter, weights=size, minlength=held.K).max(initial=0))
    upload = float(assigned.uploads.max(initial=0)) * (width if lengths is None else 1)
    rack = None
    if network.racks is not None:  # the exchange's own senders on them, its loads in bytes
        network.check_workers(held.K)
        sender = _rack_senders(scheme, wanter, holders, network, assigned, None if lengths is None else size)
        link_loads = rack_link_loads(wanter, sender, rack=network.rack_of(), sizes=size)
        upload = float(link_loads["uploads_bytes"].max(initial=0))
    if coded_bytes is None and "coded" in modes:
        from ..storage import STORAGE_MAX_K

        if held.K <= STORAGE_MAX_K:  # beyond, no coded plan of a storage (the exchange's alone)
            coded_bytes = _storage_coded_bytes(held, held_next, lengths, width, strategy)
    master, up, down = (0.0 if r is None else r * 1e6 / 8 for r in (network.master, network.up, network.down))
    coded = math.inf if coded_bytes is None else float(coded_bytes)
    if network.racks is not None:
        rack = _storage_rack_terms(wanter, holders, size, link_loads, network, coded)
    loads = Loads(missing, upload, float(size.sum()), coded, coded, master, up, down, network.multicast, rack)
    cuts = [missing / down, *([] if rack is None else rack.cuts)]
    if not up and master:
        from ..storage import demand_lower_bound, piece_demand

        demand = piece_demand(held, held_next.placement)
        weights = None if lengths is None else np.asarray(lengths)[demand[:, 0]]
        lower = demand_lower_bound(demand, held.K, weights=weights)[0] * (width if lengths is None else 1)
        cuts.append(lower / master)
    return times_of(loads, cuts, modes)


def _rack_senders(
    scheme: Scheme, wanter: np.ndarray, holders: np.ndarray, network: Network, assigned: Any,
    sizes: np.ndarray | None,
) -> np.ndarray:  # fmt: skip
    """Who sends each missing piece in the exchange on ``network``'s racks: the scheme's own
    senders where it is the exchange on them (or the workers cannot send), else those
    :func:`~coded_shuffle.plan.assign_senders_racks` chooses (in bytes with ``sizes``)."""
    if getattr(scheme, "network", None) is not None or not network.up:
        return np.asarray(assigned.sender)
    from ..plan import assign_senders_racks

    rack = network.rack_of()
    rates = {"up": network.up, "rack_up": network.rack_up, "rack_down": network.rack_down}
    return assign_senders_racks(wanter, holders, K=rack.size, rack=rack, sizes=sizes, **rates).sender  # type: ignore[arg-type]


def _storage_rack_terms(
    wanter: np.ndarray, holders: np.ndarray, size: np.ndarray, link_loads: dict[str, Any], network: Network,
    coded: float,
) -> _RackTerms:  # fmt: skip
    """The cuts and each mode's rack links' times of :func:`storage_times` on racks (bytes a second),
    ``link_loads`` the exchange's (:func:`~coded_shuffle.plan.rack_link_loads` of its senders)."""
    assert network.racks is not None
    bps = [0.0 if r is None else r * 1e6 / 8 for r in (network.master, network.up, network.rack_up,
                                                       network.rack_down)]  # fmt: skip
    master, up, ru, rd = bps
    rack = network.rack_of()
    sets = holders.reshape(holders.shape[0], -1)  # rows of words (one word: K <= 64)
    cuts = []
    for r, h in enumerate(network.racks):
        words = holder_words([sum(1 << int(w) for w in np.flatnonzero(rack == r))], K=rack.size)
        mask = words.reshape(1, -1)
        inside = (sets & mask).any(axis=1)  # a holder in rack r
        outside = (sets & ~mask).any(axis=1)  # a holder out of it
        wanted_in = rack[wanter] == r
        cuts.append(float(size[wanted_in & ~inside].sum()) / rd)
        if min(ru, h * up) + master > 0:
            cuts.append(float(size[~wanted_in & ~outside].sum()) / (min(ru, h * up) + master))
    out, into = (float(link_loads[k].max(initial=0)) for k in ("rack_up_bytes", "rack_down_bytes"))
    several = len(network.racks) > 1
    terms = {
        "exchange": {"rack-up": out / ru, "rack-down": into / rd},
        "coded": {"rack-down": coded / rd} if network.multicast
        else {"rack-down": coded / rd, **({"rack-up": coded / ru} if several else {})},
    }  # fmt: skip
    return _RackTerms(cuts, terms, {})


def exchange_rack_loads(
    scheme: Scheme, held: Any, held_next: Any, *, network: Network, width: int,
    sizes: np.ndarray | None = None,
) -> dict[str, Any]:  # fmt: skip
    """What each link of ``network``'s racks carries in the exchange of ``scheme`` from ``held``
    to ``held_next`` (its senders, :meth:`exchange_plan`), in units and in bytes beside them
    (:func:`~coded_shuffle.plan.rack_link_loads`, lists): each worker's ``uploads`` and
    ``downloads``, each rack's ``rack_up`` and ``rack_down``, and ``cross``, between racks in
    all. A unit's bytes: the scheme's piece lengths
    (:func:`~coded_shuffle.engine.state.unit_lengths`), else the record's ``sizes`` (one batch),
    else ``width``.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> net = Network.parse("up=100,down=100,racks=2x2,rack-up=50")
    >>> x4 = scheme_for("exchange", K=4, network=net)
    >>> s = EpochSchedule(N=40, K=4, seed=0, spec=OrderSpec(), scheme=x4)
    >>> now = s.epoch(0)
    >>> x = exchange_rack_loads(s.scheme, now.held, s.epoch(1, now).held, network=net, width=10)
    >>> x["cross_bytes"] == 10 * x["cross"], sum(x["rack_up"]) == sum(x["rack_down"]) == x["cross"]
    (True, True)
    """
    units, wanter, _, assigned = scheme.exchange_plan(held, held_next)  # type: ignore[attr-defined]
    lengths = unit_lengths(scheme)
    if lengths is None and sizes is not None and (scheme.M, scheme.pieces) == (1, 1):
        lengths = sizes
    size = np.full(units.size, width, dtype=np.int64) if lengths is None else np.asarray(lengths)[units]
    loads = rack_link_loads(wanter, assigned.sender, rack=network.rack_of(), sizes=size)
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in loads.items()}


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
