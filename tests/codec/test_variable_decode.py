"""Decoding records of many sizes: the payloads read where they were received, each row only up
to its length, checksummed in the same pass, against the plain row-by-row decoding.

The reference (``_decode_reference`` of ``test_codec.py``) unpacks every payload to the full
width and XORs, cuts and checksums one row at a time in numpy and plain Python.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from coded_shuffle.codec import (
    FRAME_HEADER_BYTES,
    checksum_reference,
    decode_worker,
    encode_plan,
    entry_bytes,
    load_dataset,
    parse_frame,
)
from coded_shuffle.codec.decode import _merge_frames, _payload_at
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery
from tests.codec.test_codec import _decode_reference


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261205)


def _records(rng: np.random.Generator, N: int, B: int) -> list[bytes]:
    """``N`` random records of 0 to ``B`` bytes, both ends among them."""
    sizes = rng.integers(0, B + 1, size=N)
    sizes[:2] = (0, B)
    return [rng.bytes(int(n)) for n in rng.permutation(sizes)]


def _damaged(rng: np.random.Generator, frame: np.ndarray) -> np.ndarray:
    """``frame`` with payload bytes flipped and the shorter length of a few entries changed (to
    any value up to the longer, so the payload size holds), its header checksum made anew."""
    f = parse_frame(frame)
    bad = frame.copy()
    start = bad.size - f.payload_bytes
    if f.payload_bytes:
        hit = rng.integers(start, bad.size, size=4)
        bad[hit] ^= rng.integers(1, 256, size=4).astype(np.uint8)
    size = entry_bytes(f.flags)[0]
    for s in rng.integers(0, f.n_symbols, size=3).tolist():
        la, lb = int(f.len_a[s]), int(f.len_b[s])
        if f.b[s] < 0:
            continue
        field = FRAME_HEADER_BYTES + s * size + (16 if la >= lb else 12)  # the shorter's field
        bad[field : field + 4] = np.frombuffer(
            int(rng.integers(0, max(la, lb) + 1)).to_bytes(4, "little"), np.uint8
        )
    head = bad[:start].copy()
    head[32:36] = 0
    bad[32:36] = np.frombuffer(zlib.crc32(head.data).to_bytes(4, "little"), np.uint8)
    assert parse_frame(bad).n_symbols == f.n_symbols  # still a well-formed frame
    return bad


def _check(cache, given, raw, need, checksums, worker, out, out_lengths=None):
    """Decode ``given`` (the frames ``raw``, as bytes or parsed, unpacked or not) into ``out`` and
    compare the bytes, lengths, decoded, missing and bad ids with the reference's of ``raw``."""
    res = decode_worker(
        cache, given, need=need, worker=worker, checksums=checksums, out=out, out_lengths=out_lengths
    )
    parsed = [parse_frame(f) for f in raw]
    want, want_len, decoded, missing = _decode_reference(cache, _merge_frames(parsed), need)
    assert res.cache.data.tobytes() == want.tobytes()
    assert res.cache.lengths.tolist() == want_len.tolist()
    assert res.decoded.tolist() == decoded and res.missing.tolist() == missing
    rows = np.searchsorted(res.cache.ids, decoded)
    sums = [checksum_reference(want[r, :L].tobytes()) for r, L in zip(rows, want_len[rows], strict=True)]
    assert res.bad.tolist() == [p for p, h in zip(decoded, sums, strict=True) if h != int(checksums[p])]
    return res


def test_variable_decode_matches_reference_intact_and_damaged(rng):
    # Several frames (the addresses of each frame's entries gathered), chains of several rounds,
    # widths 1 to 61; an 'out' full of stale bytes, so every row's padding must be written.
    rounds = flagged = 0
    for K, N, B in ((3, 40, 1), (9, 400, 61), (5, 200, 17)):
        p0, p1, p2 = (epoch_placement(N, K, seed=K, epoch=t) for t in (0, 1, 2))
        ds = load_dataset(_records(rng, N, B))
        plan = plan_delivery(p0, p1, sizes=ds.lengths)
        frames = encode_plan(plan, ds, epoch=1, max_frame_bytes=8 * B)
        assert len(frames) > 1
        damaged = [_damaged(rng, f) for f in frames]
        for k in range(K):
            cache = ds.cache(p0.batch(k))
            need = p1.batch(k)
            packed = [parse_frame(f, unpack=False) for f in frames]
            assert all(f.packed is not None and f.payload.size == 0 for f in packed)
            unpacked = [parse_frame(f) for f in frames]
            for given, raw in ((frames, frames), (unpacked, frames), (packed, frames), (damaged, damaged),
                               (frames[:1], frames[:1])):  # fmt: skip
                out = np.full((need.size, B), 0xA5, dtype=np.uint8)
                res = _check(cache, given, raw, need, ds.checksums, k, out)
                rounds = max(rounds, res.rounds)
                flagged += res.bad.size
                # a recycled cache (another batch's records, zero past their lengths): each row
                # zeroed only up to the old record's end, the bytes the same
                old = ds.cache(p2.batch(k))
                out, zeroed = old.data[: need.size].copy(), old.lengths[: need.size]
                assert (zeroed > 0).any()
                _check(cache, given, raw, need, ds.checksums, k, out, zeroed)
                # the cache packed: the new records packed into a buffer of stale bytes, none
                # written past them
                buf = np.full(int(ds.lengths[need].sum()) + 64, 0xA5, dtype=np.uint8)
                res = _check(ds.cache(p0.batch(k), packed=True), given, raw, need, ds.checksums, k, buf)
                assert res.cache.is_packed and res.cache.buffer is buf
                assert (buf[res.cache.nbytes :] == 0xA5).all()
            res = decode_worker(cache, frames, need=need, worker=k, checksums=ds.checksums)
            assert res.ok and np.array_equal(res.cache.data, ds.data[need])
    assert rounds >= 2 and flagged > 0


