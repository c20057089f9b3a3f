"""Racks in the network model (coded_shuffle.network): the SPEC's rack parts, their refusals, and
each mode's time on racks under a spine.

The oracle of the times is the arithmetic of the module docstring done by hand for four workers in
two racks of two, each sending each other worker 10 records of 1000 B: ``d_j = o_i = 30 000 B``,
``In_r = Out_r = 40 000 B`` (2 x 2 x 10 records cross between the racks each way),
``moved_in_r = 60 000 B``, ``W = 120 000 B``, and 60 coded symbols (given, not planned here)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.network import Network, rack_loads, split_time, transition_times

S4 = [[0, 10, 10, 10], [10, 0, 10, 10], [10, 10, 0, 10], [10, 10, 10, 0]]
RACKED = "master=1000,up=1000,down=1000,racks=2x2,rack-up=100,rack-down=200"


def _bps(mbit: float) -> float:
    return mbit * 1e6 / 8


def _times(spec: str, S=S4, coded: float = 60):
    return transition_times(
        S, record_bytes=1000, network=Network.parse(spec), coded_symbols=coded, lower_bound_symbols=40
    )


@pytest.mark.parametrize(
    "spec",
    [
        "up=100,down=1000,racks=4x8,rack-up=400,rack-down=400",
        "master=1000,up=100,down=1000,racks=8+8+4,rack-up=100,rack-down=250",
        "master=1000,up=100,down=1000,multicast,snooping,racks=2x16,rack-up=400,rack-down=400,spine-multicast",
        "master=1000,down=1000,multicast,racks=1x8,rack-up=1000,rack-down=1000",
        "up=1,down=1,racks=1+2+3,rack-up=0.5,rack-down=2.5",
    ],
)
def test_a_rack_spec_round_trips(spec):
    n = Network.parse(spec)
    assert str(n) == spec and Network.parse(str(n)) == n
    assert (
        n.workers == sum(n.racks) and n.rack_of().tolist() == np.repeat(range(len(n.racks)), n.racks).tolist()
    )


def test_the_rack_parts_read_as_written():
    n = Network.parse("up=10,down=100,racks=3x4,rack-up=50")
    assert (n.racks, n.rack_up, n.rack_down, n.spine_multicast) == ((4, 4, 4), 50.0, 50.0, False)
    assert Network.parse("up=1,down=1,racks=5+3,rack-up=1,rack-down=3").racks == (5, 3)
    assert Network(down=1, up=1, racks=[2, 2], rack_up=1) == Network.parse("up=1,down=1,racks=2x2,rack-up=1")


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("up=1,down=1,racks=4x0,rack-up=1", "--network: racks=4x0: racks are NxH"),
        ("up=1,down=1,racks=2+0,rack-up=1", "--network: racks=2+0: racks are NxH"),
        ("up=1,down=1,racks=two,rack-up=1", "--network: racks=two: racks are NxH"),
        ("up=1,down=1,racks=2x2", "--network: racks need rack-up=R"),
        ("up=1,down=1,rack-up=1", "--network: rack-up needs racks=NxH"),
        ("up=1,down=1,rack-down=1", "--network: rack-down needs racks=NxH"),
        ("up=1,down=1,racks=2x2,rack-up=0", "--network: rack-up=0: a rate must be positive"),
        ("up=1,down=1,racks=2x2,rack-up=1,rack-down=0", "--network: rack-down=0: a rate must be positive"),
        ("up=1,down=1,racks=2x2,racks=4,rack-up=1", "--network: racks given twice"),
        ("up=1,down=1,racks=2x2,rack-up=1,rack-up=2", "--network: rack-up given twice"),
        (
            "master=1,up=1,down=1,multicast,racks=2x2,rack-up=1",
            "--network: multicast across racks needs spine-multicast",
        ),
        (
            "master=1,up=1,down=1,racks=2x2,rack-up=1,spine-multicast",
            "--network: spine-multicast needs multicast",
        ),
        ("master=1,down=1,multicast,spine-multicast", "--network: spine-multicast needs racks=NxH"),
        ("up=1,down=1,rack=4", "--network: 'rack=4': not a part of a SPEC"),
    ],
)
def test_a_rack_spec_that_does_not_parse_names_the_part(spec, words):
    with pytest.raises(ValueError, match=re.escape(words)) as err:
        Network.parse(spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: Network(down=1, racks=(2, 0), rack_up=1),
            ValueError,
            r"Argument 'racks' must be hosts a rack",
        ),
        (lambda: Network(down=1, racks=(), rack_up=1), ValueError, r"Argument 'racks' must be hosts a rack"),
        (lambda: Network(down=1, racks="2x2", rack_up=1), TypeError, r"Argument 'racks' must be a sequence"),
        (
            lambda: Network(down=1, racks=(2, 2.0), rack_up=1),
            TypeError,
            r"Argument 'racks' must be a sequence",
        ),
        (lambda: Network(down=1, racks=(2, 2)), TypeError, r"Argument 'rack_up' must be a number of Mbit/s"),
        (
            lambda: Network(down=1, racks=(2,), rack_up=0),
            ValueError,
            r"Argument 'rack_up' must be a positive",
        ),
        (
            lambda: Network(down=1, racks=(2,), rack_up=1, rack_down=-1),
            ValueError,
            r"'rack_down' must be a posi",
        ),
        (lambda: Network(down=1, rack_up=1), ValueError, r"Argument 'rack_up' applies with racks only"),
        (lambda: Network(down=1, rack_up=0), ValueError, r"Argument 'rack_up' applies with racks only"),
        (lambda: Network(down=1, rack_down=1), ValueError, r"Argument 'rack_down' applies with racks only"),
        (
            lambda: Network(down=1, master=1, multicast=True, racks=(1, 1), rack_up=1),
            ValueError,
            r"Argument 'spine_multicast' must be True with multicast across racks",
        ),
        (
            lambda: Network(down=1, master=1, racks=(1, 1), rack_up=1, spine_multicast=True),
            ValueError,
            r"Argument 'spine_multicast' must be False without multicast",
        ),
        (
            lambda: Network(down=1, racks=(2,), rack_up=1, spine_multicast=1),
            TypeError,
            r"Argument 'spine_multicast' must be a bool",
        ),
        # the racks must hold the transition's workers
        (
            lambda: _times("up=1,down=1,racks=2x4,rack-up=1"),
            ValueError,
            r"Argument 'network' must have racks of K = 4 hosts in all, not 8 \(racks=2x4\)\.",
        ),
        (
            lambda: rack_loads(S4, racks=(2, 3)),
            ValueError,
            r"Argument 'racks' must hold the K = 4 workers, each rack at least 1, not \(2, 3\)\.",
        ),
        (lambda: rack_loads(S4, racks=(4, 0)), ValueError, r"Argument 'racks' must hold the K = 4 workers"),
        (lambda: rack_loads(S4, racks=None), TypeError, r"Argument 'racks' must be a sequence of ints"),
        (lambda: rack_loads(S4, racks=(2.0, 2)), TypeError, r"Argument 'racks' must be a sequence of ints"),
        (
            lambda: split_time(1.0, 0.0, 0.0, master=1, up=1, down=1, multicast=True, rack_up=1),
            TypeError,
            r"Argument 'rack_down' must be a number",
        ),
        (
            lambda: split_time(
                1.0, 0.0, 0.0, master=1, up=1, down=1, multicast=True, rack_up=1, rack_down=1, rack_only=-1
            ),
            ValueError,
            r"Argument 'rack_only' must be a non-negative",
        ),
    ],
)
def test_network_racks_exceptions(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_each_mode_on_racks_by_hand_and_the_choice_changes():
    m = u = w = _bps(1000)
    U, D = _bps(100), _bps(200)
    t = _times(RACKED)
    by_hand = {
        "exchange": max(30_000 / w, 30_000 / u, 40_000 / U, 40_000 / D),
        "coded": max(60_000 / m, 60_000 / w, 60_000 / u, 60_000 / D, 60_000 / U),  # a chain in rack order
        "uncoded": max(120_000 / m, 30_000 / w, 60_000 / D),
    }
    for mode, seconds in by_hand.items():
        assert t.predicted_seconds[mode] == pytest.approx(seconds, rel=1e-12)
    assert t.binding_links == {
        "exchange": "rack-up",
        "coded": "rack-up",
        "uncoded": "rack-down",
        "split": None,
    }
    bound = max(30_000 / w, 30_000 / (u + m), 40_000 / D, 40_000 / (min(U, 2 * u) + m))
    assert t.bound_seconds == pytest.approx(bound, rel=1e-12) and t.bound_seconds == 40_000 / D
    # on one switch the exchange wins; under slow rack uplinks the master's unicast does
    assert _times("master=1000,up=1000,down=1000").choice == "exchange" and t.choice == "uncoded"


def test_multicast_through_a_replicating_spine_crosses_each_rack_once():
    spec = "master=1000,up=1000,down=1000,multicast,racks=2x2,rack-up=100,rack-down=200,spine-multicast"
    t = _times(spec)
    assert t.predicted_seconds["coded"] == pytest.approx(60_000 / _bps(200), rel=1e-12)
    assert t.binding_links["coded"] == "rack-down"
    # with snooping a rack's downlink carries the pairs with a member in it: 5 of the 6 pairs' 10
    snoop = _times(spec.replace("multicast,", "multicast,snooping,"))
    assert snoop.predicted_seconds["coded"] == pytest.approx(50_000 / _bps(200), rel=1e-12)


def test_the_split_on_racks_is_the_least_over_every_share():
    spec = "master=1000,up=100,down=1000,multicast,racks=2x2,rack-up=100,rack-down=400,spine-multicast"
    t = _times(spec, coded=90)
    m, u, w, U, D = _bps(1000), _bps(100), _bps(1000), _bps(100), _bps(400)
    a = np.linspace(0, 1, 100001)
    links = [
        a * 90_000 / m,
        (a * 90_000 + (1 - a) * 30_000) / w,
        (1 - a) * 30_000 / u,
        (1 - a) * 40_000 / U,
        (a * 90_000 + (1 - a) * 40_000) / D,
    ]
    best = np.max(links, axis=0).min()
    assert t.split_seconds is not None and t.split_seconds == pytest.approx(best, rel=1e-4)
    assert t.split_seconds <= best * (1 + 1e-12) and "rack-up" in t.binding_links["split"]


def test_one_rack_as_fast_as_its_hosts_is_the_switch():
    S = [[0, 3, 4], [5, 0, 1], [2, 2, 0]]
    flat = transition_times(
        S,
        record_bytes=100,
        network=Network.parse("master=10,up=5,down=7"),
        coded_symbols=9,
        lower_bound_symbols=6,
    )
    one = transition_times(
        S,
        record_bytes=100,
        network=Network.parse("master=10,up=5,down=7,racks=1x3,rack-up=1000"),
        coded_symbols=9,
        lower_bound_symbols=6,
    )
    assert one.bound_seconds == flat.bound_seconds
    fin = {k: v for k, v in flat.predicted_seconds.items() if math.isfinite(v)}
    assert {k: one.predicted_seconds[k] for k in fin} == fin


@pytest.mark.parametrize("command", ["simulate", "rate", "run"])
def test_racks_that_do_not_add_up_are_one_line(command, capsys):
    argv = [command, "-K", "4", "-N", "40", "-B", "64", "--network", "up=10,down=10,racks=2x3,rack-up=5"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["coded-shuffle: error: --network: racks=2x3: 6 hosts, not the job's 4 workers"]


def test_simulate_auto_on_racks_takes_the_fastest_by_the_rack_links(capsys):
    argv = [
        "simulate",
        "-K",
        "4",
        "-N",
        "400",
        "-B",
        "1000",
        "--transitions",
        "1",
        "--json",
        "--mode",
        "auto",
    ]
    assert main([*argv, "--network", RACKED]) == 0
    out, err = capsys.readouterr()
    row = json.loads(out.splitlines()[0])
    assert row["verified"] and row["network"] == RACKED and row["mode"] == row["choice"]
    assert err.startswith(f"coded-shuffle: mode auto chose {row['choice']}")
    assert "rack-" in row["binding_links"]["exchange"] and row["choice"] != "exchange"


def test_the_exchange_on_racks_chooses_its_senders_by_the_rack_links():
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import run
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.engine.schemes import scheme_for
    from coded_shuffle.orders import OrderSpec
    from coded_shuffle.plan import assign_senders, assign_senders_racks, rack_link_loads

    net = Network.parse("up=100,down=100,racks=2x2,rack-up=50")
    scheme = scheme_for("exchange", K=4, storage=2, record_bytes=64, network=net)
    sched = EpochSchedule(N=400, K=4, seed=1, spec=OrderSpec(), scheme=scheme)
    e0 = sched.epoch(0)
    e1 = sched.epoch(1, e0)
    _, wanter, holders, chosen = scheme.exchange_plan(e0.held, e1.held)
    want = assign_senders_racks(wanter, holders, K=4, rack=[0, 0, 1, 1], up=100, rack_up=50, rack_down=50)
    assert chosen.sender.tolist() == want.sender.tolist()
    blind = assign_senders(wanter, holders, K=4)
    cross = [rack_link_loads(wanter, a.sender, rack=[0, 0, 1, 1])["cross"] for a in (chosen, blind)]
    assert cross[0] < cross[1]
    # the deliveries run with them and are verified; on one switch nothing changes
    ds = load_dataset(np.random.default_rng(0).integers(0, 256, (400, 64), dtype=np.uint8))
    rep = run(ds, K=4, epochs=2, seed=1, storage=2, mode="exchange", network=net)
    assert rep.verified and len(rep.transitions) == 2
    flat = scheme_for("exchange", K=4, storage=2, record_bytes=64, network=Network.parse("up=1,down=1"))
    assert flat.exchange_plan(e0.held, e1.held)[3].sender.tolist() == blind.sender.tolist()


def test_simulate_and_run_take_a_storage_on_racks_in_every_mode(capsys):
    """``simulate`` runs each mode of a storage on racks, verified, with the times the engine gives
    (the coded broadcast's through the racks' links: its payload over the slowest link it crosses,
    without multicast each rack's uplink too); ``run`` takes it before launch (nothing launched
    here), ``--mode auto`` choosing the mode of least predicted time."""
    from coded_shuffle.cli import build_parser
    from coded_shuffle.cli.job import check_job
    from coded_shuffle.cli.run import _auto
    from coded_shuffle.engine.schedule import predicted_times
    from coded_shuffle.orders import OrderSpec

    argv = ["simulate", "-K", "4", "-N", "400", "-B", "256", "--storage", "2", "--transitions", "1", "--json"]
    racks = "master=100,up=100,down=100,racks=2x2,rack-up=50,rack-down=80"
    for mode in ("exchange", "coded", "auto"):
        assert main([*argv, "--mode", mode, "--network", racks]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        assert row["verified"] and row["mode"] != "auto"
        if row["mode"] == "coded":
            assert row["predicted_seconds"]["coded"] == pytest.approx(row["payload_bytes"] / _bps(50))
    times = predicted_times(400, 4, seed=0, spec=OrderSpec(), epoch=0, record_bytes=256,
                            network=Network.parse(racks), storage=2)  # fmt: skip
    assert row["mode"] == times.choice == min(times.predicted_seconds, key=times.predicted_seconds.get)
    args = build_parser("run").parse_args(["run", "-K", "4", "-N", "400", "-B", "256", "--storage", "2",
                                           "--mode", "auto", "--network", racks])  # fmt: skip
    assert _auto(args, check_job(args, workers=4)).mode == times.choice
    capsys.readouterr()


def test_rate_on_racks_gives_the_rack_links(capsys):
    from coded_shuffle.matrix import shuffle_matrix
    from coded_shuffle.orders import epoch_placement

    spec = "master=1000,up=1000,down=1000,racks=2x4,rack-up=250,rack-down=1000"
    assert main(["rate", "-K", "8", "-N", "800", "--network", spec, "-B", "1024", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    S = shuffle_matrix(*(epoch_placement(800, 8, seed=0, epoch=e) for e in (0, 1)))
    want = transition_times(S, record_bytes=1024, network=Network.parse(spec), coded_symbols=row["coded"],
                            lower_bound_symbols=row["lower_bound"])  # fmt: skip
    assert row["predicted_seconds"] == want.to_dict()["predicted_seconds"] and row["network"] == spec
    assert row["binding_links"]["exchange"] == "rack-up" and row["choice"] == "uncoded"
    # the exchange's rack uplink by hand: the records leaving the busier rack, over 250 Mbit/s
    out = max(int(S[:4, 4:].sum()), int(S[4:, :4].sum())) * 1024
    assert row["predicted_seconds"]["exchange"] == pytest.approx(out / (250e6 / 8), rel=1e-12)


@pytest.mark.mpi
def test_the_mpi_job_sends_by_the_rack_aware_senders(capsys):
    """One MPI job of the exchange on racks with a storage of 2: its busiest sender sends what the
    rack-aware senders give it in process, not what the rack-blind ones do."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    if not (Path(sys.executable).parent / "mpiexec").exists() or importlib.util.find_spec("mpi4py") is None:
        pytest.skip("needs mpiexec beside the interpreter and mpi4py")
    job = ["-K", "4", "-N", "400", "-B", "4096", "--storage", "2", "--mode", "exchange", "--transitions", "1"]
    racks = ["--network", "up=100,down=100,racks=2x2,rack-up=10"]
    proc = subprocess.run(
        [sys.executable, "-m", "coded_shuffle", "run", *job, *racks, "--json", "-"],
        capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1], check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    wire = json.loads(proc.stdout.splitlines()[0])
    sent = {}
    for name, extra in (("aware", racks), ("blind", [])):
        assert main(["simulate", *job, *extra, "--json"]) == 0
        sent[name] = json.loads(capsys.readouterr().out.splitlines()[0])["max_sent_bytes"]
    assert wire["verified"] and wire["max_sent_bytes"] == sent["aware"] != sent["blind"]


