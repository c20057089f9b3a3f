"""Compiled loops of the codec's byte path (numba), imported lazily by :mod:`coded_shuffle.codec`.

Each kernel states the numpy expression it equals; ``tests/codec/test_codec.py`` checks every one
against a plain numpy (or plain Python) reference, byte for byte. All kernels release the GIL and
work on a range ``[lo, hi)`` of rows, so the codec can run two halves on two threads. The first
call compiles once per install and is cached on disk (``cache=True``); importing this module
compiles nothing.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._jit import load_light

# State bits of an id in :func:`peel_ops` (one byte per id).
_HELD = 1  # in the old cache
_NEED = 2  # in the new batch
_LONE = 4  # needed, not held, and sent alone
_KNOWN = 8  # held, or decoded in a finished round
_CAND = 16  # decoded in the current round
_USEF = 32  # needed, or the known end of a useful later step
_DEG1 = 64  # not held, and in at least one coded symbol
_DEG2 = 128  # not held, and in at least two coded symbols (or twice in one)

# Buffers named by the 2 low bits of a row code ``row << 2 | buffer``.
CACHE, OUT, TRANSIT = 0, 1, 2

#: Operations ahead of the current one whose rows are prefetched (random rows: the loops are
#: bound by memory latency, not bandwidth, unless several rows are in flight).
_AHEAD = 8
#: Operations ahead whose cache record :func:`apply_ops_at` prefetches.
_AHEAD_CACHE = 4

_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _emit_prefetch(builder, ptr, rw):  # pragma: no cover - compiled
    """Emit ``llvm.prefetch`` of the ``i8*`` pointer ``ptr`` (``rw``: 0 to read, 1 to write)."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0i8")
    hint = [ir.Constant(i32, rw), ir.Constant(i32, 3), ir.Constant(i32, 1)]
    builder.call(fn, [ptr, *hint])


def _prefetch_codegen(rw):  # pragma: no cover - compiled
    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        if signature.args[0].ndim == 2:
            width = builder.extract_value(ary.shape, 1)
            ptr = builder.gep(ary.data, [builder.mul(args[1], width)])
        else:
            ptr = builder.gep(ary.data, [args[1]])
        _emit_prefetch(builder, builder.bitcast(ptr, ir.IntType(8).as_pointer()), rw)
        return context.get_dummy_value()

    return codegen


@intrinsic
def _prefetch(typingctx, rows, r):  # pragma: no cover - compiled
    """Hint the cache to load row ``r`` of the C-contiguous ``uint8`` array ``rows`` for reading.

    Row ``r`` of a 2-D array, or byte ``r`` of a 1-D one; a hint, never a fault.
    """
    return types.void(rows, r), _prefetch_codegen(0)


@intrinsic
def _prefetch_w(typingctx, rows, r):  # pragma: no cover - compiled
    """:func:`_prefetch` for writing."""
    return types.void(rows, r), _prefetch_codegen(1)


@intrinsic
def _prefetch_at(typingctx, addr):  # pragma: no cover - compiled
    """Hint the cache to load the line of the integer address ``addr`` for reading (never a fault)."""

    def codegen(context, builder, signature, args):
        _emit_prefetch(builder, builder.inttoptr(args[0], ir.IntType(8).as_pointer()), 0)
        return context.get_dummy_value()

    return types.void(types.int64), codegen


@numba.njit(cache=True, nogil=True)
def encode_rows(out, data, a, b, lo, hi):  # pragma: no cover - compiled
    """``out[s] = data[a[s]] ^ data[b[s]]`` (``data[a[s]]`` when ``b[s] < 0``) for ``lo <= s < hi``."""
    W = out.shape[1]
    for s in range(lo, hi):
        k = s + _AHEAD
        if k < hi:
            _prefetch(data, a[k])
            if b[k] >= 0:
                _prefetch(data, b[k])
        row = out[s]
        x = data[a[s]]
        if b[s] >= 0:
            y = data[b[s]]
            for j in range(W):
                row[j] = x[j] ^ y[j]
        else:
            for j in range(W):
                row[j] = x[j]


@numba.njit(cache=True, nogil=True)
def encode_packed(buf, offset, plen, data, a, b, lo, hi):  # pragma: no cover - compiled
    """Variable-length payloads straight into the wire buffer.

    ``buf[offset[s] : offset[s] + plen[s]] = (data[a[s]] ^ data[b[s]])[:plen[s]]`` (``data[a[s]]``
    alone when ``b[s] < 0``) for ``lo <= s < hi``; rows of ``data`` are zero-padded records.
    """
    for s in range(lo, hi):
        o = offset[s]
        x = data[a[s]]
        if b[s] >= 0:
            y = data[b[s]]
            for j in range(plen[s]):
                buf[o + j] = x[j] ^ y[j]
        else:
            for j in range(plen[s]):
                buf[o + j] = x[j]


@numba.njit(cache=True, nogil=True)
def xor_terms(out, base, offsets, rows, data, lo, hi):  # pragma: no cover - compiled
    """``out[s] = base[s] ^ XOR of data[rows[i]]`` over ``offsets[s] <= i < offsets[s + 1]`` with
    ``rows[i] >= 0`` (``base`` with no rows: zeros), for ``lo <= s < hi``.

    The symbols of many terms: encoding (``base`` empty, ``rows`` the terms), and a worker's
    residuals (``base`` the payloads, ``rows`` the cache row of each term it holds, else -1).
    """
    W = out.shape[1]
    plain = base.shape[0] == 0
    for s in range(lo, hi):
        row = out[s]
        if plain:
            for j in range(W):
                row[j] = 0
        else:
            x = base[s]
            for j in range(W):
                row[j] = x[j]
        _xor_held(row, offsets[s], offsets[s + 1], rows, data)


