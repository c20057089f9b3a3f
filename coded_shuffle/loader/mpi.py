"""The MPI loader: a master rank serves, the workers iterate (``mpiexec -n K+1`` or ``torchrun``)."""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from .._checks import check_seconds
from .._progress import say
from ..codec import Cache, Dataset
from ..engine import MasterOptions, TransitionReport
from ..engine.mpi import Watchdog
from ..engine.recut import RecutReport
from ..engine.recut_serve import receive_recut_start, serve_recut_start
from ..engine.rest import HeldStart, _widened, load_worker_cache, save_worker_cache, table_dataset
from ..engine.restore import RecoveryReport
from ..engine.schedule import Epoch, EpochSchedule
from ..engine.schemes import Scheme
from ..engine.session import Session
from ..errors import IntegrityError, TransportError
from ..network import Network
from ..orders import (
    OrderSpec,
)
from ..transport import ControlLink, FramedLink, MulticastLink, default_link
from ..transport.multicast import parse_group
from ..warmup import compile_once
from ._common import (
    _PROG,
    EpochBatch,
    RowLayout,
    _batch,
    _batch_cache,
    _check_common,
    _check_order,
    _crashing,
    _order_spec,
    _storage,
    _store,
    batch_sizes_of,
    check_balance,
    check_decode,
    check_scheme,
    job_network,
    load_rows,
    with_master,
)

# --------------------------------------------------------------------------- MPI


def _units_lengths(session: Session, lengths: np.ndarray | None) -> np.ndarray | None:
    """A worker's table of its units' lengths: those of a storage's pieces (cut on every rank from
    the record sizes), else ``lengths``, the records' (None: of one size)."""
    return session.lengths if session.lengths is not None else lengths


