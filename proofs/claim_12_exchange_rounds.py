"""Claim 12: the exchange in rounds of matchings carries exactly its demand, at the port bound.

Notation
--------
==============  ====================================================================
``K``           workers
``D[i][j]``     units (records or pieces, all of one size) worker ``i`` sends worker ``j`` after
                the sender assignment (claim 9); ``D[i][i] = 0``
``L``           the largest row or column sum of ``D``: the busiest port's units
``A``           ``D`` plus non-negative padding, every row and column sum ``L``
round ``r``     a partial matching ``i -> pi_r(i)`` with ``x_r(i) >= 1`` units a transfer
``c_r``         the size of the ``r``-th slice of ``A``'s decomposition; ``m_r = max_i x_r(i)``
``R``           every port's rate, units a second, the same in each direction
==============  ====================================================================

The fluid model. Each worker has an upload port and a download port, each of rate ``R``,
joined by a switch that never blocks; a transfer of ``x`` units from ``i`` to ``j`` that has
both ports to itself lasts ``x / R``; latencies are not counted. A worker runs the rounds in
order, with no barrier: it starts round ``r`` (posts its send and its receive) when both of its
transfers of round ``r - 1`` are done, and a transfer flows from the time both its ends have
started its round. In a matching no port carries two transfers at once.

Statement
---------
(a) :func:`coded_shuffle.plan.exchange_rounds` ends, and its rounds carry exactly ``D``: every
    round a partial matching (each worker sends at most once and receives at most once), each
    transfer a positive whole number of units, the units of each pair over its rounds adding up
    to ``D[i][j]`` (:func:`coded_shuffle.plan.is_round_schedule`).
(b) In the fluid model, any schedule of rounds ends by ``sum_r m_r / R``; no exchange of ``D``
    ends before ``L / R``; and without merging (``merge_below=0``) ``sum_r m_r = L``: the
    rounds end at the busiest port's units over its rate, exactly.

Proof
-----
(a) The padding (north-west corner rule on the row and column deficits, whose totals are both
``K L - sum D``) makes every line sum ``L``. A non-negative integer matrix with every line sum
``L > 0`` has a perfect matching on its support (Koenig, or Hall: a set ``S`` of rows carries
``L |S|`` units, all in the columns ``N(S)`` its support reaches, which carry at most
``L |N(S)|``, so ``|N(S)| >= |S|``). Taking ``c`` (the smallest matched entry, an integer)
times the permutation away leaves every line sum ``L - c`` and one more zero entry, so the
decomposition ends after at most ``K^2`` slices with ``sum_r c_r = L``, and ``A[i][j]`` is the sum
of the ``c_r`` of the slices whose permutation maps ``i`` to ``j``. Filling each pair's ``D[i][j]``
real units into its slices in order, at most ``c_r`` into slice ``r``, places them all (since
``D[i][j] <= A[i][j]``), each transfer a whole number, and every slice stays a matching. Merging
(folding) sums the transfers of some rounds by pair, and adds each pair's sum to that pair's own
transfer in a round kept, or gives it to one transfer of a round in which neither end is used
yet: still a matching, still the same sums.

(b) Let ``T_r = sum_{s <= r} m_s / R``. By induction every worker has done its round ``r`` by
``T_r``: it starts round ``r`` by ``T_{r-1}``, and so does the other end of each of its
transfers; a transfer's ports carry nothing else in that round, so it flows at ``R`` from at
most ``T_{r-1}`` and ends by ``T_{r-1} + m_r / R``. The busiest port carries ``L`` units, at
most ``R`` a second: no exchange ends before ``L / R``. Without merging, round ``r``'s transfers
are at most ``c_r`` and those of the busiest port's line fill them: ``m_r <= c_r`` gives
``sum m_r <= sum c_r = L``, and the lower bound gives equality.

Check
-----
(a) and (b) on every ``D`` with entries at most 2 for ``K = 2, 3``, and on random ``D`` for ``K``
up to 6, the rounds checked by an independent count and their time in the fluid model by an
event simulation of the rounds with no barrier, against ``L / R`` computed by loops.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from coded_shuffle.plan import exchange_rounds, is_round_schedule


def carried(K: int, rounds: list) -> tuple[list[list[int]], bool]:
    """Units each pair carries, and whether every round is a partial matching of positive units."""
    got = [[0] * K for _ in range(K)]
    ok = True
    for r in rounds:
        receivers = [j for j, _ in r.values()]
        ok &= len(set(receivers)) == len(receivers) and all(n >= 1 and i != j for i, (j, n) in r.items())
        for i, (j, n) in r.items():
            got[i][j] += n
    return got, ok


def fluid_time(K: int, rounds: list, R: float) -> float:
    """The end of ``rounds`` in the fluid model with no barrier: each worker starts round ``r`` when
    its own transfers of round ``r - 1`` are done; a transfer flows once both ends have started."""
    done = [0.0] * K  # when each worker finished its last round
    for r in rounds:
        start = list(done)  # every worker starts this round when its previous is done
        for i, (j, n) in r.items():
            end = max(start[i], start[j]) + n / R
            done[i] = max(done[i], end)
            done[j] = max(done[j], end)
    return max(done, default=0.0)


def busiest(D: list[list[int]]) -> int:
    K = len(D)
    return max([sum(row) for row in D] + [sum(D[i][j] for i in range(K)) for j in range(K)], default=0)


def check(D: np.ndarray, R: float = 3.0) -> None:
    K = D.shape[0]
    for merge in (0.0, 0.25):
        rounds = exchange_rounds(D, merge_below=merge)
        got, ok = carried(K, rounds)
        assert ok and got == D.tolist() and is_round_schedule(D, rounds)
        t = fluid_time(K, rounds, R)
        bound = busiest(D.tolist()) / R
        assert t >= bound - 1e-9
        assert t <= sum(max(n for _, n in r.values()) for r in rounds) / R + 1e-9
        if merge == 0:
            assert t == pytest.approx(bound, abs=1e-9)


@pytest.mark.parametrize("K", [2, 3])
def test_every_small_demand(K):
    off = [(i, j) for i in range(K) for j in range(K) if i != j]
    for cells in itertools.product(range(3), repeat=len(off)):
        D = np.zeros((K, K), dtype=np.int64)
        for (i, j), v in zip(off, cells, strict=True):
            D[i, j] = v
        check(D)


@pytest.mark.parametrize("K", [4, 5, 6])
def test_random_demands(K):
    rng = np.random.default_rng(K)
    for _ in range(40):
        D = rng.integers(0, 9, (K, K)) * (rng.random((K, K)) < 0.7)
        np.fill_diagonal(D, 0)
        check(D.astype(np.int64))
