"""Claim 15: a lower bound on the time of a transition with a storage on racks, in bytes.

Notation
--------
==============  ====================================================================
``p``           a piece some worker misses: wanted by ``j_p``, held by the workers ``H_p``
                (``j_p`` not among them) and the master, ``b_p`` bytes (pieces of records of
                any sizes, each record cut by its own length)
``m, u, w``     rates in bytes a second: the master's uplink (``0``: no master), every
                worker's uplink and downlink; ``U``, ``D`` every rack's uplink to the spine
                and downlink from it
``r``           a rack: a set of workers under one top-of-rack switch; the master is outside
                every rack, on the spine
``d_j``         ``sum of b_p over j_p = j``: what worker ``j`` misses
``In_r``        ``sum of b_p over j_p in r, H_p outside r``: what workers of ``r`` miss and no
                worker of ``r`` holds
``Out_r``       ``sum of b_p over j_p not in r, H_p inside r``: what only workers of ``r`` (and
                the master) hold and workers outside ``r`` miss
==============  ====================================================================

Statement
---------
(a) Every delivery of the transition, coded or not, by the master, the workers or both, takes at
    least ``T* = max(max_j d_j / w, max_r In_r / D, max_r Out_r / (min(U, |r| u) + m))`` seconds:
    the bound :func:`coded_shuffle.engine.schedule.storage_times` gives on a network with racks
    (without the genie cut it adds where the workers cannot send).
(b) The exchange's prediction there is the busiest link of its senders' loads in bytes (each
    worker's uplink and downlink, each rack's uplink and downlink), at least ``T*``.

Proof
-----
The records are independent and uniform, so are the pieces (disjoint byte ranges of them). (a)
Worker ``j`` must end holding ``d_j`` bytes independent of what it holds: ``T w >= d_j``. The
workers of rack ``r`` must end holding the ``In_r`` bytes of pieces none of them holds,
independent of everything they hold together; whatever they receive from outside the rack, the
master's sends included, crosses its downlink: ``T D >= In_r``. The pieces held only by workers
of ``r`` (and the master) that workers outside ``r`` miss, ``Out_r`` bytes, are independent of
everything the workers outside hold; information about them leaves ``r`` through its workers'
uplinks and then its uplink to the spine, a cut of capacity ``min(U, |r| u)``, or comes from the
master: ``T (min(U, |r| u) + m) >= Out_r``. Claim 13 is the case of one holder a piece. (b) The
prediction is a schedule whose links carry their bytes within it, so (a) bounds it.

Check
-----
On small random storages of records of many sizes on random racks, against an independent
formulation: the least time of every routing of whole pieces, each piece's bytes split between
its holders and the master at will (linear programming, the links' loads written out here):
``T*`` at most that least time, and at most the exchange's prediction; ``T*`` and the exchange's
loads counted here piece by piece from the two placements (what each worker holds, what it must
hold next) and the senders.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from coded_shuffle.engine.schedule import EpochSchedule, storage_times
from coded_shuffle.engine.schemes import scheme_for
from coded_shuffle.network import Network
from coded_shuffle.orders import OrderSpec

MBIT = 1e6 / 8  # bytes a second of one Mbit/s


def _pieces(scheme, e0, e1, K):
    """``[(piece, wanter, holders, bytes)]`` of every piece a worker misses, from the placements."""
    now = [set(e0.held.held_by(k).tolist()) for k in range(K)]
    nxt = [set(e1.held.held_by(k).tolist()) for k in range(K)]
    lengths = scheme.holding.unit_lengths
    missing = [(u, j) for j in range(K) for u in sorted(nxt[j] - now[j])]
    return [(u, j, {k for k in range(K) if u in now[k]}, int(lengths[u])) for u, j in missing]


def _routing_time(pieces, rack, K, *, m, u, w, U, D):
    """The least time of delivering every missing piece, its bytes split at will between its
    holders and the master (LP: a share of each piece a source, then ``T``)."""
    cols = [(i, h) for i, (_, _, H, _) in enumerate(pieces) for h in [*sorted(H), *(["m"] if m else [])]]
    n = len(cols) + 1
    rows, rhs = [], []

    def link(coef, const, rate):  # const + sum coef x <= rate T
        row = np.zeros(n)
        for c, v in coef.items():
            row[c] += v
        row[-1] = -rate
        rows.append(row)
        rhs.append(-const)

    b = [p[3] for p in pieces]
    link({c: b[i] for c, (i, h) in enumerate(cols) if h == "m"}, 0.0, m)
    for k in range(K):
        link({c: b[i] for c, (i, h) in enumerate(cols) if h == k}, 0.0, u)
        link({}, float(sum(p[3] for p in pieces if p[1] == k)), w)
    for r in range(int(rack.max()) + 1):
        out = {c: b[i] for c, (i, h) in enumerate(cols)
               if h != "m" and rack[h] == r and rack[pieces[i][1]] != r}  # fmt: skip
        link(out, 0.0, U)
        into = {c: b[i] for c, (i, h) in enumerate(cols)
                if rack[pieces[i][1]] == r and (h == "m" or rack[h] != r)}  # fmt: skip
        link(into, 0.0, D)
    A_eq = np.zeros((len(pieces), n))
    for c, (i, _) in enumerate(cols):
        A_eq[i, c] = 1.0
    res = linprog(np.r_[np.zeros(n - 1), 1.0], A_ub=np.array(rows), b_ub=np.array(rhs), A_eq=A_eq,
                  b_eq=np.ones(len(pieces)), bounds=[(0, None)] * n, method="highs")  # fmt: skip
    assert res.status == 0, res.message
    return float(res.x[-1])


def _instances(seed, count):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        K = int(rng.integers(3, 7))
        M = int(rng.integers(2, min(3, K - 1) + 1))
        cuts = sorted(rng.choice(np.arange(1, K), size=int(rng.integers(1, K)), replace=False).tolist())
        racks = tuple(np.diff([0, *cuts, K]).tolist())
        sizes = rng.integers(200, 4000, K * int(rng.integers(2, 6)))
        yield K, M, racks, sizes, rng


@pytest.mark.parametrize("master", [None, 100.0])
def test_the_bound_is_at_most_the_least_routing_and_the_exchanges_prediction(master):
    for K, M, racks, sizes, rng in _instances(15 if master is None else 16, 12):
        up, down, rack_up, rack_down = (float(rng.choice([10, 100, 1000])) for _ in range(4))
        net = Network(down=down, master=master, up=up, racks=racks, rack_up=rack_up, rack_down=rack_down)
        scheme = scheme_for("exchange", K=K, storage=M, sizes=sizes, network=net)
        seed = int(rng.integers(1000))
        sched = EpochSchedule(N=sizes.size, K=K, seed=seed, spec=OrderSpec(), scheme=scheme)
        e0 = sched.epoch(0)
        e1 = sched.epoch(1, e0)
        t = storage_times(scheme, e0.held, e1.held, network=net, width=1, coded_bytes=1)
        pieces = _pieces(scheme, e0, e1, K)
        rack = np.repeat(np.arange(len(racks)), racks)
        m, u, w, U, D = ((master or 0) * MBIT, up * MBIT, down * MBIT, rack_up * MBIT, rack_down * MBIT)
        # T*, counted piece by piece
        cuts = [sum(p[3] for p in pieces if p[1] == j) / w for j in range(K)]
        for r, hosts in enumerate(racks):
            into = sum(p[3] for p in pieces if rack[p[1]] == r and all(rack[h] != r for h in p[2]))
            out = sum(p[3] for p in pieces if rack[p[1]] != r and all(rack[h] == r for h in p[2]))
            cuts += [into / D, out / (min(U, hosts * u) + m)]
        assert t.bound_seconds == pytest.approx(max(cuts), rel=1e-12)
        best = _routing_time(pieces, rack, K, m=m, u=u, w=w, U=U, D=D)
        assert t.bound_seconds <= best * (1 + 1e-9)
        # the exchange's prediction: the busiest link of its senders' bytes, counted here
        units, wanter, _, assigned = scheme.exchange_plan(e0.held, e1.held)
        sender = dict(zip(zip(units.tolist(), wanter.tolist(), strict=True), assigned.sender.tolist(),
                          strict=True))  # fmt: skip
        ups, rups, rdowns = np.zeros(K), np.zeros(len(racks)), np.zeros(len(racks))
        for p, j, H, b in pieces:
            s = sender[(p, j)]
            assert s in H
            ups[s] += b
            if rack[s] != rack[j]:
                rups[rack[s]] += b
                rdowns[rack[j]] += b
        busiest = max(max(cuts[:K]), ups.max() / u, rups.max() / U, rdowns.max() / D)
        assert t.predicted_seconds["exchange"] == pytest.approx(busiest, rel=1e-12)
        assert t.bound_seconds <= busiest * (1 + 1e-12)
