"""The parts of :mod:`coded_shuffle.torch` around its dataset: DataLoader workers, tensors, the
job's link, a worker's share of an epoch resumed mid-way (:mod:`coded_shuffle.engine.rest`), and
the loader of a storage of ``M > 1`` batches kept in a ``cache_dir`` (:class:`StoredLoader`)."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from ._checks import check_int
from ._progress import say
from .codec import Dataset
from .engine.mpi import Watchdog
from .engine.rest import load_worker_cache, receive_rest, save_worker_cache, table_dataset
from .engine.schedule import Epoch, EpochSchedule, check_network
from .engine.schemes import Scheme
from .engine.session import Session
from .loader import EpochBatch, MPILoader, PeerLoader
from .loader._common import (
    RowLayout,
    _batch_cache,
    _order_spec,
    bytes_records,
    choose_scheme,
    record_bytes_of,
    scheme_name,
    variable_batch,
)
from .loader.arrays import tensor_records
from .loader.peers import peer_link
from .orders import epoch_batch_sizes, epoch_order
from .records import fixed_record_bytes
from .transport import ControlLink, mpi_world
from .transport.registry import default_link
from .transport.torch_dist import torch_world

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
    """One tensor per field of a structured array, or the one tensor of a plain array; none for
    records of variable sizes (an ``object`` array: each is its own tensor, :func:`_record_tensor`)."""
    if records.dtype == object:
        return ()
    if records.dtype.names:
        return tuple(_tensor(records[f]) for f in records.dtype.names)
    return (_tensor(records),)


def _record_tensor(record: np.ndarray) -> torch.Tensor:
    """A record of variable size as a 1-D ``uint8`` tensor of its length: a view of the epoch's
    bytes when they are writable (as a rank's loader makes them), else a copy."""
    return torch.from_numpy(record if record.flags.writeable else record.copy())


def _read_only(record: np.ndarray) -> np.ndarray:
    """A read-only view of ``record`` (what ``decode`` is given)."""
    view = record.view()
    view.flags.writeable = False
    return view


def samples(ds: Any, share: np.ndarray, *, counted: bool) -> Iterator[Any]:
    """Dataset ``ds``'s samples ``share`` of the current epoch (counted in ``ds._yielded`` when
    ``counted``): the rows' tensors (a tuple, one a field), a record of variable size as its own
    ``uint8`` tensor, or ``decode(record)``; each after its id with ``with_ids``."""
    cols, pos, ids, decode, data = ds._tensors, ds._pos, ds._ids, ds.decode, ds._bytes
    variable = ds._batch is not None and ds._batch.variable
    single = decode is not None or variable or (
        len(cols) == 1 and ds._batch is not None and not ds._batch.records.dtype.names
    )  # fmt: skip
    for s in share.tolist():
        r = int(pos[s])
        if decode is not None:
            row = decode(_read_only(data[r]) if variable else data[r])
        elif variable:
            row = _record_tensor(data[r])
        else:
            row = cols[0][r] if single else tuple(c[r] for c in cols)
        if counted:
            ds._yielded = s + 1 - ds._skip
        if ds.with_ids:
            yield (int(ids[s]), row) if single else (int(ids[s]), *row)
        else:
            yield row


def tensor_source(source: object) -> Any:
    """The dataset's ``source`` as a record source: a sequence of ``bytes``, one record each of
    any size (:func:`~coded_shuffle.loader.bytes_records`); else rows torch can hold
    (:func:`~coded_shuffle.loader.arrays.tensor_records`)."""
    if isinstance(source, (list, tuple)) and any(
        isinstance(x, (bytes, bytearray, memoryview)) for x in source
    ):
        return bytes_records(source)
    return tensor_records(source)


def balanced_length(ds: Any, epoch: int) -> int | None:
    """Samples every rank of dataset ``ds`` yields of ``epoch`` when its batches hold equal bytes
    (``balance="bytes"``; None by count): the shortest batch's count with ``drop_last``, else the
    longest's, from each record's bytes (its loader's ``_sizes``)."""
    if ds.balance != "bytes":
        return None
    N, K = ds.N, ds.K
    perm = epoch_order(N, seed=ds.seed, epoch=epoch, spec=_order_spec(ds._order, N))
    counts = epoch_batch_sizes(perm, K, sizes=ds._loader._sizes, balance="bytes")
    return int(counts.min() if ds.drop_last else counts.max())


def _auto_scheme(
    source: object, transport: object, network: object, *, seed: int, order: object, start_epoch: int,
    strategy: str, storage: int = 1, balance: str = "count",
) -> tuple[str, str]:  # fmt: skip
    """``scheme="auto"``: the records' number and sizes from ``source`` (on every rank), the
    job's ranks from ``transport`` or the launcher's world, then :func:`choose_scheme` (on the
    bytes of records of many sizes, the storage's pieces, the batches cut by ``balance``)."""
    check_network(network, "auto", name="scheme")  # before the source is read
    if source is None:
        raise TypeError("Argument 'source' must be given on every rank with scheme 'auto'.")
    records = tensor_source(source)
    sizes = None if records.record_bytes is not None else np.asarray(records.sizes, dtype=np.int64)
    B = fixed_record_bytes(records) if sizes is None else int(sizes.max())
    if isinstance(transport, ControlLink):
        ranks = transport.K + (0 if transport.peers else 1)
    else:
        world = torch_world()
        ranks = world[1] if world is not None else int(mpi_world().Get_size())
    return choose_scheme(len(records), B, ranks, seed=seed, order=order, start_epoch=start_epoch,
                         network=network, strategy=strategy, sizes=sizes, storage=storage,
                         balance=balance)  # fmt: skip


def _job_link(
    transport: object,
    peers: bool,
    scheme: str | Scheme,
    rank: int | None,
    world_size: int | None,
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


def check_dataset_of(n: Any, fp: Any, *, N: int, fingerprint: str) -> None:
    """Refuse a checkpoint of another dataset (``n`` records, fingerprint ``fp``; None: unknown)."""
    if n is not None and n != N:
        raise ValueError(f"Argument 'state' must come from a dataset of N = {N} records, not N = {n}.")
    if fp is not None and fp != fingerprint:
        raise ValueError(
            f"Argument 'state' must come from this dataset (fingerprint {fingerprint[:16]}), not "
            f"another of N = {N} records (fingerprint {str(fp)[:16]}): their checksums differ."
        )


def rest_batch(
    link: ControlLink, dog: Watchdog, epoch: int, shares: list[np.ndarray], layout: RowLayout, table: Dataset,
    *, cache_dir: Any, seed: int, drop_last: bool,
) -> tuple[EpochBatch, int, str | None]:  # fmt: skip
    """A worker's share of the rest of ``epoch`` (collective with the master's
    :func:`~coded_shuffle.engine.rest.serve_rest`): what its cache file in ``cache_dir`` still holds,
    the rest from the master. Returns the batch, the samples every rank yields of the rest, and a
    line about the cache file (treated as absent, rows dropped) or None."""
    k = link.worker
    assert k is not None
    held, note = (None, None) if cache_dir is None else load_worker_cache(cache_dir, k, table, seed=seed)
    want = shares[k]
    rows, _ = receive_rest(link, dog, want, held, table.checksums, table.record_bytes, table.lengths)
    sizes = [int(b.size) for b in shares]
    L = min(sizes) if drop_last else max(sizes)
    if min(sizes) == 0 and L:
        raise ValueError(
            f"Argument 'state' leaves {sum(sizes)} samples of epoch {epoch}: fewer than the "
            f"K = {len(shares)} workers, some of which would have none to pad with; resume at the next epoch."
        )
    ids = want.copy()
    ids.flags.writeable = False
    if table.lengths is not None:  # records of variable sizes: each its own bytes
        return variable_batch(epoch, k, ids, rows, table.lengths[want], writable=True), L, note
    batch = EpochBatch(epoch=epoch, worker=k, ids=ids, records=layout.rows(rows, writable=True), decoded=0)
    return batch, L, note


def parse_state(
    state: object, *, seed: int, start: int, end: int, K: int, peers: bool
) -> tuple[int, int, int, list[tuple[int, int]], tuple[Any, Any]]:
    """A checkpoint's epoch, ``K``, samples, earlier segments, and ``(N, fingerprint)``, checked
    against a job of ``seed`` running epochs ``start .. end - 1`` (each refusal names ``state``)."""
    if not isinstance(state, Mapping) or not {"epoch", "samples", "seed", "K"} <= set(state):
        raise TypeError("Argument 'state' must be a mapping from state_dict(), with epoch, samples, seed, K.")
    if state["seed"] != seed:
        raise ValueError(f"Argument 'state' must come from a job of seed {seed}, not seed {state['seed']}.")
    epoch = check_int(state["epoch"], "state['epoch']", minimum=start)
    if epoch >= end:
        raise ValueError(f"Argument 'state' must resume before epoch {end}, not at epoch {epoch}.")
    was = check_int(state["K"], "state['K']", minimum=1)
    samples = check_int(state["samples"], "state['samples']", minimum=0)
    segs = state.get("segments") or []
    if isinstance(segs, (str, bytes)) or not isinstance(segs, list):
        raise TypeError(f"Argument 'state' must hold a list of [K, samples] segments, not {segs!r}.")
    name = "state['segments']"
    segments = [(check_int(a, name, minimum=1), check_int(b, name, minimum=0)) for a, b in segs]
    if peers and (segments or ((samples or segments) and was != K)):
        raise ValueError(
            f"Argument 'state' must come from a job of K = {K} to resume mid-epoch with a job of "
            f"peers, not K = {was}: resume at an epoch boundary."
        )
    return epoch, was, samples, segments, (state.get("N"), state.get("fingerprint"))


def check_cache_dir(cache_dir: Any, peers: bool, scheme: str) -> Any:
    """The dataset's ``cache_dir``: None, or a folder's path with a scheme that runs with a master."""
    if cache_dir is not None and (peers or not isinstance(cache_dir, (str, os.PathLike))):
        raise (ValueError if peers else TypeError)(
            "Argument 'cache_dir' must be a folder's path, with a scheme that runs with a master, "
            f"not {type(cache_dir).__name__} with scheme {scheme!r}."
        )
    return cache_dir


class StoredLoader(MPILoader):
    """The dataset's loader of a storage of ``M > 1`` batches kept in a ``cache_dir``.

    As :class:`~coded_shuffle.loader.MPILoader` with ``cache_dir``, but for two things. A job that
    starts at epoch ``t > 0`` restores the storage of epoch ``t`` itself (the epoch a checkpoint
    resumes, mid-way or at its start), not that of ``t - 1`` followed by a transition: a worker's
    batch of ``t`` is within it. And a worker's file is written when the dataset makes an epoch
    the current one (:meth:`keep`), not when its transition ends (with ``prefetch``, a
    transition ahead): the file holds the storage of the epoch trained on, which a restart restores.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._kept: OrderedDict[int, tuple[np.ndarray, np.ndarray, Dataset]] = OrderedDict()
        self._kept_lock = threading.Lock()

    def _first(self, schedule: EpochSchedule) -> tuple[Epoch | None, Epoch]:
        """The storage of the first epoch restored itself (followed from epoch 0): no transition."""
        *_, now = schedule.epochs(start=0, count=self.start_epoch + 1)
        return None, now

    def _keep(self, epoch: int, session: Session, B: int) -> None:
        """A copy of this worker's storage of ``epoch``, for :meth:`keep` (its buffer is reused)."""
        if self.cache_dir is None or self.worker is None:
            return
        cache, sums = session.cache, session.checksums
        assert cache is not None and sums is not None
        table = table_dataset(sums, B, session.lengths)  # a storage's pieces of many sizes: their lengths
        copy = (np.array(cache.ids, dtype=np.int64), np.array(cache.data), table)
        with self._kept_lock:
            self._kept[epoch] = copy

    def keep(self, epoch: int) -> None:
        """Worker: its storage of ``epoch`` to its file (crash-safe); the copies before it dropped."""
        with self._kept_lock:
            while self._kept and next(iter(self._kept)) < epoch:
                self._kept.popitem(last=False)
            got = self._kept.pop(epoch, None)
        if got is not None and self.cache_dir is not None and self.worker is not None:
            ids, data, table = got
            save_worker_cache(self.cache_dir, self.worker, ids, data, table, epoch=epoch, seed=self.seed)


def loader_class(peers: bool, storage: object, cache_dir: object) -> type[MPILoader]:
    """The dataset's loader: the peers' (:class:`~coded_shuffle.loader.PeerLoader`), a
    :class:`StoredLoader` that keeps a storage of ``M > 1`` batches in ``cache_dir`` (the
    dataset keeps whole batches itself with one batch a worker), else an ``MPILoader``."""
    if peers:
        return PeerLoader
    return StoredLoader if cache_dir is not None and storage != 1 else MPILoader


def keep_batch(ds: Any, batch: EpochBatch) -> None:
    """With a ``cache_dir``, dataset ``ds``'s worker keeps ``batch``, the epoch it trains on, in its
    file: its storage (:meth:`StoredLoader.keep`), or the batch's records."""
    if isinstance(ds._loader, StoredLoader):
        ds._loader.keep(batch.epoch)
    elif ds.cache_dir is not None and ds._table is not None and ds.worker is not None:
        if batch.variable:  # zero-padded to the records' width, with their lengths (the table's)
            held = _batch_cache(batch, ds._table.record_bytes)
            ids, rows = held.ids, held.data
        else:
            ids, rows = batch.ids, record_bytes_of(batch.records)
        save_worker_cache(ds.cache_dir, ds.worker, ids, rows, ds._table, epoch=batch.epoch, seed=ds.seed)


def stored_resume(loader: Any, *, epoch: int, end: int) -> None:
    """Resume a :class:`StoredLoader` at ``epoch`` (to ``end``) at an epoch boundary, or mid-epoch
    at the same ``K``: its storage of that epoch restored from the files, the peers and the
    source, or, from files of another ``K``, cut again from them
    (:mod:`~coded_shuffle.engine.recut_serve`). Mid-epoch at another ``K`` the dataset deals the
    rest of the epoch first (:mod:`~coded_shuffle.engine.rest`) and the storage of the next epoch
    is cut again."""
    loader.resume(epoch, end - epoch)


def say_ended(ds: Any) -> None:
    """Another worker stopped: dataset ``ds``'s later epochs are empty (said once, in one line)."""
    if not ds._ended:
        k = ds.stopped_by
        assert k is not None and ds._batch is not None
        who = f"rank {ds.transport.rank_of(k)} (worker {k})"
        say(
            f"coded_shuffle.torch: {ds._who()}: the job ended after epoch {ds._batch.epoch}: "
            f"{who} stopped early; later epochs yield no samples."
        )
    ds._ended = True
