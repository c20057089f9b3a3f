"""Predicted times of records of different sizes (``coded_shuffle.network.predict_bytes``): each
link's load in bytes, checked against a count made record by record, and the coded broadcast's
bytes against those the in-process engine sends."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.network import Network, predict_bytes, transition_times
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import plan_delivery


def _by_hand(a, b, d, K):
    """Per worker, the bytes it misses (``down``) and those only it holds (``only``), the bytes
    that move, and the genie bound in bytes as the best of every ordering of the workers (claim
    14 (a): the records a worker needs whose holder comes after it)."""
    down, only, moved = [0] * K, [0] * K, 0
    for i, j, s in zip(a.owner.tolist(), b.owner.tolist(), d.tolist(), strict=True):
        if i != j:
            down[j] += s
            only[i] += s
            moved += s
    bound = 0
    each = list(zip(a.owner.tolist(), b.owner.tolist(), d.tolist(), strict=True))
    for order in itertools.permutations(range(K)):
        pos = {w: k for k, w in enumerate(order)}
        bound = max(bound, sum(s for i, j, s in each if i != j and pos[i] > pos[j]))
    return down, only, moved, bound


def _heard_by_hand(a, b, d, K, strategy="greedy"):
    """The coded plan's bytes, a symbol as long as its longer record, and the most one worker
    hears when an order-2 symbol goes to its pair alone and every other symbol to all."""
    plan = plan_delivery(a, b, strategy=strategy, sizes=d)
    x, y, phase = plan.transmissions()
    heard, total = [0] * K, 0
    for s in range(len(x)):
        size = max(int(d[x[s]]), int(d[y[s]]) if y[s] >= 0 else 0)
        total += size
        who = {int(a.owner[x[s]]), int(a.owner[y[s]])} if phase[s] == 0 else set(range(K))
        for w in who:
            heard[w] += size
    return total, max(heard)


def test_each_link_in_bytes_against_a_count_record_by_record(rng):
    # 1 Mbit/s is 125,000 bytes a second: every time below is bytes / (rate * 125,000)
    nets = {
        "exchange": Network.parse("up=3,down=2"),
        "master": Network.parse("master=5,down=2,multicast"),
        "snooping": Network.parse("master=5,up=1,down=2,multicast,snooping"),
    }
    for trial in range(8):
        K = int(rng.integers(2, 5))
        N = K * int(rng.integers(2, 6))
        d = rng.integers(1, 3000, N)
        a, b = (epoch_placement(N, K, seed=trial, epoch=e) for e in (0, 1))
        down, only, moved, bound = _by_hand(a, b, d, K)
        coded, heard = _heard_by_hand(a, b, d, K)
        r = 125_000
        t = predict_bytes(a, b, sizes=d, network=nets["exchange"])
        exchange = max(max(down) / (2 * r), max(only) / (3 * r))
        assert t.predicted_seconds["exchange"] == pytest.approx(exchange)
        assert t.bound_seconds == pytest.approx(max(max(down) / (2 * r), max(only) / (3 * r)))
        t = predict_bytes(a, b, sizes=d, network=nets["master"])
        assert t.predicted_seconds["uncoded"] == pytest.approx(max(moved / (5 * r), max(down) / (2 * r)))
        assert t.predicted_seconds["coded"] == pytest.approx(max(coded / (5 * r), coded / (2 * r)))
        cuts = (max(down) / (2 * r), max(only) / (5 * r), bound / (5 * r))
        assert t.bound_seconds == pytest.approx(max(cuts))
        t = predict_bytes(a, b, sizes=d, network=nets["snooping"])
        assert t.predicted_seconds["coded"] == pytest.approx(max(coded / (5 * r), heard / (2 * r)))


def test_rate_sizes_network_predicts_the_engines_bytes(tmp_path, capsys, rng):
    # rate --sizes --network: each transition's times those of predict_bytes, every link counted
    # record by record and symbol by symbol (the engine's plan, not the one blind to the sizes)
    K, N = 3, 18
    d = rng.integers(1, 3000, N)
    np.save(tmp_path / "sizes.npy", d)
    spec = "master=5,up=1,down=2,multicast,snooping"
    argv = ["rate", "-K", str(K), "--sizes", str(tmp_path / "sizes.npy"), "--seed", "4", "--json"]
    assert main([*argv, "--network", spec, "--transitions", "2"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    r = 125_000
    for epoch, row in zip((1, 2), rows, strict=True):
        a, b = (epoch_placement(N, K, seed=4, epoch=e) for e in (epoch - 1, epoch))
        down, only, moved, bound = _by_hand(a, b, d, K)
        coded, heard = _heard_by_hand(a, b, d, K)
        t = row["predicted_seconds"]
        assert t["coded"] == pytest.approx(max(coded / (5 * r), heard / (2 * r)))
        assert t["exchange"] == pytest.approx(max(max(down) / (2 * r), max(only) / (1 * r)))
        assert t["uncoded"] == pytest.approx(max(moved / (5 * r), max(down) / (2 * r)))
        cuts = (max(down) / (2 * r), max(only) / (6 * r))
        assert row["time_bound_seconds"] == pytest.approx(max(cuts)) and bound <= coded
        want = predict_bytes(a, b, sizes=d, network=Network.parse(spec)).to_dict()
        assert {k: row[k] for k in want} == want


def test_the_coded_bytes_are_those_the_engine_sends(rng):
    K, N = 4, 40
    d = rng.integers(1, 200, N)
    ds = load_dataset([rng.bytes(int(s)) for s in d])
    net = Network.parse("master=8,down=1000,multicast")
    rep = run(ds, K=K, epochs=2, seed=3).transitions
    for epoch, r in zip((1, 2), rep, strict=True):
        a, b = (epoch_placement(N, K, seed=3, epoch=e) for e in (epoch - 1, epoch))
        t = predict_bytes(a, b, sizes=d, network=net)
        assert t.predicted_seconds["coded"] == pytest.approx(r.coded_bytes / (8 * 125_000))
        assert r.coded_bytes == r.wire.payload_bytes  # no repairs: what the master sent


def test_a_large_record_sets_the_time():
    # records 0 (900 kB) and 1 (1 kB) swap; the byte counts, not the record counts, set the times
    a, b = placement_from_owner([0, 1, 2], 3), placement_from_owner([1, 0, 2], 3)
    net = Network.parse("master=8,up=8,down=8,multicast")
    t = predict_bytes(a, b, sizes=[900_000, 1_000, 5], network=net)
    assert t.predicted_seconds["exchange"] == pytest.approx(0.9)  # 900 kB at 1 MB/s
    assert t.predicted_seconds["coded"] == pytest.approx(0.9)  # one symbol, as long as the longer
    assert t.predicted_seconds["uncoded"] == pytest.approx(0.901)


def test_predict_bytes_exceptions():
    a, b = placement_from_owner([0, 1], 2), placement_from_owner([1, 0], 2)
    net = Network.parse("up=1,down=1")
    with pytest.raises(ValueError, match="'sizes' must"):
        predict_bytes(a, b, sizes=[1, 2, 3], network=net)
    with pytest.raises(ValueError, match="'sizes' must"):
        predict_bytes(a, b, sizes=[0, 2], network=net)
    with pytest.raises(TypeError, match="'network' must be a Network"):
        predict_bytes(a, b, sizes=[1, 2], network="up=1,down=1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'placement_t' must be a Placement"):
        predict_bytes(None, b, sizes=[1, 2], network=net)
    for bad in ([[1]], [[0, -1], [-1, 0]], [[0, float("nan")], [1, 0]], "pairs"):
        with pytest.raises(ValueError, match="'pair_symbols' must be a 2 x 2 matrix of finite non-negative"):
            transition_times([[0, 1], [1, 0]], record_bytes=1, network=net, coded_symbols=1,
                             lower_bound_symbols=1, pair_symbols=bad)  # fmt: skip
