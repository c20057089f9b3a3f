"""The exchange among peers over torch.distributed beside the same exchange over MPI.

A job of ``K`` peers (:class:`coded_shuffle.loader.PeerLoader`, no master: every later epoch
comes from the workers' exchange) runs once for each launcher and each schedule, in one run:

- ``mpi``: ``mpiexec -n K``, the MPI link (``MPI_Alltoallv`` all at once);
- ``torch``: ``torchrun --nproc-per-node K``, the link over torch.distributed (gloo);

each with the exchange sent all at once (``alltoall``) and in rounds of matchings (``rounds``:
:func:`coded_shuffle.plan.exchange_rounds`, one send and one receive a worker a round, each
round decoded while the next travels). With ``--link-mbps R`` every worker's sends of the
exchange are paced at ``R`` (a :class:`coded_shuffle.transport.TokenBucket` at the link's
``exchange_pace``), so that on one host the transfers take the time of a network of that rate;
the time is then also given over the busiest sender's byte time at ``R``.

Reported per run: the transitions' median over the epochs after the first of every repeat
(``seconds`` of the report: the delivery with decoding and checking), the busiest sender's
bytes, and, paced, the ratio of the median to their byte time. Every transition is verified
by the engine (``verified`` of each report is asserted). Run:

    python benchmarks/torch_exchange.py [--workers 4] [--mib 16] [--record-bytes 1024]
        [--epochs 4] [--link-mbps 200] [--repeats 2]

The machine's load average is printed beside each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAUNCHERS = ("mpi", "torch")
SCHEDULES = ("alltoall", "rounds")


def program(kind: str, data: str, out: str, epochs: int, schedule: str, mbps: float) -> int:
    """One rank of the job: iterate the loader's epochs; rank 0 writes the reports to ``out``."""
    if kind == "torch":
        import torch.distributed as dist

        dist.init_process_group("gloo")
    from coded_shuffle.loader import PeerLoader
    from coded_shuffle.loader.peers import peer_link
    from coded_shuffle.transport import TokenBucket

    link = peer_link()
    link.exchange_schedule = schedule  # type: ignore[attr-defined]
    if mbps:
        link.exchange_pace = TokenBucket.from_mbps(mbps)  # type: ignore[attr-defined]
    loader = PeerLoader(data, epochs=epochs, seed=11, timeout=120, transport=link)
    for _batch in loader:
        pass
    if loader.worker == 0:
        Path(out).write_text(json.dumps([r.to_dict() for r in loader.reports]))
    return 0


def launch(kind: str, args: argparse.Namespace, data: Path, out: Path, schedule: str) -> list[dict]:
    """The reports of one job, launched by ``kind``."""
    bindir = Path(sys.executable).parent
    if kind == "mpi":
        cmd = [str(bindir / "mpiexec"), "-n", str(args.workers), sys.executable]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc-per-node={args.workers}", "--monitor-interval=0.5"]  # fmt: skip
    cmd += [__file__, "--program", kind, str(data), str(out), str(args.epochs), schedule, str(args.link_mbps)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{kind} {schedule}: status {done.returncode}\n{done.stderr[-2000:]}")
    reports = json.loads(out.read_text())
    assert all(r["verified"] for r in reports), f"{kind} {schedule}: a transition not verified"
    return reports


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--program"]:
        kind, data, out, epochs, schedule, mbps = argv[1:]
        return program(kind, data, out, int(epochs), schedule, float(mbps))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=4, help="K peers (default 4)")
    parser.add_argument("--mib", type=int, default=16, help="the dataset's MiB (default 16)")
    parser.add_argument("--record-bytes", type=int, default=1024, help="bytes a record (default 1024)")
    parser.add_argument("--epochs", type=int, default=4, help="epochs a job (default 4: 3 transitions)")
    parser.add_argument(
        "--link-mbps", type=float, default=200.0, help="pace sends at this rate; 0: unpaced (default 200)"
    )
    parser.add_argument("--repeats", type=int, default=2, help="jobs of each kind, in turn (default 2)")
    parser.add_argument("--launchers", default="mpi,torch", help="comma-separated: mpi, torch")
    args = parser.parse_args(argv)
    launchers = [k for k in args.launchers.split(",") if k]
    if not set(launchers) <= set(LAUNCHERS) or args.workers < 2 or args.epochs < 2:
        parser.error("--launchers takes mpi and torch; --workers and --epochs at least 2")
    import numpy as np

    N = args.mib * (1 << 20) // args.record_bytes
    seconds: dict[tuple[str, str], list[float]] = {}
    sent: dict[tuple[str, str], list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "rows.npy"
        rng = np.random.default_rng(5)
        np.save(data, rng.integers(0, 256, (N, args.record_bytes), dtype=np.uint8))
        for rep in range(args.repeats):
            for kind in launchers:
                for schedule in SCHEDULES:
                    reports = launch(kind, args, data, Path(tmp) / f"{kind}_{schedule}_{rep}.json", schedule)
                    later = [r for r in reports if r["epoch"] > 1]
                    seconds.setdefault((kind, schedule), []).extend(r["seconds"] for r in later)
                    sent.setdefault((kind, schedule), []).extend(r["max_sent_bytes"] for r in later)
                    print(f"# {kind} {schedule} repeat {rep}: load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"K = {args.workers}, N = {N} records of {args.record_bytes} B, paced at {args.link_mbps} Mbit/s")
    print("| launcher | schedule | transition s (median) | busiest sender MB | over its byte time |")
    print("| --- | --- | --- | --- | --- |")
    for (kind, schedule), times in seconds.items():
        med, most = statistics.median(times), max(sent[kind, schedule])
        ratio = f"{med / (most * 8 / (args.link_mbps * 1e6)):.3f}" if args.link_mbps else "-"
        print(f"| {kind} | {schedule} | {med:.3f} | {most / 1e6:.3f} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
