"""Symbols of many terms: each the XOR of any set of rows, framed (wire format version 5) and solved.

The plans of excess storage (:mod:`coded_shuffle.storage`) send XORs of up to ``t + 2`` pieces,
and their chains and rounds sums of those. Here a row is a piece: ``dataset`` holds one row per
piece, a worker's :class:`~coded_shuffle.codec.Cache` the pieces it stores. A symbol is given by
its terms; :func:`encode_terms` frames them, addressed to the workers that want a term of their
*block* (the symbols linked by shared terms, which a worker may need all of to solve any), and
:func:`~coded_shuffle.codec.decode_terms` (:mod:`.solve`, frame by frame) lets a worker take the
known terms out of every symbol addressed to it and solve what is left over GF(2)
(:func:`coded_shuffle._gf2.solve_gf2`), block by block. Every decoded row is checked against its
checksum, as a decoded record is.
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int, check_int_array
from ._common import _NO_RUNS, _aligned_empty, _frame_cuts, _halves, _i64, _kernels, _ro
from .encode import _clip_runs, _write_header
from .records import Dataset
from .table import TABLE_HEAD_BYTES, packed_framing, table_widths, write_table
from .wire import (
    _RUN_DTYPE,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_REPAIR,
    FLAG_TERMS,
    FLAG_VARIABLE,
    FRAME_HEADER_BYTES,
    RUN_BYTES,
    symbol_lengths,
)

__all__ = ["encode_terms", "term_blocks"]


def _check_terms(offsets: object, terms: object, n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    off = check_int_array(offsets, "offsets", ndim=1).astype(np.int64)
    ids = check_int_array(terms, "terms", ndim=1).astype(np.int64)
    if off.size < 1 or int(off[0]) != 0 or int(off[-1]) != ids.size or np.any(np.diff(off) < 1):
        raise ValueError(
            "Argument 'offsets' must start at 0, end at len(terms) and increase: every symbol has a term."
        )
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n_rows):
        raise ValueError(f"Argument 'terms' must hold row ids in [0, {n_rows}).")
    return off, ids


_NO_BASE = np.zeros((0, 1), dtype=np.uint8)
_NO_BASE.flags.writeable = False


def _xor_rows(
    out: np.ndarray, base: np.ndarray | None, offsets: np.ndarray, rows: np.ndarray, data: np.ndarray
) -> None:
    """``out[s] = base[s] ^ XOR of data[rows[i]]`` over the terms ``i`` of ``s`` with ``rows[i] >= 0``.

    Compiled (:func:`coded_shuffle._codec_kernels.xor_terms`), on two threads for large jobs.
    """
    n = offsets.size - 1
    if n == 0:
        return
    b = _NO_BASE if base is None else _ro(base)
    args = (out, b, _i64(offsets), _i64(rows), _ro(data))
    _halves(_kernels().xor_terms, args, 0, n, n * out.shape[1])


def _move(out: np.ndarray, dst: np.ndarray, data: np.ndarray, src: np.ndarray) -> None:
    """``out[dst] = data[src]``, compiled, on two threads for large jobs."""
    if dst.size:
        args = (out, _i64(dst), _ro(data), _i64(src))
        _halves(_kernels().move_rows, args, 0, int(dst.size), int(dst.size) * out.shape[1])


def term_blocks(offsets: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """The block of each symbol: symbols that share a term, directly or through others, share one.

    Examples
    --------
    >>> term_blocks(np.array([0, 2, 3, 4]), np.array([5, 6, 6, 9])).tolist()
    [0, 0, 1]
    """
    n = offsets.size - 1
    if n == 0:
        return np.empty(0, dtype=np.int64)
    sym = np.repeat(np.arange(n), np.diff(offsets))
    uniq, col = np.unique(terms, return_inverse=True)
    m = n + uniq.size
    from scipy.sparse import coo_matrix  # scipy is loaded where a decoding needs it
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(sym.size, np.int8), (sym, n + col)), shape=(m, m))
    _, label = connected_components(graph, directed=False)
    return np.unique(label[:n], return_inverse=True)[1].astype(np.int64)


def _addressing(
    offsets: np.ndarray, terms: np.ndarray, wanter: np.ndarray, K: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(order, runs)``: symbols sorted by the receivers of their block (a set of workers, in
    words of 64: worker ``w`` is bit ``w % 64`` of word ``w // 64``, the highest word first), and
    the receiver index."""
    n = offsets.size - 1
    block = term_blocks(offsets, terms)
    sym = np.repeat(np.arange(n), np.diff(offsets))
    receivers = np.zeros((int(block.max(initial=-1)) + 1, -(-K // 64)), dtype=np.uint64)
    np.bitwise_or.at(receivers, (block[sym], wanter // 64), np.uint64(1) << (wanter % 64).astype(np.uint64))
    key = receivers[block]
    order = np.lexsort((np.arange(n), block, *key.T))
    key = key[order]
    rows = []
    for w in range(K):
        addressed = ((key[:, w // 64] >> np.uint64(w % 64)) & np.uint64(1)).astype(bool)
        edge = np.diff(np.concatenate([[False], addressed, [False]]).astype(np.int8))
        first, end = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
        rows.append(np.stack([np.full(first.size, w), first, end - first], axis=1))
    runs = np.concatenate(rows).astype(np.int64) if rows else _NO_RUNS
    return order, runs


def _pack_terms(
    dataset: Dataset, offsets: np.ndarray, terms: np.ndarray, runs: np.ndarray, *, epoch: int, repair: bool,
) -> np.ndarray:  # fmt: skip
    """One frame of many-term symbols (docs/wire-format.md, version 5: its term table packed at
    the fewest bits; with rows of many sizes, each payload cut to its longest term and packed)."""
    n, width = offsets.size - 1, dataset.record_bytes
    flags = FLAG_TERMS | (FLAG_REPAIR if repair else 0) | (FLAG_VARIABLE if dataset.variable else 0)
    counts = np.diff(offsets)
    if terms.size > 0xFFFFFFFF:
        raise ValueError(f"Argument 'terms' must hold at most 2**32 - 1 terms a frame, not {terms.size}.")
    start = packed_framing(n, runs.shape[0], terms.size, *table_widths(counts, terms))
    plen = None if dataset.lengths is None else symbol_lengths(offsets, terms, dataset.lengths)
    payload_bytes = n * width if plen is None else int(plen.sum())
    buf = _aligned_empty(start + payload_bytes, lead=start)
    buf[:start] = 0
    if runs.shape[0]:
        at = FRAME_HEADER_BYTES + TABLE_HEAD_BYTES
        table = buf[at : at + runs.shape[0] * RUN_BYTES].view(_RUN_DTYPE)
        table["worker"], table["first"], table["count"] = runs[:, 0], runs[:, 1], runs[:, 2]
    write_table(buf, counts, terms, runs.shape[0])
    if n and plen is None:
        _xor_rows(buf[start:].reshape(n, width), None, offsets, terms, dataset.data)
    elif n:  # the zero-padded XOR of each symbol's rows, cut to its longest row, end to end
        assert plen is not None
        rows = np.empty((n, width), dtype=np.uint8)
        _xor_rows(rows, None, offsets, terms, dataset.data)
        buf[start:] = rows[np.arange(width)[None, :] < plen[:, None]]
    _write_header(
        buf,
        start,
        flags=flags,
        epoch=epoch,
        n=n,
        width=width,
        payload_bytes=payload_bytes,
        n_runs=runs.shape[0],
    )
    return buf


def encode_terms(
    dataset: Dataset,
    offsets: object,
    terms: object,
    *,
    epoch: int,
    wanter: object = None,
    K: int | None = None,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    repair: bool = False,
) -> list[np.ndarray]:
    """Frames of the symbols ``XOR of dataset rows terms[offsets[s]:offsets[s + 1]]``.

    Parameters
    ----------
    dataset : Dataset
        One row per piece. Rows of many sizes (``dataset.lengths``, zero-padded rows) make frames
        with ``FLAG_VARIABLE``: each payload as long as its symbol's longest row, packed end to end; a
        reader takes the rows' lengths from its own table (docs/wire-format.md).
    offsets, terms : array_like
        The terms of each symbol (CSR: ``offsets`` of length ``n + 1``, from 0 to ``len(terms)``).
    epoch : int
        Written in every header.
    wanter : array_like, optional
        With ``K``: the worker that wants each term (one entry per entry of ``terms``). The
        symbols are then addressed by block (module docstring) and kept together by their
        receivers; without it every symbol is addressed to every worker.
    max_frame_bytes : int
        Payload bytes of a frame, at least one row.
    repair : bool
        Flag the frames as repairs.

    Examples
    --------
    >>> from coded_shuffle.codec import load_dataset, parse_frame
    >>> ds = load_dataset(np.eye(3, dtype=np.uint8))
    >>> f = parse_frame(encode_terms(ds, [0, 3], [0, 1, 2], epoch=1)[0])
    >>> f.terms.tolist(), f.payload.tolist()
    ([0, 1, 2], [[1, 1, 1]])
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=2**64 - 1)
    max_frame_bytes = check_int(max_frame_bytes, "max_frame_bytes", minimum=dataset.record_bytes)
    off, ids = _check_terms(offsets, terms, dataset.N)
    n = off.size - 1
    order, runs = np.arange(n), _NO_RUNS
    if wanter is not None:
        K = check_int(K, "K", minimum=1)
        who = check_int_array(wanter, "wanter", ndim=1).astype(np.int64)
        if who.shape != ids.shape or (who.size and (int(who.min()) < 0 or int(who.max()) >= K)):
            raise ValueError(f"Argument 'wanter' must hold one worker in [0, {K}) per term.")
        order, runs = _addressing(off, ids, who, K)
    n_terms = np.diff(off)[order]
    new_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_terms, out=new_off[1:])
    picks = np.repeat(off[:-1][order] - new_off[:-1], n_terms) + np.arange(ids.size)
    ids = ids[picks]
    payload = None if dataset.lengths is None else symbol_lengths(new_off, ids, dataset.lengths)
    cuts = _frame_cuts(n, dataset.record_bytes, max_frame_bytes, payload, empty=True)
    frames = []
    for lo, hi in cuts:
        part = new_off[lo : hi + 1] - new_off[lo]
        mine = runs if len(cuts) == 1 else _clip_runs(runs, lo, hi)
        frames.append(
            _pack_terms(dataset, part, ids[new_off[lo] : new_off[hi]], mine, epoch=epoch, repair=repair)
        )
    return frames
