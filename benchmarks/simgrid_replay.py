"""Each mode's transfers replayed on SimGrid (``coded_shuffle.engine.replay``) against the
predicted times, the bound, the namespaced hosts' measurements, and ``--mode auto``'s choice.

Two parts:

- ``calibrate``: the five topologies of ``benchmarks/network_choice.py`` at ``K = 4`` and ``8``,
  64 MiB of 1 KiB records, the median of transitions 2 and 3 as there, against the seconds that
  benchmark measured on namespaced hosts (docs/benchmarks.md, "Which delivery wins on which
  network", copied below in ``MEASURED``; those include each worker's decoding and the check of
  every record, which the replay does not count): the error of each mode;
- ``scale``: ``K = 64, 256, 1024`` (default), ``N = 100 K`` records of 1 KiB, the first
  transition of random reshuffles, on a star (``switch``: every port 1000 Mbit/s; ``edge``: worker
  uplinks 100, the master multicasting) and on a two-level fat tree of the same ports, racks of
  16 workers whose uplink and downlink to the core carry 4000 Mbit/s (oversubscribed 4:1): each
  mode's simulated time against its predicted time (the star's model, which has no racks) and
  the bound (on the fat tree also each rack's downlink cut: what a rack's workers miss that none
  of them holds crosses it), and ``auto``'s choice against the simulated fastest. At ``K <= 64``
  the exchange also runs all at once (every pair's flow together) beside its rounds.

With ``--measured FILE`` (the JSON lines of ``network_choice.py --json --epochs 3``) the
calibration is against that run's figures: ``--figure seconds`` as above, or ``--figure deliver``,
the slowest worker's delivery alone (no barrier, decoding or check), what the replay simulates.

Run: ``python benchmarks/simgrid_replay.py [calibrate|scale|both] [--workers 64,256,1024]
[--points-per-worker 100] [--topologies switch,edge] [--measured FILE --figure seconds|deliver]``;
needs SimGrid's Python module (``apt-get install python3-simgrid``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from coded_shuffle.engine.replay import Racks, replay, simgrid_available
from coded_shuffle.engine.schedule import EpochSchedule
from coded_shuffle.engine.schemes import scheme_for
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.network import Network, predict
from coded_shuffle.orders import OrderSpec, auto_order

RECORD_BYTES = 1024
#: network_choice.py's topologies: their SPECs.
TOPOLOGIES = {
    "switch": "master=1000,up=1000,down=1000",
    "edge": "master=1000,up=100,down=1000,multicast",
    "fast-master": "master=10000,up=100,down=1000",
    "chain": "master=1000,up=10000,down=1000",
    "narrow-down": "master=1000,up=100,down=300,multicast,snooping",
}
#: Seconds measured on namespaced hosts by network_choice.py (docs/benchmarks.md), per topology and
#: K: coded, uncoded, exchange, split (None: not run).
MEASURED = {
    ("switch", 4): (0.228, 0.423, 0.143, None),
    ("switch", 8): (0.271, 0.490, 0.113, None),
    ("edge", 4): (0.246, 0.420, 1.093, 0.225),
    ("edge", 8): (0.288, 0.490, 0.671, 0.249),
    ("fast-master", 4): (2.080, 0.123, 1.082, None),
    ("fast-master", 8): (2.479, 0.085, 0.650, None),
    ("chain", 4): (0.229, 0.422, 0.143, None),
    ("chain", 8): (0.271, 0.488, 0.105, None),
    ("narrow-down", 4): (0.382, 0.426, 1.100, 0.436),
    ("narrow-down", 8): (0.302, 0.490, 0.651, 0.287),
}
MODES = ("coded", "uncoded", "exchange", "split")


def matrices(N: int, K: int, transitions: range) -> list[np.ndarray]:
    """The shuffle matrices of the given transitions of the engine's epochs (seed 0)."""
    schedule = EpochSchedule(
        N=N, K=K, seed=0, spec=OrderSpec(auto_order("auto", N)), scheme=scheme_for("coded", K=K)
    )
    out, previous = [], schedule.epoch(0)
    for t in range(max(transitions) + 1):
        following = schedule.epoch(t + 1, previous)
        if t in transitions:
            out.append(np.asarray(shuffle_matrix(previous.placement, following.placement)))
        previous = following
    return out


