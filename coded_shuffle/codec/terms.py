"""Symbols of many terms: each the XOR of any set of rows, framed (wire format version 3) and solved.

The plans of excess storage (:mod:`coded_shuffle.storage`) send XORs of up to ``t + 2`` pieces,
and their chains and rounds sums of those. Here a row is a piece: ``dataset`` holds one row per
piece, a worker's :class:`~coded_shuffle.codec.Cache` the pieces it stores. A symbol is given by
its terms; :func:`encode_terms` frames them, addressed to the workers that want a term of their
*block* (the symbols linked by shared terms, which a worker may need all of to solve any), and
:func:`decode_terms` lets a worker take the known terms out of every symbol addressed to it and
solve what is left over GF(2) (:func:`coded_shuffle._gf2.solve_gf2`), block by block. Every
decoded row is checked against its checksum, as a decoded record is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_int, check_int_array
from .._gf2 import solve_gf2
from ._common import _NO_RUNS, _aligned_empty, _aligned_rows, _halves, _i64, _kernels, _lookup, _ro
from .decode import DecodeResult, _need_ids, _output_rows, _parsed_frames
from .encode import _clip_runs, _write_header
from .records import Cache, Dataset, _checksum_rows, _word_keys
from .wire import (
    _RUN_DTYPE,
    DEFAULT_MAX_FRAME_BYTES,
    FLAG_REPAIR,
    FLAG_TERMS,
    FLAG_WIDE_IDS,
    FRAME_HEADER_BYTES,
    RUN_BYTES,
    Frame,
    _layout,
    _term_bytes,
)

__all__ = ["encode_terms", "decode_terms", "keep_rows", "term_blocks"]

#: The payload rows of a worker's symbols from the first on: ``(first, rows)``.
Chunk = tuple[int, np.ndarray]


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
    """``(order, runs)``: symbols sorted by the receivers of their block, and the receiver index."""
    n = offsets.size - 1
    block = term_blocks(offsets, terms)
    sym = np.repeat(np.arange(n), np.diff(offsets))
    receivers = np.zeros(int(block.max(initial=-1)) + 1, dtype=np.uint64)
    np.bitwise_or.at(receivers, block[sym], np.uint64(1) << wanter.astype(np.uint64))
    key = receivers[block]
    order = np.lexsort((np.arange(n), block, key))
    addressed = ((key[order][None, :] >> np.arange(K, dtype=np.uint64)[:, None]) & np.uint64(1)).astype(bool)
    rows = []
    for w in range(K):
        edge = np.diff(np.concatenate([[False], addressed[w], [False]]).astype(np.int8))
        first, end = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
        rows.append(np.stack([np.full(first.size, w), first, end - first], axis=1))
    runs = np.concatenate(rows).astype(np.int64) if rows else _NO_RUNS
    return order, runs


def _pack_terms(
    dataset: Dataset, offsets: np.ndarray, terms: np.ndarray, symbol: np.ndarray, runs: np.ndarray, *,
    epoch: int, repair: bool,
) -> np.ndarray:  # fmt: skip
    """One frame of many-term symbols (docs/wire-format.md, version 3)."""
    n, width = offsets.size - 1, dataset.record_bytes
    flags = FLAG_TERMS | (FLAG_REPAIR if repair else 0)
    if int(max(terms.max(initial=0), symbol.max(initial=0))) >= 0xFFFFFFFF:
        flags |= FLAG_WIDE_IDS
    edt, start = _layout(n, flags, runs.shape[0], terms.size)
    buf = _aligned_empty(start + n * width, lead=start)
    buf[:start] = 0
    at = FRAME_HEADER_BYTES + n * edt.itemsize
    entries = buf[FRAME_HEADER_BYTES:at].view(edt)
    entries["symbol"] = symbol
    entries["n_terms"] = np.diff(offsets)
    tb = _term_bytes(flags)
    buf[at : at + terms.size * tb].view("<u8" if tb == 8 else "<u4")[:] = terms
    at += terms.size * tb
    if runs.shape[0]:
        table = buf[at : at + runs.shape[0] * RUN_BYTES].view(_RUN_DTYPE)
        table["worker"], table["first"], table["count"] = runs[:, 0], runs[:, 1], runs[:, 2]
    if n:
        _xor_rows(buf[start:].reshape(n, width), None, offsets, terms, dataset.data)
    _write_header(
        buf, start, flags=flags, epoch=epoch, n=n, width=width, payload_bytes=n * width, n_runs=runs.shape[0]
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
        One row per piece (fixed width).
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
    if dataset.variable:
        raise ValueError("Argument 'dataset' must have rows of one width: many-term symbols have no lengths.")
    epoch = check_int(epoch, "epoch", minimum=0, maximum=2**64 - 1)
    max_frame_bytes = check_int(max_frame_bytes, "max_frame_bytes", minimum=dataset.record_bytes)
    off, ids = _check_terms(offsets, terms, dataset.N)
    n = off.size - 1
    order, runs = np.arange(n), _NO_RUNS
    if wanter is not None:
        K = check_int(K, "K", minimum=1, maximum=64)
        who = check_int_array(wanter, "wanter", ndim=1).astype(np.int64)
        if who.shape != ids.shape or (who.size and (int(who.min()) < 0 or int(who.max()) >= K)):
            raise ValueError(f"Argument 'wanter' must hold one worker in [0, {K}) per term.")
        order, runs = _addressing(off, ids, who, K)
    n_terms = np.diff(off)[order]
    new_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(n_terms, out=new_off[1:])
    picks = np.repeat(off[:-1][order] - new_off[:-1], n_terms) + np.arange(ids.size)
    ids = ids[picks]
    per = max(1, max_frame_bytes // dataset.record_bytes)
    frames = []
    for lo in range(0, max(n, 1), per):
        hi = min(n, lo + per)
        part = new_off[lo : hi + 1] - new_off[lo]
        frames.append(
            _pack_terms(
                dataset, part, ids[new_off[lo] : new_off[hi]], order[lo:hi],
                runs if n <= per else _clip_runs(runs, lo, hi), epoch=epoch, repair=repair,
            )
        )  # fmt: skip
    return frames


def _addressed_terms(frames: list[Frame], worker: int) -> tuple[np.ndarray, np.ndarray, list[Chunk]]:
    """``(offsets, terms, chunks)`` of the symbols of ``frames`` addressed to ``worker``, in order.

    The payloads stay where the frames hold them: ``chunks`` are ``(first, rows)``, the payload
    rows of the symbols from ``first`` on, one run of a frame each.
    """
    counts, terms, chunks = [], [], []
    n = 0
    for f in frames:
        assert f.offsets is not None and f.terms is not None
        runs = f.runs
        if runs.shape[0]:
            lo, hi = np.searchsorted(runs[:, 0], [worker, worker + 1])
            spans = runs[lo:hi, 1:].tolist()
        else:
            spans = [[0, f.n_symbols]]
        for first, count in spans:
            x, y = first, first + count
            counts.append(np.diff(f.offsets[x : y + 1]))
            terms.append(f.terms[f.offsets[x] : f.offsets[y]])
            chunks.append((n, f.payload[x:y]))
            n += count
    if not counts:
        return np.zeros(1, np.int64), np.empty(0, np.int64), []
    n_terms = np.concatenate(counts)
    off = np.zeros(n_terms.size + 1, dtype=np.int64)
    np.cumsum(n_terms, out=off[1:])
    return off, np.concatenate(terms), chunks


def _chunk_rows(chunks: list[Chunk], symbols: np.ndarray, width: int) -> np.ndarray:
    """The payload rows of ``symbols`` (increasing) gathered from ``chunks``."""
    out = np.empty((symbols.size, width), dtype=np.uint8)
    starts = np.array([c[0] for c in chunks], dtype=np.int64)
    which = np.searchsorted(starts, symbols, side="right") - 1
    for q in np.unique(which).tolist():
        at = np.flatnonzero(which == q)
        out[at] = chunks[q][1][symbols[at] - chunks[q][0]]
    return out


#: Equations a worker solves in one elimination without splitting them into blocks first.
_ONE_BLOCK_ROWS = 64


def _term_positions(offsets: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions in the term table of the terms of the symbols ``rows``, in order."""
    counts = np.diff(offsets)[rows]
    starts = np.cumsum(counts) - counts
    return np.repeat(offsets[:-1][rows] - starts, counts) + np.arange(int(counts.sum()))


