"""The exchange between peers with storage, against the coded broadcast with the same storage,
on a shaped network of hosts.

For each ``K`` (default 4 and 8) and each storage ``M`` (default 1, 2, 3), in one run:

- ``exchange``: ``mpi/netns_cluster.sh --peers``, ``K`` hosts, every one a worker, every port
  shaped at ``--mbit`` both ways; the MPI program's ``--mode exchange --storage M`` (no master:
  each worker receives exactly the pieces it misses, from the holder that keeps the busiest
  upload least);
- ``alltoall``: the same exchange sent all at once (``MPI_Alltoallv``, every pair's flow
  started together), where ``exchange`` goes in rounds of matchings
  (:func:`coded_shuffle.plan.exchange_rounds`: one send and one receive a worker a round);
- ``coded``: ``K + 1`` hosts, the master's uplink and every worker port shaped the same, the
  master's coded broadcast (``--mode coded --storage M``, ``MPI_Bcast`` a chain);
- ``previous`` (with ``--previous DIR``, a checkout of earlier code): that code's exchange in
  rounds, run just before this code's in every repeat (``--repeats``), so that both see the same
  machine: this code decodes each round while the next travels, earlier code after the last.

Reported per run (steady state: the median over the transitions after the first, of every
repeat): the delivery time (barrier until the slowest worker's last byte is in), the time with
decoding and checking, the time from the last byte to the batch ready (``tail``: the transition
less the delivery; and ``decode``, the slowest worker's decoding after its last byte), and the
bytes the kernel counted on the busiest port (a worker's downlink or uplink, or the master's
uplink) with its byte time at the port's rate; and ``deliver/payload``, the delivery over the
byte time of the busiest port's payload (the most a worker received or sent), which the control
messages of the transition, counted by the kernel outside the delivery, leave out. Neither can
go below 1514 / 1448 = 1.046: tc shapes every segment's headers too (a plain TCP flow through
a port moves 287.5 to 288 Mbit/s of payload at 300), while the kernel's counters count one set
of headers per offloaded packet of up to 64 KiB. Every host's TCP congestion control is
``--tcp-cc`` (``mpi/netns_cluster.sh --tcp-cc``; a list runs each in turn, rows of the others
marked ``:NAME``, the verdicts on the first's). Targets, with the exchange:

- the busiest download with ``M`` against ``M = 1`` (payload, from the report) is
  ``(K - M) / (K - 1)`` within 2 %;
- the delivery time is within 10 % of the byte time of the busiest port's payload (in rounds:
  the all-at-once exchange, and the previous code's, are reported beside it);
- the delivery-time ratio of ``M = 2`` to ``M = 1`` is within 10 % of the byte ratio.

Records of 5376 bytes (21 pieces of 256 at ``K = 8``, ``M = 3``): every piece the same size,
no padding. Needs root (network namespaces, tc). Run:

    python benchmarks/netns_exchange.py [--workers 4,8] [--storage 1,2,3] [--mib 256] [--mbit 1000]
        [--no-coded] [--no-alltoall] [--previous DIR] [--repeats 1] [--tcp-cc auto]

The machine's load average is printed beside each run.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"
RECORD_BYTES = 5376
#: The share of a shaped port's rate a TCP flow's payload gets at MTU 1500 (1448 bytes of a segment
#: with timestamps, of 1514 on the link, which tc counts); the kernel's counters of a port, in the
#: report, count one set of headers per offloaded packet of up to 64 KiB: its payload within 0.1 %.
PAYLOAD_SHARE = 1448 / 1514
RUNS = itertools.count()  # numbers each run, so that each run's first transition is left out


def run(K: int, M: int, mode: str, args: argparse.Namespace, cc: str) -> list[dict]:
    N = args.mib * (1 << 20) // RECORD_BYTES
    rate = str(args.mbit)
    root = args.previous.resolve() if mode == "previous" else ROOT
    peers = mode in ("exchange", "alltoall", "previous")
    shape = ["--peers"] if peers else ["--master-up-mbit", rate]
    schedule = ["--exchange-schedule", "alltoall" if mode == "alltoall" else "rounds"] if peers else []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            str(CLUSTER), "-K", str(K), *shape, "--worker-down-mbit", rate, "--worker-up-mbit", rate,
            "--tcp-cc", cc,
            "--timeout", str(args.timeout), "--", sys.executable, "-m", "mpi4py", "-m",
            "coded_shuffle.mpi_program", "--points", str(N), "--record-bytes", str(RECORD_BYTES),
            "--transitions", str(args.epochs), "--mode", "exchange" if peers else mode, *schedule,
            "--storage", str(M), "--count-links",
            "--json", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(root)}
        load = os.getloadavg()[0]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=root, check=False, timeout=args.timeout + 60
        )
        if proc.returncode:
            sys.exit(f"netns_exchange.py: {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        for r in rows:
            r["load"] = load
            r["run"] = next(RUNS)
        return rows


def steady(rows: list[dict], key: str) -> float:
    """The median of ``key`` (a report field, a timing, a port's bytes, or the ``tail`` after the
    delivery) over the transitions after the first of each run (``rows[i]["run"]``)."""
    later = [r for i, r in enumerate(rows) if i and r["run"] == rows[i - 1]["run"]] or rows

    def value(r: dict) -> float:
        if key in r["timings"]:
            return float(r["timings"][key])
        if key == "port":  # the busiest port: a worker's downlink or uplink, or the master's uplink
            return float(max(max(r["link_rx_bytes"][1:]), max(r["link_tx_bytes"])))
        if key == "payload":  # the busiest port's payload: the most a worker received, or sent
            return float(max(r["max_received_bytes"], r.get("max_sent_bytes") or 0))
        if key == "tail":  # from the slowest worker's last byte to the batches ready and checked
            return float(r["seconds"]) - float(r["timings"]["deliver"])
        return float(r[key])

    return statistics.median(value(r) for r in later)


def report(K: int, runs: dict[tuple[str, int], list[dict]], mbit: float) -> bool:
    Ms = sorted({M for _, M in runs})
    N = runs[("exchange", Ms[0])][0]["N"]
    print(
        f"\nK = {K}: {N} records of {RECORD_BYTES} B, every port {mbit:g} Mbit/s (headers too: a TCP payload "
        f"fills {PAYLOAD_SHARE:.4f} of it, {1 / PAYLOAD_SHARE:.3f} x the byte time the counters give)"
    )
    print(
        "           mode  M  deliver s  +decode s  tail s  decode s  busiest port MB  port byte s"
        "  deliver/byte  +decode/byte  down MB  deliver/payload  verified  load"
    )
    ok = True
    order = {"exchange": 0, "previous": 1, "alltoall": 2, "coded": 3}

    def place(key: tuple[str, int]) -> tuple[int, bool, int, str]:  # by M, the first --tcp-cc first
        mode, M = key
        return (M, ":" in mode, order[mode.split(":")[0]], mode)

    for (mode, M), rows in sorted(runs.items(), key=lambda kv: place(kv[0])):
        port = steady(rows, "port")
        byte_s = port * 8 / (mbit * 1e6)
        deliver = steady(rows, "deliver")
        verified = all(r["verified"] for r in rows)
        ok &= verified
        total, loads = steady(rows, "seconds"), [r["load"] for r in rows]
        print(
            f"{mode:>15} {M:>2} {deliver:>10.3f} {total:>10.3f} {steady(rows, 'tail'):>7.3f} "
            f"{steady(rows, 'decode'):>9.3f} {port / 1e6:>16.2f} {byte_s:>12.3f} {deliver / byte_s:>13.3f} "
            f"{total / byte_s:>13.3f} {steady(rows, 'max_received_bytes') / 1e6:>8.2f} "
            f"{deliver / (steady(rows, 'payload') * 8 / (mbit * 1e6)):>16.3f}  "
            f"{'yes' if verified else 'NO':>8}  {min(loads):.1f}-{max(loads):.1f}"
        )
    ex = {M: runs[("exchange", M)] for M in Ms}
    base_down = steady(ex[1], "max_received_bytes")
    for M in Ms:
        if M == 1:
            continue
        ratio = steady(ex[M], "max_received_bytes") / base_down
        want = (K - M) / (K - 1)
        good = abs(ratio / want - 1) <= 0.02
        ok &= good
        verdict = "PASS" if good else "FAIL"
        print(f"busiest download, M = {M} over M = 1: {ratio:.4f}, (K-M)/(K-1) = {want:.4f}: {verdict}")

    def over(rows: list[dict]) -> float:  # the delivery over the busiest port's payload byte time, less 1
        return steady(rows, "deliver") / (steady(rows, "payload") * 8 / (mbit * 1e6)) - 1

    for M in Ms:
        gap = over(ex[M])
        good = gap <= 0.10
        ok &= good
        verdict = "PASS" if good else "FAIL"
        line = f"exchange M = {M}: delivery in rounds {gap:+.1%} over the busiest payload's byte time (10 %)"
        if ("previous", M) in runs:
            line += f", the previous code {over(runs[('previous', M)]):+.1%}"
        if ("alltoall", M) in runs:
            line += f", all at once {over(runs[('alltoall', M)]):+.1%}"
        print(f"{line}: {verdict}")
        tail, deliver = steady(ex[M], "tail"), steady(ex[M], "deliver")
        line = (f"exchange M = {M}: {tail:.3f} s from the last byte to the batches ready, "
                f"{tail / deliver:+.1%} of the delivery (10 %)")  # fmt: skip
        if ("previous", M) in runs:
            before = runs[("previous", M)]
            b_tail, b_deliver = steady(before, "tail"), steady(before, "deliver")
            line += f"; the previous code {b_tail:.3f} s ({b_tail / b_deliver:+.1%})"
        good = tail <= 0.10 * deliver
        ok &= good
        print(f"{line}: {'PASS' if good else 'FAIL'}")
    if 2 in ex:
        t_ratio = steady(ex[2], "deliver") / steady(ex[1], "deliver")
        b_ratio = steady(ex[2], "payload") / steady(ex[1], "payload")
        good = abs(t_ratio / b_ratio - 1) <= 0.10
        ok &= good
        print(
            f"exchange M = 2 over M = 1: time ratio {t_ratio:.3f}, busiest payload ratio {b_ratio:.3f} "
            f"({t_ratio / b_ratio - 1:+.1%}; target 10 %): {'PASS' if good else 'FAIL'}"
        )
    return ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", default="4,8", help="comma-separated K (default 4,8)")
    ap.add_argument("--storage", default="1,2,3", help="comma-separated M, 1 first (default 1,2,3)")
    ap.add_argument("--mib", type=int, default=256, help="dataset size in MiB (default 256)")
    ap.add_argument("--mbit", type=float, default=1000, help="every port's rate, Mbit/s (default 1000)")
    ap.add_argument("--epochs", type=int, default=4, help="transitions, the first a warm-up (default 4)")
    ap.add_argument("--no-coded", action="store_true", help="the exchange alone")
    ap.add_argument(
        "--no-alltoall", action="store_true", help="not the all-at-once exchange beside the rounds"
    )
    ap.add_argument("--previous", type=Path, help="a checkout of earlier code, its exchange in rounds beside")
    ap.add_argument("--repeats", type=int, default=1, help="runs of every mode, in turn (default 1)")
    ap.add_argument(
        "--tcp-cc", default="auto",
        help="comma-separated TCP congestion controls of the hosts (mpi/netns_cluster.sh --tcp-cc), each run "
        "in turn, the first's rows judged (default auto: cubic, or reno where a namespace may not choose it)",
    )  # fmt: skip
    ap.add_argument("--timeout", type=int, default=900)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("netns_exchange.py: needs root (network namespaces and tc); run it as root")
    Ms = [int(m) for m in args.storage.split(",")]
    ccs = args.tcp_cc.split(",")
    if Ms[0] != 1:
        sys.exit("netns_exchange.py: --storage must start with 1, the baseline")
    ok = True
    for K in (int(k) for k in args.workers.split(",")):
        runs: dict[tuple[str, int], list[dict]] = {}
        for M in (m for m in Ms if m < K):
            modes = ["previous"] * (args.previous is not None) + ["exchange"]
            modes += ["alltoall"] * (not args.no_alltoall) + ["coded"] * (not args.no_coded)
            for _ in range(args.repeats):
                for i, cc in enumerate(ccs):
                    for mode in modes:
                        key = mode if i == 0 else f"{mode}:{cc}"  # the first's rows have the verdicts
                        runs.setdefault((key, M), []).extend(run(K, M, mode, args, cc))
        ok &= report(K, runs, args.mbit)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