@numba.njit(inline="always")
def _xor_held(row, lo, hi, rows, data):  # pragma: no cover - compiled
    """``row ^= data[rows[i]]`` for ``lo <= i < hi`` with ``rows[i] >= 0`` (the held terms)."""
    W = row.shape[0]
    for i in range(lo, hi):
        r = rows[i]
        if r >= 0:
            y = data[r]
            for j in range(W):
                row[j] ^= y[j]


@numba.njit(cache=True, nogil=True)
def direct_pick(pick, done, offsets, where, target, multi):  # pragma: no cover - compiled
    """Which of a worker's symbols of one unknown term give which row, before any byte is read.

    Symbol ``s`` has terms ``offsets[s] <= i < offsets[s + 1]``; ``where[i]`` is the row of term
    ``i`` in the cache (-1: unknown), ``target[i]`` its row in the output (-1: not wanted). The
    first symbol with one unknown term ``u`` wanted and not ``done`` gets ``pick[s] = target[u]``
    and sets ``done``; the others get -1, and a symbol with two unknown terms or more sets
    ``multi[s]`` (for the elimination). Returns the rows picked.
    """
    picked = 0
    for s in range(offsets.shape[0] - 1):
        pick[s] = -1
        u = -1
        n = 0
        for i in range(offsets[s], offsets[s + 1]):
            if where[i] < 0:
                n += 1
                u = i
        if n >= 2:
            multi[s] = 1
        elif n == 1 and target[u] >= 0 and not done[target[u]]:
            done[target[u]] = 1
            pick[s] = target[u]
            picked += 1
    return picked


@numba.njit(cache=True, nogil=True)
def direct_rows(out, sums, keys, payload, prow, offsets, where, pick, data, lo, hi):  # pragma: no cover
    """``out[pick[s]] = payload[prow[s]] ^ XOR of data[where[i]]`` over the terms of symbol ``s``
    held (``where[i] >= 0``), for ``lo <= s < hi`` with ``pick[s] >= 0`` (:func:`direct_pick`),
    and ``sums[pick[s]]`` its checksum (:func:`checksum_rows`, the whole row), while it is hot.

    A symbol of one or two held terms is one pass over its row; the rows of the symbol
    :data:`_AHEAD` further on are prefetched.
    """
    W = out.shape[1]
    for s in range(lo, hi):
        k = s + _AHEAD
        if k < hi and pick[k] >= 0:
            _prefetch(payload, prow[k])
            _prefetch_w(out, pick[k])
            for i in range(offsets[k], offsets[k + 1]):
                if where[i] >= 0:
                    _prefetch(data, where[i])
        if pick[s] < 0:
            continue
        row = out[pick[s]]
        x = payload[prow[s]]
        a = -1
        b = -1
        held = 0
        for i in range(offsets[s], offsets[s + 1]):
            if where[i] >= 0:
                held += 1
                if held == 1:
                    a = where[i]
                elif held == 2:
                    b = where[i]
        if held == 0:
            for j in range(W):
                row[j] = x[j]
        elif held == 1:
            y = data[a]
            for j in range(W):
                row[j] = x[j] ^ y[j]
        elif held == 2:
            y = data[a]
            z = data[b]
            for j in range(W):
                row[j] = x[j] ^ y[j] ^ z[j]
        else:
            for j in range(W):
                row[j] = x[j]
            _xor_held(row, offsets[s], offsets[s + 1], where, data)
        sums[pick[s]] = _row_checksum(row, W, keys)


@numba.njit(cache=True, nogil=True)
def spans_max(a, b, first, end):  # pragma: no cover - compiled
    """``max(a[s], b[s])`` over ``s`` in ``[first[r], end[r])`` for every ``r`` (``-1`` if none)."""
    top = -1
    for r in range(first.shape[0]):
        for s in range(first[r], end[r]):
            if a[s] > top:
                top = a[s]
            if b[s] > top:
                top = b[s]
    return top


@numba.njit(cache=True, nogil=True)
def take_rows(out, data, rows, lo, hi):  # pragma: no cover - compiled
    """``out[i] = data[rows[i]]`` for ``lo <= i < hi``."""
    W = out.shape[1]
    for i in range(lo, hi):
        if i + _AHEAD < hi:
            _prefetch(data, rows[i + _AHEAD])
        row = out[i]
        x = data[rows[i]]
        for j in range(W):
            row[j] = x[j]


@numba.njit(cache=True, nogil=True)
def take_spans(out, rows, buf, starts, sizes):  # pragma: no cover - compiled
    """``out[rows[j], :sizes[j]] = buf[starts[j]:starts[j] + sizes[j]]``, the rest of the row zero
    (a record source's gather of spans of one buffer)."""
    W = out.shape[1]
    for j in range(rows.shape[0]):
        r = rows[j]
        s = starts[j]
        L = sizes[j]
        for b in range(L):
            out[r, b] = buf[s + b]
        for b in range(L, W):
            out[r, b] = 0


@numba.njit(cache=True, nogil=True)
def move_rows(out, dst, data, src, lo, hi):  # pragma: no cover - compiled
    """``out[dst[i]] = data[src[i]]`` for ``lo <= i < hi``."""
    W = out.shape[1]
    for i in range(lo, hi):
        if i + _AHEAD < hi:
            _prefetch(data, src[i + _AHEAD])
        row = out[dst[i]]
        x = data[src[i]]
        for j in range(W):
            row[j] = x[j]


@numba.njit(cache=True, nogil=True)
def copy_spans(dst, doff, src, soff, n, lo, hi):  # pragma: no cover - compiled
    """``dst[doff[i] : doff[i] + n[i]] = src[soff[i] : soff[i] + n[i]]`` for ``lo <= i < hi``,
    both flat byte buffers: spans of rows of any shape, each copied alone."""
    for i in range(lo, hi):
        d, s = doff[i], soff[i]
        for j in range(n[i]):
            dst[d + j] = src[s + j]


@numba.njit(inline="always")
def _fmix(x):  # pragma: no cover - compiled
    x ^= x >> np.uint64(33)
    x *= _C1
    x ^= x >> np.uint64(33)
    x *= _C2
    x ^= x >> np.uint64(33)
    return x


