"""Jobs of peers: every rank trains, and only the workers' exchange moves data (PeerLoader).

The oracle reads the ``.npy`` file with numpy and cuts each epoch's order
(:func:`coded_shuffle.orders.epoch_permutation`, the ``auto`` order at these sizes) with
``np.array_split``; the program (``tests/loader/peer_loader_prog.py``) runs under ``mpiexec -n K`` and
``torchrun --nproc-per-node K``, with no master rank.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.orders import epoch_permutation
from tests.loader.variable_records import byte_cuts, check_variable_batch, write_files

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "loader" / "peer_loader_prog.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None
N, B, SEED = 90, 600, 4

LAUNCHERS = [
    pytest.param(
        "mpi", marks=[pytest.mark.mpi, pytest.mark.skipif(not HAVE_MPI, reason="needs mpiexec and mpi4py")]
    ),
    pytest.param(
        "torch", marks=[pytest.mark.torch, pytest.mark.skipif(not HAVE_TORCH, reason="needs PyTorch")]
    ),
]


def launch(kind: str, K: int, *args: object) -> subprocess.CompletedProcess[str]:
    if kind == "mpi":
        cmd = [str(MPIEXEC), "-n", str(K), sys.executable, "-m", "mpi4py"]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={K}"]
        cmd += ["--monitor-interval=0.5"]
    return subprocess.run(
        [*cmd, str(PROGRAM), kind, *map(str, args)], capture_output=True, text=True, timeout=180, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip


def data(tmp_path: Path) -> np.ndarray:
    rows = np.random.default_rng(7).integers(0, 256, (N, B), dtype=np.uint8)
    np.save(tmp_path / "rows.npy", rows)
    return rows


@pytest.mark.parametrize("kind", LAUNCHERS)
@pytest.mark.parametrize("M", [1, 2])
def test_every_rank_trains_on_its_batch_of_every_epoch(tmp_path, kind, M):
    K, epochs = 3, 3
    rows = data(tmp_path)
    # the same launch first runs a job on files of variable sizes, cut by bytes (with M = 2, of
    # 2 to 6 KiB, each record cut into 2 pieces by its own length)
    sizes = (1, 301) if M == 1 else (2048, 6145)
    files = write_files(tmp_path / "files", 40, np.random.default_rng(8), sizes=sizes)
    # with M = 2 the rows' job runs on racks of 2 and 1 workers whose uplinks to the spine are slow
    # (under mpiexec: torchrun passes the same options to the same loader)
    racks = ["network=up=100,down=100,racks=2+1,rack-up=10"] if M == 2 and kind == "mpi" else []
    files_arg = f"variable={tmp_path / 'files'}"
    proc = launch(kind, K, tmp_path / "rows.npy", tmp_path, epochs, M, files_arg, *racks)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_variable_job(tmp_path, files, K, epochs, M)
    for t in range(epochs):
        batches = np.array_split(np.asarray(epoch_permutation(N, seed=SEED, epoch=t), dtype=np.int64), K)
        for k in range(K):
            got = np.load(tmp_path / f"w{k}_e{t}.npz")
            assert np.array_equal(got["ids"], batches[k]) and np.array_equal(got["records"], rows[batches[k]])
            # the loader's decode (the program's: a record's bytes reversed) made each sample
            assert np.array_equal(got["sample_ids"], batches[k])
            assert got["samples"].tobytes() == b"".join(rows[i].tobytes()[::-1] for i in batches[k])
    reports = json.loads((tmp_path / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == [1, 2] and all(r["verified"] and r["K"] == K for r in reports)
    for r in reports:  # nothing from a master; a worker receives exactly what it misses
        assert r["wire_bytes"] == 0 and r["mode"] == "exchange" and r["storage"] == M
        assert r["max_received_bytes"] == r["download_bound_bytes"] > 0
    if racks:
        check_rack_senders(reports, K, epochs)


def check_rack_senders(reports: list[dict], K: int, epochs: int) -> None:
    """The exchange on racks sent what the engine's senders on them send (each piece, a whole
    record of 600 B here, from the sender :func:`~coded_shuffle.plan.assign_senders_racks` gives
    on the demand), not what the choice blind to the racks sends (its busiest upload differs)."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.network import Network
    from coded_shuffle.orders import OrderSpec
    from coded_shuffle.plan import assign_senders, assign_senders_racks

    net = Network.parse("up=100,down=100,racks=2+1,rack-up=10")
    scheme = scheme_for("exchange", K=K, storage=2, record_bytes=B, peers=True, network=net)
    assert scheme.pieces == 1  # records below 2048 B go whole
    held = [e.held for e in EpochSchedule(N=N, K=K, seed=SEED, spec=OrderSpec("permutation"),
                                          scheme=scheme).epochs(start=0, count=epochs)]  # fmt: skip
    for r, (now, nxt) in zip(reports, zip(held, held[1:], strict=False), strict=True):
        _, wanter, holders, _ = scheme.exchange_plan(now, nxt)
        racked = assign_senders_racks(wanter, holders, K=K, rack=[0, 0, 1], up=100, rack_up=10,
                                      rack_down=10).sender  # fmt: skip
        blind = assign_senders(wanter, holders, K=K).sender
        sent = [B * int(np.bincount(s, minlength=K).max()) for s in (racked, blind)]
        assert r["max_sent_bytes"] == sent[0] != sent[1] and r["exchange_bytes"] == B * wanter.size


def check_variable_job(out: Path, files: list[bytes], K: int, epochs: int, M: int = 1) -> None:
    """Every rank's batch of every epoch: the run of the epoch's order the byte cut gives it, each
    record its file's bytes, never padded; the exchange moved exactly what each rank missed (with
    a storage of ``M = 2`` batches, the pieces it did not store: its download bound)."""
    N, sizes = len(files), np.array([len(f) for f in files])
    for t in range(epochs):
        want = byte_cuts(np.asarray(epoch_permutation(N, seed=SEED, epoch=t)), sizes, K)
        for k in range(K):
            got = np.load(out / f"v{k}_e{t}.npz")
            check_variable_batch(got, want[k], files)
    reports = json.loads((out / "variable.json").read_text())
    assert [r["epoch"] for r in reports] == list(range(1, epochs))
    for t, r in enumerate(reports, start=1):
        assert r["verified"] and r["mode"] == "exchange" and r["wire_bytes"] == 0 and r["storage"] == M
        if M > 1:
            assert r["subpackets"] == 2 and r["records_checked"] == N
            assert r["max_received_bytes"] == r["download_bound_bytes"] > 0
            continue
        old, new = (
            byte_cuts(np.asarray(epoch_permutation(N, seed=SEED, epoch=e)), sizes, K) for e in (t - 1, t)
        )
        missed = [int(sizes[np.setdiff1d(new[k], old[k])].sum()) for k in range(K)]
        assert r["max_received_bytes"] == max(missed)  # the bytes of the records each rank lacked


@pytest.mark.parametrize("kind", LAUNCHERS)
def test_a_rank_that_stops_ends_the_job_of_peers_cleanly(tmp_path, kind):
    data(tmp_path)
    proc = launch(kind, 3, tmp_path / "rows.npy", tmp_path, 4, 1, "stop")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads((tmp_path / f"end_{k}.json").read_text()) for k in range(3)] == [1, 1, 1]
    assert sorted(p.name for p in tmp_path.glob("w*_e*.npz")) == [
        f"w{k}_e{t}.npz" for k in range(3) for t in (0, 1)
    ]
