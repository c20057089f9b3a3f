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
import gc
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ._checks import check_int
from .engine import TransitionReport
from .engine.schedule import check_network
from .engine.schemes import Scheme
from .loader import EpochBatch, MPILoader, PeerLoader
from .loader._common import (
    among_peers,
    check_decode,
    check_scheme,
    choose_scheme,
    record_bytes_of,
    scheme_name,
)
from .loader.arrays import pack_arrays, tensor_records
from .loader.peers import peer_link
from .loader.prefetch import Prefetch
from .network import Network
from .orders import OrderSpec
from .records import fixed_record_bytes
from .transport import ControlLink, mpi_world
from .transport.registry import default_link
from .transport.torch_dist import torch_world

__all__ = ["CodedIterableDataset", "pack_arrays"]

_PERSISTENT = (
    "Argument 'persistent_workers' must be False for a DataLoader over a CodedIterableDataset "
    "(a persistent DataLoader worker would keep an old epoch), not True."
)


def _persistent_loader(dataset: object) -> bool:
    """Whether a ``DataLoader`` with ``persistent_workers`` and ``num_workers > 0`` iterates ``dataset``.

    Read from the objects that refer to ``dataset`` (a ``DataLoader``, or its ``__dict__``), with
    the loader's public attributes ``dataset``, ``num_workers`` and ``persistent_workers``.
    """
    for ref in gc.get_referrers(dataset):
        fields = ref if isinstance(ref, dict) else vars(ref) if isinstance(ref, DataLoader) else {}
        if fields.get("dataset") is dataset and fields.get("persistent_workers"):
            if (fields.get("num_workers") or 0) > 0:
                return True
    return False


_ORPHAN_WATCH: list[int] = []  # the DataLoader worker process whose parent is watched


def _watch_parent(period: float = 0.2) -> None:
    """In a DataLoader worker: end this process soon after the training process is gone.

    A rank killed (``kill -9``) leaves its DataLoader workers behind until torch's own check
    (every 5 s); they hold the job's output open meanwhile. One thread a worker process.
    """
    if _ORPHAN_WATCH == [os.getpid()]:
        return
    _ORPHAN_WATCH[:] = [os.getpid()]
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="coded_shuffle-parent", daemon=True).start()


def _tensor(arr: np.ndarray) -> torch.Tensor:
    """A tensor of ``arr`` (writable): a view where torch can stride it, else one copy."""
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if any(s % arr.itemsize or s < 0 for s in arr.strides) or arr.ctypes.data % arr.itemsize:
        arr = np.ascontiguousarray(arr)
    return torch.from_numpy(arr)


def _columns(records: np.ndarray) -> tuple[torch.Tensor, ...]:
    """One tensor per field of a structured array, or the one tensor of a plain array."""
    if records.dtype.names:
        return tuple(_tensor(records[f]) for f in records.dtype.names)
    return (_tensor(records),)


def _auto_scheme(
    source: object, transport: object, network: object, *, seed: int, order: object, start_epoch: int,
    strategy: str,
) -> tuple[str, str]:  # fmt: skip
    """``scheme="auto"``: the records' number and size from ``source`` (on every rank), the job's
    ranks from ``transport`` or the launcher's world, then :func:`choose_scheme`."""
    check_network(network, "auto", name="scheme")  # before the source is read
    if source is None:
        raise TypeError("Argument 'source' must be given on every rank with scheme 'auto'.")
    records = tensor_records(source)
    B = fixed_record_bytes(records)
    if isinstance(transport, ControlLink):
        ranks = transport.K + (0 if transport.peers else 1)
    else:
        world = torch_world()
        ranks = world[1] if world is not None else int(mpi_world().Get_size())
    return choose_scheme(len(records), B, ranks, seed=seed, order=order, start_epoch=start_epoch,
                         network=network, strategy=strategy)  # fmt: skip