@numba.njit(inline="always")
def _row_checksum(x, L, keys):  # pragma: no cover - compiled
    """The checksum of the first ``L`` bytes of the row ``x`` (:func:`checksum_rows`)."""
    W = x.shape[0]
    full = W // 8
    m = (L + 7) // 8
    h = np.uint64(0)
    for k in range(min(m, full)):
        w = np.uint64(0)
        for t in range(8):
            w |= np.uint64(x[8 * k + t]) << np.uint64(8 * t)
        h += _fmix(w ^ keys[k])
    if m > full:
        w = np.uint64(0)
        for t in range(W - 8 * full):
            w |= np.uint64(x[8 * full + t]) << np.uint64(8 * t)
        h += _fmix(w ^ keys[full])
    h += np.uint64(L) * _GOLDEN
    return _fmix(h)


@numba.njit(cache=True, nogil=True)
def checksum_rows(out, data, rows, lengths, keys, lo, hi):  # pragma: no cover - compiled
    """Checksum of row ``rows[i]`` of ``data`` (row ``i`` if ``rows`` is empty) into ``out[i]``.

    The length is ``lengths[i]`` (the width if ``lengths`` is empty); ``keys[k]`` is
    ``splitmix64(k + 1)``. Equal to the codec's numpy definition: the row's bytes, zero-padded to
    whole words, read as little-endian ``uint64`` words; the first ``ceil(L / 8)`` words enter.
    """
    W = data.shape[1]
    for i in range(lo, hi):
        r = rows[i] if rows.shape[0] else i
        out[i] = _row_checksum(data[r], lengths[i] if lengths.shape[0] else W, keys)


@numba.njit(cache=True, nogil=True)
def checksum_spans(out, buf, offsets, lengths, keys, lo, hi):  # pragma: no cover - compiled
    """Checksum of the ``lengths[i]`` bytes at ``offsets[i]`` of the flat ``buf`` into ``out[i]``
    (records packed end to end): :func:`checksum_rows` of those bytes."""
    for i in range(lo, hi):
        L = lengths[i]
        out[i] = _row_checksum(buf[offsets[i] : offsets[i] + L], L, keys)


@numba.njit(inline="always")
def _popcount(x):  # pragma: no cover - compiled
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(inline="always")
def _rank(rk, v):  # pragma: no cover - compiled
    """Number of ids below ``v`` in a sorted id list: its row (``rk`` from :func:`_set_bits`)."""
    w = v >> 6
    mask = (np.uint64(1) << np.uint64(v & 63)) - np.uint64(1)
    return np.int64(rk[w, 1]) + _popcount(rk[w, 0] & mask)


@numba.njit(inline="always")
def _set_bits(ids, rk, n_words):  # pragma: no cover - compiled
    """``rk[w, 0]``: word ``w`` of the bitmap of ``ids``; ``rk[w, 1]``: the bits set before it.

    The two words of a rank sit side by side, so a rank reads one cache line.
    """
    for w in range(n_words):
        rk[w, 0] = 0
    for i in range(ids.shape[0]):
        rk[ids[i] >> 6, 0] |= np.uint64(1) << np.uint64(ids[i] & 63)
    total = 0
    for w in range(n_words):
        rk[w, 1] = total
        total += _popcount(rk[w, 0])


