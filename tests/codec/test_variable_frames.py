"""Known-answer frame of records of many sizes paired by size (wire version 2, flag VARIABLE).

The shuffle, its pairs and its cycle are worked out by hand below; the frame is rebuilt byte for
byte by :func:`variable_frame_reference`, written here from docs/wire-format.md with struct and
zlib alone (no numpy, no library code), and the library must write the frozen bytes.
"""

from __future__ import annotations

import hashlib
import struct
import zlib

from coded_shuffle.codec import FLAG_VARIABLE, PAIRS_VERSION, decode_worker, encode_plan, load_dataset
from coded_shuffle.orders import placement_from_owner
from coded_shuffle.plan import plan_delivery

# K = 3, ten records. Groups (holder -> receiver), longest first:
#   0 -> 1: records 1 (17 B), 2 (9 B), 0 (5 B)     1 -> 0: records 4 (12 B), 5 (4 B)
#   0 -> 2: record 3 (3 B)                         2 -> 0: records 7 (11 B), 8 (2 B)
#   1 -> 2: record 6 (7 B)                         2 -> 1: none;  record 9 stays on worker 2
# Pairs: 1 + 4 and 2 + 5 (workers 0 and 1), 3 + 7 (workers 0 and 2). Leftovers 0 (0 -> 1),
# 6 (1 -> 2) and 8 (2 -> 0) form the cycle 0 -> 1 -> 2 -> 0: symbols 0 + 6 and 6 + 8, read by all.
OWNER_T = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
OWNER_T1 = [1, 1, 1, 2, 0, 0, 2, 0, 0, 2]
LENGTHS = [5, 17, 9, 3, 12, 4, 7, 11, 2, 6]
SYMBOLS = [(1, 4), (2, 5), (3, 7), (0, 6), (6, 8)]
RUNS = [(0, 0, 5), (1, 0, 2), (1, 3, 2), (2, 2, 3)]  # (worker, first, count), by hand
EPOCH = 7
#: Payload 17 + 9 + 11 + 7 + 7 = 51 bytes; pairing regardless of size would pair 0 + 4 (12 B)
#: and 1 + 5 (17 B) instead of 1 + 4 (17 B) and 2 + 5 (9 B).
FROZEN = (
    "435348460200010007000000000000000500000011000000330000000000000096f04c5104000000"
    "000000000100000004000000110000000c0000000100000002000000050000000900000004000000"
    "020000000300000007000000030000000b0000000300000000000000060000000500000007000000"
    "04000000060000000800000007000000020000000000000000000000050000000100000000000000"
    "0200000001000000030000000200000002000000020000000300000000000000d78150a0d84ea79a"
    "04c55ad3659052d36e9032a23c9f9f151ab9d8d45101d3d94c2816e88956cd84bc6c29c1fb78e3d9"
    "b929c1"
)


def record(n: int) -> bytes:
    return hashlib.sha256(b"coded_shuffle variable kat record %d" % n).digest()[: LENGTHS[n]]


def variable_frame_reference(records, symbols, runs, *, epoch) -> bytes:
    """A frame of pairs of variable-length records, from docs/wire-format.md: a 40-byte header
    (magic, version 2, flags 1, epoch, symbols, widest record, payload bytes, CRC-32 of the
    framing with its own field zero, index rows), one entry a symbol (symbol, a, b, len_a,
    len_b as little-endian u32), the receiver index (worker, first, count), zeros to a multiple of
    8, then each symbol's XOR over the longer length (the shorter record zero-padded)."""
    entries = b"".join(
        struct.pack("<IIIII", s, a, b, len(records[a]), len(records[b])) for s, (a, b) in enumerate(symbols)
    )
    index = b"".join(struct.pack("<III", *row) for row in runs)
    body = b""
    for a, b in symbols:
        n = max(len(records[a]), len(records[b]))
        x, y = records[a].ljust(n, b"\0"), records[b].ljust(n, b"\0")
        body += bytes(u ^ v for u, v in zip(x, y, strict=True))
    width = max(len(r) for r in records)
    head = struct.pack("<4sHHQIIQII", b"CSHF", 2, 1, epoch, len(symbols), width, len(body), 0, len(runs))
    framing = head + entries + index
    framing += b"\0" * (-len(framing) % 8)
    crc = zlib.crc32(framing)
    return framing[:32] + struct.pack("<I", crc) + framing[36:] + body


def test_variable_frame_known_answer():
    records = [record(n) for n in range(10)]
    raw = bytes.fromhex(FROZEN)
    assert variable_frame_reference(records, SYMBOLS, RUNS, epoch=EPOCH) == raw
    assert (PAIRS_VERSION, FLAG_VARIABLE) == (2, 1)
    p0, p1 = placement_from_owner(OWNER_T, 3), placement_from_owner(OWNER_T1, 3)
    dataset = load_dataset(records)
    plan = plan_delivery(p0, p1, sizes=dataset.lengths)
    a, b, _ = plan.transmissions()
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == SYMBOLS
    (frame,) = encode_plan(plan, dataset, epoch=EPOCH)
    assert frame.tobytes() == raw
    for k in range(3):  # every worker rebuilds its new batch, record by record, from the frozen bytes
        need = p1.batch(k)
        res = decode_worker(
            dataset.cache(p0.batch(k)), [raw], need=need, worker=k, epoch=EPOCH, checksums=dataset.checksums
        )
        assert res.ok and [res.cache.record(int(n)) for n in need] == [records[int(n)] for n in need]


