"""PyTorch: one training rank's coded epochs as a ``torch.utils.data.IterableDataset``.

Notation
--------
=========  ==========================================================================
``K``      number of workers (training ranks); the job has ``K + 1`` ranks, rank 0 the master
``N``      number of records
``t``      epoch; epoch ``t``'s global order is cut into ``K`` contiguous batches
``L``      samples every rank yields an epoch: ``N // K`` (``drop_last``) or ``ceil(N / K)``
=========  ==========================================================================

:class:`CodedIterableDataset` is :class:`coded_shuffle.loader.MPILoader` seen from PyTorch. Every
rank of the job makes it with the same options; rank 0 (:attr:`~CodedIterableDataset.is_master`)
calls :meth:`~CodedIterableDataset.serve` and trains nothing, every other rank hands it to a
``DataLoader`` and calls :meth:`~CodedIterableDataset.set_epoch` before each epoch, as with
``DistributedSampler``. Under ``torchrun`` (``torch.distributed`` initialized) the delivery goes
over a gloo group of its own (:class:`~coded_shuffle.transport.TorchTransport`); under ``mpiexec``
over MPI. A rank's batch of epoch ``t`` is decoded from its cache and the master's coded symbols,
every record checked, before one sample of it is yielded.

With ``prefetch`` (the default) a background thread on each worker runs the next transition
while the current epoch trains, at most one epoch ahead: the batch of epoch ``t + 1`` is
decoded and verified by the time ``set_epoch(t + 1)`` is called, unless the training step is
shorter than the delivery. The master needs no thread: its :meth:`serve` loop plans and encodes
transition ``t + 1`` while the workers train on epoch ``t``. Only that thread uses the transport.

This module is the only one besides :mod:`coded_shuffle.transport` that imports ``torch``; the
package imports without it.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._checks import check_int
from ._progress import say
from ._torch_base import (
    _PERSISTENT,
    _auto_scheme,
    _columns,
    _job_link,
    _persistent_loader,
    _watch_parent,
    balanced_length,
    check_cache_dir,
    check_dataset_of,
    keep_batch,
    loader_class,
    parse_state,
    rest_batch,
    samples,
    say_ended,
    stored_resume,
    tensor_source,
)
from .engine import TransitionReport
from .engine.cache_dir import dataset_fingerprint
from .engine.mpi import Watchdog, setup_step
from .engine.rest import RestReport, rest_of_epoch, serve_rest, table_dataset
from .engine.schemes import Scheme
from .loader import EpochBatch, MPILoader
from .loader._common import (
    RowLayout,
    _order_spec,
    among_peers,
    batch_sizes_of,
    check_balance,
    check_decode,
    check_scheme,
    record_bytes_of,
    scheme_name,
)
from .loader.arrays import pack_arrays
from .loader.prefetch import Prefetch
from .network import Network
from .orders import OrderSpec
from .transport import ControlLink

__all__ = ["CodedIterableDataset", "pack_arrays"]


class CodedIterableDataset(IterableDataset):  # type: ignore[type-arg]
    """One training rank's samples of every epoch, delivered coded, as a PyTorch ``IterableDataset``.

    Every rank of a job of ``K + 1`` ranks makes it with the same options. Rank 0, the master
    (:attr:`is_master`), reads ``source`` and calls :meth:`serve`; worker ``k`` (rank ``k + 1``)
    passes the dataset to a ``torch.utils.data.DataLoader`` and calls :meth:`set_epoch` before each
    epoch. Each epoch, a worker yields the records of its batch (the ``k``-th contiguous run of the
    epoch's global order, :func:`coded_shuffle.orders.epoch_order`), each exactly once, in that
    order, and every worker yields the same number of samples, ``len(dataset)``: with
    ``drop_last`` the longer batches drop their last record; without it the shorter ones repeat
    their first (as ``DistributedSampler`` pads), so that collectives across the workers (a DDP
    allreduce) never wait for a rank that has run out.

    A sample is the row as a tensor (a plain array; a token file's window as a tensor of its
    token type, :class:`~coded_shuffle.records.TokenWindows`), or a tuple of tensors, one per
    field of a structured array or per array of several (:func:`pack_arrays`); with ``decode``,
    it is ``decode(record)``, ``record`` the record's bytes as a read-only ``uint8`` array, called
    where the sample is yielded (in the DataLoader's worker processes); with ``with_ids``, the
    record's id comes first. Tensors are writable and share memory with the epoch's rows, which
    the dataset owns (a field that torch cannot stride, in a packed structured row, is copied
    once). With ``DataLoader(num_workers=n)``, each DataLoader worker yields its own contiguous
    share of the rank's samples (forked after :meth:`set_epoch`, or pickled with the epoch's rows);
    ``persistent_workers`` is refused, since a persistent worker would keep an old epoch:
    :meth:`set_epoch` refuses it in the training process, before the epoch the loader would
    iterate with stale workers (at the first epoch, for a loader made before the loop).

    Parameters
    ----------
    source : array, str, os.PathLike, sequence or mapping of them, RecordSource, or None
        The records (see :func:`pack_arrays`), read on the master only (``None`` elsewhere); a
        record source or a list of ``bytes`` of records of variable sizes: each yielded as a 1-D
        ``uint8`` tensor of its own length (no ``cache_dir``).
    epochs : int
        Epochs the job trains, ``start_epoch .. start_epoch + epochs - 1``. A job resumed from a
        checkpoint (:meth:`load_state_dict`) runs the rest of them.
    start_epoch : int
        The first epoch (read from the dataset); :meth:`load_state_dict` sets it on resume.
    seed, order, strategy, max_repair_rounds, timeout, storage, balance
        As :class:`coded_shuffle.loader.MPILoader`; the same on every rank (``storage = M > 1``:
        every worker keeps ``M`` batches' worth of pieces and yields whole records; with
        ``balance="bytes"``, ``len`` is the current epoch's longest batch, or shortest with ``drop_last``).
    drop_last : bool
        Drop the extra record of the longer batches (default False: pad the shorter ones).
    with_ids : bool
        Yield each record's id before its tensors.
    prefetch : bool
        Decode the next epoch in a background thread while this one trains (default True).
    transport : ControlLink, optional
        The link: by default a :class:`~coded_shuffle.transport.TorchTransport` when
        ``torch.distributed`` is initialized (``torchrun``), else an MPI one (``mpiexec``).
    rank, world_size : int, optional
        When given, checked against the job's (a rank that is not part of it is refused).
    scheme : str
        ``coded`` (default): a job of ``K + 1`` ranks, rank 0 the master that serves. ``exchange``:
        a job of ``K`` peers (:class:`~coded_shuffle.loader.PeerLoader`), every rank trains,
        :attr:`is_master` is false everywhere and every rank gives ``source`` (a ``.npy`` path is
        memory-mapped, each rank reading only what it holds); the workers send each other what
        each misses, and no ``new_group`` is needed for DDP (there is no rank to leave out).
        ``auto``, with a ``network`` and ``source`` on every rank: of the two, the one of least
        predicted time of the first transition on it for the job's ranks (records of any size,
        in their bytes; with a ``storage``, of its pieces)
        (:func:`~coded_shuffle.loader._common.choose_scheme`; :attr:`choice` says why). Or a
        scheme of one's own (an object satisfying :class:`~coded_shuffle.engine.schemes.Scheme`,
        used as is on every rank): among peers if it says so (``peers``), else with a master.
    network : Network, optional
        As :class:`~coded_shuffle.loader.MPILoader`'s (``scheme="auto"`` chooses on it too).
    decode : callable, optional
        A record's bytes (a read-only ``uint8`` numpy array, a view of the epoch's rows; copy it
        to keep it) to the user's sample (an image decoder, say), run in the DataLoader's worker
        processes; picklable if they are spawned. Default: the rows as tensors.
    cache_dir : str or os.PathLike, optional
        A folder on each host's local disk (given on every rank, or on none): each worker keeps its
        batch of every epoch in a file of it (:mod:`coded_shuffle.engine.cache_dir`: crash-safe,
        checksummed), so that a job resumed on the same hosts (:meth:`load_state_dict`) reads
        back what each worker still holds and is sent only the rest. A file cut short, altered
        or of another job is treated as absent, in one line on standard error. With ``storage``
        ``M > 1`` the file holds the worker's storage of the epoch it trains on, and a job resumed
        at the same ``K`` restores the storage of the epoch resumed: a piece a worker lacks (its
        host lost) from another worker that stores it, else from the source (:attr:`held_start`).
        Records of variable sizes are kept each at its length (a storage of them cut again at another K too).

    Examples
    --------
    >>> ds = CodedIterableDataset("train.npy", epochs=3)  # doctest: +SKIP
    >>> if ds.is_master:  # doctest: +SKIP
    ...     ds.serve()
    ... else:
    ...     loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=2)
    ...     for epoch in range(3):
    ...         ds.set_epoch(epoch)
    ...         for x in loader:
    ...             train_step(x)
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
        drop_last: bool = False,
        with_ids: bool = False,
        prefetch: bool = True,
        transport: ControlLink | None = None,
        max_repair_rounds: int = 3,
        timeout: float | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        storage: int = 1,
        scheme: str | Scheme = "coded",
        network: Network | None = None,
        decode: Callable[[np.ndarray], Any] | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        balance: str = "count",
    ) -> None:
        super().__init__()
        #: How each epoch's order is cut into batches: of equal counts, or of equal bytes.
        self.balance = check_balance(balance)
        #: The user's decode (a record's bytes to a sample), or None: the rows as tensors.
        self.decode = check_decode(decode)
        scheme = check_scheme(scheme)
        #: What ``scheme="auto"`` chose and why, in one line (None for a scheme given).
        self.choice: str | None = None
        if scheme == "auto":
            scheme, self.choice = _auto_scheme(source, transport, network, seed=seed, order=order,
                                               start_epoch=start_epoch, strategy=strategy, storage=storage,
                                               balance=self.balance)  # fmt: skip
        peers = among_peers(scheme)
        for name, flag in (("drop_last", drop_last), ("with_ids", with_ids), ("prefetch", prefetch)):
            if not isinstance(flag, bool):
                raise TypeError(f"Argument '{name}' must be a bool, not {type(flag).__name__}.")
        transport = _job_link(transport, peers, scheme, rank, world_size, timeout)
        self.drop_last, self.with_ids, self.prefetch = drop_last, with_ids, prefetch
        if peers and source is None:
            raise TypeError(
                "Argument 'source' must be given on every rank of a job of peers "
                f"(scheme {scheme_name(scheme)!r})."
            )
        reads = transport.is_master or peers
        records = tensor_source(source) if reads and source is not None else source  # rows read as held
        #: The loader each epoch comes from: a master's (:class:`MPILoader`; :class:`StoredLoader`
        #: when it keeps a storage of ``M > 1`` batches in ``cache_dir``), or the peers'.
        self._loader_class: type[MPILoader] = loader_class(peers, storage, cache_dir)
        self._stored = self._loader_class is not MPILoader and not peers
        options: dict[str, Any] = {
            "epochs": epochs, "seed": seed, "order": order, "max_repair_rounds": max_repair_rounds,
            "timeout": timeout, "storage": storage, "scheme": scheme, "balance": self.balance,
            **({} if peers else {"strategy": strategy}), **({"cache_dir": cache_dir} if self._stored else {}),
        }  # fmt: skip
        # Checks every option now, on every rank (the loader proper is made at the first epoch).
        self._loader = self._loader_class(
            records, start_epoch=start_epoch, transport=transport, writable=True, network=network, **options
        )
        self.transport = transport
        self.K = transport.K
        self.is_master = transport.is_master
        #: This rank's worker number, or None on the master.
        self.worker = transport.worker
        self.epochs = self._loader.epochs
        self.start_epoch = self._loader.start_epoch
        self.seed = self._loader.seed
        self._records = records
        self._timeout, self._order = timeout, order
        self._feed: Any = None
        self._batch: EpochBatch | None = None
        self._tensors: tuple[torch.Tensor, ...] = ()
        self._bytes: np.ndarray = np.empty((0, 0), dtype=np.uint8)  # the records' bytes, with decode
        self._ids: np.ndarray = np.empty(0, dtype=np.int64)
        self._pos: np.ndarray = np.empty(0, dtype=np.int64)  # sample s is row _pos[s] of the batch
        self._epoch_len: int | None = None  # samples every rank yields of this epoch, by bytes
        self._skip = 0  # samples of the current epoch already trained on (a mid-epoch resume)
        self._yielded = 0
        self._N: int | None = self._loader.N
        self._pid = os.getpid()
        self._iterated: tuple[int, int] = (self._pid, 0)
        self._ended = False
        self._resumable(cache_dir, peers, scheme)

    def _resumable(self, cache_dir: Any, peers: bool, scheme: str | Scheme) -> None:
        """The dataset's ``cache_dir``, checked, and its state of a resumed job (none yet)."""
        #: Each worker's batch is kept in a file of this folder (None: in memory only).
        self.cache_dir = check_cache_dir(cache_dir, peers, scheme_name(scheme))
        self._segments: list[tuple[int, int]] = []  # the parts of the epoch read before this job
        self._rest: int | None = None  # the epoch resumed from its rest (load_state_dict)
        self._check: tuple[Any, Any] | None = None  # a checkpoint's N and fingerprint, checked at the start
        self._rest_len: int | None = None  # samples every rank yields of the rest of its epoch
        self._loader_epochs = self.epochs
        self._table: Any = None  # the master's checksums (a worker's view, for its cache file)
        self._fingerprint: str | None = None
        #: On the master of a job resumed mid-epoch: what the rest of the epoch cost
        #: (:class:`~coded_shuffle.engine.rest.RestReport`); None otherwise.
        self.resumed: RestReport | None = None
        #: On a worker: the lines said about its cache file (treated as absent, rows dropped).
        self.cache_notes: list[str] = self._loader.cache_notes if self._stored else []

    # ---- sizes

    @property
    def N(self) -> int:
        """Number of records (on a worker, known from the first epoch on)."""
        if self._N is None:
            self._start()
        assert self._N is not None
        return self._N

    def __len__(self) -> int:
        """Samples every rank yields an epoch: ``N // K`` with ``drop_last``, else ``ceil(N / K)``.

        On a worker, a call before the first epoch waits for the job's setup (it learns ``N``).
        """
        N, K = self.N, self.K
        if self._rest_len is not None:
            return self._rest_len
        if self._epoch_len is not None:
            return self._epoch_len
        return N // K if self.drop_last else -(-N // K)

    @property
    def epoch(self) -> int | None:
        """The current epoch (None on a worker before the first)."""
        return None if self._batch is None else self._batch.epoch

    @property
    def reports(self) -> list[TransitionReport]:
        """The transitions' reports so far, one an epoch after the first (its bytes:
        :attr:`TransitionReport.sent_bytes <coded_shuffle.engine.TransitionReport.sent_bytes>`):
        on the master with ``scheme="coded"`` (what :meth:`serve` returns), on rank 0 with
        ``scheme="exchange"`` (its worker leads the transitions), as the epochs come (with
        ``prefetch``, up to one epoch ahead); empty on the other ranks. After
        :meth:`load_state_dict`, those of the epochs resumed."""
        return self._loader.reports

    # ---- master

    def serve(self) -> list[TransitionReport]:
        """Master: deliver every epoch after the first; return the transitions' reports.

        Of a job resumed mid-epoch (:meth:`load_state_dict`), the rest of that epoch first
        (:attr:`resumed`), then the epochs after it, the first planned from what workers hold."""
        if self.is_master and not self.transport.peers:
            self._hello()
        return self._loader.serve() if self._loader_epochs else []

    @property
    def held_start(self) -> Any:
        """On the master of a job with a storage of ``M > 1`` batches in a ``cache_dir``: how every
        worker's storage came back at its start (:class:`~coded_shuffle.engine.restore.RecoveryReport`:
        pieces and bytes kept, from peers, from the source); None otherwise."""
        return getattr(self._loader, "held_start", None) if self._stored else None

    @property
    def stopped_by(self) -> int | None:
        """The worker that stopped early and so ended the job, or None (its rank: ``transport.rank_of``)."""
        return self._loader.stopped_by

    # ---- worker: the epochs

    def _start(self) -> None:
        if self.is_master:
            raise RuntimeError(
                f"Rank {self.transport.rank} is the master: call serve(); the workers iterate."
            )
        if self._feed is not None:
            return
        rest = None if self.transport.peers else self._hello()
        if rest is not None and self._loader_epochs and not self._stored:  # from the rest's records
            self._loader.resume(self._loader.start_epoch, self._loader.epochs, held=rest)
        if self._loader_epochs:
            epochs = iter(self._loader)
            self._feed = Prefetch(epochs) if self.prefetch else epochs
        else:
            self._feed = iter(())
        atexit.register(self.close)  # after the loader's own: runs first
        if rest is None:
            self._advance()
        else:
            self._take(rest)

    def _fp(self) -> str:
        """The master's dataset's fingerprint (:func:`~.engine.cache_dir.dataset_fingerprint`)."""
        if self._fingerprint is None:
            self._fingerprint = dataset_fingerprint(self._loader.dataset).hex()  # type: ignore[arg-type]
        return self._fingerprint

    def _hello(self) -> EpochBatch | None:
        """Collective, before the loader's job: the records' sizes and fingerprint from the master;
        their checksums too with a ``cache_dir`` or a resumed epoch; then that epoch's rest
        (:func:`~coded_shuffle.engine.rest.serve_rest`). A worker's batch of the rest, or None."""
        link, master = self.transport, self.is_master
        ds, layout = self._loader.dataset, self._loader.layout
        dog = Watchdog.for_job(self._timeout, self._N or 0, 0, rank=link.rank, prog="coded_shuffle.torch",
                               abort=link.abort)  # fmt: skip
        try:
            with setup_step(link, dog, "dataset"):
                info = (ds.N, ds.record_bytes, self._fp(), layout.dtype, layout.shape) if master else None  # type: ignore[union-attr]
                N, B, fp, dtype, shape = link.share(info)
            dog.for_records(N, B)
            self._N = N
            if self._check is not None:
                check_dataset_of(*self._check, N=N, fingerprint=fp)
            self._fingerprint = fp
            if self._rest is None and (self.cache_dir is None or self._stored):
                return None
            with setup_step(link, dog, "rest: checksums"):
                sums = link.share_array(ds.checksums if master else np.empty(N, np.uint64))  # type: ignore[union-attr]
                lengths = link.share(ds.lengths if master else None)  # type: ignore[union-attr]
            self._table = table_dataset(sums, B, lengths)
            if self._rest is None:
                return None
            epoch = self._rest
            shares = rest_of_epoch(N, seed=self.seed, epoch=epoch, segments=self._segments, K_next=self.K,
                                   order=_order_spec(self._order, N), balance=self.balance,
                                   sizes=batch_sizes_of(N, B, lengths, self.balance))  # fmt: skip
            if master:
                self.resumed = serve_rest(link, dog, ds, shares)  # type: ignore[arg-type]
                return None
            layout = RowLayout(np.dtype(dtype), tuple(shape))
            batch, self._rest_len, note = rest_batch(
                link, dog, epoch, shares, layout, self._table, seed=self.seed, drop_last=self.drop_last,
                cache_dir=None if self._stored else self.cache_dir,  # a storage's files hold pieces
            )  # fmt: skip
            if note is not None:
                self.cache_notes.append(note)
                say(f"coded_shuffle.torch: {self._who()}: {note}")
            return batch
        finally:
            dog.close()

    def _next_batch(self) -> EpochBatch | None:
        if isinstance(self._feed, Prefetch):
            return self._feed.take()
        return next(self._feed, None)

    def _advance(self) -> None:
        batch = self._next_batch()
        if batch is None:
            if self.stopped_by is not None and self._batch is not None:  # another worker stopped
                say_ended(self)
                return
            raise RuntimeError(
                f"{self._who()}: the job ended after epoch {self.epoch}, before the epochs asked for."
            )
        if self._batch is not None:
            self._skip = 0
        self._rest_len = None
        self._segments = []
        self._take(batch)

    def _take(self, batch: EpochBatch) -> None:
        """Make ``batch`` the current epoch's (kept in the worker's cache file, with a ``cache_dir``)."""
        self._batch, self._yielded = batch, 0
        self._N = self._loader.N or self._N
        self._epoch_len = balanced_length(self, batch.epoch) if self._rest_len is None else None
        L = len(self)
        n = len(batch)
        pos = np.arange(L) % n  # drop_last keeps the first L; padding repeats the first records
        self._ids = np.ascontiguousarray(batch.ids[pos])
        self._pos = pos
        self._tensors = _columns(batch.records) if self.decode is None else ()
        if self.decode is not None or batch.variable:  # variable: each record its own tensor
            self._bytes = record_bytes_of(batch.records)
        keep_batch(self, batch)
        if batch.epoch == self.start_epoch + self.epochs - 1 and not isinstance(self._feed, Prefetch):
            next(self._feed, None)  # the last epoch: the loader ends the job with the master now

    def _who(self) -> str:
        return f"rank {self.transport.rank} (worker {self.worker})"

    @property
    def ended(self) -> bool:
        """True once another worker stopped early and so ended the job: later epochs yield nothing."""
        return self._ended

    def set_epoch(self, epoch: int) -> None:
        """Make ``epoch`` the current one: its batch decoded, verified and ready when this returns.

        Epochs go forward (skipping some makes their transitions, unused); the same epoch again
        is allowed and changes nothing. On the master it only checks ``epoch``.
        """
        last = self.start_epoch + self.epochs - 1
        e = check_int(epoch, "epoch", minimum=0)
        if not self.start_epoch <= e <= last:
            raise ValueError(f"Argument 'epoch' must be in {self.start_epoch}..{last}, not {e}.")
        if self.is_master:
            return
        if os.getpid() == self._pid and _persistent_loader(self):
            raise ValueError(_PERSISTENT)
        self._start()
        assert self._batch is not None
        if e < self._batch.epoch:
            raise ValueError(
                f"Argument 'epoch' must be at least the current epoch {self._batch.epoch} "
                f"(epochs only go forward; resume with load_state_dict), not {e}."
            )
        while self._batch.epoch < e and not self._ended:
            self._advance()

    def __iter__(self) -> Iterator[Any]:
        """Yield this rank's samples of the current epoch (this DataLoader worker's share)."""
        if self.is_master:
            raise RuntimeError(
                f"Rank {self.transport.rank} is the master: call serve(); the workers iterate."
            )
        info = get_worker_info()
        if info is None:
            self._start()
        elif self._batch is None:
            raise RuntimeError(
                "Call set_epoch(epoch) on the dataset before iterating a DataLoader with num_workers > 0."
            )
        if info is not None:
            _watch_parent()
        pid, n = self._iterated
        n = n + 1 if pid == os.getpid() else 1
        self._iterated = (os.getpid(), n)
        if info is not None and n > 1:  # a persistent worker made before set_epoch saw it
            raise ValueError(_PERSISTENT)
        share = np.arange(0 if self._ended else self._skip, 0 if self._ended else len(self))
        if info is not None:
            share = np.array_split(share, info.num_workers)[info.id]
        return samples(self, share, counted=info is None)

    # ---- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Where training is, as the whole job's state: the seed, the epoch, the samples of it each
        rank yielded (the ranks train in step) under ``K`` workers, the ``segments`` of the epoch read
        before (each ``[K, samples]``, from earlier jobs, :meth:`load_state_dict`), and the records'
        ``N`` and ``fingerprint``.

        Samples are counted when the dataset is iterated in this process (``num_workers = 0``);
        with DataLoader workers the state is the start of the epoch (or of its rest). A state saved
        at the end of an epoch resumes at the next one.
        """
        epoch = self.start_epoch if self._batch is None else self._batch.epoch
        done = self._skip + self._yielded
        segments = [list(x) for x in self._segments] if self._rest == epoch else []  # this job's rest
        if self._batch is not None and done >= len(self) and epoch < self.start_epoch + self.epochs - 1:
            epoch, done, segments = epoch + 1, 0, []
        elif self._batch is None and self._segments:  # resumed, not started: the state loaded
            segments, done = [list(x) for x in self._segments[:-1]], self._segments[-1][1]
            return {"epoch": epoch, "samples": done, "seed": self.seed, "K": self._segments[-1][0],
                    "N": self._N, "fingerprint": self._fingerprint, "segments": segments}  # fmt: skip
        if self.is_master:
            self._fp()
        return {"epoch": epoch, "samples": done, "seed": self.seed, "K": self.K, "N": self._N,
                "fingerprint": self._fingerprint, "segments": segments}  # fmt: skip

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state`` (from :meth:`state_dict`): before the first epoch, on every rank.

        The job may have another number of ranks than the one checkpointed. At an epoch boundary
        its epoch comes from the source at the new ``K``, or from what the cache files hold
        (``cache_dir``). Mid-epoch, at the same ``K``, each worker skips the samples of its batch
        trained on before; at another ``K`` (or with a ``cache_dir``) the rest of the epoch is dealt
        to the new workers (:func:`~coded_shuffle.engine.rest.rest_of_epoch`: every sample once
        across the change), sent by the master but for what each worker's file holds, and the next
        epoch is planned from what they hold. Peers resume mid-epoch at the same ``K`` only. A storage
        of ``M > 1`` in a ``cache_dir`` is restored (at another ``K``, cut again from the files, the
        rest of an epoch from the source): :attr:`held_start`. Another seed or dataset is refused."""
        if self._feed is not None or self._loader._used:  # type: ignore[attr-defined]
            raise RuntimeError("load_state_dict must be called before the first epoch.")
        end = self.start_epoch + self.epochs
        epoch, K, samples, segments, check = parse_state(
            state, seed=self.seed, start=self.start_epoch, end=end, K=self.K, peers=self.transport.peers
        )
        if self.is_master and not self.transport.peers:
            assert self._N is not None
            check_dataset_of(*check, N=self._N, fingerprint=self._fp())
        self._check = check
        mid = bool(samples or segments)
        if self._stored and not (segments or mid and K != self.K):  # the storage of the epoch restored
            self._skip = samples  # (or cut again at an epoch boundary of another K), the samples read skipped
            stored_resume(self._loader, epoch=epoch, end=end)
        elif not self.transport.peers and (segments or mid and (K != self.K or self.cache_dir is not None)):
            self._segments, self._rest = [*segments, (K, samples)], epoch
            self._loader_epochs = end - epoch - 1
            if self._loader_epochs:  # the next epoch from what the workers hold of the rest (held: True
                # on the master, None on a worker; a storage, False: cut again from the files)
                held = not self._stored and (self.is_master or None)
                self._loader.resume(epoch + 1, end - epoch - 1, held=held)
        else:  # at an epoch boundary with a cache_dir, the epoch is planned from what the files hold
            self._skip = samples
            held = self.cache_dir if self.cache_dir and not mid else False
            self._loader.resume(epoch, end - epoch, held=held)
        self.start_epoch, self.epochs = epoch, end - epoch

    def close(self) -> None:
        """Worker: stop early (the master ends the job at the next transition); idempotent.

        A worker that stops before its first epoch still takes part in the job's setup first.
        """
        if os.getpid() != self._pid or self.is_master:
            return
        if self._feed is None and not self._loader._used:  # type: ignore[attr-defined]
            self._start()
        if self._feed is None:
            return
        if isinstance(self._feed, Prefetch):
            self._feed.close()
        else:
            self._loader.close()

    def __getstate__(self) -> dict[str, Any]:
        """For DataLoader workers started by spawn: the current epoch's tensors, no link."""
        state = self.__dict__.copy()
        for key in ("_loader", "transport", "_feed", "_records", "_table"):
            state[key] = None
        return state
