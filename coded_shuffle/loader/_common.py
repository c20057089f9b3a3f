"""What the loaders share: an epoch's batch (its records as rows: :mod:`.rows`), and the checks
of their options."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset
from ..engine import TransitionReport
from ..engine.schedule import check_network, predicted_times
from ..engine.schemes import REGISTRY, Scheme, registered, resolve
from ..errors import IntegrityError
from ..network import MODES, Network
from ..orders import (
    BALANCES,
    EPOCH_ORDERS,
    OrderSpec,
    auto_order,
)
from ..plan import STRATEGIES
from ..storage import check_storage
from .rows import RowLayout, bytes_records, check_decode, load_rows, open_rows, record_bytes_of

__all__ = [
    "EpochBatch", "LoadedEpoch", "RowLayout", "bytes_records", "check_decode", "load_rows", "open_rows",
    "record_bytes_of", "variable_batch", "variable_records",
]  # fmt: skip

_PROG = "coded_shuffle.loader"


# --------------------------------------------------------------------------- what a worker gets


def variable_records(data: np.ndarray, lengths: np.ndarray, *, writable: bool = False) -> np.ndarray:
    """Zero-padded rows ``data`` cut to their ``lengths``: a one-dimensional ``object`` array of
    ``uint8`` arrays, views of one new buffer of the bytes end to end (read-only by default).

    Examples
    --------
    >>> import numpy as np
    >>> [r.tolist() for r in variable_records(np.array([[1, 2], [3, 0]], np.uint8), np.array([2, 1]))]
    [[1, 2], [3]]
    """
    n = int(lengths.shape[0])
    flat = np.ascontiguousarray(data[np.arange(data.shape[1])[None, :] < lengths[:, None]])
    flat.flags.writeable = writable
    ends = np.cumsum(lengths).tolist()
    out = np.empty(n, dtype=object)
    for r, (lo, hi) in enumerate(zip([0, *ends[:-1]], ends, strict=True)):
        out[r] = flat[lo:hi]
    out.flags.writeable = False
    return out


def variable_batch(
    epoch: int, worker: int, ids: np.ndarray, data: np.ndarray, lengths: np.ndarray, *, decoded: int = 0,
    writable: bool = False, decode: Callable[[np.ndarray], Any] | None = None,
) -> EpochBatch:  # fmt: skip
    """The batch of records of variable sizes ``ids``, from their zero-padded rows ``data`` and
    their ``lengths``: each record its own bytes (:func:`variable_records`)."""
    lens = np.array(lengths, dtype=np.int64)
    lens.flags.writeable = False
    return EpochBatch(
        epoch=epoch, worker=worker, ids=ids, records=variable_records(data, lens, writable=writable),
        decoded=decoded, decode=decode, lengths=lens,
    )  # fmt: skip


def _batch_cache(batch: EpochBatch, width: int | None = None) -> Cache:
    """The records of ``batch`` as a worker's holdings (records of variable sizes zero-padded to
    ``width``, by default the longest of them, with their lengths;
    :func:`~coded_shuffle.engine.rest._widened` pads them to
    the job's width later, where it is known only then)."""
    ids = np.asarray(batch.ids, np.int64)
    if batch.lengths is None:
        return Cache(ids=ids, data=record_bytes_of(batch.records), lengths=None)
    lengths = np.asarray(batch.lengths, dtype=np.int64)
    data = np.zeros((ids.size, int(lengths.max(initial=0)) if width is None else width), dtype=np.uint8)
    for r, rec in enumerate(batch.records):
        data[r, : lengths[r]] = np.frombuffer(memoryview(rec).cast("B"), np.uint8)
    return Cache(ids=ids, data=data, lengths=lengths)


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
        Read-only rows ``X[ids]``, with the dtype and row shape of the source array. For records
        of variable sizes, a one-dimensional ``object`` array whose item ``r`` is record
        ``ids[r]``'s own bytes: a read-only ``uint8`` array of its length, never padded (views of
        one buffer of the batch's bytes).
    decoded : int
        Records this worker decoded from coded symbols, the ones that moved to it (0 at the first
        epoch, loaded from the dataset); the others were already in its cache.
    decode : callable or None
        The loader's ``decode``: iterating the batch yields ``(id, decode(record))``, ``record``
        the record's bytes as a read-only ``uint8`` array (a view, no copy); None yields the rows.
    lengths : numpy.ndarray or None
        Read-only ``int64`` bytes of each record, in the order of ``ids``, for records of
        variable sizes; None when they have one size.

    Examples
    --------
    >>> import numpy as np
    >>> b = EpochBatch(0, 1, np.array([4, 2]), np.array([[4.0], [2.0]]), decoded=0)
    >>> len(b), [(i, r.tolist()) for i, r in b]
    (2, [(4, [4.0]), (2, [2.0])])
    >>> b = EpochBatch(0, 1, np.array([4, 2]), np.array([[4.0], [2.0]]), decoded=0, decode=bytes)
    >>> [(i, len(s)) for i, s in b]
    [(4, 8), (2, 8)]
    >>> rows = np.array([[7, 8, 9], [5, 0, 0]], np.uint8)  # records of 3 and 1 bytes, zero-padded
    >>> v = variable_batch(0, 1, np.array([4, 2]), rows, np.array([3, 1]))
    >>> [(i, r.tolist()) for i, r in v], v.nbytes
    ([(4, [7, 8, 9]), (2, [5])], 4)
    """

    epoch: int
    worker: int
    ids: np.ndarray
    records: np.ndarray
    decoded: int
    decode: Callable[[np.ndarray], Any] | None = None
    lengths: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def variable(self) -> bool:
        """Whether the records have variable sizes (:attr:`records` holds each one's own bytes)."""
        return self.lengths is not None

    @property
    def nbytes(self) -> int:
        """Bytes of the batch's records (the sum of their sizes)."""
        if self.lengths is not None:
            return int(self.lengths.sum())
        return int(self.records.nbytes)

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        """Yield ``(id, row)`` pairs in the epoch's order, or ``(id, decode(record bytes))``."""
        if self.decode is None:
            yield from zip(self.ids.tolist(), self.records, strict=True)
        else:
            yield from self.samples(self.decode)

    def samples(self, decode: Callable[[np.ndarray], Any]) -> Iterator[tuple[int, Any]]:
        """Yield ``(id, decode(record))`` in the epoch's order, ``record`` the record's bytes as a
        read-only ``uint8`` array (a view of :attr:`records`; its own length when sizes vary),
        from any loader's batch.

        Examples
        --------
        >>> import numpy as np
        >>> b = EpochBatch(0, 0, np.array([1, 0]), np.array([[1, 2], [3, 4]], np.uint8), decoded=0)
        >>> list(b.samples(lambda r: int(r.sum())))
        [(1, 3), (0, 7)]
        """
        f = check_decode(decode)
        if f is None:
            raise TypeError("Argument 'decode' must be a callable (a record's bytes to a sample), not None.")
        views = self.records if self.variable else record_bytes_of(self.records)
        for i, data in zip(self.ids.tolist(), views, strict=True):
            yield i, f(data)

    def minibatches(self, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(ids, records)`` of consecutive runs of ``size`` rows (the last may be shorter).

        Records of variable sizes come as they are in :attr:`records`: an ``object`` array of
        ``size`` records, each its own bytes (a model pads or packs them as it wants).

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
    def coded_bytes(self) -> int | None:
        """Payload bytes the coded delivery of this epoch sent (0 at the first epoch; None where
        the coded plan is not made: an exchange's storage beyond 64 workers)."""
        return 0 if self.report is None else self.report.coded_bytes

    @property
    def uncoded_bytes(self) -> int:
        """Payload bytes the uncoded delivery of this epoch would send (0 at the first epoch)."""
        return 0 if self.report is None else self.report.uncoded_bytes


# --------------------------------------------------------------------------- shared checks


def _check_order(order: object) -> str | OrderSpec:
    """``order`` if it is an order name (or ``"auto"``) or an OrderSpec; else raise naming it."""
    if isinstance(order, OrderSpec):
        return order
    if isinstance(order, str):
        return check_choice(order, "order", ("auto", *EPOCH_ORDERS))
    raise TypeError(f"Argument 'order' must be an order name or an OrderSpec, not {type(order).__name__}.")


def _order_spec(order: object, N: int) -> OrderSpec:
    order = _check_order(order)
    return order if isinstance(order, OrderSpec) else OrderSpec(auto_order(order, N))


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
    decode: Callable[[np.ndarray], Any] | None = None,
) -> EpochBatch:
    """The rows of ``ids`` (in epoch order) gathered, whole, from the worker's cache (records of
    variable sizes each cut to its length)."""
    try:
        data = scheme.records(cache, ids, layout.record_bytes)
    except KeyError:
        raise IntegrityError(f"Worker {worker}: epoch {epoch}'s batch is not all in the cache.") from None
    ordered = ids.copy()
    ordered.flags.writeable = False
    if layout.variable:
        sizes = getattr(scheme.holding, "sizes", None)  # a storage's pieces: the records' own lengths
        assert cache.lengths is not None
        lengths = cache.lengths[cache.rows(ids)] if sizes is None else np.asarray(sizes)[ids]
        return variable_batch(epoch, worker, ordered, data, lengths, decoded=decoded, writable=writable,
                              decode=decode)  # fmt: skip
    return EpochBatch(
        epoch=epoch,
        worker=worker,
        ids=ordered,
        records=layout.rows(data, writable=writable),
        decoded=decoded,
        decode=decode,
    )


def _crashing() -> bool:
    """Whether this process is ending on an uncaught exception (at exit, after its traceback)."""
    return getattr(sys, "last_value", None) is not None


def check_balance(balance: object) -> str:
    """A loader's argument ``balance``: ``"count"`` (batches of equal counts) or ``"bytes"`` (of
    equal bytes, within one record); else raise naming it."""
    return check_choice(balance, "balance", BALANCES)


def batch_sizes_of(N: int, B: int, lengths: np.ndarray | None, balance: str) -> np.ndarray | None:
    """The records' sizes a schedule cuts its batches by: None by count, else each record's
    bytes (``lengths``, or ``B`` each when they have one size)."""
    if balance == "count":
        return None
    return np.full(N, B, dtype=np.int64) if lengths is None else lengths


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


def _training() -> tuple[str, ...]:
    """The schemes the loaders offer by name (:attr:`~coded_shuffle.engine.schemes.Registered.training`)."""
    return tuple(r.name for r in REGISTRY.values() if r.training)


def check_scheme(value: object, *, auto: bool = True) -> str | Scheme:
    """A loader's argument ``scheme``: a scheme of one's own (an object satisfying
    :class:`~coded_shuffle.engine.schemes.Scheme`, used as is), or the name of one the loaders
    offer (or, with ``auto``, ``"auto"``, chosen on a network); else raise naming it."""
    if isinstance(value, Scheme):
        return value
    if not isinstance(value, str):
        raise TypeError(
            f"Argument 'scheme' must be a registered scheme's name or a Scheme, not {type(value).__name__}."
        )
    if value not in _training() and not (auto and value == "auto"):
        choices = " or ".join(map(repr, _training())) + (" (or 'auto' with a network)" if auto else "")
        raise ValueError(f"Argument 'scheme' must be {choices}, not {value!r}.")
    return value


def scheme_name(scheme: str | Scheme) -> str:
    """The name of ``scheme`` (a name, or a scheme object's)."""
    return scheme if isinstance(scheme, str) else scheme.name


def among_peers(scheme: str | Scheme) -> bool:
    """Whether ``scheme`` runs in a job of peers: a scheme object that says so, or a registered
    scheme that can (:func:`~coded_shuffle.engine.schemes.runs_among_peers`)."""
    return scheme.peers if isinstance(scheme, Scheme) else registered(scheme, name="scheme").among_peers


def with_master(scheme: str | Scheme) -> bool:
    """Whether ``scheme`` runs in a job with a master: a scheme object not of peers, or a
    registered scheme that can."""
    return not scheme.peers if isinstance(scheme, Scheme) else registered(scheme, name="scheme").with_master


def _storage(
    storage: object, record_bytes: int | None, K: int, *, mode: str | Scheme = "coded", peers: bool = False,
    variable: bool = False, sizes: np.ndarray | None = None, network: Network | None = None,
) -> Scheme | None:  # fmt: skip
    """The scheme ``mode`` of ``storage`` batches a worker for these records, or raise naming
    ``storage`` (or ``scheme``). ``network``: the job's, whose racks the exchange chooses its
    senders on and places a storage's pieces across, as the engine's
    (:func:`~coded_shuffle.engine.schemes.scheme_for`).

    ``record_bytes`` None (a worker, before the master says it): only ``storage`` against ``K``
    is checked, and nothing is returned. ``variable``: records of variable sizes (the widest
    ``record_bytes``), which go whole, one batch a worker, unless ``sizes`` (their lengths, which
    the in-process loader has, and an MPI job's workers get with the records' number) are given:
    then a storage above 1 cuts each by its own length, in the coded scheme and the exchange
    (docs/storage.md);
    in another scheme a storage above 1, or a scheme of one's own that cuts records into pieces,
    is refused.
    """
    sized = variable and sizes is not None and storage != 1 and mode in ("coded", "exchange")
    try:
        if record_bytes is None:
            check_storage(storage, K)
            return None
        scheme = resolve(mode, name="scheme", K=K, storage=storage, record_bytes=record_bytes, peers=peers,  # type: ignore[arg-type]
                         sizes=sizes if sized else None, network=network)  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("Argument 'M' (storage)", "Argument 'storage'")) from None
    if variable and storage != 1 and not sized:
        shown = repr(mode) if isinstance(mode, str) else f"of one's own ({type(mode).__name__})"
        raise ValueError(
            f"Argument 'storage' must be 1 for records of variable sizes with a scheme {shown} (only "
            f"'coded' and 'exchange', by name, cut them by their own lengths), not {storage!r}."
        )
    if variable and not sized and (scheme.M != 1 or scheme.pieces != 1):
        raise ValueError(
            f"Argument 'scheme' must deliver whole records, one batch a worker, for records of "
            f"variable sizes, not {scheme!r}."
        )
    return scheme