@numba.njit(cache=True, nogil=True)
def peel_ops(  # pragma: no cover - compiled
    a, b, first, end, cache_ids, need_ids, M, cache_len, len_a, len_b, st, tab, bits, work, ops
):
    """Peel the symbols of one worker and list the row operations that rebuild its batch.

    The worker's symbols are ``s`` in ``[first[r], end[r])`` for every ``r`` in turn (the runs of
    a frame addressed to it), increasing; ``a``, ``b``, ``len_a`` and ``len_b`` are indexed by
    ``s``. Ids lie in ``[0, M)``; ``cache_ids`` and ``need_ids`` are increasing. The peel is that
    of the set computation ``_peel_oracle`` in ``tests/codec/test_codec.py`` (``known`` starts as the
    cache), over the worker's symbols:

    - lone: the first symbol ``s`` with ``b[s] < 0`` of each needed, not held id ``a[s]``;
    - round ``r``: the untouched coded symbols with an end in the frontier (the cache, then the
      ids decoded in round ``r - 1``) are touched; each with exactly one known end decodes the
      other, ``new``, unless ``new`` is a lone id; of several symbols decoding one ``new`` the
      lowest wins; stop when a round decodes nothing;
    - useful: walking the rounds backwards, a step whose ``new`` is needed, or is the known end
      ``kn`` of a useful later step.

    Round 1 is one pass over the symbols; later rounds only visit the symbols with no held end
    sharing an id with another symbol (the chains of leftover cycles), through linked lists. The
    row of an id in the cache or the new batch is its rank in a bitmap (no table of ``M`` rows).

    Every row of the new batch then gets one operation ``dst = payload[psym] ^ src`` (a term
    absent when ``-1``; ``psym`` is the symbol ``s`` itself), zeroed past ``oplen`` (variable
    records only; ``oplen`` is empty for fixed ones); ``src`` and ``dst`` are row codes
    ``row << 2 | buffer`` (:data:`CACHE`, :data:`OUT`, :data:`TRANSIT`). Operation
    ``i < len(need_ids)`` writes row ``i`` of the new batch (kept, lone, round-1 or missing; a
    row decoded in a later round is written by a later operation and ``dst[i] = -1`` skips it),
    so the rows are written in order. Operations
    ``[0, bounds[0])`` (the rows, then round-1 steps to transit points) are independent; those
    of ``[bounds[r - 1], bounds[r])`` read only rows written before ``bounds[r - 1]``.

    Returns ``(psym, src, dst, oplen, bounds, n_transit, out_len, state, lone, sym, kn, new,
    rnd, n_rounds, decoded, missing)``: ``state[i]`` is 0 (kept from the cache), 1 (decoded) or 2
    (missing) for need row ``i``; ``out_len`` the lengths of the new rows (variable records
    only); ``lone, sym, kn, new, rnd`` the lone symbols and the useful steps in increasing
    rounds; ``decoded`` and ``missing`` the need ids of state 1 and 2, increasing.

    The tables live in a workspace the caller keeps from call to call (fresh memory costs a page
    fault every 4 KiB, more than the work itself): ``st`` ``uint8[>= M]``, ``tab``
    ``int64[2, >= M]``, ``bits`` ``uint64[2, >= M / 64 + 1, 2]``, ``work`` ``int64[6, >= S]`` and
    ``ops`` ``int64[4, >= len(need_ids) + S]`` (``S`` symbols); no entry needs to be initialized. The arrays
    returned are views into them.
    """
    n_spans = first.shape[0]
    n_out = need_ids.shape[0]
    variable = len_a.shape[0] > 0 or cache_len.shape[0] > 0
    st = st[:M]
    st[:] = 0
    loc = tab[0]  # lone symbol of a lone id; candidate step, then row code, of a decoded id
    head = tab[1]  # first link of an id in the chains' lists
    n_words = (M >> 6) + 1
    hrk, nrk = bits[0], bits[1]
    _set_bits(cache_ids, hrk, n_words)
    _set_bits(need_ids, nrk, n_words)
    for i in range(cache_ids.shape[0]):
        st[cache_ids[i]] = _HELD | _KNOWN
    for i in range(n_out):
        st[need_ids[i]] |= _NEED | _USEF
    psym = ops[0]
    src = ops[1]
    dst = ops[2]
    oplen = ops[3]
    out_len = np.zeros(n_out if variable else 0, dtype=np.int64)
    # Lone points (a needed point sent alone is never decoded from a symbol).
    lone = work[5]
    n_lone = 0
    for r in range(n_spans):
        for s in range(first[r], end[r]):
            if b[s] >= 0:
                continue
            p = a[s]
            f = st[p]
            if (f & _NEED) and not (f & (_HELD | _LONE)):
                st[p] = f | _LONE
                lone[n_lone] = s
                loc[p] = s
                n_lone += 1
    # Round 1: every coded symbol with a held end; in the same pass, the degrees of the ids not
    # held (those of held ids are never asked) and the symbols with no held end.
    st_sym = work[0]
    st_new = work[1]
    st_kn = work[2]
    st_rnd = work[3]
    n_st = 0
    rest = work[4]
    n_rest = 0
    for r in range(n_spans):
        hi = end[r]
        for s in range(first[r], hi):
            k = s + _AHEAD
            if k < hi and b[k] >= 0:
                _prefetch_w(st, a[k])
                _prefetch_w(st, b[k])
                _prefetch(nrk, a[k] >> 6)
                _prefetch(nrk, b[k] >> 6)
                _prefetch(hrk, a[k] >> 6)
                _prefetch(hrk, b[k] >> 6)
            q = b[s]
            if q < 0:
                continue
            p = a[s]
            fp = st[p]
            fq = st[q]
            hp = fp & _HELD
            hq = fq & _HELD
            if hp and hq:
                continue
            if not hp and not hq:
                st[p] = fp | (_DEG2 if fp & _DEG1 else _DEG1)
                fq = st[q]  # p and q may be one id
                st[q] = fq | (_DEG2 if fq & _DEG1 else _DEG1)
                rest[n_rest] = s
                n_rest += 1
                continue
            if hp:
                nw, kn, fn = q, p, fq
            else:
                nw, kn, fn = p, q, fp
            fn |= _DEG2 if fn & _DEG1 else _DEG1
            if fn & (_LONE | _KNOWN):  # sent alone, or decoded by a lower symbol of this round
                st[nw] = fn
                continue
            st[nw] = fn | _KNOWN  # round 1 reads held ends only: known at once
            st_sym[n_st] = s
            st_new[n_st] = nw
            st_kn[n_st] = kn
            st_rnd[n_st] = 1
            n_st += 1
            if fn & _NEED:  # a needed id: its row's operation at once (0 marks the step done)
                st_rnd[n_st - 1] = 0
                o = _rank(nrk, nw)
                psym[o] = s
                src[o] = (_rank(hrk, kn) << 2) | CACHE  # dst: in the pass over the rows below
                if variable:
                    ln = len_a[s] if p == nw else len_b[s]
                    oplen[o] = ln
                    out_len[o] = ln
    n_rounds = 1 if n_st else 0
    n_first = n_st
    # The symbols with no held end that share an id with another symbol: the chains.
    n_chain = 0
    for j in range(n_rest):
        s = rest[j]
        if (st[a[s]] | st[b[s]]) & _DEG2:
            rest[n_chain] = s
            n_chain += 1
    n_rest = n_chain
    # Later rounds: the chains, through linked lists of those symbols, from the ids of round 1.
    if n_st and n_rest:
        for j in range(n_rest):
            head[a[rest[j]]] = -1
            head[b[rest[j]]] = -1
        nxt = np.empty(2 * n_rest, dtype=np.int64)
        for j in range(n_rest):
            s = rest[j]
            e = 2 * j
            nxt[e] = head[a[s]]
            head[a[s]] = e
            nxt[e + 1] = head[b[s]]
            head[b[s]] = e + 1
        # The frontier: ids decoded in the last round that are ends of chain symbols (an id may
        # come twice; its list is then walked once more, finding every symbol done).
        front = np.empty(3 * n_rest, dtype=np.int64)
        n_front = 0
        for j in range(n_rest):
            s = rest[j]
            if st[a[s]] & _KNOWN:
                front[n_front] = a[s]
                n_front += 1
            if st[b[s]] & _KNOWN:
                front[n_front] = b[s]
                n_front += 1
        done = np.zeros(n_rest, dtype=np.uint8)
        lo = 0
        hi = n_front
        while True:
            before = n_st
            for t in range(lo, hi):
                e = head[front[t]]
                while e >= 0:
                    j = e >> 1
                    e = nxt[e]
                    if done[j]:
                        continue
                    done[j] = 1
                    s = rest[j]
                    p = a[s]
                    q = b[s]
                    kp = (st[p] & _KNOWN) != 0
                    kq = (st[q] & _KNOWN) != 0
                    if kp == kq:
                        continue
                    if kp:
                        nw, kn = q, p
                    else:
                        nw, kn = p, q
                    fn = st[nw]
                    if fn & _LONE:
                        continue
                    if not (fn & _CAND):
                        st[nw] = fn | _CAND
                        loc[nw] = n_st
                        if fn & _DEG2:
                            front[n_front] = nw
                            n_front += 1
                        st_sym[n_st] = s
                        st_new[n_st] = nw
                        st_kn[n_st] = kn
                        st_rnd[n_st] = n_rounds + 1
                        n_st += 1
                    elif s < st_sym[loc[nw]]:
                        st_sym[loc[nw]] = s
                        st_kn[loc[nw]] = kn
            if n_st == before:
                break
            n_rounds += 1
            for i in range(before, n_st):
                st[st_new[i]] = (st[st_new[i]] & ~_CAND) | _KNOWN
            lo = hi
            hi = n_front
    # Useful steps: walking the later rounds backwards marks the known ends they need (those of
    # round 1 are held); a step is kept if its new id is needed or so marked.
    for i in range(n_st - 1, n_first - 1, -1):
        if st[st_new[i]] & _USEF:
            st[st_kn[i]] |= _USEF
    # Row operations: operation i does row i of the new batch (decoded in round 1: done above;
    # kept, lone, missing: here; decoded in a later round: skipped there, dst = -1, and done by
    # a later operation); then the round-1 steps to transit points, then the later rounds.
    state = np.empty(n_out, dtype=np.uint8)
    got = np.empty(n_out, dtype=np.int64)  # decoded ids from the front, missing from the back
    n_dec = 0
    n_miss = 0
    for i in range(n_out):
        v = need_ids[i]
        f = st[v]
        if f & _HELD:
            state[i] = 0
            psym[i] = -1
            c = _rank(hrk, v)
            src[i] = c << 2
            if variable:
                oplen[i] = cache_len[c]
        elif f & _LONE:
            state[i] = 1
            got[n_dec] = v
            n_dec += 1
            s = loc[v]
            psym[i] = s
            src[i] = -1
            if variable:
                oplen[i] = len_a[s]
        elif f & _KNOWN:
            state[i] = 1
            got[n_dec] = v
            n_dec += 1
            dst[i] = (i << 2) | OUT  # decoded in round 1 above, or skipped below (dst = -1)
            continue
        else:
            state[i] = 2
            n_miss += 1
            got[n_out - n_miss] = v
            psym[i] = -1
            src[i] = -1
            if variable:
                oplen[i] = 0
        dst[i] = (i << 2) | OUT
        if variable:
            out_len[i] = oplen[i]
    n_ops = n_out
    bounds = np.full(max(n_rounds, 1), -1, dtype=np.int64)
    n_transit = 0
    n_keep = 0  # the kept steps, compacted in place
    for i in range(n_st):
        r = st_rnd[i]
        if r == 0:  # round 1, to a needed id, done above
            st_sym[n_keep] = st_sym[i]
            st_kn[n_keep] = st_kn[i]
            st_new[n_keep] = st_new[i]
            st_rnd[n_keep] = 1
            n_keep += 1
            continue
        nw = st_new[i]
        f = st[nw]
        if not (f & _USEF):
            continue
        s = st_sym[i]
        kn = st_kn[i]
        if n_keep > 0 and r != st_rnd[n_keep - 1]:
            bounds[st_rnd[n_keep - 1] - 1] = n_ops
        st_sym[n_keep] = s
        st_kn[n_keep] = kn
        st_new[n_keep] = nw
        st_rnd[n_keep] = r
        n_keep += 1
        if r == 1:
            c = (_rank(hrk, kn) << 2) | CACHE
        elif st[kn] & _NEED:
            c = (_rank(nrk, kn) << 2) | OUT
        else:
            c = loc[kn]
        if f & _NEED:
            o = _rank(nrk, nw)
            d = (o << 2) | OUT
            dst[o] = -1  # its row is written here, not in row order
        else:
            d = (n_transit << 2) | TRANSIT
            n_transit += 1
            loc[nw] = d
        psym[n_ops] = s
        src[n_ops] = c
        dst[n_ops] = d
        if variable:
            ln = len_a[s] if a[s] == nw else len_b[s]
            oplen[n_ops] = ln
            if f & _NEED:
                out_len[d >> 2] = ln
        n_ops += 1
    sym = st_sym[:n_keep]
    kns = st_kn[:n_keep]
    new = st_new[:n_keep]
    rnd = st_rnd[:n_keep]
    for r in range(bounds.shape[0]):
        if bounds[r] < 0:
            bounds[r] = n_ops
    oplen = oplen[: n_ops if variable else 0]
    missing = got[n_out - n_miss :][::-1].copy()
    return (psym[:n_ops], src[:n_ops], dst[:n_ops], oplen, bounds, n_transit, out_len, state,
            lone[:n_lone], sym, kns, new, rnd, n_rounds, got[:n_dec], missing)  # fmt: skip