def _eliminate(
    offsets: np.ndarray, terms: np.ndarray, unknown: np.ndarray, rows: np.ndarray, rest: np.ndarray
) -> tuple[list[int], list[np.ndarray]]:
    """The ids of ``rest`` the symbols ``rows`` determine by GF(2) elimination, block by block.

    ``unknown`` flags the terms the worker does not hold. Returns the ids solved and, for each,
    the symbols whose residuals XOR to it.
    """
    counts = np.diff(offsets)[rows]
    starts = offsets[:-1][rows]
    at = (
        np.repeat(starts, counts)
        + np.arange(int(counts.sum()))
        - np.repeat(np.cumsum(counts) - counts, counts)
    )
    keep = unknown[at]
    sub_terms = terms[at][keep]
    sub_counts = np.add.reduceat(keep.astype(np.int64), np.cumsum(counts) - counts) if rows.size else counts
    sub_off = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(sub_counts, out=sub_off[1:])
    by_block: dict[int, list[int]] = {}
    if rows.size <= _ONE_BLOCK_ROWS:  # a few equations: one elimination, no search for blocks
        by_block[0] = list(range(rows.size))
    else:
        block = term_blocks(sub_off, sub_terms)
        live = np.isin(sub_terms, rest)
        touched = np.isin(block, np.unique(block[np.repeat(np.arange(rows.size), sub_counts)[live]]))
        for q in np.flatnonzero(touched).tolist():
            by_block.setdefault(int(block[q]), []).append(q)
    rest_set = set(rest.tolist())
    found: list[int] = []
    combos: list[np.ndarray] = []
    for members in by_block.values():
        local: dict[int, int] = {}
        eqs = []
        for q in members:
            m = 0
            for x in sub_terms[sub_off[q] : sub_off[q + 1]].tolist():
                m ^= 1 << local.setdefault(x, len(local))
            eqs.append(m)
        back = {u: x for x, u in local.items()}
        for u, c in solve_gf2(eqs).items():
            if back[u] in rest_set:
                found.append(back[u])
                combos.append(rows[[members[i] for i in range(c.bit_length()) if c >> i & 1]])
    return found, combos


