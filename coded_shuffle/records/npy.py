"""Records as the rows of arrays: ``.npy`` files memory-mapped, or arrays in memory."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import numpy as np

from .base import check_ids, check_index, check_out

__all__ = ["NpyRecords", "npy_header", "npy_problem"]


def npy_header(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of the ``.npy`` file ``path``, from its header alone.

    Raises ``OSError`` if the file cannot be read and ``ValueError`` if it is not a ``.npy`` file.
    """
    shape, dtype, _ = _header(path)
    return shape, dtype


def _header(path: str | os.PathLike[str]) -> tuple[tuple[int, ...], np.dtype, int]:
    """The shape, dtype and length in bytes of the header of the ``.npy`` file ``path``."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        offset = f.tell()
    return tuple(int(n) for n in shape), dtype, offset


def npy_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` is not a usable ``.npy`` file of records (naming it), or None if it is.

    Reads only the file's header and size: it must exist, be a ``.npy`` file (magic string and
    header), hold at least one record (a row), of at least one byte, of a plain (not object) dtype,
    and be as long as its header says.

    Examples
    --------
    >>> npy_problem("no/such/file.npy")
    'no such file: no/such/file.npy'
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return f"no such file: {path}"
    if not os.path.isfile(path):
        return f"not a file: {path}"
    try:
        shape, dtype, offset = _header(path)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    except ValueError:
        return f"not a .npy file (numpy's format, as written by numpy.save): {path}"
    problem = _rows_problem(path, shape, dtype)
    if problem is None and not dtype.hasobject:
        size, promised = os.path.getsize(path), offset + math.prod(shape) * dtype.itemsize
        if size < promised:
            problem = f"{path} is cut short: its header promises {promised} bytes, the file holds {size}"
    return problem


def _rows_problem(path: str, shape: tuple[int, ...], dtype: np.dtype) -> str | None:
    """Why the array of ``shape`` and ``dtype`` in file ``path`` holds no usable records, or None."""
    if dtype.hasobject:
        return f"{path} holds Python objects; records must be a plain dtype (numbers, bytes)"
    if len(shape) == 0 or shape[0] == 0:
        return f"{path} holds no records (shape {shape}); one record a row, at least one row"
    if math.prod(shape[1:]) * dtype.itemsize == 0:
        return f"{path} holds records of 0 bytes (shape {shape}); a record needs at least 1 byte"
    return None


def _map(path: str | os.PathLike[str], name: str, at: str) -> np.ndarray:
    """The ``.npy`` file ``path`` memory-mapped read-only, or a ValueError naming ``name`` and the file."""
    try:
        arr = np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)
        problem = _rows_problem(os.fspath(path), tuple(arr.shape), arr.dtype)
    except (OSError, ValueError) as exc:  # say why from the header, or else numpy's words
        problem = npy_problem(path) or f"cannot map {os.fspath(path)}: {exc}"
    if problem is None:
        return arr
    raise ValueError(f"Argument {name!r} must name a readable .npy file of records{at}: {problem}")


def _column(value: object, name: str, at: str) -> tuple[np.ndarray, str | None]:
    """One column: an array as it is, or a path memory-mapped; with its path (None for an array)."""
    if isinstance(value, (str, os.PathLike)):
        return _map(value, name, at), os.fspath(value)
    if isinstance(value, np.ndarray):
        return value, None
    what = "be a numpy array or the path of a .npy file" if not at else "hold arrays or .npy paths"
    raise TypeError(f"Argument {name!r} must {what}, not {type(value).__name__}{at}.")


def _byte_rows(arr: np.ndarray, name: str) -> np.ndarray:
    """``arr``'s rows as a read-only ``(N, B)`` ``uint8`` array: a view (one copy if not C-contiguous)."""
    if arr.ndim < 1:
        raise ValueError(f"Argument {name!r} must have at least 1 dimension (one row a record), not 0.")
    if arr.dtype.hasobject:
        raise ValueError(f"Argument {name!r} must hold plain values, not {arr.dtype} values.")
    n = arr.shape[0]
    if n == 0:
        raise ValueError(f"Argument {name!r} must hold at least 1 record, not 0.")
    width = arr.dtype.itemsize * int(np.prod(arr.shape[1:], dtype=np.int64))
    if width < 1:
        raise ValueError(f"Argument {name!r} must have records of at least 1 byte, not {width}.")
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    rows = arr.reshape(n, -1).view(np.uint8).reshape(n, width)
    if rows.flags.writeable:
        rows = rows.view()
        rows.flags.writeable = False
    return rows


