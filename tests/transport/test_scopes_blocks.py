"""The scoped multicast groups beyond 64 workers: a group per pair of blocks of workers
(coded_shuffle.transport._scopes), checked by brute force against the rule of its docstring."""

from __future__ import annotations

from itertools import combinations_with_replacement

import numpy as np
import pytest

from coded_shuffle.codec import EVERY_WORKER
from coded_shuffle.transport._scopes import (
    _group_index,
    _group_members,
    _worker_groups,
    scope_block,
    scope_downlinks,
    scope_groups,
)


@pytest.mark.parametrize(("K", "b"), [(65, 2), (100, 2), (129, 3), (200, 4)])
def test_block_groups_reach_every_reader_and_are_joined_by_their_members(K, b, rng):
    assert scope_block(K) == b
    B = -(-K // b)
    members = _group_members(K)
    blocks = [list(range(A * b, min(K, A * b + b))) for A in range(B)]
    # the groups, by brute force: every worker, each pair of blocks (a block with itself too), each worker
    want = [list(range(K))]
    want += [blocks[A] + (blocks[C] if C != A else []) for A, C in combinations_with_replacement(range(B), 2)]
    want += [[k] for k in range(K)]
    assert members == want and len(scope_groups("239.1.0.0", K)) == len(want) <= 1 + 2080 + K
    for k in range(K):  # a worker joins exactly the groups it is a member of, at most 66
        assert sorted(_worker_groups(k, K)) == [g for g, m in enumerate(want) if k in m]
        assert len(_worker_groups(k, K)) == B + 2 <= 66
    for _ in range(300):  # readers in one or two blocks: their blocks' group, which holds them all
        n = int(rng.integers(1, 6))
        readers = sorted({int(x) for x in rng.integers(0, K, n)})
        mask = sum(1 << r for r in readers)
        g = _group_index(mask, K)
        assert set(readers) <= set(members[g])
        spread = {r // b for r in readers}
        if len(readers) == 1:
            assert members[g] == readers
        elif len(spread) <= 2:
            assert g != 0 and sorted(spread) == sorted({w // b for w in members[g]})
        else:
            assert g == 0
    assert _group_index(EVERY_WORKER, K) == 0


def test_the_downlinks_pay_about_a_block_for_the_pairs_symbols(rng):
    """Random pairs' symbols at K = 128 (blocks of 2) and 256 (blocks of 4): the master sends each
    once either way; a downlink carries b / 2 to b times the pairs' bytes it reads."""
    for K, b in ((128, 2), (256, 4)):
        pairs = [(i, j) for i in range(K) for j in range(i + 1, K)]
        keep = rng.choice(len(pairs), size=2000, replace=False)
        readers = [(1 << pairs[p][0]) | (1 << pairs[p][1]) for p in keep]
        d = scope_downlinks(readers, [1] * len(readers), K=K)
        assert d["pairs"] == d["read"]  # the pair groups carry just what each reads
        ratio = sum(d["scoped"]) / sum(d["read"])
        assert b / 2 <= ratio <= b  # 2b members for 2 readers, b for a pair inside one block
        assert sum(d["every"]) / sum(d["read"]) == K / 2
    small = scope_downlinks([0b0101, 0b0011, EVERY_WORKER], [10, 20, 5], K=4)
    assert small["scoped"] == small["pairs"] == [35, 25, 15, 5]
    with pytest.raises(ValueError, match="'readers' and 'nbytes' must have one entry a span"):
        scope_downlinks([1], [1, 2], K=4)


def test_scope_block_exceptions():
    with pytest.raises(ValueError, match="Argument 'K' must be at least 1"):
        scope_block(0)
    assert np.all([scope_block(K) == 1 for K in (1, 2, 63, 64)])
