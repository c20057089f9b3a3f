"""The ceiling of the exchange on shaped hosts: plain MPI transfers, without the engine.

On ``mpi/netns_cluster.sh --peers`` hosts (every port shaped at ``--mbit`` both ways), ``K``
ranks each send every other rank ``--mib`` MiB of bytes (``numpy`` buffers, ``MPI_Isend`` and
``MPI_Irecv``, then ``MPI_Waitall``), timed from a barrier to the slowest rank's last byte:

- ``rounds``: ``K - 1`` rounds of shifts (rank ``i`` sends ``i + s`` and receives from ``i - s``
  in round ``s``), a rank starting its next round when both of its transfers are done, as the
  engine's exchange in rounds does (one send and one receive a rank a round, no barrier);
- ``atonce``: every pair's transfer posted at once, as ``MPI_Alltoallv`` does.

Each is reported over the byte time of a port's payload, ``(K - 1) * MiB`` at ``--mbit``: the
headers, which tc counts, put the floor at 1514 / 1448 = 1.046 (a TCP segment of 1448 bytes of
payload is 1514 bytes on the link at MTU 1500). Each case runs ``--repeats`` times, in turn, on
each host congestion control of ``--tcp-cc`` (``auto``: cubic, or reno where a namespace may
choose only reno and bbr; ``system``: the machine's own). Needs root. Run:

    python benchmarks/netns_plain.py [--workers 4,8] [--mib 8] [--mbit 300] [--repeats 8]
        [--tcp-cc auto,system]

The machine's load average is printed beside each case.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"
MODES = ("rounds", "atonce")
#: The share of a shaped port's rate a TCP flow's payload gets at MTU 1500 (tc counts headers).
PAYLOAD_SHARE = 1448 / 1514


def ranks(mib: float, repeats: int) -> None:
    """The MPI side: every mode ``repeats`` times, in turn; rank 0 prints ``mode seconds`` lines."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, K = comm.Get_rank(), comm.Get_size()
    n = int(mib * (1 << 20))
    send = [np.ones(n, np.uint8) for _ in range(K)]
    recv = [np.empty(n, np.uint8) for _ in range(K)]

    def rounds() -> None:
        for s in range(1, K):
            to, frm = (rank + s) % K, (rank - s) % K
            MPI.Request.Waitall(
                [comm.Irecv(recv[frm], source=frm, tag=s), comm.Isend(send[to], dest=to, tag=s)]
            )

    def atonce() -> None:
        reqs = [comm.Irecv(recv[j], source=j, tag=K) for j in range(K) if j != rank]
        reqs += [comm.Isend(send[j], dest=j, tag=K) for j in range(K) if j != rank]
        MPI.Request.Waitall(reqs)

    for _ in range(repeats):
        for mode, run in (("rounds", rounds), ("atonce", atonce)):
            comm.Barrier()
            tic = time.perf_counter()
            run()
            took = comm.gather(time.perf_counter() - tic, root=0)
            if rank == 0:
                print(mode, max(took), flush=True)


def case(K: int, cc: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """One job of ``K`` hosts: each mode's times over the payload's byte time."""
    rate = str(args.mbit)
    cmd = [
        str(CLUSTER), "-K", str(K), "--peers", "--worker-down-mbit", rate, "--worker-up-mbit", rate,
        "--tcp-cc", cc, "--timeout", str(args.timeout), "--", sys.executable, str(Path(__file__).resolve()),
        "--ranks", str(args.mib), str(args.repeats),
    ]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, check=False, timeout=args.timeout + 60
    )
    if proc.returncode:
        sys.exit(f"netns_plain.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    byte_s = (K - 1) * args.mib * (1 << 20) * 8 / (args.mbit * 1e6)
    got: dict[str, list[float]] = {m: [] for m in MODES}
    for line in proc.stdout.splitlines():
        mode, seconds = line.split()
        got[mode].append(float(seconds) / byte_s)
    return got


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--ranks":
        ranks(float(sys.argv[2]), int(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="4,8", help="comma-separated K (default 4,8)")
    ap.add_argument("--mib", type=float, default=8, help="MiB each rank sends each other (default 8)")
    ap.add_argument("--mbit", type=float, default=300, help="every port's rate, Mbit/s (default 300)")
    ap.add_argument("--repeats", type=int, default=8, help="runs of each mode a job, in turn (default 8)")
    ap.add_argument(
        "--tcp-cc",
        default="auto,system",
        help="comma-separated congestion controls of the hosts (default auto,system)",
    )
    ap.add_argument("--timeout", type=int, default=600)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netns_plain.py: needs root (network namespaces and tc); run it as root")
    print(f"every port {args.mbit:g} Mbit/s; over a port's payload byte time (floor {1 / PAYLOAD_SHARE:.3f})")
    print("  K  tcp-cc   mode    median   min    max   each (the first a warm-up)  load")
    for K in (int(k) for k in args.workers.split(",")):
        for cc in args.tcp_cc.split(","):
            load = os.getloadavg()[0]
            got = case(K, cc, args)
            for mode in MODES:
                xs = got[mode]
                later = xs[1:] or xs
                each = " ".join(f"{x:.3f}" for x in xs)
                print(
                    f"{K:>3}  {cc:<7} {mode:<7} {statistics.median(later):>6.3f} {min(later):>6.3f} "
                    f"{max(later):>6.3f}   {each}  {load:.1f}-{os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
