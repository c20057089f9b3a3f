"""The coded multicast and the split with datagrams dropped, beside the same runs without loss.

One run, in a network namespace of its own (``unshare -n``: its loopback carries 239.0.0.0/8 and
nothing outside changes; root): ``--rounds`` rounds, each running, one after the other, the MPI
program (``K = --workers``, ``--points`` records of ``--record-bytes``, ``--transitions``
transitions) with ``--multicast`` for every case of :data:`CASES`: the coded multicast
(``--mode coded``) clean and with a share of the datagrams dropped on arrival by every worker
(``--multicast-drop`` of the program's test-only entry, :mod:`coded_shuffle.mpi_faults`), and
the split (``--mode split`` on ``--network``) likewise. A case's time is the median of its
transitions after the first of each run (which pays one-time costs), over the rounds.

With ``--previous DIR`` (a checkout of earlier code), its coded multicast, clean and with 5 %
dropped, runs in every round too, before the others ("previous" in the table).

Targets: with 5 % dropped, the coded multicast's transition within 1.3x of its clean time, and
the bytes sent again (``repair_bytes``) at most 2x the bytes dropped. The bytes dropped are
expected, not counted: each worker receives every datagram of the delivery (one group), so a
share ``p`` of ``K`` times its payload (``wire_bytes - repair_bytes``); the exact count is
``tests/transport/test_multicast.py``'s (what is sent again is what was dropped, byte for byte).

Run:  sudo python benchmarks/multicast_loss.py [--workers 4] [--points 3000] [--record-bytes 512]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = Path(sys.executable).parent / "mpiexec"
#: (mode, share of the datagrams dropped): the cases of a round, in the order they run.
CASES = (("coded", 0.0), ("coded", 0.05), ("split", 0.0), ("split", 0.05), ("split", 0.30))
#: The network of the split (one the split is predicted to win on at K = 3 and 4).
EDGE = "master=1000,up=300,down=1000,multicast"
SETUP = ("ip link set lo up", "ip link set lo multicast on", "ip route add 239.0.0.0/8 dev lo")


def run_case(args: argparse.Namespace, mode: str, drop: float, port: int, root: Path = ROOT) -> list[dict]:
    mpiexec = str(MPIEXEC) if MPIEXEC.exists() else shutil.which("mpiexec") or "mpiexec"
    # the entry that takes --multicast-drop: the program's own in earlier code
    entry = "mpi_faults" if (root / "coded_shuffle" / "mpi_faults.py").exists() else "mpi_program"
    cmd = [mpiexec, "-n", str(args.workers + 1), sys.executable, "-m", "mpi4py", "-m",
           f"coded_shuffle.{entry}", "--points", str(args.points),
           "--record-bytes", str(args.record_bytes),
           "--transitions", str(args.transitions), "--mode", mode, "--multicast", f"239.77.1.1:{port}",
           "--multicast-drop", str(drop), "--json", "-"]  # fmt: skip
    if mode == "split":
        cmd += ["--network", EDGE]
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, cwd=root, env=env, timeout=args.timeout, check=False
    )
    if proc.returncode:
        sys.exit(f"multicast_loss.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not rows or not all(r["verified"] for r in rows):
        sys.exit(f"multicast_loss.py: {mode} at {drop:.0%} dropped did not verify:\n{proc.stdout}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--points", type=int, default=3000)
    ap.add_argument("--record-bytes", type=int, default=512)
    ap.add_argument("--transitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--previous", type=Path, help="a checkout of earlier code, its coded cases run beside")
    ap.add_argument("--in-namespace", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not args.in_namespace:  # again, in a namespace of its own
        if os.geteuid() != 0:
            sys.exit("multicast_loss.py: needs root, for a network namespace of its own (unshare -n)")
        script = " && ".join((*SETUP, f"exec {sys.executable} {Path(__file__).resolve()} --in-namespace "
                              + " ".join(f"'{a}'" for a in sys.argv[1:])))  # fmt: skip
        sys.exit(subprocess.run(["unshare", "-n", "sh", "-c", script], check=False).returncode)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    with open("/proc/sys/net/core/rmem_max") as f:
        rmem = int(f.read())
    print(f"K = {args.workers}, N = {args.points}, record = {args.record_bytes} B, {args.transitions} "
          f"transitions a run, {args.rounds} rounds, {os.cpu_count()} cores, load {' '.join(load)} at the "
          f"start, net.core.rmem_max = {rmem}")  # fmt: skip
    cases = [(ROOT, "", mode, drop) for mode, drop in CASES]
    if args.previous is not None:
        cases[:0] = [(args.previous.resolve(), "previous ", "coded", drop) for drop in (0.0, 0.05)]
    got: dict[tuple[str, str, float], list[dict]] = {case[1:]: [] for case in cases}
    for r in range(args.rounds):
        for i, (root, name, mode, drop) in enumerate(cases):
            # the first transition of a run pays one-time costs
            got[(name, mode, drop)] += run_case(args, mode, drop, 6800 + 10 * r + i, root)[1:]
    with open("/proc/loadavg") as f:
        print(f"load {' '.join(f.read().split()[:3])} at the end")
    clean: dict[str, float] = {}
    verdicts = []
    print(f"{'mode':15} {'dropped':>7} {'median s':>9} {'min s':>7} {'max s':>7} {'x clean':>7} "
          f"{'resent kB':>9} {'dropped kB':>10} {'resent/dropped':>14} {'rejected':>8}")  # fmt: skip
    for (name, mode, drop), rows in got.items():
        secs = [r["seconds"] for r in rows]
        med = statistics.median(secs)
        base = clean.setdefault(name + mode, med)
        resent = sum(r["repair_bytes"] for r in rows) / len(rows)
        dropped = sum(drop * args.workers * (r["wire_bytes"] - r["repair_bytes"]) for r in rows) / len(rows)
        ratio = resent / dropped if dropped else float("nan")
        rejected = sum(r["frames_rejected"] for r in rows)
        print(f"{name + mode:15} {drop:7.0%} {med:9.4f} {min(secs):7.4f} {max(secs):7.4f} {med / base:7.2f} "
              f"{resent / 1e3:9.1f} {dropped / 1e3:10.1f} {ratio:14.2f} {rejected:8d}")  # fmt: skip
        if name + mode == "coded" and drop == 0.05:
            verdicts.append(("coded at 5 % within 1.3x of clean", med / base <= 1.3))
            verdicts.append(("resent at most 2x the bytes dropped", ratio <= 2))
    for what, ok in verdicts:
        print(f"target: {what}: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
