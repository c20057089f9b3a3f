"""The term table of wire format version 5 (``coded_shuffle.codec.table``): its bit packing against
Python ints, the library's frames against the reference writer of ``tests/oracles.py``, the frames
of versions 3 and 4 still read, and the reader's refusals."""

import struct
import zlib

import numpy as np
import pytest

from coded_shuffle.codec import (
    FLAG_TERMS,
    FLAG_WIDE_IDS,
    FRAME_HEADER_BYTES,
    PACKED_TERMS_VERSION,
    RUN_BYTES,
    decode_terms,
    encode_terms,
    entry_bytes,
    frame_version,
    load_dataset,
    parse_frame,
    table,
)
from coded_shuffle.codec.table import pack_bits, packed_framing, table_widths, unpack_bits
from coded_shuffle.errors import DecodeError
from tests.oracles import (
    _bits,
    _unbits,
    packed_terms_frame_reference,
    read_packed_terms_frame_reference,
    terms_frame_reference,
)


def test_bits_are_packed_as_one_little_endian_number(rng):
    for width in range(65):
        for n in (0, 1, 7, 8, 9, 23):
            drawn = rng.integers(0, 2**64, n, dtype=np.uint64)
            values = [int(v) >> (64 - width) if width else 0 for v in drawn]  # of `width` bits
            raw = _bits(values, width)
            assert bytes(pack_bits(np.array(values, dtype=np.uint64), width)) == raw, (width, n)
            assert unpack_bits(np.frombuffer(raw, np.uint8), width, n).tolist() == values
            assert _unbits(raw, width, n) == values


def random_frame(rng, n_rows, n_sym, most, width=8, sized=False):
    data = rng.integers(0, 256, (n_rows, width), dtype=np.uint8)
    lens = rng.integers(1, width + 1, n_rows) if sized else np.full(n_rows, width)
    rows = [data[i, : lens[i]].tobytes() for i in range(n_rows)]
    counts = rng.integers(1, most + 1, size=n_sym)
    terms = np.concatenate([rng.choice(n_rows, size=c, replace=False) for c in counts])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    ds = load_dataset(rows if sized else np.frombuffer(b"".join(rows), np.uint8).reshape(n_rows, width))
    return rows, ds, offsets, terms


@pytest.mark.parametrize("sized", [False, True])
def test_frames_are_the_reference_writers(rng, sized):
    # ids of 17 bits (rows up to 70,000), counts of 1 to 4 terms (less one: 2 bits), an index
    rows, ds, offsets, terms = random_frame(rng, 70_000, 40, 4, sized=sized)
    wanter = rng.integers(0, 5, terms.size)
    (raw,) = encode_terms(ds, offsets, terms, epoch=4, wanter=wanter, K=5)
    lengths = [len(r) for r in rows] if sized else None
    parts = read_packed_terms_frame_reference(raw, lengths=lengths)
    assert parts["crc_ok"] and parts["table"][1:] == (2, 17)
    sent = sorted(tuple(t) for t in parts["terms"])
    assert sent == sorted(tuple(terms[offsets[s] : offsets[s + 1]].tolist()) for s in range(40))
    off = np.concatenate([[0], np.cumsum([len(t) for t in parts["terms"]])]).tolist()
    flat = [x for t in parts["terms"] for x in t]
    rebuilt = packed_terms_frame_reference(rows, off, flat, epoch=4, runs=parts["runs"], sized=sized)
    assert rebuilt == bytes(raw)
    f = parse_frame(raw, lengths=lengths)
    assert f.terms.tolist() == flat and f.offsets.tolist() == off and f.symbol.tolist() == list(range(40))
    assert f.header_bytes == packed_framing(40, len(parts["runs"]), len(flat), 2, 17)


def test_widths_of_a_table():
    assert table_widths(np.array([1, 1]), np.array([0, 0])) == (0, 1)  # one term each: no count bits
    assert table_widths(np.array([2]), np.array([2**40, 3])) == (1, 41)
    assert frame_version(FLAG_TERMS) == PACKED_TERMS_VERSION == 5
    # the table's module keeps its own copies of the wire's sizes (it sits below wire.py)
    assert (table._HEADER_BYTES, table._RUN_BYTES) == (FRAME_HEADER_BYTES, RUN_BYTES)
    assert table._FLAG_WIDE_IDS == FLAG_WIDE_IDS
    with pytest.raises(ValueError, match="'flags' must name a frame of pairs"):
        entry_bytes(FLAG_TERMS)


