"""A worker's solving of many-term symbols (wire format 5; 3, 4 before), frame by frame as they come.

:class:`TermsDecoder` takes the frames of one delivery in order. The first symbol of one unknown
term that the worker wants gives that row: these symbols are chosen from the ids alone, then
solved by one compiled pass straight from the frame's payloads, each row checksummed while it is
hot. The symbols of two unknown terms or more wait for the last frame (:meth:`~TermsDecoder.finish`):
with the symbols of one unknown they need, they are solved by GF(2) elimination
(:func:`coded_shuffle._gf2.solve_gf2`), block by block. A worker that feeds each frame as it
arrives has only that elimination, and the last frame, left after the delivery.
:func:`decode_terms` is the decoder given a whole delivery at once; both give the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._checks import check_int
from .._gf2 import solve_gf2
from ..errors import DecodeError
from ._common import _aligned_rows, _halves, _i64, _Index, _kernels, _lookup, _ro
from ._out import _output_rows
from .decode import DecodeResult, _need_ids, _parsed_frame
from .records import Cache, _checksum_rows, _word_keys
from .terms import _xor_rows, term_blocks
from .wire import FLAG_VARIABLE, Frame, _unpacked, symbol_lengths

__all__ = ["TermsDecoder", "decode_terms", "keep_rows"]

#: A frame's payload rows of a worker's symbols from the first on: ``(first, payload, rows)``, the
#: symbol ``first + i`` being ``payload[rows[i]]``.
Chunk = tuple[int, np.ndarray, np.ndarray]


def _addressed_terms(frame: Frame, worker: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets, terms, rows)`` of the symbols of ``frame`` addressed to ``worker``, in order:
    their terms, and the row of each in the frame's payload (which stays where it is)."""
    assert frame.offsets is not None and frame.terms is not None
    runs = frame.runs
    if runs.shape[0]:
        lo, hi = np.searchsorted(runs[:, 0], [worker, worker + 1])
        spans = runs[lo:hi, 1:].tolist()
    else:
        spans = [[0, frame.n_symbols]]
    rows = np.concatenate([np.arange(x, x + n, dtype=np.int64) for x, n in spans] + [np.zeros(0, np.int64)])
    counts = np.diff(frame.offsets)[rows]
    off = np.zeros(rows.size + 1, dtype=np.int64)
    np.cumsum(counts, out=off[1:])
    terms = frame.terms[_term_positions(frame.offsets, rows)] if rows.size else np.zeros(0, np.int64)
    return off, terms.astype(np.int64, copy=False), rows


def _chunk_rows(chunks: list[Chunk], symbols: np.ndarray, width: int) -> np.ndarray:
    """The payload rows of ``symbols`` (increasing) gathered from ``chunks``."""
    out = np.empty((symbols.size, width), dtype=np.uint8)
    starts = np.array([c[0] for c in chunks], dtype=np.int64)
    which = np.searchsorted(starts, symbols, side="right") - 1
    for q in np.unique(which).tolist():
        at = np.flatnonzero(which == q)
        first, payload, rows = chunks[q]
        out[at] = payload[rows[symbols[at] - first]]
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
    cache.take(pos[held], out=out, at=np.flatnonzero(held))
    return held


