"""The piece placement across racks (coded_shuffle.storage.piece_placement with ``racks``) and its
update (``update_storage``): the windows of labels against their definition enumerated, the
compiled drops against a plain loop of the rule they state, and the engine's exchange placing on
the racks of its network."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.storage import (
    check_piece_placement,
    piece_demand,
    piece_placement,
    storage_excess,
    update_storage,
)
from coded_shuffle.storage.placement import RACK_SLACK, rack_labels


def _bits(x: int) -> list[int]:
    return [k for k in range(x.bit_length()) if x >> k & 1]


@pytest.mark.parametrize(("R", "s", "t"), [(2, 4, 1), (2, 3, 2), (3, 2, 1), (3, 2, 2), (4, 2, 3), (2, 2, 2)])
def test_rack_labels_are_balanced_windows_across_racks(R, s, t):
    n = (R - 1) * s
    table = rack_labels((s,) * R, t=t, pieces=1 if t == n else min(2, n))
    assert table is not None and table.shape == (R, n)
    for a in range(R):
        labels = [int(x) for x in table[a]]
        count = np.zeros(R * s, dtype=int)
        for x in labels:
            members = _bits(x)
            assert len(members) == t and all(m // s != a for m in members)  # outside the owner's rack
            assert len({m // s for m in members}) == min(t, R - 1)  # as many racks as a label can span
            count[members] += 1
        outside = [k for k in range(R * s) if k // s != a]
        assert count[outside].tolist() == [t] * n and count.sum() == t * n  # each worker in t windows
        if t < n:  # consecutive windows are distinct labels
            assert all(labels[c] != labels[(c + 1) % n] for c in range(n))


def test_rack_labels_where_racks_cannot_spread():
    assert rack_labels((3, 2), t=1, pieces=1) is None  # racks of several sizes
    assert rack_labels((4,), t=1, pieces=1) is None  # one rack
    assert rack_labels((2, 2), t=1, pieces=3) is None  # 3 pieces, 2 windows outside a rack
    assert rack_labels((2, 2), t=2, pieces=2) is None  # one window of 2 outside a rack: one label


@pytest.mark.parametrize(
    ("K", "racks", "M", "P"),
    [(8, (4, 4), 2, 1), (8, (4, 4), 2, 2), (9, (3, 3, 3), 3, 4), (6, (2, 2, 2), 2, 1), (8, (2,) * 4, 3, 3)],
)
def test_placement_on_racks_is_a_placement_of_m_batches(K, racks, M, P):
    p0 = epoch_placement(K * 30, K, seed=1, epoch=0)
    pp = piece_placement(p0, M=M, pieces=P, racks=racks)
    check_piece_placement(pp)
    assert pp.racks == racks
    rack = np.repeat(np.arange(len(racks)), racks)
    owner = np.asarray(p0.owner)
    for r in range(p0.N):  # every other holder outside the owner's rack
        for h in pp.holders[r].tolist():
            assert all(rack[m] != rack[owner[r]] for m in _bits(h) if m != owner[r])
    # M batches a worker up to the turns' rounding: a window used once more than another by an
    # owner puts at most t pieces more on a worker, from each of the K - s owners outside its rack
    t, q = M - 1, int(p0.sizes().max())
    assert storage_excess(pp) <= t * (K - racks[0]) / (P * M * q)


def test_every_label_is_fixed_by_the_scheme():
    p0 = placement_from_owner([0, 1, 2, 3, 0, 1, 2, 3], 4)
    pp = piece_placement(p0, M=2, racks=(2, 2))
    assert pp.racks is None and pp.holders.tolist() == piece_placement(p0, M=2).holders.tolist()


def test_whole_records_on_two_racks_always_have_a_holder_in_the_wanters_rack():
    # M = 2 on two racks: a record's two holders sit in both racks, so every new owner's rack holds it
    p0, p1 = (epoch_placement(400, 8, seed=2, epoch=e) for e in (0, 1))
    rack = np.repeat([0, 1], 4)
    d = piece_demand(piece_placement(p0, M=2, pieces=1, racks=(4, 4)), p1)
    assert d.shape[0] > 0
    assert all(rack[w] in {rack[m] for m in _bits(int(h))} for w, h in zip(d[:, 1], d[:, 2], strict=True))
    blind = piece_demand(piece_placement(p0, M=2, pieces=1), p1)
    assert not all(
        rack[w] in {rack[m] for m in _bits(int(h))} for w, h in zip(blind[:, 1], blind[:, 2], strict=True)
    )


def _drops_by_rule(pp, nxt):
    """update_storage on racks by the rule its kernel states, written as a plain loop."""
    K, P, t, N = pp.K, pp.pieces, pp.t, pp.N
    rack = np.repeat(np.arange(len(pp.racks)), pp.racks)
    old, new = np.asarray(pp.placement.owner), np.asarray(nxt.owner)
    H = [[int(h) for h in row] for row in pp.holders.tolist()]
    out = [[(h & ~(1 << o)) | (1 << j) if not h >> j & 1 else h for h in row]
           for row, o, j in zip(H, old.tolist(), new.tolist(), strict=True)]  # fmt: skip
    held = np.array([sum(h >> k & 1 for row in out for h in row) for k in range(K)])
    sizes = np.asarray(nxt.sizes())
    excess = held * (K - 1) - P * (sizes * (K - 1) + (N - sizes) * t)
    step, slack = K - 1, RACK_SLACK * (K - 1)
    for r in range(N):
        o, j = int(old[r]), int(new[r])
        for p in range(P):
            h = H[r][p]
            if h >> j & 1:
                continue
            near = [m for m in _bits(h) if rack[m] == rack[j]]
            d = max(near, key=lambda m: (excess[m], -m)) if near else None
            if d is not None and d != o and excess[o] > excess[d] + slack:
                d = None
            if d is None:
                others = [m for m in _bits(h) if m != o]
                d = max(others, key=lambda m: (excess[m], -m)) if others else None
                if d is None or excess[d] <= excess[o] + step:
                    continue
            if d == o:
                continue
            cand = (h & ~(1 << d)) | (1 << j)
            if any((cand & ~(1 << j)) == (out[r][q] & ~(1 << j)) for q in range(P) if q != p):
                continue
            out[r][p] = cand
            excess[d] -= step
            excess[o] += step
    return out


@pytest.mark.parametrize(
    ("K", "racks", "M", "P", "N"),
    [(6, (3, 3), 2, 1, 60), (6, (3, 3), 2, 2, 30), (8, (2, 2, 2, 2), 3, 2, 40), (9, (3, 3, 3), 2, 3, 90)],
)
def test_update_on_racks_follows_its_rule(K, racks, M, P, N):
    rng = np.random.default_rng(K * 10 + P)
    pp = piece_placement(placement_from_owner(rng.integers(0, K, N), K), M=M, pieces=P, racks=racks)
    for _ in range(4):
        nxt = placement_from_owner(rng.integers(0, K, N), K)
        want = _drops_by_rule(pp, nxt)
        pp = update_storage(pp, nxt)
        assert pp.holders.tolist() == want and pp.racks == racks
        check_piece_placement(pp)


def test_update_on_racks_keeps_records_across_racks_and_storage_even():
    K, racks = 8, (4, 4)
    rack = np.repeat([0, 1], 4)
    pp = piece_placement(epoch_placement(4000, K, seed=0, epoch=0), M=2, pieces=1, racks=racks)
    blind = piece_placement(epoch_placement(4000, K, seed=0, epoch=0), M=2, pieces=1)
    for e in range(1, 5):
        p = epoch_placement(4000, K, seed=0, epoch=e)
        pp, blind = update_storage(pp, p), update_storage(blind, p)
    spans = [len({rack[m] for m in _bits(int(h))}) for h in pp.holders[:, 0].tolist()]
    blind_spans = [len({rack[m] for m in _bits(int(h))}) for h in blind.holders[:, 0].tolist()]
    assert np.mean(np.array(spans) == 2) > 0.9 > 0.6 > np.mean(np.array(blind_spans) == 2)
    assert storage_excess(pp) < 0.02  # 20 records of the 1000 of M = 2 batches


def test_the_exchange_on_racks_places_across_them():
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import run, scheme_for
    from coded_shuffle.network import Network

    net = Network.parse("up=100,down=100,racks=2x4,rack-up=50")
    scheme = scheme_for("exchange", K=8, storage=2, record_bytes=1024, network=net)
    pp = scheme.holding.start(epoch_placement(80, 8, seed=0, epoch=0))
    assert scheme.holding.racks == (4, 4) and pp.racks == (4, 4)
    assert scheme_for("exchange", K=8, storage=2, record_bytes=1024).holding.racks is None
    assert scheme_for("coded", K=8, storage=2, record_bytes=1024, network=net).holding.racks is None
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (80, 1024), dtype=np.uint8))
    assert run(ds, K=8, epochs=2, seed=1, storage=2, mode="exchange", network=net).verified


@pytest.mark.parametrize(
    ("racks", "error", "match"),
    [
        ((4, 3), ValueError, "'racks' must hold the K = 8 workers"),
        ((8, 0), ValueError, "each rack at least 1"),
        ("44", TypeError, "'racks' must be a sequence of ints"),
        ((4.0, 4), TypeError, "'racks'"),
    ],
)  # fmt: skip
def test_piece_placement_racks_exceptions(racks, error, match):
    with pytest.raises(error, match=match):
        piece_placement(placement_from_owner(list(range(8)), 8), M=2, pieces=1, racks=racks)
