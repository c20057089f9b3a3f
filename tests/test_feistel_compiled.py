"""The compiled Feistel walk against a plain-Python reference of the documented construction
(tests/oracles.py: rounds (L, R) -> (R, L ^ F(R)) on w bits, widths swapping every round, with
cycle walking)."""

import numpy as np
import pytest

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