@numba.njit(cache=True, nogil=True)
def apply_ops(out, transit, cache, payload, psym, src, dst, oplen, lo, hi):  # pragma: no cover - compiled
    """Do the row operations ``[lo, hi)`` of :func:`peel_ops`.

    ``dst = payload[psym] ^ src`` over the full width (a term absent when ``-1``; both absent: a
    zero row; ``dst = -1``: nothing), then ``dst[oplen:] = 0`` unless ``oplen`` is empty; rows
    are named by ``row << 2 | buffer`` codes over ``cache``, ``out`` and ``transit``.
    """
    W = out.shape[1]
    for i in range(lo, hi):
        k = i + _AHEAD
        if k < hi:
            if psym[k] >= 0:
                _prefetch(payload, psym[k])
            c = src[k]
            if c >= 0:
                if c & 3 == CACHE:
                    _prefetch(cache, c >> 2)
                elif c & 3 == OUT:
                    _prefetch(out, c >> 2)
            if dst[k] >= 0 and dst[k] & 3 == OUT:
                _prefetch_w(out, dst[k] >> 2)
        d = dst[i]
        if d < 0:
            continue
        if d & 3 == OUT:
            y = out[d >> 2]
        else:
            y = transit[d >> 2]
        p = psym[i]
        c = src[i]
        if c >= 0:
            cb = c & 3
            if cb == CACHE:
                x = cache[c >> 2]
            elif cb == OUT:
                x = out[c >> 2]
            else:
                x = transit[c >> 2]
            if p >= 0:
                z = payload[p]
                for j in range(W):
                    y[j] = z[j] ^ x[j]
            else:
                for j in range(W):
                    y[j] = x[j]
        elif p >= 0:
            z = payload[p]
            for j in range(W):
                y[j] = z[j]
        else:
            for j in range(W):
                y[j] = 0
        if oplen.shape[0] == 0:
            continue
        L = oplen[i]
        if 0 <= L < W:
            for j in range(L, W):
                y[j] = 0


