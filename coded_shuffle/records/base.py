"""The interface of a record source, and what every driver asks of one."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .._checks import check_int, check_int_array

__all__ = ["RecordSource", "fixed_record_bytes", "check_ids", "check_out"]


@runtime_checkable
class RecordSource(Protocol):
    """The interface of a record source: ``N`` records of bytes, read where they lie.

    ``len(source)``
        the number of records ``N``;
    ``record_bytes``
        the size of every record in bytes when they all have one size, else ``None``;
    ``width``
        the size of the widest record (``record_bytes`` when it is one size): the row width of
        :meth:`gather` and :meth:`table`;
    ``sizes``
        the read-only ``int64`` table of every record's size (a broadcast of one value for records
        of one size, no memory);
    ``view(i)``
        record ``i`` as a read-only one-dimensional ``uint8`` array, its own bytes only, without
        a copy where the storage allows (a row of a memory map);
    ``gather(ids, out=None)``
        the records ``ids`` as the rows of an ``(len(ids), width)`` ``uint8`` array, each
        zero-padded to ``width``: into ``out`` when given (a C-contiguous writable array of that
        shape, returned), else a new array;
    ``table()``
        every record as one read-only ``(N, width)`` ``uint8`` array: a view of the storage where
        it is such a table (one ``.npy`` file), else made once.

    Ids are checked at the boundary (a ``ValueError`` naming ``i``, ``ids`` or ``out``).

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.records import NpyRecords
    >>> source = NpyRecords(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> isinstance(source, RecordSource), len(source), source.record_bytes, source.sizes.tolist()
    (True, 3, 2, [2, 2, 2])
    >>> source.view(2).tolist(), source.gather([2, 0]).tolist()
    ([4, 5], [[4, 5], [0, 1]])
    """

    def __len__(self) -> int: ...

    @property
    def record_bytes(self) -> int | None:
        """Bytes of every record, or ``None`` when the sizes differ."""

    @property
    def width(self) -> int:
        """Bytes of the widest record."""

    @property
    def sizes(self) -> np.ndarray:
        """Bytes of each record (read-only ``int64``)."""

    def view(self, i: int) -> np.ndarray: ...

    def gather(self, ids: object, out: np.ndarray | None = None) -> np.ndarray: ...

    def table(self) -> np.ndarray: ...


def fixed_record_bytes(source: RecordSource, name: str = "source") -> int:
    """The one size of ``source``'s records, for what needs records of one size; else raise naming ``name``.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.records import NpyRecords
    >>> fixed_record_bytes(NpyRecords(np.zeros((5, 3), dtype=np.float32)))
    12
    """
    B = source.record_bytes
    if B is None:
        sizes = source.sizes
        raise ValueError(
            f"Argument {name!r} must hold records of one size here, not sizes from "
            f"{int(sizes.min())} to {int(sizes.max())} bytes."
        )
    return int(B)


def check_ids(ids: object, N: int) -> np.ndarray:
    """``ids`` as a one-dimensional ``int64`` array of record ids in ``[0, N)``, or raise naming it."""
    idx = check_int_array(ids, "ids", ndim=1).astype(np.int64, copy=False)
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= N):
        raise ValueError(
            f"Argument 'ids' must name records in [0, {N}), not [{int(idx.min())}, {int(idx.max())}]."
        )
    return idx


def check_index(i: object, N: int) -> int:
    """``i`` as the id of one of ``N`` records, or raise naming it."""
    i = check_int(i, "i", minimum=0)
    if i >= N:
        raise ValueError(f"Argument 'i' must be less than N = {N}, not {i}.")
    return i


def check_out(out: object, n: int, width: int) -> np.ndarray:
    """``out`` if it is a writable C-contiguous ``(n, width)`` ``uint8`` array, else raise naming it."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"Argument 'out' must be a numpy array, not {type(out).__name__}.")
    fits = out.dtype == np.uint8 and out.shape == (n, width) and out.flags.c_contiguous
    if not fits or not out.flags.writeable:
        raise ValueError(
            f"Argument 'out' must be a writable C-contiguous uint8 array of shape ({n}, {width}), "
            f"not {'a read-only ' if not out.flags.writeable else ''}{out.dtype} array of shape {out.shape}."
        )
    return out
