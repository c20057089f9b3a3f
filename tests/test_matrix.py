import numpy as np
import pytest

from coded_shuffle.matrix import (
    check_shuffle_matrix,
    conservation_defect,
    is_conserved,
    leftover_matrix,
    pair_minima,
    placements_from_matrix,
    shuffle_matrix,
    shuffle_matrix_from_permutations,
)
from coded_shuffle.orders import epoch_placement, placement_from_owner
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES


def brute_shuffle_matrix(a, b, K):
    S = [[0] * K for _ in range(K)]
    for i, j in zip(a, b, strict=True):
        S[int(i)][int(j)] += 1
    return S


def test_shuffle_matrix_against_loop(rng):
    for K in (1, 2, 5, 9):
        N = int(rng.integers(K, 200))
        a = epoch_placement(N, K, seed=int(rng.integers(100)), epoch=0)
        b = epoch_placement(N, K, seed=int(rng.integers(100)), epoch=1)
        S = shuffle_matrix(a, b)
        assert S.tolist() == brute_shuffle_matrix(a.owner, b.owner, K)
        assert S.sum(axis=1).tolist() == a.sizes().tolist()
        assert S.sum(axis=0).tolist() == b.sizes().tolist()
        assert not S.flags.writeable


def test_shuffle_matrix_chunks(monkeypatch, rng):
    import coded_shuffle.matrix as m

    monkeypatch.setattr(m, "_CHUNK", 7)
    a = placement_from_owner(rng.integers(0, 3, 50), 3)
    b = placement_from_owner(rng.integers(0, 3, 50), 3)
    assert shuffle_matrix(a, b).tolist() == brute_shuffle_matrix(a.owner, b.owner, 3)


def test_shuffle_matrix_large_K_no_wraparound():
    # uint16 owners times K would wrap at 2^16 if not cast first.
    K = 300
    a = placement_from_owner(np.arange(K), K)
    b = placement_from_owner((np.arange(K) + 1) % K, K)
    S = shuffle_matrix(a, b)
    assert S.sum() == K
    assert all(S[k, (k + 1) % K] == 1 for k in range(K))


def test_paper_example1_leftovers():
    # Example 1: 4 order-2 symbols; the 3 leftovers form one cycle.
    assert int(np.triu(pair_minima(EXAMPLE_1), 1).sum()) == EXAMPLE_1_VALUES["pairs"]
    omega = leftover_matrix(EXAMPLE_1)
    assert omega.sum() == EXAMPLE_1_VALUES["leftovers"]
    assert is_conserved(EXAMPLE_1)


def test_conservation_with_equal_and_unequal_batches(rng):
    a = epoch_placement(120, 6, seed=1, epoch=0)
    b = epoch_placement(120, 6, seed=1, epoch=1)
    assert is_conserved(shuffle_matrix(a, b))
    # Unequal batches: worker 0 holds 3 and needs 2.
    S = [[1, 2], [1, 0]]
    assert conservation_defect(S).tolist() == [1, -1]
    assert not is_conserved(S)


def test_from_permutations_and_back():
    S = shuffle_matrix_from_permutations([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], 3)
    assert S.tolist() == [[0, 0, 2], [0, 2, 0], [2, 0, 0]]
    a, b = placements_from_matrix(EXAMPLE_1)
    assert shuffle_matrix(a, b).tolist() == [list(row) for row in EXAMPLE_1]


def test_check_shuffle_matrix_exceptions():
    with pytest.raises(ValueError, match="square"):
        check_shuffle_matrix([[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError, match="non-negative"):
        check_shuffle_matrix([[1, -1], [0, 1]])
    with pytest.raises(ValueError, match="integers"):
        check_shuffle_matrix([[1.5, 0], [0, 1]])
    with pytest.raises(ValueError, match="2 dimension"):
        check_shuffle_matrix([1, 2])
    with pytest.raises(ValueError, match="rectangular|integers"):
        check_shuffle_matrix([[1, 2], [3]])
    with pytest.raises(ValueError, match="at least 1 worker"):
        check_shuffle_matrix(np.zeros((0, 0), dtype=int))
    with pytest.raises(ValueError, match="'S'"):
        leftover_matrix([["a", "b"], ["c", "d"]])
    # Never a wrong answer from a sum past int64 (it was -2 for this matrix's uncoded load): the
    # total is checked exactly, and 2**53 points is the most any load or bound is exact for.
    with pytest.raises(ValueError, match=r"'S' must count at most 2\*\*53 .* not 18446744073709551614"):
        check_shuffle_matrix([[0, 2**63 - 1], [2**63 - 1, 0]])
    with pytest.raises(ValueError, match="'S' must count at most"):
        check_shuffle_matrix([[0, 2**52 + 1], [2**52, 0]])
    assert int(check_shuffle_matrix([[0, 2**52], [2**52, 0]]).sum()) == 2**53  # the largest allowed
    with pytest.raises(ValueError, match="'S' must hold integers below 2\\*\\*63"):
        check_shuffle_matrix(np.array([[0, 2**63], [1, 0]], dtype=np.uint64))  # would wrap to < 0
    with pytest.raises(ValueError, match="'S' must hold integers of at most 64 bits"):
        check_shuffle_matrix([[0, 2**70], [1, 0]])


def test_rates_exact_at_the_largest_size():
    # Loads of a 2-worker swap of 2**52 points each way, by hand: every point moves (uncoded
    # 2**53), each pair is one XOR (paired = coded = 2**52), and the bound is 2**52 too.
    from coded_shuffle import lower_bound, rates

    r = rates([[0, 2**52], [2**52, 0]])
    assert (r.uncoded, r.paired, r.coded) == (2**53, 2**52, 2**52)
    assert lower_bound([[0, 2**52], [2**52, 0]]).value == 2**52


def test_shuffle_matrix_exceptions():
    a = placement_from_owner([0, 1], 2)
    with pytest.raises(TypeError, match="'placement_t'"):
        shuffle_matrix([0, 1], a)
    with pytest.raises(ValueError, match="'placement_t1'"):
        shuffle_matrix(a, placement_from_owner([0, 1, 1], 2))


def test_feistel_shuffle_matrix_progress():
    from coded_shuffle.matrix import feistel_shuffle_matrix

    walked = []
    S = feistel_shuffle_matrix(1000, 3, 5, seed=1, epoch=2, chunk=300, progress=walked.append)
    assert walked == [300, 600, 900, 1000]
    assert S.tolist() == feistel_shuffle_matrix(1000, 3, 5, seed=1, epoch=2).tolist()
