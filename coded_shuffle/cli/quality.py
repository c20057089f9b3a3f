"""``coded-shuffle quality``: quality and locality of one shard-aware epoch order."""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from .._progress import Progress
from ._parser import COMMANDS, add_deprecated
from .common import (
    UsageError,
    _add_shard_arguments,
    _at_least,
    _non_negative,
    _shifted,
    shard_options,
)


def _cmd_quality(args: argparse.Namespace) -> int:
    from ..orders import SHUFFLE_ALGORITHMS, quality_report
    from ..orders.quality import REPORT_STEPS

    names = ", ".join(sorted(SHUFFLE_ALGORITHMS))
    if args.order is None:
        raise UsageError(f"--order is required: one of {names}")
    if args.order not in SHUFFLE_ALGORITHMS:
        raise UsageError(f"--order must be one of {names}, not {args.order!r}")
    _at_least(args, shards=2, shard_size=1, canonical_nodes=1, block_size=1, batches=1, batch_size=1, seeds=1)
    if args.canonical_nodes > args.shards * args.shard_size:
        raise UsageError("--canonical-nodes must be at most the number of samples")
    seeds = f", {args.seeds} seeds" if args.seeds > 1 else ""
    with Progress(
        f"measuring {args.order} on {args.shards:,} shards x {args.shard_size:,} samples{seeds}",
        total=args.seeds * REPORT_STEPS,
        unit="steps",
    ) as bar:
        reports = [
            quality_report(
                args.order,
                **shard_options(args),
                batches=args.batches,
                batch_size=args.batch_size,
                seed=args.seed + k,
                epoch=args.start_epoch,
                progress=_shifted(bar.update, k * REPORT_STEPS),
            )
            for k in range(args.seeds)
        ]
    out = dict(reports[0])
    if args.seeds > 1:
        keys = ("mean_deviation_pct", "epoch_mean_deviation_pct", "longest_in_order_run", "seconds")
        out["over_seeds"] = {
            "seeds": [args.seed + k for k in range(args.seeds)],
            **{
                key: {
                    "mean": float(np.mean([r[key] for r in reports])),
                    "std": float(np.std([r[key] for r in reports], ddof=1)),
                    "max": float(np.max([r[key] for r in reports])),
                }
                for key in keys
            },
        }
    if args.json:
        print(json.dumps(out))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            if isinstance(value, float):
                value = f"{value:.4g}"
            elif isinstance(value, dict):
                value = json.dumps(value)
            print(f"{key.ljust(width)}  {value}")
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``quality`` command to the subcommands ``sub``."""
    quality = sub.add_parser(
        "quality",
        help=COMMANDS["quality"],
        description=(
            "Generate one shard-aware order on M shards of Z samples, the first half of kind A, the "
            "second of kind B, and report the deviation of the A share from 50% over the first "
            "batches and over the whole epoch, a decile chi-square test of the head, distinct shards "
            "per batch, shards per node, and the longest stretch left in shard order. The default "
            "is 10^7 samples (seconds); the streaming study's 10^8 is --shards 10000 (3.7 GB, up to 30 s)."
        ),
    )
    quality.add_argument(
        "--order", metavar="ORDER", help="the shard-aware order: naive, py1s, py2s, py1b, py1br or py1e"
    )
    add_deprecated(quality, "--algo", "--order", dest="order")
    _add_shard_arguments(quality, shards=1000, shard_size=10_000, block_size=1 << 18)
    quality.add_argument("--seed", type=_non_negative, default=0, help="seed (default 0)")
    quality.add_argument("--start-epoch", type=_non_negative, default=0, metavar="T",
                         help="the epoch whose order is measured (default 0)")  # fmt: skip
    add_deprecated(quality, "--epoch", "--start-epoch", dest="start_epoch", type=_non_negative, metavar="T")
    quality.add_argument(
        "--seeds", type=int, default=1, metavar="R", help="also summarize seeds S..S+R-1 (default 1)"
    )
    quality.add_argument("--json", action="store_true", help="one JSON object")
    quality.set_defaults(func=_cmd_quality)