def _store(
    storage: object, record_bytes: int, K: int, *, mode: str | Scheme = "coded", peers: bool = False,
    variable: bool = False, sizes: np.ndarray | None = None, network: Network | None = None,
) -> Scheme:  # fmt: skip
    """:func:`_storage` of records of known width."""
    scheme = _storage(storage, record_bytes, K, mode=mode, peers=peers, variable=variable, sizes=sizes,
                      network=network)  # fmt: skip
    assert scheme is not None
    return scheme


def job_network(network: object, K: int | None) -> Network | None:
    """A loader's argument ``network`` (None, or a :class:`~coded_shuffle.network.Network` whose
    racks, if any, hold the job's ``K`` workers; None: not known yet), checked; else raise naming it."""
    net = check_network(network, None, name="scheme")
    if net is not None and net.racks is not None and K is not None:
        net.check_workers(K)
    return net


def _scheme_on(
    network: object, scheme: str | Scheme, dataset: Dataset, K: int, seed: int, spec: OrderSpec,
    storage: object, *, epoch: int, strategy: str, balance: str = "count",
) -> str | Scheme:  # fmt: skip
    """A loader's ``scheme``, checked against ``network``; ``auto`` resolved on it: of the loaders'
    schemes, the one of least predicted time of transition ``epoch -> epoch + 1`` of the batches
    cut by ``balance`` (in bytes where the records' sizes differ; with a storage of ``M > 1``
    batches, in the bytes of its pieces, each record cut by its own length where sizes differ,
    :func:`~coded_shuffle.engine.schedule.storage_times`, on racks each scheme on the placement
    it runs on)."""
    net = job_network(check_network(network, "auto", name="scheme"), K)  # given, or asked for by 'auto'
    assert net is not None
    M = 1
    if storage != 1:  # checked for these records before it is timed (auto: as the coded scheme's)
        mode = "coded" if scheme == "auto" else scheme
        M = _store(storage, dataset.record_bytes, K, mode=mode, variable=dataset.variable,
                   sizes=dataset.lengths).M  # fmt: skip
    if scheme != "auto":
        return scheme
    times = predicted_times(
        dataset.N, K, seed=seed, spec=spec, epoch=epoch, record_bytes=dataset.record_bytes,
        network=net, strategy=strategy, sizes=dataset.lengths, storage=M, balance=balance,
    )  # fmt: skip
    p = times.predicted_seconds
    return min(_training(), key=lambda m: p[m])  # a network no mode can use raised above


