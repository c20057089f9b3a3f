"""Every mode, ``--mode auto`` and the exchange's senders chosen on the racks or blind to them, on
namespaced hosts in racks (``mpi/netns_cluster.sh --racks``), with the bytes that crossed between
racks counted by the kernel.

Topologies (``K = 8`` workers, rates in Mbit/s; the SPEC each job is given with ``--network``):

- ``2x4``: two racks of 4 workers, every worker port 200 both ways, each rack's uplink and
  downlink 200 (4 x 200 over 200: oversubscribed 4:1), the master on the spine at 400
  (``master=400,up=200,down=200,racks=2x4,rack-up=200``); no multicast: the coded broadcast is
  ``MPI_Bcast`` as a chain in rack order;
- ``4x2``: four racks of 2, the same ports and rack links (2:1), the master's broadcast as UDP
  multicast replicated by the spine and every rack's switch (links of MTU 65535, datagrams of
  65507 bytes paced at 380 Mbit/s; ``...,racks=4x2,rack-up=200,multicast,spine-multicast``),
  where ``split`` runs too.

Jobs on each (records of 14336 bytes, 7 pieces of 2048 with ``M = 2``): ``coded``, ``uncoded``
(``K + 1`` hosts), ``exchange`` (a job of peers, ``K`` hosts), ``split`` where the master
multicasts, all with one batch stored (``M = 1``) and the report's predicted times and bound;
``auto``, the mode ``coded-shuffle run --mode auto`` chooses for the SPEC
(:func:`coded_shuffle.engine.schedule.predicted_times`), run once more; and with ``M = 2`` the
exchange twice: its senders chosen on the racks' links (``--network`` with racks:
:func:`coded_shuffle.plan.assign_senders_racks`) and blind to them (no ``--network``:
:func:`coded_shuffle.plan.assign_senders`, the least busiest upload). With ``M = 2`` the report
has no times: the busiest link's time of each plan (its prediction) and the bound (what each
worker misses over its downlink, the least busiest upload over the uplink, and each rack's
pieces held only outside it over its downlink, only inside it over its uplink) are computed here
from the job's own plan (:meth:`~coded_shuffle.engine.schemes.ExchangeScheme.exchange_plan`).

Measured: ``seconds`` (barrier to the last worker's verified result, decoding included) and the
delivery time, medians over transitions 2..E; the bytes each rack's uplink and downlink carried
a transition, from the kernel's counters of the racks' ports (the script's ``links: rackR``
lines): the job of ``E`` transitions less the same job of one, over ``E - 1`` (start-up, the
first batches and the warm-up cancel), frame and TCP/IP headers and acknowledgements included;
beside them the payload that the plan sends across racks (units whose sender and receiver are in
different racks; what the master sends each rack; the coded broadcast's frames once on every
rack link it crosses). Targets, on ``2x4`` with ``M = 2``: the rack-aware exchange moves at most
0.6 x the rack-blind one's bytes between racks (up the racks' uplinks) and delivers at least
1.3 x faster (the delivery time; with decoding and checks beside it); ``auto`` within 10 % of
the fastest mode measured.

Needs root. Run: ``python benchmarks/netns_racks.py [--topologies 2x4,4x2] [--mib 128] [--epochs 3]``.
The machine's load average (1 minute) is printed beside every job.
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

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"
#: Default record size: 7 pieces of 2048 B with ``M = 2`` (one for every label at ``K = 8``, so
#: the placement on racks has no freedom); ``--record-bytes 1024`` stores whole records, which the
#: placement on racks keeps within a rack where it can.
RECORD_BYTES = 14336
GROUP = ["--multicast", "239.77.11.1:7100", "--datagram-bytes", "65507", "--link-mbps", "380"]

#: name: (racks, SPEC)
TOPOLOGIES = {
    "2x4": ("2x4", "master=400,up=200,down=200,racks=2x4,rack-up=200"),
    "4x2": ("4x2", "master=400,up=200,down=200,racks=4x2,rack-up=200,multicast,spine-multicast"),
}
#: job name: (mode, storage, senders on the racks)
JOBS = {
    "coded": ("coded", 1, True), "uncoded": ("uncoded", 1, True), "exchange": ("exchange", 1, True),
    "split": ("split", 1, True), "exchange M=2 racks": ("exchange", 2, True),
    "exchange M=2 blind": ("exchange", 2, False),
}  # fmt: skip


def network(topology: str):  # type: ignore[no-untyped-def]
    from coded_shuffle.network import Network

    return Network.parse(TOPOLOGIES[topology][1])


def job(topology: str, name: str, args: argparse.Namespace, epochs: int) -> tuple[list[dict], dict, float]:
    """One job's rows, the bytes each rack's links carried in all (``{rack: (up, down)}``), and the
    load average when it started."""
    racks, spec = TOPOLOGIES[topology]
    net = network(topology)
    mode, M, aware = JOBS[name]
    peers = mode == "exchange"
    rates = ["--worker-down-mbit", f"{net.down:g}", "--worker-up-mbit", f"{net.up:g}",
             "--rack-up-mbit", f"{net.rack_up:g}", "--rack-down-mbit", f"{net.rack_down:g}"]  # fmt: skip
    shape = ["--peers"] if peers else ["--master-up-mbit", f"{net.master:g}"]
    extra = GROUP if net.multicast and mode in ("coded", "split") else []
    given = ["--network", spec] if aware else []
    N = args.mib * (1 << 20) // args.record_bytes
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            str(CLUSTER), "-K", "8", *shape, "--racks", racks, *rates, "--mtu", "65535", "--timeout",
            str(args.timeout), "--", sys.executable, "-m", "mpi4py", "-m", "coded_shuffle.mpi_program",
            "--points", str(N), "--record-bytes", str(args.record_bytes), "--transitions", str(epochs),
            "--mode", mode, "--storage", str(M), *given, *extra, "--json", str(out),
        ]  # fmt: skip
        load = os.getloadavg()[0]
        env = {**os.environ, "PYTHON": sys.executable}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, check=False, timeout=args.timeout + 60
        )
        if proc.returncode:
            sys.exit(f"netns_racks.py: {topology} {name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    if not all(r["verified"] for r in rows):
        sys.exit(f"netns_racks.py: {topology} {name}: a transition was not verified")
    counted = {}
    for line in proc.stderr.splitlines():
        if line.startswith("links: rack"):
            rack, _, up, _, down, _ = line.split()[1:]
            counted[rack] = (int(up), int(down))
    return rows, counted, load


def plans(topology: str, name: str, N: int, epochs: int, record_bytes: int) -> list[dict]:
    """Per transition ``1..epochs``: the payload bytes the plan sends out of and into each rack,
    and, for the exchange, the busiest link's time of its senders and the bound (seconds)."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.engine.state import storage_pieces
    from coded_shuffle.orders import OrderSpec, auto_order

    net = network(topology)
    mode, M, aware = JOBS[name]
    K, R = 8, len(net.racks)
    rack = net.rack_of()
    scheme = scheme_for("exchange", K=K, storage=M, peers=True, record_bytes=record_bytes,
                        network=net if aware else None)  # fmt: skip
    # the job's own placement: with racks given, the pieces placed across them
    schedule = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(auto_order("auto", N)), scheme=scheme)
    width = storage_pieces(record_bytes, K, M)[1]
    out, prev = [], schedule.epoch(0)
    for t in range(1, epochs + 1):
        nxt = schedule.epoch(t, prev)
        _, wanter, holders, assigned = scheme.exchange_plan(prev.held, nxt.held)
        sender = np.asarray(assigned.sender)
        away = rack[sender] != rack[wanter]
        if mode == "uncoded":  # every moved record from the master, on the spine
            plan = {"up": [0] * R, "down": np.bincount(rack[wanter], minlength=R) * width}
        else:
            plan = {"up": np.bincount(rack[sender[away]], minlength=R) * width,
                    "down": np.bincount(rack[wanter[away]], minlength=R) * width}  # fmt: skip
        if mode == "exchange":
            plan |= exchange_times(net, rack, wanter, holders, assigned, width)
        out.append(plan)
        prev = nxt
    return out


