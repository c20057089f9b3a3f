"""Tests of coded_shuffle.codec: records, checksums, encoding, the wire format and decoding."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.codec import (
    FLAG_REPAIR,
    FRAME_HEADER_BYTES,
    Cache,
    Dataset,
    checksum_reference,
    decode_worker,
    encode_plan,
    encode_plan_arrays,
    encode_symbols,
    frame_overhead,
    load_dataset,
    parse_frame,
    record_checksums,
)
from coded_shuffle.errors import DecodeError, IntegrityError
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import decoding_steps, plan_delivery, plan_from_matrix
from tests.cases import EXAMPLE_1, EXAMPLE_1_RECEIVER_RUNS, EXAMPLE_1_VALUES
from tests.oracles import frame_reference


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240611)


def _dataset(rng: np.random.Generator, N: int, B: int) -> Dataset:
    return load_dataset(rng.integers(0, 256, size=(N, B), dtype=np.uint8))


def _variable(rng: np.random.Generator, N: int, B: int) -> Dataset:
    return load_dataset([rng.bytes(int(n)) for n in rng.integers(0, B + 1, size=N)])


def _decode_all(plan, ds, frames, **kw):
    out = []
    for k in range(plan.K):
        old = ds.cache(plan.placement_t.batch(k))
        out.append(decode_worker(old, frames, need=plan.placement_t1.batch(k), worker=k, **kw))
    return out


def _assert_exact(plan, ds, results):
    for k, res in enumerate(results):
        ids = plan.placement_t1.batch(k)
        assert res.ok
        assert np.array_equal(res.cache.ids, ids)
        assert np.array_equal(res.cache.data, np.asarray(ds.data)[ids])
        if ds.lengths is not None:
            assert np.array_equal(res.cache.lengths, ds.lengths[ids])


# --------------------------------------------------------------------------- checksums


def test_checksum_matches_reference(rng):
    # The vectorized checksum against the plain-Python definition, widths around word edges.
    for B in (1, 7, 8, 9, 16, 61):
        x = rng.integers(0, 256, size=(5, B), dtype=np.uint8)
        h = record_checksums(x)
        assert [int(v) for v in h] == [checksum_reference(r.tobytes()) for r in x]
    recs = [rng.bytes(int(n)) for n in (0, 1, 5, 8, 13, 40)]
    assert [int(v) for v in record_checksums(recs)] == [checksum_reference(r) for r in recs]


def test_checksum_detects_every_single_bit_flip(rng):
    x = rng.integers(0, 256, size=(1, 24), dtype=np.uint8)
    h0 = int(record_checksums(x)[0])
    flipped = np.repeat(x, 24 * 8, axis=0)
    bit = np.arange(24 * 8)
    flipped[bit, bit // 8] ^= (1 << (bit % 8)).astype(np.uint8)
    assert h0 not in set(record_checksums(flipped).tolist())


def test_checksum_depends_on_length():
    assert checksum_reference(b"ab") != checksum_reference(b"ab\0")
    assert int(record_checksums([b"", b"\0"])[0]) != int(record_checksums([b"", b"\0"])[1])


def test_record_checksums_exceptions():
    with pytest.raises(TypeError, match="'records'"):
        record_checksums(5)
    with pytest.raises(TypeError, match="'records'"):
        record_checksums([b"a", 3])
    with pytest.raises(ValueError, match="'lengths'"):
        record_checksums([b"a"], lengths=[1])
    with pytest.raises(ValueError, match="'lengths'"):
        record_checksums(np.zeros((2, 4), np.uint8), lengths=[1, 5])
    with pytest.raises(ValueError, match="'records'"):
        record_checksums(np.zeros((2, 0), np.uint8))


# --------------------------------------------------------------------------- records


def test_load_dataset_views_without_copy(rng, tmp_path):
    x = rng.normal(size=(6, 3, 2)).astype(np.float32)
    ds = load_dataset(x)
    assert ds.N == 6 and ds.record_bytes == 24 and not ds.variable
    assert np.shares_memory(ds.data, x)
    assert ds.record(2) == x[2].tobytes()
    path = tmp_path / "x.npy"
    np.save(path, x)
    mm = load_dataset(str(path))
    assert isinstance(mm.data.base, np.memmap) or isinstance(mm.data, np.memmap) or mm.data.base is not None
    assert np.array_equal(mm.checksums, ds.checksums)
    assert load_dataset(path).record(5) == x[5].tobytes()


def test_load_dataset_non_contiguous(rng):
    x = rng.integers(0, 256, size=(8, 6), dtype=np.uint8)[:, ::2]
    ds = load_dataset(x)
    assert ds.record(3) == np.ascontiguousarray(x)[3].tobytes()


def test_load_dataset_exceptions(tmp_path):
    with pytest.raises(TypeError, match="'source'"):
        load_dataset(3)
    with pytest.raises(TypeError, match="'source'"):
        load_dataset([b"a", "b"])
    with pytest.raises(ValueError, match="'source'"):
        load_dataset(np.zeros((0, 4), np.uint8))
    with pytest.raises(ValueError, match="'source'"):
        load_dataset(np.array(3))
    with pytest.raises(ValueError, match="'source'"):
        load_dataset(np.array([[object()]]))
    with pytest.raises(ValueError, match="'source'"):
        load_dataset(str(tmp_path / "missing.npy"))
    with pytest.raises(TypeError, match="'checksums'"):
        load_dataset(np.zeros((2, 2)), checksums=1)
    ds = load_dataset([b"ab"])
    with pytest.raises(ValueError, match="'n'"):
        ds.record(1)
    with pytest.raises(ValueError, match="'ids'"):
        ds.cache([3])


# --------------------------------------------------------------------------- encoding


def test_encode_symbols_oracle(rng):
    for B in (3, 64, 1 << 16):
        ds = _dataset(rng, 20, B)
        a = rng.integers(0, 20, size=300)
        b = np.where(rng.random(300) < 0.3, -1, rng.integers(0, 20, size=300))
        got = encode_symbols(ds, a, b)
        x = np.asarray(ds.data)
        want = np.where((b >= 0)[:, None], x[a] ^ x[np.maximum(b, 0)], x[a])
        assert np.array_equal(got, want)


def test_encode_symbols_exceptions(rng):
    ds = _dataset(rng, 4, 8)
    with pytest.raises(TypeError, match="'dataset'"):
        encode_symbols(np.zeros((4, 8)), [0], [1])
    with pytest.raises(ValueError, match="'b'"):
        encode_symbols(ds, [0, 1], [1])
    with pytest.raises(ValueError, match="'a'"):
        encode_symbols(ds, [4], [1])
    with pytest.raises(ValueError, match="'b'"):
        encode_symbols(ds, [0], [-2])
    with pytest.raises(ValueError, match="'out'"):
        encode_symbols(ds, [0], [1], out=np.zeros((1, 7), np.uint8))


def test_encode_plan_exceptions(rng):
    ds = _dataset(rng, 15, 8)
    plan = plan_from_matrix(EXAMPLE_1)
    with pytest.raises(TypeError, match="'plan'"):
        encode_plan("plan", ds, epoch=1)
    with pytest.raises(TypeError, match="'dataset'"):
        encode_plan(plan, "ds", epoch=1)
    with pytest.raises(ValueError, match="'dataset'"):
        encode_plan(plan, _dataset(rng, 14, 8), epoch=1)
    with pytest.raises(ValueError, match="'epoch'"):
        encode_plan(plan, ds, epoch=-1)
    with pytest.raises(ValueError, match="'max_frame_bytes'"):
        encode_plan(plan, ds, epoch=1, max_frame_bytes=0)
    with pytest.raises(ValueError, match="'max_frame_bytes' must be at least the record width B = 8"):
        encode_plan(plan, ds, epoch=1, max_frame_bytes=1)  # never a frame past the limit, silently
    with pytest.raises(ValueError, match=f"'epoch' must be at most {2**64 - 1}"):
        encode_plan(plan, ds, epoch=2**64)  # the header's epoch is 64 bits wide
    assert parse_frame(encode_plan(plan, ds, epoch=2**64 - 1)[0]).epoch == 2**64 - 1


def test_encode_plan_arrays_exceptions(rng):
    ds = _dataset(rng, 4, 8)
    with pytest.raises(TypeError, match="'dataset'"):
        encode_plan_arrays(None, [0], [1], epoch=0)
    with pytest.raises(ValueError, match="'b'"):
        encode_plan_arrays(ds, [0], [1, 2], epoch=0)
    with pytest.raises(ValueError, match="'a'"):
        encode_plan_arrays(ds, [-1], [1], epoch=0)
    with pytest.raises(ValueError, match="'b'"):
        encode_plan_arrays(ds, [0], [9], epoch=0)
    with pytest.raises(ValueError, match="'symbol'"):
        encode_plan_arrays(ds, [0], [1], epoch=0, symbol=[-1])


# --------------------------------------------------------------------------- wire format


def test_frame_layout_is_as_documented(rng):
    # docs/wire-format.md: 40-byte header, 12-byte entries (u32 symbol, a, b), 8-aligned payload.
    ds = _dataset(rng, 10, 5)
    frame = encode_plan_arrays(ds, [1, 2, 3], [4, -1, 5], epoch=7, symbol=[10, 11, 12], repair=True)
    raw = frame.tobytes()
    assert raw[:4] == b"CSHF"
    assert int.from_bytes(raw[4:6], "little") == 2
    assert int.from_bytes(raw[6:8], "little") == FLAG_REPAIR
    assert int.from_bytes(raw[8:16], "little") == 7
    assert int.from_bytes(raw[16:20], "little") == 3
    assert int.from_bytes(raw[20:24], "little") == 5
    assert int.from_bytes(raw[24:32], "little") == 15
    head = bytearray(raw[: FRAME_HEADER_BYTES + 36 + 4])
    head[32:36] = b"\0\0\0\0"
    assert int.from_bytes(raw[32:36], "little") == zlib.crc32(bytes(head))
    assert int.from_bytes(raw[36:40], "little") == 0  # no receiver index: every worker reads all
    entries = np.frombuffer(raw[40:76], dtype="<u4").reshape(3, 3)
    assert entries.tolist() == [[10, 1, 4], [11, 2, 0xFFFFFFFF], [12, 3, 5]]
    assert len(raw) == 80 + 15
    x = np.asarray(ds.data)
    assert raw[80:85] == (x[1] ^ x[4]).tobytes()
    assert raw[85:90] == x[2].tobytes()


def test_frame_round_trip_variable(rng):
    ds = _variable(rng, 12, 40)
    a, b = np.array([0, 3, 5, 7]), np.array([1, -1, 6, 2])
    f = parse_frame(encode_plan_arrays(ds, a, b, epoch=2))
    assert f.len_a.tolist() == ds.lengths[a].tolist()
    assert f.len_b.tolist() == [int(ds.lengths[1]), 0, int(ds.lengths[6]), int(ds.lengths[2])]
    assert f.payload_bytes == int(np.maximum(f.len_a, f.len_b).sum())
    assert np.array_equal(f.payload, encode_symbols(ds, a, b))


def test_frame_overhead_values():
    # 40-byte header plus 12 bytes per symbol, padded to 8.
    assert frame_overhead(1, 64) == 56 / 64
    assert frame_overhead(1000, 64) == 12040 / 64000
    assert frame_overhead(1000, 1 << 20) == 12040 / (1000 << 20)
    assert frame_overhead(10, 64, variable=True, wide_ids=True) == (40 + 320) / 640


def test_frame_overhead_exceptions():
    with pytest.raises(ValueError, match="'n_symbols'"):
        frame_overhead(0, 64)
    with pytest.raises(TypeError, match="'record_bytes'"):
        frame_overhead(1, 6.5)


def test_parse_frame_exceptions(rng):
    ds = _dataset(rng, 10, 16)
    good = encode_plan_arrays(ds, [1, 2], [3, -1], epoch=4)
    with pytest.raises(TypeError, match="'buf'"):
        parse_frame(3)
    with pytest.raises(TypeError, match="'buf'"):
        parse_frame(good.astype(np.int16))
    with pytest.raises(DecodeError, match="shorter"):
        parse_frame(good[:10])
    with pytest.raises(DecodeError, match="shorter"):
        parse_frame(good[:44])
    with pytest.raises(DecodeError, match="payload"):
        parse_frame(good[:-1])
    with pytest.raises(DecodeError, match="payload"):
        parse_frame(np.concatenate([good, [0]]).astype(np.uint8))
    bad = good.copy()
    bad[0] ^= 1
    with pytest.raises(DecodeError, match="magic"):
        parse_frame(bad)
    bad = good.copy()
    bad[4] = 9
    with pytest.raises(DecodeError, match="version"):
        parse_frame(bad)
    bad = good.copy()
    bad[6] = 0x80
    with pytest.raises(DecodeError, match="flags"):
        parse_frame(bad)
    for pos in (8, 20, 44, 50):  # epoch, record width, entries: caught by the header CRC
        bad = good.copy()
        bad[pos] ^= 4
        with pytest.raises(DecodeError, match="header checksum"):
            parse_frame(bad)
    with pytest.raises(DecodeError, match="epoch"):
        parse_frame(good, epoch=5)
    with pytest.raises(DecodeError, match="width"):
        parse_frame(good, record_bytes=8)


def test_receiver_index_of_example_1():
    # Attia and Tandon (2016), Example 1: the receiver index worked out by hand (tests/cases.py).
    plan = plan_from_matrix(EXAMPLE_1)
    ds = load_dataset(np.arange(15 * 4, dtype=np.uint8).reshape(15, 4))
    raw = encode_plan(plan, ds, epoch=1)[0].tobytes()
    assert int.from_bytes(raw[36:40], "little") == 5
    table = np.frombuffer(raw[40 + 6 * 12 : 40 + 6 * 12 + 5 * 12], dtype="<u4").reshape(5, 3)
    assert table.tolist() == [list(row) for row in EXAMPLE_1_RECEIVER_RUNS]
    assert parse_frame(raw).runs.tolist() == table.tolist()


def test_parse_frame_refuses_version_1(rng):
    ds = _dataset(rng, 10, 8)
    old = frame_reference(ds, [1, 2], [3, -1], epoch=1, symbol=[0, 1], version=1)
    with pytest.raises(DecodeError, match="version 1; this reader reads versions 2 to 5 only"):
        parse_frame(old)
    assert parse_frame(frame_reference(ds, [1, 2], [3, -1], epoch=1, symbol=[0, 1])).n_symbols == 2


def test_parse_frame_receiver_index_exceptions(rng):
    # Frames with a valid header checksum whose index is not runs of entries, increasing and
    # disjoint for each worker; and a flipped bit in a valid index, caught by the checksum.
    ds = _dataset(rng, 10, 8)

    def frame(runs):
        return frame_reference(ds, [1, 2, 4], [3, -1, 5], epoch=1, symbol=[0, 1, 2], runs=runs)

    for runs in (
        [(0, 0, 0)],  # empty run
        [(0, 2, 2)],  # past the last entry
        [(1, 0, 1), (0, 1, 1)],  # workers decreasing
        [(0, 0, 2), (0, 1, 1)],  # overlapping runs of one worker
        [(0, 1, 1), (0, 0, 1)],  # runs of one worker decreasing
    ):
        with pytest.raises(DecodeError, match="receiver index"):
            parse_frame(frame(runs))
    good = np.frombuffer(frame([(0, 0, 2), (0, 2, 1), (3, 1, 2)]), dtype=np.uint8)
    assert parse_frame(good).runs.tolist() == [[0, 0, 2], [0, 2, 1], [3, 1, 2]]
    bad = good.copy()
    bad[40 + 3 * 12 + 12] ^= 1  # worker of the second run
    with pytest.raises(DecodeError, match="header checksum"):
        parse_frame(bad)


def test_decode_reads_only_the_symbols_addressed_to_the_worker(rng):
    # Symbol 0 (points 0 and 1) is addressed to worker 0, symbol 1 (points 2 and 3) to worker 1:
    # worker 0, holding 0 and 2, decodes point 1 only; without an index it decodes both.
    ds = _dataset(rng, 6, 8)
    cache = ds.cache([0, 2])
    indexed = frame_reference(ds, [0, 2], [1, 3], epoch=1, symbol=[0, 1], runs=[(0, 0, 1), (1, 1, 1)])
    res = decode_worker(cache, [indexed], need=[1, 3], worker=0, checksums=ds.checksums)
    assert res.decoded.tolist() == [1] and res.missing.tolist() == [3]
    assert res.cache.data[0].tobytes() == ds.record(1)
    res = decode_worker(cache, [indexed], need=[1, 3], worker=1)
    assert res.decoded.tolist() == [3] and res.missing.tolist() == [1]
    res = decode_worker(cache, [indexed], need=[1, 3], worker=2)
    assert res.decoded.tolist() == [] and res.missing.tolist() == [1, 3]
    plain = frame_reference(ds, [0, 2], [1, 3], epoch=1, symbol=[0, 1])
    res = decode_worker(cache, [plain, indexed], need=[1, 3], worker=2, checksums=ds.checksums)
    assert res.decoded.tolist() == [1, 3] and res.ok
    with pytest.raises(DecodeError, match="cannot decode symbol 1"):
        decode_worker(ds.cache([0]), [indexed], need=[3], worker=1, strict=True)
    with pytest.raises(DecodeError, match="needs point 3 but no symbol received carries it"):
        decode_worker(ds.cache([0]), [indexed], need=[3], worker=0, strict=True)  # not addressed to 0


# --------------------------------------------------------------------------- decoding


def test_decode_example_1_peels_the_cycle(rng):
    # Attia and Tandon (2016), Example 1: 6 symbols; the first worker of the cycle peels 2 steps.
    plan = plan_from_matrix(EXAMPLE_1)
    ds = _dataset(rng, 15, 32)
    frames = encode_plan(plan, ds, epoch=1)
    results = _decode_all(plan, ds, frames, epoch=1, checksums=ds.checksums)
    _assert_exact(plan, ds, results)
    assert max(r.rounds for r in results) == EXAMPLE_1_VALUES["peel_steps"]
    assert sum(r.verified for r in results) == int((plan.placement_t.owner != plan.placement_t1.owner).sum())
    # Steps done on bytes equal the plan's decoding steps, transit points included.
    for k, r in enumerate(results):
        assert r.steps == len(decoding_steps(plan, k))


@pytest.mark.parametrize("B", [1, 13, 64, 4096])
def test_decode_random_plans_bit_exact(rng, B):
    for seed in range(3):
        p0 = epoch_placement(300, 5, seed=seed, epoch=0)
        p1 = epoch_placement(300, 5, seed=seed, epoch=1)
        plan = plan_delivery(p0, p1)
        ds = _dataset(rng, 300, B)
        frames = encode_plan(plan, ds, epoch=1, max_frame_bytes=max(B, 40 * B))
        assert len(frames) > 1
        _assert_exact(plan, ds, _decode_all(plan, ds, frames, epoch=1, checksums=ds.checksums))


def test_decode_variable_length_records(rng):
    p0 = epoch_placement(200, 4, seed=3, epoch=0)
    p1 = epoch_placement(200, 4, seed=3, epoch=1)
    plan = plan_delivery(p0, p1, strategy="exact")
    ds = _variable(rng, 200, 50)
    frames = encode_plan(plan, ds, epoch=1)
    results = _decode_all(plan, ds, frames, checksums=ds.checksums)
    _assert_exact(plan, ds, results)
    for k, res in enumerate(results):
        for n in plan.placement_t1.batch(k)[:5]:
            assert res.cache.record(int(n)) == ds.record(int(n))


def test_decode_large_records_row_loop(rng):
    plan = plan_from_matrix([[0, 1, 1], [1, 0, 1], [2, 0, 0]])
    ds = _dataset(rng, plan.N, 1 << 17)
    _assert_exact(plan, ds, _decode_all(plan, ds, encode_plan(plan, ds, epoch=1)))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    K=st.integers(1, 6),
    extra=st.integers(0, 30),
    seed=st.integers(0, 2**16),
    B=st.sampled_from([1, 8, 20]),
    strategy=st.sampled_from(["greedy", "exact"]),
)
def test_decode_encode_round_trip(K, extra, seed, B, strategy):
    """decode(encode(x)) == x for every worker of every plan."""
    N = K + extra
    plan = plan_delivery(
        epoch_placement(N, K, seed=seed, epoch=0),
        epoch_placement(N, K, seed=seed, epoch=1),
        strategy=strategy,
    )
    ds = _dataset(np.random.default_rng(seed), N, B)
    results = _decode_all(plan, ds, encode_plan(plan, ds, epoch=1), checksums=ds.checksums, strict=True)
    _assert_exact(plan, ds, results)


def test_decode_flags_bit_flips_as_bad(rng):
    plan = plan_from_matrix(EXAMPLE_1)
    ds = _dataset(rng, 15, 16)
    frame = encode_plan(plan, ds, epoch=1)[0]
    f = parse_frame(frame)
    start = frame.size - f.payload_bytes
    bad = frame.copy()
    bad[start + 4 * 16 + 3] ^= 0x10  # first cycle symbol m1 + m2
    results = _decode_all(plan, ds, [bad], checksums=ds.checksums)
    flagged = np.concatenate([r.bad for r in results])
    a, b, _ = plan.transmissions()
    # m1 + m2 corrupts m1 at worker w2 and m2 then m3 along worker w1's peeled chain.
    assert set(flagged.tolist()) == {int(a[4]), int(b[5])}
    for r in results:
        good = np.setdiff1d(r.decoded, r.bad)
        rows = r.cache.rows(good)
        assert np.array_equal(r.cache.data[rows], np.asarray(ds.data)[good])
    with pytest.raises(IntegrityError, match="checksum"):
        _decode_all(plan, ds, [bad], checksums=ds.checksums, strict=True)


def test_decode_wrong_ids_with_valid_crc_are_caught(rng):
    # A header whose ids are wrong but whose CRC was recomputed (a faulty master): the decoded
    # bytes fail their checksums; nothing wrong is accepted.
    ds = _dataset(rng, 6, 16)
    frame = encode_plan_arrays(ds, [0, 2], [1, 3], epoch=1)
    ent = frame[FRAME_HEADER_BYTES : FRAME_HEADER_BYTES + 24].view("<u4").reshape(2, 3)
    ent[0, 2] = 4  # claims x0 + x4 instead of x0 + x1
    frame[32:36] = 0
    frame[32:36] = np.frombuffer(zlib.crc32(frame[:64].tobytes()).to_bytes(4, "little"), np.uint8)
    res = decode_worker(ds.cache([0, 2]), [frame], need=[4, 3], worker=0, checksums=ds.checksums)
    assert res.bad.tolist() == [4] and res.missing.size == 0 and not res.ok
    assert res.failed.tolist() == [4]


def test_decode_missing_points():
    ds = load_dataset(np.arange(12, dtype=np.uint8).reshape(6, 2))
    frame = encode_plan_arrays(ds, [0, 2], [1, 3], epoch=1)
    res = decode_worker(ds.cache([5]), [frame], need=[1, 3, 4, 5], worker=2)
    assert res.missing.tolist() == [1, 3, 4]
    assert res.cache.ids.tolist() == [1, 3, 4, 5]
    assert np.array_equal(res.cache.data[3], [10, 11])
    with pytest.raises(DecodeError, match=r"Worker 2 cannot decode symbol 0 \(points 0 and 1\)"):
        decode_worker(ds.cache([5]), [frame], need=[1], worker=2, strict=True)
    with pytest.raises(DecodeError, match="Worker 2 needs point 4 but no symbol"):
        decode_worker(ds.cache([5]), [frame], need=[4], worker=2, strict=True)


def test_decode_worker_exceptions(rng):
    ds = _dataset(rng, 6, 8)
    frame = encode_plan_arrays(ds, [0], [1], epoch=1)
    cache = ds.cache([0])
    with pytest.raises(TypeError, match="'cache'"):
        decode_worker("c", [frame], need=[1], worker=0)
    with pytest.raises(TypeError, match="'frames'"):
        decode_worker(cache, frame, need=[1], worker=0)
    with pytest.raises(ValueError, match="'worker'"):
        decode_worker(cache, [frame], need=[1], worker=-1)
    with pytest.raises(ValueError, match="'need'"):
        decode_worker(cache, [frame], need=[[1]], worker=0)
    with pytest.raises(ValueError, match="'need' must name each record once; id 1"):
        decode_worker(cache, [frame], need=[1, 0, 1], worker=0)  # never silently one record fewer
    with pytest.raises(ValueError, match="'need' must hold record ids >= 0"):
        decode_worker(cache, [frame], need=[-1, 1], worker=0)
    with pytest.raises(ValueError, match="'checksums' .* 5 entries and 'need' names id 5"):
        decode_worker(cache, [frame], need=[1, 5], worker=0, checksums=ds.checksums[:5])
    # A float64 table compares 53 of the 64 bits: refused, never a check that misses flips.
    for table, shown in ((ds.checksums.astype(np.float64), "1-D float64"), (ds.checksums.tolist(), "list"),
                         (ds.checksums.view(np.int64), "1-D int64"), (ds.checksums[None, :], "2-D uint64")):
        with pytest.raises(TypeError, match=f"'checksums' must be a 1-D uint64 array.*not {shown}"):
            decode_worker(cache, [frame], need=[1], worker=0, checksums=table)
    with pytest.raises(DecodeError, match="Worker 0: frame 0: Frame rejected: epoch"):
        decode_worker(cache, [frame], need=[1], worker=0, epoch=2)
    with pytest.raises(DecodeError, match="width"):
        decode_worker(_dataset(rng, 6, 4).cache([0]), [frame], need=[1], worker=0)
    with pytest.raises(DecodeError, match="layout"):
        decode_worker(
            cache,
            [parse_frame(encode_plan_arrays(_variable(rng, 6, 8), [0], [1], epoch=1))],
            need=[1],
            worker=0,
        )


def test_cache_patched(rng):
    ds = _dataset(rng, 6, 4)
    c = Cache(ids=np.array([1, 3]), data=np.zeros((2, 4), np.uint8), lengths=None)
    fixed = c.patched(ds.cache([3]))
    assert np.array_equal(fixed.data[1], ds.data[3]) and not fixed.data[0].any()
    with pytest.raises(ValueError, match="'other'"):
        c.patched(ds.cache([2]))
    assert np.array_equal(ds.cache([1, 3]).checksums(), ds.checksums[[1, 3]])


# --------------------------------------------------------------------------- compiled peel


def _peel_oracle(a, b, cache_ids, need_ids):
    """The peel of ``coded_shuffle._codec_kernels.peel_ops`` written with numpy sets (the definition)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    coded = b >= 0
    lone = np.flatnonzero(~coded)
    lone = lone[np.isin(a[lone], need_ids) & ~np.isin(a[lone], cache_ids)]
    lone = lone[np.unique(a[lone], return_index=True)[1]] if lone.size else lone
    done = np.zeros(a.size, dtype=bool)
    known = np.asarray(cache_ids, np.int64)
    frontier = known
    rounds = []
    while frontier.size:
        syms = np.flatnonzero(coded & ~done & (np.isin(a, frontier) | np.isin(b, frontier)))
        if not syms.size:
            break
        ka, kb = np.isin(a[syms], known), np.isin(b[syms], known)
        done[syms[ka | kb]] = True
        one = ka ^ kb
        s1 = syms[one]
        kn = np.where(ka[one], a[s1], b[s1])
        new = np.where(ka[one], b[s1], a[s1])
        new, first = np.unique(new, return_index=True)
        s1, kn = s1[first], kn[first]
        keep = ~np.isin(new, a[lone])
        s1, kn, new = s1[keep], kn[keep], new[keep]
        if not new.size:
            break
        rounds.append((s1, kn, new))
        known = np.union1d(known, new)
        frontier = new
    targets = np.setdiff1d(need_ids, cache_ids)
    steps = set()
    for r in range(len(rounds) - 1, -1, -1):
        s1, kn, new = rounds[r]
        u = np.isin(new, targets)
        targets = np.union1d(targets, kn[u])
        steps |= {(int(s), int(k), int(n), r + 1) for s, k, n in zip(s1[u], kn[u], new[u], strict=True)}
    return sorted(lone.tolist()), steps, len(rounds)