def measured_from(path: str, figure: str) -> dict[tuple[str, int], tuple[float | None, ...]]:
    """``MEASURED``'s form from the JSON lines of ``network_choice.py --json`` (its rows, a job a
    line): per topology and ``K``, each mode's median over transitions 2 and 3 of ``figure``:
    ``seconds`` (a barrier, the delivery, decoding and checks) or ``deliver`` (the slowest
    worker's delivery alone, ``timings.deliver``)."""
    import json

    got: dict[tuple[str, int], dict[str, float]] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("{"):
                continue
            job = json.loads(line)
            if job["mode"] not in MODES:  # auto=..., a mode run again
                continue
            rows = [r for r in job["rows"] if r["epoch"] in (2, 3)]
            value = [r["seconds"] if figure == "seconds" else r["timings"]["deliver"] for r in rows]
            got.setdefault((job["topology"], int(job["K"])), {})[job["mode"]] = statistics.median(value)
    return {key: tuple(modes.get(m) for m in MODES) for key, modes in got.items()}


def calibrate(measured: dict[tuple[str, int], tuple[float | None, ...]], what: str) -> None:
    N = 64 * (1 << 20) // RECORD_BYTES
    print(
        f"calibration against {what}: {N} records of {RECORD_BYTES} B, median of transitions 2 and 3; "
        "error = simulated / measured - 1"
    )
    print(
        f"{'topology':>12} {'K':>2} {'mode':>9} {'measured s':>10} {'simulated s':>11} "
        f"{'predicted s':>11} {'error':>7}"
    )
    errors: dict[str, list[float]] = {m: [] for m in MODES}
    rows: list[tuple[int, str, float, float, str]] = []  # (K, mode, measured, simulated, topology)
    for K in (4, 8):
        Ss = matrices(N, K, range(1, 3))
        for name, spec in TOPOLOGIES.items():
            net = Network.parse(spec)
            sims = [replay(S, record_bytes=RECORD_BYTES, network=net).simulated_seconds for S in Ss]
            preds = [predict(S, record_bytes=RECORD_BYTES, network=net).predicted_seconds for S in Ss]
            for mode, seen in zip(MODES, measured.get((name, K), (None,) * len(MODES)), strict=True):
                if seen is None or mode not in sims[0]:
                    continue
                sim = statistics.median(s[mode] for s in sims)
                pred = statistics.median(p[mode] for p in preds)
                err = sim / seen - 1
                errors[mode].append(err)
                rows.append((K, mode, seen, sim, name))
                print(f"{name:>12} {K:>2} {mode:>9} {seen:>10.3f} {sim:>11.3f} {pred:>11.3f} {err:>+7.1%}")
    for mode, errs in errors.items():
        if errs:
            mid, near = statistics.median(errs), sum(abs(e) <= 0.15 for e in errs)
            print(f"{mode}: error {min(errs):+.1%} to {max(errs):+.1%}, median {mid:+.1%}, {near} of "
                  f"{len(errs)} within 15 %")  # fmt: skip
    # Calibrated: measured ~ simulated / efficiency + a fixed cost a transition, fitted by least
    # squares at each K over every row (in sample): the links' efficiency and the barrier, decoding
    # and check that the replay does not simulate.
    calibrated: dict[str, list[float]] = {m: [] for m in MODES}
    held_out: dict[str, list[float]] = {m: [] for m in MODES}
    for K in (4, 8):
        mine = [r for r in rows if r[0] == K]
        sim, meas = np.array([r[3] for r in mine]), np.array([r[2] for r in mine])
        slope, cost = np.polyfit(sim, meas, 1)
        print(f"K = {K}: fitted efficiency {1 / slope:.3f}, fixed cost {cost * 1e3:.1f} ms a transition")
        for _, mode, m, s_, _ in mine:
            calibrated[mode].append((s_ * slope + cost) / m - 1)
        for topology in TOPOLOGIES:  # fitted on the other topologies, tried on this one
            rest = [r for r in mine if r[4] != topology]
            a, c = np.polyfit([r[3] for r in rest], [r[2] for r in rest], 1)
            for _, mode, m, s_, _ in (r for r in mine if r[4] == topology):
                held_out[mode].append((s_ * a + c) / m - 1)
    for label, table in (("calibrated", calibrated), ("held out", held_out)):
        for mode, errs in table.items():
            if errs:
                print(f"{mode} {label}: error {min(errs):+.1%} to {max(errs):+.1%}, "
                      f"median {statistics.median(errs):+.1%}, {sum(abs(e) <= 0.15 for e in errs)} of "
                      f"{len(errs)} within 15 %")  # fmt: skip


