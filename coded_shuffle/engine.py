"""The engine: orders -> matrix -> plan -> encode -> deliver -> decode -> verify, epoch after epoch.

Notation
--------
=========  ==========================================================================
``K``      number of workers
``N``      number of records
``B``      record width in bytes
``t``      epoch; a transition takes the caches of epoch ``t`` to the batches of ``t + 1``
``W``      uncoded load: records that change worker (each sent alone by the uncoded scheme)
=========  ==========================================================================

One transition (:func:`transition`):

1. the master plans the delivery (:func:`coded_shuffle.plan.plan_delivery`) and encodes it into
   frames (:func:`coded_shuffle.codec.encode_plan`), which it broadcasts on the transport;
2. every worker receives the frames, rejects malformed ones, decodes its new batch from its
   cache (:func:`coded_shuffle.codec.decode_worker`) and checks every record it decoded against
   the checksum fixed at load;
3. the points a worker could not decode or that failed their check are re-sent alone in
   ``REPAIR`` frames, for up to ``max_repair_rounds`` rounds;
4. the caches are replaced, and every record of every worker is checked against the master's
   ground truth (ids and checksums), with global conservation: all workers together hold each
   of the ``N`` records exactly once.

:func:`run` chains transitions over epochs; :func:`simulate` does so on synthetic records.

Sub-packets (``subpackets=q`` in :func:`run` and :func:`simulate`): every record of ``B`` bytes is
cut into ``q`` pieces of ``B / q`` bytes (``q`` must divide ``B``; records are not padded, and
variable-length records are refused), piece ``k`` of record ``n`` being ``n q + k``. Each
transition then runs on the pieces, whose plan is :func:`coded_shuffle.plan.plan_delivery` with
``subpackets=q``; every piece is decoded and checked against its own checksum, so every record
is checked whole. The reports count symbols in pieces.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ._checks import check_choice, check_int
from .bounds import LowerBound, lower_bound
from .codec import (
    Cache,
    Dataset,
    DecodeResult,
    Frame,
    decode_worker,
    encode_plan,
    encode_plan_arrays,
    load_dataset,
    parse_frame,
)
from .errors import DecodeError, IntegrityError
from .orders import (  # noqa: F401 (epoch_placement: doctests)
    OrderSpec,
    Placement,
    epoch_placement,
    order_placement,
    placement_from_owner,
)
from .plan import STRATEGIES, DeliveryPlan, plan_delivery
from .transport import InProcessTransport, LinkStats, Transport

__all__ = [
    "TransitionReport",
    "RunReport",
    "initial_caches",
    "transition",
    "transition_report",
    "run",
    "simulate",
    "check_caches",
    "synthetic_dataset",
]


@dataclass(frozen=True)
class TransitionReport:
    """One transition ``t -> t + 1``: its inputs beside what was sent, repaired and checked.

    With ``subpackets = q > 1`` every count of symbols or points (``coded_symbols``,
    ``uncoded_symbols``, ``xor_symbols``, ``lone_symbols``, ``lower_bound``, ``repairs``) is in
    pieces of ``record_bytes / q`` bytes: divide by ``q`` for records. Bytes are bytes.

    Attributes
    ----------
    epoch : int
        The epoch ``t + 1`` whose batches were delivered.
    K, N, record_bytes : int
        Workers, records, record width ``B`` (the longest length for variable records).
    strategy : str
        Cycle packing strategy.
    coded_symbols : int
        Symbols sent by the coded scheme (its load, order-2 and cycle XORs plus lone leftovers).
    uncoded_symbols : int
        Symbols the uncoded scheme would send: ``W``, one per record that changes worker.
    xor_symbols, lone_symbols : int
        The coded scheme's symbols that XOR two records, and those that carry one alone.
    coded_bytes, uncoded_bytes : int
        Payload bytes of the coded scheme as sent, and of the uncoded scheme.
    lower_bound : int
        Genie lower bound on the load, in symbols (:func:`coded_shuffle.bounds.lower_bound`).
    lower_bound_exact : bool
        Whether the bound is the exact best ordering.
    header_bytes : int
        Framing bytes (headers, entries, padding) of the coded frames.
    framing_overhead : float
        ``header_bytes / coded_bytes``.
    wire_bytes : int
        All bytes that left the master: coded frames and repair frames.
    frames_rejected : int
        Frames a worker rejected (malformed, wrong header), summed over workers.
    repairs : int
        Points re-sent alone after a failed decode or check.
    repair_bytes : int
        Wire bytes of the repair frames.
    repair_rounds : int
        Repair rounds needed (0 when nothing failed).
    records_checked : int
        Records compared with the master's checksums after the transition (``N`` when complete).
    verified : bool
        True only when every record of every worker was checked, matched, and the records are
        conserved.
    seconds : float
        Wall time of the transition.
    timings : dict
        Seconds per stage: ``plan``, ``encode``, ``decode``, ``repair``, ``check``.
    subpackets : int
        Pieces a record, ``q`` (1: whole records).
    """

    epoch: int
    K: int
    N: int
    record_bytes: int
    strategy: str
    coded_symbols: int
    uncoded_symbols: int
    xor_symbols: int
    lone_symbols: int
    coded_bytes: int
    uncoded_bytes: int
    lower_bound: int
    lower_bound_exact: bool
    header_bytes: int
    framing_overhead: float
    wire_bytes: int
    frames_rejected: int
    repairs: int
    repair_bytes: int
    repair_rounds: int
    records_checked: int
    verified: bool
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    subpackets: int = 1

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict of plain Python values.

        Examples
        --------
        >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0).transitions[0]
        >>> d = rep.to_dict()
        >>> d["K"], d["N"], d["verified"], d["coded_symbols"] <= d["uncoded_symbols"]
        (3, 30, True, True)
        """
        return asdict(self)


