"""Claim 6: the piece placement of a storage of M = 1 + t batches survives every reshuffle, with no traffic.

Notation
--------
==============  ====================================================================
``K, N``        workers and records; ``t`` with ``0 <= t <= K - 1``, ``M = 1 + t``
``o(r)``        the worker whose batch holds record ``r`` now; ``j(r)`` next epoch
``[K]``         the workers; ``binom(X, t)`` the ``t``-subsets of a set ``X``
``H(r, p)``     holder set of piece ``p`` of record ``r``; its label ``H \\ {o(r)}``
(I)             for every record ``r``: ``o(r)`` is in every ``H(r, p)``, and the labels
                ``H(r, p) \\ {o(r)}`` are the ``C(K - 1, t)`` sets of ``binom([K] \\ {o(r)}, t)``,
                each once (docs/storage.md: ``r_T`` at ``{o} u T``)
update          ``r`` moves ``o -> j``: a piece with ``j`` in ``H`` keeps ``H``; one with
                ``j`` not in ``H`` is delivered to ``j`` and ``o`` drops it: ``H -> (H \\ {o}) u {j}``
==============  ====================================================================

Statement
---------
(a) If (I) holds for the owners ``o`` then after the update it holds for the owners ``j``; the
    only copies gained are the delivered ones (no traffic beyond the demand).

(b) Under (I) worker ``w`` with a batch of ``N_w`` records holds exactly
    ``N_w C(K-1, t) + (N - N_w) C(K-2, t-1)`` pieces, that is ``N_w + (N - N_w) t / (K - 1)``
    records: with equal batches, ``M`` batches. So every worker holds exactly its share in every
    epoch.

(c) At ``t = 0`` a record is one piece held by its owner only, the update moves it to ``j``: the
    placement of today's scheme (``M = 1``).

Proof
-----
(a) Fix ``r`` moving ``o -> j`` (``o = j`` changes nothing). A piece with label ``T`` (a ``t``-set
avoiding ``o``) gets the new label ``T' = H' \\ {j}``: if ``j`` is in ``T``, ``H' = H = {o} u T`` and
``T' = (T \\ {j}) u {o}``; otherwise ``H' = T u {j}`` and ``T' = T``. In both cases ``T'`` avoids
``j``, has ``t`` elements and ``j`` is in ``H'``. The map ``T -> T'`` is injective: from ``T'``,
``T = (T' \\ {o}) u {j}`` if ``o`` is in ``T'`` and ``T = T'`` otherwise (``o`` is in ``T'`` exactly when
``j`` was in ``T``). Both ``binom([K] \\ {o}, t)`` and ``binom([K] \\ {j}, t)`` have ``C(K - 1, t)``
elements, so it is a bijection: (I) holds for ``j``. A worker gains a copy only in the second
case, and only ``j``, of a piece it missed: the demand.

(b) Worker ``w`` holds piece ``p`` of ``r`` iff ``w = o(r)`` or ``w`` is in its label. For its own
``N_w`` records that is all ``C(K - 1, t)`` pieces; for another's, the labels containing ``w`` are
``{w} u U`` with ``U`` in ``binom([K] \\ {o, w}, t - 1)``: ``C(K - 2, t - 1)`` of them. Dividing by
``C(K - 1, t)``: ``C(K-2, t-1) / C(K-1, t) = t / (K - 1)``; with ``N_w = N / K`` the total is
``N/K + (N - N/K) t/(K-1) = (N/K)(1 + t)``.

(c) ``binom(X, 0)`` has the one empty set: one piece, ``H = {o}``, and ``j`` is not in it when ``r``
moves, so ``H' = {j}``.

Check
-----
Exhaustively for ``K = 3, 4`` and every ``t``: every pair of owner vectors of ``N = 2`` records
(and ``N = 3`` at ``K = 3``), the update of :func:`coded_shuffle.storage.update_storage` against
(I) rebuilt from the definition with ``itertools`` and the bijection ``T -> T'`` computed by hand;
ten random epochs of ``N = 40`` records for ``K = 5..8`` and every ``t``, with
:func:`coded_shuffle.storage.check_piece_placement` and the share formula of (b) counted from the
holder sets; (c) on random placements.
"""

from __future__ import annotations

import itertools
import math
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.storage import check_piece_placement, piece_demand, piece_placement, update_storage


def holder_sets(pp, r):
    return sorted(tuple(w for w in range(pp.K) if int(h) >> w & 1) for h in pp.holders[r])


def invariant(pp) -> bool:
    """(I), from the definition."""
    K, t = pp.K, pp.t
    for r, o in enumerate(pp.placement.owner.tolist()):
        want = sorted(
            tuple(sorted({o, *T})) for T in itertools.combinations([w for w in range(K) if w != o], t)
        )
        if holder_sets(pp, r) != want:
            return False
    return True


@pytest.mark.parametrize(("K", "N"), [(3, 2), (3, 3), (4, 2)])
def test_update_exhaustive(K, N):
    for t in range(K):
        for before in itertools.product(range(K), repeat=N):
            pp = piece_placement(placement_from_owner(list(before), K), M=t + 1)
            assert invariant(pp)
            for after in itertools.product(range(K), repeat=N):
                nxt = placement_from_owner(list(after), K)
                new = update_storage(pp, nxt)
                assert invariant(new)
                delivered = {(int(x), int(j)) for x, j, _ in piece_demand(pp, nxt).tolist()}
                for r in range(N):
                    o, j = before[r], after[r]
                    for p in range(pp.pieces):
                        H0 = frozenset(w for w in range(K) if int(pp.holders[r, p]) >> w & 1)
                        H1 = frozenset(w for w in range(K) if int(new.holders[r, p]) >> w & 1)
                        T = H0 - {o}
                        T1 = (T - {j}) | {o} if j in T else T  # the bijection of the proof
                        assert H1 - {j} == T1 or o == j
                        gained = H1 - H0
                        assert all((r * pp.pieces + p, w) in delivered for w in gained)


@pytest.mark.parametrize("K", [5, 6, 7, 8])
def test_share_every_epoch(K):
    N = 40
    for t in range(K):
        pp = piece_placement(epoch_placement(N, K, seed=t, epoch=0), M=t + 1)
        for epoch in range(1, 11):
            pp = update_storage(pp, epoch_placement(N, K, seed=t, epoch=epoch))
            check_piece_placement(pp)
            sizes = pp.placement.sizes().tolist()
            for w in range(K):
                held = int(((pp.holders >> np.uint64(w)) & np.uint64(1)).sum())
                share = sizes[w] * math.comb(K - 1, t) + (N - sizes[w]) * (
                    math.comb(K - 2, t - 1) if t else 0
                )
                assert held == share


def test_t0_is_todays_placement():
    rng = np.random.default_rng(6)
    for _ in range(20):
        K = int(rng.integers(2, 9))
        owner = rng.integers(0, K, 30)
        pp = piece_placement(placement_from_owner(owner, K), M=1)
        assert pp.pieces == 1 and (pp.holders[:, 0] == (np.uint64(1) << owner.astype(np.uint64))).all()
        after = rng.integers(0, K, 30)
        new = update_storage(pp, placement_from_owner(after, K))
        assert (new.holders[:, 0] == (np.uint64(1) << after.astype(np.uint64))).all()


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