def rack_bound(S: np.ndarray, hosts: int, down_mbit: float) -> float:
    """Seconds of the busiest rack downlink cut: the bytes a rack's workers miss that none holds."""
    K = S.shape[0]
    worst = 0
    for r in range(0, K, hosts):
        inside = slice(r, min(K, r + hosts))
        into = int(S[:, inside].sum()) - int(S[inside, inside].sum())
        worst = max(worst, into)
    return worst * RECORD_BYTES / (down_mbit * 1e6 / 8)


def scale(workers: list[int], per_worker: int, topologies: list[str]) -> None:
    print(f"scale: N = {per_worker} K records of {RECORD_BYTES} B, the first transition; fat tree: "
          "racks of 16, 4000 Mbit/s to the core (4:1)")  # fmt: skip
    print(
        f"{'platform':>14} {'K':>5} {'mode':>16} {'predicted s':>11} {'simulated s':>11} "
        f"{'sim/pred':>8} {'bound s':>9}"
    )
    for K in workers:
        (S,) = matrices(per_worker * K, K, range(0, 1))
        for name in topologies:
            net = Network.parse(TOPOLOGIES[name])
            t = predict(S, record_bytes=RECORD_BYTES, network=net)
            for racks in (None, Racks(hosts=16, up=4000, down=4000)):
                platform = f"{name}{'' if racks is None else '+racks'}"
                bound = t.bound_seconds if racks is None else max(t.bound_seconds, rack_bound(S, 16, 4000))
                wall = time.perf_counter()
                r = replay(S, record_bytes=RECORD_BYTES, network=net, racks=racks)
                wall = time.perf_counter() - wall
                sims = dict(r.simulated_seconds)
                if K <= 64:
                    peers = Network.parse(f"up={net.up:g},down={net.down:g}")
                    once = replay(
                        S, record_bytes=RECORD_BYTES, network=peers, racks=racks, schedule="at-once"
                    )
                    sims["exchange at once"] = once.simulated_seconds["exchange"]
                for mode, sim in sims.items():
                    pred = t.predicted_seconds[mode.split()[0]]
                    print(
                        f"{platform:>14} {K:>5} {mode:>16} {pred:>11.4g} {sim:>11.4g} {sim / pred:>8.3f} "
                        f"{bound:>9.4g}"
                    )
                fastest = min(r.simulated_seconds, key=lambda m: r.simulated_seconds[m])
                gap = r.simulated_seconds[t.choice] / r.simulated_seconds[fastest] - 1
                print(f"{platform:>14} {K:>5} {'auto':>16}   chose {t.choice}, simulated fastest {fastest}: "
                      f"{gap:+.1%}; {r.flows} flows, {wall:.1f} s of wall time", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("part", nargs="?", default="both", choices=("calibrate", "scale", "both"))
    p.add_argument("--workers", default="64,256,1024")
    p.add_argument("--points-per-worker", type=int, default=100)
    p.add_argument("--topologies", default="switch,edge", help="of the scale part (default switch,edge)")
    p.add_argument("--measured", metavar="FILE", help=(
        "calibrate against the JSON lines of network_choice.py --json --epochs 3 in FILE (default: the "
        "figures of docs/benchmarks.md, MEASURED)"))  # fmt: skip
    p.add_argument("--figure", choices=("seconds", "deliver"), default="seconds", help=(
        "with --measured: the transition's seconds (decoding and checks included) or the slowest "
        "worker's delivery alone (default seconds)"))  # fmt: skip
    args = p.parse_args()
    if not simgrid_available():
        sys.exit(
            "simgrid_replay.py: SimGrid's Python module is not installed (apt-get install python3-simgrid)"
        )
    if args.part in ("calibrate", "both"):
        if args.measured is None:
            calibrate(MEASURED, "docs/benchmarks.md's seconds")
        else:
            calibrate(measured_from(args.measured, args.figure), f"{args.measured}'s {args.figure}")
    if args.part in ("scale", "both"):
        scale([int(k) for k in args.workers.split(",")], args.points_per_worker, args.topologies.split(","))


if __name__ == "__main__":
    main()