def exchange_times(net, rack, wanter, holders, assigned, width: int) -> dict:  # type: ignore[no-untyped-def]
    """The busiest link's time of the senders ``assigned`` and the bound, in seconds."""
    K, R = rack.size, int(rack.max()) + 1
    Bps = {k: v * 1e6 / 8 for k, v in (("up", net.up), ("down", net.down), ("rack_up", net.rack_up),
                                        ("rack_down", net.rack_down))}  # fmt: skip
    sender = np.asarray(assigned.sender)
    away = rack[sender] != rack[wanter]
    busiest = max(
        np.bincount(sender, minlength=K).max() * width / Bps["up"],
        np.bincount(wanter, minlength=K).max() * width / Bps["down"],
        np.bincount(rack[sender[away]], minlength=R).max(initial=0) * width / Bps["rack_up"],
        np.bincount(rack[wanter[away]], minlength=R).max(initial=0) * width / Bps["rack_down"],
    )
    members = np.array([[(int(h) >> w) & 1 for w in range(K)] for h in holders], dtype=bool)
    inside = np.stack([members[:, rack == r].any(axis=1) for r in range(R)], axis=1)  # held in rack r
    outside = np.stack([members[:, rack != r].any(axis=1) for r in range(R)], axis=1)
    bound = [np.bincount(wanter, minlength=K).max() * width / Bps["down"],
             float(assigned.upload_bound) * width / Bps["up"]]  # fmt: skip
    sizes = np.bincount(rack, minlength=R)
    for r in range(R):
        wants_here = rack[wanter] == r
        bound.append(int((wants_here & ~inside[:, r]).sum()) * width / Bps["rack_down"])
        only_here = ~wants_here & ~outside[:, r]
        bound.append(int(only_here.sum()) * width / min(Bps["rack_up"], sizes[r] * Bps["up"]))
    return {"predicted": float(busiest), "bound": float(max(bound))}


