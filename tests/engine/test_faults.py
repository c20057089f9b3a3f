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
#: The MPI program with the options of the faults (a test-only entry: the program has none of them).
FAULTS = ["-m", "coded_shuffle.mpi_faults"]
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
    cmd = [str(MPIEXEC), "-n", "3", sys.executable, "-m", "mpi4py", *FAULTS, "--points", "300",
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


def launch_program(*args: str, ranks: int) -> list[str]:
    """``coded-shuffle run``'s launcher (:func:`coded_shuffle.cli.run.launch`) over the program with
    ``args``, the options of the faults included (its test-only entry), which ``run`` does not take."""
    program = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py", *FAULTS, *args]
    run = "import sys; from coded_shuffle.cli.run import launch; sys.exit(launch(sys.argv[1:]))"
    return [sys.executable, "-c", run, *program]


# One job a role (master, worker; the peers' leader and a peer), each at a start-up step, and each
# way a frozen rank is named: by the guard of MPI's start, by the leader's round, by the first
# rank that waits for a silent leader. benchmarks/startup_freeze.py runs every role at every step.
STARTUP_FREEZES = [
    ("coded", 0, "start", "rank 1: rank 0 did not start within 3 s"),
    ("coded", 2, "first batches",
     "rank 0: no answer from worker 1 (rank 2) within 3 s, at the 'first batches' round"),
    ("exchange", 0, "sizes", "rank 1: no word from the leader (rank 0) within 6 s, at the 'sizes' round"),
    ("exchange", 1, "start", "rank 0: rank 1 did not start within 3 s"),
]  # fmt: skip


@pytest.mark.parametrize(("mode", "rank", "step", "line"), STARTUP_FREEZES)
def test_rank_frozen_at_startup_ends_the_job_with_one_line_naming_it(mode, rank, step, line):
    """A rank frozen (SIGSTOP) at a step of the start-up ends the job within the timeouts (3 s,
    twice that for a silent leader), in one line that names it, as in a transition."""
    seed = f"70030{STARTUP_FREEZES.index((mode, rank, step, line))}"
    ranks = 2 if mode == "exchange" else 3
    cmd = launch_program("--points", "60", "--record-bytes", "16", "--transitions", "1", "--mode", mode,
                         "--seed", seed, "--timeout", "3", "--fail-rank", str(rank), "--fail-at", step,
                         "--fail-how", "stop", ranks=ranks)  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stderr is not None
    lines, frozen_at = [], None
    try:
        for got in proc.stderr:
            lines.append(got)
            if "deliberate stop" in got:
                frozen_at = time.monotonic()
        proc.wait(30)
    finally:
        proc.kill()
    took = time.monotonic() - (frozen_at or 0.0)
    err = "".join(lines)
    assert frozen_at is not None, err
    assert proc.returncode == 1, err
    end = "; ending the job" if step == "start" else ""
    assert [x for x in lines if x.startswith("coded-shuffle run: error:")] == [
        f"coded-shuffle run: error: {line}{end}\n"
    ], err
    assert took < (6 if rank == 0 and step != "start" else 3) + 4.0, err
    assert wait_gone(seed) < 5.0


def test_rank_killed_is_named_in_the_closing_line():
    """A rank killed (SIGKILL) mid-job: ``mpiexec`` ends the others, and the launcher's closing
    line names the rank and its role: the launcher watched the pids the ranks marked."""
    cmd = launch_program("--points", "60", "--record-bytes", "16", "--transitions", "2", "--seed", "700401",
                         "--fail-rank", "2", "--fail-epoch", "1", "--fail-how", "kill", ranks=3)  # fmt: skip
    segments = Path("/dev/shm")  # MPICH's shared memory, which an aborted job leaves behind
    before = set(segments.glob("mpich_shm_*"))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert not set(segments.glob("mpich_shm_*")) - before  # cleared by the launcher
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    # How it ended is read from the dead rank while it is a zombie, or from hydra's report where
    # that names it (at times hydra names another rank, one it killed after): else "ended first".
    named = "coded-shuffle: error: the MPI job failed: rank 2 (worker 1)"
    hows = ("was killed by SIGKILL", "ended first")
    assert last in [f"{named} {how} (mpiexec exit status 9)" for how in hows], proc.stderr
    assert wait_gone("700401") < 5.0
