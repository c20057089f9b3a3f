"""``coded-shuffle simulate --simulator simgrid``: each transition's deliveries replayed on SimGrid
(:mod:`coded_shuffle.engine.replay`), their simulated seconds beside the predicted ones."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .common import UsageError, check_sizes, network_option, order_spec, print_table

_COLUMNS = ("transition", "mode", "predicted s", "simulated s", "simulated/predicted", "bound s")


def _check(args: argparse.Namespace) -> Any:
    """The network, after refusing (one line naming the option) what the replay cannot run."""
    if args.network is None:
        raise UsageError("--simulator simgrid needs --network SPEC: the platform is built from it")
    if args.storage > 1:
        raise UsageError(f"--simulator simgrid replays one batch a worker, not --storage {args.storage}")
    if args.subpackets > 1:
        raise UsageError(f"--simulator simgrid replays whole records, not --subpackets {args.subpackets}")
    check_sizes(args)
    from ..engine.replay import simgrid_available

    if not simgrid_available():
        raise UsageError(
            "--simulator simgrid needs SimGrid's Python module: apt-get install python3-simgrid "
            "(Debian), or pip install simgrid"
        )
    return network_option(args)


def cmd_replay(args: argparse.Namespace) -> int:
    """Replay every mode the network runs, transition after transition; print the table (or one
    JSON object a transition) and what ``--mode auto`` chose against the simulated fastest."""
    from ..engine.replay import replay
    from ..engine.schedule import EpochSchedule
    from ..engine.schemes import scheme_for
    from ..matrix import shuffle_matrix
    from ..network import predict

    network = _check(args)
    spec = order_spec(args, args.points)
    K, N, B = args.workers, args.points, args.record_bytes
    schedule = EpochSchedule(N=N, K=K, seed=args.seed, spec=spec, scheme=scheme_for("coded", K=K))
    if not args.json:
        print(f"K = {K}, N = {N}, record = {B} B, seed = {args.seed}, order = {spec.name}, "
              f"network = {network}, simulator = SimGrid (a star of one switch, 10 us a link)")  # fmt: skip
    rows: list[list[str]] = []
    previous = schedule.epoch(0)
    for t in range(args.epochs):
        following = schedule.epoch(t + 1, previous)
        S = shuffle_matrix(previous.placement, following.placement)
        previous = following
        times = predict(S, record_bytes=B, network=network, strategy=args.strategy)
        result = replay(S, record_bytes=B, network=network, strategy=args.strategy)
        sim = result.simulated_seconds
        if args.json:
            print(json.dumps({"transition": t, **times.to_dict(), **result.to_dict()}), flush=True)
            continue
        for mode, seconds in sim.items():
            predicted = times.predicted_seconds[mode]
            ratio = f"{seconds / predicted:.3f}" if math.isfinite(predicted) and predicted else "-"
            rows.append(
                [str(t), mode, f"{predicted:.4g}", f"{seconds:.4g}", ratio, f"{times.bound_seconds:.4g}"]
            )
        gap = sim[times.choice] / sim[result.fastest] - 1 if times.choice in sim else math.nan
        rows.append([str(t), "auto", times.choice, result.fastest, f"{gap:+.1%}", "-"])
    if not args.json:
        print_table(iter(rows), _COLUMNS, sys.stdout)
        print("simulated: each mode's transfers replayed on SimGrid; the auto row: the mode of least")
        print("predicted time, the simulated fastest, and how much longer auto's choice took simulated.")
    return 0
