"""Batches balanced by bytes: each cut nearest its share, every batch within one record of equal,
every record in exactly one batch, under every epoch order."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.orders import (
    EPOCH_ORDERS,
    OrderSpec,
    batch_sizes,
    byte_batch_sizes,
    check_record_sizes,
    epoch_batch_sizes,
    epoch_order,
    epoch_permutation,
    epoch_placement,
    order_placement,
    placement_from_permutation,
)


def brute_cuts(order_sizes: list[int], K: int) -> list[int]:
    """Each cut ``k`` by scanning every position: the one whose prefix of bytes is nearest
    ``k B / K`` (compared as ``|K P - k B|`` in Python ints), the first on a tie."""
    P = [0]
    for s in order_sizes:
        P.append(P[-1] + s)
    B = P[-1]
    inner = [min(range(len(P)), key=lambda p: (abs(K * P[p] - k * B), p)) for k in range(1, K)]
    return [0, *inner, len(order_sizes)]


sizes_lists = st.lists(st.integers(1, 2000), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(sizes=sizes_lists, K=st.integers(1, 12))
def test_each_batch_within_one_record_of_equal(sizes, K):
    K = min(K, len(sizes))
    counts = byte_batch_sizes(sizes, K)
    assert counts.sum() == len(sizes) and counts.min() >= 1  # every record once, no batch empty
    ends = np.cumsum(counts)
    got = np.add.reduceat(np.array(sizes, dtype=np.int64), ends - counts)
    B, biggest = sum(sizes), max(sizes)
    for b in got.tolist():  # |b - B / K| <= the largest record, exactly in integers
        assert abs(K * b - B) <= K * biggest
    if K * biggest < B:  # no record near a batch's share: every cut is the nearest one
        assert [0, *ends.tolist()] == brute_cuts(sizes, K)


@settings(max_examples=60, deadline=None)
@given(sizes=sizes_lists, K=st.integers(1, 8))
def test_cuts_are_at_most_half_a_record_from_their_share(sizes, K):
    K = min(K, len(sizes))
    if K * max(sizes) >= sum(sizes):
        return
    P = np.concatenate(([0], np.cumsum(sizes)))
    cuts = np.concatenate(([0], np.cumsum(byte_batch_sizes(sizes, K))))
    B = int(P[-1])
    for k in range(1, K):
        c = int(cuts[k])
        # the record straddling the share k B / K: the cut is one of its two ends, the nearer
        p1 = int(np.searchsorted(P, -(-k * B // K)))
        assert c in (p1 - 1, p1)
        assert 2 * abs(K * int(P[c]) - k * B) <= K * sizes[p1 - 1]


def test_equal_sizes_give_counts_differing_by_at_most_one():
    for N, K in [(10, 3), (100, 7), (12, 4), (5, 5)]:
        counts = byte_batch_sizes([7] * N, K)
        assert sorted(counts.tolist()) == sorted(batch_sizes(N, K).tolist())


def test_a_worked_case():
    # 6 + 1 + ... : B = 12, the share of worker 0 is 6 bytes, exactly the first record
    assert byte_batch_sizes([6, 1, 1, 1, 1, 1, 1], 2).tolist() == [1, 6]
    # one giant record: every other worker still gets one record
    assert byte_batch_sizes([1, 1, 1000, 1], 4).tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("name", EPOCH_ORDERS)
def test_exactly_once_under_every_order(name, rng):
    N, K = 200, 6
    sizes = rng.lognormal(5, 1, N).astype(np.int64).clip(16, 1024)
    spec = OrderSpec(name, shard_size=30, block_size=50)
    order = epoch_order(N, seed=4, epoch=2, spec=spec)
    p = order_placement(N, K, seed=4, epoch=2, spec=spec, sizes=sizes, balance="bytes")
    counts = epoch_batch_sizes(order, K, sizes=sizes, balance="bytes")
    runs = np.split(order, np.cumsum(counts)[:-1])
    seen = np.concatenate(runs)
    assert np.array_equal(np.sort(seen), np.arange(N))  # every record in exactly one batch
    for k, run in enumerate(runs):
        assert np.array_equal(np.sort(run), p.batch(k))  # the batch is the k-th run of the order
    got = p.batch_bytes(sizes)
    assert int(got.sum()) == int(sizes.sum())
    assert np.all(np.abs(K * got - int(sizes.sum())) <= K * int(sizes.max()))
    by_count = order_placement(N, K, seed=4, epoch=2, spec=spec)
    assert np.array_equal(by_count.sizes(), batch_sizes(N, K))


def test_the_placements_agree():
    N, K, sizes = 50, 4, np.arange(1, 51)
    perm = epoch_permutation(N, seed=1, epoch=3)
    a = placement_from_permutation(perm, K, sizes=sizes, balance="bytes")
    b = epoch_placement(N, K, seed=1, epoch=3, sizes=sizes, balance="bytes")
    c = order_placement(N, K, seed=1, epoch=3, sizes=sizes, balance="bytes")
    assert np.array_equal(a.owner, b.owner) and np.array_equal(a.owner, c.owner)
    # by count, sizes given or not, the placement of today
    d = placement_from_permutation(perm, K, sizes=sizes)
    assert np.array_equal(d.owner, placement_from_permutation(perm, K).owner)


def test_balance_exceptions():
    with pytest.raises(ValueError, match="'balance'"):
        epoch_batch_sizes([0, 1], 2, balance="tokens")
    with pytest.raises(ValueError, match="'sizes' must be given"):
        epoch_batch_sizes([0, 1], 2, balance="bytes")
    with pytest.raises(ValueError, match="'sizes' must give the size of each of the N = 3"):
        order_placement(3, 2, seed=0, epoch=0, sizes=[1, 2], balance="bytes")
    with pytest.raises(ValueError, match=r"'sizes' must hold sizes of at least 1 byte, not 0 \(record 1\)"):
        epoch_placement(3, 2, seed=0, epoch=0, sizes=[4, 0, 1], balance="bytes")
    with pytest.raises(ValueError, match="'sizes' must hold integers"):
        check_record_sizes([1.5, 2])
    with pytest.raises(ValueError, match="'sizes' must sum to at most 2"):
        check_record_sizes([2**52, 2**52, 1])
    with pytest.raises(ValueError, match="'order_sizes' must have at least K = 3"):
        byte_batch_sizes([1, 2], 3)
    with pytest.raises(ValueError, match="'perm' must be a permutation"):
        placement_from_permutation([0, 5, 1], 2, sizes=[1, 1, 1], balance="bytes")
    with pytest.raises(TypeError, match="'balance'"):
        order_placement(4, 2, seed=0, epoch=0, balance=None)
