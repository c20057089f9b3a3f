"""Shared helpers of the codec: read-only views, aligned buffers, the compiled kernels and their
second thread."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from .._threads import _POOL, cores, run_pieces  # noqa: F401 (_POOL: the tests look at it)

#: Jobs of at least this many bytes run on two threads, in pieces of about _PIECE_BYTES.
_TWO_THREADS_BYTES = 1 << 20
_PIECE_BYTES = 1 << 20
#: Alignment of the codec's large buffers.
_ALIGN = 4096
#: Largest payload of one frame made by :func:`encode_plan` unless told otherwise.


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
    from .. import _codec_kernels

    return _codec_kernels


_TWO_CORES = cores() >= 2


def _halves(kernel: Callable[..., Any], args: tuple, lo: int, hi: int, nbytes: int) -> None:
    """Run ``kernel(*args, lo, hi)``; with two cores and a large job, on two threads.

    The range is cut into pieces of about 1 MiB of work (at most 16) that both threads take in
    turn, so a thread the scheduler holds back leaves its share to the other. The kernels release
    the GIL and write disjoint rows for disjoint ranges.
    """
    if hi - lo < 2 or nbytes < _TWO_THREADS_BYTES or not _TWO_CORES:
        kernel(*args, lo, hi)
        return
    n = min(16, hi - lo, max(2, nbytes // _PIECE_BYTES))
    cuts = [lo + (hi - lo) * q // n for q in range(n + 1)]
    pieces = list(zip(cuts[:-1], cuts[1:], strict=True))
    run_pieces(lambda slot, p_lo, p_hi: kernel(*args, p_lo, p_hi), pieces, threads=True)


def _aligned_empty(nbytes: int, *, lead: int = 0) -> np.ndarray:
    """A ``uint8`` buffer of ``nbytes`` whose byte ``lead`` sits on a 4096-byte boundary.

    All large buffers of the codec share this alignment: row copies between buffers whose
    offsets differ by a few bytes below a page multiple run several times slower (4K aliasing).
    """
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    off = (-(raw.ctypes.data + lead)) % _ALIGN
    return raw[off : off + nbytes]


def _aligned_zeros(nbytes: int) -> np.ndarray:
    """:func:`_aligned_empty`, zero: a large one's pages come zero from the system when first
    written (``calloc``), so the zeros cost nothing a new buffer's first write does not."""
    raw = np.zeros(nbytes + _ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    return raw[off : off + nbytes]


def _aligned_rows(n: int, width: int) -> np.ndarray:
    return _aligned_empty(n * width).reshape(n, width)


#: :func:`_lookup` indexes a table of every id up to the largest held when it is at most this
#: many times the ids held and looked up (one pass of writes, then one read an id), instead of a
#: binary search an id (``log2`` of the ids held, each a likely cache miss).
_DENSE_LOOKUP_FACTOR = 8


class _Index:
    """Positions of ids in the increasing ids ``sorted_ids`` (``-1`` if absent), asked many times.

    With ``table`` (and ids that start at 0 or more), a dense table of every id up to the largest
    is built once; otherwise each question is a binary search.
    """

    def __init__(self, sorted_ids: np.ndarray, *, table: bool) -> None:
        self.sorted_ids = sorted_ids
        self.table: np.ndarray | None = None
        if table and sorted_ids.size and int(sorted_ids[0]) >= 0:
            self.table = np.full(int(sorted_ids[-1]) + 1, -1, dtype=np.int64)
            self.table[sorted_ids] = np.arange(sorted_ids.size)

    @staticmethod
    def dense(sorted_ids: np.ndarray, asked: int) -> bool:
        """Whether a table pays for ``asked`` ids looked up (:data:`_DENSE_LOOKUP_FACTOR`)."""
        top = int(sorted_ids[-1]) + 1 if sorted_ids.size else 0
        return top <= _DENSE_LOOKUP_FACTOR * (sorted_ids.size + asked)

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        if self.sorted_ids.size == 0:
            return np.full(ids.shape, -1, dtype=np.int64)
        if self.table is not None:
            top = self.table.size
            inside = (ids >= 0) & (ids < top)
            return np.where(inside, self.table[np.where(inside, ids, 0)], -1)
        pos = np.minimum(np.searchsorted(self.sorted_ids, ids), self.sorted_ids.size - 1)
        return np.where(self.sorted_ids[pos] == ids, pos, -1)


def _lookup(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Position of each of ``ids`` in ``sorted_ids``, ``-1`` if absent."""
    return _Index(sorted_ids, table=ids.size > 1024 and _Index.dense(sorted_ids, ids.size))(ids)


def _frame_cuts(
    n: int, width: int, max_frame_bytes: int, payload: np.ndarray | None = None, *, empty: bool = False
) -> list[tuple[int, int]]:
    """The frames ``[(lo, hi), ...]`` of ``n`` symbols in order, each at most ``max_frame_bytes``
    of payload and at least one symbol: each symbol ``width`` bytes, or ``payload[s]`` (records
    of many sizes, each symbol as long as its longest record), cut greedily. ``empty``: one frame
    ``(0, 0)`` when ``n`` is 0 (a delivery of no symbol still says its epoch), else none.

    Examples
    --------
    >>> _frame_cuts(5, 4, 8)
    [(0, 2), (2, 4), (4, 5)]
    >>> _frame_cuts(5, 4, 8, np.array([3, 3, 9, 1, 1]))
    [(0, 2), (2, 3), (3, 5)]
    """
    if n == 0:
        return [(0, 0)] if empty else []
    if payload is None:
        per = max(1, max_frame_bytes // max(1, width))
        return [(lo, min(n, lo + per)) for lo in range(0, n, per)]
    cum = np.cumsum(np.asarray(payload, dtype=np.int64))
    cuts, lo = [], 0
    while lo < n:
        base = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, base + max_frame_bytes, side="right")))
        cuts.append((lo, min(hi, n)))
        lo = hi
    return cuts