def test_frames_of_many_sizes_decode_alike_packed_or_parsed():
    """A worker's decoding unpacks only the entries addressed to it from frames it parses itself;
    frames given parsed (every payload unpacked), frames of no receiver index and frames cut
    small decode to the same bytes."""
    from coded_shuffle.codec import encode_plan_arrays, parse_frame

    records = [record(n) for n in range(10)]
    dataset = load_dataset(records)
    p0, p1 = placement_from_owner(OWNER_T, 3), placement_from_owner(OWNER_T1, 3)
    plan = plan_delivery(p0, p1, sizes=dataset.lengths)
    a, b, _ = plan.transmissions()
    deliveries = [
        encode_plan(plan, dataset, epoch=EPOCH),
        encode_plan(plan, dataset, epoch=EPOCH, max_frame_bytes=20),  # the symbols that fit 20 B
        [encode_plan_arrays(dataset, a, b, epoch=EPOCH)],  # no receiver index
    ]
    # each symbol as long as its longer record, a frame closed where the next would pass 20 B
    want: list[list[int]] = [[]]
    for x, y in zip(a.tolist(), b.tolist(), strict=True):
        size = max(len(records[x]), len(records[y]) if y >= 0 else 0)
        if want[-1] and sum(want[-1]) + size > 20:
            want.append([])
        want[-1].append(size)
    parsed = [parse_frame(f) for f in deliveries[1]]
    assert len(want) == 3
    assert [(f.n_symbols, f.payload_bytes) for f in parsed] == [(len(w), sum(w)) for w in want]
    assert all(f.packed is None for f in parsed)
    for frames in deliveries:
        for given in (frames, [parse_frame(f) for f in frames]):
            for k in range(3):
                need = p1.batch(k)
                res = decode_worker(
                    dataset.cache(p0.batch(k)), given, need=need, worker=k, checksums=dataset.checksums
                )
                assert res.ok and [res.cache.record(int(n)) for n in need] == [records[int(n)] for n in need]


def entries_frame(rows, *, flags, width, payload=None, body=None) -> bytes:
    """A frame of pairs whose entries are ``rows`` as given, true or not, from docs/wire-format.md
    with struct and zlib alone: ``(symbol, a, b)``, then ``(len_a, len_b)`` with flag 1, ids
    ``uint64`` with flag 2 (``uint32`` else); ``payload`` (the header's count, by default the
    longer lengths' sum) zero bytes of payload, or ``body``."""
    ids = "QQQ" if flags & 2 else "III"
    entries = b"".join(struct.pack("<" + ids + ("II" if flags & 1 else ""), *row) for row in rows)
    if payload is None:
        payload = sum(max(row[3], row[4]) for row in rows) if flags & 1 else len(rows) * width
    body = bytes(payload) if body is None else body
    head = struct.pack("<4sHHQIIQII", b"CSHF", 2, flags, 1, len(rows), width, payload, 0, 0)
    framing = head + entries + b"\0" * (-(len(head) + len(entries)) % 8)
    return framing[:32] + struct.pack("<I", zlib.crc32(framing)) + framing[36:] + body


def test_parse_frame_rejects_entries_that_lie():
    """Entries under a valid checksum whose ids or lengths cannot be true: each frame refused, an
    id out of range named before lengths, and entries at the limits read as written."""
    import pytest

    from coded_shuffle.codec import parse_frame
    from coded_shuffle.errors import DecodeError

    none32, none64, top = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF, 1 << 63
    lies = [
        ("record lengths exceed", [(0, 1, 2, 9, 3)], 1),  # len_a past the width 8
        ("record lengths exceed", [(0, 1, 2, 3, 4), (1, 5, 2, 3, 9)], 1),  # len_b past it
        ("record lengths exceed", [(0, 1, none32, 3, 1)], 1),  # a lone point with a length of b
        ("point id out of range", [(0, top, 2, 3, 4)], 3),  # a 64-bit id of 2**63
        ("point id out of range", [(0, 1, none64 - 1, 3, 4)], 3),  # b above 2**63, not "none"
        ("point id out of range", [(0, top, 2)], 2),  # fixed records, 64-bit ids
        ("point id out of range", [(0, 1, none64, 9, 9), (1, 1, top + 5, 1, 1)], 3),  # the id first
    ]
    for message, rows, flags in lies:
        with pytest.raises(DecodeError, match=message):
            parse_frame(entries_frame(rows, flags=flags, width=8))
    rows = [(0, 1, 2, 3, 4), (1, 5, none32, 6, 0)]  # the entries say 4 + 6 bytes of payload
    for payload in (9, 11):
        with pytest.raises(DecodeError, match=f"header says {payload}, entries say 10"):
            parse_frame(entries_frame(rows, flags=1, width=8, payload=payload))
    with pytest.raises(DecodeError, match="header says 10, entries say 10"):  # one byte short
        parse_frame(entries_frame(rows, flags=1, width=8, body=bytes(9)))
    wide = [(top - 1, top - 1, none64, 8, 0), (7, 0, 1 << 40, 0, 8)]
    f = parse_frame(entries_frame(wide, flags=3, width=8))
    assert (f.symbol.tolist(), f.a.tolist(), f.b.tolist()) == ([top - 1, 7], [top - 1, 0], [-1, 1 << 40])
    assert (f.len_a.tolist(), f.len_b.tolist(), f.payload_bytes) == ([8, 0], [0, 8], 16)
    f = parse_frame(entries_frame([(3, none32 - 1, none32)], flags=0, width=4))
    assert (f.symbol.tolist(), f.a.tolist(), f.b.tolist(), f.len_a) == ([3], [none32 - 1], [-1], None)


