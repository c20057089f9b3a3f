import numpy as np
import pytest

from coded_shuffle.orders import (
    batch_sizes,
    epoch_permutation,
    epoch_placement,
    epoch_rng,
    placement_from_owner,
    placement_from_permutation,
)


@pytest.mark.parametrize("N,K", [(10, 3), (15, 3), (7, 7), (100, 8), (5, 1)])
def test_batch_sizes_differ_by_at_most_one(N, K):
    sizes = batch_sizes(N, K)
    assert sizes.sum() == N
    assert sizes.max() - sizes.min() <= 1
    assert list(sizes) == sorted(sizes, reverse=True)  # the first N % K workers hold one more


def test_epoch_permutation_reproducible_and_independent_per_epoch():
    a = epoch_permutation(1000, seed=3, epoch=5)
    assert np.array_equal(a, epoch_permutation(1000, seed=3, epoch=5))
    assert not np.array_equal(a, epoch_permutation(1000, seed=3, epoch=6))
    assert not np.array_equal(a, epoch_permutation(1000, seed=4, epoch=5))
    assert np.array_equal(np.sort(a), np.arange(1000))
    assert not a.flags.writeable


def test_epoch_stream_is_the_spawned_child():
    # Keyed derivation equals the child that SeedSequence.spawn hands out for that epoch.
    child = np.random.SeedSequence(11).spawn(4)[3]
    expected = np.random.Generator(np.random.PCG64DXSM(child)).permutation(50)
    assert np.array_equal(epoch_permutation(50, seed=11, epoch=3), expected)
    assert isinstance(epoch_rng(11, 3).bit_generator, np.random.PCG64DXSM)


def test_placement_from_permutation_matches_loop(rng):
    perm = rng.permutation(23)
    p = placement_from_permutation(perm, 4)
    sizes = batch_sizes(23, 4)
    expected = np.empty(23, dtype=int)
    pos = 0
    for k, s in enumerate(sizes):
        for q in range(pos, pos + s):
            expected[perm[q]] = k
        pos += s
    assert p.owner.tolist() == expected.tolist()
    assert p.sizes().tolist() == sizes.tolist()
    assert sorted(p.batch(2).tolist()) == sorted(perm[sizes[:2].sum() : sizes[:3].sum()].tolist())


def test_epoch_placement_is_the_cut_permutation():
    p = epoch_placement(101, 5, seed=2, epoch=1)
    q = placement_from_permutation(epoch_permutation(101, seed=2, epoch=1), 5)
    assert np.array_equal(p.owner, q.owner)


def test_placement_exceptions():
    with pytest.raises(ValueError, match="'K'"):
        batch_sizes(10, 0)
    with pytest.raises(ValueError, match="'N'"):
        batch_sizes(-1, 2)
    with pytest.raises(TypeError, match="'N'"):
        epoch_permutation(2.5, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'seed'"):
        epoch_permutation(5, seed=-1, epoch=0)
    with pytest.raises(ValueError, match="'epoch'"):
        epoch_rng(0, -2)
    with pytest.raises(ValueError, match="'N'"):
        epoch_placement(3, 4, seed=0, epoch=0)
    with pytest.raises(ValueError, match="'perm'"):
        placement_from_permutation([0, 0, 1], 2)
    with pytest.raises(ValueError, match="'perm'"):
        placement_from_permutation([0], 2)
    with pytest.raises(ValueError, match="'owner'"):
        placement_from_owner([0, 3], 2)
    with pytest.raises(ValueError, match="'owner'"):
        placement_from_owner([[0, 1]], 2)
    with pytest.raises(ValueError, match="'k'"):
        placement_from_owner([0, 1], 2).batch(2)
