"""Tests of coded_shuffle.orders.feistel: bijection, inverse, determinism and uniformity."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from coded_shuffle.orders.feistel import FeistelPermutation, feistel_permutation
from coded_shuffle.orders.quality import decile_chi_square


@pytest.mark.parametrize("N", [0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 100, 1000, 1023, 1025, 4097])
def test_feistel_is_a_bijection_exhaustively(N):
    for seed, epoch in [(0, 0), (1, 0), (1, 1), (12345, 7)]:
        p = feistel_permutation(N, seed=seed, epoch=epoch)
        image = p.forward(np.arange(N))
        assert image.dtype == np.int64
        assert sorted(image.tolist()) == list(range(N))
        assert p.inverse(image).tolist() == list(range(N))
        assert p.forward(p.inverse(np.arange(N))).tolist() == list(range(N))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(N=st.integers(1, 3000), seed=st.integers(0, 2**40), epoch=st.integers(0, 100), data=st.data())
def test_feistel_inverse_undoes_forward(N, seed, epoch, data):
    p = feistel_permutation(N, seed=seed, epoch=epoch)
    idx = data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=50))
    assert p.inverse(p.forward(idx)).tolist() == idx
    assert p.forward(p.inverse(idx)).tolist() == idx
    assert len(set(p.forward(np.arange(N)).tolist())) == N


def test_feistel_large_domain_round_trips(rng):
    N = (1 << 62) - 12345  # odd width: the unbalanced network
    p = feistel_permutation(N, seed=5, epoch=9)
    idx = rng.integers(0, N, size=10_000)
    out = p.forward(idx)
    assert out.min() >= 0 and out.max() < N
    assert (p.inverse(out) == idx).all()


def test_feistel_chunks_are_the_forward_image():
    p = feistel_permutation(10_007, seed=3, epoch=4)
    streamed = np.concatenate(list(p.chunks(1000)))
    assert (streamed == p.forward(np.arange(10_007))).all()
    assert [c.size for c in p.chunks(4000)] == [4000, 4000, 2007]


def test_feistel_is_deterministic_and_differs_across_epochs():
    a = feistel_permutation(5000, seed=8, epoch=1).forward(np.arange(5000))
    assert (a == feistel_permutation(5000, seed=8, epoch=1).forward(np.arange(5000))).all()
    assert (a != feistel_permutation(5000, seed=8, epoch=2).forward(np.arange(5000))).any()
    assert (a != feistel_permutation(5000, seed=9, epoch=1).forward(np.arange(5000))).any()
    assert feistel_permutation(5000, seed=8, epoch=1) == feistel_permutation(5000, seed=8, epoch=1)


def test_feistel_keeps_the_shape_of_its_input():
    p = feistel_permutation(50, seed=0, epoch=0)
    idx = np.arange(12).reshape(3, 4)
    assert p.forward(idx).shape == (3, 4)
    assert p.forward(idx).ravel().tolist() == p.forward(idx.ravel()).tolist()


@pytest.mark.parametrize("N", [10**6, 3 * 10**9])
def test_feistel_head_passes_the_decile_test(N):
    # The StreamingDataset shuffle study: the first 10^4 values of a permutation of 3e9 fall
    # evenly into deciles for numpy's PCG64DXSM but not for old torch.randperm releases.
    for seed in range(5):
        head = feistel_permutation(N, seed=seed, epoch=1).forward(np.arange(10_000))
        assert decile_chi_square(head, N)["pvalue"] > 1e-4


def test_feistel_position_and_value_are_independent():
    # Contingency test of (decile of position, decile of value) over a whole permutation.
    N = 100_000
    for seed in range(3):
        values = feistel_permutation(N, seed=seed, epoch=0).forward(np.arange(N))
        table = np.zeros((10, 10), dtype=np.int64)
        np.add.at(table, (np.arange(N) * 10 // N, values * 10 // N), 1)
        assert stats.chi2_contingency(table).pvalue > 1e-4
        # neighbours are not left in order
        assert np.count_nonzero(np.diff(values) == 1) < 20


def test_feistel_result_keeps_its_inputs():
    p = feistel_permutation(1000, seed=4, epoch=2, rounds=6)
    assert isinstance(p, FeistelPermutation)
    assert (p.N, p.seed, p.epoch, p.rounds, p.bits, len(p.keys)) == (1000, 4, 2, 6, 10, 6)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: feistel_permutation(-1, seed=0, epoch=0), ValueError, "'N' must be at least 0, not -1"),
        (lambda: feistel_permutation(2**62 + 1, seed=0, epoch=0), ValueError, "'N' must be at most"),
        (lambda: feistel_permutation(10.0, seed=0, epoch=0), TypeError, "'N' must be an int"),
        (lambda: feistel_permutation(10, seed=-1, epoch=0), ValueError, "'seed' must be at least 0"),
        (lambda: feistel_permutation(10, seed=0, epoch=-1), ValueError, "'epoch' must be at least 0"),
        (
            lambda: feistel_permutation(10, seed=0, epoch=0, rounds=3),
            ValueError,
            "'rounds' must be at least 4",
        ),
        (
            lambda: feistel_permutation(10, seed=0, epoch=0).forward([10]),
            ValueError,
            r"'idx' must hold indices",
        ),
        (
            lambda: feistel_permutation(10, seed=0, epoch=0).inverse([-1]),
            ValueError,
            r"'idx' must hold indices",
        ),
        (
            lambda: feistel_permutation(10, seed=0, epoch=0).forward([1.5]),
            ValueError,
            "'idx' must hold integers",
        ),
        (lambda: list(feistel_permutation(10, seed=0, epoch=0).chunks(0)), ValueError, "'chunk_size'"),
        (
            lambda: feistel_permutation(0, seed=0, epoch=0).forward([0]),
            ValueError,
            r"'idx' must hold indices",
        ),
    ],
)
def test_feistel_permutation_exceptions(call, error, match):
    with pytest.raises(error, match=match):
        call()