@pytest.mark.parametrize("sized", [False, True])
def test_frames_of_versions_3_and_4_are_still_read(rng, sized):
    rows, ds, offsets, terms = random_frame(rng, 30, 12, 4, sized=sized)
    lengths = [len(r) for r in rows] if sized else None
    old = terms_frame_reference(
        rows, offsets.tolist(), terms.tolist(), epoch=2, symbol=list(range(12)), sized=sized
    )  # fmt: skip
    assert old[4] == (4 if sized else 3)
    (new,) = encode_terms(ds, offsets, terms, epoch=2)
    f, g = parse_frame(old, lengths=lengths), parse_frame(new, lengths=lengths)
    assert f.terms.tolist() == g.terms.tolist() == terms.tolist() and f.offsets.tolist() == offsets.tolist()
    assert np.array_equal(f.payload, g.payload) and f.symbol.tolist() == list(range(12))
    held, need = np.arange(0, 30, 2), np.arange(30)
    res, want = (
        decode_terms(ds.cache(held), [x], need=need, worker=0, checksums=ds.checksums, lengths=ds.lengths)
        for x in (old, new)
    )
    assert res.decoded.tolist() == want.decoded.tolist() and res.decoded.size and res.bad.size == 0
    assert np.array_equal(res.cache.data, want.cache.data)


def resealed(raw, at, value, fmt):
    """``raw`` with ``value`` packed by ``fmt`` at ``at`` and the header CRC computed again over its
    framing, as a faulty writer would: a lie the CRC cannot see."""
    bad = bytearray(raw)
    struct.pack_into(fmt, bad, at, value)
    n_terms, cb, ib = struct.unpack_from("<IBB", bad, 40)
    n, runs = struct.unpack_from("<I", bad, 16)[0], struct.unpack_from("<I", bad, 36)[0]
    end = 48 + 12 * runs + (n * cb + 7) // 8 + (n_terms * ib + 7) // 8
    start = min(end + (-end % 8), len(bad))
    struct.pack_into("<I", bad, 32, 0)
    struct.pack_into("<I", bad, 32, zlib.crc32(bytes(bad[:start])))
    return bytes(bad)


def test_parse_frame_refuses_a_table_that_lies(rng):
    rows, ds, offsets, terms = random_frame(rng, 100, 30, 3)  # ids of 7 bits, 60 terms or so
    (raw,) = encode_terms(ds, offsets, terms, epoch=1)
    raw = bytes(raw)
    T = terms.size
    assert struct.unpack_from("<IBBH", raw, 40) == (T, 2, 7, 0)
    parse_frame(raw)
    cases = [
        (raw[:50], "shorter than its"),  # truncated in the table
        (raw[:40] + raw[40:44], "shorter than its"),  # truncated in the table's head
        (resealed(raw, 40, T + 1, "<I"), f"counts {T} terms, its head says {T + 1}"),  # one term more
        (resealed(raw, 44, 1, "<B"), f"its head says {T}"),  # counts of 1 bit: other counts
        (resealed(raw, 45, 15, "<B"), "padded with bits other than zero"),  # ids of 15 bits: the end moves
        (resealed(raw, 45, 0, "<B"), "ids of 0 bits"),
        (resealed(raw, 45, 65, "<B"), "ids of 65 bits"),
        (resealed(raw, 44, 33, "<B"), "counts of 33 bits"),
        (resealed(raw, 46, 1, "<H"), "reserved 1"),
        (resealed(raw, 4, 6, "<H"), "version 6; this reader reads versions 2 to 5 only"),
        (resealed(raw, 6, FLAG_TERMS | 2, "<H"), "do not belong to a frame of version 5"),  # 64-bit ids
    ]
    for bad, match in cases:
        with pytest.raises(DecodeError, match=match):
            parse_frame(bad)


def test_parse_frame_refuses_counts_the_head_does_not_state():
    # 4 terms of 3 bits fill 12 of 16 bits: a head saying 5 keeps the table's size, not its sum
    ds = load_dataset(np.arange(5 * 8, dtype=np.uint8).reshape(5, 8))
    (raw,) = encode_terms(ds, [0, 3, 4], [0, 2, 4, 1], epoch=7)
    with pytest.raises(DecodeError, match="counts 4 terms, its head says 5"):
        parse_frame(resealed(bytes(raw), 40, 5, "<I"))
    bad = bytearray(raw)
    bad[50] |= 0x80  # a bit past the last id
    with pytest.raises(DecodeError, match="header checksum"):
        parse_frame(bytes(bad))
    with pytest.raises(DecodeError, match="padded with bits other than zero"):
        parse_frame(resealed(bytes(bad), 6, FLAG_TERMS, "<H"))
