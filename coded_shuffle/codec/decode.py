"""Decoding: a worker rebuilds its next batch from its cache and the frames addressed to it."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._checks import check_int, check_int_array
from ..errors import DecodeError, IntegrityError
from ._common import (
    _EMPTY_I64,
    _aligned_rows,
    _halves,
    _i64,
    _kernels,
    _readonly,
    _ro,
)
from ._out import _packed_out, _zeroed_rows
from .records import Cache, _checksum_rows, _word_keys
from .wire import Frame, _parse, _unpacked


@dataclass(frozen=True, eq=False)
class DecodeResult:
    """What a worker rebuilt from its cache and the frames it received.

    Attributes
    ----------
    worker : int
        The worker.
    cache : Cache
        Its new records, one per id of ``need`` (rows of ``missing`` ids are zero).
    decoded : numpy.ndarray
        Ids recovered from symbols (the others of ``need`` came from the old cache).
    bad : numpy.ndarray
        Decoded ids whose checksum did not match (empty when no checksums were given).
    missing : numpy.ndarray
        Ids of ``need`` neither held nor decodable.
    steps : int
        XOR steps done, transit points of peeled cycles included.
    rounds : int
        Peeling rounds (1 without cycles; a cycle of ``l`` workers needs up to ``l - 1``).
    verified : int
        Number of decoded records checked against their checksum.

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> ds = load_dataset(np.eye(2, dtype=np.uint8))
    >>> frame = encode_plan_arrays(ds, [0], [1], epoch=1)
    >>> res = decode_worker(ds.cache([0]), [frame], need=[1], worker=0, checksums=ds.checksums)
    >>> res.cache.data.tolist(), res.ok
    ([[0, 1]], True)
    """

    worker: int
    cache: Cache
    decoded: np.ndarray
    bad: np.ndarray
    missing: np.ndarray
    steps: int
    rounds: int
    verified: int

    @property
    def ok(self) -> bool:
        """Whether every needed record is present and passed its check."""
        return not (self.bad.size or self.missing.size)

    @property
    def failed(self) -> np.ndarray:
        """Ids to re-send: ``bad`` and ``missing`` together, increasing."""
        return np.union1d(self.bad, self.missing)


def _merge_frames(frames: list[Frame]) -> Frame:
    """The frames as one, without a receiver index (every symbol addressed to every worker)."""
    if len(frames) == 1:
        return frames[0]
    f0 = frames[0]
    variable = f0.len_a is not None

    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(f, name) for f in frames])

    return Frame(
        epoch=f0.epoch,
        flags=f0.flags,
        record_bytes=f0.record_bytes,
        symbol=cat("symbol"),
        a=cat("a"),
        b=cat("b"),
        len_a=cat("len_a") if variable else None,
        len_b=cat("len_b") if variable else None,
        payload=cat("payload"),
        wire_bytes=sum(f.wire_bytes for f in frames),
    )


def _addressed(frame: Frame, worker: int) -> list[tuple[int, int]] | None:
    """The runs ``(first, end)`` of the entries of ``frame`` addressed to ``worker`` (None: all)."""
    runs = frame.runs
    if runs.shape[0] == 0:
        return None
    lo, hi = np.searchsorted(runs[:, 0], [worker, worker + 1])
    return [(x, x + c) for x, c in runs[lo:hi, 1:].tolist()]


def _symbols_of(frames: list[Frame], worker: int) -> tuple:
    """``(a, b, len_a, len_b, payload, spans, pick)``: the entries addressed to ``worker``.

    They are the entries ``s`` in ``[first, end)`` for each row ``(first, end)`` of ``spans``,
    whose payload row is ``payload[s]``. One frame is used in place (its runs addressed to
    ``worker``, or all of it); of several frames the addressed entries are gathered into one.
    ``pick(name)`` gives any other per-entry attribute of the frames, indexed like ``a``.
    """
    spans = [_addressed(f, worker) for f in frames]
    if len(frames) == 1 and frames[0].packed is None:
        f = frames[0]
        span = np.array(spans[0] if spans[0] is not None else [(0, f.n_symbols)], dtype=np.int64)
        return f.a, f.b, f.len_a, f.len_b, f.payload, span.reshape(-1, 2), lambda name: getattr(f, name)

    def pick(name: str) -> Any:
        if name == "payload":
            return _payload_rows(frames, spans)
        cols = [getattr(f, name) for f in frames]
        if cols[0] is None:
            return None
        parts = [c if sp is None else [c[x:y] for x, y in sp] for c, sp in zip(cols, spans, strict=True)]
        flat = [p for part in parts for p in (part if isinstance(part, list) else [part])]
        return np.concatenate(flat) if flat else cols[0][:0]

    a, b, len_a, len_b, payload = (pick(name) for name in ("a", "b", "len_a", "len_b", "payload"))
    return a, b, len_a, len_b, payload, np.array([[0, a.shape[0]]], dtype=np.int64), pick


def _payload_at(frame: Frame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(address, length, buffer)`` of every payload row of ``frame``: row ``s`` is the
    ``length[s]`` bytes at ``address[s]`` in ``buffer`` (the packed payloads as received, each
    its ``max(len_a, len_b)``; or the padded rows, each the full width), zeros past them."""
    if frame.packed is not None:
        assert frame.len_a is not None and frame.len_b is not None  # packed only with lengths
        buf = _ro(frame.packed)
        addr, plen = _kernels().packed_rows(_i64(frame.len_a), _i64(frame.len_b), buf.ctypes.data)
        return _ro(addr), _ro(plen), buf
    buf = _ro(frame.payload)
    plen = np.full(frame.n_symbols, frame.record_bytes, dtype=np.int64)
    starts = np.arange(frame.n_symbols, dtype=np.int64) * frame.record_bytes
    return _ro(starts + buf.ctypes.data), _ro(plen), buf


