"""Claim 13: a lower bound on the time of a transition on racks under a spine, and where it is met.

Notation
--------
==============  ====================================================================
``S[i][j]``     records held by worker ``i`` at epoch ``t`` and needed by ``j`` at ``t + 1``
``B``           bytes a record; rates in bytes a second: the master's uplink ``m`` (``0``: no
                master), every worker's uplink ``u`` and downlink ``w``, every rack's uplink to
                the spine ``U`` and downlink from it ``D``
``r``           a rack: a set of workers under one top-of-rack switch; the master is outside
                every rack, on the spine
``In_r``        ``B sum_{i not in r, j in r} S[i][j]``: what workers of ``r`` need and only
                workers outside ``r`` (and the master) hold
``Out_r``       ``B sum_{i in r, j not in r} S[i][j]``: what only workers of ``r`` (and the
                master) hold and workers outside ``r`` need
``T_10``        the bound of claim 10 (each worker's downlink and uplink, the master's)
==============  ====================================================================

Statement
---------
(a) Every delivery of the transition, coded or not, by the master, the workers or both, takes at
    least ``T* = max(T_10, max_r In_r / D, max_r Out_r / (min(U, |r| u) + m))`` seconds
    (:func:`coded_shuffle.network.transition_times` on a network with racks).
(b) Without a master (``m = 0``), the exchange of whole records takes exactly ``T*``: the least
    time of any delivery.
(c) Every mode's predicted time on racks is at least ``T*``.

Proof
-----
The records are independent and uniform. (a) Claim 10's cuts stand: a worker's links are links
of this network too. The workers of rack ``r`` must end holding ``In_r`` bytes independent of
everything they hold together; whatever they receive from outside the rack, the master's sends
included (the master is outside), crosses the rack's downlink: ``T D >= In_r``. The records that
only workers of ``r`` and the master hold and that others need, ``Out_r`` bytes, are independent
of everything the workers outside ``r`` hold; information about them leaves ``r`` through its
workers' uplinks and then its uplink to the spine, so through a cut of capacity ``min(U, |r| u)``,
or from the master: ``T (min(U, |r| u) + m) >= Out_r``. (b) Without a master each moved record
has one source, its holder ``i``, and the racks and the spine form a tree, so its path to ``j``
is unique: each link carries a fixed number of bytes, the exchange's time is the largest of
those over its rate, and every link is one of the cuts of (a) (a worker's downlink ``d_j``, its
uplink ``o_i``, a rack's downlink ``In_r``, its uplink ``Out_r <= |r| max o_i``). (c) Each
prediction is a schedule whose links carry their bytes within it.

Check
-----
Against the least time of every routing of whole records, by linear programming over small
random instances (an independent formulation: the share of each pair's records that the master
sends instead of their holder, the links' loads written out here): ``T*`` at most that least
time always, equal to it without a master; ``T*`` at most every mode's predicted time; the
per-rack quantities against a count record by record.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from coded_shuffle.bounds import lower_bound
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, rack_loads, transition_times
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import rates

MBIT = 1e6 / 8  # bytes a second of one Mbit/s


def _routing_time(S: np.ndarray, rack: np.ndarray, *, m: float, u: float, w: float, U: float, D: float,
                  B: int) -> float:  # fmt: skip
    """The least time of delivering every moved record whole, each pair ``i -> j``'s records
    split between their holder ``i`` and the master (LP: variables ``x_ij``, the master's share,
    and ``T``), on racks ``rack`` with the master on the spine (rates in bytes a second)."""
    K = S.shape[0]
    pairs = [(i, j) for i in range(K) for j in range(K) if i != j and S[i, j]]
    n = len(pairs) + 1  # x of each pair, then T
    rows, rhs = [], []

    def link(coef_x: dict[int, float], const: float, rate: float) -> None:
        # const + sum coef x <= T rate   ->   sum coef x - rate T <= -const
        row = np.zeros(n)
        for p, c in coef_x.items():
            row[p] += c
        row[-1] = -rate
        rows.append(row)
        rhs.append(-const)

    link({p: B for p in range(len(pairs))}, 0.0, m)  # the master's uplink
    for i in range(K):  # a worker's uplink: its pairs' records it sends itself
        mine = [p for p, (a, _) in enumerate(pairs) if a == i]
        link({p: -B for p in mine}, B * sum(S[pairs[p]] for p in mine), u)
    for j in range(K):  # a worker's downlink: every record it misses
        link({}, B * sum(S[i, j] for i in range(K) if i != j), w)
    for r in range(int(rack.max()) + 1):
        out = [p for p, (i, j) in enumerate(pairs) if rack[i] == r and rack[j] != r]
        link({p: -B for p in out}, B * sum(S[pairs[p]] for p in out), U)  # holders' sends leaving r
        into = [p for p, (i, j) in enumerate(pairs) if rack[i] != r and rack[j] == r]
        local = [p for p, (i, j) in enumerate(pairs) if rack[i] == r and rack[j] == r]
        # into r: the holders outside it send what the master does not; the master sends its share
        link({p: B for p in local}, B * sum(S[pairs[p]] for p in into), D)
    bounds = [(0, S[p] if m else 0) for p in pairs]
    if not u:  # the workers cannot send: the master sends everything
        bounds = [(S[p], S[p]) for p in pairs]
    res = linprog(np.r_[np.zeros(n - 1), 1.0], A_ub=np.array(rows), b_ub=np.array(rhs),
                  bounds=[*bounds, (0, None)], method="highs")  # fmt: skip
    assert res.status == 0, res.message
    return float(res.x[-1])


def _instances(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        K = int(rng.integers(2, 7))
        cuts = sorted(rng.choice(np.arange(1, K), size=int(rng.integers(0, K)), replace=False).tolist())
        racks = tuple(np.diff([0, *cuts, K]).tolist())
        N = K * int(rng.integers(1, 12))
        p0, p1 = (epoch_placement(N, K, seed=int(rng.integers(1000)), epoch=e) for e in (0, 1))
        yield shuffle_matrix(p0, p1), racks, rng


@pytest.mark.parametrize("master", [None, 1000.0, 50.0])
def test_the_bound_is_at_most_the_least_routing_and_meets_it_without_a_master(master):
    B = 1000
    for S, racks, rng in _instances(12 if master is None else int(master), 25):
        up, down, rack_up, rack_down = (float(rng.choice([10, 100, 1000])) for _ in range(4))
        net = Network(down=down, master=master, up=up, racks=racks, rack_up=rack_up, rack_down=rack_down)
        lb = lower_bound(S).value
        t = transition_times(S, record_bytes=B, network=net, coded_symbols=rates(S).coded,
                             lower_bound_symbols=lb)  # fmt: skip
        rack = np.repeat(np.arange(len(racks)), racks)
        best = _routing_time(np.asarray(S), rack, m=(master or 0) * MBIT, u=up * MBIT, w=down * MBIT,
                             U=rack_up * MBIT, D=rack_down * MBIT, B=B)  # fmt: skip
        assert t.bound_seconds <= best * (1 + 1e-9)
        if master is None:
            assert t.bound_seconds == pytest.approx(best, rel=1e-9)
            assert t.predicted_seconds["exchange"] == pytest.approx(best, rel=1e-9)


def test_the_bound_without_worker_uplinks_is_at_most_the_masters_delivery():
    master = 1000.0
    for S, racks, rng in _instances(5, 15):
        rack_down = float(rng.choice([100, 1000]))
        net = Network(down=1000.0, master=master, racks=racks, rack_up=100.0, rack_down=rack_down)
        t = transition_times(S, record_bytes=1000, network=net, coded_symbols=rates(S).coded,
                             lower_bound_symbols=lower_bound(S).value)  # fmt: skip
        rack = np.repeat(np.arange(len(racks)), racks)
        best = _routing_time(np.asarray(S), rack, m=master * MBIT, u=0.0, w=1000 * MBIT, U=100 * MBIT,
                             D=rack_down * MBIT, B=1000)  # fmt: skip
        assert t.bound_seconds <= best * (1 + 1e-9)
        assert t.predicted_seconds["uncoded"] == pytest.approx(best, rel=1e-9)  # the unicast is a routing


SPECS = [
    "up=100,down=1000,racks=2x3,rack-up=100",
    "master=1000,up=100,down=1000,racks=3+2+1,rack-up=200,rack-down=400",
    "master=1000,up=100,down=1000,multicast,racks=2x3,rack-up=100,spine-multicast",
    "master=1000,up=100,down=1000,multicast,snooping,racks=4+2,rack-up=50,spine-multicast",
    "master=1000,down=1000,racks=1x6,rack-up=300",
]


@pytest.mark.parametrize("spec", SPECS)
def test_the_bound_is_at_most_every_prediction_and_the_loads_count_records(spec):
    net = Network.parse(spec)
    rng = np.random.default_rng(len(spec))
    for _ in range(15):
        N = 6 * int(rng.integers(1, 30))
        p0, p1 = (epoch_placement(N, 6, seed=int(rng.integers(1000)), epoch=e) for e in (0, 1))
        S = shuffle_matrix(p0, p1)
        t = transition_times(S, record_bytes=1000, network=net, coded_symbols=rates(S).coded,
                             lower_bound_symbols=lower_bound(S).value)  # fmt: skip
        finite = [v for v in t.predicted_seconds.values() if math.isfinite(v)]
        assert finite and t.bound_seconds <= min(finite) * (1 + 1e-12)
        # the per-rack loads, record by record
        rack = net.rack_of()
        old, new = rack[np.asarray(p0.owner)], rack[np.asarray(p1.owner)]
        moved = np.asarray(p0.owner) != np.asarray(p1.owner)
        R = len(net.racks)
        got = rack_loads(S, racks=net.racks)
        assert got["into"] == np.bincount(new[old != new], minlength=R).tolist()
        assert got["out_of"] == np.bincount(old[old != new], minlength=R).tolist()
        assert got["moved_in"] == np.bincount(new[moved], minlength=R).tolist()
