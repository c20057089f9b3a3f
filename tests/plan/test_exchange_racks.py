"""The exchange's senders on racks (coded_shuffle.plan.assign_senders_racks): the least busiest
link of the hierarchy, in units and in bytes (units of many sizes), checked against a brute force
over every choice of senders, and the cross-rack units it saves against the rack-blind assignment
on a storage of two batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import assign_senders, assign_senders_racks, rack_link_loads
from coded_shuffle.storage import piece_demand, piece_placement


def _busiest(want, sender, rack, up, ru, rd, sizes=None):
    """The busiest link's time, the loads counted here unit by unit (in bytes with ``sizes``)."""
    K, R = len(rack), max(rack) + 1
    ups, rups, rdowns, cross = [0] * K, [0] * R, [0] * R, 0
    for i, (j, s) in enumerate(zip(want, sender, strict=True)):
        b = 1 if sizes is None else sizes[i]
        ups[s] += b
        if rack[s] != rack[j]:
            rups[rack[s]] += b
            rdowns[rack[j]] += b
            cross += b
    return max(max(u / up for u in ups), max(v / ru for v in rups), max(v / rd for v in rdowns)), cross


def _brute(want, holders, rack, up, ru, rd, sizes=None):
    """The least busiest time over every choice of senders, and the fewest cross-rack units (bytes) at it."""
    choices = [[w for w in range(len(rack)) if (h >> w) & 1] for h in holders]
    return min(_busiest(want, s, rack, up, ru, rd, sizes) for s in itertools.product(*choices))


def _case(rng, K):
    """A tiny exchange: wanters, holder sets of 1 to 3 other workers, racks 0 (and 1), rates."""
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
    return want, holders, rack, up, ru, rd


def _slack(want, holders, rack, up, ru, rd, sizes):
    """The most a link's time may exceed the optimum by (the docstring's bound): on each link, the
    largest unit of every (group of several sizes, holder) whose units it may carry, over its rate;
    groups (holder set, wanter's rack) and links worked out here."""
    groups = {}
    for j, h, b in zip(want, holders, sizes, strict=True):
        groups.setdefault((h, rack[j]), []).append(b)
    link = {}
    for (h, q), bs in groups.items():
        if min(bs) == max(bs):
            continue
        for w in (w for w in range(len(rack)) if (h >> w) & 1):
            names = [("up", w)] + ([("rack_up", rack[w]), ("rack_down", q)] if rack[w] != q else [])
            for name in names:
                link[name] = link.get(name, 0) + max(bs)
    rate = {"up": up, "rack_up": ru, "rack_down": rd}
    return max((v / rate[name] for (name, _), v in link.items()), default=0.0)


@pytest.mark.parametrize("K", [3, 4, 5])
def test_the_busiest_link_is_the_least_over_every_choice(K):
    rng = np.random.default_rng(40 + K)
    for _ in range(12):
        want, holders, rack, up, ru, rd = _case(rng, K)
        a = assign_senders_racks(want, holders, K=K, rack=rack, up=up, rack_up=ru, rack_down=rd)
        assert all((h >> int(s)) & 1 for h, s in zip(holders, a.sender, strict=True))
        got = _busiest(want, a.sender.tolist(), rack, up, ru, rd)
        best = _brute(want, holders, rack, up, ru, rd)
        assert got[0] == pytest.approx(best[0], rel=1e-12) and got[1] == best[1]
        assert a.upload_bound == assign_senders(want, holders, K=K).upload_bound
        loads = rack_link_loads(want, a.sender, rack=rack)
        assert loads["cross"] == got[1] and loads["uploads"].tolist() == a.uploads.tolist()


@pytest.mark.parametrize("K", [3, 4, 5])
def test_in_bytes_the_busiest_link_is_the_least_where_each_group_has_one_size(K):
    """Units of one size a group (holder set, wanter's rack), sizes differing between groups: the
    least busiest link in bytes over every choice, and the fewest bytes between racks at it."""
    rng = np.random.default_rng(70 + K)
    for _ in range(12):
        want, holders, rack, up, ru, rd = _case(rng, K)
        size_of: dict = {}  # a size a group
        pairs = zip(want, holders, strict=True)
        sizes = [size_of.setdefault((h, rack[j]), int(rng.integers(1, 1000))) for j, h in pairs]
        a = assign_senders_racks(want, holders, K=K, rack=rack, up=up, rack_up=ru, rack_down=rd, sizes=sizes)
        got = _busiest(want, a.sender.tolist(), rack, up, ru, rd, sizes)
        best = _brute(want, holders, rack, up, ru, rd, sizes)
        assert got[0] == pytest.approx(best[0], rel=1e-12) and got[1] == best[1]


