"""Exact at any entry size: every bound and load is homogeneous, ``f(c S) = c f(S)``, up to the
largest matrix accepted (2**53 points), and a larger one is refused naming ``S``.

The pieces of the storage bound are ``C(K - 1, t)`` times the records, past int64 from
``K = 15`` at 2**53 records; an independent dynamic program in Python ints is the oracle there.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np
import pytest

from coded_shuffle.bounds import lower_bound, ordering_bound
from coded_shuffle.loads import bound_with_storage, rates_with_storage
from coded_shuffle.matrix import MAX_POINTS
from coded_shuffle.plan import pack_cycles, rates
from coded_shuffle.storage import storage_lower_bound, storage_ordering_bound, storage_rates

INT64_MAX = 2**63 - 1


def _constants(S: np.ndarray, rng: np.random.Generator) -> list[int]:
    """The largest constant the point limit allows, one drawn below it, and one past 2**40."""
    top = MAX_POINTS // int(S.sum())
    return [top, int(rng.integers(top // 2, top)), 2**40 + 7]


def _matrix(rng: np.random.Generator, K: int, high: int = 3) -> np.ndarray:
    S = rng.integers(0, high, (K, K))
    S[0, 1] += 1  # something moves
    return S


@pytest.mark.parametrize("K", [3, 7, 12, 24])
def test_lower_bound_is_homogeneous(rng, K):
    S = _matrix(rng, K)
    for exact in (None, False):
        b = lower_bound(S, exact=exact)
        for c in _constants(S, rng):
            bc = lower_bound(S * c, exact=exact)
            assert bc.value == c * b.value and bc.exact == b.exact
            assert ordering_bound(S * c, bc.ordering) == bc.value


def test_ordering_program_is_homogeneous(rng):
    S = _matrix(rng, 21)
    b = lower_bound(S, exact=True)
    c = MAX_POINTS // int(S.sum())
    bc = lower_bound(S * c, exact=True)
    assert bc.value == c * b.value and bc.exact == b.exact


@pytest.mark.parametrize(("K", "M"), [(4, 2), (9, 4), (15, 7), (16, 8), (16, 15)])
def test_storage_lower_bound_is_homogeneous(rng, K, M):
    S = _matrix(rng, K)
    b = storage_lower_bound(S, M=M)
    for c in _constants(S, rng):
        bc = storage_lower_bound(S * c, M=M)
        assert bc.value == c * b.value and bc.pieces == c * b.pieces and bc.exact
        assert storage_ordering_bound(S * c, bc.ordering, M=M) == bc.pieces
    if K <= 9:
        b = storage_lower_bound(S, M=M, exact=False)
        for c in _constants(S, rng):
            assert storage_lower_bound(S * c, M=M, exact=False).value == c * b.value


def _pieces_oracle(off: list[list[int]], t: int) -> int:
    """The storage bound in pieces by the dynamic program over the set placed last, in Python ints
    (the recursion of :mod:`coded_shuffle.storage.bound`, written out independently)."""
    K = len(off)
    f = [0] * (1 << K)
    into = [[0] * K for _ in range(1 << K)]  # into[U][v]: records v wants from the workers of U
    for U in range(1, 1 << K):
        low = (U & -U).bit_length() - 1
        into[U] = [a + off[low][v] for a, v in zip(into[U ^ (1 << low)], range(K), strict=True)]
        size = bin(U).count("1")
        w = comb(size - 2, t) if size - 2 >= t else 0
        f[U] = max(f[U ^ (1 << v)] + w * into[U ^ (1 << v)][v] for v in range(K) if U >> v & 1)
    return f[-1]


def test_storage_bound_past_int64_against_python_ints(rng):
    K, M = 13, 7  # C(11, 6) = 462 times 2**53 records is past int64
    S = rng.integers(0, 2**44, (K, K))
    S = S * (MAX_POINTS // int(S.sum()))
    off = S.copy()
    np.fill_diagonal(off, 0)
    expected = _pieces_oracle(off.tolist(), M - 1)
    assert expected > INT64_MAX // comb(K - 1, M - 1)  # the counts in records pass int64 as pieces
    b = storage_lower_bound(S, M=M)
    assert b.pieces == expected and b.value == Fraction(expected, comb(K - 1, M - 1))


@pytest.mark.parametrize("K", [3, 8, 16])
def test_rates_are_homogeneous(rng, K):
    S = _matrix(rng, K)
    r = rates(S)
    for c in _constants(S, rng):
        rc = rates(S * c)
        assert (rc.uncoded, rc.paired, rc.coded) == (c * r.uncoded, c * r.paired, c * r.coded)
    q = 3
    r = rates(S, subpackets=q)
    c = MAX_POINTS // (q * int(r.leftovers))
    rc = rates(S * c, subpackets=q)
    assert rc.coded == c * r.coded and rc.uncoded_leftovers == c * r.uncoded_leftovers
    with pytest.raises(ValueError, match="Argument 'subpackets' must be at most"):
        rates(S * c, subpackets=2 * q)


@pytest.mark.parametrize("strategy", ["lp", "exact"])
def test_program_packings_at_any_scale(rng, strategy):
    S = _matrix(rng, 7)
    r = rates(S, strategy=strategy)
    c = MAX_POINTS // int(S.sum())
    rc = rates(S * c, strategy=strategy)
    # c copies of a packing of Omega pack c Omega: never fewer cycles; more only when not proven
    assert rc.cycles_used >= c * r.cycles_used
    if r.packing.optimal and rc.packing.optimal:
        assert rc.cycles_used <= rc.packing.upper_bound
    assert rc.coded <= c * r.coded and rc.packing.upper_bound >= rc.cycles_used


@pytest.mark.parametrize(("K", "M"), [(3, 2), (6, 2), (6, 3), (6, 5)])
def test_storage_rates_are_homogeneous(rng, K, M):
    S = _matrix(rng, K)
    r = storage_rates(S, M=M)
    for c in _constants(S, rng):
        rc = storage_rates(S * c, M=M)
        assert (rc.uncoded, rc.grouped, rc.coded) == (c * r.uncoded, c * r.grouped, c * r.coded)
        assert rc.coded_symbols == c * r.coded_symbols


@pytest.mark.parametrize("storage", [1, 3])
def test_loads_with_storage_are_homogeneous(rng, storage):
    S = _matrix(rng, 5)
    r, b = rates_with_storage(S, storage=storage), bound_with_storage(S, storage=storage)
    c = MAX_POINTS // int(S.sum())
    rc, bc = rates_with_storage(S * c, storage=storage), bound_with_storage(S * c, storage=storage)
    assert rc.coded == c * r.coded and rc.paired == c * r.paired and rc.uncoded == c * r.uncoded
    assert bc.value == c * b.value


@pytest.mark.parametrize("M", [1, 2])
def test_past_the_point_limit_is_refused(rng, M):
    S = _matrix(rng, 4)
    for c in (MAX_POINTS // int(S.sum()) + 1, INT64_MAX // int(S.max())):
        for call in (bound_with_storage, rates_with_storage):
            with pytest.raises(ValueError, match="Argument 'S' must count at most 2\\*\\*53"):
                call(S * c, storage=M)
    big = [[int(v) * 2**62 for v in row] for row in S.tolist()]  # Python ints past int64
    with pytest.raises(ValueError, match="Argument 'S'"):
        bound_with_storage(big, storage=M)
    with pytest.raises(ValueError, match="Argument 'omega' must count at most"):
        pack_cycles(np.diag(np.ones(3, dtype=np.int64))[[1, 2, 0]] * (MAX_POINTS // 2))
