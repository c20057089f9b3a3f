"""A worker's cache in a file on its host's disk: written so that a crash never leaves a file that
passes as whole, read back memory-mapped and checked record by record.

A restarted job reads what each host still holds (:func:`load_cache_dir`), and its first
transition is planned from that (:func:`~coded_shuffle.engine.elastic.elastic_transition`)
instead of delivering every batch again from the source.

File layout (all integers little-endian; one file a worker, ``worker-<k>.cache``)
-----------------------------------------------------------------------------------
==========  =======  ==========================================================================
offset      bytes    field
==========  =======  ==========================================================================
0           8        magic ``b"CSCACHE\\x00"``
8           4        version: ``1``, records of one size; ``3`` (``2`` before), of many sizes
12          4        worker ``k``
16          8        ``N``, records of the dataset
24          8        ``B``, a record's size, or (versions 2 and 3) the longest record's
32          8        ``n``, records in this file
40          8        epoch whose batch this is
48          8        seed of the epoch orders (``2^64 - 1``: none)
56          16       the dataset's fingerprint: BLAKE2b-128 of its ``N`` load-time checksums
72          16       BLAKE2b-128 of the tables (ids, checksums and, versions 2, 3, lengths)
88          8        offset of the rows (a multiple of 64)
96          16       BLAKE2b-128 of bytes 0 .. 95
112         ``8 n``  ids, increasing, ``int64``
..          ``8 n``  their load-time checksums (:func:`~coded_shuffle.codec.record_checksums`), ``uint64``
..          ``8 n``  versions 2 and 3: each record's length in bytes, ``int64``, in ``[0, B]``
rows        ``n B``  the records, row ``i`` holding record ``ids[i]``; version 3: the records
                     end to end (the sum of their lengths) in a packed cache's layout, longest
                     first, records of one length in row order (:class:`~coded_shuffle.codec.Cache`);
                     version 2: each its length's bytes, then zeros to ``B``
==========  =======  ==========================================================================

Versions 2 and 3 are version 1 with the table of lengths; version 3 packs the records end to end
(a file of token documents of mean 457 B, longest 2,048 B, is a quarter of its version 2). A file
of records of one size is written as version 1, byte for byte as before, one of many sizes as
version 3; the reader takes all three, so every file written since the first; a file of another
version is damaged (treated as absent).

Writing (:func:`save_cache`): the whole file goes to a temporary name in the same folder, is
flushed and ``fsync``-ed, then renamed over the final name (``os.replace``, atomic on POSIX),
and the folder is ``fsync``-ed. A crash before the rename leaves the previous file (or none)
and a temporary file that no reader opens (the next write of that file removes it); a crash
after it leaves the new file whole. Writers of the same file at once (two processes, two threads)
each write a temporary file of their own, locked while it is written so that no other writer
removes it; the last rename wins, and a reader sees one whole file or the other.

Reading (:func:`load_cache`): the header's own digest, its magic and version, the size of the
file, then the tables' digest; a file that fails any of these is *damaged*
(:class:`CacheFileError`, treated as absent by :func:`load_cache_dir`). A file whole but of
another job (another dataset, record size or seed) is refused with a :class:`ValueError` that
names the file and what differs. The rows stay on disk (a read-only memory map); each one is
checked against its stored checksum (records of many sizes: at its length; in version 2, with
zeros after it to ``B``), and one that fails is dropped: its record is absent, and the next
transition delivers it.
"""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .._checks import check_int
from ..codec import Cache, Dataset
from ..errors import IntegrityError

__all__ = [
    "CacheFileError", "LoadedCache", "CacheHeader", "CACHE_VERSION", "cache_path", "dataset_fingerprint",
    "save_cache", "load_cache", "cache_header", "cache_ids", "save_cache_dir", "load_cache_dir",
]  # fmt: skip

MAGIC = b"CSCACHE\x00"
#: The newest version of the file layout this module writes (``3``: records of many sizes, end to
#: end; a file of records of one size is written as version ``1``); it reads versions 1 to 3.
CACHE_VERSION = 3
_HEAD = struct.Struct("<8sIIQQQQQ16s16sQ")  # the fields up to the header's digest (96 bytes)
_HEADER_BYTES = _HEAD.size + 16
_ALIGN = 64
_NO_SEED = (1 << 64) - 1
_CHUNK = 1 << 24


