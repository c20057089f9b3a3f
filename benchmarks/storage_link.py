"""Excess storage on a paced MPI link: delivery time against bytes, one batch stored and ``M``.

Two runs of ``mpi/shuffle.py --mode coded`` with ``K = --workers`` workers on a dataset of
``--mib`` MiB (records of ``--record-bytes``) over a link paced at ``--link-mbps``: one with a
storage of one batch a worker, one with ``--storage M``. Per transition, the time of the storage's
delivery (delivery, decoding and checks of the pieces, the ``seconds`` of the report) over that of
one batch, beside the ratio of the bytes the master sent. On a link of known speed the time
follows the bytes: target (issue 18), the time ratio within 10 % of the byte ratio. The first
transition of each run pays one-time costs and is left out of the verdict (medians of the
others).

Run:  python benchmarks/storage_link.py [--workers 4] [--storage 2] [--mib 32] [--record-bytes 3072]
"""

from __future__ import annotations

import argparse
import os
import statistics

from mpi_link import launch


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--storage", type=int, default=2)
    ap.add_argument("--mib", type=float, default=32)
    ap.add_argument("--record-bytes", type=int, default=3072)
    ap.add_argument("--link-mbps", type=float, default=200)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    N = int(args.mib * (1 << 20)) // args.record_bytes
    common = ["--points", str(N), "--record-bytes", str(args.record_bytes), "--transitions", str(args.epochs)]
    common += ["--seed", str(args.seed), "--mode", "coded", "--link-mbps", str(args.link_mbps)]
    print(
        f"K = {args.workers}, N = {N}, record = {args.record_bytes} B, dataset = "
        f"{N * args.record_bytes / 2**20:.1f} MiB, link {args.link_mbps:g} Mbit/s, "
        f"{args.epochs} transitions, {os.cpu_count()} cores"
    )
    one = launch(args.workers, common, args.timeout)
    more = launch(args.workers, [*common, "--storage", str(args.storage)], args.timeout)
    print(f"{'epoch':>5} {'MB, M=1':>9} {'MB, M=' + str(args.storage):>9} {'s, M=1':>8} "
          f"{'s, M=' + str(args.storage):>8} {'bytes':>7} {'time':>7} {'gap':>7}")  # fmt: skip
    gaps = []
    for a, b in zip(one, more, strict=True):
        assert a["verified"] and b["verified"] and a["epoch"] == b["epoch"]
        rb, rt = b["wire_bytes"] / a["wire_bytes"], b["seconds"] / a["seconds"]
        gap = rt / rb - 1
        if a["epoch"] > one[0]["epoch"]:
            gaps.append(gap)
        print(
            f"{a['epoch']:>5} {a['wire_bytes'] / 1e6:>9.2f} {b['wire_bytes'] / 1e6:>9.2f} "
            f"{a['seconds']:>8.3f} {b['seconds']:>8.3f} {rb:>7.3f} {rt:>7.3f} {gap:>+7.1%}"
        )
    med = statistics.median(gaps)
    print(f"median gap of the time ratio to the byte ratio: {med:+.1%} (target within 10 %: "
          f"{'met' if abs(med) <= 0.10 else 'NOT met'})")  # fmt: skip


if __name__ == "__main__":
    main()