@dataclass(frozen=True)
class RunReport:
    """A run of several transitions, with its inputs.

    Attributes
    ----------
    K, N, record_bytes, epochs, seed : int
        The inputs.
    strategy : str
        Cycle packing strategy.
    transitions : tuple of TransitionReport
        One report per transition, in order.
    subpackets : int
        Pieces a record, ``q``.
    """

    K: int
    N: int
    record_bytes: int
    epochs: int
    seed: int
    strategy: str
    transitions: tuple[TransitionReport, ...]
    subpackets: int = 1

    @property
    def verified(self) -> bool:
        """Whether every transition was verified."""
        return all(t.verified for t in self.transitions)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict.

        Examples
        --------
        >>> simulate(K=2, N=10, record_bytes=4, epochs=2, seed=1).to_dict()["epochs"]
        2
        """
        d = asdict(self)
        d["verified"] = self.verified
        return d


def initial_caches(dataset: Dataset, placement: Placement) -> list[Cache]:
    """Return each worker's cache of epoch ``t``: copies of the records of its batch.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> [len(c) for c in initial_caches(ds, epoch_placement(4, 2, seed=0, epoch=0))]
    [2, 2]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if not isinstance(placement, Placement):
        raise TypeError(f"Argument 'placement' must be a Placement, not {type(placement).__name__}.")
    if placement.N != dataset.N:
        raise ValueError(
            f"Argument 'placement' must place the dataset's N = {dataset.N} records, not {placement.N}."
        )
    return [dataset.cache(placement.batch(k)) for k in range(placement.K)]