def test_simulate_gives_the_exchange_on_racks_in_bytes_on_records_of_many_sizes(tmp_path, capsys):
    """Records of 40 to 900 B (stored whole, each on 2 of 4 workers in racks of 3 and 1): the report's
    loads of each link, in bytes and in units, are those counted here from the two placements
    (what each worker holds, what it must hold next) and the senders, each a holder of what it
    sends; its exchange time is the busiest link's bytes over its rate, not under the bound."""
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.engine.schemes import scheme_for
    from coded_shuffle.orders import OrderSpec

    sizes = np.random.default_rng(5).integers(40, 900, 48)
    (tmp_path / "var").mkdir()
    for i, n in enumerate(sizes.tolist()):
        (tmp_path / "var" / f"{i:03d}.bin").write_bytes(bytes(n))
    spec = "master=100,up=100,down=100,racks=3+1,rack-up=10"
    argv = ["simulate", "-K", "4", "--data", str(tmp_path / "var"), "--storage", "2", "--mode",
            "exchange", "--network", spec, "--order", "permutation", "--seed", "3", "--transitions", "1",
            "--json"]  # fmt: skip
    assert main(argv) == 0
    row = json.loads(capsys.readouterr().out.splitlines()[0])
    assert row["verified"] and row["mode"] == "exchange" and row["storage"] == 2
    scheme = scheme_for("exchange", K=4, storage=2, sizes=sizes, network=Network.parse(spec))
    assert scheme.pieces == 1  # whole records: a piece is a record
    sched = EpochSchedule(N=48, K=4, seed=3, spec=OrderSpec("permutation"), scheme=scheme)
    e0 = sched.epoch(0)
    e1 = sched.epoch(1, e0)
    now = [set(e0.held.held_by(k).tolist()) for k in range(4)]
    nxt = [set(e1.held.held_by(k).tolist()) for k in range(4)]
    units, wanter, _, assigned = scheme.exchange_plan(e0.held, e1.held)
    pairs = zip(units.tolist(), wanter.tolist(), strict=True)
    sender = dict(zip(pairs, assigned.sender.tolist(), strict=True))
    assert sorted(sender) == sorted((u, j) for j in range(4) for u in nxt[j] - now[j])  # each missing once
    rack = [0, 0, 0, 1]
    want = {k: [0] * n for k, n in (("uploads", 4), ("downloads", 4), ("rack_up", 2), ("rack_down", 2))}
    want |= {f"{k}_bytes": [0] * len(v) for k, v in want.items()}
    want |= {"cross": 0, "cross_bytes": 0}
    for (u, j), s in sender.items():
        assert u in now[s] and u not in now[j]  # a holder sends it to a worker without it
        for suffix, b in (("", 1), ("_bytes", int(sizes[u]))):
            want["uploads" + suffix][s] += b
            want["downloads" + suffix][j] += b
            if rack[s] != rack[j]:
                want["rack_up" + suffix][rack[s]] += b
                want["rack_down" + suffix][rack[j]] += b
                want["cross" + suffix] += b
    assert row["rack_loads"] == want and want["cross"] > 0
    port, rack_link = 100e6 / 8, 10e6 / 8
    ports = max(*want["downloads_bytes"], *want["uploads_bytes"]) / port
    busiest = max(ports, max(want["rack_up_bytes"]) / rack_link, max(want["rack_down_bytes"]) / rack_link)
    assert row["predicted_seconds"]["exchange"] == pytest.approx(busiest, rel=1e-12)
    # the bound: a downlink's bytes, and each rack's cuts (claim 13) of the pieces' holder sets
    holders = {u: {k for k in range(4) if u in now[k]} for u, _ in sender}
    cuts = [max(want["downloads_bytes"]) / port]
    for r, hosts in ((0, 3), (1, 1)):
        into = sum(int(sizes[u]) for u, j in sender if rack[j] == r and all(rack[h] != r for h in holders[u]))
        out = sum(int(sizes[u]) for u, j in sender if rack[j] != r and all(rack[h] == r for h in holders[u]))
        cuts += [into / rack_link, out / (min(rack_link, hosts * port) + port)]
    assert row["time_bound_seconds"] == pytest.approx(max(cuts), rel=1e-12) and max(cuts) <= busiest


