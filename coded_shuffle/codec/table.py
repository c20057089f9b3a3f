"""The term table of a frame of many-term symbols: which rows each symbol XORs (docs/wire-format.md).

Version 5 (written): after the 40-byte header a head of 8 bytes (``n_terms`` u32, the terms ``T``
of the frame; ``count_bits`` u8; ``id_bits`` u8; two zero bytes), the receiver index, then the
table: each symbol's count of terms less one at ``count_bits`` bits, then the ``T`` row ids at
``id_bits`` bits, the fewest that hold the frame's largest (:func:`pack_bits`; each part padded
to a byte with zero bits). A group symbol of three rows among 100,000 costs 2 + 3 x 17 bits.

Versions 3 and 4 (read only, frames written before): an entry ``(symbol u32, n_terms u32)`` a
symbol (``symbol`` u64 with ``FLAG_WIDE_IDS``), then the ids, u32 (u64), then the index.

The symbol number of versions 3 and 4 (the symbol's place in the plan's order) is read by no
decoder: a worker solves from the terms alone, so version 5 leaves it out and a frame's symbols
are numbered by their place in it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import DecodeError

#: Bytes of the head of a version 5 term table, after the frame header.
TABLE_HEAD_BYTES = 8
_TABLE_HEAD_DTYPE = np.dtype(
    [("n_terms", "<u4"), ("count_bits", "u1"), ("id_bits", "u1"), ("reserved", "<u2")]
)
assert _TABLE_HEAD_DTYPE.itemsize == TABLE_HEAD_BYTES
#: The widest count of terms less one (a symbol has at most 2**32 terms) and the widest row id.
MAX_COUNT_BITS, MAX_ID_BITS = 32, 64
_HEADER_BYTES = 40  # the frame header (wire.FRAME_HEADER_BYTES)
_RUN_BYTES = 12  # a row of the receiver index (wire.RUN_BYTES)
_FLAG_WIDE_IDS = 2  # wire.FLAG_WIDE_IDS
_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def pack_bits(values: object, width: int) -> np.ndarray:
    """``values`` (each below ``2**width``) end to end at ``width`` bits each, least significant
    bit first: value ``i`` is bits ``[i width, (i + 1) width)`` of the little-endian number the
    bytes make; ``ceil(n width / 8)`` bytes, the bits after the last value zero.

    Values ``r, r + 8, r + 16, ...`` start at the same bit of a byte and ``width`` bytes apart:
    each such class is shifted once and ORed in as rows of 8 bytes (and a ninth for what a shift
    pushes past 64 bits).

    Examples
    --------
    >>> pack_bits([1, 2, 3], 3).tolist()      # 0b011_010_001
    [209, 0]
    >>> int.from_bytes(bytes(pack_bits([5, 1], 17)), "little") == 5 | 1 << 17
    True
    """
    v = np.ascontiguousarray(values, dtype=np.uint64).reshape(-1)
    n = int(v.size)
    nbytes = (n * width + 7) // 8
    out = np.zeros(nbytes + 9, dtype=np.uint8)
    for r in range(min(8, n) if width else 0):
        part, m = v[r::8], (n - r + 7) // 8
        first, sh = r * width >> 3, (r * width) & 7
        low = (part << np.uint64(sh)).astype("<u8").view(np.uint8).reshape(m, 8)
        if width >= 8:  # the rows of a class do not overlap
            as_strided(out[first:], shape=(m, 8), strides=(width, 1))[...] |= low
        else:
            at = first + width * np.arange(m, dtype=np.int64)
            for k in range(8):
                out[at + k] |= low[:, k]
        if sh + width > 64:
            out[first + 8 :: width][:m] |= (part >> np.uint64(64 - sh)).astype(np.uint8)
    return out[:nbytes]


def unpack_bits(buf: np.ndarray, width: int, n: int) -> np.ndarray:
    """The ``n`` values of ``width`` bits that :func:`pack_bits` wrote into ``buf``, as ``uint64``
    (read by the same classes of 8).

    >>> unpack_bits(pack_bits([1, 2, 3], 3), 3, 3).tolist()
    [1, 2, 3]
    """
    out = np.zeros(n, dtype=np.uint64)
    if width == 0 or n == 0:
        return out
    padded = np.zeros(int(buf.shape[0]) + 9, dtype=np.uint8)
    padded[: buf.shape[0]] = buf
    mask = _ONES if width == 64 else (np.uint64(1) << np.uint64(width)) - np.uint64(1)
    for r in range(min(8, n)):
        m = (n - r + 7) // 8
        first, sh = r * width >> 3, (r * width) & 7
        rows = as_strided(padded[first:], shape=(m, 8), strides=(width, 1), writeable=False)
        word = np.ascontiguousarray(rows).view("<u8").reshape(m) >> np.uint64(sh)
        if sh + width > 64:
            word |= padded[first + 8 :: width][:m].astype(np.uint64) << np.uint64(64 - sh)
        out[r::8] = word & mask
    return out


def table_widths(counts: np.ndarray, terms: np.ndarray) -> tuple[int, int]:
    """``(count_bits, id_bits)`` of a version 5 table: the fewest bits of the largest count of
    terms less one (0 when every symbol has one term), and of the largest row id (at least 1).

    >>> table_widths(np.array([3, 3, 1]), np.array([5, 1, 2, 100_000, 7, 8, 9]))
    (2, 17)
    """
    most = int(counts.max(initial=1)) - 1
    return most.bit_length(), max(1, int(terms.max(initial=0)).bit_length())


def table_bytes(n: int, n_terms: int, count_bits: int, id_bits: int) -> int:
    """Bytes of a version 5 table of ``n`` symbols and ``n_terms`` terms (head and index apart)."""
    return (n * count_bits + 7) // 8 + (n_terms * id_bits + 7) // 8


def packed_framing(n: int, n_runs: int, n_terms: int, count_bits: int, id_bits: int) -> int:
    """Bytes before the payload of a version 5 frame: the header, the table's head, the receiver
    index of ``n_runs`` rows, the table, the padding to 8.

    >>> packed_framing(1, 3, 3, 2, 3)   # 40 + 8 + 36 + 1 + 2 = 87, padded
    88
    """
    end = _HEADER_BYTES + TABLE_HEAD_BYTES + n_runs * _RUN_BYTES
    end += table_bytes(n, n_terms, count_bits, id_bits)
    return end + (-end % 8)


def write_table(buf: np.ndarray, counts: np.ndarray, terms: np.ndarray, n_runs: int) -> int:
    """Write the head and the table of a version 5 frame into ``buf`` (the frame, zeroed up to
    its payload), the table after a receiver index of ``n_runs`` rows; the table's end."""
    count_bits, id_bits = table_widths(counts, terms)
    head = buf[_HEADER_BYTES : _HEADER_BYTES + TABLE_HEAD_BYTES].view(_TABLE_HEAD_DTYPE)
    head["n_terms"], head["count_bits"], head["id_bits"] = terms.size, count_bits, id_bits
    at = _HEADER_BYTES + TABLE_HEAD_BYTES + n_runs * _RUN_BYTES
    for values, width in ((counts - 1, count_bits), (terms, id_bits)):
        packed = pack_bits(values, width)
        buf[at : at + packed.size] = packed
        at += packed.size
    return at


