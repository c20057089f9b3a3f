"""One batch stored against ``M``, on a shaped network of hosts: bytes, delivery and decoding.

Two runs of ``mpi/netns_cluster.sh`` (``K + 1`` namespaced hosts behind one bridge, every port
shaped with tc tbf at ``--mbit``), ``--mode coded``, the same records and epochs: one with a storage
of one batch a worker, one with ``--storage M`` (default 2; the pieces the engine chooses for the
record size, ``engine.state.storage_pieces``). Per run, medians over the transitions after the
first: the bytes the kernel counted on the master's uplink, the delivery (until the slowest worker
holds every frame), the decoding after the last frame (the busiest worker) and the whole
transition with decoding and checks. Target (issue 24): with ``M`` the decoding no slower than
with one batch, and the transition faster.

Needs root. Run:  python benchmarks/netns_storage.py [--workers 8] [--mib 256] [--record-bytes 2048]
                      [--storage 2] [--mbit 1000]
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
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"


def run(args: argparse.Namespace, M: int) -> list[dict]:
    N = args.mib * (1 << 20) // args.record_bytes
    rate = str(args.mbit)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            str(CLUSTER), "-K", str(args.workers), "--master-up-mbit", rate, "--worker-down-mbit", rate,
            "--worker-up-mbit", rate, "--timeout", str(args.timeout), "--",
            sys.executable, "-m", "mpi4py", "-m", "coded_shuffle.mpi_program", "--points", str(N),
            "--record-bytes", str(args.record_bytes), "--transitions", str(args.epochs), "--mode", "coded",
            "--storage", str(M), "--count-links", "--json", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHON": sys.executable}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, check=False, timeout=args.timeout + 60
        )
        if proc.returncode:
            sys.exit(f"netns_storage.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def steady(rows: list[dict]) -> dict[str, float]:
    later = [r for r in rows if r["epoch"] != rows[0]["epoch"]]
    assert all(r["verified"] for r in rows), "a transition was not verified"

    def med(get) -> float:  # type: ignore[no-untyped-def]
        return float(statistics.median(get(r) for r in later))

    return {
        "pieces": float(rows[0]["subpackets"]),
        "master MB": med(lambda r: r["link_tx_bytes"][0]) / 1e6,
        "deliver s": med(lambda r: r["timings"]["deliver"]),
        "decode s": med(lambda r: r["timings"]["decode"]),
        "transition s": med(lambda r: r["seconds"]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--record-bytes", type=int, default=2048)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--mbit", type=float, default=1000)
    ap.add_argument("--epochs", type=int, default=4, help="transitions, the first a warm-up (default 4)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netns_storage.py: needs root (network namespaces and tc); run it as root")
    one, more = steady(run(args, 1)), steady(run(args, args.storage))
    rec = f"{args.mib} MiB of {args.record_bytes}-byte records"
    print(f"K = {args.workers}, {rec}, ports {args.mbit:g} Mbit/s")
    head = ("pieces", "master MB", "deliver s", "decode s", "transition s")
    print(f"{'':14s} " + " ".join(f"{h:>{len(h) + 1}s}" for h in head))
    for name, r in (("M = 1", one), (f"M = {args.storage}", more)):
        print(f"{name:14s} {r['pieces']:7.0f} {r['master MB']:10.1f} {r['deliver s']:10.3f} "
              f"{r['decode s']:9.3f} {r['transition s']:13.3f}")  # fmt: skip
    ratio = {k: more[k] / one[k] for k in ("master MB", "deliver s", "decode s", "transition s")}
    print("M / 1: " + ", ".join(f"{k} {v:.2f}" for k, v in ratio.items()))
    ok = ratio["decode s"] <= 1 and ratio["transition s"] < 1
    print(f"decoding no slower and the transition faster: {'PASS' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
