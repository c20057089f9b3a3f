"""Claim 10: a lower bound on the time of a transition on a network, valid for every scheme.

Notation
--------
==============  ====================================================================
``S[i][j]``     records held by worker ``i`` at epoch ``t`` and needed by ``j`` at ``t + 1``
``B``           bytes a record; rates in bytes a second: the master's uplink ``m``, every
                worker's uplink ``u`` and downlink ``w`` (``m = 0``: no master, ``u = 0``: the
                workers cannot send data)
``d_j``         ``B sum_{i != j} S[i][j]``: what ``j`` misses
``o_i``         ``B sum_{j != i} S[i][j]``: what only ``i`` (and the master) holds that others need
``L``           the genie lower bound on the master's load, in records (claim 3)
==============  ====================================================================

Statement
---------
Every delivery of the transition, coded or not, by the master, the workers or both, takes at
least ``T* = max(max_j d_j / w, max_i o_i / (u + m), [u = 0] L B / m)`` seconds
(:func:`coded_shuffle.network.transition_times`).

Proof
-----
The records are independent and uniform. (a) Worker ``j`` must end holding ``d_j`` bytes that are
independent of everything it holds; they are a function of what it receives, so its downlink
carries at least ``d_j`` bytes: ``T >= d_j / w``. (b) The records that only ``i`` and the master
hold and that others need, ``o_i`` bytes, are independent of everything the other workers hold;
what those workers end with is a function of their own holdings and of what crosses into them,
and only ``i``'s uplink and the master's carry information about those records: ``T (u + m) >=
o_i``. (c) When the workers cannot send, everything the workers receive is the master's
transmission, of at least ``L`` records' bytes (claim 3), over a link of rate ``m``.

Check
-----
``d`` and ``o`` against a count over the two placements' records; the bound at most each mode's
predicted time (each prediction is a schedule whose links carry their bytes within it) on random
reshuffles and networks; the exchange meeting it on a switch of equal ports with a cyclic shift;
the SPEC's grammar and its refusals. The split (the master coding a share ``a`` of the moved
records, the workers exchanging the rest, :func:`coded_shuffle.network.split_time`) is a scheme
the network allows too: its predicted time is at least the bound, at most either mode alone, and
the least over a grid of 10001 shares of the links' times written out here.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

if __name__ == "__main__":  # run as a script: coded_shuffle and tests from this checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pytest

from coded_shuffle.bounds import cyclic_shift_matrix, lower_bound
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, split_time, transition_times
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import rates

SPECS = ["up=1000,down=1000", "master=1000,up=100,down=1000,multicast", "master=10000,up=100,down=1000",
         "master=1000,down=1000", "master=300,up=1000,down=1000"]  # fmt: skip


@pytest.mark.parametrize("spec", SPECS)
def test_the_bound_is_at_most_every_prediction(spec):
    net = Network.parse(spec)
    rng = np.random.default_rng(len(spec))
    for _ in range(20):
        K = int(rng.integers(2, 9))
        N = K * int(rng.integers(2, 40))
        p0, p1 = (epoch_placement(N, K, seed=int(rng.integers(1000)), epoch=e) for e in (0, 1))
        S = shuffle_matrix(p0, p1)
        r, lb = rates(S), lower_bound(S)
        B = 1000
        t = transition_times(S, record_bytes=B, network=net, coded_symbols=r.coded,
                             lower_bound_symbols=lb.value)  # fmt: skip
        finite = [v for v in t.predicted_seconds.values() if math.isfinite(v)]
        assert finite and t.bound_seconds <= min(finite) * (1 + 1e-12)
        assert t.predicted_seconds[t.choice] == min(finite)
        # d and o counted record by record
        old, new = np.asarray(p0.owner), np.asarray(p1.owner)
        moved = old != new
        d = np.bincount(new[moved], minlength=K) * B
        o = np.bincount(old[moved], minlength=K) * B
        w = net.down * 1e6 / 8
        cuts = [d.max() / w]
        m, u = ((x or 0) * 1e6 / 8 for x in (net.master, net.up))
        cuts.append(o.max() / (m + u))
        if not u:
            cuts.append(lb.value * B / m)
        assert t.bound_seconds == pytest.approx(max(cuts))


@pytest.mark.parametrize("spec", SPECS)
def test_the_split_is_the_least_over_every_share_and_never_below_the_bound(spec):
    net = Network.parse(spec)
    rng = np.random.default_rng(7 + len(spec))
    m, u, w = ((x or 0) * 1e6 / 8 for x in (net.master, net.up, net.down))
    grid = np.linspace(0, 1, 10001)
    for _ in range(20):
        K = int(rng.integers(2, 9))
        N = K * int(rng.integers(2, 40))
        p0, p1 = (epoch_placement(N, K, seed=int(rng.integers(1000)), epoch=e) for e in (0, 1))
        S = shuffle_matrix(p0, p1)
        B = 1000
        r, lb = rates(S), lower_bound(S)
        C = float(r.coded) * B
        old, new = np.asarray(p0.owner), np.asarray(p1.owner)
        moved = old != new
        d = np.bincount(new[moved], minlength=K).max() * B
        o = np.bincount(old[moved], minlength=K).max() * B
        with np.errstate(divide="ignore", invalid="ignore"):  # a link of rate 0 cannot carry bytes
            links = [
                np.where(grid * C > 0, grid * C / m, 0) if m else np.where(grid * C > 0, np.inf, 0),
                (grid * C + (1 - grid) * d) / w,
                ((1 - grid) * o + (0 if net.multicast else grid * C)) / u if u
                else np.where((1 - grid) * o + (0 if net.multicast else grid * C) > 0, np.inf, 0),
            ]  # fmt: skip
        by_hand = np.max(links, axis=0).min()
        share, best = split_time(C, d, o, master=m, up=u, down=w, multicast=net.multicast)
        assert best <= by_hand * (1 + 1e-12) and 0 <= share <= 1
        # and the share it names takes that time, by the links written out here
        at = [share * C / m if m else (math.inf if share * C else 0.0), (share * C + (1 - share) * d) / w]
        up_bytes = (1 - share) * o + (0 if net.multicast else share * C)
        at.append(up_bytes / u if u else (math.inf if up_bytes else 0.0))
        assert max(at) == pytest.approx(best, rel=1e-12)
        t = transition_times(
            S, record_bytes=B, network=net, coded_symbols=r.coded, lower_bound_symbols=lb.value
        )
        assert t.bound_seconds <= best * (1 + 1e-12)
        assert best <= min(t.predicted_seconds["coded"], t.predicted_seconds["exchange"]) * (1 + 1e-12)
        if t.split_seconds is not None:
            assert (
                t.split_seconds == best < min(t.predicted_seconds["coded"], t.predicted_seconds["exchange"])
            )


def test_the_split_beats_both_on_the_edge_of_slow_uplinks():
    """master 1000, uplinks 100, downlinks 1000, multicast: about 0.7 coded, 23 % under the coded
    broadcast alone (the downlink and the uplinks cross there)."""
    S = shuffle_matrix(*(epoch_placement(8000, 8, seed=0, epoch=e) for e in (0, 1)))
    net = Network.parse("master=1000,up=100,down=1000,multicast")
    t = transition_times(S, record_bytes=1024, network=net, coded_symbols=rates(S).coded,
                         lower_bound_symbols=lower_bound(S).value)  # fmt: skip
    assert t.split_seconds is not None and 0.6 < t.split_coded_share < 0.8
    assert t.split_seconds < 0.8 * t.predicted_seconds["coded"]


def test_the_exchange_meets_the_bound_on_a_switch():
    net = Network.parse("up=1000,down=1000")
    for K in (2, 4, 8):
        S = cyclic_shift_matrix(10 * K, K)
        t = transition_times(S, record_bytes=4096, network=net, coded_symbols=0, lower_bound_symbols=0)
        assert t.choice == "exchange" and t.predicted_seconds["exchange"] == t.bound_seconds


def test_without_worker_uplinks_the_master_bound_holds():
    net = Network.parse("master=1000,down=1000")
    S = cyclic_shift_matrix(40, 4)
    lb = lower_bound(S).value
    t = transition_times(S, record_bytes=1000, network=net, coded_symbols=rates(S).coded,
                         lower_bound_symbols=lb)  # fmt: skip
    assert t.bound_seconds >= lb * 1000 / (1000e6 / 8) and math.isinf(t.predicted_seconds["exchange"])


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "empty SPEC"), ("master=1000,up=0,down=1000", "up=0: a rate must be positive"),
        ("up=fast,down=10", "up=fast: a rate must be a number"), ("side=3,down=1", "'side=3': not a part"),
        ("down=1,down=2", "down given twice"), ("master=10,up=10", "no down=R"),
        ("up=1,down=1,multicast", "multicast needs master=R"), ("down=inf", "positive and finite"),
    ],
)  # fmt: skip
def test_a_spec_that_does_not_parse_names_the_part(spec, words):
    with pytest.raises(ValueError, match=words):
        Network.parse(spec)
    assert str(Network.parse("down=1000,up=100.5,master=1e3")) == "master=1000,up=100.5,down=1000"


if __name__ == "__main__":  # run as a script: these checks, under pytest (its options too: -k NAME)
    sys.exit(pytest.main([__file__, "-q", *sys.argv[1:]]))
