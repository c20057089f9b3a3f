"""A cache of records of many sizes packed end to end, longest first (``Cache.packed``): its
records, its rows, its checks, and the decoder's buffer of the new records when the cache is
packed."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import Cache, decode_worker, encode_held, encode_plan, load_dataset
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery

RECORDS = [b"ab", b"", b"cdefg", b"h", b"ijk"]


def test_packed_cache_holds_the_records_end_to_end():
    ds = load_dataset(RECORDS)
    rows = ds.cache([4, 0, 2, 1])
    packed = ds.cache([4, 0, 2, 1], packed=True)
    assert packed.is_packed and not rows.is_packed
    # longest first, records of one length in row order: ids 2, 4, 0, 1 (rows 2, 3, 0, 1)
    assert packed.buffer.tobytes() == b"cdefg" + b"ijk" + b"ab" + b""
    assert packed.offsets.tolist() == [8, 10, 0, 5] and packed.order.tolist() == [2, 3, 0, 1]
    assert packed.nbytes == rows.nbytes == 10
    assert [packed.record(n) for n in (0, 1, 2, 4)] == [RECORDS[n] for n in (0, 1, 2, 4)]
    assert bytes(packed.record_at(3)) == b"ijk" and packed.width == rows.width == 5
    assert np.array_equal(packed.data, rows.data)  # the rows, zero-padded
    assert np.array_equal(packed.checksums(), rows.checksums())
    again = rows.pack()
    assert again.is_packed and again.buffer.tobytes() == packed.buffer.tobytes()
    assert packed.pack() is packed
    fixed = load_dataset(np.arange(6, dtype=np.uint8).reshape(3, 2)).cache([0, 2])
    assert fixed.pack() is fixed and not fixed.is_packed  # rows of one size are packed already
    with pytest.raises(KeyError):
        packed.record(3)


def _layout_by_sorting(lengths, width):
    """The packed layout restated: rows by decreasing length (by the plan's key, 0.034 % steps,
    for a width of 64 KiB or more), ties in row order, end to end."""
    if width < 1 << 16:
        key = [-int(n) for n in lengths]
    else:
        key = [-round(2048 * np.log2(float(n) + 1.0)) for n in lengths]
    order = sorted(range(len(lengths)), key=lambda r: (key[r], r))
    offsets, at = [0] * len(lengths), 0
    for r in order:
        offsets[r] = at
        at += int(lengths[r])
    return order, offsets


@pytest.mark.parametrize("width", [40, 1 << 20])
def test_packed_layout_is_longest_first(width):
    rng = np.random.default_rng(width)
    for n in (0, 1, 2, 7, 300):
        if width < 1 << 16:
            lengths = rng.integers(0, width + 1, n)
        else:  # sizes within 0.034 % of each other: one key, kept in row order
            lengths = rng.choice([0, 70_000, 70_001, 70_010, 300_000, 1 << 20], n)
        cache = Cache.packed(np.arange(n), np.zeros(int(lengths.sum()), np.uint8), lengths, width)
        order, offsets = _layout_by_sorting(lengths, width)
        assert cache.order.tolist() == order and cache.offsets.tolist() == offsets


def test_packed_cache_checks_its_buffer():
    ids, lens = np.array([0, 1]), np.array([2, 3])
    with pytest.raises(ValueError, match="'buffer' must hold the 2 records' 5 bytes, not 4"):
        Cache.packed(ids, np.zeros(4, np.uint8), lens, 3)
    with pytest.raises(ValueError, match="'buffer' must be a C-contiguous 1-D uint8 array"):
        Cache.packed(ids, np.zeros((1, 5), np.uint8), lens, 3)
    with pytest.raises(ValueError, match=r"'lengths' must lie in \[0, 3\], not \[2, 4\]"):
        Cache.packed(ids, np.zeros(9, np.uint8), np.array([2, 4]), 3)
    with pytest.raises(TypeError, match="Argument 'packed' must be a bool, not int"):
        load_dataset(RECORDS).cache([0], packed=1)


def test_decoding_a_packed_cache_checks_its_buffer():
    rng = np.random.default_rng(5)
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, 30, 60)])
    p0, p1 = (epoch_placement(60, 3, seed=4, epoch=t) for t in (0, 1))
    frames = encode_plan(plan_delivery(p0, p1, sizes=ds.lengths), ds, epoch=1)
    cache, need = ds.cache(p0.batch(0), packed=True), p1.batch(0)
    total = int(ds.lengths[need].sum())
    for bad in (np.zeros(total - 1, np.uint8), np.zeros((1, total), np.uint8), cache.buffer):
        with pytest.raises(ValueError, match=f"'out' must be a .* 1-D uint8 array of at least {total} "):
            decode_worker(cache, frames, need=need, worker=0, out=bad)
    with pytest.raises(ValueError, match="'out_lengths' describes rows"):
        decode_worker(cache, frames, need=need, worker=0, out=np.zeros(total, np.uint8),
                      out_lengths=np.zeros(need.size, np.int64))  # fmt: skip
    out = np.zeros(total, np.uint8)
    res = decode_worker(cache, frames, need=need, worker=0, checksums=ds.checksums, out=out)
    assert res.ok and res.cache.is_packed and np.array_equal(res.cache.data, ds.data[need])
    longest_first = sorted(need.tolist(), key=lambda n: (-int(ds.lengths[n]), n))
    assert out.tobytes() == b"".join(ds.record(n) for n in longest_first)  # the layout, written
    # the next epoch decodes from the packed batch it made
    p2 = epoch_placement(60, 3, seed=4, epoch=2)
    frames2 = encode_plan(plan_delivery(p1, p2, sizes=ds.lengths), ds, epoch=2)
    res2 = decode_worker(res.cache, frames2, need=p2.batch(0), worker=0, epoch=2, checksums=ds.checksums)
    assert res2.ok and res2.cache.is_packed and np.array_equal(res2.cache.data, ds.data[p2.batch(0)])


def test_a_packed_cache_sends_the_frames_of_its_rows():
    # A peer's sends read from a packed cache are the frames read from the same records in rows.
    rng = np.random.default_rng(6)
    ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, 40, 50)])
    ids = np.arange(3, 50, 2)
    rows, packed = ds.cache(ids), ds.cache(ids, packed=True)
    want = np.array([41, 3, 17, 29, 5])
    for size in (60, 10**6):  # several frames, one frame
        got = encode_held(packed, want, epoch=4, max_frame_bytes=size)
        same = encode_held(rows, want, epoch=4, max_frame_bytes=size)
        assert len(got) == len(same) > (size == 60) and [bytes(f) for f in got] == [bytes(f) for f in same]
    with pytest.raises(KeyError):
        encode_held(packed, [2], epoch=4)
