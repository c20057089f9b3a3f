"""The exchange's senders beyond 64 workers: holder sets as rows of 64-bit words
(coded_shuffle.plan.assign_senders with K = 65 to 128), checked against a brute force."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations, product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.plan import (
    assign_senders,
    assign_senders_racks,
    holder_set,
    holder_words,
    lone_holders,
    upload_bound,
)


def brute_least_busiest(wanter, holders):
    """The least busiest upload over every choice of a holder a unit (the oracle), by enumeration."""
    best = None
    for choice in product(*[sorted(h) for h in holders]):
        loads = {}
        for w in choice:
            loads[w] = loads.get(w, 0) + 1
        busiest = max(loads.values(), default=0)
        best = busiest if best is None else min(best, busiest)
    return best or 0


def brute_lambda(holders):
    """``max over S of n(S) / |S|`` over the subsets of the workers that hold anything (adding a
    worker that holds nothing only grows ``|S|``)."""
    involved = sorted(set().union(*holders)) if holders else []
    best = Fraction(0)
    for size in range(1, len(involved) + 1):
        for S in combinations(involved, size):
            inside = sum(1 for h in holders if h <= set(S))
            best = max(best, Fraction(inside, size))
    return best


@st.composite
def wide_units(draw):
    """Up to 7 units on ``K = 65 .. 128`` workers, their holders among 6 workers spread over both
    words (holder sets of one to three workers), a wanter outside each."""
    K = draw(st.integers(65, 128))
    pool = draw(st.lists(st.integers(0, K - 1), min_size=6, max_size=6, unique=True))
    n = draw(st.integers(1, 7))
    holders, wanter = [], []
    for _ in range(n):
        h = set(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True)))
        w = draw(st.integers(0, K - 1).filter(lambda x, h=h: x not in h))
        holders.append(h)
        wanter.append(w)
    return K, wanter, holders


def as_int(h):
    return sum(1 << w for w in h)


@settings(max_examples=80, deadline=None)
@given(wide_units())
def test_senders_beyond_64_workers_are_optimal_against_brute_force(units):
    K, wanter, holders = units
    words = holder_words([as_int(h) for h in holders], K=K)
    assert words.shape == (len(holders), 2)
    a = assign_senders(wanter, words, K=K)
    assert all(int(s) in h for s, h in zip(a.sender.tolist(), holders, strict=True))
    assert a.max_upload == brute_least_busiest(wanter, holders)
    assert a.upload_bound == brute_lambda(holders) == upload_bound(words, K=K)
    assert a.downloads.tolist() == [wanter.count(w) for w in range(K)]
    # Python ints of any width are the same sets
    assert assign_senders(wanter, [as_int(h) for h in holders], K=K).sender.tolist() == a.sender.tolist()
    rack = [w * 4 // K for w in range(K)]
    r = assign_senders_racks(wanter, words, K=K, rack=rack, up=1.0, rack_up=0.5, rack_down=0.5)
    assert all(int(s) in h for s, h in zip(r.sender.tolist(), holders, strict=True))
    assert r.upload_bound == a.upload_bound


def test_the_word_forms_round_trip():
    sets = [1, 1 << 63, 1 << 64, (1 << 127) | 5, (1 << 100) | (1 << 64)]
    words = holder_words(sets, K=128)
    assert [holder_set(words, i) for i in range(len(sets))] == sets
    assert words[2].tolist() == [0, 1] and words[3].tolist() == [5, 1 << 63]
    lone = lone_holders([0, 63, 64, 127], K=128)
    assert [holder_set(lone, i) for i in range(4)] == [1, 1 << 63, 1 << 64, 1 << 127]
    a = assign_senders([5, 6, 7, 0], lone, K=128)  # one holder each: forced
    assert a.sender.tolist() == [0, 63, 64, 127] and a.upload_bound == 1


def test_wide_holder_exceptions():
    words = holder_words([1 << 70], K=80)
    with pytest.raises(ValueError, match="'holders' must be rows of W = 2 words"):
        assign_senders([0], np.zeros((1, 3), dtype=np.uint64), K=80)
    with pytest.raises(ValueError, match="'holders' must be non-empty sets"):
        assign_senders([0], np.zeros((1, 2), dtype=np.uint64), K=80)
    with pytest.raises(ValueError, match="'holders' must be non-empty sets"):
        assign_senders([0], holder_words([1 << 90], K=128), K=80)  # worker 90 of 80
    with pytest.raises(ValueError, match="'holders' must not hold a unit's wanter"):
        assign_senders([70], words, K=80)
    with pytest.raises(ValueError, match="'wanter' must hold workers 0 to 79"):
        assign_senders([80], words, K=80)
    with pytest.raises(ValueError, match="'sets' must be sets of the K = 80 workers"):
        holder_words([1 << 80], K=80)
    with pytest.raises(ValueError, match="'worker' must hold workers 0 to 79"):
        lone_holders([80], K=80)
