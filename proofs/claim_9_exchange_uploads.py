"""Claim 9: the peers' exchange, its busiest download and its least busiest upload.

Notation
--------
==============  ====================================================================
``K``           workers; ``t = M - 1`` for a storage of ``M`` batches
unit            a record (``M = 1``) or a piece ``r_T`` (``M > 1``, docs/storage.md)
``H``           a unit's holder set before the transition; its wanter is not in ``H``
``n_g``         the units missing at their wanters whose holder set is ``H_g``
``n(S)``        ``sum of n_g over H_g inside S``, for a set ``S`` of workers
``lambda*``     ``max over non-empty S of n(S) / |S|``
==============  ====================================================================

Statement
---------
(a) In any exchange between the workers alone, each worker receives at least the units of its
    next batch that it does not hold, so the busiest download is at least the largest of them.
(b) With uploads measured in units that may be split between holders, the least busiest upload
    is ``lambda*``; with whole units it is ``ceil(lambda*)``, and
    :func:`coded_shuffle.plan.assign_senders` reaches it.
(c) With the piece placement of a storage of ``M`` batches, a record that moves ``o -> j``
    misses ``C(K - 2, t)`` of its ``C(K - 1, t)`` pieces at ``j``: a fraction ``(K - 1 - t) / (K - 1)``
    of what ``M = 1`` moves. The download of every worker falls by that factor, exactly.

Proof
-----
(a) A unit that ``j`` must hold and does not hold is a function of what ``j`` receives only
if it is received (the workers other than ``j`` send functions of their own units; a unit
``j`` lacks is independent of everything ``j`` holds, the records being independent).

(b) Senders inside ``S`` must together send every unit whose holders all lie in ``S``: some
worker of ``S`` uploads at least ``n(S) / |S|``, so no assignment beats ``lambda*``. Conversely
the network source -> group ``g`` (capacity ``n_g``) -> each holder of ``H_g`` (unbounded) ->
sink (capacity ``L``) has a cut of less than ``sum n_g`` only if some set ``S`` of workers
(those on the source side) has ``n(S) > L |S|`` (max-flow min-cut); so for ``L = lambda*`` a
flow of value ``sum n_g`` exists, and it splits each group between its holders with uploads of
at most ``lambda*``. For integer ``L`` the flow is integral (integrality of flows), which gives
whole units; ``ceil(lambda*)`` is the least integer ``L >= lambda*``.

(c) The new owner ``j`` is in the holder set ``{o} u T`` exactly when ``j`` is in ``T``:
``C(K - 2, t - 1)`` of the ``C(K - 1, t)`` sets ``T``; it misses the other ``C(K - 2, t)``, and
``C(K - 2, t) / C(K - 1, t) = (K - 1 - t) / (K - 1)``.

Check
-----
(b) against every subset of workers and every assignment of senders on random holder sets,
``K <= 5``; (c) on piece placements of random reshuffles, ``K <= 8``, every ``t``.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import assign_senders
from coded_shuffle.storage import piece_demand, piece_placement
from tests.oracles import brute_min_max_upload, brute_upload_bound


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_the_least_busiest_upload_is_the_ceiling_of_the_fractional_optimum(K):
    rng = np.random.default_rng(K)
    for _ in range(25):
        n = int(rng.integers(1, 8))
        want = rng.integers(0, K, n)
        holders = []
        for j in want:
            others = [w for w in range(K) if w != j]
            size = int(rng.integers(1, len(others) + 1)) if others else 0
            picked = rng.choice(others, size=size, replace=False) if others else []
            holders.append(int(sum(1 << int(w) for w in picked)))
        if K == 1 or 0 in holders:
            continue
        a = assign_senders(want, holders, K=K)
        lam = brute_upload_bound(holders, K)
        assert a.upload_bound == lam
        assert a.max_upload == math.ceil(lam) == brute_min_max_upload(holders, K)
        assert all((h >> int(s)) & 1 for h, s in zip(holders, a.sender, strict=True))
        assert a.downloads.tolist() == np.bincount(want, minlength=K).tolist()


@pytest.mark.parametrize("K", [3, 4, 6, 8])
def test_storage_cuts_every_download_by_K_minus_1_minus_t_over_K_minus_1(K):
    N = 6 * K
    p0, p1 = epoch_placement(N, K, seed=K, epoch=0), epoch_placement(N, K, seed=K, epoch=1)
    moved = np.bincount(np.asarray(p1.owner)[np.asarray(p0.owner) != np.asarray(p1.owner)], minlength=K)
    for t in range(K - 1):
        d = piece_demand(piece_placement(p0, M=t + 1), p1)
        got = np.bincount(d[:, 1], minlength=K)
        assert got.tolist() == (moved * math.comb(K - 2, t)).tolist()
        assert math.comb(K - 2, t) * (K - 1) == math.comb(K - 1, t) * (K - 1 - t)


def test_every_process_computes_the_same_assignment():
    """The workers compute the assignment each on its own: it must not depend on the process
    (Python randomizes the hashes of strings per process; the flow network uses integers)."""
    import subprocess
    import sys

    prog = (
        "import hashlib, numpy as np\n"
        "from coded_shuffle.orders import epoch_placement\n"
        "from coded_shuffle.plan import assign_senders\n"
        "from coded_shuffle.storage import piece_demand, piece_placement\n"
        "p0, p1 = (epoch_placement(2000, 8, seed=3, epoch=e) for e in (0, 1))\n"
        "d = piece_demand(piece_placement(p0, M=3), p1)\n"
        "s = assign_senders(d[:, 1], d[:, 2], K=8).sender\n"
        "print(hashlib.sha256(s.tobytes()).hexdigest())\n"
    )
    import os

    got = {
        subprocess.run(
            [sys.executable, "-c", prog],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout  # fmt: skip
        for seed in (0, 1, 12345)
    }
    assert len(got) == 1, got


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