def check_holdings(
    dataset: Dataset,
    ids: Sequence[np.ndarray],
    checksums: Sequence[np.ndarray],
    placement: Placement,
) -> tuple[int, bool]:
    """Check what the workers hold, as ids and checksums, against the master's ground truth.

    Worker ``k`` must hold exactly the ids of its batch in ``placement``, each with the record's
    load-time checksum; together the workers must hold each of the ``N`` records exactly once
    (conservation). Used in-process by :func:`check_caches` and, on ids and checksums gathered
    from the ranks, by the MPI program.

    Returns
    -------
    (int, bool)
        Records checked, and whether all checks passed.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> p = epoch_placement(4, 2, seed=0, epoch=0)
    >>> held = [p.batch(k) for k in range(2)]
    >>> check_holdings(ds, held, [ds.checksums[i] for i in held], p)
    (4, True)
    >>> check_holdings(ds, held[::-1], [ds.checksums[i] for i in held[::-1]], p)
    (4, False)
    """
    ok = len(ids) == len(checksums) == placement.K
    checked = 0
    for k, (held, sums) in enumerate(zip(ids[: placement.K], checksums[: placement.K], strict=False)):
        checked += int(held.size)
        ok &= bool(np.array_equal(held, placement.batch(k)) and np.array_equal(sums, dataset.checksums[held]))
    every = np.concatenate(list(ids)) if len(ids) else np.empty(0, np.int64)
    ok &= every.shape[0] == dataset.N and bool(np.array_equal(np.sort(every), np.arange(dataset.N)))
    sums_all = np.concatenate(list(checksums)) if len(checksums) else np.empty(0, np.uint64)
    ok &= bool(np.array_equal(np.sort(sums_all), np.sort(dataset.checksums)))
    return checked, bool(ok and checked == dataset.N)


def check_caches(dataset: Dataset, caches: list[Cache], placement: Placement) -> tuple[int, bool]:
    """Check every worker's records against the master's ground truth (:func:`check_holdings`).

    The checksums are recomputed from the bytes each worker holds; with variable-length records
    the lengths are checked too.

    Returns
    -------
    (int, bool)
        Records checked, and whether all checks passed.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> p = epoch_placement(4, 2, seed=0, epoch=0)
    >>> check_caches(ds, initial_caches(ds, p), p)
    (4, True)
    """
    checked, ok = check_holdings(dataset, [c.ids for c in caches], [c.checksums() for c in caches], placement)
    for cache in caches:
        if cache.lengths is not None and dataset.lengths is not None:
            ok &= bool(np.array_equal(cache.lengths, dataset.lengths[cache.ids]))
    return checked, ok


def _spare_rows(spare: np.ndarray | None, cache: Cache, n: int, width: int) -> np.ndarray | None:
    """Rows ``(n, width)`` carved from a spare buffer of an earlier epoch, or None if it does not fit."""
    if spare is None or not isinstance(spare, np.ndarray) or spare.dtype != np.uint8:
        return None
    if not spare.flags.c_contiguous or not spare.flags.writeable or spare.size < n * width:
        return None
    rows = spare.reshape(-1)[: n * width].reshape(n, width)
    return None if np.shares_memory(rows, cache.data) else rows


def _receive_decode(
    link: Transport,
    worker: int,
    cache: Cache,
    need: np.ndarray,
    *,
    epoch: int,
    dataset: Dataset,
    out: np.ndarray | None = None,
) -> tuple[DecodeResult, int]:
    frames = []
    rejected = 0
    for raw in link.receive(worker):
        try:
            frame = parse_frame(raw, epoch=epoch, record_bytes=dataset.record_bytes)
        except DecodeError:
            rejected += 1
            continue
        if (frame.len_a is not None) != dataset.variable:
            rejected += 1
            continue
        frames.append(frame)
    res = decode_worker(
        cache, frames, need=need, worker=worker, epoch=epoch, checksums=dataset.checksums, out=out
    )
    return res, rejected


