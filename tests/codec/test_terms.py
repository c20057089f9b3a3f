"""Frames of many-term symbols (wire format version 5) and their solving, against brute force."""

import galois
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.codec import (
    FLAG_TERMS,
    PACKED_TERMS_VERSION,
    TermsDecoder,
    decode_terms,
    decode_worker,
    encode_terms,
    load_dataset,
    parse_frame,
    term_blocks,
)
from coded_shuffle.codec.records import _word_keys, checksum_reference
from coded_shuffle.errors import DecodeError


def random_symbols(rng, n_rows, n_sym, most):
    counts = rng.integers(1, most + 1, size=n_sym)
    terms = np.concatenate([rng.choice(n_rows, size=c, replace=False) for c in counts] + [np.empty(0, int)])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return offsets, terms


def determined(offsets, terms, held, x, n_rows):
    """Whether row ``x`` is determined by the symbols and the held rows: rank test over GF(2)."""
    A = np.zeros((offsets.size - 1 + len(held), n_rows), dtype=np.uint8)
    for s in range(offsets.size - 1):
        A[s, terms[offsets[s] : offsets[s + 1]]] ^= 1
    for i, h in enumerate(held):
        A[offsets.size - 1 + i, h] = 1
    e = np.zeros((1, n_rows), dtype=np.uint8)
    e[0, x] = 1
    GF2 = galois.GF2
    return np.linalg.matrix_rank(GF2(A)) == np.linalg.matrix_rank(GF2(np.vstack([A, e])))


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1), n_sym=st.integers(0, 14), most=st.integers(1, 5), per=st.integers(1, 15)
)
def test_decode_terms_finds_exactly_the_rows_the_rank_test_determines(seed, n_sym, most, per):
    # frames of `per` symbols: a symbol of several unknowns waits for the last frame
    rng = np.random.default_rng(seed)
    n_rows = 12
    ds = load_dataset(rng.integers(0, 256, size=(n_rows, 16), dtype=np.uint8))
    offsets, terms = random_symbols(rng, n_rows, n_sym, most)
    held = np.sort(rng.choice(n_rows, size=int(rng.integers(0, n_rows)), replace=False))
    need = np.union1d(held[: held.size // 2], rng.choice(n_rows, size=5, replace=False))
    frames = encode_terms(ds, offsets, terms, epoch=3, max_frame_bytes=16 * per)
    res = decode_terms(ds.cache(held), frames, need=need, worker=0, epoch=3, checksums=ds.checksums)
    for x in np.setdiff1d(need, held).tolist():
        want = determined(offsets, terms, held.tolist(), x, n_rows)
        assert (x in res.decoded.tolist()) == want, x
        assert (x in res.missing.tolist()) != want
    rows = res.cache.rows(res.decoded)
    assert np.array_equal(res.cache.data[rows], ds.data[res.decoded])
    kept = np.intersect1d(need, held)
    assert np.array_equal(res.cache.data[res.cache.rows(kept)], ds.data[kept])
    assert res.bad.size == 0


def test_term_frame_layout_and_version():
    ds = load_dataset(np.arange(5 * 8, dtype=np.uint8).reshape(5, 8))
    (raw,) = encode_terms(ds, [0, 3, 4], [0, 2, 4, 1], epoch=7)
    f = parse_frame(raw, epoch=7, record_bytes=8)
    assert int.from_bytes(bytes(raw[4:6]), "little") == PACKED_TERMS_VERSION == 5
    assert f.flags & FLAG_TERMS and f.offsets.tolist() == [0, 3, 4] and f.terms.tolist() == [0, 2, 4, 1]
    assert f.symbol.tolist() == [0, 1]  # numbered by their place in the frame
    assert np.array_equal(f.payload[0], ds.data[0] ^ ds.data[2] ^ ds.data[4])
    assert np.array_equal(f.payload[1], ds.data[1])
    # worked out by hand from docs/wire-format.md: the head (4 terms, counts of 2 bits, ids of 3
    # bits), no index, the counts less one (2, 0) in one byte, the ids 0, 2, 4, 1 in 12 bits
    assert bytes(raw[40:48]) == bytes([4, 0, 0, 0, 2, 3, 0, 0])
    assert bytes(raw[48:51]) == bytes([0b0000_0010, 0b0001_0000, 0b0000_0011])  # 0 | 2 << 3 | 4 << 6 | 1 << 9
    # header 40, head 8, table 3, padded to 8: the payload starts at 56
    assert bytes(raw[51:56]) == bytes(5) and f.header_bytes == 56 and f.wire_bytes == 56 + 2 * 8


def test_a_flipped_term_id_rejects_the_frame():
    ds = load_dataset(np.arange(5 * 8, dtype=np.uint8).reshape(5, 8))
    (raw,) = encode_terms(ds, [0, 3, 4], [0, 2, 4, 1], epoch=7)
    bad = raw.copy()
    bad[49] ^= 1  # the first term id
    with pytest.raises(DecodeError, match="header checksum"):
        parse_frame(bad)
    bad = raw.copy()
    bad[40] ^= 0x80  # the table's count of terms: the frame is then too short for its table
    with pytest.raises(DecodeError, match="shorter"):
        parse_frame(bad)


def test_frames_of_one_kind_are_refused_by_the_decoder_of_the_other():
    ds = load_dataset(np.arange(5 * 8, dtype=np.uint8).reshape(5, 8))
    frames = encode_terms(ds, [0, 2], [0, 1], epoch=1)
    with pytest.raises(DecodeError, match="many-term symbols; decode it with decode_terms"):
        decode_worker(ds.cache([0]), frames, need=[1], worker=0)


def by_worker(f, offsets, terms):
    """The symbols (numbered as given to the encoder, known by their terms) each run addresses."""
    given = {tuple(terms[offsets[s] : offsets[s + 1]].tolist()): s for s in range(offsets.size - 1)}
    sent = [given[tuple(f.terms[f.offsets[s] : f.offsets[s + 1]].tolist())] for s in range(f.n_symbols)]
    return {int(w): set(sent[x : x + c]) for w, x, c in f.runs.tolist()}


def test_addressing_by_block_reaches_every_worker_that_needs_a_symbol():
    # symbols x0+x1, x1+x2 (one block, wanted by workers 0 and 2) and x3 (worker 1)
    ds = load_dataset(np.arange(4 * 8, dtype=np.uint8).reshape(4, 8))
    offsets, terms = np.array([0, 2, 4, 5]), np.array([0, 1, 1, 2, 3])
    wanter = np.array([0, 2, 2, 0, 1])
    (raw,) = encode_terms(ds, offsets, terms, epoch=1, wanter=wanter, K=3)
    f = parse_frame(raw)
    assert sorted(f.runs[:, 0].tolist()) == [0, 1, 2]
    assert by_worker(f, offsets, terms) == {0: {0, 1}, 1: {2}, 2: {0, 1}}
    # worker 0 holds x0 and gets x1, then x2 through the chain
    res = decode_terms(ds.cache([0]), [raw], need=[0, 2], worker=0, checksums=ds.checksums)
    assert res.ok and np.array_equal(res.cache.data[1], ds.data[2])
    assert term_blocks(offsets, terms).tolist() == [0, 0, 1]
    # the same symbols for workers 0, 100 and 130 of 131 (receivers in three words of 64 bits)
    (raw,) = encode_terms(ds, offsets, terms, epoch=1, wanter=np.array([0, 130, 130, 0, 100]), K=131)
    assert by_worker(parse_frame(raw), offsets, terms) == {0: {0, 1}, 100: {2}, 130: {0, 1}}


def test_bad_arguments_name_the_argument():
    ds = load_dataset(np.arange(4 * 8, dtype=np.uint8).reshape(4, 8))
    with pytest.raises(ValueError, match="'offsets'"):
        encode_terms(ds, [0, 2, 2], [0, 1], epoch=1)
    with pytest.raises(ValueError, match="'terms'"):
        encode_terms(ds, [0, 1], [9], epoch=1)
    with pytest.raises(ValueError, match="'wanter'"):
        encode_terms(ds, [0, 1], [1], epoch=1, wanter=[5], K=3)
    with pytest.raises(TypeError, match="'frames'"):
        decode_terms(ds.cache([0]), b"x", need=[1], worker=0)


def test_the_compiled_kernels_of_many_term_symbols_equal_their_numpy_statements():
    from coded_shuffle import _codec_kernels as kern

    rng = np.random.default_rng(7)
    data = rng.integers(0, 256, (30, 24), dtype=np.uint8)
    offsets, terms = random_symbols(rng, 30, 12, 4)
    rows = np.where(rng.random(terms.size) < 0.6, terms, -1)  # some terms unknown
    base = rng.integers(0, 256, (12, 24), dtype=np.uint8)
    out = np.empty_like(base)
    kern.xor_terms(out, base, offsets, rows, data, 0, 12)
    for s in range(12):
        want = base[s].copy()
        for r in rows[offsets[s] : offsets[s + 1]]:
            if r >= 0:
                want ^= data[r]
        assert np.array_equal(out[s], want)
    moved = np.zeros((10, 24), np.uint8)
    kern.move_rows(moved, np.array([3, 7]), data, np.array([5, 9]), 0, 2)
    assert np.array_equal(moved[[3, 7]], data[[5, 9]]) and not moved[[0, 1, 2, 4, 5, 6, 8, 9]].any()
    # direct_pick: a symbol of one unknown wanted term gives it (the first such symbol); of two,
    # it is left to elimination; direct_rows then writes the picked rows, from any chunk of symbols
    offsets, terms = random_symbols(rng, 30, 80, 4)
    rows = np.where(rng.random(terms.size) < 0.6, terms, -1)
    base = rng.integers(0, 256, (80, 24), dtype=np.uint8)
    target = np.where(rows < 0, terms % 10, -1)
    done = np.zeros(10, np.uint8)
    multi = np.zeros(80, np.uint8)
    pick = np.full(80, 99, np.int64)
    picked = kern.direct_pick(pick, done, offsets, rows, target, multi)
    seen: dict[int, int] = {}
    for s in range(80):
        unknown = np.flatnonzero(rows[offsets[s] : offsets[s + 1]] < 0)
        assert multi[s] == (unknown.size >= 2)
        t = int(target[offsets[s] + unknown[0]]) if unknown.size == 1 else -1
        if t >= 0 and t not in seen:
            seen[t] = s
        assert pick[s] == (t if seen.get(t) == s else -1)
    assert picked == len(seen) == int(done.sum()) > 0
    held = {int((rows[offsets[s] : offsets[s + 1]] >= 0).sum()) for s in seen.values()}
    assert held == {0, 1, 2, 3}  # every branch of direct_rows: a lone symbol, one pass of 1 and 2, many
    got = np.zeros((10, 24), np.uint8)
    sums = np.zeros(10, np.uint64)
    keys = _word_keys(3)
    # the payload rows where a frame holds them: symbol s is row prow[s] of the frame's payload
    prow = rng.permutation(80)
    payload = np.empty((80, 24), np.uint8)
    payload[prow] = base
    for lo, hi in [(0, 33), (33, 80)]:  # in two ranges, as on two threads
        kern.direct_rows(got, sums, keys, payload, prow, offsets, rows, pick, data, lo, hi)
    for t in range(10):
        want = np.zeros(24, np.uint8)
        if t in seen:
            s = seen[t]
            want = base[s].copy()
            for r in rows[offsets[s] : offsets[s + 1]]:
                if r >= 0:
                    want ^= data[r]
        assert np.array_equal(got[t], want)
        assert int(sums[t]) == (checksum_reference(want.tobytes()) if t in seen else 0)


def test_a_decoder_fed_frame_by_frame_names_a_bad_frame_by_its_place_and_ends_once():
    ds = load_dataset(np.arange(4 * 8, dtype=np.uint8).reshape(4, 8))
    frames = encode_terms(ds, [0, 2, 4, 5], [0, 1, 1, 2, 3], epoch=1, max_frame_bytes=8)
    assert len(frames) == 3
    dec = TermsDecoder(ds.cache([0]), need=[0, 1, 2, 3], worker=0, epoch=1, checksums=ds.checksums)
    dec.add(frames[0])
    bad = frames[1].copy()
    bad[10] ^= 1
    with pytest.raises(DecodeError, match="Worker 0: frame 1: "):
        dec.add(bad)
    dec.add(frames[2])
    res = dec.finish()
    assert res.decoded.tolist() == [1, 3] and res.missing.tolist() == [2] and res.bad.size == 0
    assert dec.finish() is res
    with pytest.raises(ValueError, match="has finished"):
        dec.add(frames[1])