def test_variable_decode_without_checksums_and_nothing_received(rng):
    ds = load_dataset(_records(rng, 30, 9))
    p0, p1 = (epoch_placement(30, 3, seed=1, epoch=t) for t in (0, 1))
    frames = encode_plan(plan_delivery(p0, p1, sizes=ds.lengths), ds, epoch=1)
    cache = ds.cache(p0.batch(1))
    res = decode_worker(cache, frames, need=p1.batch(1), worker=1)
    assert res.ok and res.verified == 0 and np.array_equal(res.cache.data, ds.data[p1.batch(1)])
    res = decode_worker(cache, [], need=p1.batch(1), worker=1, checksums=ds.checksums)
    kept = np.isin(p1.batch(1), p0.batch(1))
    assert np.array_equal(res.cache.data[kept], ds.data[p1.batch(1)[kept]])
    assert not res.cache.data[~kept].any() and res.missing.tolist() == p1.batch(1)[~kept].tolist()


def test_parse_frame_unpack_exceptions(rng):
    plan = plan_delivery(*(epoch_placement(6, 2, seed=0, epoch=t) for t in (0, 1)))
    frame = encode_plan(plan, load_dataset(_records(rng, 6, 5)), epoch=1)[0]
    with pytest.raises(TypeError, match="Argument 'unpack' must be a bool, not int"):
        parse_frame(frame, unpack=1)
    fixed = parse_frame(encode_plan(plan, load_dataset(np.zeros((6, 4), np.uint8)), epoch=1)[0], unpack=False)
    assert fixed.packed is None and fixed.payload.shape == (fixed.n_symbols, 4)  # fixed rows are views


def test_out_lengths_are_checked(rng):
    ds = load_dataset(_records(rng, 30, 9))
    p0, p1 = (epoch_placement(30, 3, seed=1, epoch=t) for t in (0, 1))
    frames = encode_plan(plan_delivery(p0, p1, sizes=ds.lengths), ds, epoch=1)
    cache, need = ds.cache(p0.batch(1)), p1.batch(1)
    out = np.zeros((need.size, 9), dtype=np.uint8)
    for bad in (np.full(need.size, 10), np.full(need.size, -1), np.zeros(need.size + 1, np.int64)):
        with pytest.raises(ValueError, match="'out_lengths' must give a length in \\[0, 9\\]"):
            decode_worker(cache, frames, need=need, worker=1, out=out, out_lengths=bad)
    with pytest.raises(ValueError, match="'out_lengths' needs the buffer 'out'"):
        decode_worker(cache, frames, need=need, worker=1, out_lengths=np.zeros(need.size, np.int64))
    none = np.zeros(need.size, np.int64)
    res = decode_worker(cache, frames, need=need, worker=1, out=out, out_lengths=none)
    assert res.ok and np.array_equal(res.cache.data, ds.data[need])


def test_payload_rows_found_by_address(rng):
    # Each packed payload, found by its address and length (one compiled pass over the entries),
    # is the row parse_frame unpacks to the full width, cut at the longer of the two records.
    ds = load_dataset(_records(rng, 40, 11))
    plan = plan_delivery(*(epoch_placement(40, 3, seed=2, epoch=t) for t in (0, 1)), sizes=ds.lengths)
    (frame,) = encode_plan(plan, ds, epoch=1)
    packed = parse_frame(frame, unpack=False)
    addr, plen, buf = _payload_at(packed)
    rows = parse_frame(frame).payload
    pairs = zip(packed.len_a.tolist(), packed.len_b.tolist(), strict=True)
    assert plen.tolist() == [max(x, y) for x, y in pairs]
    base = buf.ctypes.data
    for s in range(packed.n_symbols):
        at = int(addr[s]) - base
        assert 0 <= at and at + int(plen[s]) <= buf.size
        assert bytes(buf[at : at + int(plen[s])]) == bytes(rows[s, : int(plen[s])])
        assert not rows[s, int(plen[s]) :].any()
