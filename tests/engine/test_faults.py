"""Faults end the whole MPI job within seconds, with one line that says why (docs/mpi.md, "Failures").

Each test starts a job, makes one fault, and measures how long until every process of the job
is gone; the processes are found by a seed no other job uses, in their command lines.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "mpi" / "shuffle.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
pytestmark = [
    pytest.mark.mpi,
    pytest.mark.skipif(not HAVE_MPI, reason="needs mpiexec beside the interpreter and mpi4py"),
]


def job_pids(marker: str) -> list[int]:
    """Pids of the processes whose command line holds ``marker`` (this test's own left out)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = (Path("/proc") / entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in cmdline:
            out.append(int(entry))
    return out


def wait_gone(marker: str, limit: float = 30.0) -> float:
    """Seconds until no process of the job is left (fails after ``limit``)."""
    t0 = time.monotonic()
    while job_pids(marker):
        if time.monotonic() - t0 > limit:
            for pid in job_pids(marker):
                os.kill(pid, signal.SIGKILL)
            pytest.fail(f"processes of the job still running after {limit} s")
        time.sleep(0.05)
    return time.monotonic() - t0


def start_run(seed: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", "2", "--points", "20000", "-B", "4096",
           "--transitions", "200", "--seed", seed, *extra]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def first_row(proc: subprocess.Popen[str]) -> None:
    """Wait until the job has printed its first row (it runs), or fail."""
    assert proc.stdout is not None
    for _ in range(3):  # the header line, the column names, the first transition
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signal_to_run_ends_every_rank(sig):
    seed = str(700_001 + int(sig))
    proc = start_run(seed)
    try:
        first_row(proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + int(sig)
        assert f"stopped by {signal.Signals(sig).name}" in err
        assert "BAD TERMINATION" not in out  # MPICH's reports go to standard error
        assert wait_gone(seed) < 5.0
    finally:
        proc.kill()


def test_sigkill_to_run_ends_every_rank_through_the_watchdog():
    seed = "700101"
    proc = start_run(seed)
    try:
        first_row(proc)
        proc.kill()  # no handler runs: the ranks see that their launcher is gone
        proc.wait(10)
        assert wait_gone(seed) < 5.0
    finally:
        proc.kill()


@pytest.mark.parametrize("rank", [0, 2])
def test_frozen_rank_ends_the_job_with_one_line_naming_it(rank):
    """A rank that stops answering (SIGSTOP) is named, and by no one else, within the timeouts.

    A frozen worker is named by the master (it waits 3 s); the other workers, waiting for the
    master's word, wait twice as long and never name the master instead.
    """
    seed = f"70020{rank}"
    cmd = [str(MPIEXEC), "-n", "3", sys.executable, "-m", "mpi4py", str(PROGRAM), "--points", "300",
           "--transitions", "4", "--seed", seed, "--fail-rank", str(rank), "--fail-epoch", "2",
           "--fail-how", "stop", "--timeout", "3"]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    took = time.monotonic() - t0
    assert proc.returncode != 0
    if rank == 0:  # the workers wait twice the timeout for the master's word
        assert "no word from the master (rank 0) within 6 s" in proc.stderr
    else:
        assert f"no answer from worker {rank - 1} (rank {rank}) within 3 s" in proc.stderr
        assert "no word from the master" not in proc.stderr
    assert took < 30
    assert wait_gone(seed) < 5.0
