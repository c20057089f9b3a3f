"""Token files: windows of a flat token stream, zero copy over the map, a loader over them, refusals."""

from __future__ import annotations

import os

import numpy as np
import pytest

from coded_shuffle import InProcessLoader
from coded_shuffle.codec import load_dataset
from coded_shuffle.records import TokenWindows


def test_a_window_is_a_slice_of_the_file_s_map(tmp_path, rng):
    tokens = rng.integers(0, 50257, 1000, dtype=np.uint16)  # GPT-2's vocabulary, as nanoGPT keeps it
    tokens.tofile(tmp_path / "train.bin")
    src = TokenWindows(tmp_path / "train.bin", block_size=64)
    (m,) = src.maps
    assert isinstance(m, np.memmap) and os.path.samefile(m.filename, tmp_path / "train.bin")
    assert len(src) == 15 and src.record_bytes == 128  # 1000 // 64 windows; the last 40 tokens dropped
    assert np.shares_memory(src.view(7), m) and np.shares_memory(src.table(), m)
    assert np.array_equal(src.windows(), tokens[:960].reshape(15, 64))
    assert np.array_equal(src.view(14).view("<u2"), tokens[896:960])
    assert not np.shares_memory(src.gather([3]), m)
    data = load_dataset(src)  # the codec's dataset: the map, no copy
    assert np.shares_memory(data.data, m) and data.record_bytes == 128


def test_an_in_process_loader_runs_over_token_windows(tmp_path, rng):
    tokens = rng.integers(0, 2**16, 40 * 8, dtype=np.uint16)
    tokens.tofile(tmp_path / "train.bin")
    src = TokenWindows(tmp_path / "train.bin", block_size=8)
    epochs = list(InProcessLoader(src, K=4, epochs=2, seed=1))
    assert len(epochs) == 2
    for ep in epochs:
        ids = np.concatenate([np.asarray(b.ids) for b in ep.batches])
        assert sorted(ids.tolist()) == list(range(40))  # each window once an epoch
        for b in ep.batches:
            got = np.ascontiguousarray(b.records).view(np.uint8).view("<u2")
            assert np.array_equal(got, tokens.reshape(40, 8)[np.asarray(b.ids)])


def test_token_windows_exceptions(tmp_path):
    np.arange(10, dtype=np.uint16).tofile(tmp_path / "ok.bin")
    (tmp_path / "odd.bin").write_bytes(b"\x00" * 7)
    with pytest.raises(ValueError, match=r"^Argument 'path' must name a token file: no such file: .*nope"):
        TokenWindows(tmp_path / "nope.bin", block_size=4)
    with pytest.raises(ValueError, match=r"^Argument 'path' must .* whole uint16 .*odd\.bin holds 7"):
        TokenWindows(tmp_path / "odd.bin", block_size=2)
    with pytest.raises(ValueError, match=r"^Argument 'path' .* one window of 11 tokens: .*ok.bin holds 10$"):
        TokenWindows(tmp_path / "ok.bin", block_size=11)
    with pytest.raises(ValueError, match=r"^Argument 'path' .*ok\.bin holds 20 bytes, -10 after the offset"):
        TokenWindows(tmp_path / "ok.bin", block_size=1, offset=30)
    with pytest.raises(ValueError, match=r"^Argument 'block_size' must be at least 1, not 0\.$"):
        TokenWindows(tmp_path / "ok.bin", block_size=0)
    with pytest.raises(ValueError, match=r"^Argument 'dtype' must be one of \('uint16', 'uint32'\)"):
        TokenWindows(tmp_path / "ok.bin", block_size=2, dtype="float32")
    with pytest.raises(TypeError, match=r"^Argument 'path' must be a str or os.PathLike, not int\.$"):
        TokenWindows(3, block_size=2)  # type: ignore[arg-type]


def test_an_in_process_loader_yields_windows_of_the_token_type_and_decoded_samples(tmp_path, rng):
    rng.integers(0, 2**32, 30 * 4 + 3, dtype=np.uint32).tofile(tmp_path / "train.bin")
    windows = np.fromfile(tmp_path / "train.bin", dtype="<u4")[:120].reshape(30, 4)  # numpy's own reading
    src = TokenWindows(tmp_path / "train.bin", block_size=4, dtype="uint32")
    for ep in InProcessLoader(src, K=3, epochs=2, seed=2, decode=lambda b: bytes(b)[::-1]):
        seen = []
        for b in ep.batches:
            assert b.records.dtype == np.dtype("<u4") and np.array_equal(b.records, windows[b.ids])
            for i, sample in b:  # in the epoch's order: decode of the record's bytes
                assert sample == windows[i].tobytes()[::-1]
                seen.append(i)
            assert seen[-len(b) :] == b.ids.tolist()
            assert [s for _, s in b.samples(bytes)] == [windows[i].tobytes() for i in b.ids.tolist()]
        assert sorted(seen) == list(range(30))  # each window once an epoch
    with pytest.raises(TypeError, match=r"^Argument 'decode' must be a callable .*, not int\.$"):
        next(b.samples(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Argument 'decode' must be a callable .*, not str\.$"):
        InProcessLoader(src, K=3, epochs=1, decode="tokens")