def _job_link(
    transport: object, peers: bool, scheme: str | Scheme, rank: int | None, world_size: int | None,
    timeout: float | None = None,
) -> ControlLink:
    """The dataset's link (the default one of its scheme if ``transport`` is None, which every
    rank must make within ``timeout`` seconds, if given), checked against the scheme and against
    the ``rank`` and ``world_size`` the caller states."""
    if world_size is not None:
        world_size = check_int(world_size, "world_size", minimum=2)
    if rank is not None:
        rank = check_int(rank, "rank", minimum=0)
        if world_size is not None and rank >= world_size:
            raise ValueError(f"Argument 'rank' must be a rank of the job, 0 to {world_size - 1}, not {rank}.")
    if transport is None:
        transport = peer_link(join_timeout=timeout) if peers else default_link(join_timeout=timeout)
    elif not isinstance(transport, ControlLink):
        raise TypeError(
            "Argument 'transport' must be a link between processes (a ControlLink, such as a "
            f"TorchTransport), not {type(transport).__name__}."
        )
    elif transport.peers != peers:
        raise ValueError(
            f"Argument 'transport' must be a link {'of peers' if peers else 'with a master'} "
            f"for scheme {scheme_name(scheme)!r} (peers={peers})."
        )
    ranks = transport.K + (0 if peers else 1)
    if world_size is not None and world_size != ranks:
        raise ValueError(f"Argument 'world_size' must be the job's {ranks} ranks, not {world_size}.")
    if rank is not None and rank != transport.rank:
        raise ValueError(
            f"Argument 'rank' must be this process's rank {transport.rank} of the job's {ranks}, not {rank}."
        )
    return transport


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
    source : array, str, os.PathLike, sequence or mapping of them, or None
        The records (see :func:`pack_arrays`), read on the master only (``None`` elsewhere).
    epochs : int
        Epochs the job trains, ``start_epoch .. start_epoch + epochs - 1``.
    start_epoch : int
        The first epoch (read from the dataset); :meth:`load_state_dict` sets it on resume.
    seed, order, strategy, max_repair_rounds, timeout, storage
        As :class:`coded_shuffle.loader.MPILoader`; the same on every rank (``storage = M > 1``:
        every worker keeps ``M`` batches' worth of pieces and yields whole records).
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
        predicted time of the first transition on it for the job's ranks
        (:func:`~coded_shuffle.loader._common.choose_scheme`; :attr:`choice` says why). Or a
        scheme of one's own (an object satisfying :class:`~coded_shuffle.engine.schemes.Scheme`,
        used as is on every rank): among peers if it says so (``peers``), else with a master.
    network : Network, optional
        The network ``scheme="auto"`` chooses on (:class:`coded_shuffle.network.Network`).
    decode : callable, optional
        A record's bytes (a read-only ``uint8`` numpy array, a view of the epoch's rows; copy it
        to keep it) to the user's sample (an image decoder, say), run in the DataLoader's worker
        processes; picklable if they are spawned. Default: the rows as tensors.

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
    ) -> None:
        super().__init__()
        #: The user's decode (a record's bytes to a sample), or None: the rows as tensors.
        self.decode = check_decode(decode)
        scheme = check_scheme(scheme)
        #: What ``scheme="auto"`` chose and why, in one line (None for a scheme given).
        self.choice: str | None = None
        if scheme == "auto":
            scheme, self.choice = _auto_scheme(source, transport, network, seed=seed, order=order,
                                               start_epoch=start_epoch, strategy=strategy)  # fmt: skip
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
        records = tensor_records(source) if reads and source is not None else source  # rows read as held
        options: dict[str, Any] = {
            "epochs": epochs, "seed": seed, "order": order, "max_repair_rounds": max_repair_rounds,
            "timeout": timeout, "storage": storage, "scheme": scheme,
            **({} if peers else {"strategy": strategy}),
        }  # fmt: skip
        #: The loader each epoch comes from: a master's (:class:`MPILoader`), or the peers'.
        self._loader_class: type[MPILoader] = PeerLoader if peers else MPILoader
        # Checks every option now, on every rank (the loader proper is made at the first epoch).
        self._loader = self._loader_class(
            records, start_epoch=start_epoch, transport=transport, writable=True, **options
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
        self._feed: Any = None
        self._batch: EpochBatch | None = None
        self._tensors: tuple[torch.Tensor, ...] = ()
        self._bytes: np.ndarray = np.empty((0, 0), dtype=np.uint8)  # the records' bytes, with decode
        self._ids: np.ndarray = np.empty(0, dtype=np.int64)
        self._pos: np.ndarray = np.empty(0, dtype=np.int64)  # sample s is row _pos[s] of the batch
        self._skip = 0  # samples of the current epoch already trained on (a mid-epoch resume)
        self._yielded = 0
        self._N: int | None = self._loader.N
        self._pid = os.getpid()
        self._iterated: tuple[int, int] = (self._pid, 0)
        self._ended = False

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
        """Master: deliver every epoch after the first; return the transitions' reports."""
        return self._loader.serve()

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
        epochs = iter(self._loader)
        self._feed = Prefetch(epochs) if self.prefetch else epochs
        atexit.register(self.close)  # after the loader's own: runs first
        self._advance()

    def _next_batch(self) -> EpochBatch | None:
        if isinstance(self._feed, Prefetch):
            return self._feed.take()
        return next(self._feed, None)

    def _advance(self) -> None:
        batch = self._next_batch()
        if batch is None:
            if self.stopped_by is not None and self._batch is not None:  # another worker stopped
                self._end_early()
                return
            raise RuntimeError(
                f"{self._who()}: the job ended after epoch {self.epoch}, before the epochs asked for."
            )
        if self._batch is not None:
            self._skip = 0
        self._batch, self._yielded = batch, 0
        self._N = self._loader.N
        L = len(self)
        n = len(batch)
        pos = np.arange(L) % n  # drop_last keeps the first L; padding repeats the first records
        self._ids = np.ascontiguousarray(batch.ids[pos])
        self._pos = pos
        if self.decode is None:
            self._tensors = _columns(batch.records)
        else:
            self._bytes = record_bytes_of(batch.records)
        if batch.epoch == self.start_epoch + self.epochs - 1 and not isinstance(self._feed, Prefetch):
            next(self._feed, None)  # the last epoch: the loader ends the job with the master now

    def _who(self) -> str:
        return f"rank {self.transport.rank} (worker {self.worker})"

    def _end_early(self) -> None:
        """Another worker stopped: this rank's later epochs are empty (said once, in one line)."""
        if not self._ended:
            k = self.stopped_by
            assert k is not None and self._batch is not None
            who = f"rank {self.transport.rank_of(k)} (worker {k})"
            print(
                f"coded_shuffle.torch: {self._who()}: the job ended after epoch {self._batch.epoch}: "
                f"{who} stopped early; later epochs yield no samples.",
                file=sys.stderr,
                flush=True,
            )
        self._ended = True

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
        return self._samples(share, counted=info is None)

    def _samples(self, share: np.ndarray, *, counted: bool) -> Iterator[Any]:
        cols, pos, ids, decode = self._tensors, self._pos, self._ids, self.decode
        single = decode is not None or (
            len(cols) == 1 and self._batch is not None and not self._batch.records.dtype.names
        )
        for s in share.tolist():
            r = int(pos[s])
            if decode is not None:
                row = decode(self._bytes[r])
            else:
                row = cols[0][r] if single else tuple(c[r] for c in cols)
            if counted:
                self._yielded = s + 1 - self._skip
            if self.with_ids:
                yield (int(ids[s]), row) if single else (int(ids[s]), *row)
            else:
                yield row

    # ---- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Where training is: the epoch, and the samples of it yielded in this process.

        Samples are counted when the dataset is iterated in this process (``num_workers = 0``);
        with DataLoader workers the state is the start of the epoch. A state saved at the end of
        an epoch resumes at the next one.
        """
        epoch = self.start_epoch if self._batch is None else self._batch.epoch
        done = self._skip + self._yielded
        if self._batch is not None and done >= len(self) and epoch < self.start_epoch + self.epochs - 1:
            epoch, done = epoch + 1, 0
        return {"epoch": epoch, "samples": done, "seed": self.seed, "K": self.K}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at ``state`` (from :meth:`state_dict`): before the first epoch, on every rank.

        The epoch resumed is read from the dataset (no transition); with ``samples``, a worker
        skips the samples of it that were trained on before.
        """
        if not isinstance(state, Mapping) or not {"epoch", "samples", "seed", "K"} <= set(state):
            raise TypeError(
                "Argument 'state' must be a mapping from state_dict(), with epoch, samples, seed, K."
            )
        if self._feed is not None or self._loader._used:  # type: ignore[attr-defined]
            raise RuntimeError("load_state_dict must be called before the first epoch.")
        if state["seed"] != self.seed or state["K"] != self.K:
            raise ValueError(
                f"Argument 'state' must come from a job of seed {self.seed} and K = {self.K}, "
                f"not seed {state['seed']} and K = {state['K']}."
            )
        end = self.start_epoch + self.epochs
        epoch = check_int(state["epoch"], "state['epoch']", minimum=self.start_epoch)
        if epoch >= end:
            raise ValueError(f"Argument 'state' must resume before epoch {end}, not at epoch {epoch}.")
        self._skip = check_int(state["samples"], "state['samples']", minimum=0)
        self._loader.resume(epoch, end - epoch)
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
        for key in ("_loader", "transport", "_feed", "_records"):
            state[key] = None
        return state