def test_parse_pairs_equals_its_numpy_statements():
    """The compiled read of a frame's entries against the numpy expressions its docstring states,
    on random entries of every layout, true and lying (ids of 2**63 and more, lengths past the
    width, a lone point with a length of ``b``)."""
    import numpy as np

    from coded_shuffle import _codec_kernels as kern

    rng = np.random.default_rng(5)
    for flags in (0, 1, 2, 3):
        idt = "<u8" if flags & 2 else "<u4"
        names = ["symbol", "a", "b"] + (["len_a", "len_b"] if flags & 1 else [])
        edt = np.dtype([(n, idt if n in ("symbol", "a", "b") else "<u4") for n in names])
        none = np.iinfo(idt).max
        for case in range(40):
            n, width = int(rng.integers(0, 30)), 64
            e = np.zeros(n, edt)
            e["symbol"], e["a"] = rng.integers(0, 1000, n), rng.integers(0, 1000, n)
            e["b"] = np.where(rng.random(n) < 0.3, none, rng.integers(0, 1000, n))
            if flags & 1:
                e["len_a"] = rng.integers(0, width + 1, n)
                e["len_b"] = np.where(e["b"] == none, 0, rng.integers(0, width + 1, n))
            lie = case % 4 if n else 0  # 1: an id past 2**63, 2: a length past the width, 3: both
            if lie & 1 and flags & 2:
                far = int(rng.integers(1 << 63, none, dtype=np.uint64))  # not "none" itself
                e[["a", "b"][case % 2]][int(rng.integers(n))] = far
            if lie & 2 and flags & 1:
                s = int(rng.integers(n))
                e["len_b" if e["b"][s] == none or case % 3 else "len_a"][s] = width + 1 + case
            table = e.view(np.uint8).reshape(n, edt.itemsize)
            table.flags.writeable = False
            got = kern.parse_pairs(table, bool(flags & 2), bool(flags & 1), width)
            symbol, a, b, len_a, len_b, payload, status = got
            want_a = e["a"].astype(np.int64)
            want_b = np.where(e["b"] == none, -1, e["b"].astype(np.int64))
            assert np.array_equal(symbol, e["symbol"].astype(np.int64))
            assert np.array_equal(a, want_a) and np.array_equal(b, want_b)
            bad_id = n and (int(want_a.min()) < 0 or int(want_b.min()) < -1)
            if flags & 1:
                la, lb = e["len_a"].astype(np.int64), e["len_b"].astype(np.int64)
                assert np.array_equal(len_a, la) and np.array_equal(len_b, lb)
                plen = np.maximum(la, lb)
                bad_len = n and (int(plen.max()) > width or bool(np.any((want_b < 0) & (lb != 0))))
                assert payload == int(plen.sum())
            else:
                assert len_a.size == len_b.size == 0 and payload == n * width
                bad_len = False
            assert status == (kern.BAD_ID if bad_id else kern.BAD_LENGTH if bad_len else 0)
            assert status == 0 or lie


def test_parse_frame_of_a_strided_array():
    """A frame held every other byte of a larger array parses as the frame itself (once copied)."""
    import numpy as np

    from coded_shuffle.codec import parse_frame

    raw = np.frombuffer(bytes.fromhex(FROZEN), dtype=np.uint8)
    spread = np.zeros(2 * raw.size, np.uint8)
    spread[::2] = raw
    got, want = parse_frame(spread[::2], epoch=EPOCH), parse_frame(raw, epoch=EPOCH)
    pairs = list(zip(got.a.tolist(), got.b.tolist(), strict=True))
    assert got.symbol.tolist() == list(range(len(SYMBOLS))) and pairs == SYMBOLS
    assert got.payload.tolist() == want.payload.tolist() and got.runs.tolist() == [list(r) for r in RUNS]