def _symbols_at(frames: list[Frame], worker: int) -> tuple:
    """``(a, b, len_a, len_b, paddr, plen, spans, pick, buffers)``: :func:`_symbols_of`, the payload
    rows given by address and length (:func:`_payload_at`), read where they are: no row is copied.
    ``buffers`` holds the frames' payloads while the addresses are used."""
    spans = [_addressed(f, worker) for f in frames]
    at = [_payload_at(f) for f in frames]
    buffers = [x[2] for x in at]
    if len(frames) == 1:
        f = frames[0]
        span = np.array(spans[0] if spans[0] is not None else [(0, f.n_symbols)], dtype=np.int64)
        pick1 = lambda name: getattr(f, name)  # noqa: E731
        return f.a, f.b, f.len_a, f.len_b, at[0][0], at[0][1], span.reshape(-1, 2), pick1, buffers

    def pick(name: str) -> Any:
        own = {"paddr": 0, "plen": 1}.get(name)
        cols = [getattr(f, name) for f in frames] if own is None else [x[own] for x in at]
        if cols[0] is None:
            return None
        parts = [c if sp is None else [c[x:y] for x, y in sp] for c, sp in zip(cols, spans, strict=True)]
        flat = [p for part in parts for p in (part if isinstance(part, list) else [part])]
        return np.concatenate(flat) if flat else cols[0][:0]

    a, b, len_a, len_b, paddr, plen = (pick(n) for n in ("a", "b", "len_a", "len_b", "paddr", "plen"))
    span = np.array([[0, a.shape[0]]], dtype=np.int64)
    return a, b, len_a, len_b, _i64(paddr), _i64(plen), span, pick, buffers


def _payload_rows(frames: list[Frame], spans: list[list[tuple[int, int]] | None]) -> np.ndarray:
    """The payload rows of the entries ``spans`` of each frame (all of a frame for None), one
    after the other; a frame whose payloads are packed has those entries alone unpacked."""
    whole = [[(0, f.n_symbols)] for f in frames]
    picks = [
        np.concatenate([*(np.arange(x, y) for x, y in (w if sp is None else sp)), _EMPTY_I64])
        for w, sp in zip(whole, spans, strict=True)
    ]
    out = np.empty((sum(p.size for p in picks), frames[0].record_bytes), dtype=np.uint8)
    at = 0
    for f, rows in zip(frames, picks, strict=True):  # each frame's rows straight into ``out``
        if f.packed is None:
            np.take(f.payload, rows, axis=0, out=out[at : at + rows.size])
        else:
            assert f.len_a is not None and f.len_b is not None  # packed only with lengths
            plen = np.maximum(f.len_a, f.len_b)
            _unpacked(f.packed, plen, f.record_bytes, rows, out=out[at : at + rows.size])
        at += rows.size
    return out


#: Largest decode workspace a thread keeps between calls.
_KEEP_WORKSPACE_BYTES = 1 << 27

_WORKSPACE = threading.local()


