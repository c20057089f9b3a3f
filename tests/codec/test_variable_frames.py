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
