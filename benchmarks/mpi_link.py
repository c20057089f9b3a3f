"""Coded against uncoded delivery over MPI, on a paced link and on the raw one.

Two runs of ``mpi/shuffle.py`` with ``K = --workers`` workers (``K + 1`` ranks) on a dataset of
``--mib`` MiB (records of ``--record-bytes``), ``--epochs`` transitions each:

1. paced (``--link-mbps``, default 200): ``--mode both``. Per transition, the wall time of
   delivery + decode of the coded scheme over that of the uncoded one (the time ratio), beside the
   ratio of the bytes each sent from the master (the byte ratio). On a link of known speed the
   time follows the bytes: target, time ratio within 10% of the byte ratio.
2. raw (unpaced): ``--mode coded --bcast-baseline``. Per transition, the coded delivery (frames
   broadcast until every worker holds them all) against one plain ``MPI_Bcast`` of as many bytes,
   measured the same way in the same run (barrier, then the slowest receiver's time). Target:
   coded delivery throughput at least 0.5 of the plain broadcast's. Delivery + decode is shown too.

The first transition of each run also pays one-time costs (compiling the decoder's kernels,
touching buffers): it is shown but left out of the verdict, which uses the steady state (the
median over the other transitions). On one machine the ranks share its cores; expect ~25% spread
from run to run.

Run:  python benchmarks/mpi_link.py [--workers 4] [--mib 64] [--record-bytes 1024] [--link-mbps 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "mpi" / "shuffle.py"


def mpiexec() -> str:
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    import shutil

    found = shutil.which("mpiexec")
    if found is None:
        sys.exit("mpi_link.py: mpiexec not found; pip install 'coded_shuffle[mpi]'")
    return found


def launch(workers: int, options: list[str], timeout: float) -> list[dict]:
    cmd = [mpiexec(), "-n", str(workers + 1), sys.executable, "-m", "mpi4py", str(PROGRAM), *options]
    cmd += ["--json", "-"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)
    if proc.returncode:
        sys.exit(f"mpi_link.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--mib", type=float, default=64)
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--link-mbps", type=float, default=200)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true", help="print the raw rows as JSON lines too")
    args = ap.parse_args()
    N = int(args.mib * (1 << 20)) // args.record_bytes
    common = ["--points", str(N), "--record-bytes", str(args.record_bytes), "--transitions", str(args.epochs)]
    common += ["--seed", str(args.seed)]
    print(
        f"K = {args.workers}, N = {N}, record = {args.record_bytes} B, "
        f"dataset = {N * args.record_bytes / 2**20:.1f} MiB, {args.epochs} transitions, "
        f"{os.cpu_count()} cores"
    )

    paced = launch(
        args.workers, [*common, "--mode", "both", "--link-mbps", str(args.link_mbps)], args.timeout
    )
    raw = launch(args.workers, [*common, "--mode", "coded", "--bcast-baseline"], args.timeout)
    if args.json:
        for row in paced + raw:
            print(json.dumps(row))
    assert all(r["verified"] for r in paced + raw), "a transition was not verified"

    print(f"\n1. paced link, {args.link_mbps:g} Mbit/s: seconds = delivery + decode")
    print(f"{'epoch':>6}{'coded MB':>10}{'uncoded MB':>11}{'byte ratio':>11}{'coded s':>9}{'uncoded s':>10}"
          f"{'time ratio':>11}{'deviation':>10}")  # fmt: skip
    devs = []
    by_epoch: dict[int, dict[str, dict]] = {}
    for r in paced:
        by_epoch.setdefault(r["epoch"], {})[r["mode"]] = r
    first = min(by_epoch)
    for e, d in sorted(by_epoch.items()):
        c, u = d["coded"], d["uncoded"]
        br = c["wire_bytes"] / u["wire_bytes"]
        tr = c["seconds"] / u["seconds"]
        dev = tr / br - 1
        if e != first:
            devs.append(dev)
        print(
            f"{e:>6}{c['wire_bytes'] / 1e6:>10.2f}{u['wire_bytes'] / 1e6:>11.2f}{br:>11.3f}"
            f"{c['seconds']:>9.3f}{u['seconds']:>10.3f}{tr:>11.3f}{dev:>+10.1%}"
            + ("  (warm-up)" if e == first else "")
        )
    dev = statistics.median(devs) if devs else float("nan")
    print(f"steady state: time ratio deviates {dev:+.1%} from the byte ratio (target within 10%): "
          f"{'PASS' if abs(dev) <= 0.10 else 'FAIL'}")  # fmt: skip

    print("\n2. raw link: coded delivery against one MPI_Bcast of the same bytes, same run")
    print(f"{'epoch':>6}{'MB':>8}{'deliver s':>11}{'+decode s':>11}{'bcast s':>9}{'deliver/bcast':>15}"
          f"{'+decode/bcast':>15}")  # fmt: skip
    fr, fr_dec = [], []
    first = min(r["epoch"] for r in raw)
    for r in raw:
        f = r["bcast_seconds"] / r["timings"]["deliver"]
        g = r["bcast_seconds"] / r["seconds"]
        if r["epoch"] != first:
            fr.append(f)
            fr_dec.append(g)
        print(
            f"{r['epoch']:>6}{r['wire_bytes'] / 1e6:>8.2f}"
            f"{r['timings']['deliver']:>11.4f}{r['seconds']:>11.4f}{r['bcast_seconds']:>9.4f}{f:>15.2f}{g:>15.2f}"
            + ("  (warm-up)" if r["epoch"] == first else "")
        )
    f = statistics.median(fr) if fr else float("nan")
    g = statistics.median(fr_dec) if fr_dec else float("nan")
    print(f"steady state: coded delivery runs at {f:.2f} of plain broadcast throughput (target >= 0.5): "
          f"{'PASS' if f >= 0.5 else 'FAIL'}; with decoding, {g:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
