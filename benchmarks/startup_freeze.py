"""Every role frozen at every step of an MPI job's start-up: the job ends within its bound, in one
line that names the frozen rank.

    python benchmarks/startup_freeze.py [--workers 2] [--timeout 3]

For ``--mode coded`` (a master and ``K`` workers) and ``--mode exchange`` (``K`` peers), each
role (the master, a worker; the peers' leader, a peer) is frozen (SIGSTOP: ``--fail-at STEP
--fail-how stop`` of the program's test-only entry, :mod:`coded_shuffle.mpi_faults`) at each start-up step
(:data:`coded_shuffle.cli.runner.mpi_job.STARTUP_STEPS`; a job of peers has no first batches), in a
job of 60 records of 16 bytes launched as ``coded-shuffle run`` launches it. A row gives the
seconds from the freeze to the launcher's end, the lines that start with ``coded-shuffle run:
error:`` (there must be one, and it must name the frozen rank), and whether the job ended within
its bound: the timeout, twice it for a silent leader, plus 2 s for the abort. The suite's
``tests/engine/test_faults.py`` runs four of these cells.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from coded_shuffle.cli.runner.mpi_job import STARTUP_STEPS

ROOT = Path(__file__).resolve().parents[1]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
LAUNCH = "import sys; from coded_shuffle.cli.run import launch; sys.exit(launch(sys.argv[1:]))"


def one(mode: str, rank: int, step: str, K: int, timeout: float, seed: int) -> tuple[float, list[str], int]:
    """Seconds from the freeze to the end, the job's error lines, the launcher's status."""
    ranks = K if mode == "exchange" else K + 1
    cmd = [sys.executable, "-c", LAUNCH, str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py",
           "-m", "coded_shuffle.mpi_faults", "--points", "60", "--record-bytes", "16", "--transitions", "1",
           "--mode", mode, "--seed", str(seed), "--timeout", f"{timeout:g}", "--fail-rank", str(rank),
           "--fail-at", step, "--fail-how", "stop"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stderr is not None
    lines, frozen = [], float("nan")
    for line in proc.stderr:
        if "deliberate stop" in line:
            frozen = time.monotonic()
        if line.startswith("coded-shuffle run: error:"):
            lines.append(line.strip())
    proc.wait()
    return time.monotonic() - frozen, lines, proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", "-K", type=int, default=2)
    p.add_argument("--timeout", type=float, default=3.0)
    args = p.parse_args()
    K, T = args.workers, args.timeout
    cells = [("coded", 0, "master"), ("coded", K, "worker"), ("exchange", 0, "leader")]
    cells.append(("exchange", K - 1, "peer"))
    ok = True
    print(f"K = {K}, --timeout {T:g}")
    print(f"{'mode':>9} {'role':>7} {'step':>14} {'seconds':>8} {'bound':>6}  line")
    for n, (mode, rank, role) in enumerate(cells):
        for step in STARTUP_STEPS:
            if mode == "exchange" and step == "first batches":
                continue
            took, lines, status = one(mode, rank, step, K, T, 800_000 + 10 * n + STARTUP_STEPS.index(step))
            bound = (2 * T if rank == 0 and step != "start" else T) + 2.0
            named = len(lines) == 1 and any(f in lines[0] for f in (f"(rank {rank})", f"rank {rank} did not"))
            good = named and status == 1 and took <= bound
            ok &= good
            line = lines[0].partition("error: ")[2] if len(lines) == 1 else f"{len(lines)} lines: {lines}"
            flag = "" if good else "FAILED "
            print(f"{mode:>9} {role:>7} {step:>14} {took:8.1f} {bound:6.1f}  {flag}{line}")
    print("every frozen rank named in one line within its bound" if ok else "NOT MET")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