class CacheFileError(IntegrityError):
    """A cache file cut short or altered: it is treated as absent, never used."""


@dataclass(frozen=True, eq=False)
class LoadedCache:
    """What a worker's cache file held: the records that passed their checksums.

    ``cache`` holds them (its rows a read-only memory map of the file); ``epoch`` and ``worker``
    are the file's; ``dropped`` counts the rows that failed their checksum.
    """

    path: str
    cache: Cache
    epoch: int
    worker: int
    dropped: int


def _digest(*parts: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for p in parts:
        h.update(p)
    return h.digest()


def dataset_fingerprint(dataset: Dataset) -> bytes:
    """The 16 bytes that tell one dataset from another: a digest of its ``N`` load-time checksums.

    Examples
    --------
    >>> from coded_shuffle.codec import load_dataset
    >>> a = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> dataset_fingerprint(a) == dataset_fingerprint(load_dataset(a.data.copy()))
    True
    """
    return _digest(np.ascontiguousarray(dataset.checksums, dtype="<u8").data)


def _check_dataset(dataset: object) -> None:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")


def _check_folder(cache_dir: str | os.PathLike[str]) -> Path:
    """``cache_dir`` as a path, refused (naming it) when it is a file."""
    if not isinstance(cache_dir, (str, os.PathLike)):
        raise TypeError(f"Argument 'cache_dir' must be a path, not {type(cache_dir).__name__}.")
    folder = Path(cache_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"Argument 'cache_dir' must be a folder, not the file {folder}.")
    return folder


def cache_path(cache_dir: str | os.PathLike[str], worker: int) -> Path:
    """The file of worker ``worker``'s cache in ``cache_dir``.

    Examples
    --------
    >>> cache_path("/tmp/c", 3).name
    'worker-3.cache'
    """
    return Path(cache_dir) / f"worker-{check_int(worker, 'worker', minimum=0)}.cache"


def _write_all(f: object, buf: memoryview) -> None:
    """Write ``buf`` to the open file ``f`` in chunks (a test may stop a writer between two)."""
    for start in range(0, len(buf), _CHUNK):
        f.write(buf[start : start + _CHUNK])  # type: ignore[attr-defined]


def save_cache(
    path: str | os.PathLike[str], cache: Cache, dataset: Dataset, *, epoch: int, worker: int,
    seed: int | None = None,
) -> Path:  # fmt: skip
    """Write ``cache`` (worker ``worker``'s records of ``epoch``) to ``path``, crash-safely.

    The module docstring gives the layout and why a crash never leaves a file that passes as
    whole. ``dataset`` gives the records' load-time checksums, their lengths where they vary (the
    cache's must be those) and the job's fingerprint; records of many sizes are written end to
    end, each its length's bytes, longest first (version 3; a packed cache's buffer as it is).

    Examples
    --------
    >>> import tempfile
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(6, 2))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = save_cache(cache_path(d, 0), ds.cache([1, 4]), ds, epoch=2, worker=0, seed=7)
    ...     got = load_cache(p, ds, seed=7)
    ...     got.cache.ids.tolist(), got.cache.data.tolist(), got.epoch, got.dropped
    ([1, 4], [[2, 3], [8, 9]], 2, 0)
    """
    if not isinstance(cache, Cache):
        raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
    _check_dataset(dataset)
    B = dataset.record_bytes
    if len(cache) and cache.width != B:
        raise ValueError(f"Argument 'cache' must hold records of {B} bytes, not {cache.width}.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=_NO_SEED)  # the header's fields
    worker = check_int(worker, "worker", minimum=0, maximum=(1 << 32) - 1)
    seed_word = _NO_SEED if seed is None else check_int(seed, "seed", minimum=0, maximum=_NO_SEED - 1)
    ids = np.ascontiguousarray(cache.ids, dtype="<i8")
    if ids.size and (int(ids[0]) < 0 or int(ids[-1]) >= dataset.N or bool(np.any(np.diff(ids) <= 0))):
        raise ValueError(f"Argument 'cache' must hold increasing ids in [0, {dataset.N}).")
    sums = np.ascontiguousarray(dataset.checksums[ids], dtype="<u8")
    lengths = _lengths_of(cache, dataset, ids)
    tables = (ids, sums) if lengths is None else (ids, sums, lengths)
    n = int(ids.size)
    rows_at = -(-(_HEADER_BYTES + 8 * len(tables) * n) // _ALIGN) * _ALIGN
    version = 1 if lengths is None else CACHE_VERSION
    head = _HEAD.pack(MAGIC, version, worker, dataset.N, B, n, epoch, seed_word,
                      dataset_fingerprint(dataset), _digest(*(t.data for t in tables)), rows_at)  # fmt: skip
    head += _digest(head)
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"Argument 'path' must name a file, not the folder {path}.")
    _remove_stale(path)
    fd, tmp = _locked_tmp(path)
    try:
        with os.fdopen(fd, "wb") as f:  # locked until closed: no other writer removes it
            f.write(head)
            for t in tables:
                f.write(t.data)
            f.write(b"\x00" * (rows_at - _HEADER_BYTES - 8 * len(tables) * n))
            if n and lengths is not None:
                _write_packed(f, cache, lengths)
            elif n:
                _write_all(f, np.ascontiguousarray(cache.data).data.cast("B"))
            f.flush()
            os.fsync(f.fileno())
            os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)
    return path


def _lengths_of(cache: Cache, dataset: Dataset, ids: np.ndarray) -> np.ndarray | None:
    """The lengths of ``cache``'s records for its file (None: records of one size), refused
    (naming ``cache``) unless they are the dataset's."""
    if dataset.lengths is None:
        if cache.lengths is not None:
            raise ValueError("Argument 'cache' must hold records of one size, as the dataset's, not lengths.")
        return None
    if cache.lengths is None:
        raise ValueError(
            "Argument 'cache' must hold its records' lengths: the dataset's records vary in size."
        )
    lengths = np.ascontiguousarray(cache.lengths, dtype="<i8")
    if lengths.shape != ids.shape or not np.array_equal(lengths, dataset.lengths[ids]):
        raise ValueError("Argument 'cache' must hold its records at the dataset's lengths.")
    return lengths


def _write_packed(f: object, cache: Cache, lengths: np.ndarray) -> None:
    """Write the records of ``cache`` (of ``lengths``) to the open file ``f`` in the packed layout: a
    packed cache's buffer as it is, rows packed first (:meth:`~coded_shuffle.codec.Cache.pack`)."""
    buffer = cache.pack().buffer[: int(lengths.sum())]
    _write_all(f, np.ascontiguousarray(buffer).data.cast("B"))


def _clean_tails(data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Which rows of ``data`` hold only zeros after their ``lengths`` (a row of a record of many
    sizes whose padding is not zero is not the record: its checksum reads part of it)."""
    n, B = data.shape
    out = np.ones(n, dtype=bool)
    step = max(1, _CHUNK // max(B, 1))
    cols = np.arange(B)
    for start in range(0, n, step):
        rows = np.asarray(data[start : start + step])
        out[start : start + rows.shape[0]] = ~np.any(
            np.where(cols >= lengths[start : start + step, None], rows, 0), axis=1
        )
    return out


def _locked_tmp(path: Path) -> tuple[int, Path]:
    """A new temporary file beside ``path`` (a name of its own, so that writers of the same file
    never share one), open for writing and locked (``flock``): what :func:`_remove_stale` of
    another writer leaves alone. Made again should that writer have removed it before the lock."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # pragma: no cover - a file system without locks: unlocked, as before
            return fd, tmp
        try:
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)  # pragma: no cover - removed between its creation and its lock


def _remove_stale(path: Path) -> None:
    """Remove the temporary files of ``path`` that writers which crashed left; one whose writer
    still runs is locked, and stays."""
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        try:
            fd = os.open(stale, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer holds it
            os.close(fd)
            continue
        try:
            stale.unlink(missing_ok=True)
        finally:
            os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the system allows opening a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - systems without folder descriptors
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True)
class _Head:
    """A cache file's header fields (the module docstring's table) and the file's size."""

    worker: int
    N: int
    B: int
    n: int
    epoch: int
    seed: int
    fingerprint: bytes
    tables: bytes
    rows_at: int
    size: int
    version: int

    @property
    def variable(self) -> bool:
        """Whether the file holds records of many sizes (a table of lengths)."""
        return self.version != 1

    @property
    def tables_bytes(self) -> int:
        """Bytes of the tables after the header: ids, checksums and (versions 2, 3) lengths."""
        return (24 if self.variable else 16) * self.n


def _header(path: Path, f: BinaryIO) -> _Head:
    """The header's fields of the cache file ``path`` (open as ``f``) and the file's size; raises
    :class:`CacheFileError` when it is cut short or altered."""
    size = os.fstat(f.fileno()).st_size
    head = f.read(_HEADER_BYTES)
    if len(head) < _HEADER_BYTES:
        raise CacheFileError(f"Cache file {path}: cut short ({size} bytes, less than its header).")
    if head[:8] != MAGIC:
        raise CacheFileError(f"Cache file {path}: not a cache file (magic {head[:8]!r}).")
    if _digest(head[: _HEAD.size]) != head[_HEAD.size :]:
        raise CacheFileError(f"Cache file {path}: its header fails its digest (altered).")
    _, version, worker, N, B, n, epoch, seed, finger, tables, rows_at = _HEAD.unpack(head[: _HEAD.size])
    if version not in (1, 2, CACHE_VERSION):
        raise CacheFileError(f"Cache file {path}: version {version}, not 1, 2 or {CACHE_VERSION}.")
    return _Head(worker, N, B, n, epoch, seed, finger, tables, rows_at, size, version)


@dataclass(frozen=True)
class CacheHeader:
    """What a cache file's header says (its digest checked), before any dataset is compared: the
    worker that wrote it, the ``N`` units of ``record_bytes`` of its dataset (a storage's pieces:
    ``N`` records times their pieces, each of the pieces' width), the units it holds, its epoch
    and seed (None: none), and whether its records vary in size (``record_bytes`` then the
    longest). A storage written at ``K`` workers reads as units of that cut: what a
    job relaunched at another ``K'`` looks at before it decides the file is of its own job."""

    path: str
    worker: int
    N: int
    record_bytes: int
    records: int
    epoch: int
    seed: int | None
    variable: bool = False


def cache_header(path: str | os.PathLike[str]) -> CacheHeader:
    """The header of the cache file ``path`` (:class:`CacheHeader`); raises :class:`CacheFileError`
    when it is cut short or altered (its header's digest), and nothing else is read.

    Examples
    --------
    >>> import tempfile
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(6, 2))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     h = cache_header(save_cache(cache_path(d, 3), ds.cache([1, 4]), ds, epoch=2, worker=3, seed=7))
    >>> h.worker, h.N, h.record_bytes, h.records, h.epoch, h.seed
    (3, 6, 2, 2, 2, 7)
    """
    path = Path(path)
    with open(path, "rb") as f:
        h = _header(path, f)
    seed = None if h.seed == _NO_SEED else h.seed
    return CacheHeader(str(path), h.worker, h.N, h.B, h.n, h.epoch, seed, h.variable)


def cache_ids(path: str | os.PathLike[str]) -> np.ndarray:
    """The ids a cache file holds (its header's and tables' digests checked, no dataset needed:
    the rows are neither read nor checked); raises :class:`CacheFileError` when it is cut short or
    altered.

    Examples
    --------
    >>> import tempfile
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(6, 2))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     cache_ids(save_cache(cache_path(d, 0), ds.cache([1, 4]), ds, epoch=2, worker=0)).tolist()
    [1, 4]
    """
    path = Path(path)
    with open(path, "rb") as f:
        h = _header(path, f)
        tables = f.read(h.tables_bytes)
    if len(tables) < h.tables_bytes or _digest(tables) != h.tables:
        raise CacheFileError(
            f"Cache file {path}: its tables of ids and checksums fail their digest (altered)."
        )
    return np.frombuffer(tables, "<i8", h.n).astype(np.int64)


def load_cache(path: str | os.PathLike[str], dataset: Dataset, *, seed: int | None = None) -> LoadedCache:
    """Read back a cache file written by :func:`save_cache`, checked.

    Raises
    ------
    CacheFileError
        The file is cut short or altered (its header or tables fail their digests): it must be
        treated as absent.
    ValueError
        The file is whole but of another job: another dataset, record size or seed (``seed``
        None: any); the message names the file and what differs.

    Rows that fail their stored checksum are dropped (``LoadedCache.dropped``); the rows kept
    are a read-only memory map of the file.
    """
    _check_dataset(dataset)
    if seed is not None:
        seed = check_int(seed, "seed", minimum=0)
    path = Path(path)
    with open(path, "rb") as f:  # one open file: a writer's rename meanwhile changes nothing read
        return _load_open(path, f, dataset, seed)


def _load_open(path: Path, f: BinaryIO, dataset: Dataset, seed: int | None) -> LoadedCache:
    h = _header(path, f)
    N, B, n, rows_at, seed_word = h.N, h.B, h.n, h.rows_at, h.seed
    if N != dataset.N:
        raise ValueError(f"Cache file {path}: a dataset of N = {N} records, not N = {dataset.N}.")
    if h.variable != (dataset.lengths is not None):
        kinds = ("of one size", "of many sizes")
        raise ValueError(f"Cache file {path}: records {kinds[h.variable]}, not {kinds[not h.variable]}.")
    if B != dataset.record_bytes:
        raise ValueError(f"Cache file {path}: records of {B} bytes, not {dataset.record_bytes}.")
    if h.fingerprint != dataset_fingerprint(dataset):
        raise ValueError(f"Cache file {path}: another dataset (its records' checksums differ).")
    if seed is not None and seed_word != seed:
        theirs = "none" if seed_word == _NO_SEED else seed_word
        raise ValueError(f"Cache file {path}: seed {theirs}, not {seed}.")
    at = _HEADER_BYTES + h.tables_bytes
    if h.size < at or rows_at < at:
        raise CacheFileError(f"Cache file {path}: cut short ({h.size} bytes, less than its tables).")
    mm = np.memmap(f, dtype=np.uint8, mode="r")
    tables = mm[_HEADER_BYTES:at]
    if _digest(np.ascontiguousarray(tables).data) != h.tables:
        raise CacheFileError(
            f"Cache file {path}: its tables of ids and checksums fail their digest (altered)."
        )
    ids, sums = tables[: 8 * n].view("<i8"), tables[8 * n : 16 * n].view("<u8")
    lengths = np.array(tables[16 * n :].view("<i8"), dtype=np.int64) if h.variable else None
    if n and (int(ids[0]) < 0 or int(ids[-1]) >= N or bool(np.any(np.diff(ids) <= 0))):  # pragma: no cover
        raise CacheFileError(f"Cache file {path}: its ids are not increasing in [0, {N}).")
    if lengths is not None and n and (int(lengths.min()) < 0 or int(lengths.max()) > B):  # pragma: no cover
        raise CacheFileError(f"Cache file {path}: its lengths are not in [0, {B}].")
    held = _records(path, h, mm, np.array(ids, dtype=np.int64), lengths)
    good = (held.checksums() == sums) & (np.asarray(sums) == dataset.checksums[held.ids])
    if lengths is not None:
        assert dataset.lengths is not None
        good &= lengths == dataset.lengths[held.ids]
        if h.version == 2:
            good &= _clean_tails(held.data, lengths)
    if not bool(good.all()):
        held = _kept(held, good)
    return LoadedCache(str(path), held, h.epoch, h.worker, n - int(good.sum()))


def _records(path: Path, h: _Head, mm: np.memmap, ids: np.ndarray, lengths: np.ndarray | None) -> Cache:
    """The records of the file ``path`` (its header ``h``, mapped as ``mm``), where they lie: rows
    of ``B`` bytes (versions 1 and 2), or packed end to end (version 3)."""
    n, B, at = h.n, h.B, h.rows_at
    size = n * B if h.version != CACHE_VERSION else int(lengths.sum()) if lengths is not None else 0
    if h.size != at + size:
        raise CacheFileError(f"Cache file {path}: {h.size} bytes, not the {at + size} of {n} records.")
    if h.version == CACHE_VERSION:
        assert lengths is not None  # version 3 has its table of lengths
        return Cache.packed(ids, mm[at : at + size], lengths, B)
    return Cache(ids=ids, data=mm[at : at + size].reshape(n, B), lengths=lengths)


def _kept(held: Cache, good: np.ndarray) -> Cache:
    """``held`` without the records where ``good`` is False (packed: the others copied end to end)."""
    keep = np.flatnonzero(good)
    if not held.is_packed:
        lengths = None if held.lengths is None else held.lengths[keep]
        return Cache(ids=held.ids[keep], data=held.data[keep], lengths=lengths)
    lengths = np.asarray(held.lengths, dtype=np.int64)
    order = held.order  # the kept records keep their order in the layout
    buffer = np.ascontiguousarray(held.buffer[: int(lengths.sum())][np.repeat(good[order], lengths[order])])
    return Cache.packed(held.ids[keep], buffer, lengths[keep], held.width)


def save_cache_dir(
    cache_dir: str | os.PathLike[str], caches: Sequence[Cache], dataset: Dataset, *, epoch: int,
    seed: int | None = None,
) -> list[Path]:  # fmt: skip
    """Write every worker's cache to ``cache_dir`` (worker ``k`` to :func:`cache_path` ``(cache_dir, k)``).

    One host writes its own worker's file; this writes them all, as the in-process engine holds
    them all.
    """
    folder = _check_folder(cache_dir)
    _check_dataset(dataset)
    if isinstance(caches, (str, bytes)) or not isinstance(caches, Sequence):
        raise TypeError(f"Argument 'caches' must be a sequence of Cache, not {type(caches).__name__}.")
    if not folder.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _fsync_dir(folder.parent)  # the new folder's own entry, durable
    return [
        save_cache(cache_path(folder, k), c, dataset, epoch=epoch, worker=k, seed=seed)
        for k, c in enumerate(caches)
    ]


def load_cache_dir(
    cache_dir: str | os.PathLike[str], dataset: Dataset, *, K: int, seed: int | None = None,
    epoch: int | None = None,
) -> tuple[list[Cache | None], list[str]]:  # fmt: skip
    """What workers ``0 .. K - 1`` still hold in ``cache_dir``: one cache each (None: no file, or
    a damaged one), and a line for every file treated as absent or with rows dropped.

    A file of another job raises (:func:`load_cache`); a damaged one is absent, and so is one
    written by another worker than its name says (a file moved). A folder that does not exist
    holds nothing (a note says so); a file in its place is refused. The caches are the
    ``holdings`` of :func:`~coded_shuffle.engine.elastic.elastic_transition`. With ``epoch``, a
    file of another epoch is said in a line (its records, checked, are still used).
    """
    folder = _check_folder(cache_dir)
    _check_dataset(dataset)
    K = check_int(K, "K", minimum=1)
    if seed is not None:
        seed = check_int(seed, "seed", minimum=0)
    if epoch is not None:
        epoch = check_int(epoch, "epoch", minimum=0)
    out: list[Cache | None] = []
    notes: list[str] = []
    if not folder.exists():
        notes.append(f"Cache folder {folder}: no such folder; every worker starts empty.")
        return [None] * K, notes
    for k in range(K):
        path = cache_path(cache_dir, k)
        if not path.exists():
            out.append(None)
            continue
        try:
            got = load_cache(path, dataset, seed=seed)
        except CacheFileError as exc:
            out.append(None)
            notes.append(f"{exc} Treated as absent.")
            continue
        if got.worker != k:
            out.append(None)
            notes.append(f"Cache file {path}: written by worker {got.worker}, not {k}. Treated as absent.")
            continue
        if epoch is not None and got.epoch != epoch:
            notes.append(
                f"Cache file {path}: of epoch {got.epoch}, not {epoch}; its records used where wanted."
            )
        if got.dropped:
            notes.append(f"Cache file {path}: {got.dropped} record(s) fail their checksum; delivered again.")
        out.append(got.cache)
    return out, notes
