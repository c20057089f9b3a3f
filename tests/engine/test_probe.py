"""``run --probe``: the rates a job's links reach at its start (``coded_shuffle.cli.runner.probe``),
read from four timed transfers; on shaped links a phase's rate is bounded by physics (the shaper's
rate and bucket), never by a time limit."""

from __future__ import annotations

import json

import pytest

from coded_shuffle.cli import main
from coded_shuffle.cli.runner.probe import ProbedRates
from coded_shuffle.network import Network
from coded_shuffle.transport.mpi import PROBE_PHASES
from tests.engine.test_mpi import needs_mpi, run_mpi, run_peers


def _mbit(nbytes: float, seconds: float) -> float:
    return nbytes * 8 / seconds / 1e6


def test_rates_are_each_phases_busiest_link_over_its_seconds():
    n, K = 2_000_000, 5
    seconds = {"master_all": 0.4, "master_one": 0.05, "ring": 0.8, "incast": 0.02}
    p = ProbedRates(n, K, seconds)
    # by hand: K n bytes on the master's uplink; n on a downlink (the faster reading of the two);
    # n on every uplink in the ring
    assert p.rates() == {
        "master": float(f"{_mbit(K * n, 0.4):.3g}"),
        "up": float(f"{_mbit(n, 0.8):.3g}"),
        "down": float(f"{_mbit(n, 0.02):.3g}"),
    }
    assert p.rates() == {"master": 200.0, "up": 20.0, "down": 800.0}
    net = p.network(multicast=True)
    assert Network.parse(str(net)) == net == Network(down=800.0, master=200.0, up=20.0, multicast=True)
    d = p.to_dict(multicast=True)
    assert d["probe_bytes"] == n and d["phase_seconds"] == seconds and d["network"] == str(net)
    json.dumps(d)


def test_a_job_of_peers_reads_no_master_and_one_peer_reads_nothing():
    peers = ProbedRates(1_000_000, 3, {"ring": 0.08, "incast": 0.008})
    assert peers.rates() == {"master": None, "up": 100.0, "down": 1000.0}
    assert peers.network(multicast=True) == Network(down=1000.0, up=100.0)  # no master to multicast
    alone = ProbedRates(1_000_000, 1, {})
    assert alone.network() is None and alone.to_dict()["network"] is None
    assert alone.line(None) == "probe: no link measured (1 MB a phase)"


def test_the_line_names_the_link_furthest_below_the_stated_network():
    p = ProbedRates(1_000_000, 2, {"master_all": 0.016, "master_one": 0.008, "ring": 0.16, "incast": 0.008})
    assert p.rates() == {"master": 1000.0, "up": 50.0, "down": 1000.0}
    head = "probe: the links reached master=1000,up=50,down=1000 Mbit/s (1 MB a phase; "
    assert p.line(None).startswith(head)
    stated = Network.parse("master=1000,up=100,down=1000")
    assert p.line(stated).endswith("; --network says master=1000,up=100,down=1000: up reached 50% of it")
    near = Network.parse("master=1050,up=52,down=900")
    assert p.line(near).endswith("which they reach")
    assert p.line(Network.parse("down=1000")).endswith("which they reach")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--probe", "0"], "expected a positive integer"),
        (["--probe", "2000000000"], "--probe must be at most 1073741824 bytes a phase, not 2000000000"),
    ],
)
def test_run_refuses_a_probe_it_cannot_take_in_one_line(capsys, argv, message):
    assert main(["run", "-K", "2", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err


def _probe_and_rows(out: str) -> tuple[dict, list[dict]]:
    first, *rest = (json.loads(line) for line in out.splitlines())
    return first["probe"], rest


@pytest.mark.mpi
@needs_mpi
def test_a_paced_master_is_probed_no_faster_than_its_pace_and_the_job_goes_on():
    n, K, mbit = 400_000, 2, 16.0
    proc = run_mpi(K, "--points", "400", "--probe", str(n), "--link-mbps", str(mbit), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    probe, rows = _probe_and_rows(proc.stdout)
    assert list(probe["phase_seconds"]) == list(PROBE_PHASES) and probe["probe_bytes"] == n
    assert [r["epoch"] for r in rows] == [1, 2, 3] and all(r["verified"] for r in rows)
    # The master's sends wait on its bucket: K n bytes cannot leave faster than the pace allows,
    # beyond the bucket's depth (65536 bytes at this rate). A bound from the pacing, not a time limit.
    rate, burst = mbit * 1e6 / 8, 1 << 16
    assert probe["phase_seconds"]["master_all"] >= (K * n - burst) / rate
    assert probe["phase_seconds"]["master_one"] >= (n - burst) / rate
    assert probe["rates_mbit"]["master"] <= mbit * K * n / (K * n - burst) * 1.005  # three digits
    assert Network.parse(probe["network"]) == Network(**{**probe["rates_mbit"]})


@pytest.mark.mpi
@needs_mpi
def test_a_job_of_peers_probes_the_workers_links_alone():
    proc = run_peers(3, "--mode", "exchange", "--points", "300", "--probe", "100000", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    probe, rows = _probe_and_rows(proc.stdout)
    assert list(probe["phase_seconds"]) == ["ring", "incast"] and probe["rates_mbit"]["master"] is None
    assert all(r["verified"] for r in rows)
    args = ("--mode", "exchange", "--points", "300", "--probe", "100000")
    table = run_peers(3, *args, "--network", "up=1,down=1")
    assert table.returncode == 0, table.stderr
    (line,) = [ln for ln in table.stdout.splitlines() if ln.startswith("probe: ")]
    assert "--network says up=1,down=1, which they reach" in line
