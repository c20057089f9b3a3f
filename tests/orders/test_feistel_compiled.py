"""The compiled Feistel walk against a plain-Python reference of the documented construction
(tests/oracles.py: rounds (L, R) -> (R, L ^ F(R)) on w bits, widths swapping every round, with
cycle walking)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import coded_shuffle.orders._feistel_kernels as kernels
import coded_shuffle.orders.feistel as feistel
from coded_shuffle.orders import feistel_permutation
from tests.oracles import feistel_from_spec


@pytest.mark.parametrize("N", [5, 1000, 5000, 2**16 + 3, 10**9])
def test_compiled_walk_matches_reference(N, monkeypatch):
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1)
    p = feistel_permutation(N, seed=11, epoch=4)
    idx = np.unique(np.linspace(0, N - 1, 200).astype(np.int64))
    fwd = p.forward(idx)
    assert fwd.tolist() == feistel_from_spec(N, p.keys, idx)
    assert p.inverse(fwd).tolist() == idx.tolist()
    assert p.inverse(idx).tolist() == feistel_from_spec(N, p.keys, idx, inverse=True)


def test_compiled_and_small_paths_agree(monkeypatch):
    p = feistel_permutation(50_000, seed=2, epoch=9)
    idx = np.arange(50_000, dtype=np.int64)
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1)
    compiled = p.forward(idx)
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1 << 62)
    assert np.array_equal(compiled, p.forward(idx))
    assert np.array_equal(np.sort(compiled), idx)


@pytest.mark.parametrize("N", [5, 4097, 2**16 + 3, 10**9, 2**53])
def test_blocks_match_reference(N, rng):
    # One block holds lanes that leave [0, N) once or more (cycle walking) beside lanes that do
    # not; the lanes past n stay untouched.
    p = feistel_permutation(N, seed=5, epoch=int(rng.integers(100)))
    keys = np.array(p.keys, dtype=np.uint64)
    idx = rng.integers(0, N, size=300, dtype=np.int64)
    x = np.zeros(kernels._LANES, dtype=np.uint64)
    x[:300] = idx
    vals, lanes = np.empty(300, dtype=np.uint64), np.empty(300, dtype=np.int64)
    kernels.walk_block(x, 300, keys, p.bits, N, False, vals, lanes)
    assert x[:300].tolist() == feistel_from_spec(N, p.keys, idx)
    assert not x[300:].any()
    kernels.walk_block(x, 300, keys, p.bits, N, True, vals, lanes)
    assert x[:300].tolist() == idx.tolist()
    x[:300] = idx
    kernels.walk_block(x, 300, keys, p.bits, N, True, vals, lanes)
    assert x[:300].tolist() == feistel_from_spec(N, p.keys, idx, inverse=True)


def _numpy_count(lo, hi, p_t, p_t1, K_t, K_t1):
    """The numpy expression count_transitions states it equals (the numpy network, not the
    compiled one)."""
    from coded_shuffle.orders.epochs import positions_to_owners

    pos = np.arange(lo, hi, dtype=np.int64)
    key = positions_to_owners(pos, p_t.N, K_t).astype(np.int64) * K_t1
    key += positions_to_owners(p_t1.inverse(p_t.forward(pos)), p_t.N, K_t1)
    return np.bincount(key, minlength=K_t * K_t1)


@settings(max_examples=60, deadline=None)
@given(
    N=st.integers(1, 5000),
    K_t=st.integers(1, 40),
    K_t1=st.integers(1, 40),
    seed=st.integers(0, 2**32),
    cut=st.floats(0, 1),
)
def test_count_transitions_matches_numpy(N, K_t, K_t1, seed, cut):
    # Any range [lo, hi): blocks start inside a batch and stop at batch ends; owners of batches
    # of unequal sizes (N not divisible by K) by arithmetic.
    K_t, K_t1 = min(K_t, N), min(K_t1, N)
    p_t = feistel_permutation(N, seed=seed, epoch=3)
    p_t1 = feistel_permutation(N, seed=seed, epoch=4)
    lo = int(cut * N)
    hi = min(N, lo + 1 + (seed % (N + 1)))
    counts = np.zeros(K_t * K_t1, dtype=np.int64)
    args = (np.array(p_t.keys, dtype=np.uint64), np.array(p_t1.keys, dtype=np.uint64), p_t.bits, N)
    kernels.count_transitions(lo, hi, *args, K_t, K_t1, counts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(feistel, "_COMPILED_FROM", 1 << 62)
        assert counts.tolist() == _numpy_count(lo, hi, p_t, p_t1, K_t, K_t1).tolist()


def test_count_transitions_near_2_to_53():
    # The owners of the last positions of the largest N, where a float quotient is the least exact.
    N = 2**53
    p_t, p_t1 = feistel_permutation(N, seed=1, epoch=0), feistel_permutation(N, seed=1, epoch=1)
    keys = (np.array(p_t.keys, dtype=np.uint64), np.array(p_t1.keys, dtype=np.uint64), p_t.bits, N)
    for K_t, K_t1 in [(3, 7), (1000, 999), (1, 1)]:
        lo = N - 3000
        counts = np.zeros(K_t * K_t1, dtype=np.int64)
        kernels.count_transitions(lo, N, *keys, K_t, K_t1, counts)
        assert counts.tolist() == _numpy_count(lo, N, p_t, p_t1, K_t, K_t1).tolist()