class TermLayout(NamedTuple):
    """Where the parts of a frame of many-term symbols lie, read before its CRC is checked."""

    version: int
    n_terms: int
    index_at: int
    table_at: int
    end: int
    count_bits: int = 0
    id_bits: int = 0


def _short(raw: np.ndarray, need: int) -> DecodeError:
    return DecodeError(
        f"Frame rejected: {raw.shape[0]} bytes, shorter than its {need}-byte header and entries."
    )


def term_layout(raw: np.ndarray, version: int, flags: int, n: int, n_runs: int) -> TermLayout:
    """The layout of a frame of many-term symbols of ``version``: the counts its entries (3, 4)
    or its table's head (5) state, bounded by the frame's length (a lying count makes the frame
    short, and it is rejected as such)."""
    if version >= 5:
        head_end = _HEADER_BYTES + TABLE_HEAD_BYTES
        if raw.shape[0] < head_end:
            raise _short(raw, head_end)
        head = raw[_HEADER_BYTES:head_end].copy().view(_TABLE_HEAD_DTYPE)[0]
        T, cb, ib = int(head["n_terms"]), int(head["count_bits"]), int(head["id_bits"])
        if cb > MAX_COUNT_BITS or not 1 <= ib <= MAX_ID_BITS or int(head["reserved"]):
            raise DecodeError(
                f"Frame rejected: term table of counts of {cb} bits and ids of {ib} bits (at most "
                f"{MAX_COUNT_BITS} and 1 to {MAX_ID_BITS}), reserved {int(head['reserved'])}."
            )
        index_at = head_end
        table_at = index_at + n_runs * _RUN_BYTES
        return TermLayout(version, T, index_at, table_at, table_at + table_bytes(n, T, cb, ib), cb, ib)
    edt = _legacy_entry_dtype(flags)
    end = _HEADER_BYTES + n * edt.itemsize
    if raw.shape[0] < end:
        raise _short(raw, end)
    T = int(raw[_HEADER_BYTES:end].view(edt)["n_terms"].astype(np.int64).sum())
    index_at = end + T * _legacy_term_bytes(flags)
    return TermLayout(version, T, index_at, _HEADER_BYTES, index_at + n_runs * _RUN_BYTES)