def choose_scheme(
    N: int, record_bytes: int, ranks: int, *, seed: int, order: object, start_epoch: int, network: object,
    strategy: str = "greedy", sizes: np.ndarray | None = None, storage: int = 1, balance: str = "count",
) -> tuple[str, str]:  # fmt: skip
    """``scheme="auto"`` of a job of ``ranks`` processes: the master's coded broadcast to
    ``ranks - 1`` workers, or the exchange among ``ranks`` peers, whichever has the least
    predicted time of transition ``start_epoch -> start_epoch + 1`` on ``network``; returns it
    and the one line that says why. ``sizes`` (each record's bytes, where they differ; the widest
    ``record_bytes``), ``storage`` and ``balance`` as the job's
    (:func:`~coded_shuffle.engine.schedule.predicted_times`): with a storage of ``M > 1``
    batches, the times of its pieces (on racks each scheme's on the placement it runs on), and
    a scheme whose workers are fewer than ``M``, or whose workers the racks do not hold (a
    job of peers has one more), cannot run.

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> choose_scheme(4000, 1024, 5, seed=0, order="auto", start_epoch=0,
    ...               network=Network.parse("master=1000,up=1000,down=1000"))[0]
    'exchange'
    """
    net = check_network(network, "auto", name="scheme")
    assert net is not None
    spec = _order_spec(order, N)
    M = check_int(storage, "storage", minimum=1)

    if net.racks is not None and net.workers not in (ranks - 1, ranks):
        net.check_workers(ranks)  # racks that hold neither job's workers: raises naming 'network'

    def time_of(mode: str, K: int) -> float:
        if K < max(1, M) or (net.racks is not None and net.workers != K):  # racks hold the job's workers
            return float("inf")
        times = predicted_times(N, K, seed=seed, spec=spec, epoch=start_epoch, record_bytes=record_bytes,
                                network=net, strategy=strategy, sizes=sizes, storage=M,
                                balance=check_balance(balance))  # fmt: skip
        return times.predicted_seconds[mode]

    # each scheme the loaders offer, on the job's ranks: all workers among peers, else one the master
    t = {m: time_of(m, ranks if registered(m).among_peers else ranks - 1) for m in _training()}
    order = sorted(t, key=MODES.index)  # the network's order breaks ties
    best = min(order, key=lambda m: t[m])  # a network no mode can use raised above
    if t[best] == float("inf"):
        raise ValueError(
            f"Argument 'network' lets no scheme run on a job of {ranks} ranks with storage = {M} (a storage "
            f"needs at least M workers; racks hold every worker of the job), not {network}."
        )
    other = min((m for m in order if m != best), key=lambda m: t[m])
    return (
        best,
        f"scheme auto chose {best}: predicted {t[best]:.3g} s against {other} {t[other]:.3g} s, on {network}",
    )
