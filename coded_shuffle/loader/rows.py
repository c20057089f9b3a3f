"""Records as rows: how a record's bytes read as one row of the source, and the sources a loader takes.

A loader's ``source`` is a record source (:mod:`coded_shuffle.records`), arrays or ``.npy`` paths
(joined row by row), or a sequence of ``bytes``, one record each, of any sizes
(:func:`bytes_records`). Records of one size are rows of the source's dtype and shape
(:class:`RowLayout`); records of variable sizes are each their own bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codec import Dataset, load_dataset
from ..records import NpyRecords, RecordSource, SpanRecords, TokenWindows, open_records

__all__ = ["RowLayout", "bytes_records", "check_decode", "load_rows", "open_rows", "record_bytes_of"]


@dataclass(frozen=True)
class RowLayout:
    """How a record's bytes read as one row of the source array: its dtype and shape.

    ``variable``: the records' sizes differ; a record is then its own bytes (``uint8``, as long
    as it is), and ``shape`` is the widest record's ``(width,)``.

    Examples
    --------
    >>> import numpy as np
    >>> layout = RowLayout(np.dtype("<i2"), (2,))
    >>> layout.rows(np.array([[1, 0, 2, 0], [3, 0, 4, 0]], dtype=np.uint8)).tolist()
    [[1, 2], [3, 4]]
    """

    dtype: np.dtype
    shape: tuple[int, ...]
    variable: bool = False

    @classmethod
    def of(cls, source: RecordSource) -> RowLayout:
        """The rows of ``source``: those of its arrays (:class:`~coded_shuffle.records.NpyRecords`),
        a window's tokens (:class:`~coded_shuffle.records.TokenWindows`: ``block_size`` of its
        token type), else a record's bytes (of records of one size, or of variable sizes:
        ``variable``, its width the widest record's).

        Examples
        --------
        >>> import numpy as np
        >>> from coded_shuffle.records import NpyRecords
        >>> RowLayout.of(NpyRecords(np.zeros((4, 3), dtype=np.float32)))
        RowLayout(dtype=dtype('float32'), shape=(3,), variable=False)
        >>> RowLayout.of(bytes_records([b"ab", b"cde"]))
        RowLayout(dtype=dtype('uint8'), shape=(3,), variable=True)
        """
        if isinstance(source, NpyRecords):
            return cls(dtype=source.dtype, shape=source.row_shape)
        if isinstance(source, TokenWindows):
            return cls(dtype=source.dtype, shape=(source.block_size,))
        if source.record_bytes is None:
            return cls(dtype=np.dtype(np.uint8), shape=(int(source.width),), variable=True)
        return cls(dtype=np.dtype(np.uint8), shape=(int(source.record_bytes),))

    @property
    def record_bytes(self) -> int:
        """Bytes of one record (of the widest, when their sizes vary)."""
        return int(self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64)))

    def rows(self, data: np.ndarray, *, writable: bool = False) -> np.ndarray:
        """View ``(n, B)`` ``uint8`` record bytes as ``n`` rows of this layout (read-only by default)."""
        data = np.ascontiguousarray(data)
        out = data.view(self.dtype).reshape((data.shape[0], *self.shape))
        out.flags.writeable = writable
        return out


def check_decode(decode: object) -> Callable[[np.ndarray], Any] | None:
    """A loader's argument ``decode``: None, or a callable (a record's bytes to a sample); else
    raise naming it.

    Examples
    --------
    >>> check_decode(3)
    Traceback (most recent call last):
    ...
    TypeError: Argument 'decode' must be a callable (a record's bytes to a sample) or None, not int.
    """
    if decode is None or callable(decode):
        return decode
    raise TypeError(
        "Argument 'decode' must be a callable (a record's bytes to a sample) or None, "
        f"not {type(decode).__name__}."
    )


def record_bytes_of(rows: np.ndarray) -> np.ndarray:
    """Rows as ``(n, B)`` read-only ``uint8`` record bytes (a view of them, no copy); records of
    variable sizes (an ``object`` array of each one's bytes) as they are."""
    if rows.dtype == object:
        return rows
    n, B = rows.shape[0], rows.dtype.itemsize * int(np.prod(rows.shape[1:], dtype=np.int64))
    out = np.ascontiguousarray(rows).view(np.uint8).reshape(n, B)
    out.flags.writeable = False
    return out


_BYTES = (bytes, bytearray, memoryview)


def bytes_records(items: list[Any] | tuple[Any, ...], name: str = "source") -> RecordSource:
    """Records given as a sequence of ``bytes`` (one record each, sizes free), as a record source
    over one buffer holding them end to end; refuses, naming ``name``, an item that is not bytes
    and an empty record.

    Examples
    --------
    >>> src = bytes_records([b"ab", b"cde"])
    >>> len(src), src.record_bytes, src.sizes.tolist(), src.view(1).tobytes()
    (2, None, [2, 3], b'cde')
    >>> bytes_records([b"ab", 3])
    Traceback (most recent call last):
    ...
    TypeError: Argument 'source' must hold bytes only (one record each), not int at index 1.
    """
    for i, item in enumerate(items):
        if not isinstance(item, _BYTES):
            raise TypeError(
                f"Argument {name!r} must hold bytes only (one record each), "
                f"not {type(item).__name__} at index {i}."
            )
    sizes = np.array([memoryview(x).nbytes for x in items], dtype=np.int64)
    if sizes.size and int(sizes.min()) < 1:
        raise ValueError(
            f"Argument {name!r} must hold records of at least 1 byte, "
            f"not an empty one at index {int(np.argmin(sizes))}."
        )
    buf = np.frombuffer(b"".join(bytes(x) for x in items), dtype=np.uint8)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])) if sizes.size else sizes
    return SpanRecords([buf], starts=starts, sizes=sizes, name=name)