def read_table(
    raw: np.ndarray, lay: TermLayout, flags: int, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(symbol, offsets, terms)`` (``int64``) of a frame of many-term symbols whose CRC holds:
    symbol ``s`` XORs the rows ``terms[offsets[s]:offsets[s + 1]]``; version 5 numbers its
    symbols by their place in the frame. A DecodeError if a count or an id is out of range."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    if lay.version >= 5:
        cut = lay.table_at + (n * lay.count_bits + 7) // 8
        counts = unpack_bits(raw[lay.table_at : cut], lay.count_bits, n).astype(np.int64) + 1
        ids = unpack_bits(raw[cut : lay.end], lay.id_bits, lay.n_terms)
        np.cumsum(counts, out=offsets[1:])
        if int(offsets[-1]) != lay.n_terms:
            raise DecodeError(
                f"Frame rejected: term table counts {int(offsets[-1])} terms, its head says {lay.n_terms}."
            )
        pad = raw[lay.end : lay.end + (-lay.end % 8)]
        if (
            not _zero_tail(raw[lay.table_at : cut], n * lay.count_bits)
            or not _zero_tail(raw[cut : lay.end], lay.n_terms * lay.id_bits)
            or pad.any()
        ):  # a width that lies moves the table's end
            raise DecodeError("Frame rejected: term table padded with bits other than zero.")
        symbol = np.arange(n, dtype=np.int64)
        terms = ids.astype(np.int64)  # an id of 64 bits at or above 2**63 turns negative: refused below
    else:
        edt = _legacy_entry_dtype(flags)
        entries = raw[_HEADER_BYTES : _HEADER_BYTES + n * edt.itemsize].view(edt)
        if n and int(entries["n_terms"].min()) < 1:
            raise DecodeError("Frame rejected: a symbol with no term.")
        np.cumsum(entries["n_terms"], out=offsets[1:])
        symbol = entries["symbol"].astype(np.int64)
        at = _HEADER_BYTES + n * edt.itemsize
        terms = raw[at : lay.index_at].view("<u8" if flags & _FLAG_WIDE_IDS else "<u4").astype(np.int64)
    if terms.size and int(terms.min()) < 0:
        raise DecodeError("Frame rejected: term id out of range.")
    return symbol, offsets, terms


def _zero_tail(field: np.ndarray, bits: int) -> bool:
    """Whether the bits of ``field`` after its first ``bits`` are zero."""
    return not field.size or bits % 8 == 0 or int(field[-1]) >> (bits % 8) == 0


def _legacy_entry_dtype(flags: int) -> np.dtype:
    """The entry ``(symbol, n_terms)`` of versions 3 and 4."""
    return np.dtype([("symbol", "<u8" if flags & _FLAG_WIDE_IDS else "<u4"), ("n_terms", "<u4")])


def _legacy_term_bytes(flags: int) -> int:
    """Bytes of one id of the term table of versions 3 and 4."""
    return 8 if flags & _FLAG_WIDE_IDS else 4