@pytest.mark.parametrize("K", [3, 4, 5])
def test_in_bytes_the_busiest_link_is_within_its_bound_of_the_least(K):
    """Units of any sizes: the busiest link in bytes at most the least over every choice plus the
    docstring's bound (a largest unit a group of several sizes and holder on a link), its uploads,
    downloads and rack loads the bytes counted here, its upload bound the rack-blind one's."""
    rng = np.random.default_rng(90 + K)
    for _ in range(12):
        want, holders, rack, up, ru, rd = _case(rng, K)
        sizes = rng.integers(1, 1000, len(want)).tolist()
        a = assign_senders_racks(want, holders, K=K, rack=rack, up=up, rack_up=ru, rack_down=rd, sizes=sizes)
        assert all((h >> int(s)) & 1 for h, s in zip(holders, a.sender, strict=True))
        got = _busiest(want, a.sender.tolist(), rack, up, ru, rd, sizes)
        best = _brute(want, holders, rack, up, ru, rd, sizes)
        assert best[0] <= got[0] <= best[0] * (1 + 1e-6) + _slack(want, holders, rack, up, ru, rd, sizes)
        loads = rack_link_loads(want, a.sender, rack=rack, sizes=sizes)
        assert loads["cross_bytes"] == got[1] and loads["uploads_bytes"].tolist() == a.uploads.tolist()
        received = [sum(b for j, b in zip(want, sizes, strict=True) if j == w) for w in range(K)]
        assert a.downloads.tolist() == received
        assert a.upload_bound == assign_senders(want, holders, K=K, sizes=sizes).upload_bound
        assert loads["cross"] == sum(rack[s] != rack[j] for j, s in zip(want, a.sender.tolist(), strict=True))


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
    b = assign_senders_racks([1, 0], [0b100, 0b100], K=3, rack=[0, 0, 1], up=1, rack_up=1, rack_down=1,
                             sizes=[5, 7])  # fmt: skip
    assert b.sender.tolist() == [2, 2] and b.uploads.tolist() == [0, 0, 12]
    assert b.downloads.tolist() == [7, 5, 0]


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
        ({"sizes": [1]}, ValueError, r"Argument 'sizes' must give the non-negative bytes of each of the 2"),
        ({"sizes": [1, -1]}, ValueError, r"Argument 'sizes' must give the non-negative bytes"),
    ],
)
def test_assign_senders_racks_exceptions(kwargs, error, match):
    args = {"wanter": [1, 0], "holders": [0b101, 0b110], "K": 3, "rack": [0, 0, 1], "up": 1.0,
            "rack_up": 1.0, "rack_down": 1.0, **kwargs}  # fmt: skip
    with pytest.raises(error, match=match):
        assign_senders_racks(args.pop("wanter"), args.pop("holders"), **args)


def test_units_of_one_size_are_the_units_choice_in_bytes():
    """All units of one size: the choice in units (checked by brute force above), every load times it."""
    K, rack = 8, [0, 0, 0, 0, 1, 1, 1, 1]
    p0, p1 = (epoch_placement(400, K, seed=5, epoch=e) for e in (0, 1))
    d = piece_demand(piece_placement(p0, M=2), p1)
    want, holders = d[:, 1], d[:, 2]
    units = assign_senders_racks(want, holders, K=K, rack=rack, up=1.0, rack_up=1.0, rack_down=1.0)
    sized = assign_senders_racks(want, holders, K=K, rack=rack, up=1.0, rack_up=1.0, rack_down=1.0,
                                 sizes=[300] * len(want))  # fmt: skip
    assert sized.sender.tolist() == units.sender.tolist()
    assert sized.uploads.tolist() == (300 * units.uploads).tolist()
    assert sized.upload_bound == 300 * units.upload_bound
