import numpy as np
import pytest

from coded_shuffle.matrix import feistel_shuffle_matrix, shuffle_matrix
from coded_shuffle.orders import (
    EPOCH_ORDERS,
    OrderSpec,
    batch_sizes,
    epoch_order,
    epoch_placement,
    order_placement,
    positions_to_owners,
)


@pytest.mark.parametrize("N,K", [(10, 3), (12, 4), (7, 7), (100, 9), (5, 1)])
def test_positions_to_owners_against_repeat(N, K):
    expected = np.repeat(np.arange(K), batch_sizes(N, K))
    assert positions_to_owners(np.arange(N), N, K).tolist() == expected.tolist()


@pytest.mark.parametrize("name", EPOCH_ORDERS)
def test_every_order_is_a_permutation_and_reproducible(name):
    spec = OrderSpec(name, shard_size=7, canonical_nodes=2, block_size=10)
    o = epoch_order(60, seed=3, epoch=2, spec=spec)
    assert sorted(o.tolist()) == list(range(60))
    assert np.array_equal(o, epoch_order(60, seed=3, epoch=2, spec=spec))
    p = order_placement(60, 4, seed=3, epoch=2, spec=spec)
    assert p.sizes().tolist() == [15, 15, 15, 15]
    # Batches are contiguous runs of the global order.
    assert np.array_equal(p.owner[o], np.repeat(np.arange(4), 15))


def test_order_does_not_depend_on_K():
    # The global order is fixed by (seed, epoch): with 8 workers, worker k holds the first or
    # second half of what worker k // 2 holds with 4 workers.
    for name in ("permutation", "feistel", "py1e"):
        spec = OrderSpec(name, shard_size=10, block_size=16)
        four = order_placement(80, 4, seed=1, epoch=3, spec=spec)
        eight = order_placement(80, 8, seed=1, epoch=3, spec=spec)
        assert np.array_equal(eight.owner // 2, four.owner)


def test_feistel_matrix_streamed_equals_materialized():
    spec = OrderSpec("feistel")
    for N, K_t, K_t1 in [(101, 4, 4), (64, 3, 5), (33, 6, 2)]:
        a = order_placement(N, K_t, seed=8, epoch=1, spec=spec)
        b = order_placement(N, K_t1, seed=8, epoch=2, spec=spec)
        assert np.array_equal(
            feistel_shuffle_matrix(N, K_t, K_t1, seed=8, epoch=1, chunk=10), shuffle_matrix(a, b)
        )


def test_epochs_exceptions():
    with pytest.raises(ValueError, match="'N' must be at most 2\\*\\*40 .* for a permutation"):
        epoch_placement(2**70, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'order'"):
        OrderSpec("shuffled")
    with pytest.raises(ValueError, match="'shard_size'"):
        OrderSpec("py1s", shard_size=0)
    with pytest.raises(ValueError, match="'canonical_nodes'"):
        OrderSpec("py1s", canonical_nodes=0)
    with pytest.raises(TypeError, match="'spec'"):
        epoch_order(10, seed=0, epoch=0, spec="py1s")
    with pytest.raises(ValueError, match="'canonical_nodes'"):
        epoch_order(3, seed=0, epoch=0, spec=OrderSpec("py1s", canonical_nodes=4))
    with pytest.raises(ValueError, match="'N'"):
        order_placement(3, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'K'"):
        positions_to_owners(np.arange(3), 3, 0)
    with pytest.raises(ValueError, match="'N'"):
        feistel_shuffle_matrix(3, 4, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'chunk'"):
        feistel_shuffle_matrix(30, 4, 4, seed=0, epoch=0, chunk=0)
