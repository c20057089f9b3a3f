"""HeldDecoder: the exchange's frames decoded one by one give what decode_worker gives them at once
(the oracle: the codec's whole-delivery decoder, peel and all), in any order of the frames."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import (
    HeldDecoder,
    decode_worker,
    encode_held,
    encode_plan_arrays,
    keep_rows,
    load_dataset,
    parse_frame,
)
from coded_shuffle.errors import DecodeError


def same(a, b):
    assert a.worker == b.worker and (a.steps, a.verified) == (b.steps, b.verified)
    for name in ("decoded", "bad", "missing"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.cache.ids, b.cache.ids) and np.array_equal(a.cache.data, b.cache.data)
    assert (a.cache.lengths is None) == (b.cache.lengths is None)
    if a.cache.lengths is not None:
        assert np.array_equal(a.cache.lengths, b.cache.lengths)


def deliveries(rng, variable):
    N, B = 60, 24
    if variable:
        ds = load_dataset([rng.bytes(int(n)) for n in rng.integers(0, B + 1, N)])
    else:
        ds = load_dataset(rng.integers(0, 256, (N, B), dtype=np.uint8))
    every = ds.cache(np.arange(N))
    cache = ds.cache(np.sort(rng.choice(N, 15, replace=False)))
    need = np.sort(rng.choice(N, 25, replace=False))
    fresh = np.setdiff1d(need, cache.ids)
    fresh = fresh[np.argsort(ds.lengths[fresh] == 0, kind="stable")] if variable else fresh
    # a record it misses first (not empty), then the rest but three (missing), a few twice, and
    # some held or not needed at all
    rest = rng.permutation(np.concatenate([fresh[1:-3], fresh[:3], need[:4], rng.choice(N, 6)]))
    frames = encode_held(every, np.concatenate([fresh[:1], rest]), epoch=4, max_frame_bytes=3 * B)
    return ds, cache, need, frames


@pytest.mark.parametrize("variable", [False, True])
@pytest.mark.parametrize("damaged", [False, True])
def test_frame_by_frame_is_decode_worker_at_once(rng, variable, damaged):
    ds, cache, need, frames = deliveries(rng, variable)
    if damaged:  # the first payload byte of the first record flipped: it fails its check
        frames[0] = frames[0].copy()
        frames[0][frames[0].size - parse_frame(frames[0]).payload_bytes] ^= 0x5A
    want = decode_worker(cache, frames, need=need, worker=2, epoch=4, checksums=ds.checksums)
    for order in (range(len(frames)), range(len(frames) - 1, -1, -1)):
        picked = [frames[q] for q in order]
        dec = HeldDecoder(cache, need=need, worker=2, epoch=4, checksums=ds.checksums)
        for f in picked:
            dec.add(f)
        got = dec.finish()
        if list(order) == list(range(len(frames))):  # the first entry of a record wins in both
            same(got, want)
        else:
            assert np.array_equal(got.missing, want.missing) and np.array_equal(got.decoded, want.decoded)
            again = decode_worker(cache, picked, need=need, worker=2, epoch=4, checksums=ds.checksums)
            same(got, again)
    if damaged:
        assert want.bad.size == 1
    assert want.missing.size and want.decoded.size


def test_each_frame_is_stored_and_checked_as_it_is_added(rng):
    """Its records are in their rows of the new batch when add returns, the rest not yet."""
    ds, cache, need, frames = deliveries(rng, False)
    out = np.zeros((need.size, ds.record_bytes), np.uint8)
    keep_rows(cache, need, out)
    dec = HeldDecoder(cache, need=need, worker=0, epoch=4, checksums=ds.checksums, out=out, kept=True)
    have = set(np.intersect1d(need, cache.ids).tolist())
    for f in frames:
        got = dec.add(f)
        fresh = sorted(set(parse_frame(f).a.tolist()) & set(need.tolist()) - have)
        assert got.tolist() == fresh
        have |= set(fresh)
        for i, p in enumerate(need.tolist()):
            assert np.array_equal(out[i], ds.data[p]) == (p in have) or not ds.data[p].any()
    res = dec.finish()
    assert res.ok is False and res.bad.size == 0 and set(res.decoded.tolist()) | set(cache.ids) >= have


def test_held_decoder_exceptions(rng):
    ds, cache, need, frames = deliveries(rng, False)
    with pytest.raises(TypeError, match="'cache' must be a Cache"):
        HeldDecoder(ds, need=need, worker=0)
    with pytest.raises(ValueError, match="'kept' needs 'out'"):
        HeldDecoder(cache, need=need, worker=0, kept=True)
    dec = HeldDecoder(cache, need=need, worker=0, epoch=4)
    with pytest.raises(DecodeError, match="Worker 0: frame 0 carries symbols of two records"):
        dec.add(encode_plan_arrays(ds, [1], [2], epoch=4))
    with pytest.raises(DecodeError, match="Worker 0: frame 1"):
        dec.add(np.zeros(8, np.uint8))
    with pytest.raises(DecodeError, match="Worker 0: frame 2"):
        dec.add(encode_held(ds.cache([1]), [1], epoch=5)[0])  # another epoch's
    dec.finish()
    with pytest.raises(ValueError, match="has finished"):
        dec.add(frames[0])