def _workspace(M: int, S: int, n_need: int) -> tuple[np.ndarray, ...]:
    """Tables for :func:`coded_shuffle._codec_kernels.peel_ops`: ``M`` ids, ``S`` symbols.

    A worker decodes every epoch with about the same sizes, so each thread keeps its tables
    (up to :data:`_KEEP_WORKSPACE_BYTES`): touching fresh memory costs a page fault every
    4 KiB, several times the cost of the peel itself. They grow, never shrink.
    """
    have = getattr(_WORKSPACE, "tables", None)
    need_m, need_s, need_o = M, max(S, 1), n_need + S
    if have is not None:
        sizes = (have[0].shape[0], have[3].shape[1], have[4].shape[1])
        if sizes[0] >= need_m and sizes[1] >= need_s and sizes[2] >= need_o:
            return have
        need_m, need_s, need_o = max(need_m, sizes[0]), max(need_s, sizes[1]), max(need_o, sizes[2])
    tables = (
        np.empty(need_m, dtype=np.uint8),
        np.empty((2, need_m), dtype=np.int64),
        np.empty((2, (need_m >> 6) + 1, 2), dtype=np.uint64),
        np.empty((6, need_s), dtype=np.int64),
        np.empty((4, need_o), dtype=np.int64),
    )
    if sum(t.nbytes for t in tables) <= _KEEP_WORKSPACE_BYTES:
        _WORKSPACE.tables = tables
    return tables


class Peel(NamedTuple):
    """What :func:`coded_shuffle._codec_kernels.peel_ops` returns, by name (its docstring says
    what each is): the row operations, the state of every need row, and the steps of the peel."""

    psym: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    oplen: np.ndarray
    bounds: np.ndarray
    n_transit: int
    out_len: np.ndarray
    state: np.ndarray
    lone: np.ndarray
    sym: np.ndarray
    kn: np.ndarray
    new: np.ndarray
    rnd: np.ndarray
    n_rounds: int
    decoded: np.ndarray
    missing: np.ndarray


def _peel_ops(
    a: np.ndarray,
    b: np.ndarray,
    cache_ids: np.ndarray,
    need_ids: np.ndarray,
    cache_len: np.ndarray | None = None,
    len_a: np.ndarray | None = None,
    len_b: np.ndarray | None = None,
    *,
    spans: np.ndarray | None = None,
) -> Peel:
    """:func:`coded_shuffle._codec_kernels.peel_ops` for any id range, as a :class:`Peel`.

    The kernel indexes its tables by id; ids spread far beyond their number (64-bit ids) are
    first numbered densely, and ``kn``, ``new``, ``decoded`` and ``missing`` mapped back. The
    symbols peeled are ``s`` in ``[first, end)`` for each row of ``spans`` (None: all).
    """
    a = _i64(a)
    b = _i64(b)
    cache_ids = _i64(cache_ids)
    need_ids = _i64(need_ids)
    S = a.shape[0]
    span = np.array([[0, S]], dtype=np.int64) if spans is None else spans
    first, end = _i64(span[:, 0]), _i64(span[:, 1])
    n_sym = int((end - first).sum())
    extra = (_i64(cache_len), _i64(len_a), _i64(len_b))
    top = max(
        int(_kernels().spans_max(a, b, first, end)),
        int(cache_ids[-1]) if cache_ids.size else -1,
        int(need_ids[-1]) if need_ids.size else -1,
    )
    n_ids = 2 * n_sym + cache_ids.shape[0] + need_ids.shape[0]
    if top < 4 * n_ids + (1 << 16):
        M = top + 1
        tables = _workspace(M, n_sym, need_ids.size)
        return Peel(*_kernels().peel_ops(a, b, first, end, cache_ids, need_ids, M, *extra, *tables))
    coded = b >= 0
    uniq, inv = np.unique(np.concatenate([a, b[coded], cache_ids, need_ids]), return_inverse=True)
    n_b, n_c = int(coded.sum()), cache_ids.shape[0]
    cb = np.full(S, -1, dtype=np.int64)
    cb[coded] = inv[S : S + n_b]
    da, db, dc, dn = (_i64(x) for x in (inv[:S], cb, inv[S + n_b : S + n_b + n_c], inv[S + n_b + n_c :]))
    tables = _workspace(uniq.size, n_sym, need_ids.size)
    res = Peel(*_kernels().peel_ops(da, db, first, end, dc, dn, uniq.size, *extra, *tables))
    return res._replace(
        kn=uniq[res.kn], new=uniq[res.new], decoded=uniq[res.decoded], missing=uniq[res.missing]
    )


