"""The worker side for a training loop: each epoch, a worker's batch as numpy rows, in epoch order.

Notation
--------
=========  ==========================================================================
``K``      number of workers
``N``      number of records: the rows ``X[0] .. X[N-1]`` of one array (or ``.npy`` file)
``t``      epoch; epoch ``t``'s global order is cut into ``K`` contiguous batches
=========  ==========================================================================

A training job reads its data as rows ``X[i]`` of one array, with their dtype and shape. Every
epoch has a global order of the ``N`` rows (:func:`coded_shuffle.orders.epoch_order`, from
``(seed, t)`` alone); worker ``k``'s batch is the ``k``-th contiguous run of it. A worker holds
its current batch (its cache). The first epoch is loaded directly from the dataset; every later epoch's
batch is decoded from the master's coded delivery and the worker's cache
(:func:`coded_shuffle.engine.transition` in-process, the same codec over MPI), each decoded
record checked against the checksum fixed when the dataset was loaded, and the holdings of all
workers checked against the master's ground truth, **before** the batch is yielded. A batch that
cannot be verified is never yielded: :class:`~coded_shuffle.errors.IntegrityError` is raised.

What a worker gets, per epoch, is an :class:`EpochBatch`: the ids of its batch in the epoch's
order, and ``records``, the rows ``X[ids]`` (same dtype, same row shape as ``X``). Iterating it
yields ``(id, row)`` pairs.

Two drivers, one worker view:

- :class:`InProcessLoader` runs the master and the ``K`` workers in one process on a shared
  :class:`~coded_shuffle.transport.InProcessTransport`. Iterating it yields one
  :class:`LoadedEpoch` per epoch (all ``K`` batches and the transition's report);
  :meth:`InProcessLoader.worker` gives worker ``k``'s own iterator of :class:`EpochBatch`.
- :class:`MPILoader` runs under ``mpiexec -n K+1``: rank 0 is the master and calls
  :meth:`MPILoader.serve`; the other ranks iterate it and get their :class:`EpochBatch` each
  epoch. MPI is reached only through :class:`~coded_shuffle.transport.MPITransport` (its
  link and its communicator).

``epochs`` counts the epochs a worker trains on, ``start_epoch .. start_epoch + epochs - 1``
(``start_epoch = 0`` by default; a job resumed from a checkpoint passes the epoch it resumes at,
whose batches are then read from the dataset), so a loader makes ``epochs - 1`` transitions;
:func:`coded_shuffle.engine.run`'s ``epochs`` counts transitions.
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import check_choice, check_int
from .codec import (
    Cache,
    Dataset,
    load_dataset,
)
from .engine import MasterOptions, TransitionReport
from .engine.inprocess import drive
from .engine.mpi import Watchdog, attend, serve
from .engine.protocol import Stopped, master_transition, worker_stop, worker_transition
from .engine.schemes import Scheme, scheme_for
from .errors import IntegrityError, TransportError
from .orders import (
    EPOCH_ORDERS,
    OrderSpec,
    Placement,
    auto_order,
    batch_sizes,
    epoch_order,
    placement_from_permutation,
)
from .plan import STRATEGIES
from .storage import check_storage
from .transport import InProcessTransport, MPITransport, TorchTransport, mpi_abort
from .transport.torch_dist import torchrun_refusal
from .warmup import compile_once

__all__ = ["EpochBatch", "LoadedEpoch", "InProcessLoader", "MPILoader", "RowLayout", "load_rows"]

_PROG = "coded_shuffle.loader"


# --------------------------------------------------------------------------- records as rows


@dataclass(frozen=True)
class RowLayout:
    """How a record's bytes read as one row of the source array: its dtype and shape.

    Examples
    --------
    >>> import numpy as np
    >>> layout = RowLayout(np.dtype("<i2"), (2,))
    >>> layout.rows(np.array([[1, 0, 2, 0], [3, 0, 4, 0]], dtype=np.uint8)).tolist()
    [[1, 2], [3, 4]]
    """

    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def record_bytes(self) -> int:
        """Bytes of one record."""
        return int(self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64)))

    def rows(self, data: np.ndarray, *, writable: bool = False) -> np.ndarray:
        """View ``(n, B)`` ``uint8`` record bytes as ``n`` rows of this layout (read-only by default)."""
        data = np.ascontiguousarray(data)
        out = data.view(self.dtype).reshape((data.shape[0], *self.shape))
        out.flags.writeable = writable
        return out


def load_rows(source: object) -> tuple[Dataset, RowLayout]:
    """Load ``source`` as a dataset of fixed-size records, keeping the dtype and shape of a row.

    Parameters
    ----------
    source : numpy.ndarray, str or os.PathLike
        An array of shape ``(N, ...)`` (row ``X[i]`` is record ``i``), or the path of a ``.npy``
        file, opened as a read-only memmap (the rows stay on disk until read).

    Returns
    -------
    (Dataset, RowLayout)

    Examples
    --------
    >>> import numpy as np
    >>> ds, layout = load_rows(np.zeros((6, 3), dtype=np.float32))
    >>> ds.N, ds.record_bytes, layout.dtype, layout.shape
    (6, 12, dtype('float32'), (3,))
    """
    if isinstance(source, (str, os.PathLike)):
        try:
            arr = np.load(os.fspath(source), mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"Argument 'source' must name a readable .npy file: {exc}") from None
    elif isinstance(source, np.ndarray):
        arr = source
    else:
        raise TypeError(
            "Argument 'source' must be a numpy array or the path of a .npy file, "
            f"not {type(source).__name__}."
        )
    if arr.ndim < 1:
        raise ValueError("Argument 'source' must have at least 1 dimension (one row a record), not 0.")
    dataset = load_dataset(arr)
    return dataset, RowLayout(dtype=arr.dtype, shape=tuple(int(n) for n in arr.shape[1:]))


# --------------------------------------------------------------------------- what a worker gets


@dataclass(frozen=True, eq=False)
class EpochBatch:
    """Worker ``worker``'s batch of epoch ``epoch``, in the epoch's order.

    Attributes
    ----------
    epoch : int
        The epoch ``t``.
    worker : int
        The worker ``k``.
    ids : numpy.ndarray
        Read-only ``int64`` record ids, in the order of epoch ``t`` (a contiguous run of it).
    records : numpy.ndarray
        Read-only rows ``X[ids]``, with the dtype and row shape of the source array.
    decoded : int
        Records this worker decoded from coded symbols, the ones that moved to it (0 at the first
        epoch, loaded from the dataset); the others were already in its cache.

    Examples
    --------
    >>> import numpy as np
    >>> b = EpochBatch(0, 1, np.array([4, 2]), np.array([[4.0], [2.0]]), decoded=0)
    >>> len(b), [(i, r.tolist()) for i, r in b]
    (2, [(4, [4.0]), (2, [2.0])])
    """

    epoch: int
    worker: int
    ids: np.ndarray
    records: np.ndarray
    decoded: int

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(id, row)`` pairs in the epoch's order."""
        yield from zip(self.ids.tolist(), self.records, strict=True)

    def minibatches(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(ids, records)`` of consecutive runs of ``size`` rows (the last may be shorter).

        Examples
        --------
        >>> import numpy as np
        >>> b = EpochBatch(0, 0, np.arange(5), np.arange(5.0), decoded=0)
        >>> [r.tolist() for _, r in b.minibatches(2)]
        [[0.0, 1.0], [2.0, 3.0], [4.0]]
        """
        size = check_int(size, "size", minimum=1)
        for lo in range(0, len(self), size):
            yield self.ids[lo : lo + size], self.records[lo : lo + size]


@dataclass(frozen=True, eq=False)
class LoadedEpoch:
    """All ``K`` batches of one epoch (in-process), with the transition that delivered them.

    Attributes
    ----------
    epoch : int
        The epoch ``t``.
    batches : tuple of EpochBatch
        Worker ``k``'s batch at index ``k``.
    report : TransitionReport or None
        The transition ``t - 1 -> t`` (coded and uncoded bytes, checks), ``None`` at the first
        epoch (read from the dataset).
    """

    epoch: int
    batches: tuple[EpochBatch, ...]
    report: TransitionReport | None

    @property
    def coded_bytes(self) -> int:
        """Payload bytes the coded delivery of this epoch sent (0 at the first epoch)."""
        return 0 if self.report is None else self.report.coded_bytes

    @property
    def uncoded_bytes(self) -> int:
        """Payload bytes the uncoded delivery of this epoch would send (0 at the first epoch)."""
        return 0 if self.report is None else self.report.uncoded_bytes


# --------------------------------------------------------------------------- shared checks


def _order_spec(order: object, N: int) -> OrderSpec:
    if isinstance(order, OrderSpec):
        return order
    if isinstance(order, str):
        name = check_choice(order, "order", ("auto", *EPOCH_ORDERS))
        return OrderSpec(auto_order(name, N))
    raise TypeError(f"Argument 'order' must be an order name or an OrderSpec, not {type(order).__name__}.")


def _epoch_layout(N: int, K: int, *, seed: int, epoch: int, spec: OrderSpec) -> tuple[np.ndarray, Placement]:
    """Epoch ``epoch``'s global order and its placement on ``K`` workers."""
    order = epoch_order(N, seed=seed, epoch=epoch, spec=spec)
    return order, placement_from_permutation(order, K)


def _bounds(N: int, K: int) -> np.ndarray:
    """Start of each worker's run of positions, and the end: ``K + 1`` offsets."""
    return np.concatenate([[0], np.cumsum(batch_sizes(N, K))])


def _batch(
    epoch: int,
    worker: int,
    ids: np.ndarray,
    cache: Cache,
    layout: RowLayout,
    *,
    decoded: int,
    scheme: Scheme,
    writable: bool = False,
) -> EpochBatch:
    """The rows of ``ids`` (in epoch order) gathered, whole, from the worker's cache."""
    try:
        data = scheme.records(cache, ids, layout.record_bytes)
    except KeyError:
        raise IntegrityError(f"Worker {worker}: epoch {epoch}'s batch is not all in the cache.") from None
    ordered = ids.copy()
    ordered.flags.writeable = False
    return EpochBatch(
        epoch=epoch,
        worker=worker,
        ids=ordered,
        records=layout.rows(data, writable=writable),
        decoded=decoded,
    )


def _crashing() -> bool:
    """Whether this process is ending on an uncaught exception (at exit, after its traceback)."""
    return getattr(sys, "last_value", None) is not None


def _check_common(
    epochs: object, start_epoch: object, seed: object, strategy: object, max_repair_rounds: object
) -> tuple[int, int, int, str, int]:
    return (
        check_int(epochs, "epochs", minimum=1),
        check_int(start_epoch, "start_epoch", minimum=0),
        check_int(seed, "seed", minimum=0),
        check_choice(strategy, "strategy", STRATEGIES),
        check_int(max_repair_rounds, "max_repair_rounds", minimum=0),
    )


def _storage(storage: object, record_bytes: int | None, K: int) -> Scheme | None:
    """The coded scheme of ``storage`` batches a worker for these records, or raise naming ``storage``.

    ``record_bytes`` None (a worker, before the master says it): only ``storage`` against ``K``
    is checked, and nothing is returned.
    """
    try:
        if record_bytes is None:
            check_storage(storage, K)
            return None
        scheme = scheme_for("coded", K=K, storage=storage)  # type: ignore[arg-type]
        scheme.piece_bytes(record_bytes)  # pieces too small are refused here
        return scheme
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("Argument 'M' (storage)", "Argument 'storage'")) from None