@intrinsic
def _bytes_at(typingctx, addr):  # pragma: no cover - compiled
    """The ``uint8`` pointer at the integer address ``addr`` (a row of a buffer the caller keeps)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return types.CPointer(types.uint8)(types.int64), codegen


@intrinsic
def _words_at(typingctx, addr):  # pragma: no cover - compiled
    """The ``uint64`` pointer at the integer address ``addr`` (x86 reads and writes it unaligned)."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(64).as_pointer())

    return types.CPointer(types.uint64)(types.int64), codegen


@numba.njit(inline="always")
def _word(addr):  # pragma: no cover - compiled
    """The 8 bytes at the address ``addr`` as one ``uint64`` word (read or written in place)."""
    return numba.carray(_words_at(addr), 1)


@numba.njit(inline="always")
def _xor_at(y, z, x, n):  # pragma: no cover - compiled
    """The ``n`` bytes at the address ``y`` set to those at ``z`` XOR those at ``x``, 8 at a time.

    The last few bytes of a span of 8 or more go as one word ending at its last byte, which
    writes some bytes twice with the same value (``y`` must overlap neither source); a loop of
    the few bytes left costs a mispredicted exit on nearly every record of many sizes (1.2 ms of
    the 33 ms of a transition of token documents, ``benchmarks/variable_coding.py --decode``).
    Nothing is read or written outside the ``n`` bytes of each address.
    """
    if n < 8:
        yb, zb = numba.carray(_bytes_at(y), n), numba.carray(_bytes_at(z), n)
        xb = numba.carray(_bytes_at(x), n)
        for j in range(n):
            yb[j] = zb[j] ^ xb[j]
        return
    w = n >> 3
    yw, zw, xw = numba.carray(_words_at(y), w), numba.carray(_words_at(z), w), numba.carray(_words_at(x), w)
    for j in range(w):
        yw[j] = zw[j] ^ xw[j]
    if n & 7:
        _word(y + n - 8)[0] = _word(z + n - 8)[0] ^ _word(x + n - 8)[0]


@numba.njit(inline="always")
def _copy_at(y, x, n):  # pragma: no cover - compiled
    """The ``n`` bytes at the address ``x`` copied to the address ``y`` (:func:`_xor_at`'s steps)."""
    if n < 8:
        yb, xb = numba.carray(_bytes_at(y), n), numba.carray(_bytes_at(x), n)
        for j in range(n):
            yb[j] = xb[j]
        return
    w = n >> 3
    yw, xw = numba.carray(_words_at(y), w), numba.carray(_words_at(x), w)
    for j in range(w):
        yw[j] = xw[j]
    if n & 7:
        _word(y + n - 8)[0] = _word(x + n - 8)[0]


@numba.njit(inline="always")
def _zero_at(y, n):  # pragma: no cover - compiled
    """The ``n`` bytes at the address ``y`` set to zero (:func:`_xor_at`'s steps)."""
    if n < 8:
        yb = numba.carray(_bytes_at(y), n)
        for j in range(n):
            yb[j] = 0
        return
    w = n >> 3
    yw = numba.carray(_words_at(y), w)
    for j in range(w):
        yw[j] = 0
    if n & 7:
        _word(y + n - 8)[0] = 0


@numba.njit(inline="always")
def _xor_span(y, end, z, P, x, X):  # pragma: no cover - compiled
    """The ``end`` bytes at ``y``: the ``P`` at ``z`` XOR the ``X`` at ``x``, each shorter one
    zero-padded, then zeros (a row operation of :func:`apply_ops_at` or :func:`apply_table`)."""
    m = min(P, X)
    _xor_at(y, z, x, m)
    if P > m:
        _copy_at(y + m, z + m, P - m)
    elif X > m:
        _copy_at(y + m, x + m, X - m)
    _zero_at(y + max(P, X), end - max(P, X))


@numba.njit(inline="always")
def _u32(e, o):  # pragma: no cover - compiled
    """The little-endian ``uint32`` at byte ``o`` of the ``uint8`` row ``e``, as a ``uint64``."""
    return (np.uint64(e[o]) | (np.uint64(e[o + 1]) << np.uint64(8)) | (np.uint64(e[o + 2]) << np.uint64(16))
            | (np.uint64(e[o + 3]) << np.uint64(24)))  # fmt: skip


@numba.njit(inline="always")
def _u64(e, o):  # pragma: no cover - compiled
    """The little-endian ``uint64`` at byte ``o`` of the ``uint8`` row ``e``."""
    return _u32(e, o) | (_u32(e, o + 4) << np.uint64(32))