class TermsDecoder:
    """A worker's decoding of one delivery of many-term symbols, fed frame by frame.

    ``cache``, ``need``, ``worker``, ``epoch``, ``checksums``, ``out``, ``kept`` and ``lengths``
    are those of :func:`decode_terms`. :meth:`add` solves what a frame gives at once; :meth:`finish` solves
    the rest and returns the :class:`~coded_shuffle.codec.DecodeResult`. The frames' payloads
    must stay as they are until then (the elimination reads them).

    Examples
    --------
    >>> from coded_shuffle.codec import encode_terms, load_dataset
    >>> ds = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> dec = TermsDecoder(ds.cache([0]), need=[0, 1, 2], worker=0, checksums=ds.checksums)
    >>> for f in encode_terms(ds, [0, 2, 4], [0, 1, 1, 2], epoch=1, max_frame_bytes=2):
    ...     dec.add(f)  # x0 + x1 gives x1 now, x1 + x2 then x2
    >>> res = dec.finish()
    >>> res.decoded.tolist(), res.ok
    ([1, 2], True)
    """

    def __init__(
        self,
        cache: Cache,
        *,
        need: object,
        worker: int,
        epoch: int | None = None,
        checksums: np.ndarray | None = None,
        out: np.ndarray | None = None,
        kept: bool = False,
        lengths: np.ndarray | None = None,
    ) -> None:
        if not isinstance(cache, Cache):
            raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
        if (cache.lengths is None) != (lengths is None):
            raise ValueError(
                "Argument 'lengths' (every row's length, by id) must be given exactly when the cache "
                "holds rows of many sizes."
            )
        self.lengths = None if lengths is None else np.asarray(lengths, dtype=np.int64)
        self.worker = check_int(worker, "worker", minimum=0)
        self.cache, self.epoch, self.checksums = cache, epoch, checksums
        self.width = cache.width
        self.ids = ids = _need_ids(need, checksums)
        self.new = _output_rows(out, ids.size, self.width, cache)
        if kept and out is None:
            raise ValueError("Argument 'kept' needs 'out', the buffer keep_rows filled.")
        self._in_cache = _Index(cache.ids, table=_Index.dense(cache.ids, ids.size))
        self._in_need = _Index(ids, table=_Index.dense(ids, ids.size))
        self.held = self._in_cache(ids) >= 0 if kept else keep_rows(cache, ids, self.new)
        self._data = _ro(cache.data)
        self.done = np.zeros(ids.size, dtype=np.uint8)
        self.sums = np.zeros(ids.size, dtype=np.uint64)
        self._keys = _word_keys(max(1, -(-self.width // 8)))
        self._parts: list[tuple[np.ndarray, ...]] = []  # offsets, terms, where, target, multi
        self._chunks: list[Chunk] = []
        self.frames = self.symbols = self.steps = 0
        self._result: DecodeResult | None = None

    def add(self, frame: object) -> None:
        """Solve what ``frame`` (a frame's bytes, or a parsed :class:`Frame`) gives at once.

        Raises :class:`~coded_shuffle.errors.DecodeError` for a frame that does not parse or is
        not of many-term symbols of the cache's width, naming it by its place in the delivery.
        """
        if self._result is not None:
            raise ValueError("This TermsDecoder has finished: make a new one for the next delivery.")
        self.frames += 1  # a refused frame keeps its place
        f = _parsed_frame(
            frame, self.frames - 1, worker=self.worker, epoch=self.epoch, width=self.width,
            variable=False, terms=True,
        )  # fmt: skip
        payload = self._payload(f)
        if self.held.all():
            return
        offsets, terms, rows = _addressed_terms(f, self.worker)
        if self.lengths is not None:  # the addressed payloads, unpacked zero-padded, in order
            assert f.offsets is not None and f.terms is not None
            plen = symbol_lengths(f.offsets, f.terms, self.lengths)
            payload = _unpacked(payload, plen, self.width, rows)
            rows = np.arange(rows.size, dtype=np.int64)
        n = offsets.size - 1
        where = _i64(self._in_cache(terms))
        target = _i64(np.where(where < 0, self._in_need(terms), -1))
        multi = np.zeros(n, dtype=np.uint8)
        pick = np.empty(n, dtype=np.int64)
        kern, offsets = _kernels(), _i64(offsets)
        self.steps += int(kern.direct_pick(pick, self.done, offsets, where, target, multi))
        args = (self.new, self.sums, self._keys, _ro(payload), rows, offsets, where, pick, self._data)
        _halves(kern.direct_rows, args, 0, n, n * self.width)
        self._parts.append((offsets, terms, where, target, multi))
        self._chunks.append((self.symbols, payload, rows))
        self.symbols += n

    def _payload(self, f: Frame) -> np.ndarray:
        """The frame's payload: its rows, or (rows of many sizes) its packed bytes, checked
        against the lengths of the table; a frame of the other kind is refused."""
        variable = bool(f.flags & FLAG_VARIABLE)
        if variable != (self.lengths is not None):
            raise DecodeError(
                f"Worker {self.worker}: frame {self.frames - 1} does not match the cache's record layout."
            )
        if self.lengths is None:
            return f.payload
        assert f.packed is not None and f.offsets is not None and f.terms is not None
        if f.terms.size and int(f.terms.max()) >= self.lengths.shape[0]:
            raise DecodeError(
                f"Worker {self.worker}: frame {self.frames - 1} names a row beyond the table of lengths."
            )
        plen = symbol_lengths(f.offsets, f.terms, self.lengths)
        if int(plen.sum()) != int(f.packed.shape[0]) or (plen.size and int(plen.max()) > self.width):
            raise DecodeError(
                f"Worker {self.worker}: frame {self.frames - 1}: payload of {f.packed.shape[0]} bytes, "
                f"the rows' lengths say {int(plen.sum())}."
            )
        return f.packed

    def finish(self) -> DecodeResult:
        """Solve the symbols of several unknown terms, check every solved row; the result."""
        if self._result is None:
            if any(p[4].any() for p in self._parts):
                self._eliminate_rest()
            self._result = self._checked()
        return self._result

    def _eliminate_rest(self) -> None:
        shift = np.cumsum([0] + [p[0][-1] for p in self._parts])
        offsets = np.concatenate([[0]] + [p[0][1:] + s for p, s in zip(self._parts, shift, strict=False)])
        terms, where, target, multi = (np.concatenate([p[i] for p in self._parts]) for i in range(1, 5))
        late = _solve_rest(
            self.new, self.ids, self.cache, offsets, terms, self._chunks, where, target, self.done, multi
        )
        self.steps += int(sum(c.size for _, c in late))
        if late:
            rows = np.array([r for r, _ in late], dtype=np.int64)
            self.sums[rows] = _checksum_rows(self.new, None, rows)

    def _checked(self) -> DecodeResult:
        ids, new, solved = self.ids, self.new, self.done.astype(bool)
        lost = ~self.held & ~solved
        if lost.any():
            new[lost] = 0
        missing, decoded = ids[lost], ids[solved]
        bad = np.empty(0, np.int64)
        lens = None if self.lengths is None else self.lengths[ids]
        if lens is not None and decoded.size:  # a row's checksum counts its length: again, cut
            rows = np.flatnonzero(solved)
            self.sums[solved] = _checksum_rows(new, lens[solved], rows)
            short = rows[lens[rows] < self.width]  # zero past the length, whatever a symbol held there
            if short.size:
                new[short] *= (np.arange(self.width)[None, :] < lens[short, None]).astype(np.uint8)
        if self.checksums is not None and decoded.size:  # each row was checksummed as it was written
            bad = decoded[self.sums[solved] != np.asarray(self.checksums)[decoded]]
        return DecodeResult(
            worker=self.worker,
            cache=Cache(ids=ids, data=new, lengths=lens),
            decoded=decoded,
            bad=bad,
            missing=missing,
            steps=self.steps,
            rounds=1,
            verified=int(decoded.size) if self.checksums is not None else 0,
        )


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
    lengths: np.ndarray | None = None,
) -> DecodeResult:
    """Rebuild the rows ``need`` of a worker from its ``cache`` and frames of many-term symbols.

    A row of ``need`` held in ``cache`` is copied; the others are solved from the symbols
    addressed to ``worker`` (:mod:`coded_shuffle.codec.terms`) and, with ``checksums`` (indexed
    by row id), checked. ``out`` is an optional buffer of the new rows, as in
    :func:`~coded_shuffle.codec.decode_worker`; with ``kept``, it already holds the rows of
    ``need`` that ``cache`` holds (:func:`keep_rows`, called before the frames came). Rows of
    many sizes (a cache with ``lengths``, frames with ``FLAG_VARIABLE``): ``lengths`` is every row's length,
    indexed by id (part of the job, as ``checksums``), which gives each payload's length and each
    new row's. The same as a :class:`TermsDecoder` fed every frame.

    Examples
    --------
    Rows 0, 1, 2; the worker holds row 0 and receives ``x0 + x1`` and ``x1 + x2``:

    >>> from coded_shuffle.codec import encode_terms, load_dataset
    >>> ds = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2))
    >>> frames = encode_terms(ds, [0, 2, 4], [0, 1, 1, 2], epoch=1)
    >>> res = decode_terms(ds.cache([0]), frames, need=[0, 2], worker=0, checksums=ds.checksums)
    >>> res.cache.data.tolist(), res.decoded.tolist(), res.ok
    ([[0, 1], [4, 5]], [2], True)
    """
    if isinstance(frames, (bytes, bytearray, np.ndarray, Frame)) or not isinstance(frames, Sequence):
        raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
    dec = TermsDecoder(
        cache, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out, kept=kept, lengths=lengths
    )
    for f in frames:
        dec.add(f)
    return dec.finish()