def steady(values: list[float]) -> float:
    """The median over transitions 2..E (the first alone if there is one)."""
    return float(statistics.median(values[1:] or values))


def measure(topology: str, name: str, args: argparse.Namespace) -> dict:
    """One job of ``E`` transitions and one of a single transition: times, predictions, the bytes
    between racks a transition, measured and planned."""
    mode, M, aware = JOBS[name]
    rows, total, load = job(topology, name, args, args.epochs)
    _, first, _ = job(topology, name, args, 1)
    per = {r: [(a - b) / (args.epochs - 1) for a, b in zip(total[r], first[r], strict=True)] for r in total}
    N, R = rows[0]["N"], len(total)
    out = {"name": name, "mode": mode, "load": load, "seconds": steady([r["seconds"] for r in rows]),
           "deliver": steady([r["timings"]["deliver"] for r in rows]),
           "rack_up": sum(v[0] for v in per.values()), "rack_down": sum(v[1] for v in per.values()),
           "busiest_rack": max(max(v) for v in per.values()), "per_rack": per}  # fmt: skip
    if mode in ("exchange", "uncoded"):
        planned = plans(topology, name, N, args.epochs, args.record_bytes)[1:]
        out["plan_up"] = float(np.mean([sum(p["up"]) for p in planned]))
        out["plan_down"] = float(np.mean([sum(p["down"]) for p in planned]))
    elif mode == "coded":  # the frames once on every rack link they cross
        wire = float(np.mean([r["wire_bytes"] for r in rows[1:]]))
        out["plan_up"], out["plan_down"] = (0.0 if network(topology).multicast else (R - 1) * wire), R * wire
    if M == 1:
        out["predicted"] = steady([r["predicted_seconds"][mode] or float("nan") for r in rows])
        out["bound"] = steady([r["time_bound_seconds"] for r in rows])
        out["binding"] = rows[-1]["binding_links"][mode]
    else:
        planned = plans(topology, name, N, args.epochs, args.record_bytes)[1:]
        out["predicted"] = steady([0.0] + [p["predicted"] for p in planned])
        out["bound"] = steady([0.0] + [p["bound"] for p in planned])
        out["binding"] = "-"
    return out


def chosen(topology: str, args: argparse.Namespace) -> str:
    """The mode ``run --mode auto`` chooses on the topology's SPEC for the job's first transition."""
    from coded_shuffle.engine.schedule import predicted_times
    from coded_shuffle.orders import OrderSpec, auto_order

    N = args.mib * (1 << 20) // args.record_bytes
    t = predicted_times(N, 8, seed=0, spec=OrderSpec(auto_order("auto", N)), epoch=0,
                        record_bytes=args.record_bytes, network=network(topology))  # fmt: skip
    return t.choice


def show(topology: str, row: dict) -> None:
    def mb(key: str) -> str:
        return f"{row[key] / 1e6:.2f}" if key in row else "-"

    pred = "-" if row["predicted"] != row["predicted"] else f"{row['predicted']:.3f}"
    print(f"{topology:>4} {row['name']:>20} {row['seconds']:>8.3f} {row['deliver']:>8.3f} {pred:>7} "
          f"{row['bound']:>7.3f} {str(row['binding']):>26} {row['rack_up'] / 1e6:>8.2f} {mb('plan_up'):>8} "
          f"{row['rack_down'] / 1e6:>8.2f} {mb('plan_down'):>8} {row['busiest_rack'] / 1e6:>8.2f} "
          f"{row['load']:>5.1f}", flush=True)  # fmt: skip


