"""Records and their checksums: :class:`Dataset`, :func:`load_dataset`, :class:`Cache`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_int_array
from ..records import NpyRecords, RecordSource, open_records
from ._common import _GOLDEN, _aligned_rows, _halves, _i64, _kernels, _lookup, _readonly, _ro

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
        data = NpyRecords(records, name="records").table()
        lens = None
        if lengths is not None:
            lens = _check_lengths(lengths, data.shape[0], data.shape[1])
        return _checksum_rows(data, lens)
    if lengths is not None:
        raise ValueError("Argument 'lengths' must be None when 'records' is a sequence of bytes.")
    data, lens = _pad_bytes(records, "records")
    return _checksum_rows(data, lens)


# --------------------------------------------------------------------------- records


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
    source : RecordSource, numpy.ndarray, str, os.PathLike or sequence of bytes
        A record source (:class:`~coded_shuffle.records.RecordSource`; its table is the
        dataset's rows, a memory map stays on disk), an array of shape ``(N, ...)`` or the path of
        a ``.npy`` file (each row one record, viewed as bytes: :class:`~coded_shuffle.records.NpyRecords`),
        or a sequence of ``bytes`` of varying lengths.
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
    if isinstance(source, (str, os.PathLike, np.ndarray, RecordSource)):
        records = open_records(source)
        data = records.table()
        if records.record_bytes is None:
            lens = np.array(records.sizes, dtype=np.int64)
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
