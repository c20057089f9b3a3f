"""The in-process driver: the master and every worker in one process, stepped in lockstep.

Notation
--------
=========  ==========================================================================
``K``      number of workers
``N``      number of records
``B``      record width in bytes
``t``      epoch; a transition takes the caches of epoch ``t`` to the batches of ``t + 1``
``W``      uncoded load: records that change worker (each sent alone by the uncoded scheme)
=========  ==========================================================================

:func:`drive` (:mod:`coded_shuffle.engine.session`) runs one transition of the protocol
(:mod:`coded_shuffle.engine.protocol`): the master's role until it waits for the workers, then
each worker's role until it posts, and so on; the frames go over the transport (an
:class:`~coded_shuffle.transport.InProcessTransport` by default) as under MPI. :func:`transition`
delivers one epoch with the coded scheme, :func:`run` chains transitions over epochs (the
session's transition loop, :meth:`~coded_shuffle.engine.session.Session.epochs`, in one
process), :func:`simulate` does so on synthetic records.

Sub-packets (``subpackets=q`` in :func:`run` and :func:`simulate`): every record of ``B`` bytes is
cut into ``q`` pieces of ``B / q`` bytes (``q`` must divide ``B``; records are not padded, and
variable-length records are refused), piece ``k`` of record ``n`` being ``n q + k``. Each
transition then runs on the pieces, whose plan is :func:`coded_shuffle.plan.plan_delivery` with
``subpackets=q``; every piece is decoded and checked against its own checksum, so every record
is checked whole. The reports count symbols in pieces.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset, load_dataset  # noqa: F401 (load_dataset: doctests)
from ..network import Network
from ..orders import OrderSpec, Placement, epoch_placement, order_placement  # noqa: F401
from ..plan import STRATEGIES
from ..transport import InProcessTransport, Transport
from .protocol import MasterOptions
from .report import RunReport, TransitionReport
from .schedule import EpochSchedule, check_network, predicted_times
from .schemes import SCHEMES, Scheme, resolve
from .session import Extras, Session, drive
from .state import initial_caches, synthetic_dataset  # noqa: F401

__all__ = ["drive", "transition", "run", "simulate"]


def transition(
    dataset: Dataset,
    caches: list[Cache],
    placement_t: Placement,
    placement_t1: Placement,
    *,
    epoch: int,
    transport: Transport | None = None,
    strategy: str = "greedy",
    max_repair_rounds: int = 3,
    exact_bound: bool | None = None,
    spare: list[np.ndarray | Cache] | None = None,
    seed: int | None = None,
) -> tuple[TransitionReport, list[Cache]]:
    """Deliver epoch ``t + 1``'s batches from the caches of epoch ``t``; return the report and new caches.

    Parameters
    ----------
    dataset : Dataset
        The master's records with their load-time checksums.
    caches : list of Cache
        Worker ``k``'s records of epoch ``t`` (its batch in ``placement_t``).
    placement_t, placement_t1 : Placement
        Batches of epochs ``t`` and ``t + 1``.
    epoch : int
        ``t + 1``, written in the frame headers.
    transport : Transport, optional
        The link; a fresh :class:`~coded_shuffle.transport.InProcessTransport` by default.
    strategy : str
        Cycle packing strategy, a key of :data:`coded_shuffle.plan.STRATEGIES`.
    max_repair_rounds : int
        Rounds of re-sending failed points before giving up.
    exact_bound : bool, optional
        Passed to :func:`coded_shuffle.bounds.lower_bound` as ``exact``.
    spare : list of numpy.ndarray or Cache, optional
        Per worker, a C-contiguous ``uint8`` buffer no longer needed (the data of its cache of
        epoch ``t - 1``, or that cache itself): the new records are written over it when it is
        large enough, so a worker alternates between two buffers instead of allocating one each
        epoch. Given the cache, of records of many sizes, a new row is zeroed past its record only
        up to the old record's length (the rest is zero already) instead of to the width. The
        caller must not use those buffers afterwards.
    seed : int, optional
        The seed of the epoch orders, for the report.

    Returns
    -------
    (TransitionReport, list of Cache)

    Raises
    ------
    IntegrityError
        If some worker still lacks a verified record after ``max_repair_rounds`` repair rounds.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.random.default_rng(0).integers(0, 256, (40, 16), dtype=np.uint8))
    >>> p0, p1 = (epoch_placement(40, 4, seed=0, epoch=t) for t in (0, 1))
    >>> rep, caches = transition(ds, initial_caches(ds, p0), p0, p1, epoch=1)
    >>> rep.verified, rep.repairs, rep.lower_bound <= rep.coded_symbols <= rep.uncoded_symbols
    (True, 0, True)
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    for name, p in (("placement_t", placement_t), ("placement_t1", placement_t1)):
        if not isinstance(p, Placement):
            raise TypeError(f"Argument {name!r} must be a Placement, not {type(p).__name__}.")
        if p.N != dataset.N:
            raise ValueError(
                f"Argument {name!r} must place the dataset's N = {dataset.N} records, not {p.N}."
            )
    K = placement_t.K
    if not isinstance(caches, list) or len(caches) != K or not all(isinstance(c, Cache) for c in caches):
        raise TypeError(f"Argument 'caches' must be a list of {K} Cache objects.")
    epoch = check_int(epoch, "epoch", minimum=0)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    max_repair_rounds = check_int(max_repair_rounds, "max_repair_rounds", minimum=0)
    link: Transport = InProcessTransport(K) if transport is None else transport
    if not isinstance(link, Transport) or link.K != K:
        raise TypeError(f"Argument 'transport' must be a Transport for K = {K} workers.")
    opts = MasterOptions(
        strategy=strategy, exact_bound=exact_bound, max_repair_rounds=max_repair_rounds, seed=seed
    )
    return drive(
        link,
        SCHEMES["coded"],
        dataset,
        caches,
        (placement_t, placement_t1),
        epoch=epoch,
        opts=opts,
        spare=spare,
    )


