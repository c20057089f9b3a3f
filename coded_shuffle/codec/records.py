"""Records and their checksums: :class:`Dataset`, :func:`load_dataset`, :class:`Cache`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .._checks import check_int, check_int_array
from ..plan.sizes import size_key
from ..records import NpyRecords, RecordSource, open_records
from ._common import (
    _GOLDEN,
    _aligned_empty,
    _aligned_rows,
    _halves,
    _i64,
    _kernels,
    _lookup,
    _readonly,
    _ro,
)

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


def _packed_layout(lengths: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, offsets)`` of records of ``lengths`` (none over ``width``) in :class:`Cache`'s
    packed layout: end to end, longest first, ties in row order (:mod:`coded_shuffle.plan.sizes`)."""
    lens = _i64(lengths)
    return _kernels().packed_layout(size_key(lens, width), lens)  # type: ignore[no-any-return]


def _packed_rows(ids: np.ndarray, data: np.ndarray, rows: np.ndarray, lens: np.ndarray) -> Cache:
    """The packed cache of the records ``ids``: the rows ``rows`` of the ``(n, B)`` ``data``, each
    cut to its length ``lens``, in a new aligned buffer in :class:`Cache`'s packed layout (written
    in the order they lie)."""
    lens = _i64(lens)
    buf = _aligned_empty(int(lens.sum()))
    layout = _packed_layout(lens, int(data.shape[1]))
    order, offsets = layout
    _pack_rows(buf, offsets[order], data, _i64(rows)[order], lens[order])
    return Cache._laid_out(ids, buf, lens, int(data.shape[1]), layout)