#: What :func:`parse_pairs` finds wrong in a frame's entries (0: nothing).
BAD_ID, BAD_LENGTH = 1, 2


@numba.njit(cache=True, nogil=True)
def parse_pairs(entries, wide, variable, width):  # pragma: no cover - compiled
    """The entries of a frame of pairs read and checked in one pass.

    ``entries`` is the frame's ``(n, itemsize)`` ``uint8`` table: ``symbol, a, b`` little-endian
    ``uint32`` (``uint64`` when ``wide``), then ``len_a, len_b`` ``uint32`` when ``variable``.
    Returns ``(symbol, a, b, len_a, len_b, payload, status)``, equal to the numpy expressions
    ``symbol = e["symbol"].astype(np.int64)``, ``a = e["a"].astype(np.int64)``, ``b =
    np.where(e["b"] == none, -1, e["b"].astype(np.int64))`` (``none`` all ones), ``len_a`` and
    ``len_b`` likewise (empty unless ``variable``), ``payload = np.maximum(len_a, len_b).sum()``
    (``n * width`` unless ``variable``), and ``status`` :data:`BAD_ID` if ``a.min() < 0 or
    b.min() < -1`` (a 64-bit id of 2**63 or more), else :data:`BAD_LENGTH` if ``variable`` and
    ``np.maximum(len_a, len_b).max() > width or np.any((b < 0) & (len_b != 0))``, else 0.
    """
    n = entries.shape[0]
    m = n if variable else 0
    symbol = np.empty(n, dtype=np.int64)
    a = np.empty(n, dtype=np.int64)
    b = np.empty(n, dtype=np.int64)
    len_a = np.empty(m, dtype=np.int64)
    len_b = np.empty(m, dtype=np.int64)
    top = np.uint64(1) << np.uint64(63)
    none = np.uint64(0xFFFFFFFFFFFFFFFF) if wide else np.uint64(0xFFFFFFFF)
    w = 8 if wide else 4
    bad_id = False
    bad_len = False
    payload = 0
    for s in range(n):
        e = entries[s]
        if wide:
            sy, x, y = _u64(e, 0), _u64(e, 8), _u64(e, 16)
        else:
            sy, x, y = _u32(e, 0), _u32(e, 4), _u32(e, 8)
        symbol[s] = np.int64(sy)
        a[s] = np.int64(x)
        b[s] = -1 if y == none else np.int64(y)
        if x >= top or (y >= top and y != none):
            bad_id = True
        if variable:
            la = np.int64(_u32(e, 3 * w))
            lb = np.int64(_u32(e, 3 * w + 4))
            len_a[s] = la
            len_b[s] = lb
            L = max(la, lb)
            if L > width or (y == none and lb != 0):
                bad_len = True
            payload += L
    if not variable:
        payload = n * width
    status = BAD_ID if bad_id else (BAD_LENGTH if bad_len else 0)
    return symbol, a, b, len_a, len_b, payload, status


@numba.njit(cache=True, nogil=True)
def packed_rows(len_a, len_b, base):  # pragma: no cover - compiled
    """``(address, length)`` of payloads packed end to end from the address ``base``, one a
    symbol as long as its longer record: ``length = np.maximum(len_a, len_b)`` and ``address =
    base + np.cumsum(length) - length``, in one pass (the numpy expression takes four)."""
    n = len_a.shape[0]
    addr = np.empty(n, dtype=np.int64)
    plen = np.empty(n, dtype=np.int64)
    at = base
    for s in range(n):
        L = max(len_a[s], len_b[s])
        addr[s] = at
        plen[s] = L
        at += L
    return addr, plen


@numba.njit(cache=True, nogil=True)
def packed_layout(key, lengths):  # pragma: no cover - compiled
    """``(order, offsets)`` of records laid end to end by increasing ``key``, ties in row order:
    ``order = np.argsort(key, kind="stable")`` (the rows in the order they lie) and ``offsets[r]``
    where row ``r`` starts, ``offsets[order] = np.cumsum(lengths[order]) - lengths[order]``. One
    counting sort over the keys present (a numpy ``argsort`` took 0.27 ms for 12,500 records)."""
    n = key.shape[0]
    order = np.empty(n, dtype=np.int64)
    offsets = np.empty(n, dtype=np.int64)
    if n == 0:
        return order, offsets
    lo = np.int64(key[0])
    hi = lo
    for r in range(n):
        k = np.int64(key[r])
        lo = min(lo, k)
        hi = max(hi, k)
    count = np.zeros(hi - lo + 1, dtype=np.int64)
    size = np.zeros(hi - lo + 1, dtype=np.int64)
    for r in range(n):
        k = np.int64(key[r]) - lo
        count[k] += 1
        size[k] += lengths[r]
    rank = 0
    at = 0
    for k in range(hi - lo + 1):  # from counts and bytes to where each key's rows start
        c, b = count[k], size[k]
        count[k], size[k] = rank, at
        rank += c
        at += b
    for r in range(n):
        k = np.int64(key[r]) - lo
        order[count[k]] = r
        offsets[r] = size[k]
        count[k] += 1
        size[k] += lengths[r]
    return order, offsets


#: The fields of a row of :func:`row_table`: destination address, zeroed up to, cache record
#: address, its length, payload address, its length (-1: none), bytes kept, row (-1: skipped).
ROW_FIELDS = 8


