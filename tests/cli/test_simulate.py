"""Tests of ``coded-shuffle simulate``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.orders import placement_from_owner
from coded_shuffle.plan import plan_delivery
from tests.oracles import brute_bound, permutation_from_spec

REQUIRED = {
    "epoch", "K", "N", "record_bytes", "coded_symbols", "uncoded_symbols", "coded_bytes",
    "uncoded_bytes", "lower_bound", "repairs", "verified", "seconds",
}  # fmt: skip


def test_simulate_json(capsys):
    assert (
        main(["simulate", "-K", "4", "-N", "200", "-B", "32", "--transitions", "3", "--seed", "2", "--json"])
        == 0
    )
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert REQUIRED <= set(r)
        assert r["K"] == 4 and r["N"] == 200 and r["record_bytes"] == 32
        assert r["verified"] is True and r["records_checked"] == 200
        assert r["lower_bound"] <= r["coded_symbols"] <= r["uncoded_symbols"]
        assert r["coded_bytes"] == 32 * r["coded_symbols"]
    assert err == ""  # no progress bar with --json


def test_simulate_table_default_strategy_exact(capsys):
    argv = ["simulate", "-K", "3", "-N", "60", "-B", "8", "--transitions", "2", "--strategy", "exact"]
    assert main(argv) == 0
    out, _ = capsys.readouterr()
    assert "verified" in out and out.count(" yes ") == 2


def test_simulate_defaults_run(capsys):
    assert main(["simulate", "--transitions", "1"]) == 0
    assert "K = 6, N = 6000, record = 1024 B" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["-K", "0"], "--workers must be at least 1"),
        (["-K", "5", "-N", "3"], "--points must be at least --workers (5), not 3"),
        (["-B", "0"], "--record-bytes must be at least 1"),
        (["--transitions", "0"], "expected a positive integer"),
        (["--seed", "-1"], "expected a non-negative integer"),
        (["--strategy", "best"], "invalid choice"),
        (["-N", "1000000000", "-B", "1000"], "at most 16 GiB"),
    ],
)
def test_simulate_exceptions(capsys, argv, message):
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_simulate_table_saving_and_framing(capsys):
    argv = ["simulate", "-K", "4", "-N", "400", "-B", "64", "--transitions", "2", "--seed", "5"]
    assert main([*argv, "--json"]) == 0
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines[1].split("  ")
    cols = [c.strip() for c in header if c.strip()]
    saving = [line.split()[cols.index("uncoded MB") + 1] for line in lines[2:4]]
    expected = [f"{100 * (1 - r['coded_bytes'] / r['uncoded_bytes']):.1f}%" for r in reports]
    assert saving == expected and all(40 < float(s[:-1]) < 60 for s in saving)
    assert any(line.startswith("framing:") for line in lines)
    assert any("docs/wire-format.md" in line for line in lines)


def test_simulate_with_storage_counts_pieces_and_keeps_the_loads_of_rate(capsys):
    from coded_shuffle.matrix import shuffle_matrix
    from coded_shuffle.orders import epoch_placement
    from coded_shuffle.storage import storage_lower_bound

    args = ["-K", "4", "-N", "120", "-B", "3600", "--transitions", "2", "--seed", "3", "--storage", "2"]
    assert main(["simulate", *args, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for r in rows:
        assert r["verified"] and r["storage"] == 2 and r["subpackets"] == 3 and r["piece_bytes"] == 1200
        assert r["coded_bytes"] == 1200 * r["coded_symbols"] and r["records_checked"] == 120
        S = shuffle_matrix(*(epoch_placement(120, 4, seed=3, epoch=e) for e in (r["epoch"] - 1, r["epoch"])))
        assert r["lower_bound"] == storage_lower_bound(S, M=2).pieces
    assert main(["simulate", *args]) == 0
    out = capsys.readouterr().out
    assert "storage = 2 batches" in out and "records cut into 3 pieces of 1200 B" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--storage", "5"], "--storage must be at most K = 4 batches, not 5"),
        (["--storage", "2", "--subpackets", "2"], "--storage cannot be combined with --subpackets"),
        (["--storage", "2", "--mode", "uncoded"], "--storage above 1 applies to --mode coded or exchange"),
        (  # before any transition is simulated (the library's refusal came after the header)
            ["--storage", "2", "--mode", "split", "--network", "master=1000,up=100,down=1000,multicast"],
            "--storage above 1 applies to --mode coded or exchange, not --mode split",
        ),
    ],
)
def test_simulate_refuses_a_bad_storage_in_one_line(capsys, extra, message):
    assert main(["simulate", "-K", "4", "-N", "40", "--transitions", "1", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_orders_with_storage_gives_the_storage_loads(capsys):
    assert main(["orders", "--orders", "naive", "-K", "4", "--shards", "20", "--shard-size", "20",
                 "--storage", "2", "--json"]) == 0  # fmt: skip
    row = json.loads(capsys.readouterr().out)
    assert row["storage"] == 2 and row["lower_bound"] <= row["coded"] <= row["uncoded"]


# ---- on a network: the time bound, each mode's predicted time, and --mode auto


def _times_by_hand(N, K, seed, epoch, B, master, up, down, multicast, coded_bytes):
    """The bound and predictions of coded_shuffle.network's docstring, from the two epochs'
    owners counted here with numpy alone (not through the library's shuffle matrix)."""
    import numpy as np

    from coded_shuffle.orders import epoch_placement

    a = np.asarray(epoch_placement(N, K, seed=seed, epoch=epoch - 1).owner)
    b = np.asarray(epoch_placement(N, K, seed=seed, epoch=epoch).owner)
    moved = a != b
    d = np.bincount(b[moved], minlength=K) * B  # what each worker misses
    o = np.bincount(a[moved], minlength=K) * B  # what only it holds that others need
    rate = {k: v * 1e6 / 8 for k, v in (("master", master), ("up", up), ("down", down))}
    W = int(moved.sum()) * B
    relays = 0 if multicast else coded_bytes / rate["up"]
    out = {
        "exchange": max(d.max() / rate["down"], o.max() / rate["up"]),
        "coded": max(coded_bytes / rate["master"], coded_bytes / rate["down"], relays),
        "uncoded": max(W / rate["master"], d.max() / rate["down"]),
        "split": None,  # without multicast the master's sends and the exchange do not run at once
    }
    if multicast:  # a share a coded: the busiest link's time, least over a grid of shares
        a = np.linspace(0, 1, 100_001)
        links = [a * coded_bytes / rate["master"], (a * coded_bytes + (1 - a) * d.max()) / rate["down"],
                 (1 - a) * o.max() / rate["up"]]  # fmt: skip
        best = float(np.max(links, axis=0).min())
        # chosen only where it saves at least SPLIT_MARGIN (5 %) of the faster half's time
        out["split"] = best if best < min(out["coded"], out["exchange"]) * 0.95 else None
    return out


@pytest.mark.parametrize(
    ("spec", "rates", "chosen"),
    [
        ("master=1000,up=1000,down=1000", (1000, 1000, 1000, False), "exchange"),  # a switch
        ("master=1000,up=100,down=1000,multicast", (1000, 100, 1000, True), "split"),  # the edge
        ("master=10000,up=100,down=1000", (10000, 100, 1000, False), "uncoded"),  # a fast master
    ],
)
def test_simulate_on_a_network_predicts_each_mode_and_auto_takes_the_fastest(capsys, spec, rates, chosen):
    N, K, B = 4000, 8, 1024
    argv = ["simulate", "-K", str(K), "-N", str(N), "-B", str(B), "--transitions", "2", "--json"]
    assert main([*argv, "--network", spec, "--mode", "auto"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith(f"coded-shuffle: mode auto chose {chosen}: predicted ")
    assert len(err.splitlines()) == 1
    for r in map(json.loads, out.splitlines()):
        assert r["mode"] == chosen and r["verified"] and r["network"] == spec
        want = _times_by_hand(N, K, 0, r["epoch"], B, *rates, coded_bytes=r["coded_bytes"])
        got = r["predicted_seconds"]
        split, want_split = got.pop("split"), want.pop("split")
        assert got == pytest.approx(want, rel=1e-12)
        assert split == want_split or split == pytest.approx(want_split, rel=1e-4)  # the grid's step
        if split is not None:
            want["split"] = split
        assert r["choice"] == min(want, key=want.get) == chosen
        assert r["time_bound_seconds"] <= min(want.values()) * (1 + 1e-12)
        assert r["time_gap"] is None  # in process: no network carried the bytes


def test_simulate_on_a_network_prints_the_times_under_the_table(capsys):
    argv = ["simulate", "-K", "4", "-N", "400", "-B", "64", "--transitions", "2", "--no-progress"]
    assert main([*argv, "--network", "master=100,up=100,down=100"]) == 0
    out = capsys.readouterr().out
    assert "mode = coded," in out.splitlines()[0] + ","
    assert "on the network master=100,up=100,down=100, records of 64 B" in out
    assert "  epoch 1: bound " in out and "  epoch 2: bound " in out and "choice exchange: predicted" in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--mode", "auto"], "--mode auto needs --network SPEC"),
        (["--network", "master=1000,up=0,down=1000"], "--network: up=0: a rate must be positive"),
        (["--network", "down=100,bogus=3"], "--network: 'bogus=3': not a part of a SPEC"),
        (["--network", "down=1,racks=2x3,rack-up=1", "--storage", "2"], "racks=2x3: 6 hosts, not the job"),
        (["--network", "down=100", "--subpackets", "2"], "--network applies to whole records"),
    ],
)
def test_simulate_network_exceptions(capsys, argv, message):
    assert main(["simulate", "-K", "4", "-N", "400", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and len(err.strip().splitlines()) == 1


def _owners(N, K, seed, epoch):
    """Worker of each record at ``K`` workers, from the epoch permutation's spec (``K`` divides
    ``N``: batch ``k`` is the ``k``-th run of ``N / K`` records of it)."""
    owner = np.empty(N, dtype=np.int64)
    owner[permutation_from_spec(N, seed=seed, epoch=epoch)] = np.arange(N) // (N // K)
    return owner


@pytest.mark.parametrize("mode", ["coded", "uncoded", "exchange"])
def test_simulate_with_workers_that_come_and_go(capsys, mode):
    """``--workers 4,3,5``: each row against the raw placements of its two epochs: the bound by
    its definition over every ordering, the load of the planner on the K x K' placements (coded)
    or every moved record, the leaving workers' records from the source."""
    N, B, seed, counts = 60, 8, 3, [4, 3, 5]
    argv = ["simulate", "--workers", "4,3,5", "-N", str(N), "-B", str(B), "--seed", str(seed), "--mode", mode]
    assert main([*argv, "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main([*argv, "--no-progress"]) == 0
    out = capsys.readouterr().out.splitlines()
    table = [line.split() for line in out if " -> " in line and "yes" in line]
    assert len(rows) == len(table) == 2
    for t, (r, cells) in enumerate(zip(rows, table, strict=True)):
        K, K2 = counts[t], counts[t + 1]
        a, b = _owners(N, K, seed, t), _owners(N, K2, seed, t + 1)
        S = np.zeros((max(K, K2),) * 2, dtype=np.int64)
        np.add.at(S, (a, b), 1)
        moved, left = int(np.sum(a != b)), int(np.sum(a >= K2))
        pa, pb = placement_from_owner(a, K), placement_from_owner(b, K2)
        load = plan_delivery(pa, pb).n_symbols if mode == "coded" else moved
        assert (r["K_before"], r["K"], r["verified"]) == (K, K2, True)
        assert (r["bound"], r["bound_bytes"], r["symbols"]) == (brute_bound(S), brute_bound(S) * B, load)
        assert r["source_bytes"] == left * B
        assert r["peer_bytes"] == ((moved - left) * B if mode == "exchange" else 0)
        assert cells[:7] == [str(t + 1), str(K), "->", str(K2), str(load), str(brute_bound(S)),
                             f"{load / brute_bound(S):.3f}"]  # fmt: skip


def test_simulate_with_workers_that_come_and_go_and_a_storage(capsys):
    """``--workers 4,3,3 --storage 2``: the change of K a re-cut (its bytes against its bounds and
    the storage at K'), the transition at the same K the scheme's."""
    argv = ["simulate", "--workers", "4,3,3", "-N", "48", "-B", "3072", "--storage", "2", "--seed", "2"]
    assert main([*argv, "--json"]) == 0
    recut, same = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert (recut["K_before"], recut["K_after"], recut["pieces"], recut["pieces_next"]) == (4, 3, 3, 2)
    assert recut["verified"] and recut["source_bytes"] == recut["source_bound"] == 0  # M = 2, one left
    assert recut["peer_bytes"] == recut["download_bound"] > 0 and recut["storage_bytes"] == 2 * 48 * 3072
    assert (same["K_before"], same["K_after"], same["mode"], same["verified"]) == (3, 3, "coded", True)
    assert main([*argv, "--no-progress"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if "yes" in line]
    assert [r[:5] for r in rows] == [["1", "4", "->", "3", "re-cut"], ["2", "3", "->", "3", "coded"]]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--mode", "split"], "--mode split cannot run --workers 4,3"),
        (["--storage", "2", "--mode", "uncoded"], "--storage above 1 with --workers 4,3 takes --mode coded"),
        (["--storage", "4"], "--storage must be at most the fewest workers of --workers 4,3, 3, not 4"),
        (["--subpackets", "2"], "--subpackets cannot be combined with --workers 4,3"),
        (["--simulator", "simgrid"], "--simulator simgrid cannot be combined"),
        (["--transitions", "2"], "--transitions must be one fewer than the 2 worker counts"),
        (["-N", "3"], "--points must be at least --workers (4), not 3"),
    ],
)
def test_simulate_refuses_what_workers_that_come_and_go_cannot_run(capsys, extra, message):
    assert main(["simulate", "--workers", "4,3", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and len(err.strip().splitlines()) == 1