def _store(storage: object, record_bytes: int, K: int) -> Scheme:
    """:func:`_storage` of records of known width."""
    scheme = _storage(storage, record_bytes, K)
    assert scheme is not None
    return scheme


# --------------------------------------------------------------------------- in-process


class InProcessLoader:
    """The master and ``K`` workers in one process: each epoch, every worker's batch as rows.

    Iterating the loader yields one :class:`LoadedEpoch` per epoch, ``start_epoch`` to
    ``start_epoch + epochs - 1``;
    :meth:`worker` yields worker ``k``'s :class:`EpochBatch` objects alone. The loader is one run:
    the epochs are made once, in lockstep, and every consumer sees the same ones.

    Memory: besides the dataset (a memmap stays on disk), the workers' caches (``N`` records),
    the buffers of the previous caches (reused for the next epoch's records), and the rows of
    the current epoch handed out (copies, so that they stay valid after the next transition).

    Parameters
    ----------
    source : numpy.ndarray, str or os.PathLike
        The records: an array of shape ``(N, ...)`` or the path of a ``.npy`` file (read as a
        memmap); row ``X[i]`` is record ``i``, returned with its dtype and shape.
    K : int
        Workers, at most ``N``.
    epochs : int
        Epochs to yield (``epochs - 1`` coded transitions).
    start_epoch : int
        The first epoch, read from the dataset (default 0; a resumed job passes its epoch).
    seed : int
        Seed of the epoch orders.
    order : str or OrderSpec
        The epoch order: ``"auto"`` (default), a name of :data:`coded_shuffle.orders.EPOCH_ORDERS`,
        or an :class:`~coded_shuffle.orders.OrderSpec` with shard options.
    strategy : str
        Cycle packing strategy of the plans (:data:`coded_shuffle.plan.STRATEGIES`).
    transport : InProcessTransport, optional
        The shared link (default: a fresh one); a ``fault`` hook on it exercises the repairs.
    max_repair_rounds : int
        See :func:`coded_shuffle.engine.transition`.
    storage : int
        Batches each worker stores, ``1 <= M <= K`` (:mod:`coded_shuffle.storage`): above 1 a
        worker keeps its share of every record's pieces from epoch to epoch and receives only
        the coded pieces it lacks; it still yields its batch, whole records. Records must be at
        least ``C(K - 1, M - 1)`` times :data:`~coded_shuffle.engine.state.MIN_PIECE_BYTES`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(20, dtype=np.float64).reshape(10, 2)
    >>> loader = InProcessLoader(X, K=2, epochs=3, seed=0)
    >>> for ep in loader:
    ...     b = ep.batches[1]
    ...     assert np.array_equal(b.records, X[b.ids])
    ...     print(ep.epoch, len(b), b.records.dtype, ep.report is None or ep.report.verified)
    0 5 float64 True
    1 5 float64 True
    2 5 float64 True
    """

    def __init__(
        self,
        source: object,
        *,
        K: int,
        epochs: int,
        start_epoch: int = 0,
        seed: int = 0,
        order: str | OrderSpec = "auto",
        strategy: str = "greedy",
        transport: InProcessTransport | None = None,
        max_repair_rounds: int = 3,
        storage: int = 1,
    ) -> None:
        self.dataset, self.layout = load_rows(source)
        N = self.dataset.N
        self.K = check_int(K, "K", minimum=1)
        if self.K > N:
            raise ValueError(f"Argument 'K' must be at most N = {N}, not {self.K}.")
        self.epochs, self.start_epoch, self.seed, self.strategy, self.max_repair_rounds = _check_common(
            epochs, start_epoch, seed, strategy, max_repair_rounds
        )
        self.scheme = _store(storage, self.dataset.record_bytes, self.K)
        self._work = self.scheme.dataset(self.dataset)
        self.order = _order_spec(order, N)
        compile_once(prog=_PROG)
        if transport is None:
            transport = InProcessTransport(self.K)
        elif not isinstance(transport, InProcessTransport) or transport.K != self.K:
            raise TypeError(f"Argument 'transport' must be an InProcessTransport for K = {self.K} workers.")
        self.transport = transport
        self._current: LoadedEpoch | None = None
        self._state: tuple[list[Cache], Any] | None = None
        self._spare: list[np.ndarray] | None = None
        #: The reports of the transitions made so far, in order.
        self.reports: list[TransitionReport] = []

    @property
    def N(self) -> int:
        """Number of records."""
        return self.dataset.N

    def _epoch(self, t: int) -> LoadedEpoch:
        """Epoch ``t``: the current one, or the next one (made now); others are an error."""
        cur = self.start_epoch - 1 if self._current is None else self._current.epoch
        if t == cur and self._current is not None:
            return self._current
        if t != cur + 1:
            raise RuntimeError(
                f"Epoch {t} was asked for while the loader is at epoch {cur}: an in-process loader "
                "is one run, and its workers go through the epochs in lockstep."
            )
        N, K, scheme = self.N, self.K, self.scheme
        order, placement = _epoch_layout(N, K, seed=self.seed, epoch=t, spec=self.order)
        report: TransitionReport | None = None
        if self._state is None:
            held = scheme.start(placement)
            caches = [self._work.cache(scheme.held(held, k)) for k in range(K)]
            decoded = [0] * K
        else:
            old, previous = self._state
            held = scheme.following(previous, placement)
            opts = MasterOptions(
                strategy=self.strategy, max_repair_rounds=self.max_repair_rounds, seed=self.seed
            )
            report, caches = drive(
                self.transport, scheme, self._work, old, (previous, held), epoch=t, opts=opts,
                spare=self._spare,
            )  # fmt: skip
            report = scheme.report(report, self.dataset)
            if not report.verified:
                raise IntegrityError(f"Epoch {t}: the workers' records did not match the master's checksums.")
            # Epoch t - 1's buffers will hold epoch t + 1's records (the rows yielded are copies).
            self._spare = [c.data for c in old]
            moved = scheme.owners(previous) != placement.owner
            decoded = np.bincount(placement.owner[moved], minlength=K).tolist()
            self.reports.append(report)
        self._state = (caches, held)
        cut = _bounds(N, K)
        batches = tuple(
            _batch(
                t,
                k,
                order[cut[k] : cut[k + 1]].astype(np.int64),
                caches[k],
                self.layout,
                decoded=decoded[k],
                scheme=scheme,
            )
            for k in range(K)
        )
        self._current = LoadedEpoch(epoch=t, batches=batches, report=report)
        return self._current

    def __iter__(self) -> Iterator[LoadedEpoch]:
        for t in range(self.start_epoch, self.start_epoch + self.epochs):
            yield self._epoch(t)

    def worker(self, k: int) -> Iterator[EpochBatch]:
        """Worker ``k``'s iterator: its :class:`EpochBatch` of each epoch, in order.

        The workers' iterators advance together: the next epoch is made when the first of them
        asks for it, and a worker that has fallen a full epoch behind gets a ``RuntimeError``.

        Examples
        --------
        >>> import numpy as np
        >>> loader = InProcessLoader(np.arange(12).reshape(6, 2), K=3, epochs=2, seed=1)
        >>> w = [loader.worker(k) for k in range(3)]
        >>> for step in zip(*w):
        ...     print([len(b) for b in step], sorted(i for b in step for i in b.ids.tolist()))
        [2, 2, 2] [0, 1, 2, 3, 4, 5]
        [2, 2, 2] [0, 1, 2, 3, 4, 5]
        """
        k = check_int(k, "k", minimum=0)
        if k >= self.K:
            raise ValueError(f"Argument 'k' must be less than K = {self.K}, not {k}.")
        return (self._epoch(t).batches[k] for t in range(self.start_epoch, self.start_epoch + self.epochs))


