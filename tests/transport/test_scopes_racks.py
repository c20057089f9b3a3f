"""The scoped groups' blocks on racks (coded_shuffle.transport._scopes.scope_blocks): checked by
brute force against the rule of the module docstring, and the rack downlinks they load against
the least any layout can (the racks of a span's readers)."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.transport._scopes import (
    PAIR_SCOPE_MAX_K,
    _group_index,
    _group_members,
    _worker_groups,
    scope_block,
    scope_blocks,
    scope_downlinks,
    scope_groups,
)
from coded_shuffle.transport.multicast import MulticastSender


def _least_width(racks, b):
    """The least block width from ``b`` up that cuts every rack into at most 64 blocks, by trying each."""
    for w in range(b, max(racks) + 1):
        if sum((h + w - 1) // w for h in racks) <= PAIR_SCOPE_MAX_K:
            return w
    return max(racks)


@pytest.mark.parametrize(
    "racks", [(5,) * 16, (25,) * 8, (3,) * 42 + (2,), (7, 60, 13), (33, 33), (65, 65, 1)]
)
def test_blocks_lie_inside_the_racks(racks):
    K = sum(racks)
    blocks = scope_blocks(K, racks=racks)
    rack = np.repeat(np.arange(len(racks)), racks)
    B = max(blocks) + 1
    assert sorted(set(blocks)) == list(range(B)) and B <= PAIR_SCOPE_MAX_K
    assert list(blocks) == sorted(blocks)  # consecutive workers
    w = _least_width(racks, scope_block(K))
    for A in range(B):
        members = [k for k in range(K) if blocks[k] == A]
        assert len({int(rack[k]) for k in members}) == 1 and len(members) <= w
    for r, h in enumerate(racks):  # as few blocks a rack as the width allows, of sizes within one
        sizes = np.bincount([blocks[k] for k in range(K) if rack[k] == r])
        sizes = sizes[sizes > 0]
        assert sizes.size == -(-h // w) and sizes.max() - sizes.min() <= 1


def test_blocks_that_fit_the_racks_are_the_consecutive_ones():
    for K, racks in ((1024, (32,) * 32), (128, (32,) * 4), (96, (12,) * 8), (40, (7, 33))):
        assert scope_blocks(K, racks=racks) == scope_blocks(K)
    assert scope_blocks(80, racks=(5,) * 16) != scope_blocks(80)  # blocks of 2 astride racks of 5


@pytest.mark.parametrize("racks", [(5,) * 16, (25,) * 8, (7, 60, 13)])
def test_groups_on_racks_reach_their_readers_and_cross_only_their_racks(racks, rng):
    K = sum(racks)
    rack = np.repeat(np.arange(len(racks)), racks)
    members = _group_members(K, racks)
    assert len(members) == len(scope_groups("239.1.0.0", K, racks))
    for k in range(K):
        assert sorted(_worker_groups(k, K, racks)) == [g for g, m in enumerate(members) if k in m]
    readers, sizes = [], []
    for _ in range(400):
        n = int(rng.integers(1, 3))  # a point alone or a pair's symbol
        who = sorted({int(x) for x in rng.integers(0, K, n)})
        mask = sum(1 << k for k in who)
        g = _group_index(mask, K, racks)
        assert set(who) <= set(members[g]) and g != 0
        assert {int(rack[k]) for k in members[g]} == {
            int(rack[k]) for k in who
        }  # the least: its readers' racks
        readers.append(mask)
        sizes.append(int(rng.integers(1, 100)))
    d = scope_downlinks(readers, sizes, K=K, racks=racks)
    assert d["rack_scoped"] == d["rack_read"] == d["rack_pairs"]
    assert all(a >= b for a, b in zip(d["rack_consecutive"], d["rack_read"], strict=True))
    assert sum(d["rack_every"]) == len(racks) * sum(sizes)
    assert sum(d["scoped"]) == sum(sum(1 for _ in members[_group_index(m, K, racks)]) * n
                                   for m, n in zip(readers, sizes, strict=True))  # fmt: skip


def test_scope_downlinks_racks_straddled():
    # K = 80 in racks of 5: consecutive blocks of 2 straddle every other rack boundary
    racks = (5,) * 16
    pairs = [(1 << i) | (1 << (i + 1)) for i in range(79)]  # neighbours: inside a rack or across
    d = scope_downlinks(pairs, [1] * 79, K=80, racks=racks)
    assert d["rack_scoped"] == d["rack_read"] and sum(d["rack_consecutive"]) > sum(d["rack_read"])
    assert "consecutive" not in scope_downlinks(pairs, [1] * 79, K=80)


def test_the_sender_and_receivers_follow_the_racks():
    tx = MulticastSender("239.7.0.0", 5000, K=80, racks=[5] * 16)
    try:
        assert tx.racks == (5,) * 16 and len(tx._groups) == len(scope_groups("239.7.0.0", 80, (5,) * 16))
    finally:
        tx.close()


@pytest.mark.parametrize(
    ("racks", "error", "match"),
    [
        ((40, 39), ValueError, "'racks' must hold the K = 80 workers"),
        ("80", TypeError, "'racks' must be a sequence"),
    ],
)
def test_scope_racks_exceptions(racks, error, match):
    with pytest.raises(error, match=match):
        scope_blocks(80, racks=racks)
    with pytest.raises(error, match=match):
        scope_downlinks([3], [1], K=80, racks=racks)
