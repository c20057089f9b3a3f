"""Bytes of a transition: records, checksums, XOR symbols, the wire format, and worker decoding.

Notation
--------
=============  ==========================================================================
``N``          number of records (data points), numbered ``0..N-1``
``B``          record width in bytes (fixed-size records), or the longest length (variable)
symbol ``s``   ``x[a_s] XOR x[b_s]`` (two points) or ``x[a_s]`` alone (``b_s = -1``), numbered
               as in :meth:`coded_shuffle.plan.DeliveryPlan.transmissions`
cache          the records a worker holds: its batch ``A_k^t`` of epoch ``t``
frame          one batch of symbols on the wire: header, one entry per symbol, payload
=============  ==========================================================================

Records
-------
A :class:`Dataset` holds ``N`` records as a read-only ``(N, B)`` ``uint8`` view: any numpy
array of shape ``(N, ...)`` viewed as bytes (no copy when it is C-contiguous, so an on-disk
``.npy`` opened with ``mmap_mode="r"`` stays on disk), or variable-length byte strings stored
zero-padded to the longest length ``B`` with their lengths beside. Two records of different
lengths are XORed over the longer length (the shorter one padded with zeros); the symbol carries
both lengths, so the worker that knows one record recovers the other and cuts it to its length.

Checksums
---------
Each record gets a 64-bit checksum when the dataset is loaded (:func:`record_checksums`). The
record's bytes, zero-padded to a multiple of 8, are read as little-endian ``uint64`` words
``w_0 .. w_{m-1}``, and with ``L`` its length in bytes::

    h = fmix64( L * 0x9E3779B97F4A7C15  +  sum_i fmix64(w_i XOR k_i) )   (mod 2^64)

where ``fmix64`` is the MurmurHash3 finalizer and ``k_i = splitmix64(i)`` a fixed key per word
position. Every ``fmix64(w XOR k)`` is a bijection of ``w``, so any corruption confined to one
word always changes ``h``; wider corruption goes unnoticed with probability about ``2^-64``.
It is not a cryptographic hash. It is computed by a compiled loop over the rows (no
temporary), and the pure-Python :func:`checksum_reference` states it plainly.

Hot path
--------
The bytes are moved by compiled loops (numba, :mod:`coded_shuffle._codec_kernels`, compiled on
first use and cached on disk): encoding XORs the two rows of each symbol straight into the wire
buffer; decoding takes the symbols addressed to the worker (the frame's receiver index), peels
them in one compiled pass (the chains of leftover cycles through linked lists), lists one row
operation per record of the new batch in row order (and one per transit point of a chain), then
does them round by round straight into the new cache. Large jobs run as two
halves on two threads. The results are byte for byte those of the plain numpy expressions each
kernel states, which the tests use as their oracle.
"""

from __future__ import annotations

import os
import threading
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import numpy as np

from ._checks import check_int, check_int_array
from .errors import DecodeError
from .plan import DeliveryPlan

__all__ = [
    "WIRE_MAGIC",
    "WIRE_VERSION",
    "FRAME_HEADER_BYTES",
    "FLAG_VARIABLE",
    "FLAG_WIDE_IDS",
    "FLAG_REPAIR",
    "Dataset",
    "Cache",
    "Frame",
    "DecodeResult",
    "load_dataset",
    "record_checksums",
    "checksum_reference",
    "encode_symbols",
    "encode_plan",
    "encode_plan_arrays",
    "parse_frame",
    "frame_overhead",
    "decode_worker",
]

#: First four bytes of every frame.
WIRE_MAGIC = b"CSHF"
#: Version of the wire format written and read by this module (:doc:`docs/wire-format.md`).
WIRE_VERSION = 2
#: Size of the fixed frame header in bytes.
FRAME_HEADER_BYTES = 40
#: Flag: records have variable lengths; entries carry ``len_a`` and ``len_b``.
FLAG_VARIABLE = 1
#: Flag: point ids are 64-bit (otherwise 32-bit).
FLAG_WIDE_IDS = 2
#: Flag: the frame re-sends points uncoded after a failed check (a repair).
FLAG_REPAIR = 4

_HEADER_DTYPE = np.dtype(
    [
        ("magic", "S4"),
        ("version", "<u2"),
        ("flags", "<u2"),
        ("epoch", "<u8"),
        ("n_symbols", "<u4"),
        ("record_bytes", "<u4"),
        ("payload_bytes", "<u8"),
        ("header_crc", "<u4"),
        ("n_runs", "<u4"),
    ]
)
assert _HEADER_DTYPE.itemsize == FRAME_HEADER_BYTES
#: One row of the receiver index: entries ``[first, first + count)`` are addressed to ``worker``.
_RUN_DTYPE = np.dtype([("worker", "<u4"), ("first", "<u4"), ("count", "<u4")])
#: Bytes of one row of the receiver index.
RUN_BYTES = _RUN_DTYPE.itemsize

#: Jobs of at least this many bytes run on two threads, in pieces of about _PIECE_BYTES.
_TWO_THREADS_BYTES = 1 << 20
_PIECE_BYTES = 1 << 20
#: Alignment of the codec's large buffers.
_ALIGN = 4096
#: Largest payload of one frame made by :func:`encode_plan` unless told otherwise.
DEFAULT_MAX_FRAME_BYTES = 1 << 26

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_EMPTY_I64 = np.empty(0, dtype=np.int64)
_EMPTY_I64.flags.writeable = False
_NO_RUNS = np.empty((0, 3), dtype=np.int64)
_NO_RUNS.flags.writeable = False


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


def _ro(arr: np.ndarray) -> np.ndarray:
    """A read-only C-contiguous view (a copy only if not contiguous): one compiled type per role."""
    view = np.ascontiguousarray(arr).view(np.ndarray)
    view.flags.writeable = False
    return view


def _i64(arr: np.ndarray | None) -> np.ndarray:
    """A read-only C-contiguous int64 view (empty for None): one compiled type per argument."""
    return _EMPTY_I64 if arr is None else _ro(np.asarray(arr, dtype=np.int64))


def _kernels() -> ModuleType:
    """The compiled kernels, imported on first use (importing the codec compiles nothing)."""
    from . import _codec_kernels

    return _codec_kernels


#: The second thread of :func:`_halves`, made on first use. A forked child inherits the executor
#: but not its thread, so the child starts with none and makes its own (``os.register_at_fork``).
_POOL: list[ThreadPoolExecutor] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.clear)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


_TWO_CORES = _cores() >= 2


