"""The compiled Feistel walk against a plain-Python reference of the documented construction."""

import numpy as np
import pytest

import coded_shuffle.orders.feistel as feistel
from coded_shuffle.orders import feistel_permutation

MASK = (1 << 64) - 1


def fmix64(x: int) -> int:
    x ^= x >> 33
    x = (x * 0xFF51AFD7ED558CCD) & MASK
    x ^= x >> 33
    x = (x * 0xC4CEB9FE1A85EC53) & MASK
    return x ^ (x >> 33)


def reference(p, i: int, inverse: bool) -> int:
    """Rounds (L, R) -> (R, L ^ F(R)) on w bits, widths swapping every round, with cycle walking."""
    w = p.bits
    high, low = w - w // 2, w // 2
    x = i
    while True:
        for r in range(p.rounds):
            k = p.rounds - 1 - r if inverse else r
            wa, wb = (high, low) if k % 2 == 0 else (low, high)
            if not inverse:
                lo = x & ((1 << wb) - 1)
                x = ((x >> wb) ^ (fmix64(lo ^ p.keys[k]) >> (64 - wa))) | (lo << wa)
            else:
                lo = x >> wa
                x = (((x & ((1 << wa) - 1)) ^ (fmix64(lo ^ p.keys[k]) >> (64 - wa))) << wb) | lo
        if x < p.N:
            return x


@pytest.mark.parametrize("N", [5, 1000, 5000, 2**16 + 3, 10**9])
def test_compiled_walk_matches_reference(N, monkeypatch):
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1)
    p = feistel_permutation(N, seed=11, epoch=4)
    idx = np.unique(np.linspace(0, N - 1, 200).astype(np.int64))
    fwd = p.forward(idx)
    assert fwd.tolist() == [reference(p, int(i), False) for i in idx]
    assert p.inverse(fwd).tolist() == idx.tolist()
    assert p.inverse(idx).tolist() == [reference(p, int(i), True) for i in idx]


def test_compiled_and_small_paths_agree(monkeypatch):
    p = feistel_permutation(50_000, seed=2, epoch=9)
    idx = np.arange(50_000, dtype=np.int64)
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1)
    compiled = p.forward(idx)
    monkeypatch.setattr(feistel, "_COMPILED_FROM", 1 << 62)
    assert np.array_equal(compiled, p.forward(idx))
    assert np.array_equal(np.sort(compiled), idx)
