"""The master's broadcast as UDP multicast datagrams (``coded_shuffle.transport.multicast``,
``run --multicast``), in network namespaces of their own (``unshare -n``): only their loopback
carries the datagrams, to groups of 239.0.0.0/8, and nothing outside them changes."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coded_shuffle.cli import main
from coded_shuffle.transport.multicast import parse_group

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
TIMEOUT = 180


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (CAP_NET_ADMIN) for a network namespace of its own"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs '{tool}' (iproute2 / util-linux) on PATH"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, timeout=30)
    return f"cannot unshare a network namespace: {probe.stderr.strip()}" if probe.returncode else None


MISSING = _missing()
needs_netns = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
needs_mpi = pytest.mark.skipif(
    not MPIEXEC.exists() or importlib.util.find_spec("mpi4py") is None, reason="needs mpiexec and mpi4py"
)

#: The shell that readies a private namespace's loopback for multicast before the command runs.
SETUP = "ip link set lo up && ip link set lo multicast on && ip route add 239.0.0.0/8 dev lo && "


def in_namespace(command: str, *, setup: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{MPIEXEC.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    script = (SETUP if setup else "ip link set lo up && ") + command
    return subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT, env=env, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("239.1.2.3", "is not GROUP:PORT"),
        ("10.0.0.1:5000", "is not an IPv4 multicast group"),
        ("239.1.2.x:5000", "is not an IPv4 address"),
        ("239.1.2.3:0", "the port must be 1 to 65535"),
        ("239.1.2.3:70000", "the port must be 1 to 65535"),
    ],
)
def test_a_group_that_does_not_parse_is_named(text, message):
    with pytest.raises(ValueError, match=message):
        parse_group(text)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--multicast", "10.0.0.1:5000"], "--multicast: '10.0.0.1' is not an IPv4 multicast group"),
        (["--multicast", "239.1.1.1:5000", "--mode", "exchange"], "--multicast carries the master's coded"),
        (["--datagram-bytes", "1000"], "--datagram-bytes applies with --multicast only"),
        (["--multicast", "239.1.1.1:5000", "--datagram-bytes", "10"], "--datagram-bytes must be 21 to 65507"),
        (["--multicast-scope", "all"], "--multicast-scope applies with --multicast only"),
        (
            ["--multicast", "239.255.255.254:5000", "--multicast-scope", "receivers"],
            "leaves no room for the 4 groups of 2 workers in its /8; take a lower group, at most "
            "239.255.255.252",
        ),
    ],
)
def test_run_refuses_a_multicast_it_cannot_do_in_one_line(capsys, argv, message):
    assert main(["run", "-K", "2", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and len(err.strip().splitlines()) == 1


@pytest.mark.netns
@needs_netns
def test_datagrams_deliver_frames_and_a_lost_one_empties_its_frame():
    proc = in_namespace(f"{sys.executable} tests/transport/multicast_prog.py", setup=False)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def _rows(proc: subprocess.CompletedProcess[str]) -> list[dict]:
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


@pytest.mark.netns
@pytest.mark.mpi
@needs_netns
@needs_mpi
def test_a_job_over_multicast_repairs_what_is_lost_and_says_when_all_was():
    # the test-only entry of the program, which takes --multicast-drop (a hook, not an option)
    prog = f"{sys.executable} -m mpi4py -m coded_shuffle.mpi_faults --points 3000 --record-bytes 512 --json -"
    rows = _rows(in_namespace(f"mpiexec -n 4 {prog} --multicast 239.77.0.2:6100"))
    assert [r["epoch"] for r in rows] == [1, 2, 3] and all(r["verified"] for r in rows)
    # every datagram a worker receives is dropped with probability 0.05: the master sends each
    # worker the bytes it lacks again, over MPI, so no frame is rejected and no record re-sent
    lossy = in_namespace(f"mpiexec -n 4 {prog} --multicast 239.77.0.2:6101 --multicast-drop 0.05")
    rows = _rows(lossy)
    assert all(r["verified"] for r in rows)
    assert all(r["frames_rejected"] == r["repairs"] == 0 for r in rows)
    resent = [r["repair_bytes"] for r in rows]  # a twentieth of the 3 workers' frames, about
    assert all(0 < n < 3 * 0.15 * (r["wire_bytes"] - n) for n, r in zip(resent, rows, strict=True)), resent
    # every datagram lost: every worker's frames come again over MPI, and one line says so
    lost = in_namespace(f"mpiexec -n 4 {prog} --transitions 1 --multicast 239.77.0.2:6102 --multicast-drop 1")
    (row,) = _rows(lost)
    assert row["verified"] and row["repair_bytes"] == 3 * (row["wire_bytes"] - row["repair_bytes"])
    warned = [line for line in lost.stderr.splitlines() if "warning" in line]
    assert warned == [
        "coded-shuffle run: warning: epoch 1: every multicast frame was lost on every worker; the records "
        "came by the repairs, over MPI"
    ]


@pytest.mark.netns
@pytest.mark.mpi
@needs_netns
@needs_mpi
def test_a_lost_datagram_costs_its_own_bytes_again_not_its_frame():
    """Three workers in scoped groups drop a twentieth of their datagrams: each gets every byte it
    reads, and the master sends again exactly the bytes they dropped (counted on both sides)."""
    prog = ROOT / "tests" / "transport" / "multicast_link_prog.py"
    proc = in_namespace(f"mpiexec -n 4 {sys.executable} -m mpi4py {prog} 239.77.0.30:6700 0.05 receivers")
    assert proc.returncode == 0, proc.stderr[-2000:]
    resent, dropped = (int(v) for v in proc.stdout.split()[1:3])
    assert 0 < resent <= 2 * dropped


@pytest.mark.netns
@pytest.mark.mpi
@needs_netns
@needs_mpi
def test_a_host_without_a_route_for_the_group_is_refused_in_one_line():
    run = f"{sys.executable} -m coded_shuffle run -K 2 --points 300 --multicast 239.77.0.3:6200"
    proc = in_namespace(run, setup=False)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("coded-shuffle run: error: --multicast: rank 0: "), lines
    assert "no route" in lines[0]


@pytest.mark.netns
@pytest.mark.mpi
@needs_netns
@needs_mpi
def test_the_mpi_loader_over_multicast_gives_every_worker_its_rows(tmp_path):
    import numpy as np

    from coded_shuffle.orders import epoch_placement

    N, K, seed, epochs = 3000, 3, 5, 3
    X = np.random.default_rng(0).integers(0, 256, (N, 96), dtype=np.uint8)
    np.save(tmp_path / "rows.npy", X)
    prog = ROOT / "tests" / "loader" / "mpi_loader_prog.py"
    cmd = f"CS_MULTICAST=239.77.0.5:6400 mpiexec -n {K + 1} {sys.executable} -m mpi4py {prog} "
    proc = in_namespace(cmd + f"{tmp_path / 'rows.npy'} {tmp_path} {epochs} 0 {seed} permutation none")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for t in range(epochs):
        owner = np.asarray(epoch_placement(N, K, seed=seed, epoch=t).owner)
        for k in range(K):
            got = np.load(tmp_path / f"w{k}_e{t}.npz")
            assert np.array_equal(np.sort(got["ids"]), np.flatnonzero(owner == k))  # in epoch order
            assert np.array_equal(got["records"], X[got["ids"]])
    reports = json.loads((tmp_path / "reports.json").read_text())
    assert len(reports) == epochs - 1 and all(r["verified"] for r in reports)
    # outside a namespace with a route, every rank refuses, naming the first rank that cannot
    bare = in_namespace(cmd + f"{tmp_path / 'rows.npy'} {tmp_path} 2 0 {seed} permutation none", setup=False)
    assert bare.returncode != 0 and "Argument 'multicast': rank 0: " in bare.stderr


@pytest.mark.netns
@pytest.mark.mpi
@needs_netns
@needs_mpi
def test_a_split_over_multicast_delivers_both_halves_repairs_what_is_lost_and_auto_chooses_it():
    edge = "master=1000,up=300,down=1000,multicast"  # K = 3: a split pays above 5 % here
    run = f"{sys.executable} -m coded_shuffle run -K 3 --points 3000 -B 512 --json - --network {edge}"
    scoped = "--multicast-scope receivers"  # a group per pair of workers, on the one loopback
    rows = _rows(in_namespace(f"{run} --mode split --multicast 239.77.0.6:6500 --link-mbps 400 {scoped}"))
    assert [r["epoch"] for r in rows] == [1, 2, 3] and all(r["verified"] for r in rows)
    moved_b = [r["uncoded_symbols"] * 512 for r in rows]
    for r, moved in zip(rows, moved_b, strict=True):
        # the workers exchanged part of the moved records, the master coded the rest
        assert r["mode"] == "split" and 0 < r["exchange_bytes"] < moved and 0 < r["payload_bytes"] < moved
        assert r["choice"] == "split" and 0 < r["split_coded_share"] < 1
    # datagrams dropped on arrival: their bytes come again over MPI
    prog = f"{sys.executable} -m mpi4py -m coded_shuffle.mpi_faults --points 3000 -B 512 --json -"
    lossy = _rows(in_namespace(
        f"mpiexec -n 4 {prog} --mode split --network {edge} --multicast 239.77.0.6:6502 --multicast-drop 0.05"
    ))  # fmt: skip
    assert all(r["verified"] for r in lossy) and all(r["repair_bytes"] > 0 == r["repairs"] for r in lossy)
    # --mode auto on that network chooses the split, and says so in one line
    auto = in_namespace(f"{run} --mode auto --multicast 239.77.0.6:6501 --link-mbps 400 --transitions 1")
    (row,) = _rows(auto)
    assert row["mode"] == "split" and row["verified"]
    assert [ln for ln in auto.stderr.splitlines() if "auto chose" in ln] == [
        f"coded-shuffle: mode auto chose split: predicted {row['predicted_seconds']['split']:.3g} s against "
        f"coded {row['predicted_seconds']['coded']:.3g} s, on {edge}"
    ]
