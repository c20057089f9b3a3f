"""The exchange's senders on racks (coded_shuffle.plan.assign_senders_racks): the least busiest
link of the hierarchy, checked against a brute force over every choice of senders, and the cross-rack
units it saves against the rack-blind assignment on a storage of two batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import assign_senders, assign_senders_racks, rack_link_loads
from coded_shuffle.storage import piece_demand, piece_placement


def _busiest(want, sender, rack, up, ru, rd):
    """The busiest link's time, the loads counted here unit by unit."""
    K, R = len(rack), max(rack) + 1
    ups, rups, rdowns, cross = [0] * K, [0] * R, [0] * R, 0
    for j, s in zip(want, sender, strict=True):
        ups[s] += 1
        if rack[s] != rack[j]:
            rups[rack[s]] += 1
            rdowns[rack[j]] += 1
            cross += 1
    return max(max(u / up for u in ups), max(v / ru for v in rups), max(v / rd for v in rdowns)), cross


def _brute(want, holders, rack, up, ru, rd):
    """The least busiest time over every choice of senders, and the fewest cross-rack units at it."""
    choices = [[w for w in range(len(rack)) if (h >> w) & 1] for h in holders]
    return min(_busiest(want, s, rack, up, ru, rd) for s in itertools.product(*choices))


@pytest.mark.parametrize("K", [3, 4, 5])
def test_the_busiest_link_is_the_least_over_every_choice(K):
    rng = np.random.default_rng(40 + K)
    for _ in range(12):
        n = int(rng.integers(1, 8))
        want = rng.integers(0, K, n).tolist()
        holders = []
        for j in want:
            others = [w for w in range(K) if w != j]
            picked = rng.choice(others, size=int(rng.integers(1, min(3, len(others)) + 1)), replace=False)
            holders.append(int(sum(1 << int(w) for w in picked)))
        rack = sorted(rng.integers(0, 2, K).tolist())
        rack = [r - rack[0] for r in rack]  # racks 0 (and 1)
        up, ru, rd = (float(rng.choice([1, 2, 4])) for _ in range(3))
        a = assign_senders_racks(want, holders, K=K, rack=rack, up=up, rack_up=ru, rack_down=rd)
        assert all((h >> int(s)) & 1 for h, s in zip(holders, a.sender, strict=True))
        got = _busiest(want, a.sender.tolist(), rack, up, ru, rd)
        best = _brute(want, holders, rack, up, ru, rd)
        assert got[0] == pytest.approx(best[0], rel=1e-12) and got[1] == best[1]
        assert a.upload_bound == assign_senders(want, holders, K=K).upload_bound
        loads = rack_link_loads(want, a.sender, rack=rack)
        assert loads["cross"] == got[1] and loads["uploads"].tolist() == a.uploads.tolist()


def test_on_two_racks_it_keeps_pieces_in_the_rack():
    """Two racks of 4, a storage of 2 batches, 4:1 rack uplinks: the rack-aware choice sends at most
    0.6x the rack-blind one's units between racks, and its busiest link is faster."""
    K, rack = 8, [0, 0, 0, 0, 1, 1, 1, 1]
    p0, p1 = (epoch_placement(800, K, seed=3, epoch=e) for e in (0, 1))
    d = piece_demand(piece_placement(p0, M=2), p1)
    want, holders = d[:, 1], d[:, 2]
    rates = {"up": 1.0, "rack_up": 1.0, "rack_down": 1.0}  # 4 hosts at 1 under a rack link of 1: 4:1
    aware = assign_senders_racks(want, holders, K=K, rack=rack, **rates)
    blind = assign_senders(want, holders, K=K)
    a, b = (_busiest(want.tolist(), x.sender.tolist(), rack, 1.0, 1.0, 1.0) for x in (aware, blind))
    assert a[1] <= 0.6 * b[1] and a[0] < b[0]
    again = assign_senders_racks(want, holders, K=K, rack=rack, **rates)
    assert again.sender.tolist() == aware.sender.tolist()  # the same on every worker


def test_one_holder_a_unit_is_forced():
    a = assign_senders_racks([1, 0], [0b100, 0b100], K=3, rack=[0, 0, 1], up=1, rack_up=1, rack_down=1)
    assert a.sender.tolist() == [2, 2]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rack": [0, 0]}, ValueError, r"Argument 'rack' must give each of the K = 3 workers a rack"),
        ({"rack": [0, -1, 0]}, ValueError, r"Argument 'rack' must give each"),
        ({"rack": [0.0, 0.0, 1.0]}, ValueError, r"Argument 'rack' must give each"),
        ({"up": 0}, ValueError, r"Argument 'up' must be a positive finite number, not 0\."),
        ({"rack_up": float("inf")}, ValueError, r"Argument 'rack_up' must be a positive finite number"),
        ({"rack_down": "1"}, ValueError, r"Argument 'rack_down' must be a positive finite number"),
        ({"K": 0}, ValueError, r"Argument 'K' must be at least 1"),
        ({"wanter": [3, 0]}, ValueError, r"Argument 'wanter' must hold workers 0 to 2"),
        ({"holders": [0b010, 0b100]}, ValueError, r"Argument 'holders' must not hold a unit's wanter"),
    ],
)
def test_assign_senders_racks_exceptions(kwargs, error, match):
    args = {"wanter": [1, 0], "holders": [0b101, 0b110], "K": 3, "rack": [0, 0, 1], "up": 1.0,
            "rack_up": 1.0, "rack_down": 1.0, **kwargs}  # fmt: skip
    with pytest.raises(error, match=match):
        assign_senders_racks(args.pop("wanter"), args.pop("holders"), **args)