def transition_report(
    plan: DeliveryPlan,
    dataset: Dataset,
    placement_t: Placement,
    placement_t1: Placement,
    parsed: Sequence[Frame],
    *,
    lb: LowerBound,
    epoch: int,
    strategy: str,
    coded_stats: LinkStats,
    total_stats: LinkStats,
    rejected: int,
    repairs: int,
    rounds: int,
    checked: int,
    verified: bool,
    t_start: float,
    timings: dict[str, float],
) -> TransitionReport:
    """The :class:`TransitionReport` of one transition from what the master did.

    One place derives the counts every driver reports (symbols of each kind, coded, uncoded and
    header bytes, the framing overhead, the bytes of repairs), for :func:`transition` and the
    MPI loader alike. ``parsed`` are the coded delivery's frames; ``coded_stats`` the link's
    count after it, ``total_stats`` after the repairs.
    """
    a, b, _ = plan.transmissions()
    moved = placement_t.owner != placement_t1.owner
    if dataset.lengths is None:
        uncoded_bytes = int(moved.sum()) * dataset.record_bytes
    else:
        uncoded_bytes = int(dataset.lengths[moved].sum())
    coded_bytes = sum(f.payload_bytes for f in parsed)
    header_bytes = sum(f.header_bytes for f in parsed)
    return TransitionReport(
        epoch=epoch,
        K=placement_t.K,
        N=dataset.N,
        record_bytes=dataset.record_bytes,
        strategy=strategy,
        coded_symbols=plan.n_symbols,
        uncoded_symbols=int(plan.rates.uncoded),
        xor_symbols=int((b >= 0).sum()),
        lone_symbols=int((b < 0).sum()),
        coded_bytes=int(coded_bytes),
        uncoded_bytes=uncoded_bytes,
        lower_bound=int(lb.value),
        lower_bound_exact=bool(lb.exact),
        header_bytes=int(header_bytes),
        framing_overhead=float(header_bytes / coded_bytes) if coded_bytes else 0.0,
        wire_bytes=int(total_stats.bytes),
        frames_rejected=int(rejected),
        repairs=repairs,
        repair_bytes=int(total_stats.bytes - coded_stats.bytes),
        repair_rounds=rounds,
        records_checked=checked,
        verified=verified,
        seconds=time.perf_counter() - t_start,
        timings=timings,
    )


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
    spare: list[np.ndarray] | None = None,
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
    spare : list of numpy.ndarray, optional
        Per worker, a C-contiguous ``uint8`` buffer no longer needed (the data of its cache of
        epoch ``t - 1``): the new records are written over it when it is large enough, so a worker
        alternates between two buffers instead of allocating one each epoch. The caller must not
        use those buffers afterwards.

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
    t_start = time.perf_counter()
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
    timings: dict[str, float] = {}

    tic = time.perf_counter()
    plan = plan_delivery(placement_t, placement_t1, strategy=strategy)
    lb = lower_bound(plan.S, exact=exact_bound)
    timings["plan"] = time.perf_counter() - tic

    tic = time.perf_counter()
    frames = encode_plan(plan, dataset, epoch=epoch)
    parsed = [parse_frame(f) for f in frames]
    before = link.stats
    link.send(frames)
    timings["encode"] = time.perf_counter() - tic

    tic = time.perf_counter()
    new_caches: list[Cache] = []
    pending: dict[int, np.ndarray] = {}
    rejected = 0
    for k in range(K):
        need = placement_t1.batch(k)
        buf = spare[k] if spare is not None and k < len(spare) else None
        out = _spare_rows(buf, caches[k], int(np.unique(need).size), dataset.record_bytes)
        res, rej = _receive_decode(link, k, caches[k], need, epoch=epoch, dataset=dataset, out=out)
        rejected += rej
        new_caches.append(res.cache)
        if not res.ok:
            pending[k] = res.failed
    timings["decode"] = time.perf_counter() - tic
    coded_stats = link.stats - before

    tic = time.perf_counter()
    repairs = 0
    rounds = 0
    while pending:
        if rounds == max_repair_rounds:
            k = min(pending)
            raise IntegrityError(
                f"Worker {k}: {pending[k].size} record(s) still unverified after {rounds} repair round(s), "
                f"first point {int(pending[k][0])}."
            )
        rounds += 1
        ids = np.unique(np.concatenate(list(pending.values())))
        repairs += int(ids.size)
        link.send([encode_plan_arrays(dataset, ids, np.full(ids.size, -1), epoch=epoch, repair=True)])
        still: dict[int, np.ndarray] = {}
        for k in range(K):
            if k not in pending:
                link.receive(k)  # a broadcast: the others drop it
                continue
            empty = Cache(
                ids=np.empty(0, np.int64),
                data=np.empty((0, dataset.record_bytes), np.uint8),
                lengths=None if not dataset.variable else np.empty(0, np.int64),
            )
            res, rej = _receive_decode(link, k, empty, pending[k], epoch=epoch, dataset=dataset)
            rejected += rej
            good = np.setdiff1d(res.cache.ids, res.failed)
            if good.size:
                rows = res.cache.rows(good)
                fixed = Cache(
                    ids=good,
                    data=res.cache.data[rows],
                    lengths=None if res.cache.lengths is None else res.cache.lengths[rows],
                )
                new_caches[k] = new_caches[k].patched(fixed)
            if res.failed.size:
                still[k] = res.failed
        pending = still
    timings["repair"] = time.perf_counter() - tic
    total_stats = link.stats - before

    tic = time.perf_counter()
    checked, ok = check_caches(dataset, new_caches, placement_t1)
    timings["check"] = time.perf_counter() - tic

    report = transition_report(
        plan,
        dataset,
        placement_t,
        placement_t1,
        parsed,
        lb=lb,
        epoch=epoch,
        strategy=strategy,
        coded_stats=coded_stats,
        total_stats=total_stats,
        rejected=rejected,
        repairs=repairs,
        rounds=rounds,
        checked=checked,
        verified=ok,
        t_start=t_start,
        timings=timings,
    )
    return report, new_caches


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
    >>> halves.verified, halves.subpackets, halves.transitions[0].records_checked
    (True, 2, 60)
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
    q = check_int(subpackets, "subpackets", minimum=1)
    work = dataset if q == 1 else _pieces(dataset, q)

    def pieces(p: Placement) -> Placement:
        return p if q == 1 else placement_from_owner(np.repeat(p.owner, q), p.K)

    placement = order_placement(dataset.N, K, seed=seed, epoch=0, spec=order)
    caches = initial_caches(work, pieces(placement))
    spare: list[np.ndarray] | None = None
    reports = []
    for t in range(epochs):
        nxt = order_placement(dataset.N, K, seed=seed, epoch=t + 1, spec=order)
        old = caches
        rep, caches = transition(
            work,
            caches,
            pieces(placement),
            pieces(nxt),
            epoch=t + 1,
            transport=link,
            strategy=strategy,
            max_repair_rounds=max_repair_rounds,
            exact_bound=exact_bound,
            spare=spare,
        )
        # Epoch t's buffers will hold epoch t + 2's records: each worker alternates two buffers.
        spare = [c.data for c in old]
        if q > 1:  # the pieces of a record are checked together: records checked = pieces / q
            rep = dataclasses.replace(
                rep,
                N=dataset.N,
                record_bytes=dataset.record_bytes,
                records_checked=rep.records_checked // q,
                subpackets=q,
            )
        reports.append(rep)
        if on_transition is not None:
            on_transition(rep)
        placement = nxt
    return RunReport(
        K=K,
        N=dataset.N,
        record_bytes=dataset.record_bytes,
        epochs=epochs,
        seed=seed,
        strategy=strategy,
        transitions=tuple(reports),
        subpackets=q,
    )


