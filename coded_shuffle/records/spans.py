"""Records as spans of byte buffers: the index (buffer, start, size) every file format reduces to.

A format's reader indexes its files once (where each record starts, how long it is) and keeps
the files memory-mapped; :class:`SpanRecords` then serves the interface from that index alone: a
view is a slice of a map, a gather copies the spans into rows (a compiled loop), and the table is
a view of the map when the records lie end to end at one size in one buffer, else made once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .base import check_ids, check_index, check_out

__all__ = ["SpanRecords", "map_file"]


def map_file(path: str | os.PathLike[str]) -> np.ndarray:
    """The file ``path`` memory-mapped read-only as a ``uint8`` :class:`numpy.memmap` (empty files too).

    Raises ``OSError`` if it cannot be opened.
    """
    path = os.fspath(path)
    if os.path.getsize(path) == 0:  # mmap refuses empty files: an empty map, named all the same
        empty = np.zeros(0, dtype=np.uint8)
        empty.flags.writeable = False
        return empty
    return np.memmap(path, dtype=np.uint8, mode="r")


def _plain(buf: np.ndarray) -> np.ndarray:
    """``buf`` as a plain read-only one-dimensional ``uint8`` ndarray over the same memory."""
    out = buf.view(np.ndarray) if isinstance(buf, np.memmap) else buf.view()
    out.flags.writeable = False
    return out


class SpanRecords:
    """Records as spans of byte buffers: record ``i`` is ``buffers[where[i]][starts[i]:][:sizes[i]]``.

    The base of the file formats' sources (token files, files, MDS shards, WebDataset tars, Arrow
    columns), usable on its own over any buffers. A view is a slice of its buffer (no copy); a
    gather copies the spans into zero-padded rows; :meth:`table` is a view of the buffer when the
    records lie end to end, all of one size, in one buffer (a token file, one MDS shard of fixed
    columns, files of one size read into one buffer), else every record gathered once.

    Parameters
    ----------
    buffers : sequence of numpy.ndarray
        One-dimensional ``uint8`` arrays (memory maps): where the records lie.
    starts, sizes : array_like of int
        Each record's first byte in its buffer and its length in bytes (at least 1).
    where : array_like of int, optional
        Each record's buffer (all in ``buffers[0]`` when omitted).
    name : str
        The argument named by the errors.

    Examples
    --------
    >>> import numpy as np
    >>> buf = np.frombuffer(b"abcdefgh", dtype=np.uint8)
    >>> src = SpanRecords([buf], starts=[0, 3, 4], sizes=[3, 1, 4])
    >>> len(src), src.record_bytes, src.width, src.view(2).tobytes()
    (3, None, 4, b'efgh')
    >>> src.gather([1, 0]).tolist()
    [[100, 0, 0, 0], [97, 98, 99, 0]]
    >>> np.shares_memory(src.view(0), buf)
    True
    """

    def __init__(
        self,
        buffers: Sequence[np.ndarray],
        *,
        starts: object,
        sizes: object,
        where: object = None,
        name: str = "source",
    ) -> None:
        self._init_spans(buffers, starts, sizes, where, name)

    def _init_spans(
        self, buffers: Sequence[np.ndarray], starts: object, sizes: object, where: object, name: str
    ) -> None:
        bufs = [np.asanyarray(b) for b in buffers]
        if not bufs or any(b.dtype != np.uint8 or b.ndim != 1 for b in bufs):
            raise ValueError(f"Argument {name!r} must be spans of one-dimensional uint8 buffers.")
        st = np.asarray(starts, dtype=np.int64).reshape(-1)
        sz = np.asarray(sizes, dtype=np.int64).reshape(-1)
        wh = np.zeros(st.shape[0], dtype=np.int32) if where is None else np.asarray(where, dtype=np.int32)
        if not (st.shape == sz.shape == wh.shape):
            raise ValueError(f"Argument {name!r} must give one start, size and buffer a record.")
        if st.shape[0] == 0:
            raise ValueError(f"Argument {name!r} must hold at least 1 record, not 0.")
        if int(sz.min()) < 1:
            raise ValueError(f"Argument {name!r} must have records of at least 1 byte, not {int(sz.min())}.")
        ends = np.array([b.shape[0] for b in bufs], dtype=np.int64)
        if int(wh.min()) < 0 or int(wh.max()) >= len(bufs):
            raise ValueError(f"Argument {name!r} must name buffers in [0, {len(bufs)}).")
        if int(st.min()) < 0 or bool(np.any(st + sz > ends[wh])):
            raise ValueError(f"Argument {name!r} must have spans inside their buffers.")
        self._maps = tuple(bufs)
        self._bufs = tuple(_plain(b) for b in bufs)
        self._starts, self._sizes, self._where = st, sz, wh
        for a in (st, sz, wh):
            a.flags.writeable = False
        self._N = int(st.shape[0])
        lo, hi = int(sz.min()), int(sz.max())
        self._B: int | None = lo if lo == hi else None
        self._W = hi
        self._table: np.ndarray | None = None
        if self._B is not None and int(wh.min()) == int(wh.max()):
            step = np.arange(self._N, dtype=np.int64) * self._B + int(st[0])
            if np.array_equal(st, step):  # end to end in one buffer: the table is a view
                b = self._bufs[int(wh[0])]
                self._table = b[int(st[0]) : int(st[0]) + self._N * self._B].reshape(self._N, self._B)

    @property
    def maps(self) -> tuple[np.ndarray, ...]:
        """The buffers the records lie in (the files' memory maps), as given."""
        return self._maps

    def __len__(self) -> int:
        return self._N

    @property
    def record_bytes(self) -> int | None:
        """Bytes of every record, or ``None`` when the sizes differ."""
        return self._B

    @property
    def width(self) -> int:
        """Bytes of the widest record."""
        return self._W

    @property
    def sizes(self) -> np.ndarray:
        """Bytes of each record (read-only ``int64``)."""
        return self._sizes

    def view(self, i: int) -> np.ndarray:
        """Record ``i``: a read-only ``uint8`` slice of its buffer (a view, not a copy)."""
        i = check_index(i, self._N)
        s = int(self._starts[i])
        return self._bufs[int(self._where[i])][s : s + int(self._sizes[i])]

    def gather(self, ids: object, out: np.ndarray | None = None) -> np.ndarray:
        """The records ``ids`` as ``(len(ids), width)`` ``uint8`` rows, zero-padded, into ``out`` if given."""
        idx = check_ids(ids, self._N)
        n = int(idx.shape[0])
        if out is not None:
            out = check_out(out, n, self._W)
        if self._table is not None:
            if out is None:
                return np.take(self._table, idx, axis=0, mode="clip")
            return np.take(self._table, idx, axis=0, out=out, mode="clip")
        if out is None:
            out = np.empty((n, self._W), dtype=np.uint8)
        if n == 0:
            return out
        from .._codec_kernels import take_spans as take  # compiled; imported on first use

        starts, sizes = self._starts[idx], self._sizes[idx]
        if len(self._bufs) == 1:
            take(out, np.arange(n, dtype=np.int64), self._bufs[0], starts, sizes)
            return out
        where = self._where[idx]
        order = np.argsort(where, kind="stable")  # the rows of each buffer together: one call a buffer
        cuts = [0, *(np.flatnonzero(np.diff(where[order])) + 1).tolist(), n]
        for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
            rows = order[lo:hi]
            take(out, rows, self._bufs[int(where[rows[0]])], starts[rows], sizes[rows])
        return out

    def table(self) -> np.ndarray:
        """Every record as one read-only ``(N, width)`` ``uint8`` array: a view of the buffer when
        the records lie end to end at one size in one buffer, else gathered once (a copy)."""
        if self._table is None:
            table = self.gather(np.arange(self._N))
            table.flags.writeable = False
            self._table = table
        return self._table


def shard_paths(source: object, *, suffix: str, files: str, one: str) -> list[str]:
    """The files of ``source``: one path, a directory's files ending in ``suffix`` (sorted), or a
    sequence of paths; ``files`` and ``one`` name them in the refusals (``".tar shards"``,
    ``".tar shard"``).

    Examples
    --------
    >>> shard_paths(["a.tar", "b.tar"], suffix=".tar", files=".tar shards", one=".tar shard")
    ['a.tar', 'b.tar']
    """
    if isinstance(source, (str, os.PathLike)):
        p = os.fspath(source)
        if os.path.isdir(p):
            found = sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(suffix))
            if not found:
                raise ValueError(f"Argument 'paths' must name {files}: {p} holds none")
            return found
        return [p]
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        out = []
        for p in source:
            if not isinstance(p, (str, os.PathLike)):
                raise TypeError(f"Argument 'paths' must list paths, not {type(p).__name__}.")
            out.append(os.fspath(p))
        if not out:
            raise ValueError(f"Argument 'paths' must list at least 1 {one}, not 0.")
        return out
    raise TypeError(f"Argument 'paths' must be a path or a sequence of paths, not {type(source).__name__}.")
