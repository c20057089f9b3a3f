"""The piece placement beyond 64 workers (coded_shuffle.storage.placement with holder sets of
several 64-bit words), against a brute force over Python sets of the rules in its docstrings."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from coded_shuffle.engine.holding import PieceStorage
from coded_shuffle.orders import placement_from_owner
from coded_shuffle.plan import assign_senders, holder_set
from coded_shuffle.storage import (
    check_piece_placement,
    piece_demand,
    piece_placement,
    update_storage,
)


def brute_placement(owner, K, t, P):
    """Holder sets a piece (Python sets): the i-th record of owner o's batch (id order) has the
    labels (i P + p) mod C(K - 1, t) among the t-subsets of the others in lexicographic order."""
    rank = {}
    seen = [0] * K
    for r, o in enumerate(owner):
        rank[r] = seen[o]
        seen[o] += 1
    out = []
    for r, o in enumerate(owner):
        labels = list(combinations([w for w in range(K) if w != o], t))
        C = len(labels)
        cols = range(C) if P == C else [(rank[r] * P + p) % C for p in range(P)]
        out.append([{o, *labels[c]} for c in cols])
    return out


def brute_update(H, old, new, K, t, every_label):
    """The update of ``update_storage``'s docstring on Python sets, the drops rebalanced by its rule."""
    N, P = len(H), len(H[0])
    out = [[(h - {old[r]}) | {new[r]} if new[r] not in h else set(h) for h in H[r]] for r in range(N)]
    if every_label or t == 0:
        return out
    held = [sum(k in h for row in out for h in row) for k in range(K)]
    sizes = [list(new).count(k) for k in range(K)]
    excess = [held[k] * (K - 1) - P * (sizes[k] * (K - 1) + (N - sizes[k]) * t) for k in range(K)]
    step = K - 1
    for r in range(N):
        o, j = old[r], new[r]
        for p in range(P):
            h = H[r][p]
            if j in h:
                continue
            others = [d for d in sorted(h) if d != o]
            if not others:
                continue
            best = max(others, key=lambda d: (excess[d], -d))  # the largest, the first of equals
            if excess[best] <= excess[o] + step:
                continue
            cand = (h - {best}) | {j}
            if any(q != p and out[r][q] - {j} == cand - {j} for q in range(P)):
                continue
            out[r][p] = cand
            excess[best] -= step
            excess[o] += step
    return out


def sets_of(pp):
    return [[set(_members(holder_set(pp.holders[r], p))) for p in range(pp.pieces)] for r in range(pp.N)]


def _members(m):
    return [k for k in range(m.bit_length()) if m >> k & 1]


@pytest.mark.parametrize(("K", "M", "P"), [(65, 2, None), (70, 2, 1), (128, 2, 3), (66, 3, 2)])
def test_wide_placement_demand_and_update_against_brute_force(K, M, P, rng):
    t = M - 1
    N = 2 * K
    owner = rng.integers(0, K, N).tolist()
    pp = piece_placement(placement_from_owner(owner, K), M=M, pieces=P)
    P = pp.pieces
    assert pp.holders.shape == (N, P, 2) and not pp.holders.flags.writeable
    H = sets_of(pp)
    assert H == brute_placement(owner, K, t, P)
    check_piece_placement(pp)
    for k in (0, 63, 64, K - 1):
        want = [r * P + p for r in range(N) for p in range(P) if k in H[r][p]]
        assert pp.held_by(k).tolist() == want
    new = rng.integers(0, K, N).tolist()
    nxt = placement_from_owner(new, K)
    d = piece_demand(pp, nxt)
    rows = [(r * P + p, new[r], H[r][p]) for r in range(N) for p in range(P) if new[r] not in H[r][p]]
    assert d.shape == (len(rows), 4)
    assert [(int(a), int(b)) for a, b in d[:, :2]] == [(a, b) for a, b, _ in rows]
    words = np.ascontiguousarray(d[:, 2:]).view(np.uint64)
    assert [set(_members(holder_set(words, i))) for i in range(len(rows))] == [h for _, _, h in rows]
    after = update_storage(pp, nxt)
    assert sets_of(after) == brute_update(H, owner, new, K, t, pp.every_label)
    check_piece_placement(after)
    units, wanter, holders = PieceStorage(K=K, M=M).demand(pp, after)  # the engine's demand
    a = assign_senders(wanter, holders, K=K)
    assert all(int(s) in H[u // P][u % P] for u, s in zip(units.tolist(), a.sender.tolist(), strict=True))


def test_storage_takes_any_K():
    from coded_shuffle.storage import check_storage

    assert check_storage(2, 65) == 1 and check_storage(3, 1024) == 2
    with pytest.raises(ValueError, match="at most K = 65 batches"):
        check_storage(66, 65)