@numba.njit(cache=True, nogil=True)
def row_table(  # pragma: no cover - compiled
    order, psym, src, dst, oplen, olen, cbase, coff, clen, obase, paddr, plen, W
):
    """The operations of the rows of a packed new batch (the first ``n = len(order)`` of
    :func:`peel_ops`' operations, one a row and independent) as one ``(n, ROW_FIELDS)`` table in
    the order the rows lie (``order``, :attr:`coded_shuffle.codec.Cache.order`), every row and
    source given by address: :func:`apply_table` then reads the table in order, where
    :func:`apply_ops_at` looks each address up in four tables by row, in no order. On the token
    documents of ``benchmarks/variable_coding.py`` the table takes 0.2 to 0.3 ms a worker and the
    row operations with it 1.85 to 1.89 ms, against 1.97 to 2.33 ms with the operations put in
    the rows' order and their addresses looked up as they run (fixed records: 1.95 to 2.02 ms).
    Row ``order[t]``
    starts at ``obase`` plus the lengths ``olen`` of the rows before it in that order. A row's
    source is a cache record (``cbase + coff``, ``clen``) or none, as :func:`peel_ops` makes them.
    """
    n = order.shape[0]
    table = np.empty((n, ROW_FIELDS), dtype=np.int64)
    at = obase
    for t in range(n):
        i = order[t]
        e = table[t]
        e[0] = at
        at += olen[i]
        if dst[i] < 0:  # written by a later round
            e[7] = -1
            continue
        L = oplen[i]
        if L < 0 or L > W:
            L = W
        e[1] = max(L, olen[i])
        c = src[i]
        e[2] = cbase + coff[c >> 2] if c >= 0 else 0
        e[3] = clen[c >> 2] if c >= 0 else 0
        p = psym[i]
        e[4] = paddr[p] if p >= 0 else 0
        e[5] = plen[p] if p >= 0 else -1
        e[6] = L
        e[7] = i
    return table


@numba.njit(cache=True, nogil=True)
def apply_table(table, sums, keys, lo, hi):  # pragma: no cover - compiled
    """The operations of rows ``[lo, hi)`` of a :func:`row_table`: each row ``dst = payload ^
    source`` cut to its bytes kept, zeroed past them up to its end, as :func:`apply_ops_at`
    does, the source record of the row :data:`_AHEAD_CACHE` further on prefetched (its first
    two lines). With ``sums`` non-empty a row with a payload gets its checksum there, at its row."""
    check = sums.shape[0] > 0
    for t in range(lo, hi):
        k = t + _AHEAD_CACHE
        if k < hi and table[k, 7] >= 0 and table[k, 2] != 0:
            _prefetch_at(table[k, 2])
            _prefetch_at(table[k, 2] + 64)
        e = table[t]
        r = e[7]
        if r < 0:
            continue
        y, end, x, L = e[0], e[1], e[2], e[6]
        X = min(e[3], L)
        P = 0 if e[5] < 0 else min(e[5], L)
        z = e[4]
        _xor_span(y, end, z, P, x, X)
        if check and e[5] >= 0:
            sums[r] = _row_checksum(numba.carray(_bytes_at(y), L), L, keys)


@numba.njit(cache=True, nogil=True)
def apply_ops_at(  # pragma: no cover - compiled
    transit, cbase, coff, clen, obase, ooff, olen, oend, paddr, plen, psym, src, dst, oplen, sums, keys,
    lo, hi,
):
    """:func:`apply_ops` over records of many sizes, every row given by address and length.

    Record ``r`` of the cache is the ``clen[r]`` bytes at the address ``cbase + coff[r]``, row
    ``r`` of the new batch the ``olen[r]`` bytes at ``obase + ooff[r]``, the payload row of
    symbol ``p`` the ``plen[p]`` bytes at ``paddr[p]`` (a packed frame's payload where it was
    received, or a padded row); each is followed by zeros as far as it is read (the bytes past
    it may be another record's: none is read or written past its length). The buffers must
    outlive the call. Each operation is that of :func:`apply_ops`, ``dst = payload[psym] ^ src``
    cut to ``oplen``, the rest of the row zeroed: of a row of the new batch up to ``oend[r]``
    (its length in a packed buffer; in rows of the width, the length past which the row is
    already zero), of a transit row (``transit``, of the width ``W``) to ``W``. (Of a packed batch,
    the rows go through :func:`row_table` and :func:`apply_table` instead, and only the steps to
    transit points and the later rounds come here.) The first two lines of the cache
    record of the operation :data:`_AHEAD_CACHE` further on are prefetched (2 to 5 % faster on
    lognormal token documents when the cache was read in no order; every line of every record
    prefetched ran 2 to 4 % slower than nothing, ``benchmarks/variable_coding.py
    --decode-only``). With ``sums``
    non-empty, a decoded row of the new batch (``psym >= 0``, ``dst`` in the new batch) gets its
    checksum there (:func:`checksum_rows` of its ``oplen`` bytes) while hot.
    """
    W = transit.shape[1]
    check = sums.shape[0] > 0
    tbase = transit.ctypes.data
    for i in range(lo, hi):
        k = i + _AHEAD_CACHE
        if k < hi and dst[k] >= 0:  # the source of an operation without a destination is unset
            c = src[k]
            if c >= 0 and c & 3 == CACHE:
                _prefetch_at(cbase + coff[c >> 2])
                _prefetch_at(cbase + coff[c >> 2] + 64)
        d = dst[i]
        if d < 0:
            continue
        L = oplen[i]
        if L < 0 or L > W:
            L = W
        if d & 3 == OUT:
            end = max(L, oend[d >> 2])
            y = obase + ooff[d >> 2]
        else:
            end = W
            y = tbase + (d >> 2) * W
        p = psym[i]
        c = src[i]
        P = 0 if p < 0 else min(plen[p], L)
        z = paddr[p] if p >= 0 else 0
        x = 0
        X = 0
        if c >= 0:
            if c & 3 == CACHE:
                X, x = min(clen[c >> 2], L), cbase + coff[c >> 2]
            elif c & 3 == OUT:
                X, x = min(olen[c >> 2], L), obase + ooff[c >> 2]
            else:
                X, x = L, tbase + (c >> 2) * W
        _xor_span(y, end, z, P, x, X)
        if check and p >= 0 and d & 3 == OUT:
            sums[d >> 2] = _row_checksum(numba.carray(_bytes_at(y), L), L, keys)


load_light(globals())  # the cached machine code loads without numba's compiler (coded_shuffle._jit)