def _check_peel(a, b, cache_ids, need_ids):
    from coded_shuffle.codec.decode import _peel

    lone, sym, kn, new, rnd, r = _peel(np.asarray(a), np.asarray(b), cache_ids, need_ids)
    want = _peel_oracle(a, b, cache_ids, need_ids)
    steps = set(zip(sym.tolist(), kn.tolist(), new.tolist(), rnd.tolist(), strict=True))
    got = (sorted(lone.tolist()), steps, r)
    assert got == want
    assert len(set(new.tolist())) == new.size  # each point is decoded once


def test_peel_ops_matches_set_oracle_on_plans():
    for K, N, seed in ((3, 15, 0), (5, 300, 1), (8, 800, 2), (12, 500, 3)):
        p0, p1 = (epoch_placement(N, K, seed=seed, epoch=t) for t in (0, 1))
        plan = plan_delivery(p0, p1)
        a, b, _ = plan.transmissions()
        for k in range(K):
            _check_peel(a, b, plan.placement_t.batch(k), plan.placement_t1.batch(k))


def test_peel_ops_matches_set_oracle_on_random_symbols(rng):
    # Arbitrary symbols (self-pairs, repeats, lone points also coded, chains through unneeded points).
    for _ in range(200):
        N = int(rng.integers(1, 40))
        S = int(rng.integers(0, 60))
        a = rng.integers(0, N, size=S)
        b = np.where(rng.random(S) < 0.2, -1, rng.integers(0, N, size=S))
        cache_ids = np.unique(rng.integers(0, N, size=int(rng.integers(0, N + 1))))
        need_ids = np.unique(rng.integers(0, N, size=int(rng.integers(0, N + 1))))
        _check_peel(a, b, cache_ids, need_ids)
        # The same symbols with ids spread over 64 bits take the dense renumbering path.
        spread = np.int64(1) << 40
        _check_peel(a * spread, np.where(b >= 0, b * spread, -1), cache_ids * spread, need_ids * spread)