def _mode_on(
    network: object, mode: str | Scheme, dataset: Dataset, *, K: int, seed: int, order: OrderSpec | None,
    strategy: str, storage: int, subpackets: int,
) -> str | Scheme:  # fmt: skip
    """``mode``, checked against ``network``; ``auto`` resolved on it for the first transition."""
    net = check_network(network, mode, name="mode")
    if net is None:
        return mode
    if subpackets != 1:  # the times count whole records, or a storage's pieces
        raise ValueError(
            "Argument 'network' applies to whole records (one batch a worker, or a storage's pieces), "
            f"not subpackets = {subpackets}."
        )
    if mode != "auto":
        return mode
    times = predicted_times(
        dataset.N, K, seed=seed, spec=order or OrderSpec(), epoch=0, record_bytes=dataset.record_bytes,
        network=net, strategy=strategy, sizes=dataset.lengths, storage=storage,
    )  # fmt: skip
    return times.choice


def run(
    dataset: Dataset,
    *,
    K: int,
    epochs: int,
    seed: int,
    strategy: str = "greedy",
    transport: Transport | None = None,
    max_repair_rounds: int = 3,
    exact_bound: bool | None = None,
    on_transition: Callable[[TransitionReport], None] | None = None,
    order: OrderSpec | None = None,
    subpackets: int = 1,
    storage: int = 1,
    mode: str | Scheme = "coded",
    network: Network | None = None,
) -> RunReport:
    """Run ``epochs`` transitions ``0 -> 1 -> ... -> epochs`` on ``dataset`` with ``K`` workers.

    The batches of epoch ``t`` are :func:`coded_shuffle.orders.order_placement` ``(N, K, seed=seed,
    epoch=t, spec=order)`` (by default a uniform permutation per epoch, as
    :func:`coded_shuffle.orders.epoch_placement`); the workers start with their batches of epoch 0,
    copied from the dataset.

    Parameters
    ----------
    dataset : Dataset
        The master's records.
    K, epochs, seed : int
        Workers, transitions, seed of the epoch orders.
    strategy : str
        Cycle packing strategy.
    transport : Transport, optional
        The link, shared by all transitions (default: a fresh in-process link).
    max_repair_rounds : int
        See :func:`transition`.
    exact_bound : bool, optional
        See :func:`transition`.
    on_transition : callable, optional
        Called with each :class:`TransitionReport` as soon as it is ready.
    order : OrderSpec, optional
        The epoch order (default: a uniform permutation).
    subpackets : int
        Pieces a record, ``q >= 1`` (module docstring); ``q`` must divide the record width and
        the records must have one fixed size.
    storage : int
        Batches each worker stores, ``1 <= M <= K`` (:mod:`coded_shuffle.storage`). With ``M > 1``
        the records are cut into the pieces of
        :func:`~coded_shuffle.engine.state.storage_pieces` (``C(K - 1, M - 1)``, or fewer for
        small records, down to whole records), the workers start with their
        share of the piece placement, and every transition delivers with
        :class:`~coded_shuffle.engine.schemes.StorageScheme` and updates the placement; the
        reports count pieces. ``M = 1`` is the delivery of whole batches. Records of many sizes
        are cut by their own lengths into the pieces of a record of their mean size
        (:func:`~coded_shuffle.engine.state.sized_pieces`), delivered by the coded scheme or the
        exchange.
    mode : str or Scheme
        The delivery: a scheme of one's own (an object satisfying
        :class:`~coded_shuffle.engine.schemes.Scheme`, used as is with its placement model), or
        the name of a registered one (:data:`~coded_shuffle.engine.schemes.REGISTRY`): ``coded`` (default), or
        ``uncoded`` (each record that moves, from the master to its new holder alone), or
        ``exchange`` (the workers send each other what each misses, for every storage;
        ``alltoallv`` is its old name), or ``split`` with a ``network`` that multicasts (the
        master codes a share of the moved records, the workers exchange the rest, at once:
        :class:`~coded_shuffle.engine.schemes.SplitScheme`), or ``auto`` with a ``network``: the
        mode of the least predicted time of the first transition on it
        (:func:`~.schedule.predicted_times`).
    network : Network, optional
        A network (:class:`coded_shuffle.network.Network`, whole records): every report then has
        the transition's time bound on it and each mode's predicted time (its ``on_network``
        section, :func:`~coded_shuffle.engine.report.on_network`; no ``time_gap``: in process no
        network carries the bytes), in bytes where the records' sizes differ
        (:func:`~coded_shuffle.network.predict_bytes`), in the bytes of the pieces with a
        ``storage`` above one batch (:func:`~.schedule.storage_times`, on racks too). With racks
        the exchange chooses its senders on their links
        (:func:`~coded_shuffle.plan.assign_senders_racks`), with each link's load in
        ``on_network.rack_loads``, and places a storage's pieces across them
        (:func:`~coded_shuffle.storage.piece_placement`); ``auto`` then times each mode on the
        placement it runs on.

    Returns
    -------
    RunReport

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.random.default_rng(0).integers(0, 256, (60, 8), dtype=np.uint8))
    >>> rep = run(ds, K=3, epochs=2, seed=5)
    >>> [t.epoch for t in rep.transitions], rep.verified
    ([1, 2], True)
    >>> halves = run(ds, K=3, epochs=2, seed=5, subpackets=2)  # pieces of 4 bytes
    >>> halves.verified, halves.transitions[0].units.subpackets, halves.transitions[0].records_checked
    (True, 2, 60)
    >>> big = load_dataset(np.random.default_rng(0).integers(0, 256, (60, 2048), dtype=np.uint8))
    >>> kept = run(big, K=3, epochs=2, seed=5, storage=2)  # 2 pieces of 1024 bytes, 2 holders each
    >>> kept.verified, kept.transitions[0].units.subpackets, kept.transitions[0].records_checked
    (True, 2, 60)
    >>> sized = load_dataset([bytes(range(n % 200 + 1)) for n in range(60)])  # 1 to 200 bytes
    >>> run(sized, K=3, epochs=2, seed=5, storage=2).verified  # whole records, each on 2 workers
    True
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    K = check_int(K, "K", minimum=1)
    if K > dataset.N:
        raise ValueError(f"Argument 'K' must be at most N = {dataset.N}, not {K}.")
    epochs = check_int(epochs, "epochs", minimum=0)
    seed = check_int(seed, "seed", minimum=0)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    if on_transition is not None and not callable(on_transition):
        raise TypeError(
            f"Argument 'on_transition' must be callable or None, not {type(on_transition).__name__}."
        )
    link: Transport = InProcessTransport(K) if transport is None else transport
    if order is not None and not isinstance(order, OrderSpec):
        raise TypeError(f"Argument 'order' must be an OrderSpec or None, not {type(order).__name__}.")
    mode = _mode_on(network, mode, dataset, K=K, seed=seed, order=order, strategy=strategy,
                    storage=storage, subpackets=subpackets)  # fmt: skip
    scheme = resolve(mode, K=K, storage=storage, subpackets=subpackets, record_bytes=dataset.record_bytes,
                     network=network, sizes=dataset.lengths)  # fmt: skip
    if dataset.variable and scheme.M != 1 and scheme.name not in ("coded", "exchange"):
        raise ValueError(
            f"Argument 'mode' must be 'coded' or 'exchange' for records of many sizes with a storage of "
            f"M = {scheme.M} batches, not {scheme.name!r}."
        )
    work = scheme.dataset(dataset)
    opts = MasterOptions(
        strategy=strategy, exact_bound=exact_bound, max_repair_rounds=max_repair_rounds, seed=seed,
        records=(dataset.N, dataset.record_bytes), network=network,
    )  # fmt: skip
    schedule = EpochSchedule(N=dataset.N, K=K, seed=seed, spec=order or OrderSpec(), scheme=scheme)
    now = schedule.epoch(0)
    caches = [work.cache(scheme.held(now.held, k), packed=scheme.packs) for k in range(K)]
    made = None if on_transition is None else (lambda rep, _lost, _links: on_transition(rep))
    session = Session.local(link, (scheme,), work, caches, opts=opts, extras=Extras(report=made))
    reports = [turn.reports[0] for turn in session.epochs(schedule, now, epochs)]
    return RunReport(
        K=K, N=dataset.N, record_bytes=dataset.record_bytes, epochs=epochs, seed=seed, strategy=strategy,
        transitions=tuple(reports), subpackets=scheme.pieces,
        storage=scheme.M,
    )  # fmt: skip


def simulate(
    *,
    K: int,
    N: int,
    record_bytes: int,
    epochs: int,
    seed: int,
    strategy: str = "greedy",
    transport: Transport | None = None,
    max_repair_rounds: int = 3,
    exact_bound: bool | None = None,
    on_transition: Callable[[TransitionReport], None] | None = None,
    order: OrderSpec | None = None,
    subpackets: int = 1,
    storage: int = 1,
    mode: str | Scheme = "coded",
    network: Network | None = None,
) -> RunReport:
    """Run the in-process engine on ``N`` random records of ``record_bytes`` bytes.

    The records come from :func:`synthetic_dataset` (a stream of ``seed`` separate from the epoch
    orders); everything else, ``subpackets``, ``storage``, ``mode`` and ``network`` included, is
    :func:`run`.

    Examples
    --------
    >>> rep = simulate(K=4, N=200, record_bytes=64, epochs=2, seed=0)
    >>> rep.verified, all(t.repairs == 0 for t in rep.transitions)
    (True, True)
    """
    K = check_int(K, "K", minimum=1)
    N = check_int(N, "N", minimum=1)
    if N < K:
        raise ValueError(f"Argument 'N' must be at least K = {K}, not {N}.")
    dataset = synthetic_dataset(N, record_bytes, seed=seed)
    return run(
        dataset,
        K=K,
        epochs=epochs,
        seed=seed,
        strategy=strategy,
        transport=transport,
        max_repair_rounds=max_repair_rounds,
        exact_bound=exact_bound,
        on_transition=on_transition,
        order=order,
        subpackets=subpackets,
        storage=storage,
        mode=mode,
        network=network,
    )