class NpyRecords:
    """Records as the rows of arrays: one ``.npy`` file (or array), or several joined row by row.

    Record ``i`` is row ``i`` of the array, its bytes as they lie. A ``.npy`` file is
    memory-mapped read-only: a record is read when it is viewed or gathered, and a view is a slice
    of the map, not a copy. Several arrays of ``N`` rows each (features and labels in separate
    files, say) make one record a row: row ``i`` of each becomes field ``f0``, ``f1``, ... (or the
    mapping's keys) of record ``i``, laid out as the aligned structured :attr:`dtype` (native byte
    order, padding zero); :meth:`gather` reads each file's rows, and :meth:`table` and
    :meth:`view` the whole table, made once.

    Parameters
    ----------
    source : numpy.ndarray, str, os.PathLike, or a sequence or mapping of them
        One array of shape ``(N, ...)`` or ``.npy`` path, or several (the columns).
    name : str
        The argument named by the errors.

    Attributes
    ----------
    dtype : numpy.dtype
        What a record is: the dtype of a row (the array's, or the structured dtype of the columns).
    row_shape : tuple of int
        The shape of a row (``()`` for several columns).
    names : tuple of str or None
        The fields of several columns, or None for one array.
    paths : tuple of str or None
        The file of each column (None for an array in memory).
    arrays : tuple of numpy.ndarray
        Each column as it was given, or as its file is mapped.

    Raises
    ------
    ValueError
        Naming the file: a missing file, one that is not a ``.npy`` file, or that holds no records,
        records of 0 bytes or Python objects; columns of other row counts, or whose dtypes cannot
        be joined (structured or object values).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(12, dtype=np.uint16).reshape(3, 4)
    >>> src = NpyRecords(x)
    >>> len(src), src.record_bytes, src.view(1)[:4].tolist()
    (3, 8, [4, 0, 5, 0])
    >>> np.shares_memory(src.view(1), x)  # a row of the array, not a copy
    True
    >>> src.gather([2, 0]).shape
    (2, 8)
    >>> both = NpyRecords({"x": x, "y": np.array([7, 8, 9], dtype=np.int8)})
    >>> both.dtype.names, both.record_bytes, both.gather([1]).view(both.dtype)["y"].tolist()
    (('x', 'y'), 10, [[8]])
    """

    def __init__(self, source: object, *, name: str = "source") -> None:
        if isinstance(source, (str, os.PathLike, np.ndarray)):
            arr, path = _column(source, name, "")
            self._table: np.ndarray | None = _byte_rows(arr, name)
            self._columns: tuple[tuple[str, np.ndarray], ...] = ()
            self.dtype: np.dtype = arr.dtype
            self.row_shape: tuple[int, ...] = tuple(int(n) for n in arr.shape[1:])
            self.names: tuple[str, ...] | None = None
            self.paths: tuple[str | None, ...] = (path,)
            self.arrays: tuple[np.ndarray, ...] = (arr,)
            self._N, self._B = int(self._table.shape[0]), int(self._table.shape[1])
            return
        if isinstance(source, Mapping):
            items = [(str(k), v) for k, v in source.items()]
        elif isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
            items = [(f"f{i}", v) for i, v in enumerate(source)]
        else:
            raise TypeError(
                f"Argument {name!r} must be an array, a .npy path, or a sequence or mapping of them, "
                f"not {type(source).__name__}."
            )
        if not items:
            raise ValueError(f"Argument {name!r} must hold at least one array, not none.")
        columns, paths = [], []
        N = None
        for k, v in items:
            at = f" at {k!r}" + ("" if not isinstance(v, (str, os.PathLike)) else f" ({os.fspath(v)})")
            a, path = _column(v, name, f" at {k!r}")
            if a.ndim < 1:
                raise ValueError(f"Argument {name!r} must hold arrays of at least 1 dimension, not 0{at}.")
            if a.dtype.names or a.dtype.hasobject:
                raise ValueError(
                    f"Argument {name!r} must hold plain arrays when it holds several, not {a.dtype}{at}."
                )
            N = a.shape[0] if N is None else N
            if a.shape[0] != N:
                raise ValueError(
                    f"Argument {name!r} must hold arrays of one length N = {N}, not {a.shape[0]} rows{at}."
                )
            columns.append((k, a))
            paths.append(path)
        assert N is not None
        if N == 0:
            raise ValueError(f"Argument {name!r} must hold at least 1 record, not 0.")
        self.dtype = np.dtype([(k, a.dtype.newbyteorder("="), a.shape[1:]) for k, a in columns], align=True)
        if self.dtype.itemsize < 1:
            raise ValueError(f"Argument {name!r} must have records of at least 1 byte, not 0.")
        self._table = None  # made on first use
        self._columns = tuple(columns)
        self.row_shape = ()
        self.names = tuple(k for k, _ in columns)
        self.paths = tuple(paths)
        self.arrays = tuple(a for _, a in columns)
        self._N, self._B = int(N), int(self.dtype.itemsize)

    def __repr__(self) -> str:
        where = self.paths if any(p is not None for p in self.paths) else "in memory"
        return f"NpyRecords(N={self._N}, record_bytes={self._B}, dtype={self.dtype}, paths={where})"

    def __len__(self) -> int:
        return self._N

    @property
    def record_bytes(self) -> int:
        """Bytes of every record (the rows of arrays are of one size)."""
        return self._B

    @property
    def width(self) -> int:
        """Bytes of the widest record: :attr:`record_bytes`."""
        return self._B

    @property
    def sizes(self) -> np.ndarray:
        """Bytes of each record: :attr:`record_bytes`, ``N`` times (a read-only broadcast)."""
        return np.broadcast_to(np.int64(self._B), (self._N,))

    def view(self, i: int) -> np.ndarray:
        """Record ``i``: a read-only ``uint8`` row of the map or array (a view, not a copy)."""
        return self.table()[check_index(i, self._N)]

    def gather(self, ids: object, out: np.ndarray | None = None) -> np.ndarray:
        """The records ``ids`` as ``(len(ids), record_bytes)`` ``uint8`` rows, into ``out`` if given."""
        idx = check_ids(ids, self._N)
        n = int(idx.shape[0])
        if out is not None:
            out = check_out(out, n, self._B)
        if self._table is not None:
            if out is None:
                return np.take(self._table, idx, axis=0, mode="clip")
            return np.take(self._table, idx, axis=0, out=out, mode="clip")
        if out is None:
            out = np.zeros((n, self._B), dtype=np.uint8)
        else:
            out[...] = 0  # the padding between fields
        fields = out.view(self.dtype).reshape(n)
        for k, a in self._columns:
            fields[k] = a[idx]
        return out

    def table(self) -> np.ndarray:
        """Every record as one read-only ``(N, record_bytes)`` ``uint8`` array: a view of one file
        or array; the columns joined once (a copy in memory) for several."""
        if self._table is None:
            table = self.gather(np.arange(self._N))
            table.flags.writeable = False
            self._table = table
        return self._table

    def rows(self) -> np.ndarray:
        """Every record as a row of :attr:`dtype` and :attr:`row_shape` (a view of :meth:`table`).

        Examples
        --------
        >>> import numpy as np
        >>> NpyRecords([np.arange(3), np.ones(3, np.float32)]).rows()["f0"].tolist()
        [0, 1, 2]
        """
        return self.table().view(self.dtype).reshape((self._N, *self.row_shape))