def test_decode_long_chains_variable_lengths_bit_exact(rng):
    # Many workers: leftover cycles of several workers, so peeled chains pass through transit
    # points whose lengths differ from those of the points they lead to.
    for seed in range(3):
        p0 = epoch_placement(400, 9, seed=seed, epoch=0)
        p1 = epoch_placement(400, 9, seed=seed, epoch=1)
        plan = plan_delivery(p0, p1)
        ds = _variable(rng, 400, 70)
        results = _decode_all(plan, ds, encode_plan(plan, ds, epoch=1), checksums=ds.checksums, strict=True)
        _assert_exact(plan, ds, results)
        assert max(r.rounds for r in results) >= 2
        for k, r in enumerate(results):
            assert r.steps == len(decoding_steps(plan, k))


# --------------------------------------------------------------------------- compiled path against numpy


def _decode_reference(cache, frame, need):
    """Worker decoding in plain numpy: the set peel of ``_peel_oracle``, then one row at a time."""
    need = np.unique(np.asarray(need, np.int64))
    f = frame
    width = f.record_bytes
    lone, steps, _ = _peel_oracle(f.a, f.b, cache.ids, need)
    held = {int(i): r for r, i in enumerate(cache.ids)}

    def cut(row, L):
        row = row.copy()
        row[L:] = 0
        return row

    value, length = {}, {}
    for s in lone:
        p = int(f.a[s])
        length[p] = int(f.len_a[s]) if f.len_a is not None else width
        value[p] = cut(f.payload[s], length[p])
    for s, kn, new, _r in sorted(steps, key=lambda t: t[3]):
        src = cache.data[held[kn]] if kn in held else value[kn]
        L = width if f.len_a is None else int(f.len_a[s] if f.a[s] == new else f.len_b[s])
        value[new], length[new] = cut(f.payload[s] ^ src, L), L
    out = np.zeros((need.size, width), np.uint8)
    out_len = np.zeros(need.size, np.int64)
    decoded, missing = [], []
    for i, p in enumerate(need.tolist()):
        if p in held:
            L = width if cache.lengths is None else int(cache.lengths[held[p]])
            out[i], out_len[i] = cut(cache.data[held[p]], L), L
        elif p in value:
            out[i], out_len[i] = value[p], length[p]
            decoded.append(p)
        else:
            missing.append(p)
    return out, out_len, decoded, missing


