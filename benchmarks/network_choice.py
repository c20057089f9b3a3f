"""Which delivery wins on which network: every mode, and ``--mode auto``, on four shaped topologies
of namespaced hosts (``mpi/netns_cluster.sh``), in one run.

Topologies (rates in Mbit/s; 0 is unshaped; the SPEC each job is given with ``--network``):

- ``switch``: every port 1000 both ways, no multicast (``master=1000,up=1000,down=1000``): the
  exchange should win;
- ``edge``: master 1000, worker downlinks 1000, worker uplinks 100, the master's broadcast as UDP
  multicast (``run --multicast``, datagrams of 65507 bytes on links of MTU 65535, never
  fragmented, paced at 950): the coded multicast should win;
- ``fast-master``: the master's uplink unshaped, worker downlinks 1000, uplinks 100, no multicast
  (``master=10000,up=100,down=1000``);
- ``chain``: master 1000, downlinks 1000, worker uplinks unshaped, ``MPI_Bcast`` a chain (the
  paper's shared link; ``master=1000,up=10000,down=1000``);
- ``narrow-down``: master 1000, worker downlinks 300, uplinks 100, multicast through a switch that
  forwards each group to its members alone (IGMP snooping, ``netns_cluster.sh --igmp-snooping``;
  ``master=1000,up=100,down=300,multicast,snooping``): the master's scoped groups (a pair's XOR
  symbols to the pair) spare each downlink what it does not decode. ``coded-all`` is the coded
  multicast with every datagram to one group (``--multicast-scope all``, paced to the downlinks,
  which then carry every byte): the baseline of the scoping.

For each topology and ``K`` (default 4 and 8): ``coded``, ``uncoded``, ``exchange`` (a job of
peers, ``K`` hosts) and, where the master multicasts, ``split`` (the master's coded multicast of a
share of the moved records while the workers exchange the rest), each its own job, then
``auto``: the mode ``coded-shuffle run --mode auto`` chooses for that SPEC
(:func:`coded_shuffle.engine.schedule.predicted_times`, the function the launcher calls), run once
more as a job of its own. Each figure is the median over the
transitions after the first of ``seconds`` (a barrier, the delivery, decoding and the check of
every record, repairs included); every transition verified. Targets: ``auto`` within 10 % of the
fastest mode measured; the predicted times in the order of the measured ones; on ``edge`` at
``K = 8`` the coded multicast (alone or in the split) at least 1.3 x faster than the best mode
without it (uncoded, exchange); on ``narrow-down`` at ``K = 8`` the scoped coded multicast at
least 1.3 x faster than ``coded-all``.

``--busy B`` keeps ``B`` busy processes (``python -c 'while True: pass'``) beside every job, so
that the two cores are shared as on a loaded host; then the target on ``edge`` at ``K = 8`` is the
split and ``auto`` within 15 % of the fastest mode. ``--repeat R`` runs each mode's job ``R``
times, the modes in turn, and takes the median of the jobs' figures (from one job to the next
the same mode's time varies by up to 2.5 x on loaded cores).

``--modes`` runs only the modes listed (``auto`` among them); ``--previous DIR`` runs the modes of
``--previous-modes`` (default ``split,auto``) from ``DIR`` too, a checkout of earlier code, each
job in turn with this code's ("previous MODE" in the table). Each row gives the slowest worker's
delivery, the tail after it (decoding, the check) and the CPU of the job's processes together.

Needs root. Run: ``python benchmarks/network_choice.py [--workers 4,8] [--mib 64] [--epochs 5]
[--busy 4] [--repeat 3] [--modes coded,split,auto] [--previous DIR] [--tcp-cc auto]``; ``--tcp-cc
system`` keeps the machine's own congestion control (the runs in docs/benchmarks.md before
the hosts' congestion control was set were made so).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "mpi" / "netns_cluster.sh"
RECORD_BYTES = 1024

#: name: (master up, worker down, worker up, multicast, SPEC)
TOPOLOGIES = {
    "switch": (1000, 1000, 1000, False, "master=1000,up=1000,down=1000"),
    "edge": (1000, 1000, 100, True, "master=1000,up=100,down=1000,multicast"),
    "fast-master": (0, 1000, 100, False, "master=10000,up=100,down=1000"),
    "chain": (1000, 1000, 0, False, "master=1000,up=10000,down=1000"),
    "narrow-down": (1000, 300, 100, True, "master=1000,up=100,down=300,multicast,snooping"),
}
MODES = ("coded", "uncoded", "exchange")
#: What a topology whose master multicasts runs besides.
MULTICAST_MODES = ("split",)


#: What a topology whose switch snoops runs besides: its baseline, every datagram to one group.
SNOOPING_MODES = ("coded-all",)


def modes_of(topology: str) -> tuple[str, ...]:
    spec = TOPOLOGIES[topology][4]
    return (
        MODES + (MULTICAST_MODES if TOPOLOGIES[topology][3] else ())
        + (SNOOPING_MODES if "snooping" in spec else ())
    )  # fmt: skip


def job(topology: str, K: int, name: str, args: argparse.Namespace, *, root: Path = ROOT) -> list[dict]:
    """The rows of one job of mode ``name`` (``coded-all`` the coded multicast to one group), run
    from the checkout ``root``."""
    up_m, down, up, multicast, spec = TOPOLOGIES[topology]
    N = args.mib * (1 << 20) // RECORD_BYTES
    mode = "coded" if name == "coded-all" else name
    shape = ["--peers"] if mode == "exchange" else ["--master-up-mbit", str(up_m)]
    if "snooping" in spec:
        shape.append("--igmp-snooping")
    extra = []
    if multicast and mode in ("coded", "split"):
        extra = ["--multicast", "239.77.9.1:7100", "--datagram-bytes", "65507", "--link-mbps", "950"]
    if name == "coded-all":  # one group: every downlink carries every datagram, paced to them
        extra += ["--multicast-scope", "all"]
        spec = spec.replace(",snooping", "")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "rows.jsonl"
        cmd = [
            str(CLUSTER), "-K", str(K), *shape, "--worker-down-mbit", str(down), "--worker-up-mbit",
            str(up), "--mtu", "65535", "--tcp-cc", args.tcp_cc, "--timeout", str(args.timeout), "--",
            sys.executable, "-m", "mpi4py",
            "-m", "coded_shuffle.mpi_program", "--points", str(N), "--record-bytes", str(RECORD_BYTES),
            "--transitions", str(args.epochs), "--mode", mode, "--network", spec, *extra, "--json", str(out),
        ]  # fmt: skip
        env = {**os.environ, "PYTHON": sys.executable, "PYTHONPATH": str(root)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=root, check=False, timeout=args.timeout + 60
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode:
            sys.exit(f"network_choice.py: {topology} K = {K} {name} failed:\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        for r in rows:  # the whole job's CPU (every rank, start-up included), a transition's share
            r["job_cpu_seconds"] = cpu
    if not all(r["verified"] for r in rows):
        sys.exit(f"network_choice.py: {topology} K = {K} {name}: a transition was not verified")
    return rows


def steady(rows: list[dict], key: str = "seconds") -> float:
    """The median of ``key`` (a report field, or a timing) over the transitions after the first."""
    return statistics.median(r[key] if key in r else r["timings"][key] for r in (rows[1:] or rows))


def chosen(topology: str, K: int, args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    from coded_shuffle.engine.schedule import predicted_times
    from coded_shuffle.network import Network
    from coded_shuffle.orders import OrderSpec, auto_order

    N = args.mib * (1 << 20) // RECORD_BYTES
    net = Network.parse(TOPOLOGIES[topology][4])
    t = predicted_times(N, K, seed=0, spec=OrderSpec(auto_order("auto", N)), epoch=0,
                        record_bytes=RECORD_BYTES, network=net)  # fmt: skip
    return t.choice, t.predicted_seconds


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="4,8")
    p.add_argument("--topologies", default=",".join(TOPOLOGIES))
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("--json", action="store_true", help="also print every job's rows as JSON lines")
    p.add_argument("--busy", type=int, default=0, help="busy processes beside every job")
    p.add_argument("--repeat", type=int, default=1, help="jobs a mode, in turn; the median of theirs")
    p.add_argument("--modes", default="", help="only these modes (comma-separated, 'auto' included)")
    p.add_argument("--previous", type=Path, help="a checkout of earlier code: its --previous-modes beside")
    p.add_argument("--previous-modes", default="split,auto", help="the modes run from --previous too")
    p.add_argument("--tcp-cc", default="auto",
                   help="the hosts' TCP congestion control (netns_cluster.sh --tcp-cc: auto, system, a name)")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("network_choice.py: needs root (network namespaces and tc)")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        run(args)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def jobs(topology: str, K: int, pick: str, args: argparse.Namespace) -> dict[str, list[list[dict]]]:
    """Every job's rows for one topology and ``K``, by mode (``auto`` runs ``pick``; ``previous
    MODE`` is that mode from the checkout ``--previous``), ``--repeat`` jobs a mode, in turn."""
    wanted = args.modes.split(",") if args.modes else [*modes_of(topology), "auto"]
    names = [m for m in (*modes_of(topology), "auto") if m in wanted]
    if args.previous is not None:
        names += [f"previous {m}" for m in args.previous_modes.split(",") if m in wanted]
    runs: dict[str, list[list[dict]]] = {m: [] for m in names}
    for _ in range(args.repeat):  # the modes' jobs in turn, so that a slow spell hits each
        for m in runs:
            root = args.previous.resolve() if m.startswith("previous ") else ROOT
            mode = m.removeprefix("previous ")
            runs[m].append(job(topology, K, pick if mode == "auto" else mode, args, root=root))
    return runs


def run(args: argparse.Namespace) -> None:
    met = True
    print(f"{args.mib} MiB of {RECORD_BYTES} B records; seconds: median over transitions 2..{args.epochs} "
          f"(and over {args.repeat} jobs a mode); {args.busy} busy processes beside; delivery: the "
          "slowest worker's; tail: the transition after it (decoding, the check); job CPU: every "
          "process of a job together, start-up included")  # fmt: skip
    print(f"{'topology':>12} {'K':>2} {'mode':>16} {'measured s':>11} {'delivery s':>11} {'tail s':>7} "
          f"{'predicted s':>12} {'bound s':>9} {'job CPU s':>10}")  # fmt: skip
    for K in (int(k) for k in args.workers.split(",")):
        for topology in args.topologies.split(","):
            pick, predicted = chosen(topology, K, args)
            runs = jobs(topology, K, pick, args)
            rows = {m: rs[0] for m, rs in runs.items()}
            measured = {m: statistics.median(steady(r) for r in rs) for m, rs in runs.items()}
            deliver = {m: statistics.median(steady(r, "deliver") for r in rs) for m, rs in runs.items()}
            if "coded-all" in rows:  # predicted on the same network, its switch flooding every group
                predicted["coded-all"] = rows["coded-all"][0]["predicted_seconds"]["coded"]
            for m, r in rows.items():
                mode = m.removeprefix("previous ")
                pred = r[0]["predicted_seconds"].get({"auto": pick, "coded-all": "coded"}.get(mode, mode))
                name = m.replace("auto", f"auto={pick}")
                shown = "-" if pred is None else f"{pred:.3f}"  # None: the split where it does not pay
                tail = measured[m] - deliver[m]
                cpu = statistics.median(rs[0]["job_cpu_seconds"] for rs in runs[m])
                bound = r[0]["time_bound_seconds"]
                print(f"{topology:>12} {K:>2} {name:>16} {measured[m]:>11.3f} {deliver[m]:>11.3f} "
                      f"{tail:>7.3f} {shown:>12} {bound:>9.3f} {cpu:>10.1f}")  # fmt: skip
                if args.json:
                    print(json.dumps({"topology": topology, "K": K, "mode": name, "rows": r}))
            met &= verdicts(topology, K, pick, predicted, measured, args)
    print("all targets met" if met else "some targets NOT met")


def verdicts(
    topology: str, K: int, pick: str, predicted: dict, measured: dict[str, float], args: argparse.Namespace
) -> bool:
    """Print the targets that the modes measured allow, and whether they are met."""
    met = True
    modes = [m for m in modes_of(topology) if m in measured]
    if not modes:
        return met
    best = min(modes, key=lambda m: measured[m])
    limit = 0.15 if args.busy else 0.10
    for m in ("auto", "split", "previous split", "previous auto"):
        if m in measured and (m != "split" or args.busy):
            gap = measured[m] / measured[best] - 1
            ok = gap <= limit
            met &= ok or m.startswith("previous")
            print(f"{'':>12} {m.replace('auto', f'auto={pick}')} {gap:+.1%} over the fastest mode measured, "
                  f"{best} ({'met' if ok else 'NOT met'}, target within {limit:.0%})")  # fmt: skip
    if len(modes) == len(modes_of(topology)):
        order_pred = sorted(modes, key=lambda m: predicted[m] if predicted[m] is not None else float("inf"))
        order_meas = sorted(modes, key=lambda m: measured[m])
        same = order_pred == order_meas
        met &= same
        print(f"{'':>12} predicted order {order_pred}, measured {order_meas} "
              f"({'same' if same else 'NOT the same'})")  # fmt: skip
    if "coded-all" in measured and "coded" in measured:
        gain = measured["coded-all"] / measured["coded"]
        met &= gain >= 1.3 or K != 8
        print(f"{'':>12} {topology}, K = {K}: the scoped groups {gain:.2f} x one group "
              "(target >= 1.3 at K = 8)")  # fmt: skip
    if topology == "edge" and K == 8 and {"coded", "split"} <= measured.keys():
        alone = measured["coded"] / measured["split"]
        print(f"{'':>12} edge, K = 8: the split {alone:.2f} x coded alone (target >= 1 idle)")
        met &= alone >= 1 or bool(args.busy)
        if {"uncoded", "exchange"} <= measured.keys():
            gain = min(measured["uncoded"], measured["exchange"]) / min(measured["coded"], measured["split"])
            met &= gain >= 1.3
            print(f"{'':>12} edge, K = 8: coded multicast {gain:.2f} x the best mode without it "
                  "(target >= 1.3)")  # fmt: skip
    return met


if __name__ == "__main__":
    main()
