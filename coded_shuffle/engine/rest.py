"""The rest of an epoch: a job checkpointed mid-epoch at ``K`` workers resumed at ``K'``.

Notation
--------
============  ==========================================================================
``K``, ``K'``  workers before and after the change
``A_k``        worker ``k``'s batch of the epoch at ``K``: the ``k``-th contiguous run of the
               epoch's order (:func:`~coded_shuffle.orders.epoch_order`), read in that order
``s``          samples each worker had read of its share when the job was checkpointed
``R_k``        what worker ``k`` had not read: ``A_k`` after its first ``s``
============  ==========================================================================

A checkpoint's state is global: the seed, the epoch, and the *segments* of it read so far, each
a number of workers and the samples each of them read (the workers of a training job read in
step). The rest of the epoch is a function of that state alone (:func:`rest_of_epoch`), so every
rank of a resumed job, whatever their number, computes the same shares, and every sample of the
epoch is read exactly once across the change.

Across processes (:func:`serve_rest`, :func:`receive_rest`): each worker says which records of
its share it still holds (from a cache file read back and checked,
:mod:`~coded_shuffle.engine.cache_dir`; after a restart without one, none), and the master sends
each one the rest, uncoded, from the records' source.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._checks import check_int
from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..orders import OrderSpec, Placement, batch_sizes, epoch_batch_sizes, epoch_order, placement_from_owner
from ..transport import ControlLink
from .cache_dir import CacheFileError, _clean_tails, cache_path, load_cache, save_cache
from .mpi import Watchdog, posts_round, setup_step

__all__ = [
    "batches_of", "deal_rest", "rest_of_epoch", "RestReport", "serve_rest", "receive_rest", "table_dataset",
    "save_worker_cache", "load_worker_cache", "HeldStart", "serve_held", "receive_held",
]  # fmt: skip


def batches_of(
    N: int, K: int, *, seed: int, epoch: int, order: OrderSpec | None = None, sizes: object = None,
    balance: str = "count",
) -> list[np.ndarray]:  # fmt: skip
    """The batches of ``epoch`` at ``K`` workers, each in the epoch's order: the ``k``-th run of
    :func:`~coded_shuffle.orders.epoch_order` (what each worker reads, in that order), of equal
    counts, or with ``balance="bytes"`` of equal bytes, ``sizes`` each record's
    (:func:`~coded_shuffle.orders.epoch_batch_sizes`, as the epoch's schedule cuts them).

    Examples
    --------
    >>> [b.size for b in batches_of(10, 3, seed=0, epoch=1)]
    [4, 3, 3]
    >>> sizes = np.array([9] + [1] * 9)  # the bytes of each batch, within one record of equal
    >>> [int(sizes[b].sum()) for b in batches_of(10, 3, seed=0, epoch=1, sizes=sizes, balance="bytes")]
    [6, 9, 3]
    """
    o = np.asarray(epoch_order(N, seed=seed, epoch=epoch, spec=order or OrderSpec()), dtype=np.int64)
    counts = epoch_batch_sizes(o, K, sizes=sizes, balance=balance)
    cut = np.concatenate(([0], np.cumsum(counts)))
    return [o[int(cut[k]) : int(cut[k + 1])] for k in range(K)]


def deal_rest(left: Sequence[np.ndarray], K_next: int) -> list[np.ndarray]:
    """What ``len(left)`` workers have left to read, dealt to ``K_next`` workers.

    Every sample is read exactly once and the shares differ by at most one
    (:func:`~coded_shuffle.orders.batch_sizes` of the total): worker ``j`` below both counts keeps
    the head of its own ``left[j]`` (samples it holds already), up to its share; the rest (a
    leaving worker's all) is dealt in order to the workers below their share.

    Examples
    --------
    >>> [s.tolist() for s in deal_rest([np.array([5, 6, 7]), np.array([8])], 3)]
    [[5, 6], [8], [7]]
    """
    K = len(left)
    share = batch_sizes(sum(int(r.size) for r in left), K_next)
    kept = [left[j][: int(share[j])] if j < K else np.empty(0, np.int64) for j in range(K_next)]
    pool = np.concatenate([left[k][int(share[k]) :] if k < K_next else left[k] for k in range(K)])
    out, at = [], 0
    for j in range(K_next):
        more = int(share[j]) - int(kept[j].size)
        out.append(np.concatenate([kept[j], pool[at : at + more]]).astype(np.int64))
        at += more
    return out


def rest_of_epoch(
    N: int,
    *,
    seed: int,
    epoch: int,
    segments: Sequence[tuple[int, int]],
    K_next: int,
    order: OrderSpec | None = None,
    sizes: object = None,
    balance: str = "count",
) -> list[np.ndarray]:
    """The shares of ``K_next`` workers of what is left of epoch ``epoch`` after ``segments``.

    ``segments[0] = (K_0, s_0)``: the epoch started at ``K_0`` workers, each reading its batch
    (:func:`batches_of`: of equal counts, or with ``balance="bytes"`` of equal bytes, ``sizes``
    each record's), and each read its first ``s_0`` samples (at most its share); each later
    ``(K_i, s_i)``: what was left was dealt to ``K_i`` workers (:func:`deal_rest`), each of whom
    read the first ``s_i`` of its share. What is left then is dealt to ``K_next`` workers.

    Examples
    --------
    >>> [b.tolist() for b in batches_of(12, 3, seed=0, epoch=0)]  # the epoch at K = 3
    [[1, 10, 9, 8], [11, 0, 5, 2], [6, 7, 3, 4]]
    >>> [b.tolist() for b in rest_of_epoch(12, seed=0, epoch=0, segments=[(3, 2)], K_next=2)]
    [[9, 8, 3], [5, 2, 4]]
    >>> [b.tolist() for b in rest_of_epoch(12, seed=0, epoch=0, segments=[(3, 2), (2, 1)], K_next=4)]
    [[8], [2], [3], [4]]
    """
    N = check_int(N, "N", minimum=1)
    K_next = check_int(K_next, "K_next", minimum=1)
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise ValueError("Argument 'segments' must be a sequence of at least one (K, samples) pair.")
    left: list[np.ndarray] = []
    for i, seg in enumerate(segments):
        if not isinstance(seg, Sequence) or len(seg) != 2:
            raise ValueError(f"Argument 'segments' must hold (K, samples) pairs, not {seg!r} at {i}.")
        K = check_int(seg[0], "segments", minimum=1)
        s = check_int(seg[1], "segments", minimum=0)
        shares = (
            deal_rest(left, K) if i
            else batches_of(N, K, seed=seed, epoch=epoch, order=order, sizes=sizes, balance=balance)
        )  # fmt: skip
        left = [b[min(s, b.size) :] for b in shares]
    return deal_rest(left, K_next)


@dataclass(frozen=True)
class RestReport:
    """What the master sent so that every worker holds the rest of the epoch it reads.

    ``kept_records``: samples of the rest that a worker already held (read back from its cache
    file); ``source_records``/``source_bytes``: sent from the records' source (the bytes of
    records of many sizes their own, which travel zero-padded to the widest in this setup step).
    """

    K: int
    kept_records: int
    source_records: int
    source_bytes: int


def serve_rest(
    link: ControlLink, watchdog: Watchdog, dataset: Dataset, rest: Sequence[np.ndarray]
) -> RestReport:
    """Master, collective with :func:`receive_rest` on every worker: send each worker the records
    of its share ``rest[k]`` that it does not hold. Returns the counts."""
    held = posts_round(link, watchdog, None, "rest: holdings")
    kept, sent, sent_bytes = 0, 0, 0
    with setup_step(link, watchdog, "rest: rows"):
        for k in range(link.K):
            have = np.asarray(held[k], dtype=np.int64)
            missing = rest[k][~np.isin(rest[k], have)]
            kept += int(rest[k].size - missing.size)
            sent += int(missing.size)
            sent_bytes += _bytes_of(dataset, missing)
            link.send_rows(k, np.ascontiguousarray(dataset.data[missing]))
    return RestReport(K=link.K, kept_records=kept, source_records=sent, source_bytes=sent_bytes)


def receive_rest(
    link: ControlLink, watchdog: Watchdog, want: np.ndarray, held: Cache | None, checksums: np.ndarray,
    B: int, lengths: np.ndarray | None = None,
) -> tuple[np.ndarray, int]:  # fmt: skip
    """Worker: the rows of ``want`` (its share, in order), from ``held`` (its records read back and
    checked) where it holds them, from the master otherwise; every row checked against
    ``checksums`` (the master's table; records of many sizes at their ``lengths``, the table of
    every record's). Returns the ``(len(want), B)`` rows (zero-padded) and the number kept."""
    from ..codec import record_checksums

    want = np.asarray(want, dtype=np.int64)
    rows = np.full(want.size, -1, dtype=np.int64) if held is None else held.rows(want)
    mine = rows >= 0
    posts_round(link, watchdog, want[mine], "rest: holdings")
    out = np.empty((want.size, B), dtype=np.uint8)
    with setup_step(link, watchdog, "rest: rows"):
        got = link.receive_rows(np.empty((int((~mine).sum()), B), dtype=np.uint8))
    if held is not None and mine.any():
        out[mine] = np.asarray(held.data)[rows[mine]]
    out[~mine] = got
    if not np.array_equal(record_checksums(out, _at(lengths, want)), np.asarray(checksums)[want]):
        raise IntegrityError(
            f"Worker {link.worker}: the rest of the epoch does not match the master's checksums."
        )
    return out, int(mine.sum())


def table_dataset(checksums: np.ndarray, B: int, lengths: np.ndarray | None = None) -> Dataset:
    """A worker's view of the master's records, for its cache file: their ``N`` load-time
    checksums, record size ``B`` (the widest, with ``lengths``) and, records of many sizes, each
    one's length (the rows, which a worker does not have, read as zeros)."""
    sums = np.asarray(checksums, dtype=np.uint64)
    lens = None if lengths is None else np.asarray(lengths, dtype=np.int64)
    return Dataset(
        data=np.broadcast_to(np.zeros((1, B), np.uint8), (sums.size, B)), lengths=lens, checksums=sums
    )


def _widened(held: Cache, B: int) -> Cache | None:
    """``held`` (records of variable sizes) zero-padded to the job's width ``B``; None when its
    rows are wider (none of them the job's records)."""
    width = int(np.asarray(held.data).shape[1])
    if held.lengths is None or width == B:
        return held
    if width > B:
        return None
    data = np.zeros((len(held), B), dtype=np.uint8)
    data[:, :width] = held.data
    return Cache(ids=held.ids, data=data, lengths=held.lengths)


def _at(lengths: np.ndarray | None, ids: np.ndarray) -> np.ndarray | None:
    """The lengths of the records ``ids`` (None: records of one size)."""
    return None if lengths is None else np.asarray(lengths, dtype=np.int64)[ids]


def _bytes_of(dataset: Dataset, ids: np.ndarray) -> int:
    """The bytes of the records ``ids`` of ``dataset`` (their own lengths where they vary)."""
    if dataset.lengths is None:
        return int(ids.size) * dataset.record_bytes
    return int(np.asarray(dataset.lengths)[ids].sum())


def _good_rows(held: Cache, checksums: np.ndarray, lengths: np.ndarray | None) -> np.ndarray:
    """Which rows of ``held`` hold a record of the job whose checksum is that of ``checksums``
    (records of many sizes: at its length in ``lengths``, the cache's own where it has them,
    with zeros after it)."""
    from ..codec import record_checksums

    ids = np.asarray(held.ids, dtype=np.int64)
    data = np.asarray(held.data)
    N = int(np.asarray(checksums).size)
    good = (ids >= 0) & (ids < N)
    if lengths is not None:
        lens = np.zeros(ids.size, dtype=np.int64)
        lens[good] = np.asarray(lengths, dtype=np.int64)[ids[good]]
        if held.lengths is not None:
            good &= np.asarray(held.lengths) == lens
        good &= lens <= data.shape[1]
    inside = np.flatnonzero(good)
    if inside.size:
        sub = data[inside]
        lens_in = None if lengths is None else lens[inside]
        ok = record_checksums(sub, lens_in) == np.asarray(checksums)[ids[inside]]
        if lens_in is not None:
            ok &= _clean_tails(sub, lens_in)
        good[inside] = ok
    return good


def save_worker_cache(
    cache_dir: str | os.PathLike[str], worker: int, ids: np.ndarray, rows: np.ndarray, table: Dataset, *,
    epoch: int, seed: int,
) -> Path:  # fmt: skip
    """Write worker ``worker``'s records (ids ``ids``, ``(n, B)`` bytes ``rows``, zero-padded where
    the records of ``table`` vary in size) of ``epoch`` to its file in ``cache_dir``
    (:func:`~.cache_dir.save_cache`, crash-safe)."""
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    order = np.argsort(ids, kind="stable")
    ids = np.asarray(ids, dtype=np.int64)[order]
    cache = Cache(ids=ids, data=np.ascontiguousarray(rows[order]), lengths=_at(table.lengths, ids))
    return save_cache(cache_path(folder, worker), cache, table, epoch=epoch, worker=worker, seed=seed)


def load_worker_cache(
    cache_dir: str | os.PathLike[str], worker: int, table: Dataset, *, seed: int
) -> tuple[Cache | None, str | None]:
    """What worker ``worker``'s file in ``cache_dir`` still holds, checked (its rows against their
    checksums and the master's table), and a line when the file is treated as absent (cut short,
    altered, of another job or another worker) or some of its rows are dropped. No file: None."""
    path = cache_path(cache_dir, worker)
    if not path.exists():
        return None, None
    try:
        got = load_cache(path, table, seed=seed)
    except (CacheFileError, ValueError) as exc:
        return None, f"{exc} Treated as absent."
    if got.worker != worker:
        return None, f"Cache file {path}: written by worker {got.worker}, not {worker}. Treated as absent."
    note = None
    if got.dropped:
        note = f"Cache file {path}: {got.dropped} record(s) fail their checksum; delivered again."
    return got.cache, note


@dataclass(frozen=True)
class HeldStart:
    """How a job that starts from what its workers hold (their caches, not a deal) began.

    ``held_records``: records some worker held, checked, before the start; ``dropped_records``:
    records in the workers' caches that failed their checksum, were outside the job or held twice
    (treated as absent); ``joined``: the workers that held nothing (they joined, or their cache was
    lost); ``source_records``/``source_bytes``: records no worker held, sent uncoded from the
    source to their next holder before the first transition (the bytes of records of many sizes
    their own, as :class:`RestReport`'s); ``bound``: the genie bound, in
    records, of the rectangular shuffle from the holdings (with the source as one more holder) to
    the first epoch's batches (:func:`~coded_shuffle.bounds.lower_bound`): no delivery of that
    epoch, coded or not, sends fewer than ``bound`` records in all; ``bound_bytes``: the same in
    payload bytes (records of many sizes: the bound of the shuffle matrix in bytes).
    """

    K: int
    held_records: int
    dropped_records: int
    joined: tuple[int, ...]
    source_records: int
    source_bytes: int
    bound: int
    bound_bytes: int


def _checked_rows(
    held: Cache | None, checksums: np.ndarray, lengths: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """The rows of ``held`` whose record passes its checksum in ``checksums`` (records of many
    sizes: at its length in ``lengths``), their ids (increasing, each once) and the number of rows
    dropped."""
    if held is None or len(held) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), 0
    ids = np.asarray(held.ids, dtype=np.int64)
    rows = np.flatnonzero(_good_rows(held, checksums, lengths))
    rows = rows[np.argsort(ids[rows], kind="stable")]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = ids[rows[1:]] != ids[rows[:-1]]
    return rows[first], ids[rows[first]], int(ids.size - first.sum())


def _bound_bytes(held: Placement, nxt: Placement, bound: int, width: int, lengths: np.ndarray | None) -> int:
    """The genie bound of ``held -> nxt`` in payload bytes: ``bound`` records of ``width`` bytes,
    or, with ``lengths``, the bound of the byte matrix (records of no byte count for nothing)."""
    from ..bounds import lower_bound
    from ..matrix import shuffle_matrix

    if lengths is None:
        return bound * width
    some = np.asarray(lengths, dtype=np.int64) > 0
    if not some.any():
        return 0
    a, b = (placement_from_owner(np.asarray(p.owner, dtype=np.int64)[some], held.K) for p in (held, nxt))
    return int(lower_bound(shuffle_matrix(a, b, sizes=np.asarray(lengths)[some])).value)


def serve_held(
    link: ControlLink, watchdog: Watchdog, dataset: Dataset, placement_next: Placement
) -> tuple[Placement, HeldStart]:
    """Master, collective with :func:`receive_held` on every worker: the placement of what the
    workers hold, from which the first transition to ``placement_next`` is planned.

    Each worker posts the ids it holds, checked. A record held by several is held by the one
    whose batch it is next, else by the first; a record held by none is sent uncoded from the
    source to its next holder now (:attr:`HeldStart.source_records`), so that every record is
    held by one worker. The placement is shared with every worker.
    """
    from ..bounds import lower_bound
    from ..matrix import shuffle_matrix

    K, N = link.K, dataset.N
    posts = posts_round(link, watchdog, None, "rest: holdings")
    nxt = np.asarray(placement_next.owner, dtype=np.int64)
    owner = np.full(N, K, dtype=np.int64)
    ids = [np.asarray(p[0], dtype=np.int64) for p in posts]
    dropped = sum(int(p[1]) for p in posts)
    for k, got in enumerate(ids):  # first the copies that are where they go next
        owner[got[nxt[got] == k]] = k
    for k, got in enumerate(ids):
        free = got[owner[got] == K]
        owner[free] = k
    dropped += sum(int(got.size) for got in ids) - int((owner < K).sum())
    source = owner == K
    held, following = placement_from_owner(owner, K + 1), placement_from_owner(nxt, K + 1)
    bound = int(lower_bound(shuffle_matrix(held, following)).value)
    bound_bytes = _bound_bytes(held, following, bound, dataset.record_bytes, dataset.lengths)
    owner[source] = nxt[source]
    with setup_step(link, watchdog, "held: rows"):
        link.share_array(owner)
        for k in range(K):
            link.send_rows(k, np.ascontiguousarray(dataset.data[np.flatnonzero(source & (nxt == k))]))
    n = int(source.sum())
    start = HeldStart(
        K=K, held_records=N - n, dropped_records=dropped,
        joined=tuple(k for k in range(K) if not ids[k].size),
        source_records=n, source_bytes=_bytes_of(dataset, np.flatnonzero(source)), bound=bound,
        bound_bytes=bound_bytes,
    )  # fmt: skip
    return placement_from_owner(owner, K), start


def receive_held(
    link: ControlLink, watchdog: Watchdog, held: Cache | None, checksums: np.ndarray, B: int,
    lengths: np.ndarray | None = None,
) -> tuple[Cache, Placement]:  # fmt: skip
    """Worker, collective with :func:`serve_held`: post the ids of ``held`` (what it holds) whose
    rows pass their checksum in ``checksums`` (the master's table; records of many sizes at their
    ``lengths``, the table of every record's; a record that fails is treated as absent), receive
    the placement of the holdings and the records it is given from the source. Returns its cache
    under that placement (every row checked, zero-padded to ``B``) and the placement."""
    from ..codec import record_checksums

    k = link.worker
    assert k is not None
    rows, ids, dropped = _checked_rows(held, checksums, lengths)
    posts_round(link, watchdog, (ids, dropped), "rest: holdings")
    N = int(np.asarray(checksums).size)
    with setup_step(link, watchdog, "held: rows"):
        owner = link.share_array(np.empty(N, dtype=np.int64))
        placement = placement_from_owner(owner, link.K)
        mine = np.asarray(placement.batch(k), dtype=np.int64)
        new = mine[~np.isin(mine, ids)]
        got = link.receive_rows(np.empty((new.size, B), dtype=np.uint8))
    out = np.empty((mine.size, B), dtype=np.uint8)
    kept = np.isin(mine, ids)
    if kept.any():
        assert held is not None
        out[kept] = np.asarray(held.data)[rows[np.searchsorted(ids, mine[kept])]]
    out[~kept] = got
    own = _at(lengths, mine)
    if mine.size and not np.array_equal(record_checksums(out, own), np.asarray(checksums)[mine]):
        raise IntegrityError(f"Worker {k}: the records it starts from do not match the master's checksums.")
    return Cache(ids=mine, data=out, lengths=own), placement