def verdicts(topology: str, rows: dict[str, dict], pick: str) -> bool:
    met = True
    singles = [n for n in ("coded", "uncoded", "exchange", "split") if n in rows]
    if "auto" in rows:
        best = min(singles, key=lambda n: rows[n]["seconds"])
        gap = rows["auto"]["seconds"] / rows[best]["seconds"] - 1
        met &= gap <= 0.10
        print(f"{topology}: auto chose {pick}, the fastest measured is {best}: auto {gap:+.1%} (target "
              f"within 10 %: {'met' if gap <= 0.10 else 'NOT met'})")  # fmt: skip
    if "exchange M=2 racks" not in rows or "exchange M=2 blind" not in rows:
        return met
    aware, blind = rows["exchange M=2 racks"], rows["exchange M=2 blind"]
    cross = aware["rack_up"] / blind["rack_up"]
    plan = aware["plan_up"] / blind["plan_up"]
    fast, deliver = blind["seconds"] / aware["seconds"], blind["deliver"] / aware["deliver"]
    pred = blind["predicted"] / aware["predicted"]
    line = (f"{topology}: M = 2, senders on the racks against blind to them: {cross:.3f} x the bytes up the "
            f"racks' links (plan {plan:.3f}), the delivery {deliver:.2f} x faster (predicted {pred:.2f} x; "
            f"with decoding and checks {fast:.2f} x)")  # fmt: skip
    if topology == "2x4":
        ok = cross <= 0.6 and deliver >= 1.3
        met &= ok
        line += f"; targets <= 0.6 and >= 1.3: {'met' if ok else 'NOT met'}"
    print(line)
    return met


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--topologies", default=",".join(TOPOLOGIES))
    p.add_argument("--mib", type=int, default=128, help="dataset size in MiB (default 128)")
    p.add_argument("--epochs", type=int, default=3, help="transitions a job, the first a warm-up (default 3)")
    p.add_argument("--timeout", type=int, default=900)
    p.add_argument("--record-bytes", type=int, default=RECORD_BYTES,
                   help=f"bytes a record (default {RECORD_BYTES}; 1024: stored whole with M = 2)")
    p.add_argument("--jobs", default=",".join(JOBS),
                   help="the jobs to run, of: " + ", ".join(JOBS) + " (default all; auto after all modes)")
    p.add_argument("--json", action="store_true", help="also print every row as a JSON line")
    args = p.parse_args()
    unknown = [n for n in (j.strip() for j in args.jobs.split(",")) if n not in JOBS]
    if unknown:
        sys.exit(f"netns_racks.py: --jobs: unknown job {unknown[0]!r}, not one of: {', '.join(JOBS)}")
    if os.geteuid() != 0:
        sys.exit("netns_racks.py: needs root (network namespaces and tc)")
    if args.epochs < 2:
        sys.exit("netns_racks.py: --epochs must be at least 2 (the bytes a transition: E less one)")
    print(f"K = 8, {args.mib} MiB of {args.record_bytes} B records; seconds: medians over transitions "
          f"2..{args.epochs}; MB: a transition's, summed over the racks")  # fmt: skip
    print(f"{'topo':>4} {'job':>20} {'seconds':>8} {'deliver':>8} {'pred s':>7} {'bound s':>7} "
          f"{'binding link':>26} {'up MB':>8} {'plan up':>8} {'down MB':>8} {'plan dn':>8} {'busiest':>8} "
          f"{'load':>5}")  # fmt: skip
    met = True
    for topology in args.topologies.split(","):
        asked = [n.strip() for n in args.jobs.split(",")]
        names = [n for n in JOBS if n in asked and (n != "split" or network(topology).multicast)]
        rows = {}
        for name in names:
            rows[name] = measure(topology, name, args)
            show(topology, rows[name])
        pick = chosen(topology, args)
        if not all(m in rows for m in ("coded", "uncoded", "exchange")):  # auto among the modes run
            met &= verdicts(topology, rows, pick)
            continue
        auto, _, load = job(topology, pick, args, args.epochs)
        rows["auto"] = {**rows[pick], "name": f"auto={pick}", "load": load,
                        "seconds": steady([r["seconds"] for r in auto]),
                        "deliver": steady([r["timings"]["deliver"] for r in auto])}  # fmt: skip
        show(topology, rows["auto"])
        if args.json:
            for row in rows.values():
                print(json.dumps({"topology": topology, **row}))
        met &= verdicts(topology, rows, pick)
    print("all targets met" if met else "some targets NOT met")


if __name__ == "__main__":
    main()
