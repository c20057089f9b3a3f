"""Arrow files (Hugging Face ``datasets``' ``.arrow`` files): one record a row of a chosen column.

pyarrow (the ``arrow`` extra) is imported only when a file is opened.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .spans import SpanRecords, shard_paths

__all__ = ["ArrowRecords", "ArrowValues"]

EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"  # the end of an Arrow IPC stream (a continuation marker, length 0)


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.ipc  # noqa: F401
    except ImportError:
        raise ImportError("Arrow files need pyarrow: pip install 'coded_shuffle[arrow]'") from None
    return pyarrow


def _fixed_width(pa: Any, t: Any) -> int | None:
    """Bytes of a value of the Arrow type ``t`` if it is a fixed-width number, else None."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return int(t.bit_width) // 8
    return None


class ArrowRecords(SpanRecords):
    """The rows of one column of Arrow files, one record a row: its bytes as the file holds them.

    Hugging Face ``datasets`` keeps a dataset as Arrow IPC streams (``data-00000-of-00003.arrow``)
    and memory-maps them; so does this source, with pyarrow (the ``arrow`` extra). A record is one
    row of the chosen column, read in place (a slice of the file's map, no copy):

    * ``binary``, ``string`` (and their ``large_`` forms): the row's bytes (UTF-8 for a string);
    * ``list`` or ``large_list`` of a fixed-width number (``input_ids: list<int32>`` of a
      tokenized dataset): the row's values, e.g. a document's tokens;
    * ``fixed_size_binary``, ``fixed_size_list`` of a number, a number: the row's bytes, one size
      for every record.

    Files are Arrow IPC streams (as ``datasets`` writes them) or Arrow IPC files; a stream must
    end with its end-of-stream marker (else it is taken as cut short). The column must have one
    type in every file and no nulls; a row of 0 bytes is refused.

    Parameters
    ----------
    paths : str, os.PathLike, or a sequence of them
        An ``.arrow`` file, a directory (its ``*.arrow`` files, sorted by name), or the files in order.
    column : str, optional
        The column whose rows are the records; may be omitted when the files have one column.

    Attributes
    ----------
    paths : tuple of str
    column : str
    type : pyarrow.DataType
        The column's type.
    value_dtype : numpy.dtype
        What a record's bytes hold: ``uint8`` for binary and strings, else the numbers' dtype
        (:meth:`values`).
    tables : tuple of pyarrow.Table
        Each file's table, over its map (:meth:`row` reads every column of a row).

    Raises
    ------
    ValueError
        Naming the file: not Arrow IPC, cut short, without the column, a column of another type
        than in the first file or of a type that is not listed above, a null or empty row, no rows.
    ImportError
        Without pyarrow.

    Examples
    --------
    >>> import os, tempfile
    >>> import pyarrow as pa
    >>> path = os.path.join(tempfile.mkdtemp(), "data-00000-of-00001.arrow")
    >>> table = pa.table({"input_ids": pa.array([[5, 6, 7], [8]], pa.list_(pa.int32())), "label": [0, 1]})
    >>> with pa.ipc.new_stream(path, table.schema) as w:
    ...     w.write_table(table)
    >>> src = ArrowRecords(path, column="input_ids")
    >>> len(src), src.sizes.tolist(), src.values(0).tolist(), src.row(1)
    (2, [12, 4], [5, 6, 7], {'input_ids': [8], 'label': 1})
    """

    def __init__(self, paths: object, *, column: str | None = None) -> None:
        if column is not None and not isinstance(column, str):
            raise TypeError(f"Argument 'column' must be a str or None, not {type(column).__name__}.")
        pa = _pyarrow()
        files = shard_paths(paths, suffix=".arrow", files="Arrow files", one="Arrow file")
        bufs: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        sizes: list[np.ndarray] = []
        where: list[np.ndarray] = []
        tables = []
        col_type = None
        for path in files:
            table, whole = self._open(pa, path)
            column = _column_of(table, column, path)
            t = table.schema.field(column).type
            if col_type is None:
                col_type = t
                value_dtype = self._value_dtype(pa, t, path, column)
            elif t != col_type:
                raise ValueError(
                    f"Argument 'paths' must name files whose column {column!r} has one type: {path} has "
                    f"{t}, {files[0]} {col_type}"
                )
            k = len(bufs)
            bufs.append(whole)
            row0 = 0
            for chunk in table.column(column).chunks:
                if chunk.null_count:
                    j = row0 + int(np.flatnonzero(np.asarray(chunk.is_null()))[0])
                    raise ValueError(
                        f"Argument 'paths' must hold no nulls: row {j} of {column!r} in {path} is null"
                    )
                data, st, sz = self._spans(pa, chunk, f"column {column!r} of {path}")
                base = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
                at = self._within(whole, base)
                if at is None:  # a buffer outside the map (compressed IPC bodies): kept as it is
                    at, b = 0, len(bufs)
                    bufs.append(base)
                else:
                    b = k
                starts.append(st + at)
                sizes.append(sz)
                where.append(np.full(st.shape[0], b, dtype=np.int32))
                _check_nonempty(sz, row0, column, path)
                row0 += len(chunk)
            tables.append(table)
        n = sum(int(s.shape[0]) for s in starts)
        if n == 0:
            raise ValueError(f"Argument 'paths' must hold at least 1 row, not 0 ({', '.join(files)})")
        self._init_spans(bufs, np.concatenate(starts), np.concatenate(sizes), np.concatenate(where), "paths")
        self.paths = tuple(files)
        self.column = str(column)
        self.type = col_type
        self.value_dtype = value_dtype
        self.tables = tuple(tables)
        self._rows = np.cumsum([0] + [t.num_rows for t in tables])

    @staticmethod
    def _open(pa: Any, path: str) -> tuple[Any, np.ndarray]:
        """The table of the Arrow IPC stream or file ``path`` over its memory map, and the map as bytes."""
        if not os.path.isfile(path):
            raise ValueError(f"Argument 'paths' must name Arrow files: no such file: {path}")
        if os.path.getsize(path) == 0:
            raise ValueError(f"Argument 'paths' must name Arrow files: {path} is empty")
        mm = pa.memory_map(path, "r")
        whole = mm.read_buffer()
        is_file = whole.size >= 6 and whole[:6].to_pybytes() == b"ARROW1"
        if not is_file and whole[:4].to_pybytes() != EOS[:4]:  # a stream begins with a continuation marker
            raise ValueError(
                f"Argument 'paths' must name Arrow files: {path} is not an Arrow IPC stream or file"
            )
        try:
            if is_file:
                table = pa.ipc.open_file(whole).read_all()
            else:
                table = pa.ipc.open_stream(whole).read_all()
        except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
            short = any(
                w in str(exc).lower() for w in ("expected to read", "expected to be able to read", "end of")
            )
            what = "is cut short" if short else "is not a valid Arrow IPC stream or file"
            raise ValueError(f"Argument 'paths' must name whole Arrow files: {path} {what} ({exc})") from None
        if not is_file and whole[whole.size - 8 :].to_pybytes() != EOS:
            raise ValueError(
                f"Argument 'paths' must name whole Arrow files: {path} is cut short (no end-of-stream marker)"
            )
        arr = np.frombuffer(whole, dtype=np.uint8)
        return table, arr

    @staticmethod
    def _within(whole: np.ndarray, part: np.ndarray) -> int | None:
        """Where ``part`` begins inside ``whole`` (both byte arrays), or None if it lies elsewhere."""
        if part.size == 0:
            return 0
        a, b = whole.__array_interface__["data"][0], part.__array_interface__["data"][0]
        if a <= b and b + part.size <= a + whole.size:
            return int(b - a)
        return None

    @staticmethod
    def _value_dtype(pa: Any, t: Any, path: str, column: str) -> np.dtype:
        """What a record of the column type ``t`` holds, or a ValueError if ``t`` is not one taken."""
        if (
            pa.types.is_binary(t)
            or pa.types.is_string(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_large_string(t)
        ):
            return np.dtype(np.uint8)
        if pa.types.is_fixed_size_binary(t):
            return np.dtype(np.uint8)
        inner = (
            t.value_type
            if (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t))
            else t
        )
        if _fixed_width(pa, inner) is not None:
            return np.dtype(inner.to_pandas_dtype())
        raise ValueError(
            f"Argument 'column' must name a binary, string, number or list-of-numbers column: "
            f"{column!r} of {path} is {t}"
        )

    @staticmethod
    def _spans(pa: Any, chunk: Any, where: str) -> tuple[Any, np.ndarray, np.ndarray]:
        """The data buffer of one chunk of the column, and each row's start and size in it (bytes)."""
        t, n, off = chunk.type, len(chunk), chunk.offset
        if (
            pa.types.is_binary(t)
            or pa.types.is_string(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_large_string(t)
        ):
            _, obuf, data = chunk.buffers()
            odt = np.int64 if (pa.types.is_large_binary(t) or pa.types.is_large_string(t)) else np.int32
            o = np.frombuffer(obuf, dtype=odt)[off : off + n + 1].astype(np.int64)
            return data, o[:-1], np.diff(o)
        if pa.types.is_fixed_size_binary(t):
            w = int(t.byte_width)
            return chunk.buffers()[1], (np.arange(n, dtype=np.int64) + off) * w, np.full(n, w, dtype=np.int64)
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            values = chunk.values
            if values.null_count:
                raise ValueError(
                    f"Argument 'paths' must hold no nulls: {where} holds null values inside its lists"
                )
            vw = _fixed_width(pa, values.type)
            assert vw is not None
            if pa.types.is_fixed_size_list(t):
                o = (np.arange(n + 1, dtype=np.int64) + off) * int(t.list_size)
            else:
                o = np.asarray(chunk.offsets).astype(np.int64)
            o = (o + values.offset) * vw
            return values.buffers()[1], o[:-1], np.diff(o)
        nw = _fixed_width(pa, t)
        assert nw is not None
        return chunk.buffers()[1], (np.arange(n, dtype=np.int64) + off) * nw, np.full(n, nw, dtype=np.int64)

    def __repr__(self) -> str:
        return (
            f"ArrowRecords(N={len(self)}, column={self.column!r}, type={self.type}, files={len(self.paths)})"
        )

    def values(self, i: int) -> np.ndarray:
        """Record ``i`` as :attr:`value_dtype` values (a read-only view of the map)."""
        return self.decoder()(self.view(i))

    def decoder(self) -> ArrowValues:
        """A record's bytes to its values, as :meth:`values` (a loader's ``decode``)."""
        return ArrowValues(self.value_dtype.str)

    def row(self, i: int) -> dict[str, Any]:
        """Every column of row ``i``, as Python values (pyarrow's ``to_pylist``)."""
        from .base import check_index

        i = check_index(i, len(self))
        f = int(np.searchsorted(self._rows, i, side="right")) - 1
        row: dict[str, Any] = self.tables[f].slice(i - int(self._rows[f]), 1).to_pylist()[0]
        return row


@dataclass(frozen=True)
class ArrowValues:
    """An Arrow record's bytes as values of its column's type (a view, no copy): the sample a
    loader's or the PyTorch dataset's ``decode`` makes of a record (:meth:`ArrowRecords.decoder`);
    picklable, for the DataLoader's workers.

    Examples
    --------
    >>> ArrowValues("<i4")(np.arange(8, dtype=np.uint8)).tolist()
    [50462976, 117835012]
    """

    dtype: str

    def __call__(self, record: np.ndarray) -> np.ndarray:
        return record.view(np.dtype(self.dtype))


def _column_of(table: Any, column: str | None, path: str) -> str:
    """The column of records of ``table`` (read from ``path``): ``column``, or its only column."""
    if column is None:
        if table.num_columns != 1:
            raise ValueError(
                f"Argument 'column' must name the column of records: {path} has {table.column_names}"
            )
        return str(table.column_names[0])
    if column not in table.column_names:
        raise ValueError(
            f"Argument 'column' must name a column of {path}: {column!r} is not in {table.column_names}"
        )
    return column


def _check_nonempty(sizes: np.ndarray, row0: int, column: str, path: str) -> None:
    """Refuse, naming the row, a record of 0 bytes among ``sizes`` (rows from ``row0`` of ``path``)."""
    if sizes.shape[0] and int(sizes.min()) < 1:
        j = row0 + int(np.argmin(sizes))
        raise ValueError(
            f"Argument 'paths' must hold records of at least 1 byte: row {j} of {column!r} in {path} is empty"
        )