def _solve(
    new: np.ndarray,
    ids: np.ndarray,
    cache: Cache,
    offsets: np.ndarray,
    terms: np.ndarray,
    chunks: list[Chunk],
) -> tuple[np.ndarray, np.ndarray, int]:
    """Write into ``new`` (rows of ``ids``) every row the symbols determine; return which, their
    checksums (zero elsewhere) and the steps.

    The symbols with one unknown term are chosen first, then solved by one compiled pass over
    each chunk of payloads (on two threads for a large one), each row checksummed as it is
    written; the symbols with more, and those of one unknown that they hold, are then solved by
    elimination, block by block (:func:`_solve_rest`).
    """
    kern = _kernels()
    where = _i64(_lookup(cache.ids, terms))
    target = np.where(where < 0, _lookup(ids, terms), -1)
    n = offsets.size - 1
    done = np.zeros(ids.size, dtype=np.uint8)
    multi = np.zeros(n, dtype=np.uint8)
    pick = np.empty(n, dtype=np.int64)
    steps = int(kern.direct_pick(pick, done, _i64(offsets), where, _i64(target), multi))
    data, width = _ro(cache.data), new.shape[1]
    sums = np.zeros(ids.size, dtype=np.uint64)
    keys = _word_keys(max(1, -(-width // 8)))
    for first, rows in chunks:
        args = (new, sums, keys, _ro(rows), first, _i64(offsets), where, pick, data)
        _halves(kern.direct_rows, args, first, first + rows.shape[0], rows.shape[0] * width)
    if multi.any():
        late = _solve_rest(new, ids, cache, offsets, terms, chunks, where, target, done, multi)
        steps += int(sum(c.size for _, c in late))
        if late:
            rows_late = np.array([r for r, _ in late], dtype=np.int64)
            sums[rows_late] = _checksum_rows(new, None, rows_late)
    return done.astype(bool), sums, steps


def _solve_rest(
    new: np.ndarray,
    ids: np.ndarray,
    cache: Cache,
    offsets: np.ndarray,
    terms: np.ndarray,
    chunks: list[Chunk],
    where: np.ndarray,
    target: np.ndarray,
    done: np.ndarray,
    multi: np.ndarray,
) -> list[tuple[int, np.ndarray]]:
    """The rows left after the direct pass, solved by elimination into ``new`` (and set in
    ``done``); returns each row written with the symbols whose residuals XOR to it."""
    unknown = where < 0
    multi_rows = np.flatnonzero(multi)
    inner = np.unique(terms[(at := _term_positions(offsets, multi_rows))][unknown[at]])
    # the symbols of one unknown term that the others hold, and the ids still wanted
    single = np.flatnonzero(unknown & np.isin(terms, inner))
    sym = np.searchsorted(offsets, single, side="right") - 1
    rows = np.union1d(multi_rows, sym)
    at = _term_positions(offsets, rows)
    tg = target[at]
    rest = np.unique(terms[at][(tg >= 0) & (done[np.maximum(tg, 0)] == 0)])
    if not rest.size:
        return []
    found, combos = _eliminate(offsets, terms, unknown, rows, rest)
    late: list[tuple[int, np.ndarray]] = []
    if found:  # the residuals of the symbols the eliminations use, and their sums
        used = np.unique(np.concatenate(combos))
        at = _term_positions(offsets, used)
        sub_off = np.concatenate([[0], np.cumsum(np.diff(offsets)[used])])
        residual = _aligned_rows(used.size, new.shape[1])
        _xor_rows(residual, _chunk_rows(chunks, used, new.shape[1]), sub_off, where[at], cache.data)
        for x, c in zip(found, combos, strict=True):
            r = int(np.searchsorted(ids, x))
            new[r] = np.bitwise_xor.reduce(residual[np.searchsorted(used, c)], axis=0)
            done[r] = 1
            late.append((r, c))
    return late


def keep_rows(cache: Cache, need: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Copy into ``out`` (one row per id of ``need``, increasing) the rows ``cache`` holds; return
    which ids they were. A worker can do this before the delivery: it needs none of the frames.

    Examples
    --------
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> out = np.zeros((2, 2), np.uint8)
    >>> keep_rows(ds.cache([0, 1]), np.array([1, 2]), out).tolist(), out.tolist()
    ([True, False], [[2, 3], [0, 0]])
    """
    pos = _lookup(cache.ids, np.asarray(need, dtype=np.int64))
    held = pos >= 0
    _move(out, np.flatnonzero(held), cache.data, pos[held])
    return held


def decode_terms(
    cache: Cache,
    frames: Sequence[Any],
    *,
    need: object,
    worker: int,
    epoch: int | None = None,
    checksums: np.ndarray | None = None,
    out: np.ndarray | None = None,
    kept: bool = False,
) -> DecodeResult:
    """Rebuild the rows ``need`` of a worker from its ``cache`` and frames of many-term symbols.

    A row of ``need`` held in ``cache`` is copied; the others are solved from the symbols
    addressed to ``worker`` (module docstring) and, with ``checksums`` (indexed by row id),
    checked. ``out`` is an optional buffer of the new rows, as in
    :func:`~coded_shuffle.codec.decode_worker`; with ``kept``, it already holds the rows of
    ``need`` that ``cache`` holds (:func:`keep_rows`, called before the frames came).

    Examples
    --------
    Rows 0, 1, 2; the worker holds row 0 and receives ``x0 + x1`` and ``x1 + x2``:

    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> frames = encode_terms(ds, [0, 2, 4], [0, 1, 1, 2], epoch=1)
    >>> res = decode_terms(ds.cache([0]), frames, need=[0, 2], worker=0, checksums=ds.checksums)
    >>> res.cache.data.tolist(), res.decoded.tolist(), res.ok
    ([[0, 1], [4, 5]], [2], True)
    """
    if not isinstance(cache, Cache):
        raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
    if cache.lengths is not None:
        raise ValueError("Argument 'cache' must hold rows of one width: many-term symbols have no lengths.")
    worker = check_int(worker, "worker", minimum=0)
    width = int(cache.data.shape[1])
    ids = _need_ids(need, checksums)
    parsed = _parsed_frames(frames, worker=worker, epoch=epoch, width=width, variable=False, terms=True)
    new = _output_rows(out, ids.size, width, cache)
    if kept and out is None:
        raise ValueError("Argument 'kept' needs 'out', the buffer keep_rows filled.")
    held = _lookup(cache.ids, ids) >= 0 if kept else keep_rows(cache, ids, new)
    solved, sums, steps = np.zeros(ids.size, dtype=bool), np.zeros(ids.size, dtype=np.uint64), 0
    if not held.all() and parsed:
        offsets, terms, chunks = _addressed_terms(parsed, worker)
        solved, sums, steps = _solve(new, ids, cache, offsets, terms, chunks)
    lost = ~held & ~solved
    new[lost] = 0
    missing, decoded = ids[lost], ids[solved]
    bad = np.empty(0, np.int64)
    if checksums is not None and decoded.size:  # each solved row was checksummed as it was written
        bad = decoded[sums[solved] != np.asarray(checksums)[decoded]]
    return DecodeResult(
        worker=worker,
        cache=Cache(ids=ids, data=new, lengths=None),
        decoded=decoded,
        bad=bad,
        missing=missing,
        steps=steps,
        rounds=1,
        verified=int(decoded.size) if checksums is not None else 0,
    )