def open_rows(source: object) -> tuple[RecordSource, RowLayout]:
    """``source`` as a record source (a ``.npy`` file memory-mapped: records read only when
    gathered; a sequence of ``bytes``, records of any sizes: :func:`bytes_records`), with the
    layout of its rows."""
    if isinstance(source, (list, tuple)):
        _check_items(source)
        if any(isinstance(x, _BYTES) for x in source):
            return open_rows(bytes_records(source))
    records = open_records(source)
    return records, RowLayout.of(records)


def _check_items(source: list[Any] | tuple[Any, ...]) -> None:
    """Refuse, naming ``source``, what reads as records of variable sizes but is not given as
    bytes: lists (a document of tokens, say) and arrays of different lengths (arrays are columns,
    joined row by row)."""
    hint = "records of variable sizes are given as bytes, one a record (numpy.asarray(doc, dtype).tobytes())"
    for i, x in enumerate(source):
        if isinstance(x, (list, tuple)):
            raise TypeError(
                f"Argument 'source' must hold arrays, .npy paths or bytes, "
                f"not {type(x).__name__} at index {i}: {hint}."
            )
    lengths = {len(x) for x in source if isinstance(x, np.ndarray) and x.ndim >= 1}
    if len(lengths) > 1:
        raise ValueError(
            "Argument 'source' must hold arrays of one length (columns, joined row by row), not lengths "
            f"{min(lengths)} to {max(lengths)}: {hint}."
        )


def load_rows(source: object) -> tuple[Dataset, RowLayout]:
    """Load ``source`` as a dataset, keeping the dtype and shape of a row.

    Parameters
    ----------
    source : RecordSource, numpy.ndarray, str, os.PathLike, or a sequence or mapping of them
        A record source (its records of one size or of variable sizes), an array of shape
        ``(N, ...)`` (row ``X[i]`` is record ``i``), or the path of a ``.npy`` file, opened as a
        read-only memmap (the rows stay on disk until read); several arrays or paths are joined
        row by row (:class:`~coded_shuffle.records.NpyRecords`); a sequence of ``bytes`` is one
        record each, of any sizes (:func:`bytes_records`).

    Returns
    -------
    (Dataset, RowLayout)

    Examples
    --------
    >>> import numpy as np
    >>> ds, layout = load_rows(np.zeros((6, 3), dtype=np.float32))
    >>> ds.N, ds.record_bytes, layout.dtype, layout.shape
    (6, 12, dtype('float32'), (3,))
    """
    records, layout = open_rows(source)
    return load_dataset(records), layout
