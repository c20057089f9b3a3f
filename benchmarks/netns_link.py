"""Coded broadcast, uncoded unicast and a direct worker exchange, on a shaped network of hosts.

One run of ``mpi/netns_cluster.sh`` per ``K`` (default 4 and 8): ``K + 1`` hosts made of network
namespaces behind one bridge, every port shaped with tc tbf at ``--mbit`` (default 1000 Mbit/s:
the master's uplink, each worker's downlink and uplink), MPI_Bcast a pipelined chain (the master
emits each byte once). The MPI program runs ``--mode all`` with ``--count-links``; per
transition, from the same caches:

- ``coded``: the plan, broadcast by the master;
- ``uncoded``: each moved record from the master to its new holder;
- ``alltoallv``: what a user would do instead, the workers sending each other the records that
  move (``MPI_Alltoallv``, uncoded), the master idle.

Reported per mode (steady state: the median over the transitions after the first, which also
compiles the decoder): the delivery time (barrier until the slowest worker holds everything), the
time with decoding and checking, and the bytes the kernel counted on the links: the master's
uplink, the busiest worker downlink and uplink. Target: the coded/uncoded delivery-time ratio
within 10 % of the ratio of bytes on the master's uplink, for every K.

Needs root (network namespaces, tc). Run:

    python benchmarks/netns_link.py [--workers 4,8] [--mib 256] [--record-bytes 1024] [--mbit 1000]
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
MODES = ("coded", "uncoded", "alltoallv")


def run(K: int, args: argparse.Namespace) -> list[dict]:
    N = args.mib * (1 << 20) // args.record_bytes
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            str(CLUSTER), "-K", str(K), "--master-up-mbit", str(args.mbit), "--worker-down-mbit",
            str(args.mbit), "--worker-up-mbit", str(args.mbit), "--timeout", str(args.timeout), "--",
            sys.executable, "-m", "mpi4py", "-m", "coded_shuffle.mpi_program", "--points", str(N),
            "--record-bytes", str(args.record_bytes), "--transitions", str(args.epochs), "--mode", "all",
            "--count-links", "--json", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHON": sys.executable}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, check=False, timeout=args.timeout + 60
        )
        if proc.returncode:
            sys.exit(f"netns_link.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        return [json.loads(line) for line in out.read_text().splitlines()]


def links(r: dict) -> tuple[int, int, int]:
    """Bytes on the master's uplink, the busiest worker downlink, the busiest worker uplink."""
    return r["link_tx_bytes"][0], max(r["link_rx_bytes"][1:]), max(r["link_tx_bytes"][1:])


def report(K: int, rows: list[dict]) -> bool:
    print(f"\nK = {K}: {rows[0]['N']} records of {rows[0]['record_bytes']} B, every port shaped")
    print(" epoch       mode  deliver s  +decode s  master up MB  worker down MB  worker up MB  verified")
    for r in rows:
        up, down, wup = links(r)
        warm = "  (warm-up)" if r["epoch"] == rows[0]["epoch"] else ""
        ok = "yes" if r["verified"] else "NO"
        print(
            f"{r['epoch']:>6} {r['mode']:>10} {r['timings']['deliver']:>10.3f} {r['seconds']:>10.3f} "
            f"{up / 1e6:>13.2f} {down / 1e6:>15.2f} {wup / 1e6:>13.2f}  {ok}{warm}"
        )
    steady = [r for r in rows if r["epoch"] != rows[0]["epoch"]]

    def med(mode: str, key: str) -> float:
        return statistics.median(float(r["timings"][key] if key in r["timings"] else r[key])
                                 for r in steady if r["mode"] == mode)

    def med_link(mode: str, i: int) -> float:
        return statistics.median(float(links(r)[i]) for r in steady if r["mode"] == mode)

    print("steady state, medians:")
    print("       mode  deliver s  +decode s  master up MB  worker down MB  worker up MB")
    for mode in MODES:
        up, down, wup = (med_link(mode, i) / 1e6 for i in range(3))
        print(
            f"{mode:>11} {med(mode, 'deliver'):>10.3f} {med(mode, 'seconds'):>10.3f} "
            f"{up:>13.2f} {down:>15.2f} {wup:>13.2f}"
        )
    byte_ratio = med_link("coded", 0) / med_link("uncoded", 0)
    time_ratio = med("coded", "deliver") / med("uncoded", "deliver")
    total_ratio = med("coded", "seconds") / med("uncoded", "seconds")
    dev = time_ratio / byte_ratio - 1
    ok = abs(dev) <= 0.10 and all(r["verified"] for r in rows)
    print(
        f"steady state (median): master-uplink byte ratio coded/uncoded {byte_ratio:.3f}, delivery time "
        f"ratio {time_ratio:.3f} ({dev:+.1%}; target within 10%): {'PASS' if ok else 'FAIL'}"
    )
    print(f"  with decoding and checking: time ratio {total_ratio:.3f} ({total_ratio / byte_ratio - 1:+.1%})")
    a2a = med("alltoallv", "seconds")
    print(
        f"  delivery + decode, seconds: coded {med('coded', 'seconds'):.3f}, uncoded "
        f"{med('uncoded', 'seconds'):.3f}, alltoallv {a2a:.3f}"
    )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="4,8", help="comma-separated K (default 4,8)")
    ap.add_argument("--mib", type=int, default=256, help="dataset size in MiB (default 256)")
    ap.add_argument("--record-bytes", type=int, default=1024)
    ap.add_argument("--mbit", type=float, default=1000, help="every port's rate, Mbit/s (default 1000)")
    ap.add_argument("--epochs", type=int, default=5, help="transitions, the first a warm-up (default 5)")
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netns_link.py: needs root (network namespaces and tc); run it as root")
    ok = [report(K, run(K, args)) for K in (int(k) for k in args.workers.split(","))]
    sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
    main()
