"""The coded storage planner beyond 64 workers: holder sets of several 64-bit words.

The plans on words are checked against the plans of one word on the same placement written in two
words (the same transmissions), against a brute force on Python sets (the demand's groups and the
group symbols' load) and by the decoding checks (``verify_storage_plan``, and GF(2) ranks with
``galois`` on small cases).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import (
    PiecePlacement,
    demand_counts,
    demand_lower_bound,
    piece_demand,
    piece_placement,
    plan_storage,
    update_storage,
    verify_storage_plan,
)
from tests.oracles import gf2_decodable
from tests.storage.test_placement_wide import brute_placement


def two_words(pp):
    """The same placement with every holder set written as two words (the second one empty)."""
    H = np.asarray(pp.holders, dtype=np.uint64)
    wide = np.zeros((*H.shape[:2], 2), dtype=np.uint64)
    wide[..., 0] = H
    wide.flags.writeable = False
    return PiecePlacement(placement=pp.placement, M=pp.M, holders=wide)


@pytest.mark.parametrize(
    ("K", "M", "P", "N"),
    [(4, 2, None, 12), (5, 3, None, 10), (6, 2, 2, 24), (7, 3, 1, 28), (64, 2, None, 64), (64, 3, 1, 320)],
)
def test_plans_on_two_words_are_those_of_one(K, M, P, N):
    a, b = (epoch_placement(N, K, seed=K, epoch=e) for e in (0, 1))
    one = piece_placement(a, M=M, pieces=P)
    for strategy in ("best",) if K == 64 else ("groups", "best") if P is None else ("groups", "batches"):
        x, y = plan_storage(one, b, strategy=strategy), plan_storage(two_words(one), b, strategy=strategy)
        assert x.chosen == y.chosen and x.rates.coded_symbols == y.rates.coded_symbols
        assert np.array_equal(x.offsets, y.offsets) and np.array_equal(x.terms, y.terms)
        assert x.lower_bound().pieces == y.lower_bound().pieces
        if K < 64:
            verify_storage_plan(y)
            assert gf2_decodable(y)


def brute_groups(owner, new, K, t, P):
    """``{G: {i: c_i(G)}}`` and the group symbols' load, on Python sets: every piece the new owner
    misses counts in the cell (its holders and it, it)."""
    H = brute_placement(owner, K, t, P)
    cells: dict[frozenset, Counter] = defaultdict(Counter)
    for r, j in enumerate(new):
        for h in H[r]:
            if j not in h:
                cells[frozenset(h | {j})][j] += 1
    counts = {sum(1 << w for w in G): dict(c) for G, c in cells.items()}
    return counts, sum(max(c.values()) for c in counts.values()), H


@pytest.mark.parametrize(("K", "M", "P", "N"), [(65, 2, None, 65), (70, 3, 2, 140), (128, 2, 1, 256)])
def test_wide_plans_decode_and_count_as_the_brute_force(K, M, P, N):
    a, b = (epoch_placement(N, K, seed=K, epoch=e) for e in (0, 1))
    pp = piece_placement(a, M=M, pieces=P)
    assert pp.holders.ndim == 3
    owner, new = np.asarray(a.owner).tolist(), np.asarray(b.owner).tolist()
    counts, grouped, H = brute_groups(owner, new, K, M - 1, pp.pieces)
    d = piece_demand(pp, b)
    assert demand_counts(d) == counts
    plan = plan_storage(pp, b, strategy="groups" if P is None else "best")  # small systems to check
    assert plan.rates.grouped * pp.pieces == grouped  # the group symbols alone, every group its busiest
    assert plan.n_symbols <= grouped
    verify_storage_plan(plan)
    if P is not None:  # the demand's bound: its value is that of its ordering, counted on the sets
        value, order, exact = demand_lower_bound(d, K)
        place = {w: n for n, w in enumerate(order)}
        brute = sum(
            1 for r, j in enumerate(new) for h in H[r] if j not in h and min(place[w] for w in h) > place[j]
        )
        assert value == brute and not exact and value <= plan.n_symbols
        nxt = update_storage(pp, b)  # and the next transition plans from the updated placement
        verify_storage_plan(plan_storage(nxt, epoch_placement(N, K, seed=K, epoch=2)))


def test_labels_beyond_the_table_are_unranked_as_the_table_lists_them(monkeypatch):
    from itertools import combinations

    from coded_shuffle.storage import placement

    for K, t in [(5, 2), (7, 3), (9, 1)]:  # every label against itertools' lexicographic order
        for o in range(K):
            others = [w for w in range(K) if w != o]
            got = [placement._unrank(c, o, K, t) for c in range(math.comb(K - 1, t))]
            assert got == [sum(1 << w for w in (o, *T)) for T in combinations(others, t)]
    for K, M, P in [(16, 4, 3), (70, 3, 2)]:  # the placement made both ways
        a = epoch_placement(20 * K, K, seed=K, epoch=0)
        listed = piece_placement(a, M=M, pieces=P)
        monkeypatch.setattr(placement, "LABEL_TABLE_MAX", 0)
        unranked = piece_placement(a, M=M, pieces=P)
        monkeypatch.undo()
        assert listed.holders.shape == unranked.holders.shape
        assert np.array_equal(listed.holders, unranked.holders)


def test_a_storage_too_large_to_list_is_refused_naming_M():
    from coded_shuffle.storage import storage_rates

    a, b = (epoch_placement(400, 40, seed=0, epoch=e) for e in (0, 1))
    pp = piece_placement(a, M=20, pieces=2)  # C(39, 19) = 68923264410 labels: those used, unranked
    assert pp.pieces == 2 and verify_storage_plan(plan_storage(pp, b)) is None
    with pytest.raises(ValueError, match=r"Argument 'M' \(storage\) = 20 cuts each .* would take 200.6 TB"):
        piece_placement(a, M=20)
    S = np.asarray(plan_storage(pp, b).S)
    with pytest.raises(ValueError, match=r"'M' \(storage\) = 20 with K = 40 workers needs .* groups"):
        storage_rates(S, M=20)
