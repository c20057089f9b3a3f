"""The ceiling of the exchange on shaped hosts: plain MPI transfers, without the engine.

On ``mpi/netns_cluster.sh --peers`` hosts (every port shaped at ``--mbit`` both ways), ``K``
ranks each send every other rank ``--mib`` MiB of bytes (``numpy`` buffers, ``MPI_Isend`` and
``MPI_Irecv``, then ``MPI_Waitall``), timed from a barrier to the slowest rank's last byte:

- ``rounds``: ``K - 1`` rounds of shifts (rank ``i`` sends ``i + s`` and receives from ``i - s``
  in round ``s``), a rank starting its next round when both of its transfers are done, as the
  engine's exchange in rounds does (one send and one receive a rank a round, no barrier);
- ``atonce``: every pair's transfer posted at once, as ``MPI_Alltoallv`` does;
- ``engine`` (with ``--exchange-mib``): the rounds of the engine's exchange among peers
  (:meth:`~coded_shuffle.engine.schemes.ExchangeScheme.rounds`, :func:`coded_shuffle.plan.exchange_rounds`)
  of ``--exchange-mib`` MiB of 5376-byte records with a storage of ``--storage`` batches, its
  first transition (as ``benchmarks/netns_exchange.py`` runs it, seed 0), each unit its bytes:
  the same rounds and bytes a pair, each round's send and receive posted and waited as the
  engine's link does, without the engine (no framing, no decoding, buffers kept).

Each is reported over the byte time of a port's payload, ``(K - 1) * MiB`` at ``--mbit`` (for
``engine``, the most a rank sends or receives): the headers, which tc counts, put the floor at
1514 / 1448 = 1.046 (a TCP segment of 1448 bytes of payload is 1514 bytes on the link at MTU
1500). Each case runs ``--repeats`` times, in turn, on each host congestion control of
``--tcp-cc`` (``auto``: cubic, or reno where a namespace may choose only reno and bbr;
``system``: the machine's own). Needs root. Run:

    python benchmarks/netns_plain.py [--workers 4,8] [--mib 8] [--mbit 300] [--repeats 8]
        [--tcp-cc auto,system] [--exchange-mib 128 --storage 1]

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
MODES = ("rounds", "atonce", "engine")
#: The share of a shaped port's rate a TCP flow's payload gets at MTU 1500 (tc counts headers).
PAYLOAD_SHARE = 1448 / 1514
RECORD_BYTES = 5376  # as benchmarks/netns_exchange.py


def engine_rounds(K: int, mib: int, M: int) -> tuple[list[dict[int, tuple[int, int]]], int]:
    """The rounds of the engine's exchange among ``K`` peers (its first transition, seed 0) of
    ``mib`` MiB of records with a storage of ``M`` batches, in units, and a unit's bytes."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.orders import OrderSpec, auto_order

    N = mib * (1 << 20) // RECORD_BYTES
    scheme = scheme_for("exchange", K=K, storage=M, peers=True, record_bytes=RECORD_BYTES)
    epochs = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(auto_order("auto", N)), scheme=scheme)
    first = epochs.epoch(0)
    return scheme.rounds(first.held, epochs.epoch(1, first).held), scheme.piece_bytes(RECORD_BYTES)  # type: ignore[attr-defined]


def busiest_bytes(rounds: list[dict[int, tuple[int, int]]], unit: int, K: int) -> int:
    """The most bytes a rank sends or receives in ``rounds`` of ``unit`` bytes a unit."""
    up, down = [0] * K, [0] * K
    for r in rounds:
        for i, (j, n) in r.items():
            up[i] += n * unit
            down[j] += n * unit
    return max(up + down)


def ranks(mib: float, repeats: int, exchange: tuple[int, int] | None) -> None:
    """The MPI side: every mode ``repeats`` times, in turn; rank 0 prints ``mode seconds`` lines
    (``engine`` with ``exchange``, the dataset's MiB and the storage)."""
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, K = comm.Get_rank(), comm.Get_size()
    n = int(mib * (1 << 20))
    send = [np.ones(n, np.uint8) for _ in range(K)]
    recv = [np.empty(n, np.uint8) for _ in range(K)]
    steps: list[tuple[int, int, int, int]] = []  # this rank's (to, bytes, from, bytes) a round
    if exchange is not None:
        plan, unit = engine_rounds(K, *exchange)
        for r in plan:
            to, units = r.get(rank, (-1, 0))
            frm, got = next(((i, m) for i, (j, m) in r.items() if j == rank), (-1, 0))
            steps.append((to, units * unit, frm, got * unit))
    out = np.ones(max([b for _, b, _, _ in steps] + [1]), np.uint8)
    into = np.empty(sum(b for _, _, _, b in steps) + 1, np.uint8)

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

    def engine() -> None:  # as the engine's link: a round's receive and send, then both waited
        lo = 0
        for to, sent, frm, got in steps:
            reqs = [comm.Irecv(into[lo : lo + got], source=frm, tag=K)] if got else []
            reqs += [comm.Isend(out[:sent], dest=to, tag=K)] if sent else []
            MPI.Request.Waitall(reqs)
            lo += got

    modes = (("rounds", rounds), ("atonce", atonce), ("engine", engine))
    for _ in range(repeats):
        for mode, run in modes[: 2 + bool(steps)]:
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
        "--ranks", str(args.mib), str(args.repeats), str(args.exchange_mib or 0), str(args.storage),
    ]  # fmt: skip
    env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, check=False, timeout=args.timeout + 60
    )
    if proc.returncode:
        sys.exit(f"netns_plain.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    byte_s = {m: (K - 1) * args.mib * (1 << 20) * 8 / (args.mbit * 1e6) for m in MODES}
    if args.exchange_mib:
        busiest = busiest_bytes(*engine_rounds(K, args.exchange_mib, args.storage), K)
        byte_s["engine"] = busiest * 8 / (args.mbit * 1e6)
    got: dict[str, list[float]] = {m: [] for m in MODES}
    for line in proc.stdout.splitlines():
        mode, seconds = line.split()
        got[mode].append(float(seconds) / byte_s[mode])
    return {m: xs for m, xs in got.items() if xs}


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] == "--ranks":
        mib, storage = int(sys.argv[4]), int(sys.argv[5])
        ranks(float(sys.argv[2]), int(sys.argv[3]), (mib, storage) if mib else None)
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
    ap.add_argument(
        "--exchange-mib", type=int, default=0,
        help="also the engine's exchange rounds of a dataset of this many MiB (default: not run)",
    )  # fmt: skip
    ap.add_argument("--storage", type=int, default=1, help="the storage M of --exchange-mib (default 1)")
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
            for mode, xs in got.items():
                later = xs[1:] or xs
                each = " ".join(f"{x:.3f}" for x in xs)
                print(
                    f"{K:>3}  {cc:<7} {mode:<7} {statistics.median(later):>6.3f} {min(later):>6.3f} "
                    f"{max(later):>6.3f}   {each}  {load:.1f}-{os.getloadavg()[0]:.1f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