def _halves(kernel: Callable[..., Any], args: tuple, lo: int, hi: int, nbytes: int) -> None:
    """Run ``kernel(*args, lo, hi)``; with two cores and a large job, on two threads.

    The range is cut into pieces of about 1 MiB of work (at most 16) that both threads take in
    turn, so a thread the scheduler holds back leaves its share to the other. The kernels release
    the GIL and write disjoint rows for disjoint ranges.
    """
    if hi - lo < 2 or nbytes < _TWO_THREADS_BYTES or not _TWO_CORES:
        kernel(*args, lo, hi)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="coded_shuffle-codec"))
    n = min(16, hi - lo, max(2, nbytes // _PIECE_BYTES))
    cuts = [lo + (hi - lo) * q // n for q in range(n + 1)]
    pieces = iter(list(zip(cuts[:-1], cuts[1:], strict=True)))  # next() on it is atomic

    def work() -> None:
        for p_lo, p_hi in pieces:
            kernel(*args, p_lo, p_hi)

    other = _POOL[0].submit(work)
    try:
        work()
    finally:
        other.result()


def _entry_dtype(flags: int) -> np.dtype:
    idt = "<u8" if flags & FLAG_WIDE_IDS else "<u4"
    fields = [("symbol", idt), ("a", idt), ("b", idt)]
    if flags & FLAG_VARIABLE:
        fields += [("len_a", "<u4"), ("len_b", "<u4")]
    return np.dtype(fields)


# --------------------------------------------------------------------------- checksums


_KEY_CACHE: dict[int, np.ndarray] = {}


def _word_keys(m: int) -> np.ndarray:
    """``splitmix64(i)`` for ``i < m``: the key of each word position."""
    keys = _KEY_CACHE.get(m)
    if keys is None:
        z = (np.arange(1, m + 1, dtype=np.uint64) * _GOLDEN).astype(np.uint64)
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
        keys = _readonly(z)
        _KEY_CACHE[m] = keys
    return keys


def _mask64(v: int) -> int:
    return v & 0xFFFFFFFFFFFFFFFF


def _fmix64_int(x: int) -> int:
    x ^= x >> 33
    x = _mask64(x * 0xFF51AFD7ED558CCD)
    x ^= x >> 33
    x = _mask64(x * 0xC4CEB9FE1A85EC53)
    return x ^ (x >> 33)


def checksum_reference(record: bytes) -> int:
    """Return the checksum of one record, in plain Python (the definition; slow).

    :func:`record_checksums` computes the same value with a compiled loop over many records.

    Examples
    --------
    >>> checksum_reference(b"abc") == int(record_checksums([b"abc"])[0])
    True
    """
    record = bytes(record)
    L = len(record)
    padded = record + b"\0" * (-L % 8)
    h = 0
    for i in range(len(padded) // 8):
        z = _mask64((i + 1) * 0x9E3779B97F4A7C15)
        z = _mask64((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9)
        z = _mask64((z ^ (z >> 27)) * 0x94D049BB133111EB)
        key = z ^ (z >> 31)
        w = int.from_bytes(padded[8 * i : 8 * i + 8], "little")
        h = _mask64(h + _fmix64_int(w ^ key))
    return _fmix64_int(_mask64(h + L * 0x9E3779B97F4A7C15))


def _checksum_rows(
    data: np.ndarray, lengths: np.ndarray | None, rows: np.ndarray | None = None
) -> np.ndarray:
    """Checksums of the rows ``rows`` (all if None) of the ``(n, B)`` uint8 array ``data``.

    ``lengths`` gives the length of each checksummed row (``B`` if None).
    """
    data = _ro(data)
    idx = _i64(rows)
    n = data.shape[0] if rows is None else idx.shape[0]
    keys = _word_keys(max(1, -(-data.shape[1] // 8)))
    out = np.empty(n, dtype=np.uint64)
    _halves(_kernels().checksum_rows, (out, data, idx, _i64(lengths), keys), 0, n, n * data.shape[1])
    return out


def record_checksums(records: object, lengths: object = None) -> np.ndarray:
    """Return the 64-bit checksum of each record (see the module docstring for the definition).

    Parameters
    ----------
    records : numpy.ndarray or sequence of bytes
        Either an array of shape ``(n, ...)`` whose rows are the records, viewed as bytes, or a
        sequence of ``bytes`` records (variable lengths allowed).
    lengths : array_like, optional
        With a 2-D ``uint8`` array of zero-padded rows: the length of each record in bytes.

    Returns
    -------
    numpy.ndarray
        ``uint64`` array of ``n`` checksums.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(24, dtype=np.uint8).reshape(3, 8)
    >>> h = record_checksums(x)
    >>> h.dtype.name, len(set(h.tolist()))
    ('uint64', 3)
    >>> int(h[1]) == checksum_reference(x[1].tobytes())
    True
    """
    if isinstance(records, np.ndarray):
        data = _as_rows(records, "records")
        lens = None
        if lengths is not None:
            lens = _check_lengths(lengths, data.shape[0], data.shape[1])
        return _checksum_rows(data, lens)
    if lengths is not None:
        raise ValueError("Argument 'lengths' must be None when 'records' is a sequence of bytes.")
    data, lens = _pad_bytes(records, "records")
    return _checksum_rows(data, lens)


# --------------------------------------------------------------------------- records


def _as_rows(arr: np.ndarray, name: str) -> np.ndarray:
    """View an ``(n, ...)`` array as ``(n, B)`` bytes; copy only if it is not C-contiguous."""
    if arr.ndim < 1:
        raise ValueError(f"Argument {name!r} must have at least 1 dimension, not 0.")
    if arr.dtype.hasobject:
        raise ValueError(f"Argument {name!r} must hold plain values, not {arr.dtype} values.")
    n = arr.shape[0]
    if n == 0:
        raise ValueError(f"Argument {name!r} must hold at least 1 record, not 0.")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    width = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
    if width < 1:
        raise ValueError(f"Argument {name!r} must have records of at least 1 byte, not {width}.")
    return arr.reshape(n, -1).view(np.uint8).reshape(n, width)


def _check_lengths(lengths: object, n: int, width: int) -> np.ndarray:
    lens = check_int_array(lengths, "lengths", ndim=1).astype(np.int64)
    if lens.shape[0] != n:
        raise ValueError(f"Argument 'lengths' must have {n} entries, not {lens.shape[0]}.")
    if lens.size and (int(lens.min()) < 0 or int(lens.max()) > width):
        raise ValueError(f"Argument 'lengths' must lie in [0, {width}], not [{lens.min()}, {lens.max()}].")
    return lens


def _pad_bytes(records: object, name: str) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(records, (bytes, bytearray, str)) or not isinstance(records, Sequence):
        raise TypeError(
            f"Argument {name!r} must be an array or a sequence of bytes, not {type(records).__name__}."
        )
    items = list(records)
    for r, item in enumerate(items):
        if not isinstance(item, (bytes, bytearray, memoryview)):
            raise TypeError(f"Argument {name!r} must hold bytes, not {type(item).__name__} at {r}.")
    lens = np.array([len(x) for x in items], dtype=np.int64)
    width = max(1, int(lens.max(initial=0)))
    flat = np.frombuffer(b"".join(bytes(x) for x in items), dtype=np.uint8)
    data = np.zeros((len(items), width), dtype=np.uint8)
    data[np.arange(width) < lens[:, None]] = flat
    return data, lens


@dataclass(frozen=True, eq=False)
class Dataset:
    """The master's records, with their checksums fixed at load.

    Attributes
    ----------
    data : numpy.ndarray
        Read-only ``(N, B)`` ``uint8`` view of the records (zero-padded when lengths vary).
    lengths : numpy.ndarray or None
        Length of each record in bytes, or ``None`` when all have ``B`` bytes.
    checksums : numpy.ndarray
        ``uint64`` checksum of each record (:func:`record_checksums`).

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.zeros((10, 4), dtype=np.float32))
    >>> ds.N, ds.record_bytes, ds.variable
    (10, 16, False)
    """

    data: np.ndarray
    lengths: np.ndarray | None
    checksums: np.ndarray

    @property
    def N(self) -> int:
        """Number of records."""
        return int(self.data.shape[0])

    @property
    def record_bytes(self) -> int:
        """Width ``B`` of a record in bytes (the longest length if lengths vary)."""
        return int(self.data.shape[1])

    @property
    def variable(self) -> bool:
        """Whether the records have variable lengths."""
        return self.lengths is not None

    @property
    def total_bytes(self) -> int:
        """Bytes of all records (sum of the lengths)."""
        return int(self.lengths.sum()) if self.lengths is not None else self.N * self.record_bytes

    def record(self, n: int) -> bytes:
        """Return record ``n`` as bytes, cut to its length.

        Examples
        --------
        >>> load_dataset([b"ab", b"cde"]).record(0)
        b'ab'
        """
        n = check_int(n, "n", minimum=0)
        if n >= self.N:
            raise ValueError(f"Argument 'n' must be less than N = {self.N}, not {n}.")
        L = self.record_bytes if self.lengths is None else int(self.lengths[n])
        return bytes(self.data[n, :L])

    def cache(self, ids: object) -> Cache:
        """Return a worker cache holding copies of the records ``ids``.

        Examples
        --------
        >>> ds = load_dataset([b"ab", b"cde", b"f"])
        >>> ds.cache([2, 0]).ids.tolist()
        [0, 2]
        """
        idx = check_int_array(ids, "ids", ndim=1).astype(np.int64)
        idx = np.unique(idx)
        if idx.size and (int(idx[0]) < 0 or int(idx[-1]) >= self.N):
            raise ValueError(f"Argument 'ids' must name records in [0, {self.N}).")
        data = _aligned_rows(idx.size, self.record_bytes)
        _halves(_kernels().take_rows, (data, _ro(self.data), _i64(idx)), 0, idx.size, data.nbytes)
        lens = None if self.lengths is None else self.lengths[idx].copy()
        return Cache(ids=_readonly(idx), data=data, lengths=lens)


def load_dataset(source: object, *, checksums: bool = True) -> Dataset:
    """Load ``N`` records and fix their checksums.

    Parameters
    ----------
    source : numpy.ndarray, str, os.PathLike or sequence of bytes
        An array of shape ``(N, ...)`` (each row one record, viewed as bytes; a memmap stays on
        disk), the path of a ``.npy`` file (opened as a read-only memmap), or a sequence of
        ``bytes`` of varying lengths.
    checksums : bool
        Compute the checksums (default). ``False`` leaves them all zero, for measurements that
        do not verify.

    Returns
    -------
    Dataset

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.arange(12, dtype=np.uint16).reshape(3, 4))
    >>> ds.N, ds.record_bytes, ds.record(1)[:4]
    (3, 8, b'\\x04\\x00\\x05\\x00')
    >>> load_dataset([b"xy", b"", b"abc"]).lengths.tolist()
    [2, 0, 3]
    """
    if not isinstance(checksums, bool):
        raise TypeError(f"Argument 'checksums' must be a bool, not {type(checksums).__name__}.")
    lens: np.ndarray | None = None
    if isinstance(source, (str, os.PathLike)):
        try:
            arr = np.load(os.fspath(source), mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise ValueError(f"Argument 'source' must name a readable .npy file: {exc}") from None
        data = _as_rows(arr, "source")
    elif isinstance(source, np.ndarray):
        data = _as_rows(source, "source")
    else:
        data, lens = _pad_bytes(source, "source")
    if data.shape[0] < 1:
        raise ValueError("Argument 'source' must hold at least 1 record, not 0.")
    if data.flags.writeable:
        data = data.view()
        data.flags.writeable = False
    sums = _checksum_rows(data, lens) if checksums else np.zeros(data.shape[0], dtype=np.uint64)
    return Dataset(data=data, lengths=None if lens is None else _readonly(lens), checksums=_readonly(sums))


@dataclass(frozen=True, eq=False)
class Cache:
    """The records one worker holds.

    Attributes
    ----------
    ids : numpy.ndarray
        Increasing ``int64`` point ids.
    data : numpy.ndarray
        ``(len(ids), B)`` ``uint8`` rows, row ``r`` holding record ``ids[r]``.
    lengths : numpy.ndarray or None
        Record lengths, or ``None`` for fixed-size records.

    Examples
    --------
    >>> c = load_dataset([b"ab", b"cde"]).cache([1])
    >>> c.record(1)
    b'cde'
    """

    ids: np.ndarray
    data: np.ndarray
    lengths: np.ndarray | None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Return the row of each of ``ids`` (``-1`` where the cache does not hold it)."""
        return _lookup(self.ids, np.asarray(ids, dtype=np.int64))

    def record(self, n: int) -> bytes:
        """Return record ``n`` as bytes, cut to its length."""
        r = int(self.rows(np.array([n]))[0])
        if r < 0:
            raise KeyError(n)
        L = self.data.shape[1] if self.lengths is None else int(self.lengths[r])
        return bytes(self.data[r, :L])

    def checksums(self) -> np.ndarray:
        """Recompute the checksum of every record held."""
        return _checksum_rows(self.data, self.lengths)

    def patched(self, other: Cache) -> Cache:
        """Return a copy with the rows of ``other`` (ids it must hold) replaced by those of ``other``."""
        rows = self.rows(other.ids)
        if np.any(rows < 0):
            raise ValueError("Argument 'other' must hold only ids of this cache.")
        data = self.data.copy()
        data[rows] = other.data
        lengths = None
        if self.lengths is not None:
            lengths = self.lengths.copy()
            lengths[rows] = other.lengths
        return Cache(ids=self.ids, data=data, lengths=lengths)


# --------------------------------------------------------------------------- XOR kernels


def _aligned_empty(nbytes: int, *, lead: int = 0) -> np.ndarray:
    """A ``uint8`` buffer of ``nbytes`` whose byte ``lead`` sits on a 4096-byte boundary.

    All large buffers of the codec share this alignment: row copies between buffers whose
    offsets differ by a few bytes below a page multiple run several times slower (4K aliasing).
    """
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    off = (-(raw.ctypes.data + lead)) % _ALIGN
    return raw[off : off + nbytes]


def _aligned_rows(n: int, width: int) -> np.ndarray:
    return _aligned_empty(n * width).reshape(n, width)


def _check_symbol_ids(dataset: Dataset, a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    """Return ``a`` and ``b`` as int64 point ids of ``dataset`` (``b = -1``: none), or raise."""
    ai = check_int_array(a, "a", ndim=1).astype(np.int64)
    bi = check_int_array(b, "b", ndim=1).astype(np.int64)
    if ai.shape != bi.shape:
        raise ValueError(f"Argument 'b' must have the length of 'a', {ai.shape[0]}, not {bi.shape[0]}.")
    N = dataset.N
    if ai.size and (int(ai.min()) < 0 or int(ai.max()) >= N):
        raise ValueError(f"Argument 'a' must name records in [0, {N}).")
    if bi.size and (int(bi.min()) < -1 or int(bi.max()) >= N):
        raise ValueError(f"Argument 'b' must name records in [0, {N}) or be -1.")
    return ai, bi


def encode_symbols(dataset: Dataset, a: object, b: object, *, out: np.ndarray | None = None) -> np.ndarray:
    """Return the payload of each symbol ``x[a[s]] XOR x[b[s]]`` (``x[a[s]]`` when ``b[s] = -1``).

    Rows are ``B`` bytes wide (zero-padded for variable-length records).

    Parameters
    ----------
    dataset : Dataset
        The records.
    a, b : array_like
        Point ids of each symbol; ``b[s] = -1`` sends ``a[s]`` alone.
    out : numpy.ndarray, optional
        ``(len(a), B)`` ``uint8`` array to write into.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.array([[1, 2], [4, 8], [16, 32]], dtype=np.uint8))
    >>> encode_symbols(ds, [0, 2], [1, -1]).tolist()
    [[5, 10], [16, 32]]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    ai, bi = _check_symbol_ids(dataset, a, b)
    shape = (ai.shape[0], dataset.record_bytes)
    if out is None:
        out = _aligned_rows(*shape)
    elif not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.uint8:
        raise ValueError(f"Argument 'out' must be a uint8 array of shape {shape}.")
    _encode_into(out, dataset.data, ai, bi)
    return out


def _encode_into(out: np.ndarray, data: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``out[s] = data[a[s]] ^ data[b[s]]`` (``data[a[s]]`` when ``b[s] < 0``), compiled."""
    n = a.shape[0]
    args = (out, _ro(data), _i64(a), _i64(b))
    _halves(_kernels().encode_rows, args, 0, n, n * out.shape[1])


# --------------------------------------------------------------------------- wire format


@dataclass(frozen=True, eq=False)
class Frame:
    """One parsed frame: the symbols it carries and their payloads.

    Attributes
    ----------
    epoch : int
        Epoch ``t + 1`` whose batches the symbols deliver.
    flags : int
        ``FLAG_VARIABLE | FLAG_WIDE_IDS | FLAG_REPAIR`` bits.
    record_bytes : int
        Width ``B`` of a payload row.
    symbol, a, b : numpy.ndarray
        ``int64`` symbol numbers and point ids (``b = -1`` for a point sent alone).
    len_a, len_b : numpy.ndarray or None
        Record lengths (variable-length records only; ``len_b = 0`` when ``b = -1``).
    payload : numpy.ndarray
        ``(n_symbols, B)`` ``uint8`` rows (zero-padded past ``max(len_a, len_b)``).
    wire_bytes : int
        Size of the frame on the wire.
    runs : numpy.ndarray
        The receiver index: ``int64`` rows ``(worker, first, count)``, increasing in ``(worker,
        first)``, each saying that entries ``[first, first + count)`` are addressed to ``worker``.
        Empty when the frame has no index: then every entry is addressed to every worker.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.eye(3, dtype=np.uint8))
    >>> f = parse_frame(encode_plan_arrays(ds, [0], [1], epoch=1))
    >>> f.a.tolist(), f.b.tolist(), f.payload.tolist(), f.runs.shape
    ([0], [1], [[1, 1, 0]], (0, 3))
    """

    epoch: int
    flags: int
    record_bytes: int
    symbol: np.ndarray
    a: np.ndarray
    b: np.ndarray
    len_a: np.ndarray | None
    len_b: np.ndarray | None
    payload: np.ndarray
    wire_bytes: int
    runs: np.ndarray = field(default_factory=lambda: _NO_RUNS)

    @property
    def n_symbols(self) -> int:
        """Number of symbols in the frame."""
        return int(self.symbol.shape[0])

    @property
    def header_bytes(self) -> int:
        """Bytes of framing: fixed header, entries and alignment padding."""
        return self.wire_bytes - self.payload_bytes

    @property
    def payload_bytes(self) -> int:
        """Bytes of symbol payload on the wire."""
        if self.len_a is None or self.len_b is None:
            return self.n_symbols * self.record_bytes
        return int(np.maximum(self.len_a, self.len_b).sum())


def _layout(n: int, flags: int, n_runs: int = 0) -> tuple[np.dtype, int]:
    """The entry dtype and the offset of the payload: header, entries, receiver index, padding."""
    edt = _entry_dtype(flags)
    start = FRAME_HEADER_BYTES + n * edt.itemsize + n_runs * RUN_BYTES
    return edt, start + (-start % 8)


def frame_overhead(
    n_symbols: int, record_bytes: int, *, variable: bool = False, wide_ids: bool = False
) -> float:
    """Return framing bytes over payload bytes of a frame of ``n_symbols`` full-width symbols.

    The frame has no receiver index; each row of one adds :data:`RUN_BYTES` of framing.

    Examples
    --------
    >>> round(frame_overhead(1000, 4096), 5)
    0.00294
    """
    n_symbols = check_int(n_symbols, "n_symbols", minimum=1)
    record_bytes = check_int(record_bytes, "record_bytes", minimum=1)
    flags = (FLAG_VARIABLE if variable else 0) | (FLAG_WIDE_IDS if wide_ids else 0)
    _, start = _layout(n_symbols, flags)
    return start / (n_symbols * record_bytes)


def _pack(
    *,
    epoch: int,
    flags: int,
    width: int,
    symbol: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    data: np.ndarray,
    lengths: np.ndarray | None,
    runs: np.ndarray = _NO_RUNS,
) -> np.ndarray:
    """Build one frame, encoding the payload in place; ``runs`` is its receiver index."""
    n = a.shape[0]
    if int(max(a.max(initial=0), b.max(initial=0), symbol.max(initial=0))) >= 0xFFFFFFFF:
        flags |= FLAG_WIDE_IDS
    n_runs = runs.shape[0]
    edt, start = _layout(n, flags, n_runs)
    none = np.iinfo(edt["b"]).max
    if lengths is None:
        payload_bytes = n * width
        plen = None
    else:
        len_a = lengths[a].astype(np.int64)
        len_b = np.where(b >= 0, lengths[np.maximum(b, 0)], 0).astype(np.int64)
        plen = np.maximum(len_a, len_b)
        payload_bytes = int(plen.sum())
    buf = _aligned_empty(start + payload_bytes, lead=start)
    buf[:start] = 0
    entries = buf[FRAME_HEADER_BYTES : FRAME_HEADER_BYTES + n * edt.itemsize].view(edt)
    entries["symbol"] = symbol
    entries["a"] = a
    entries["b"] = np.where(b >= 0, b, none) if n else b
    if n_runs:
        end = FRAME_HEADER_BYTES + n * edt.itemsize
        table = buf[end : end + n_runs * RUN_BYTES].view(_RUN_DTYPE)
        table["worker"] = runs[:, 0]
        table["first"] = runs[:, 1]
        table["count"] = runs[:, 2]
    if lengths is None:
        _encode_into(buf[start:].reshape(n, width), data, a, b)
    else:
        assert plen is not None
        entries["len_a"] = len_a
        entries["len_b"] = len_b
        offset = np.cumsum(plen) - plen
        args = (buf[start:], _i64(offset), _i64(plen), _ro(data), _i64(a), _i64(b))
        _halves(_kernels().encode_packed, args, 0, n, payload_bytes)
    header = buf[:FRAME_HEADER_BYTES].view(_HEADER_DTYPE)
    header["magic"] = WIRE_MAGIC
    header["version"] = WIRE_VERSION
    header["flags"] = flags
    header["epoch"] = epoch
    header["n_symbols"] = n
    header["record_bytes"] = width
    header["payload_bytes"] = payload_bytes
    header["n_runs"] = n_runs
    header["header_crc"] = zlib.crc32(buf[:start].data)  # computed with the crc field zero
    return buf


def encode_plan_arrays(
    dataset: Dataset,
    a: object,
    b: object,
    *,
    epoch: int,
    symbol: object = None,
    repair: bool = False,
) -> np.ndarray:
    """Return one frame carrying the symbols ``x[a] XOR x[b]`` (``b = -1``: ``x[a]`` alone).

    Parameters
    ----------
    dataset : Dataset
        The master's records.
    a, b : array_like
        Point ids of each symbol.
    epoch : int
        Epoch whose batches the symbols deliver.
    symbol : array_like, optional
        Symbol numbers written in the entries (default ``0, 1, ...``).
    repair : bool
        Mark the frame as a repair.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> frame = encode_plan_arrays(ds, [1], [-1], epoch=3)
    >>> bytes(frame[:4]), len(frame)
    (b'CSHF', 58)
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    epoch = check_int(epoch, "epoch", minimum=0)
    ai, bi = _check_symbol_ids(dataset, a, b)
    if symbol is None:
        sym = np.arange(ai.shape[0], dtype=np.int64)
    else:
        sym = check_int_array(symbol, "symbol", ndim=1).astype(np.int64)
        if sym.shape != ai.shape or (sym.size and int(sym.min()) < 0):
            raise ValueError("Argument 'symbol' must hold one non-negative number per symbol.")
    flags = (FLAG_VARIABLE if dataset.variable else 0) | (FLAG_REPAIR if repair else 0)
    return _pack(
        epoch=epoch,
        flags=flags,
        width=dataset.record_bytes,
        symbol=sym,
        a=ai,
        b=bi,
        data=dataset.data,
        lengths=dataset.lengths,
    )


def _receiver_runs(plan: DeliveryPlan) -> np.ndarray:
    """The receiver index of the whole plan: rows ``(worker, first, count)`` over symbol numbers.

    Symbol ``s`` is addressed to the workers that use it: the two workers of an order-2 symbol,
    every worker of the cycle of a cycle symbol (each peels the whole chain), the receiver of a
    point sent alone. Rows are the maximal runs of consecutive symbols addressed to one worker,
    increasing in ``(worker, first)``. The plan keeps each group of order-2 symbols (one pair of
    workers) and of points sent alone (one receiver) together, so there are few rows.
    """
    if plan.n_symbols == 0:
        return _NO_RUNS

    def groups(*keys: np.ndarray) -> np.ndarray:
        """Starts of the runs of equal keys, and the end."""
        n = keys[0].shape[0]
        change = np.zeros(n, dtype=bool)
        change[:1] = True
        for key in keys:
            change[1:] |= key[1:] != key[:-1]
        return np.append(np.flatnonzero(change), n)

    P = plan.pair_x.shape[0]
    g = groups(plan.pair_i, plan.pair_j)
    first2, count2 = g[:-1], np.diff(g)
    rows = [
        (plan.pair_i[first2], first2, count2),
        (plan.pair_j[first2], first2, count2),
    ]
    q = plan.cycle_symbol_positions()
    n_c = q.shape[0]
    if n_c:
        ptr = plan.cycle_ptr
        use = np.searchsorted(ptr, q, side="right") - 1  # the cycle use of each cycle symbol
        per = np.diff(ptr)[use]  # its receivers: the workers of that use
        ends = np.cumsum(per)
        at = np.repeat(ptr[use] - (ends - per), per) + np.arange(int(ends[-1]))
        rows.append((plan.cycle_workers[at], np.repeat(P + np.arange(n_c), per), np.ones(at.size, np.int64)))
    g = groups(plan.uncoded_to)
    rows.append((plan.uncoded_to[g[:-1]], P + n_c + g[:-1], np.diff(g)))
    who, first, count = (np.concatenate([r[i] for r in rows]).astype(np.int64) for i in range(3))
    order = np.lexsort((first, who))
    who, first, count = who[order], first[order], count[order]
    end = first + count
    # Join runs of one worker that touch (or repeat: a worker twice in one cycle).
    start = np.ones(who.shape[0], dtype=bool)
    start[1:] = (who[1:] != who[:-1]) | (first[1:] > end[:-1])
    at = np.flatnonzero(start)
    last = np.maximum.reduceat(end, at)
    return np.stack([who[at], first[at], last - first[at]], axis=1)


def _clip_runs(runs: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The rows of ``runs`` cut to the symbols ``[lo, hi)``, renumbered from ``lo``."""
    first = np.maximum(runs[:, 1], lo)
    end = np.minimum(runs[:, 1] + runs[:, 2], hi)
    keep = end > first
    return np.stack([runs[keep, 0], first[keep] - lo, end[keep] - first[keep]], axis=1)


def encode_plan(
    plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
) -> list[np.ndarray]:
    """Encode every transmission of ``plan`` into frames of at most ``max_frame_bytes`` of payload.

    Symbol ``s`` is ``x[a[s]] XOR x[b[s]]`` for ``(a, b, phase) = plan.transmissions()``; the
    symbols keep their plan numbering across frames. Each frame carries a receiver index: the
    runs of its entries addressed to each worker (the two workers of an order-2 symbol, every
    worker of a cycle, the receiver of a point sent alone), so that a worker reads only those.

    Parameters
    ----------
    plan : DeliveryPlan
        The delivery plan of the transition ``t -> t + 1``.
    dataset : Dataset
        The master's ``N`` records.
    epoch : int
        The epoch ``t + 1`` written in the frame headers.
    max_frame_bytes : int
        Payload bytes per frame (a frame holds at least one symbol).

    Returns
    -------
    list of numpy.ndarray
        The frames, as ``uint8`` buffers ready to send.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> ds = load_dataset(np.arange(15 * 8, dtype=np.uint8).reshape(15, 8))
    >>> frames = encode_plan(plan, ds, epoch=1)
    >>> [parse_frame(f).n_symbols for f in frames]
    [6]
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if plan.subpackets > 1 and dataset.N != plan.N * plan.subpackets:
        raise ValueError(
            f"Argument 'dataset' must hold the plan's N x subpackets = {plan.N * plan.subpackets} pieces "
            f"(piece k of record n in row n * {plan.subpackets} + k), not {dataset.N} rows."
        )
    if plan.subpackets == 1 and dataset.N != plan.N:
        raise ValueError(f"Argument 'dataset' must hold the plan's N = {plan.N} records, not {dataset.N}.")
    epoch = check_int(epoch, "epoch", minimum=0)
    max_frame_bytes = check_int(max_frame_bytes, "max_frame_bytes", minimum=1)
    a, b, _ = plan.transmissions()
    n = a.shape[0]
    runs = _receiver_runs(plan)
    per = max(1, max_frame_bytes // dataset.record_bytes)
    flags = FLAG_VARIABLE if dataset.variable else 0
    frames = []
    for lo in range(0, max(n, 1), per):
        hi = min(n, lo + per)
        frames.append(
            _pack(
                epoch=epoch,
                flags=flags,
                width=dataset.record_bytes,
                symbol=np.arange(lo, hi, dtype=np.int64),
                a=a[lo:hi],
                b=b[lo:hi],
                data=dataset.data,
                lengths=dataset.lengths,
                runs=runs if n <= per else _clip_runs(runs, lo, hi),
            )
        )
    return frames


def parse_frame(buf: object, *, epoch: int | None = None, record_bytes: int | None = None) -> Frame:
    """Parse and check one frame; payload rows are views into ``buf`` for fixed-size records.

    Parameters
    ----------
    buf : bytes-like or numpy.ndarray
        The frame as received.
    epoch : int, optional
        The epoch the receiver expects; a different one is rejected.
    record_bytes : int, optional
        The record width the receiver expects; a different one is rejected.

    Raises
    ------
    DecodeError
        If the frame is short, has a wrong magic, version, header checksum, epoch, record width
        or payload length, names ids out of range of its flags, or has a receiver index whose
        runs leave the entries, are empty, or are not increasing and disjoint for each worker.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> f = parse_frame(encode_plan_arrays(ds, [0], [1], epoch=5), epoch=5)
    >>> f.epoch, f.n_symbols, f.payload.tolist()
    (5, 1, [[1, 1]])
    """
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise TypeError("Argument 'buf' must be a 1-D uint8 array or a bytes-like object.")
        raw = buf
    else:
        try:
            raw = np.frombuffer(buf, dtype=np.uint8)  # type: ignore[call-overload]
        except TypeError:
            raise TypeError(f"Argument 'buf' must be bytes-like, not {type(buf).__name__}.") from None
    if raw.shape[0] < FRAME_HEADER_BYTES:
        raise DecodeError(
            f"Frame rejected: {raw.shape[0]} bytes, shorter than the {FRAME_HEADER_BYTES}-byte header."
        )
    header = raw[:FRAME_HEADER_BYTES].copy().view(_HEADER_DTYPE)[0]
    if bytes(header["magic"]) != WIRE_MAGIC:
        raise DecodeError(f"Frame rejected: magic {bytes(header['magic'])!r}, not {WIRE_MAGIC!r}.")
    if int(header["version"]) != WIRE_VERSION:
        raise DecodeError(
            f"Frame rejected: wire format version {int(header['version'])}; this reader reads "
            f"version {WIRE_VERSION} only."
        )
    flags = int(header["flags"])
    if flags & ~(FLAG_VARIABLE | FLAG_WIDE_IDS | FLAG_REPAIR):
        raise DecodeError(f"Frame rejected: unknown flags {flags:#x}.")
    n = int(header["n_symbols"])
    width = int(header["record_bytes"])
    n_runs = int(header["n_runs"])
    edt, start = _layout(n, flags, n_runs)
    if raw.shape[0] < start:
        raise DecodeError(
            f"Frame rejected: {raw.shape[0]} bytes, shorter than its {start}-byte header and entries."
        )
    head = raw[:start].copy()
    head[32:36] = 0
    crc = zlib.crc32(head.data)
    if crc != int(header["header_crc"]):
        raise DecodeError(
            f"Frame rejected: header checksum {int(header['header_crc']):#010x}, computed {crc:#010x}."
        )
    if epoch is not None and int(header["epoch"]) != epoch:
        raise DecodeError(f"Frame rejected: epoch {int(header['epoch'])}, expected {epoch}.")
    if width < 1 or (record_bytes is not None and width != record_bytes):
        raise DecodeError(f"Frame rejected: record width {width}, expected {record_bytes}.")
    end = FRAME_HEADER_BYTES + n * edt.itemsize
    entries = raw[FRAME_HEADER_BYTES:end].view(edt)
    runs = _NO_RUNS
    if n_runs:
        table = raw[end : end + n_runs * RUN_BYTES].view(_RUN_DTYPE)
        runs = np.stack([table["worker"], table["first"], table["count"]], axis=1).astype(np.int64)
        w, first, count = runs[:, 0], runs[:, 1], runs[:, 2]
        after = (w[1:] > w[:-1]) | ((w[1:] == w[:-1]) & (first[1:] >= first[:-1] + count[:-1]))
        if int(count.min()) < 1 or int((first + count).max()) > n or not bool(np.all(after)):
            raise DecodeError(
                "Frame rejected: receiver index not made of non-empty runs of entries, increasing "
                "and disjoint for each worker."
            )
        runs = _readonly(runs)
    none = np.iinfo(edt["b"]).max
    a = entries["a"].astype(np.int64)
    braw = entries["b"]
    b = np.where(braw == none, -1, braw.astype(np.int64))
    if n and (int(a.min()) < 0 or int(b.min()) < -1):
        raise DecodeError("Frame rejected: point id out of range.")
    symbol = entries["symbol"].astype(np.int64)
    payload_bytes = int(header["payload_bytes"])
    len_a = len_b = None
    if flags & FLAG_VARIABLE:
        len_a = entries["len_a"].astype(np.int64)
        len_b = entries["len_b"].astype(np.int64)
        plen = np.maximum(len_a, len_b)
        if n and (int(plen.max()) > width or np.any((b < 0) & (len_b != 0))):
            raise DecodeError("Frame rejected: record lengths exceed the record width.")
        expected = int(plen.sum())
    else:
        expected = n * width
    if payload_bytes != expected or raw.shape[0] != start + payload_bytes:
        raise DecodeError(
            f"Frame rejected: payload of {raw.shape[0] - start} bytes, header says {payload_bytes}, "
            f"entries say {expected}."
        )
    body = raw[start:]
    if flags & FLAG_VARIABLE:
        assert len_a is not None and len_b is not None
        rows = np.zeros((n, width), dtype=np.uint8)
        rows[np.arange(width) < np.maximum(len_a, len_b)[:, None]] = body
        payload = rows
    else:
        payload = body.reshape(n, width)
    return Frame(
        epoch=int(header["epoch"]),
        flags=flags,
        record_bytes=width,
        symbol=symbol,
        a=a,
        b=b,
        len_a=len_a,
        len_b=len_b,
        payload=payload,
        wire_bytes=int(raw.shape[0]),
        runs=runs,
    )


# --------------------------------------------------------------------------- decoding


@dataclass(frozen=True, eq=False)
class DecodeResult:
    """What a worker rebuilt from its cache and the frames it received.

    Attributes
    ----------
    worker : int
        The worker.
    cache : Cache
        Its new records, one per id of ``need`` (rows of ``missing`` ids are zero).
    decoded : numpy.ndarray
        Ids recovered from symbols (the others of ``need`` came from the old cache).
    bad : numpy.ndarray
        Decoded ids whose checksum did not match (empty when no checksums were given).
    missing : numpy.ndarray
        Ids of ``need`` neither held nor decodable.
    steps : int
        XOR steps done, transit points of peeled cycles included.
    rounds : int
        Peeling rounds (1 without cycles; a cycle of ``l`` workers needs up to ``l - 1``).
    verified : int
        Number of decoded records checked against their checksum.

    Examples
    --------
    >>> import numpy as np
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> frame = encode_plan_arrays(ds, [0], [1], epoch=1)
    >>> res = decode_worker(ds.cache([0]), [frame], need=[1], worker=0, checksums=ds.checksums)
    >>> res.cache.data.tolist(), res.ok
    ([[0, 1]], True)
    """

    worker: int
    cache: Cache
    decoded: np.ndarray
    bad: np.ndarray
    missing: np.ndarray
    steps: int
    rounds: int
    verified: int

    @property
    def ok(self) -> bool:
        """Whether every needed record is present and passed its check."""
        return not (self.bad.size or self.missing.size)

    @property
    def failed(self) -> np.ndarray:
        """Ids to re-send: ``bad`` and ``missing`` together, increasing."""
        return np.union1d(self.bad, self.missing)


def _merge_frames(frames: list[Frame]) -> Frame:
    """The frames as one, without a receiver index (every symbol addressed to every worker)."""
    if len(frames) == 1:
        return frames[0]
    f0 = frames[0]
    variable = f0.len_a is not None

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(f, name) for f in frames])

    return Frame(
        epoch=f0.epoch,
        flags=f0.flags,
        record_bytes=f0.record_bytes,
        symbol=cat("symbol"),
        a=cat("a"),
        b=cat("b"),
        len_a=cat("len_a") if variable else None,
        len_b=cat("len_b") if variable else None,
        payload=cat("payload"),
        wire_bytes=sum(f.wire_bytes for f in frames),
    )


def _addressed(frame: Frame, worker: int) -> list[tuple[int, int]] | None:
    """The runs ``(first, end)`` of the entries of ``frame`` addressed to ``worker`` (None: all)."""
    runs = frame.runs
    if runs.shape[0] == 0:
        return None
    lo, hi = np.searchsorted(runs[:, 0], [worker, worker + 1])
    return [(x, x + c) for x, c in runs[lo:hi, 1:].tolist()]


def _symbols_of(frames: list[Frame], worker: int) -> tuple:
    """``(a, b, len_a, len_b, payload, spans, pick)``: the entries addressed to ``worker``.

    They are the entries ``s`` in ``[first, end)`` for each row ``(first, end)`` of ``spans``,
    whose payload row is ``payload[s]``. One frame is used in place (its runs addressed to
    ``worker``, or all of it); of several frames the addressed entries are gathered into one.
    ``pick(name)`` gives any other per-entry attribute of the frames, indexed like ``a``.
    """
    spans = [_addressed(f, worker) for f in frames]
    if len(frames) == 1:
        f = frames[0]
        span = np.array(spans[0] if spans[0] is not None else [(0, f.n_symbols)], dtype=np.int64)
        return f.a, f.b, f.len_a, f.len_b, f.payload, span.reshape(-1, 2), lambda name: getattr(f, name)

    def pick(name: str) -> Any:
        cols = [getattr(f, name) for f in frames]
        if cols[0] is None:
            return None
        parts = [c if sp is None else [c[x:y] for x, y in sp] for c, sp in zip(cols, spans, strict=True)]
        flat = [p for part in parts for p in (part if isinstance(part, list) else [part])]
        return np.concatenate(flat) if flat else cols[0][:0]

    a, b, len_a, len_b, payload = (pick(name) for name in ("a", "b", "len_a", "len_b", "payload"))
    return a, b, len_a, len_b, payload, np.array([[0, a.shape[0]]], dtype=np.int64), pick


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each of ``ids`` in ``sorted_ids``, ``-1`` if absent."""
    if sorted_ids.size == 0:
        return np.full(ids.shape, -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_ids, ids), sorted_ids.size - 1)
    return np.where(sorted_ids[pos] == ids, pos, -1)


#: Largest decode workspace a thread keeps between calls.
_KEEP_WORKSPACE_BYTES = 1 << 27

_WORKSPACE = threading.local()


def _workspace(M: int, S: int, n_need: int) -> tuple[np.ndarray, ...]:
    """Tables for :func:`coded_shuffle._codec_kernels.peel_ops`: ``M`` ids, ``S`` symbols.

    A worker decodes every epoch with about the same sizes, so each thread keeps its tables
    (up to :data:`_KEEP_WORKSPACE_BYTES`): touching fresh memory costs a page fault every
    4 KiB, several times the cost of the peel itself. They grow, never shrink.
    """
    have = getattr(_WORKSPACE, "tables", None)
    need_m, need_s, need_o = M, max(S, 1), n_need + S
    if have is not None:
        sizes = (have[0].shape[0], have[3].shape[1], have[4].shape[1])
        if sizes[0] >= need_m and sizes[1] >= need_s and sizes[2] >= need_o:
            return have
        need_m, need_s, need_o = max(need_m, sizes[0]), max(need_s, sizes[1]), max(need_o, sizes[2])
    tables = (
        np.empty(need_m, dtype=np.uint8),
        np.empty((2, need_m), dtype=np.int64),
        np.empty((2, (need_m >> 6) + 1, 2), dtype=np.uint64),
        np.empty((6, need_s), dtype=np.int64),
        np.empty((4, need_o), dtype=np.int64),
    )
    if sum(t.nbytes for t in tables) <= _KEEP_WORKSPACE_BYTES:
        _WORKSPACE.tables = tables
    return tables


def _peel_ops(
    a: np.ndarray,
    b: np.ndarray,
    cache_ids: np.ndarray,
    need_ids: np.ndarray,
    cache_len: np.ndarray | None = None,
    len_a: np.ndarray | None = None,
    len_b: np.ndarray | None = None,
    *,
    spans: np.ndarray | None = None,
) -> tuple:
    """:func:`coded_shuffle._codec_kernels.peel_ops` for any id range.

    The kernel indexes its tables by id; ids spread far beyond their number (64-bit ids) are
    first numbered densely, and ``kn``, ``new``, ``decoded`` and ``missing`` mapped back. The
    symbols peeled are ``s`` in ``[first, end)`` for each row of ``spans`` (None: all).
    """
    a = _i64(a)
    b = _i64(b)
    cache_ids = _i64(cache_ids)
    need_ids = _i64(need_ids)
    S = a.shape[0]
    span = np.array([[0, S]], dtype=np.int64) if spans is None else spans
    first, end = _i64(span[:, 0]), _i64(span[:, 1])
    n_sym = int((end - first).sum())
    extra = (_i64(cache_len), _i64(len_a), _i64(len_b))
    top = max(
        int(_kernels().spans_max(a, b, first, end)),
        int(cache_ids[-1]) if cache_ids.size else -1,
        int(need_ids[-1]) if need_ids.size else -1,
    )
    n_ids = 2 * n_sym + cache_ids.shape[0] + need_ids.shape[0]
    if top < 4 * n_ids + (1 << 16):
        M = top + 1
        tables = _workspace(M, n_sym, need_ids.size)
        return _kernels().peel_ops(a, b, first, end, cache_ids, need_ids, M, *extra, *tables)
    coded = b >= 0
    uniq, inv = np.unique(np.concatenate([a, b[coded], cache_ids, need_ids]), return_inverse=True)
    n_b, n_c = int(coded.sum()), cache_ids.shape[0]
    cb = np.full(S, -1, dtype=np.int64)
    cb[coded] = inv[S : S + n_b]
    da, db, dc, dn = (_i64(x) for x in (inv[:S], cb, inv[S + n_b : S + n_b + n_c], inv[S + n_b + n_c :]))
    tables = _workspace(uniq.size, n_sym, need_ids.size)
    res = _kernels().peel_ops(da, db, first, end, dc, dn, uniq.size, *extra, *tables)
    return (*res[:10], uniq[res[10]], uniq[res[11]], *res[12:14], uniq[res[14]], uniq[res[15]])


def _peel(
    a: np.ndarray, b: np.ndarray, cache_ids: np.ndarray, need_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The symbolic peel of one worker: ``(lone, sym, kn, new, rnd, n_rounds)`` (see :func:`_peel_ops`)."""
    *_, lone, sym, kn, new, rnd, n_rounds, _, _ = _peel_ops(a, b, cache_ids, need_ids)
    return lone.copy(), sym.copy(), kn.copy(), new.copy(), rnd.copy(), int(n_rounds)


def decode_worker(
    cache: Cache,
    frames: Sequence[object],
    *,
    need: object,
    worker: int,
    epoch: int | None = None,
    checksums: np.ndarray | None = None,
    strict: bool = False,
    out: np.ndarray | None = None,
) -> DecodeResult:
    """Rebuild a worker's next batch from its cache and the frames it received.

    The worker reads the symbols addressed to it by each frame's receiver index (every symbol of
    a frame without one). They are peeled in rounds: round 1 decodes every symbol with one point
    in the cache, and
    round ``r + 1`` every symbol with one point recovered in round ``r`` (the chain of a leftover
    cycle). The peel is first run on the ids alone (one compiled pass); only the steps that lead to
    a needed point are then done on bytes, round by round, by a compiled loop that XORs each
    payload row with the row it needs straight into its row of ``out``. The bytes are those of
    the plain row-by-row computation (``tests/test_codec.py`` checks them against it).

    Parameters
    ----------
    cache : Cache
        The worker's records of epoch ``t``.
    frames : sequence of bytes-like, numpy.ndarray or Frame
        The frames received (all symbols of the transition, or those meant for the worker).
        Of a frame with a receiver index, only the entries addressed to ``worker`` are read.
    need : array_like
        Ids of the worker's batch of epoch ``t + 1``.
    worker : int
        The worker's number: it selects the entries of an indexed frame, and names the worker in
        messages.
    epoch : int, optional
        Expected epoch of the frames.
    checksums : numpy.ndarray, optional
        The load-time checksum of every record (indexed by id); each decoded record is checked.
    strict : bool
        Raise instead of reporting ``missing`` and ``bad`` ids.
    out : numpy.ndarray, optional
        A C-contiguous ``(len(need), B)`` ``uint8`` buffer for the new records, not overlapping
        the cache (a worker double-buffers its caches: epoch ``t - 1``'s buffer holds ``t + 1``).

    Returns
    -------
    DecodeResult

    Raises
    ------
    DecodeError
        A frame is malformed; or, with ``strict``, a needed point cannot be decoded (the message
        names the symbol and the worker).
    IntegrityError
        With ``strict``, a decoded record fails its checksum.

    Examples
    --------
    Example 1 of Attia and Tandon (2016): worker 0 peels the chain of the leftover cycle.

    >>> import numpy as np
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> ds = load_dataset(np.arange(15 * 4, dtype=np.uint8).reshape(15, 4))
    >>> frames = encode_plan(plan, ds, epoch=1)
    >>> old = ds.cache(plan.placement_t.batch(0))
    >>> res = decode_worker(old, frames, need=plan.placement_t1.batch(0), worker=0)
    >>> bool(np.array_equal(res.cache.data, ds.data[plan.placement_t1.batch(0)])), res.rounds
    (True, 2)
    """
    from .errors import IntegrityError

    if not isinstance(cache, Cache):
        raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
    worker = check_int(worker, "worker", minimum=0)
    need_ids = np.asarray(check_int_array(need, "need", ndim=1), dtype=np.int64)
    if need_ids.size > 1 and not bool(np.all(need_ids[1:] > need_ids[:-1])):
        need_ids = np.unique(need_ids)
    if isinstance(frames, (bytes, bytearray, np.ndarray, Frame)) or not isinstance(frames, Sequence):
        raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
    width = int(cache.data.shape[1])
    parsed = []
    for q, f in enumerate(frames):
        if isinstance(f, Frame):
            parsed.append(f)
            continue
        try:
            parsed.append(parse_frame(f, epoch=epoch, record_bytes=width))  # type: ignore[arg-type]
        except DecodeError as exc:
            raise DecodeError(f"Worker {worker}: frame {q}: {exc}") from None
    variable = cache.lengths is not None
    for q, f in enumerate(parsed):
        if (f.len_a is not None) != variable or f.record_bytes != width:
            raise DecodeError(f"Worker {worker}: frame {q} does not match the cache's record layout.")
    empty = np.empty(0, np.int64)
    if parsed:
        a, b, len_a, len_b, payload, spans, pick = _symbols_of(parsed, worker)
    else:
        a, b, len_a, len_b, pick = empty, empty, None, None, lambda name: empty
        spans = np.empty((0, 2), np.int64)
        payload = np.empty((0, width), np.uint8)

    n_out = need_ids.shape[0]
    if out is None:
        out = _aligned_rows(n_out, width)
    elif (
        not isinstance(out, np.ndarray)
        or out.shape != (n_out, width)
        or out.dtype != np.uint8
        or not out.flags.c_contiguous
        or not out.flags.writeable
        or np.shares_memory(out, cache.data)
    ):
        raise ValueError(
            f"Argument 'out' must be a writeable C-contiguous uint8 array of shape {(n_out, width)} "
            "that does not overlap the cache."
        )
    # ---- peel on ids, then one row operation per new record and per transit point ----------
    peel = _peel_ops(a, b, cache.ids, need_ids, cache.lengths, len_a, len_b, spans=spans)
    psym, src, dst, oplen, bounds, n_transit, out_len, state, lone = peel[:9]
    new, n_rounds, decoded, missing = peel[11], peel[13], peel[14], peel[15]
    # ---- bytes: round by round, straight into the new cache (transit points aside) ----------
    transit = _aligned_rows(int(n_transit), width)
    args = (out.view(np.ndarray), transit, _ro(cache.data), _ro(payload), psym, src, dst, oplen)
    apply_ops = _kernels().apply_ops
    lo = 0
    for hi in bounds.tolist():
        _halves(apply_ops, args, lo, hi, (hi - lo) * width)
        lo = hi
    n_steps = int(lone.size + new.size)
    if not variable:
        out_len = None
    if strict and missing.size:
        p = int(missing[0])
        mine = np.concatenate([np.arange(x, y) for x, y in spans.tolist()] + [empty])
        hit = mine[(a[mine] == p) | (b[mine] == p)]
        if hit.size:
            s = int(hit[0])
            sym = int(pick("symbol")[s])
            raise DecodeError(
                f"Worker {worker} cannot decode symbol {sym} (points {int(a[s])} and {int(b[s])}): "
                f"it knows neither, so point {p} stays missing."
            )
        raise DecodeError(f"Worker {worker} needs point {p} but no symbol received carries it.")

    bad = empty
    verified = 0
    if checksums is not None and decoded.size:
        rows_d = np.flatnonzero(state == 1)
        got = _checksum_rows(out, None if out_len is None else out_len[rows_d], rows_d)
        ref = np.asarray(checksums)[decoded]
        bad = decoded[got != ref]
        verified = int(decoded.size)
        if strict and bad.size:
            raise IntegrityError(
                f"Worker {worker}: decoded point {int(bad[0])} fails its checksum"
                + (f" ({bad.size} points in all)." if bad.size > 1 else ".")
            )
    new_cache = Cache(ids=_readonly(need_ids), data=out, lengths=out_len)
    return DecodeResult(
        worker=worker,
        cache=new_cache,
        decoded=_readonly(decoded),
        bad=_readonly(bad),
        missing=_readonly(missing),
        steps=n_steps,
        rounds=int(n_rounds),
        verified=verified,
    )
