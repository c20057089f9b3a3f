"""Tests of :mod:`coded_shuffle.engine.replay`: each mode's transfers, and their times on SimGrid
against times worked out by hand (bytes over the rate of the busiest link, plus each link's
latency on the route) for cases small enough to follow."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.engine.replay import Racks, replay, simgrid_available, transfer_plans
from coded_shuffle.network import Network
from coded_shuffle.plan import is_round_schedule

needs_simgrid = pytest.mark.skipif(
    not simgrid_available(),
    reason="SimGrid's Python module is not installed (apt-get install python3-simgrid; pip install simgrid)",
)

# 125 kB is one second at 1 Mbit/s (125,000 bytes a second).
B = 125_000
LAT = 0.001


def _pairs(track):
    """Bytes of each (sender, receiver) summed over a track's unicast steps."""
    out = {}
    for step in track:
        for s, d, b in zip(*step["flows"], strict=True):
            out[s, d] = out.get((s, d), 0.0) + b
    return out


def test_exchange_plan_carries_the_moved_records(rng):
    S = rng.integers(0, 20, size=(6, 6))
    for schedule in ("rounds", "at-once"):
        plans = transfer_plans(S, record_bytes=8, network=Network.parse("up=1,down=1"), schedule=schedule)
        assert set(plans) == {"exchange"}  # no master: the workers alone
        (track,) = plans["exchange"]
        # one holder a record: each record moves from its holder to its new holder (S itself)
        want = {(i, j): 8.0 * S[i, j] for i in range(6) for j in range(6) if i != j and S[i, j]}
        assert _pairs(track) == want
    (track,) = transfer_plans(S, record_bytes=8, network=Network.parse("up=1,down=1"))["exchange"]
    rounds = [{s: (d, int(b) // 8) for s, d, b in zip(*step["flows"], strict=True)} for step in track]
    D = np.array(S)
    np.fill_diagonal(D, 0)
    assert is_round_schedule(D, rounds)


def test_master_plans(rng):
    S = rng.integers(0, 20, size=(5, 5))
    off = np.array(S)
    np.fill_diagonal(off, 0)
    plans = transfer_plans(S, record_bytes=4, network=Network.parse("master=1,up=1,down=1"), chunk_bytes=10)
    # uncoded: the master sends each worker what it misses, all at once
    assert _pairs(plans["uncoded"][0]) == {(-1, j): 4.0 * off[:, j].sum() for j in range(5)}
    # coded without multicast: a chain, each hop forwarding every coded byte in pieces of 10 B
    hops = _pairs(plans["coded"][0])
    assert sorted(hops) == [(-1, 0), (0, 1), (1, 2), (2, 3), (3, 4)]
    assert len(set(hops.values())) == 1
    assert max(b for step in plans["coded"][0] for b in step["flows"][2]) == 10


def test_replay_exceptions():
    net = Network.parse("up=1,down=1")
    with pytest.raises(ValueError, match="'schedule'"):
        transfer_plans([[0, 1], [1, 0]], record_bytes=1, network=net, schedule="later")
    with pytest.raises(TypeError, match="'network'"):
        transfer_plans([[0, 1], [1, 0]], record_bytes=1, network="up=1,down=1")
    with pytest.raises(ValueError, match="'record_bytes'"):
        transfer_plans([[0, 1], [1, 0]], record_bytes=0, network=net)
    with pytest.raises(TypeError, match="'racks'"):
        replay([[0, 1], [1, 0]], record_bytes=1, network=net, racks=4)
    with pytest.raises(ValueError, match="'hosts'"):
        Racks(hosts=0, up=1, down=1)
    with pytest.raises(ValueError, match="'up'"):
        Racks(hosts=2, up=0, down=1)


@needs_simgrid
def test_one_switch_by_hand():
    # Two workers swap one record. Master 4, uplinks 1, downlinks 2 Mbit/s; 1 ms a link.
    # exchange: one round, B over an uplink of 125 kB/s: 1 s, plus two links' latency;
    # coded: one XOR symbol multicast, the downlinks of 250 kB/s bind: 0.5 s;
    # uncoded: two flows of B share the master's 500 kB/s (250 each, as each downlink): 0.5 s.
    S = [[0, 1], [1, 0]]
    r = replay(S, record_bytes=B, network=Network.parse("master=4,up=1,down=2,multicast"), latency=LAT)
    assert r.simulated_seconds["exchange"] == pytest.approx(1 + 2 * LAT)
    assert r.simulated_seconds["coded"] == pytest.approx(0.5 + 2 * LAT)
    assert r.simulated_seconds["uncoded"] == pytest.approx(0.5 + 2 * LAT)
    assert r.fastest == "coded"
    # Without multicast the coded symbol goes down a chain in one piece: the master to worker 0
    # (0.5 s at worker 0's downlink), then worker 0 to worker 1 (1 s at its uplink).
    r = replay(S, record_bytes=B, network=Network.parse("master=4,up=1,down=2"), latency=LAT, chunk_bytes=B)
    assert r.simulated_seconds["coded"] == pytest.approx(0.5 + 1 + 4 * LAT)


@needs_simgrid
def test_racks_by_hand():
    # Racks of 2 workers, ports of 4 Mbit/s, each rack's link to the core 1 Mbit/s. Workers 0 and
    # 1 (rack 0) each send a record to rack 1: both cross rack 0's uplink, 2 B at 125 kB/s: 2 s,
    # plus four links' latency (the sender's port, rack 0 up, rack 1 down, the receiver's port).
    S = [[1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 2, 0], [0, 0, 0, 2]]
    net = Network.parse("up=4,down=4")
    r = replay(S, record_bytes=B, network=net, racks=Racks(hosts=2, up=1, down=1), latency=LAT)
    assert r.simulated_seconds["exchange"] == pytest.approx(2 + 4 * LAT)
    # one switch: both in one round, each on its own ports: B at 500 kB/s
    assert replay(S, record_bytes=B, network=net, latency=LAT).simulated_seconds["exchange"] == pytest.approx(
        0.25 + 2 * LAT
    )
    # The master's multicast on racks: the core sends one copy a rack, so a rack's downlink
    # carries the symbols once (the master's 4 Mbit/s bind: B / 500 kB/s), three links' latency.
    S = [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]]
    r = replay(S, record_bytes=B, network=Network.parse("master=4,up=4,down=4,multicast"),
               racks=Racks(hosts=2, up=4, down=4), latency=LAT)  # fmt: skip
    assert r.simulated_seconds["coded"] == pytest.approx(2 * B / 500_000 + 3 * LAT)


@needs_simgrid
def test_cli_simgrid(capsys):
    argv = ["simulate", "--simulator", "simgrid", "-K", "4", "-N", "400", "--transitions", "1",
            "--network", "master=1000,up=100,down=1000,multicast"]  # fmt: skip
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "simulated s" in out and " auto " in out
    assert main([*argv, "--json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr()[0].splitlines()]
    assert set(row["simulated_seconds"]) >= {"coded", "uncoded", "exchange"}
    # every mode at or above the bound (latency only adds)
    assert min(row["simulated_seconds"].values()) >= row["time_bound_seconds"]


def test_cli_simgrid_refusals(capsys):
    net = ["--network", "down=1,up=1"]
    for extra, word in ((["-K", "4"], "--network"), ([*net, "--storage", "2"], "--storage"),
                        ([*net, "--subpackets", "2"], "--subpackets")):  # fmt: skip
        assert main(["simulate", "--simulator", "simgrid", *extra]) == 2
        err = capsys.readouterr().err
        assert word in err and len(err.strip().splitlines()) == 1