def _join_multicast(link: ControlLink, multicast: object) -> MulticastLink:
    """Every rank wraps ``link`` in a link whose master broadcasts are multicast, or every rank
    raises naming the first rank that cannot (collective)."""
    if not isinstance(link, FramedLink) or link.peers:
        raise TypeError("Argument 'multicast' needs a link with a master (not a job of peers).")
    if not isinstance(multicast, str):
        raise TypeError(f"Argument 'multicast' must be a str GROUP:PORT, not {type(multicast).__name__}.")
    try:
        group, port = parse_group(multicast)
    except ValueError as exc:
        raise ValueError(f"Argument 'multicast': {exc}") from None
    try:
        return MulticastLink(link, group, port)
    except TransportError as exc:
        raise TransportError(f"Argument 'multicast': {exc}") from None


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
    source : RecordSource, numpy.ndarray, str, os.PathLike, sequence or mapping of them, or None
        The records (as :class:`InProcessLoader`, of one size or of variable sizes), read on the
        master only: the workers ignore it (it may be ``None`` there) and get their rows from the
        master (records of variable sizes: each worker's first batch zero-padded to the widest,
        beside the table of every record's size, in the setup, which no report counts; with
        ``storage`` above 1, in the ``coded`` scheme, every rank cuts the pieces' lengths from
        that table alike).
    epochs, start_epoch, seed, order, strategy, max_repair_rounds
        As :class:`InProcessLoader`; the same on every rank.
    transport : ControlLink, optional
        The link (default: :func:`~coded_shuffle.transport.default_link`, ``MPITransport()`` over
        ``MPI.COMM_WORLD`` under ``mpiexec``); ``K`` is its size minus 1.
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
    multicast : str, optional
        ``GROUP:PORT``: the master's broadcasts as UDP multicast datagrams to that IPv4 group
        (:class:`~coded_shuffle.transport.MulticastLink`; a link with a master).
        Every rank joins, or every rank raises :class:`~coded_shuffle.errors.TransportError`
        naming the first rank that cannot.
    scheme : str or Scheme
        The delivery, the same on every rank: ``coded`` (default), ``exchange``, or a scheme of
        one's own that runs with a master (an object satisfying
        :class:`~coded_shuffle.engine.schemes.Scheme`, used as is; ``storage`` then 1 or its own).
    network : Network, optional
        As :class:`InProcessLoader`'s (its racks, if any, of the ``K`` workers), the same on every
        rank: on racks the ``exchange`` chooses its senders and places a storage as the engine's.
    decode : callable, optional
        As :class:`InProcessLoader`: a record's bytes to the user's sample; a worker's
        :class:`EpochBatch` then yields ``(id, decode(record))``.
    balance : str
        As :class:`InProcessLoader`: ``"count"`` (default) or ``"bytes"``; the same on every rank.
    cache_dir : str or os.PathLike, optional
        A folder on each worker's host (given on every rank; the master reads none): worker ``k``
        keeps its batch of every epoch in ``cache_dir/worker-<k>.cache``
        (:mod:`coded_shuffle.engine.cache_dir`: crash-safe, checksummed), and the job starts from
        what those files hold instead of a deal from the source: each worker reads its file back
        and checks it against the master's checksums (a file cut short, altered or of another job
        is treated as absent, in one line on ``stderr``: :attr:`cache_notes`), the master sends
        from the source only the records no worker holds, and the first epoch comes by a
        transition of the scheme from the holdings (:meth:`resume` with ``held``; :attr:`held_start`).
        With ``storage`` ``M > 1`` each file holds the worker's storage (its pieces, which follow
        from epoch 0 on), and a restart restores the storage of the epoch before ``start_epoch``:
        a piece a worker lacks (its host lost, its file damaged) comes from another worker that
        stores it, or from the source when none does (:func:`~coded_shuffle.engine.restore.restore_plan`;
        :attr:`held_start` counts the bytes of each), then the transition to ``start_epoch`` is
        that of a job that never stopped. Files written by a job of another number of workers (a
        relaunch on the survivors of a lost host, or on more hosts) give the storage of
        ``start_epoch`` at this ``K`` cut again from their bytes
        (:mod:`~coded_shuffle.engine.recut_serve`: in a folder every worker sees, worker ``j``
        reads the ``j``-th file; the master sends only what no file holds, the workers each other
        the rest; :attr:`held_start` is the :class:`~coded_shuffle.engine.recut.RecutReport`).
        Records of variable sizes: each file holds the worker's units (its records, or a
        storage's pieces, each record cut by its own length) zero-padded to the widest, with their
        lengths, each checked at its length when read back; a storage of them is restored at the
        ``K`` that wrote it, or cut again at another (each record's pieces at its own length).

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
        transport: ControlLink | None = None,
        max_repair_rounds: int = 3,
        timeout: float | None = None,
        writable: bool = False,
        storage: int = 1,
        multicast: str | None = None,
        scheme: str | Scheme = "coded",
        decode: Callable[[np.ndarray], Any] | None = None,
        balance: str = "count",
        cache_dir: str | os.PathLike[str] | None = None,
        network: Network | None = None,
    ) -> None:
        self._scheme = check_scheme(scheme, auto=False)
        self._holdings(cache_dir, storage)
        self.decode = check_decode(decode)
        self.balance = check_balance(balance)
        #: Each record's bytes when the batches are cut by bytes (known on a worker from its first batch).
        self._sizes: np.ndarray | None = None
        #: Each record's length when they vary (a worker's, from the master, for its cache file).
        self._lengths: np.ndarray | None = None
        self.epochs, self.start_epoch, self.seed, self.strategy, self.max_repair_rounds = _check_common(
            epochs, start_epoch, seed, strategy, max_repair_rounds
        )
        self._storage = storage
        _check_order(order)  # before N is known
        self._timeout = None if timeout is None else check_seconds(timeout, "timeout")
        self._order = order
        network = job_network(network, None)  # before MPI is touched
        if transport is None:
            transport = default_link()
        elif not isinstance(transport, ControlLink):
            raise TypeError(
                "Argument 'transport' must be a link between processes (a ControlLink, such as an "
                f"MPITransport or a TorchTransport), not {type(transport).__name__}."
            )
        if not transport.peers and not with_master(self._scheme):
            raise ValueError(f"Argument 'scheme' must be a scheme that runs with a master, not {scheme!r}.")
        if multicast is not None:
            transport = _join_multicast(transport, multicast)
        self.transport = transport
        self.writable = bool(writable)
        self._pid = os.getpid()
        self.K = transport.K
        #: The network whose racks the exchange chooses its senders on (and places a storage across), or None.
        self.network = job_network(network, self.K)
        self.is_master = transport.is_master
        #: This rank's worker number, or None on the master.
        self.worker = transport.worker
        #: The worker that stopped early and so ended the job, or None.
        self.stopped_by: int | None = None
        #: The transitions' reports, one an epoch after the first, as they are made: on the master
        #: (the leading rank of a job of peers, :class:`~coded_shuffle.loader.PeerLoader`); empty on
        #: the other ranks, whose checks the master's verdict covers.
        self.reports: list[TransitionReport] = []
        self.dataset: Dataset | None = None
        self.layout: RowLayout | None = None
        #: Number of records: on the master from the start, on a worker once its first batch came.
        self.N: int | None = None
        if self.is_master:
            if source is None:
                raise TypeError(
                    "Argument 'source' must be the records on the master (a record source, an array, "
                    "a .npy path or a sequence of bytes), not None."
                )
            self.dataset, self.layout = load_rows(source)
            self.N = self.dataset.N
            if self.K > self.dataset.N:
                raise ValueError(
                    f"Argument 'transport' must have at most N = {self.dataset.N} workers, not {self.K}."
                )
            ds = self.dataset
            # refused before the job
            _storage(storage, ds.record_bytes, self.K, mode=self._scheme, variable=self.layout.variable,
                     sizes=ds.lengths, network=self.network)  # fmt: skip
            self._sizes = batch_sizes_of(ds.N, ds.record_bytes, ds.lengths, self.balance)
        else:
            _storage(storage, None, self.K)  # the workers learn the record width later
        self._used = False
        self._iterator: weakref.ref[Generator[EpochBatch, None, None]] | None = None
        compile_once(prog=_PROG, announce=self.is_master)  # every rank compiles; the master says so

    def _holdings(self, cache_dir: object, storage: object) -> None:
        """The loader's ``cache_dir``, checked, and its start from the workers' holdings (none yet)."""
        if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"Argument 'cache_dir' must be a folder's path, not {type(cache_dir).__name__}.")
        #: The folder of the workers' cache files, or None.
        self.cache_dir: str | os.PathLike[str] | None = cache_dir
        self._from_held = cache_dir is not None
        self._held: Cache | None = None
        self._read_from = cache_dir  # the folder of the cache files a worker starts from
        #: On the master of a job that started from the workers' holdings: how it started (a
        #: storage of ``M > 1``: how it was restored, :class:`~coded_shuffle.engine.restore.RecoveryReport`,
        #: or cut again from files of another ``K``, :class:`~coded_shuffle.engine.recut.RecutReport`).
        self.held_start: HeldStart | RecoveryReport | RecutReport | None = None
        #: On a worker: the lines said about its cache file (treated as absent, rows dropped).
        self.cache_notes: list[str] = []

    def resume(self, start_epoch: int, epochs: int, *, held: object = False) -> None:
        """Before the job starts, on every rank: run ``epochs`` epochs from ``start_epoch`` instead
        (a job resumed from a checkpoint, the loader built once).

        ``held`` not False (on every rank): the first epoch is not dealt from the source but comes
        by a transition from what the workers hold: on a worker, ``held`` is its records (a
        :class:`~coded_shuffle.codec.Cache` or an :class:`EpochBatch` it had, checked against the
        master's checksums: a record that fails is treated as absent), a folder of cache files (its
        own read back and checked, as with ``cache_dir``, none written), or None for nothing (or
        its cache file, with ``cache_dir``); on the master, any of them but False. A worker that
        holds nothing starts empty (as one that joins), a record no worker holds is sent from the
        source, and the transition to the first epoch's batches is planned from the rest
        (:attr:`held_start` on the master, with the bound of that rectangular shuffle; its report
        is the first of :attr:`reports`).
        """
        if self._used:
            raise RuntimeError("An MPILoader resumes before its job starts, not after.")
        if isinstance(held, (str, os.PathLike)):
            self._read_from, held = held, None
        if isinstance(held, EpochBatch):
            held = _batch_cache(held)
        if held is not False and not (held is None or held is True or isinstance(held, Cache)):
            raise TypeError(
                f"Argument 'held' must be a Cache, a batch, a folder or None, not {type(held).__name__}."
            )
        if held is not False and self.transport.peers:
            raise ValueError("Argument 'held' needs a job with a master, not a job of peers.")
        if held is not False and self._storage != 1:
            raise ValueError(
                f"Argument 'held' needs one batch a worker (storage 1), not storage {self._storage!r}."
            )
        self.epochs, self.start_epoch = _check_common(epochs, start_epoch, self.seed, self.strategy, 0)[:2]
        if held is not False:
            self._from_held = True
            self._held = held if isinstance(held, Cache) else None

    def _start(self, what: str) -> None:
        if self._used:
            raise RuntimeError(f"An MPILoader runs once: {what} was already called on this rank.")
        self._used = True

    def _watchdog(self, N: int, B: int) -> Watchdog:
        return Watchdog.for_job(
            self._timeout, N, B, rank=self.transport.rank, prog=_PROG, abort=self.transport.abort
        )

    # ---- master

    def serve(self) -> list[TransitionReport]:
        """Master: deliver the epochs after ``start_epoch`` to the workers; return one report each
        (:attr:`reports`, which fills as they come).

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
        N, B = ds.N, ds.record_bytes
        scheme = _store(self._storage, B, self.K, mode=self._scheme, variable=ds.variable, sizes=ds.lengths,
                        network=self.network)  # fmt: skip
        opts = MasterOptions(
            strategy=self.strategy, max_repair_rounds=self.max_repair_rounds, seed=self.seed, records=(N, B)
        )
        session = Session(link, self._watchdog(N, B), (scheme,), opts=opts)
        with session.setup("sizes"):
            link.share((N, B, self.layout.dtype, self.layout.shape, ds.lengths))
        schedule = self._schedule(N, scheme)
        before, now = self._first(schedule)
        reports = self.reports
        if self._from_held:
            now = self._serve_held(session, scheme, before, now)
        else:  # the lengths went with the sizes (a schedule by bytes needs them): not again here
            work = scheme.dataset(ds)
            session.deal(work if work.lengths is None else replace(work, lengths=None), now.held)
            session.units = work
        try:
            for turn in session.epochs(schedule, now, self.start_epoch + self.epochs - 1):
                if turn.stopped is not None:  # a worker stopped: the job ends here
                    self.stopped_by = session.end(turn.stopped[0])
                    return list(reports)
                (report,) = turn.reports
                self._verified(report.verified, report.epoch)
                reports.append(report)
            session.end(None)
        finally:
            session.close()
        return list(reports)

    def _serve_held(self, session: Session, scheme: Scheme, before: Epoch | None, now: Epoch) -> Epoch:
        """Master: the first epoch from what the workers hold (:meth:`resume`, ``cache_dir``): a
        storage written at another number of workers cut again (:mod:`~coded_shuffle.engine.recut_serve`),
        else restored, or the records held placed, and the transition to the first epoch."""
        ds = self.dataset
        assert ds is not None
        work = scheme.dataset(ds)
        rep = serve_recut_start(session, ds, work, scheme.M, now) if scheme.M > 1 else None
        if rep is not None:  # files of another K: the storage at this K cut from them
            self.held_start = rep
            self._verified(rep.verified, now.t)
            return replace(now, held=rep.held)
        # the lengths went with the sizes: not again with the checksums
        p_held, self.held_start = session.deal_held(work, (before or now).held, lengths=False)
        if p_held is not now.held:  # a storage restored at the first epoch needs no transition
            (first,) = session.transition(p_held, now.held, epoch=now.t).reports
            self._verified(first.verified, first.epoch)
            self.reports.append(first)
            if isinstance(self.held_start, RecoveryReport):
                self.held_start = replace(self.held_start, transition=first)
        return now

    def _schedule(self, N: int, scheme: Scheme) -> EpochSchedule:
        """The job's epochs of ``N`` records under ``scheme``."""
        return EpochSchedule(N=N, K=self.K, seed=self.seed, spec=_order_spec(self._order, N), scheme=scheme,
                             sizes=self._sizes, balance=self.balance)  # fmt: skip

    def _first(self, schedule: EpochSchedule) -> tuple[Epoch | None, Epoch]:
        """The epoch before the first (None: the first starts afresh) and the first. A storage of
        ``M > 1`` kept in a ``cache_dir`` follows from epoch 0, so that a restart at any epoch
        knows which workers held each piece (and restores that of the epoch before its first)."""
        if not (self._from_held and schedule.scheme.M > 1) or self.start_epoch == 0:
            return None, schedule.epoch(self.start_epoch)
        *_, before, now = schedule.epochs(start=0, count=self.start_epoch + 1)
        return before, now

    def _verified(self, ok: bool, epoch: int) -> None:
        """Raise unless the transition to ``epoch`` was verified."""
        if not ok:
            whose = "the checksums" if self.transport.peers else "the master's checksums"
            raise IntegrityError(f"Epoch {epoch}: the workers' records did not match {whose}.")

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

    def _held_of(self, checksums: np.ndarray, B: int, lengths: np.ndarray | None) -> Cache | None:
        """A worker's records to start from: those given to :meth:`resume` (records of variable
        sizes zero-padded to ``B``), else what its cache file still holds (checked against
        ``checksums`` and, records of variable sizes, ``lengths``), else None."""
        if self._held is not None:
            return _widened(self._held, B)
        if self._read_from is None:
            return None
        k = self.worker
        assert k is not None
        table = table_dataset(checksums, B, lengths)
        cache, note = load_worker_cache(self._read_from, k, table, seed=self.seed)
        if note is not None:
            self._note(note)
        return cache

    def _note(self, note: str) -> None:
        """A worker's line about its cache file: kept (:attr:`cache_notes`) and said on ``stderr``."""
        self.cache_notes.append(note)
        say(f"{_PROG}: rank {self.transport.rank} (worker {self.worker}): {note}")

    def _recut(self, session: Session, N: int, B: int, scheme: Scheme, held: Any, now: Epoch) -> Epoch | None:
        """A worker of a storage of ``M > 1`` batches started from the files: when they hold the
        storage of another number of workers (or not the storage ``held`` a restore plans from),
        its storage at this one cut from them
        (:func:`~coded_shuffle.engine.recut_serve.receive_recut_start`); else None (restored as usual)."""
        folder, seed = self._read_from, self.seed
        assert folder is not None
        got = receive_recut_start(session, folder, N=N, B=B, seed=seed, scheme=scheme, held=held, now=now)
        if got is None:
            return None
        first, notes = got
        for note in notes:
            self._note(note)
        return first

    def _keep(self, epoch: int, session: Session, B: int) -> None:
        """With a ``cache_dir``: this worker's records of ``epoch`` to its file (crash-safe)."""
        if self.cache_dir is None or self.worker is None:
            return
        cache, sums = session.cache, session.checksums
        assert cache is not None and sums is not None
        table = table_dataset(sums, B, _units_lengths(session, self._lengths))
        save_worker_cache(self.cache_dir, self.worker, cache.ids, np.asarray(cache.data), table,
                          epoch=epoch, seed=self.seed)  # fmt: skip

    def _open(self) -> tuple[Session, EpochSchedule, Epoch]:
        """A worker, before its first batch: the job's sizes, scheme and checksums from the master,
        and its first units, received and checked (the session's start)."""
        link = self.transport
        dog = self._watchdog(0, 0)  # the default bound until the records are known
        session = Session(link, dog, ())
        with session.setup("sizes"):
            N, B, dtype, shape, lengths = link.share()
        dog.for_records(N, B)
        self.N = int(N)
        variable = lengths is not None
        self.layout = RowLayout(dtype=np.dtype(dtype), shape=tuple(shape), variable=variable)
        self._lengths = None if lengths is None else np.asarray(lengths, dtype=np.int64)
        self._sizes = batch_sizes_of(self.N, B, lengths, self.balance)
        scheme = _store(self._storage, B, self.K, mode=self._scheme, variable=variable, sizes=lengths,
                        network=self.network)  # fmt: skip
        session.schemes = (scheme,)
        schedule = self._schedule(N, scheme)
        before, now = self._first(schedule)
        if self._from_held:  # records of variable sizes: storage 1 (a batch a worker)
            width = scheme.piece_bytes(B)
            held = (before or now).held
            cut = self._recut(session, int(N), int(B), scheme, held, now) if scheme.M > 1 else None
            if cut is not None:  # the storage at this K, cut from files of another
                return session, schedule, cut
            p_held = session.receive_held(
                N * scheme.pieces,
                width,
                lambda sums, lens: self._held_of(sums, width, lens),
                (before or now).held,
                lengths=self._lengths,
            )
            self._held = None  # the session holds them now
            if p_held is now.held:  # a storage restored at the first epoch
                return session, schedule, now
            result = session.transition(p_held, now.held, epoch=now.t).result
            assert result is not None
            self._verified(result.verified, now.t)
            self._decoded = int(result.decoded)
            return session, schedule, now
        cache = session.receive(N * scheme.pieces, scheme.piece_bytes(B), now.held)
        if variable:  # their lengths came with the sizes, not again with the checksums (a storage's
            # pieces: each record cut by its own length, on every rank alike)
            units = getattr(scheme.holding, "unit_lengths", None)
            own = np.asarray(lengths if units is None else units)
            cache = Cache(ids=cache.ids, data=cache.data, lengths=own[cache.ids])
            cache = session.cache = cache.pack() if scheme.packs else cache  # as the scheme decodes them
        assert session.checksums is not None
        if not np.array_equal(cache.checksums(), session.checksums[cache.ids]):
            raise IntegrityError(
                f"Worker {self.worker}: its records of epoch {self.start_epoch} do not match the "
                "master's checksums."
            )
        return session, schedule, now

    def _worker_epochs(self) -> Generator[EpochBatch, None, None]:
        k = self.transport.worker
        assert k is not None
        self._decoded = 0  # records the first epoch's transition decoded (a start from holdings)
        session, schedule, now = self._open()
        layout, scheme = self.layout, session.schemes[0]
        assert layout is not None and session.cache is not None
        B = session.cache.width
        last = self.start_epoch + self.epochs - 1
        ended = closed = False
        try:
            self._keep(now.t, session, B)
            yield _batch(now.t, k, now.batch(k), session.cache, layout, decoded=self._decoded, scheme=scheme,
                         writable=self.writable, decode=self.decode)  # fmt: skip
            for turn in session.epochs(schedule, now, last):
                if turn.stopped is not None or turn.result is None or turn.epoch is None:  # a worker stopped
                    ended = True
                    self.stopped_by = session.end(turn.stopped[0] if turn.stopped else None)
                    return
                self._verified(turn.result.verified, turn.epoch.t)
                self.reports.extend(turn.reports)  # the leader's, among peers
                now = turn.epoch
                self._keep(now.t, session, B)
                # the rows yielded are copies: the old cache's buffer holds the epoch after next
                yield _batch(now.t, k, now.batch(k), turn.result.cache, layout, decoded=turn.result.decoded,
                             scheme=scheme, writable=self.writable, decode=self.decode)  # fmt: skip
            ended = True
            session.end(None)
        except GeneratorExit:  # closed where it yielded an epoch: this worker stops early
            closed = True
            raise
        finally:
            # A forked copy (a DataLoader worker) never speaks for the rank, nor a process that is
            # ending on an uncaught exception (a crash is not a stop: its launcher reports it), nor
            # a transition that failed midway (its error is raised).
            if closed and not ended and os.getpid() == self._pid and not _crashing():
                # it says so where its next transition would start
                stopped = session.stop(schedule, now) if now.t < last else None
                self.stopped_by = session.end(stopped)
            session.close()