def _pack_rows(
    buf: np.ndarray, starts: np.ndarray, data: np.ndarray, rows: np.ndarray, lens: np.ndarray
) -> None:
    """Row ``rows[i]`` of the ``(n, B)`` ``data``, cut to ``lens[i]`` bytes, to ``buf[starts[i]:]``."""
    args = (buf, _i64(starts), _ro(data).reshape(-1), _i64(rows * data.shape[1]), _i64(lens))
    _halves(_kernels().copy_spans, args, 0, rows.shape[0], int(np.sum(lens)))


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

    def cache(self, ids: object, *, packed: bool = False) -> Cache:
        """Return a worker cache holding copies of the records ``ids`` (with ``packed``, records of
        many sizes packed: see :class:`Cache`).

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
        if not isinstance(packed, bool):
            raise TypeError(f"Argument 'packed' must be a bool, not {type(packed).__name__}.")
        if packed and self.lengths is not None:
            sizes = self.lengths[idx].copy()
            return _packed_rows(_readonly(idx), self.data, idx, sizes)
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


#: Records :meth:`Cache.gathered` reads from a source in rows at a time.
GATHER_ROWS = 4096


@dataclass(frozen=True, eq=False, init=False)
class Cache:
    """The records one worker holds, in one of two layouts.

    In rows (``Cache(ids, data, lengths)``), ``data`` is ``(len(ids), B)`` ``uint8``, row ``r``
    holding record ``ids[r]``, zero past its length. Packed (:meth:`packed`, for records of
    many sizes), the records lie end to end from the start of ``buffer``, longest first, records
    of one length in row order: record ``ids[r]`` is the ``lengths[r]`` bytes at
    ``offsets[r]``, and :attr:`order` lists the rows in the order they lie. No padding is
    stored, read or written, and the decoder reads and writes records of many sizes packed this
    way (the new batch is packed when the cache is). Longest first is the order in which
    :func:`coded_shuffle.plan.plan_delivery` pairs and lists the records of each group
    (:mod:`coded_shuffle.plan.sizes`), so the decoder reads each group's cache records and
    payloads, and writes its new records, in one direction (in row order, pairs of similar size
    joined records whose ids are unrelated, and a worker read its cache in no order). Records of
    64 KiB or more are ordered by a key of 0.034 % steps
    (:func:`coded_shuffle.plan.sizes.size_key`).
    :attr:`data` gives the rows of either (of a packed cache, a copy).

    Attributes
    ----------
    ids : numpy.ndarray
        Increasing ``int64`` point ids.
    lengths : numpy.ndarray or None
        Record lengths, or ``None`` for fixed-size records (always given when packed).
    width : int
        ``B``: the record width (the longest record's when lengths vary).
    buffer : numpy.ndarray
        The storage: the ``(len(ids), B)`` rows, or the packed records (1-D ``uint8``, at least
        their total length; the bytes past them are not the cache's).
    is_packed : bool
        Whether the records are packed.

    Examples
    --------
    >>> c = load_dataset([b"ab", b"cde"]).cache([1])
    >>> c.record(1)
    b'cde'
    >>> p = c.pack()
    >>> p.is_packed, p.record(1), p.data.shape
    (True, b'cde', (1, 3))
    >>> q = load_dataset([b"ab", b"", b"cde"]).cache([0, 1, 2], packed=True)
    >>> q.buffer.tobytes(), q.order.tolist(), q.offsets.tolist()
    (b'cdeab', [2, 0, 1], [3, 5, 0])
    """

    ids: np.ndarray
    lengths: np.ndarray | None
    width: int
    buffer: np.ndarray
    is_packed: bool

    def __init__(self, ids: np.ndarray, data: np.ndarray, lengths: np.ndarray | None) -> None:
        self._set(ids, lengths, int(data.shape[1]), data, False)

    def _set(self, ids: np.ndarray, lengths: np.ndarray | None, width: int, buffer: np.ndarray,
             packed: bool) -> None:  # fmt: skip
        for name, value in (("ids", ids), ("lengths", lengths), ("width", width), ("buffer", buffer),
                            ("is_packed", packed)):  # fmt: skip
            object.__setattr__(self, name, value)

    @classmethod
    def packed(cls, ids: np.ndarray, buffer: np.ndarray, lengths: np.ndarray, width: int) -> Cache:
        """A cache of the records packed in ``buffer``, of the lengths ``lengths`` (each at most
        ``width``; ``buffer`` at least their sum), laid out as the class says: end to end,
        longest first, records of one length in row order (``buffer`` of records end to end in
        row order is not that layout; :meth:`Dataset.cache` and :meth:`pack` make it)."""
        if buffer.ndim != 1 or buffer.dtype != np.uint8 or not buffer.flags.c_contiguous:
            raise ValueError("Argument 'buffer' must be a C-contiguous 1-D uint8 array.")
        lens = _check_lengths(lengths, len(ids), width)
        total = int(lens.sum())
        if buffer.shape[0] < total:
            raise ValueError(
                f"Argument 'buffer' must hold the {len(ids)} records' {total} bytes, not {buffer.shape[0]}."
            )
        cache = cls.__new__(cls)
        cache._set(ids, lengths, int(width), buffer, True)
        return cache

    @classmethod
    def gathered(cls, source: RecordSource, ids: np.ndarray, lengths: np.ndarray, width: int) -> Cache:
        """The records ``ids`` (increasing) of the record source ``source``, of the lengths
        ``lengths``, packed: read through ``source.gather`` (zero-padded rows of the width)
        :data:`GATHER_ROWS` at a time, so that no more rows than that are held beside the packed
        bytes (all of them in rows would take the widest record's bytes each)."""
        lens = _i64(lengths)
        buf = _aligned_empty(int(lens.sum()))
        layout = _packed_layout(lens, width)
        starts = layout[1]
        for lo in range(0, ids.size, GATHER_ROWS):
            hi = min(lo + GATHER_ROWS, ids.size)
            rows = np.ascontiguousarray(source.gather(ids[lo:hi]), dtype=np.uint8)
            _pack_rows(buf, starts[lo:hi], rows, np.arange(hi - lo, dtype=np.int64), lens[lo:hi])
        return cls._laid_out(ids, buf, lens, width, layout)

    @classmethod
    def _laid_out(
        cls, ids: np.ndarray, buffer: np.ndarray, lengths: np.ndarray, width: int,
        layout: tuple[np.ndarray, np.ndarray],
    ) -> Cache:  # fmt: skip
        """:meth:`packed`, with its ``(order, offsets)`` already computed by :func:`_packed_layout`
        (where the records were just written), kept instead of computed again."""
        cache = cls.packed(ids, buffer, lengths, width)
        cache.__dict__["_layout"] = (_readonly(layout[0]), _readonly(layout[1]))
        return cache

    @cached_property
    def _layout(self) -> tuple[np.ndarray, np.ndarray]:
        """``(order, offsets)``, read-only (:func:`_packed_layout` of a packed cache)."""
        if not self.is_packed:
            rows = np.arange(len(self), dtype=np.int64)
            return _readonly(rows), _readonly(rows * self.width)
        order, offsets = _packed_layout(np.asarray(self.lengths), self.width)
        return _readonly(order), _readonly(offsets)

    @property
    def offsets(self) -> np.ndarray:
        """The start of each record in :attr:`buffer` (flat, in bytes)."""
        return self._layout[1]

    @property
    def order(self) -> np.ndarray:
        """The rows in the order their records lie in :attr:`buffer` (see the class)."""
        return self._layout[0]

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def data(self) -> np.ndarray:
        """The ``(len(ids), B)`` ``uint8`` rows (of a packed cache, a new copy, zero-padded)."""
        if not self.is_packed:
            return self.buffer
        return self.take(np.arange(len(self), dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """The bytes of the records held (their lengths' sum)."""
        return len(self) * self.width if self.lengths is None else int(np.sum(self.lengths, dtype=np.int64))

    def rows(self, ids: np.ndarray) -> np.ndarray:
        """Return the row of each of ``ids`` (``-1`` where the cache does not hold it)."""
        return _lookup(self.ids, np.asarray(ids, dtype=np.int64))

    def take(
        self, rows: np.ndarray, *, out: np.ndarray | None = None, at: np.ndarray | None = None
    ) -> np.ndarray:
        """The rows ``rows`` (positions, not ids), zero-padded to the width: a new
        ``(len(rows), B)`` array, or written into the rows ``at`` of the ``(n, B)`` array ``out``."""
        rows = _i64(rows)
        if out is None and not self.is_packed:
            return self.buffer[rows]
        dst = _i64(np.arange(rows.shape[0], dtype=np.int64) if at is None else at)
        if out is None:
            out = np.empty((rows.shape[0], self.width), dtype=np.uint8)
        if not self.is_packed:
            args = (out, dst, _ro(self.buffer), rows)
            _halves(_kernels().move_rows, args, 0, rows.shape[0], rows.shape[0] * self.width)
            return out
        assert self.lengths is not None
        lens = _i64(self.lengths)
        _kernels().take_spans(out, dst, _ro(self.buffer), _i64(self.offsets[rows]), _i64(lens[rows]))
        return out

    def record_at(self, r: int) -> np.ndarray:
        """The bytes of row ``r`` cut to its record's length (a view)."""
        if not self.is_packed:
            return self.buffer[r, : self.width if self.lengths is None else int(self.lengths[r])]
        assert self.lengths is not None
        at = int(self.offsets[r])
        return self.buffer[at : at + int(self.lengths[r])]

    def record(self, n: int) -> bytes:
        """Return record ``n`` as bytes, cut to its length."""
        r = int(self.rows(np.array([n]))[0])
        if r < 0:
            raise KeyError(n)
        return bytes(self.record_at(r))

    def pack(self) -> Cache:
        """This cache packed (itself if it is, or holds records of one size: rows are packed)."""
        if self.is_packed or self.lengths is None:
            return self
        lens = _i64(self.lengths)
        return _packed_rows(self.ids, self.buffer, np.arange(len(self), dtype=np.int64), lens)

    def checksums(self) -> np.ndarray:
        """Recompute the checksum of every record held (a packed cache's where they lie)."""
        if not self.is_packed:
            return _checksum_rows(self.data, self.lengths)
        out = np.empty(len(self), dtype=np.uint64)
        keys = _word_keys(max(1, -(-self.width // 8)))
        args = (out, _ro(self.buffer), self.offsets, _i64(self.lengths), keys)
        _halves(_kernels().checksum_spans, args, 0, len(self), self.nbytes)
        return out

    def patched(self, other: Cache) -> Cache:
        """Return a copy with the rows of ``other`` (ids it must hold) replaced by those of ``other``
        (in rows)."""
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