# --------------------------------------------------------------------------- MPI


class MPILoader:
    """The same epochs across processes: rank 0 serves, every other rank iterates its batches.

    Run under ``mpiexec -n K+1 python -m mpi4py prog.py`` (so that a failing rank aborts the
    job). Every rank builds the loader with the same options; the master (the transport's root,
    rank 0 by default) calls :meth:`serve`, and worker ``k`` (rank ``k + 1``) iterates the
    loader. The master alone reads ``source``: it sends each worker its batch of the first epoch
    and the table of checksums (setup, not counted on the link), then for every epoch ``t >= 1``
    runs the transition protocol (:mod:`coded_shuffle.engine.protocol`) with the coded scheme:
    each worker decodes its batch from its cache, checks every decoded record, and the master
    checks every worker's holdings (ids and checksums) before any worker yields the batch.
    Workers hold only their current batch. Every rank must make the loader with the same
    ``epochs``, ``start_epoch``, ``seed``, ``order`` and ``strategy``.

    A worker may stop early: leaving its ``for`` loop (``break``, ``return``, an exception caught
    outside it), closing its iterator (:meth:`close`, or a ``with`` block around the loader), or
    ``sys.exit``. It tells the master at the start of the next transition; the master ends the
    job there: :meth:`serve` returns the reports so far, the other workers' iterators end
    cleanly after the batch they have (no exception), and :attr:`stopped_by` names the worker
    that stopped, on every rank. A rank that stops answering (frozen, cut off) ends the job
    within ``timeout`` seconds with one line naming it; a rank that dies ends it at once
    (``mpiexec`` stops the others).

    Parameters
    ----------
    source : numpy.ndarray, str, os.PathLike or None
        The records (as :class:`InProcessLoader`), read on the master only: the workers ignore
        it (it may be ``None`` there) and get their rows from the master.
    epochs, start_epoch, seed, order, strategy, max_repair_rounds
        As :class:`InProcessLoader`; the same on every rank.
    transport : MPITransport or TorchTransport, optional
        The link (default: ``MPITransport()`` over ``MPI.COMM_WORLD``); ``K`` is its size minus 1.
        A :class:`~coded_shuffle.transport.TorchTransport` runs the same job under ``torchrun``
        (``torch.distributed``, gloo); a rank that fails then ends its process, and ``torchrun``
        the others.
    timeout : float, optional
        Seconds any rank waits for another before it ends the job (default: a minute, plus a
        second per 20 MB of records; :func:`coded_shuffle.engine.mpi.default_timeout`).
    writable : bool
        Workers get each batch's rows writable (a fresh array per epoch, theirs to keep or
        modify, for ``torch.from_numpy``); read-only by default.
    storage : int
        Batches each worker stores (as :class:`InProcessLoader`); the same on every rank.

    Examples
    --------
    >>> loader = MPILoader("data.npy", epochs=5, seed=0)  # doctest: +SKIP
    >>> if loader.is_master:  # doctest: +SKIP
    ...     reports = loader.serve()
    ... else:
    ...     for batch in loader:
    ...         train_on(batch.records)
    """

    def __init__(
        self,
        source: object = None,
        *,
        epochs: int,
        start_epoch: int = 0,
        seed: int = 0,
        order: str | OrderSpec = "auto",
        strategy: str = "greedy",
        transport: MPITransport | TorchTransport | None = None,
        max_repair_rounds: int = 3,
        timeout: float | None = None,
        writable: bool = False,
        storage: int = 1,
    ) -> None:
        self.epochs, self.start_epoch, self.seed, self.strategy, self.max_repair_rounds = _check_common(
            epochs, start_epoch, seed, strategy, max_repair_rounds
        )
        self._storage = storage
        if not isinstance(order, (str, OrderSpec)):
            raise TypeError(
                f"Argument 'order' must be an order name or an OrderSpec, not {type(order).__name__}."
            )
        if isinstance(order, str):
            check_choice(order, "order", ("auto", *EPOCH_ORDERS))
        if timeout is not None:
            if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e9:
                raise ValueError(f"Argument 'timeout' must be a positive number of seconds, not {timeout!r}.")
            timeout = float(timeout)
        self._timeout = timeout
        self._order = order
        if transport is None:
            refusal = torchrun_refusal()  # torchrun's ranks would each make a world of one
            if refusal is not None:
                raise TransportError(refusal)
            transport = MPITransport()
        elif not isinstance(transport, (MPITransport, TorchTransport)):
            raise TypeError(
                "Argument 'transport' must be an MPITransport or a TorchTransport, "
                f"not {type(transport).__name__}."
            )
        self.transport = transport
        self.writable = bool(writable)
        self._pid = os.getpid()
        self.K = transport.K
        self.is_master = transport.is_master
        #: This rank's worker number, or None on the master.
        self.worker = transport.worker
        #: The worker that stopped early and so ended the job, or None.
        self.stopped_by: int | None = None
        self.dataset: Dataset | None = None
        self.layout: RowLayout | None = None
        #: Number of records: on the master from the start, on a worker once its first batch came.
        self.N: int | None = None
        if self.is_master:
            if source is None:
                raise TypeError(
                    "Argument 'source' must be a numpy array or the path of a .npy file on the master."
                )
            self.dataset, self.layout = load_rows(source)
            self.N = self.dataset.N
            if self.K > self.dataset.N:
                raise ValueError(
                    f"Argument 'transport' must have at most N = {self.dataset.N} workers, not {self.K}."
                )
            _storage(storage, self.dataset.record_bytes, self.K)  # refused on the master, before the job
        else:
            _storage(storage, None, self.K)  # the workers learn the record width later
        self._used = False
        self._iterator: weakref.ref[Generator[EpochBatch, None, None]] | None = None
        compile_once(prog=_PROG, announce=self.is_master)  # every rank compiles; the master says so

    def _start(self, what: str) -> None:
        if self._used:
            raise RuntimeError(f"An MPILoader runs once: {what} was already called on this rank.")
        self._used = True

    def _watchdog(self, N: int, B: int) -> Watchdog:
        abort = getattr(self.transport, "abort", mpi_abort)
        return Watchdog.for_job(self._timeout, N, B, rank=self.transport.rank, prog=_PROG, abort=abort)

    # ---- master

    def serve(self) -> list[TransitionReport]:
        """Master: deliver the epochs after ``start_epoch`` to the workers; return one report each.

        When a worker stops early, the job ends at the next transition and the reports made so
        far are returned (:attr:`stopped_by` names the worker).

        Raises
        ------
        IntegrityError
            If a worker still lacks a verified record after ``max_repair_rounds`` repair rounds,
            or the workers' holdings do not match the master's ids and checksums.
        """
        link = self.transport
        if not self.is_master:
            raise RuntimeError(f"Rank {link.rank} is a worker: iterate the loader, the master serves.")
        self._start("serve")
        assert self.dataset is not None and self.layout is not None
        ds = self.dataset
        N, K = ds.N, self.K
        spec = _order_spec(self._order, N)
        scheme = _store(self._storage, ds.record_bytes, K)
        work = scheme.dataset(ds)
        link.share((N, ds.record_bytes, self.layout.dtype, self.layout.shape))
        link.share_array(work.checksums)
        dog = self._watchdog(N, ds.record_bytes)
        first = self.start_epoch
        _, placement = _epoch_layout(N, K, seed=self.seed, epoch=first, spec=spec)
        held = scheme.start(placement)
        for k in range(K):  # setup: each worker starts with its batch (its share) of the first epoch
            link.send_rows(k, work.data[scheme.held(held, k)])
        opts = MasterOptions(strategy=self.strategy, max_repair_rounds=self.max_repair_rounds, seed=self.seed)
        reports: list[TransitionReport] = []
        try:
            for t in range(first + 1, first + self.epochs):
                _, nxt = _epoch_layout(N, K, seed=self.seed, epoch=t, spec=spec)
                nxt = scheme.following(held, nxt)
                role = master_transition(link, scheme, work, held, nxt, epoch=t, opts=opts)
                report = scheme.report(serve(link, role, watchdog=dog), ds)
                if isinstance(report, Stopped):  # a worker stopped: the job ends here
                    self.stopped_by = link.share(report.workers[0])
                    return reports
                if not report.verified:
                    raise IntegrityError(
                        f"Epoch {t}: the workers' records did not match the master's checksums."
                    )
                reports.append(report)
                held = nxt
            link.share(None)
        finally:
            dog.close()
        return reports

    # ---- worker

    def __iter__(self) -> Iterator[EpochBatch]:
        """Worker: yield this worker's :class:`EpochBatch` of each epoch, verified, in order."""
        link = self.transport
        if self.is_master:
            raise RuntimeError(f"Rank {link.rank} is the master: call serve(); the workers iterate.")
        self._start("iteration")
        iterator = self._worker_epochs()
        # Held weakly: a loop left with ``break`` drops the iterator, which tells the master at once.
        self._iterator = weakref.ref(iterator)
        # A job that ends while the iterator is held elsewhere (sys.exit with the iterator in a
        # variable) still tells the master, before MPI is finalized (atexit runs last in, first out).
        atexit.register(self.close)
        return iterator

    def close(self) -> None:
        """Worker: stop early; the master ends the job at the next transition (see the class)."""
        iterator = None if self._iterator is None else self._iterator()
        if iterator is not None and os.getpid() == self._pid:  # never from a forked copy
            iterator.close()

    def __enter__(self) -> MPILoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _worker_epochs(self) -> Generator[EpochBatch, None, None]:
        link = self.transport
        k = link.worker
        assert k is not None
        N, B, dtype, shape = link.share()
        self.N = int(N)
        layout = RowLayout(dtype=np.dtype(dtype), shape=tuple(shape))
        self.layout = layout
        scheme = _store(self._storage, B, self.K)
        sums = link.share_array(np.empty(N * scheme.pieces, dtype=np.uint64))
        dog = self._watchdog(N, B)
        spec = _order_spec(self._order, N)
        cut = _bounds(N, self.K)
        lo, hi = int(cut[k]), int(cut[k + 1])
        first = self.start_epoch
        order, placement = _epoch_layout(N, self.K, seed=self.seed, epoch=first, spec=spec)
        held = scheme.start(placement)
        ids = scheme.held(held, k)
        rows = np.empty((ids.size, scheme.piece_bytes(B)), dtype=np.uint8)
        cache = Cache(ids=ids, data=link.receive_rows(rows), lengths=None)
        if not np.array_equal(cache.checksums(), sums[ids]):
            raise IntegrityError(
                f"Worker {k}: its records of epoch {first} do not match the master's checksums."
            )
        spare = np.zeros_like(cache.data)
        t = first
        ended = False
        try:
            yield _batch(
                first, k, order[lo:hi].astype(np.int64), cache, layout, decoded=0, scheme=scheme,
                writable=self.writable,
            )  # fmt: skip
            for t in range(first + 1, first + self.epochs):
                order, nxt = _epoch_layout(N, self.K, seed=self.seed, epoch=t, spec=spec)
                nxt = scheme.following(held, nxt)
                role = worker_transition(
                    link, scheme, k, cache, (held, nxt), epoch=t, checksums=sums, spare=spare
                )
                res = attend(link, role, watchdog=dog)
                if res is None:  # another worker stopped: the job ends here
                    ended = True
                    self.stopped_by = link.share()
                    return
                if not res.verified:
                    raise IntegrityError(
                        f"Epoch {t}: the workers' records did not match the master's checksums."
                    )
                # The old cache's buffer will hold the next epoch's records (the rows yielded are copies).
                spare, cache, held = cache.data, res.cache, nxt
                yield _batch(
                    t,
                    k,
                    order[lo:hi].astype(np.int64),
                    cache,
                    layout,
                    decoded=res.decoded,
                    scheme=scheme,
                    writable=self.writable,
                )
            ended = True
            link.share()
        finally:
            # A forked copy (a DataLoader worker) never speaks for the rank, nor a process that is
            # ending on an uncaught exception (a crash is not a stop: its launcher reports it).
            if not ended and os.getpid() == self._pid and not _crashing():  # this worker stops early
                if t < first + self.epochs - 1:  # it says so where its next transition would start
                    attend(link, worker_stop(), watchdog=dog)
                self.stopped_by = link.share()
            dog.close()