def _assert_decode_matches_reference(cache, frames, need, checksums, worker=0):
    res = decode_worker(cache, frames, need=need, worker=worker, checksums=checksums)
    f = parse_frame(frames[0]) if len(frames) == 1 else None
    if f is None:
        parts = [parse_frame(x) for x in frames]
        from coded_shuffle.codec.decode import _merge_frames

        f = _merge_frames(parts)
    out, out_len, decoded, missing = _decode_reference(cache, f, need)
    assert res.cache.data.tobytes() == out.tobytes()
    assert res.decoded.tolist() == decoded and res.missing.tolist() == missing
    if cache.lengths is not None:
        assert res.cache.lengths.tolist() == out_len.tolist()
    if checksums is not None and decoded:
        rows = np.searchsorted(res.cache.ids, decoded)
        cuts = out_len[rows] if cache.lengths is not None else np.full(rows.size, out.shape[1])
        got = [checksum_reference(out[r, :L].tobytes()) for r, L in zip(rows, cuts, strict=True)]
        bad = [p for p, h in zip(decoded, got, strict=True) if h != int(checksums[p])]
        assert res.bad.tolist() == bad
    return res


@pytest.mark.parametrize("variable", [False, True])
def test_compiled_path_matches_numpy_reference_on_plans(rng, variable, receiver_runs_reference):
    # Random plans with leftover cycles (chains of several rounds), odd widths, several frames;
    # then the same frames with flipped payload bits: the same bytes, decoded, missing and bad.
    seen_rounds, flagged = 0, 0
    cases = ((3, 15, 1, "greedy"), (6, 240, 13, "exact"), (9, 400, 61, "greedy"), (5, 300, 8, "greedy"))
    for K, N, B, strategy in cases:
        p0, p1 = (epoch_placement(N, K, seed=K, epoch=t) for t in (0, 1))
        plan = plan_delivery(p0, p1, strategy=strategy)
        ds = _variable(rng, N, B) if variable else _dataset(rng, N, B)
        a, b, _ = plan.transmissions()
        frames = encode_plan(plan, ds, epoch=1, max_frame_bytes=max(B, 30 * B))
        lo = 0
        for fr in frames:
            n = parse_frame(fr).n_symbols
            runs = receiver_runs_reference(plan, lo, lo + n)
            want = frame_reference(
                ds, a[lo : lo + n], b[lo : lo + n], epoch=1, symbol=np.arange(lo, lo + n), runs=runs
            )
            assert fr.tobytes() == want
            lo += n
        payload_start = [fr.size - parse_frame(fr).payload_bytes for fr in frames]
        bad_frames = [fr.copy() for fr in frames]
        for fr, start in zip(bad_frames, payload_start, strict=True):
            hit = rng.integers(start, fr.size, size=3)
            fr[hit] ^= rng.integers(1, 256, size=3).astype(np.uint8)
        for k in range(K):
            cache = ds.cache(p0.batch(k))
            res = _assert_decode_matches_reference(cache, frames, p1.batch(k), ds.checksums, k)
            assert res.ok
            seen_rounds = max(seen_rounds, res.rounds)
            res = _assert_decode_matches_reference(cache, bad_frames, p1.batch(k), ds.checksums, k)
            flagged += res.bad.size
    assert seen_rounds >= 3 and flagged > 0