def _peel(
    a: np.ndarray, b: np.ndarray, cache_ids: np.ndarray, need_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """The symbolic peel of one worker: ``(lone, sym, kn, new, rnd, n_rounds)`` (see :func:`_peel_ops`)."""
    p = _peel_ops(a, b, cache_ids, need_ids)
    return p.lone.copy(), p.sym.copy(), p.kn.copy(), p.new.copy(), p.rnd.copy(), int(p.n_rounds)


def decode_worker(
    cache: Cache,
    frames: Sequence[object],
    *,
    need: object,
    worker: int,
    epoch: int | None = None,
    checksums: np.ndarray | None = None,
    strict: bool = False,
    out: np.ndarray | None = None,
    out_lengths: object = None,
) -> DecodeResult:
    """Rebuild a worker's next batch from its cache and the frames it received.

    The worker reads the symbols addressed to it by each frame's receiver index (every symbol of
    a frame without one). They are peeled in rounds: round 1 decodes every symbol with one point
    in the cache, and
    round ``r + 1`` every symbol with one point recovered in round ``r`` (the chain of a leftover
    cycle). The peel is first run on the ids alone (one compiled pass); only the steps that lead to
    a needed point are then done on bytes, round by round, by a compiled loop that XORs each
    payload row with the row it needs straight into its row of ``out``. The bytes are those of
    the plain row-by-row computation (``tests/codec/test_codec.py`` checks them against it).

    Parameters
    ----------
    cache : Cache
        The worker's records of epoch ``t``.
    frames : sequence of bytes-like, numpy.ndarray or Frame
        The frames received (all symbols of the transition, or those meant for the worker).
        Of a frame with a receiver index, only the entries addressed to ``worker`` are read.
    need : array_like
        Ids of the worker's batch of epoch ``t + 1``.
    worker : int
        The worker's number: it selects the entries of an indexed frame, and names the worker in
        messages.
    epoch : int, optional
        Expected epoch of the frames.
    checksums : numpy.ndarray, optional
        The load-time checksum of every record (indexed by id); each decoded record is checked.
    strict : bool
        Raise instead of reporting ``missing`` and ``bad`` ids.
    out : numpy.ndarray, optional
        A C-contiguous ``(len(need), B)`` ``uint8`` buffer for the new records, not overlapping
        the cache (a worker double-buffers its caches: epoch ``t - 1``'s buffer holds ``t + 1``);
        of a packed cache (:class:`Cache`), whose new records are packed too, a 1-D one of at
        least their bytes.
    out_lengths : array_like, optional
        With records of many sizes in rows and ``out``: for each row of ``out``, the length past which
        it is zero (the lengths of the records the recycled buffer held). A new record's row is
        then zeroed only from its end up to that, instead of to the width; without it, to the
        width. (A buffer made here starts zero, so no row is zeroed past its record.)

    Returns
    -------
    DecodeResult

    Raises
    ------
    DecodeError
        A frame is malformed; or, with ``strict``, a needed point cannot be decoded (the message
        names the symbol and the worker).
    IntegrityError
        With ``strict``, a decoded record fails its checksum.

    Examples
    --------
    Example 1 of Attia and Tandon (2016): worker 0 peels the chain of the leftover cycle.

    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan, load_dataset
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> ds = load_dataset(np.arange(15 * 4, dtype=np.uint8).reshape(15, 4))
    >>> frames = encode_plan(plan, ds, epoch=1)
    >>> old = ds.cache(plan.placement_t.batch(0))
    >>> res = decode_worker(old, frames, need=plan.placement_t1.batch(0), worker=0)
    >>> bool(np.array_equal(res.cache.data, ds.data[plan.placement_t1.batch(0)])), res.rounds
    (True, 2)
    """
    if not isinstance(cache, Cache):
        raise TypeError(f"Argument 'cache' must be a Cache, not {type(cache).__name__}.")
    worker = check_int(worker, "worker", minimum=0)
    need_ids = _need_ids(need, checksums)
    width = cache.width
    parsed = _parsed_frames(
        frames, worker=worker, epoch=epoch, width=width, variable=cache.lengths is not None
    )
    empty = np.empty(0, np.int64)
    at: tuple | None = None  # variable records: the payload rows by address, read in place
    payload = np.empty((0, width), np.uint8)
    if parsed and cache.lengths is not None:
        a, b, len_a, len_b, paddr, plen, spans, pick, buffers = _symbols_at(parsed, worker)
        at = (paddr, plen, buffers)
    elif parsed:
        a, b, len_a, len_b, payload, spans, pick = _symbols_of(parsed, worker)
    else:
        a, b, len_a, len_b, pick = empty, empty, None, None, lambda name: empty
        spans = np.empty((0, 2), np.int64)
        at = (empty, empty, []) if cache.lengths is not None else None
    rows_out = None if cache.is_packed else _zeroed_rows(out, need_ids.shape[0], width, cache, out_lengths)
    # ---- peel on ids, then one row operation per new record and per transit point ----------
    peel = _peel_ops(a, b, cache.ids, need_ids, cache.lengths, len_a, len_b, spans=spans)
    out_len = None if cache.lengths is None else _readonly(peel.out_len)
    if rows_out is None:
        packed = _packed_out(out, int(peel.out_len.sum()), cache, out_lengths)
        new_cache = Cache.packed(_readonly(need_ids), packed, _readonly(peel.out_len), width)
        zeroed = _EMPTY_I64
    else:
        new_cache = Cache(ids=_readonly(need_ids), data=rows_out[0], lengths=out_len)
        zeroed = rows_out[1]
    state, lone = peel.state, peel.lone
    new, n_rounds, decoded, missing = peel.new, peel.n_rounds, peel.decoded, peel.missing
    # ---- bytes: round by round, straight into the new cache (transit points aside) ----------
    sums = _apply(peel, new_cache, cache, payload, at, zeroed, check=checksums is not None)
    if strict and missing.size:
        _raise_missing(int(missing[0]), worker, a, b, spans, pick)
    bad, verified = empty, 0
    if checksums is not None and decoded.size:
        rows_d = np.flatnonzero(state == 1)
        if sums is not None:
            got = sums[rows_d]
        else:
            got = _checksum_rows(new_cache.buffer, None if out_len is None else out_len[rows_d], rows_d)
        bad = decoded[got != np.asarray(checksums)[decoded]]
        verified = int(decoded.size)
        if strict and bad.size:
            raise IntegrityError(
                f"Worker {worker}: decoded point {int(bad[0])} fails its checksum"
                + (f" ({bad.size} points in all)." if bad.size > 1 else ".")
            )
    return DecodeResult(
        worker=worker,
        cache=new_cache,
        decoded=_readonly(decoded),
        bad=_readonly(bad),
        missing=_readonly(missing),
        steps=int(lone.size + new.size),
        rounds=int(n_rounds),
        verified=verified,
    )


_NO_SUMS = np.empty(0, dtype=np.uint64)  # writeable: one compiled type with a real table


def _apply(
    peel: Peel,
    new: Cache,
    cache: Cache,
    payload: np.ndarray,
    at: tuple | None,
    zeroed: np.ndarray,
    *,
    check: bool,
) -> np.ndarray | None:
    """Do the row operations of ``peel``, round by round: from the payload rows ``payload``
    (:func:`coded_shuffle._codec_kernels.apply_ops`), or with ``at = (paddr, plen, buffers)``
    from the rows by address, each read only up to its length (a row of ``out`` zeroed past its
    record only up to ``zeroed``, when not empty), and then with ``check`` each
    decoded row checksummed in the same pass (:func:`coded_shuffle._codec_kernels.apply_ops_at`):
    the checksums of the new batch's rows (valid at the decoded rows), or None. The rows of a
    packed batch are written first, in the order they lie in it
    (:func:`coded_shuffle._codec_kernels.row_table`, :attr:`Cache.order`): each group's payloads
    and cache records are then read, and its new records written, in one direction."""
    width = cache.width
    out = new.buffer
    transit = _aligned_rows(int(peel.n_transit), width)
    ops = (peel.psym, peel.src, peel.dst, peel.oplen)
    sums = None
    unit = width if cache.lengths is None else -(-cache.nbytes // max(len(cache), 1))  # bytes an operation
    lo = 0
    if at is None:
        kernel = _kernels().apply_ops
        args: tuple = (out.view(np.ndarray), transit, _ro(cache.data), _ro(payload), *ops)
    else:
        kernel = _kernels().apply_ops_at
        sums = np.empty(len(new), dtype=np.uint64) if check else None
        keys = _word_keys(max(1, -(-width // 8)))
        paddr, plen, _buffers = at  # the buffers stay alive until the operations are done
        olen = _i64(peel.out_len)
        if cache.is_packed:
            oend = olen
        else:
            oend = zeroed if zeroed.shape[0] else _i64(np.full(len(new), width, dtype=np.int64))
        held = (_ro(cache.buffer).ctypes.data, cache.offsets, _i64(cache.lengths))
        into = _NO_SUMS if sums is None else sums
        args = (transit, *held, out.ctypes.data, new.offsets, olen, oend, paddr, plen, *ops, into, keys)
        if cache.is_packed:  # the new rows first, in the order they lie
            lo = len(new)
            table = _kernels().row_table(new.order, *ops, olen, *held, out.ctypes.data, paddr, plen, width)
            _halves(_kernels().apply_table, (table, into, keys), 0, lo, lo * unit)
    for hi in peel.bounds.tolist():
        _halves(kernel, args, lo, hi, (hi - lo) * unit)
        lo = hi
    return sums


def _need_ids(need: object, checksums: np.ndarray | None) -> np.ndarray:
    """The ids of ``need``, increasing; a repeated id, or one past ``checksums``, is refused."""
    ids = np.asarray(check_int_array(need, "need", ndim=1), dtype=np.int64)
    if ids.size > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        unique = np.unique(ids)
        if unique.size != ids.size:
            dup = int(np.sort(ids)[np.flatnonzero(np.diff(np.sort(ids)) == 0)[0]])
            raise ValueError(f"Argument 'need' must name each record once; id {dup} appears more than once.")
        ids = unique
    if ids.size and int(ids[0]) < 0:
        raise ValueError(f"Argument 'need' must hold record ids >= 0, not {int(ids[0])}.")
    if checksums is not None:
        table = checksums if isinstance(checksums, np.ndarray) else None
        if table is None or table.ndim != 1 or table.dtype != np.uint64:
            got = type(checksums).__name__ if table is None else f"{table.ndim}-D {table.dtype}"
            raise TypeError(
                "Argument 'checksums' must be a 1-D uint64 array, one 64-bit checksum per record id "
                f"(Dataset.checksums, record_checksums), not {got}: a float64 table keeps 53 bits."
            )
        n = len(checksums)
        if ids.size and int(ids[-1]) >= n:
            raise ValueError(
                f"Argument 'checksums' must hold one checksum per record id (indexed by id), but has "
                f"{n} entries and 'need' names id {int(ids[-1])}."
            )
    return ids


def _parsed_frames(
    frames: object, *, worker: int, epoch: int | None, width: int, variable: bool, terms: bool = False
) -> list[Frame]:
    """``frames`` parsed (a :class:`Frame` is taken as it is), each matching the cache's layout:
    frames of pairs, or with ``terms`` frames of many-term symbols (:mod:`.terms`)."""
    if isinstance(frames, (bytes, bytearray, np.ndarray, Frame)) or not isinstance(frames, Sequence):
        raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
    return [_parsed_frame(f, q, worker=worker, epoch=epoch, width=width, variable=variable, terms=terms)
            for q, f in enumerate(frames)]  # fmt: skip


def _parsed_frame(
    f: object, q: int, *, worker: int, epoch: int | None, width: int, variable: bool, terms: bool
) -> Frame:
    """Frame ``q`` of a delivery parsed (a :class:`Frame` is taken as it is) and matched to the
    cache's layout, as :func:`_parsed_frames` takes each."""
    if not isinstance(f, Frame):
        try:
            f = _parse(f, epoch=epoch, record_bytes=width, unpack=terms)  # unpacked as read
        except DecodeError as exc:
            raise DecodeError(f"Worker {worker}: frame {q}: {exc}") from None
    if (f.terms is not None) != terms:
        raise DecodeError(
            f"Worker {worker}: frame {q} carries many-term symbols; decode it with decode_terms."
            if f.terms is not None
            else f"Worker {worker}: frame {q} is not a frame of many-term symbols."
        )
    if (f.len_a is not None) != variable or f.record_bytes != width:
        raise DecodeError(f"Worker {worker}: frame {q} does not match the cache's record layout.")
    return f


def _raise_missing(p: int, worker: int, a: np.ndarray, b: np.ndarray, spans: np.ndarray, pick: Any) -> None:
    """The DecodeError of a needed point ``p`` that could not be decoded, naming its symbol."""
    mine = np.concatenate([np.arange(x, y) for x, y in spans.tolist()] + [np.empty(0, np.int64)])
    hit = mine[(a[mine] == p) | (b[mine] == p)]
    if hit.size:
        s = int(hit[0])
        raise DecodeError(
            f"Worker {worker} cannot decode symbol {int(pick('symbol')[s])} (points {int(a[s])} and "
            f"{int(b[s])}): it knows neither, so point {p} stays missing."
        )
    raise DecodeError(f"Worker {worker} needs point {p} but no symbol received carries it.")