def _pieces(dataset: Dataset, q: int) -> Dataset:
    """The dataset of the ``N q`` pieces: piece ``k`` of record ``n`` is row ``n q + k``."""
    if dataset.variable:
        raise ValueError(
            f"Argument 'subpackets' must be 1 for variable-length records (pieces need one size), not {q}."
        )
    if dataset.record_bytes % q:
        raise ValueError(
            f"Argument 'subpackets' must divide the record width of {dataset.record_bytes} bytes, not {q}."
        )
    return load_dataset(dataset.data.reshape(dataset.N * q, dataset.record_bytes // q))


def synthetic_dataset(N: int, record_bytes: int, *, seed: int) -> Dataset:
    """Return ``N`` random records of ``record_bytes`` bytes drawn from ``seed``.

    Examples
    --------
    >>> synthetic_dataset(5, 3, seed=0).data.shape
    (5, 3)
    """
    N = check_int(N, "N", minimum=1)
    record_bytes = check_int(record_bytes, "record_bytes", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    rng = np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(seed, spawn_key=(1 << 20,))))
    return load_dataset(rng.integers(0, 256, size=(N, record_bytes), dtype=np.uint8))


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
) -> RunReport:
    """Run the in-process engine on ``N`` random records of ``record_bytes`` bytes.

    The records come from :func:`synthetic_dataset` (a stream of ``seed`` separate from the epoch
    orders); everything else, ``subpackets`` included, is :func:`run`.

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
    )