def test_the_exchange_on_racks_chooses_its_senders_in_bytes():
    """With pieces of many sizes the engine's exchange on racks takes the senders chosen in bytes
    (checked against a brute force in tests/plan/test_exchange_racks.py), whose busiest upload,
    counted here piece by piece, is below that of the choice on counts of pieces."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.orders import OrderSpec
    from coded_shuffle.plan import assign_senders_racks

    sizes = np.random.default_rng(5).integers(2048, 20481, 60)
    net = Network.parse("up=100,down=1000,racks=2x2,rack-up=100")  # the uploads the busiest links
    scheme = scheme_for("exchange", K=4, storage=2, sizes=sizes, network=net)
    schedule = EpochSchedule(N=60, K=4, seed=1, spec=OrderSpec(), scheme=scheme)
    e0 = schedule.epoch(0)
    e1 = schedule.epoch(1, e0)
    units, wanter, holders, chosen = scheme.exchange_plan(e0.held, e1.held)
    d = scheme.holding.unit_lengths[units]
    kw = {"K": 4, "rack": [0, 0, 1, 1], "up": 100, "rack_up": 100, "rack_down": 100}
    want = assign_senders_racks(wanter, holders, sizes=d, **kw)
    assert chosen.sender.tolist() == want.sender.tolist()
    counts = assign_senders_racks(wanter, holders, **kw)
    busiest = [int(np.bincount(a.sender, weights=d, minlength=4).max()) for a in (chosen, counts)]
    assert busiest[0] < busiest[1]