def test_compiled_path_matches_numpy_reference_on_random_symbols(rng):
    # Arbitrary symbols: self-pairs, repeats, points sent alone and coded, chains through points
    # nobody needs, ids the worker neither holds nor can reach; checksums of a wrong frame.
    for trial in range(60):
        N = int(rng.integers(1, 30))
        S = int(rng.integers(1, 50))
        B = int(rng.integers(1, 20))
        ds = _variable(rng, N, B) if trial % 2 else _dataset(rng, N, B)
        a = rng.integers(0, N, size=S)
        b = np.where(rng.random(S) < 0.2, -1, rng.integers(0, N, size=S))
        frame = encode_plan_arrays(ds, a, b, epoch=0)
        assert frame.tobytes() == frame_reference(ds, a, b, epoch=0, symbol=np.arange(S))
        cache = ds.cache(np.unique(rng.integers(0, N, size=int(rng.integers(0, N + 1)))))
        need = rng.permutation(N)[: int(rng.integers(0, N + 1))]  # distinct ids, in any order
        _assert_decode_matches_reference(cache, [frame], need, ds.checksums)
        wrong = frame.copy()
        wrong[-1] ^= 0x5A
        _assert_decode_matches_reference(cache, [wrong], need, ds.checksums)


def test_two_thread_halves_give_the_same_bytes(rng, monkeypatch):
    # Every kernel run as two halves on two threads (forced here for small inputs) against one run.
    import coded_shuffle.codec._common as codec

    p0, p1 = (epoch_placement(500, 7, seed=5, epoch=t) for t in (0, 1))
    plan = plan_delivery(p0, p1)
    for ds in (_dataset(rng, 500, 24), _variable(rng, 500, 40)):
        frames = encode_plan(plan, ds, epoch=1)
        caches = [ds.cache(p0.batch(k)) for k in range(7)]
        sums = ds.checksums
        one = [decode_worker(caches[k], frames, need=p1.batch(k), worker=k, checksums=sums) for k in range(7)]
        monkeypatch.setattr(codec, "_TWO_THREADS_BYTES", 0)
        monkeypatch.setattr(codec, "_TWO_CORES", True)
        assert [f.tobytes() for f in encode_plan(plan, ds, epoch=1)] == [f.tobytes() for f in frames]
        assert np.array_equal(record_checksums(np.asarray(ds.data), ds.lengths), ds.checksums)
        for k in range(7):
            two = decode_worker(caches[k], frames, need=p1.batch(k), worker=k, checksums=sums)
            assert two.cache.data.tobytes() == one[k].cache.data.tobytes() and two.ok
        monkeypatch.undo()


def test_record_checksums_of_selected_rows(rng):
    # The compiled checksum of chosen rows with their own lengths (no gathered copy) against the
    # plain-Python definition; rows wider than the record are zero-padded past its length.
    from coded_shuffle.codec.records import _checksum_rows

    for B in (1, 7, 8, 9, 64, 67):
        x = rng.integers(0, 256, size=(12, B), dtype=np.uint8)
        lens = rng.integers(0, B + 1, size=12)
        x[np.arange(B) >= lens[:, None]] = 0
        rows = rng.integers(0, 12, size=20)
        got = _checksum_rows(x, lens[rows], rows)
        assert [int(h) for h in got] == [checksum_reference(x[r, : lens[r]].tobytes()) for r in rows]


def _child_checksums(conn, data):
    """In a forked child: checksum more than 1 MiB (the two-thread path) and send the result."""
    conn.send(record_checksums(data).tolist())
    conn.close()


def test_fork_after_a_large_job_makes_new_threads(rng, monkeypatch):
    # A job of more than 1 MiB starts the codec's second thread; a child forked afterwards (a
    # torch DataLoader with workers does this) must not wait on the parent's thread, which it lacks.
    import multiprocessing

    import coded_shuffle.codec._common as codec

    monkeypatch.setattr(codec, "_TWO_CORES", True)
    data = rng.integers(0, 256, size=(4096, 512), dtype=np.uint8)  # 2 MiB
    assert data.nbytes > codec._TWO_THREADS_BYTES
    expected = record_checksums(data).tolist()
    assert codec._POOL, "the large job should have started the second thread"
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_checksums, args=(child, data))
    proc.start()
    try:
        assert parent.poll(60), "the forked child did not finish its checksums: it waits on a lost thread"
        assert parent.recv() == expected
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join()
    assert proc.exitcode == 0
