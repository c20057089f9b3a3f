"""``coded-shuffle plot``: loads against K, a leftover graph, the epoch orders' trade-off, the loads
against the storage, or the results of ``run --json``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .._progress import say
from ._parser import COMMANDS
from .common import (
    PROG,
    UsageError,
    _add_shard_arguments,
    _add_strategy_argument,
    _check_shard_setup,
    _non_negative,
    _Parser,
    _positive,
    compile_kernels,
    orders_bar,
    shard_options,
)
from .matrices import read_matrix


def _cmd_plot(args: argparse.Namespace) -> int:
    from .. import plots

    ext = os.path.splitext(args.output)[1].lower()
    if ext not in plots.FORMATS:
        raise UsageError(f"--output must end in {' or '.join(plots.FORMATS)}, not {args.output!r}")
    folder = os.path.dirname(args.output)
    if folder and not os.path.isdir(folder):
        raise UsageError(
            f"--output must be in an existing folder, not {args.output!r} (no folder {folder!r})"
        )
    try:
        if args.plot == "load-vs-k":
            if args.k_min < 2:
                raise UsageError(f"--k-min must be at least 2, not {args.k_min}")
            if args.k_max < args.k_min:
                raise UsageError(f"--k-max must be at least --k-min ({args.k_min}), not {args.k_max}")
            compile_kernels(["packing", "ordering"])
            out = plots.plot_load_vs_k(
                args.output,
                k_min=args.k_min,
                k_max=args.k_max,
                points_per_worker=args.points_per_worker,
                seeds=args.seeds,
                strategy=args.strategy,
            )
        elif args.plot == "storage":
            if not 2 <= args.workers <= 16:
                raise UsageError(f"--workers must be from 2 to 16 for the storage plot, not {args.workers}")
            compile_kernels(["packing", "ordering"])
            out = plots.plot_storage(
                args.output, K=args.workers, points_per_worker=args.points_per_worker, seeds=args.seeds
            )
        elif args.plot == "orders":
            _check_shard_setup(args)
            compile_kernels(["packing", "ordering", "feistel"])
            from ..orders import EPOCH_ORDERS
            from ..tradeoff import LINK_COST_STEPS

            with orders_bar(len(EPOCH_ORDERS), args, steps=LINK_COST_STEPS, purpose=" for the plot") as bar:
                out = plots.plot_orders(
                    args.output,
                    K=args.workers,
                    **shard_options(args),
                    seed=args.seed,
                    strategy=args.strategy,
                    progress=bar.update,
                )
        elif args.plot == "run":
            out = plots.plot_run(_run_rows(args.results), args.output)
        else:
            S = read_matrix(args.matrix, square=True)
            compile_kernels(["packing", "ordering"])
            out = plots.plot_leftovers(S, args.output, strategy=args.strategy)
    except ImportError as exc:
        say(f"{PROG}: error: {exc}")
        return 1
    except OSError as exc:
        raise UsageError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    print(out)
    return 0


def _run_rows(source: str) -> list[dict[str, Any]]:
    """The reports of ``run --json`` in ``source`` (``-``: standard input); refusals name ``--results``."""
    from ..plots import read_run_results

    try:
        return read_run_results(sys.stdin if source == "-" else source)
    except OSError as exc:
        raise UsageError(f"--results: cannot read {source!r}: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"--results {source}: {exc}") from None


def add_parser(sub: Any) -> None:
    """Add the ``plot`` command to the subcommands ``sub``."""
    plot = sub.add_parser(
        "plot",
        help=COMMANDS["plot"],
        description="Plots written as PNG or SVG by the extension of --output (needs matplotlib).",
    )
    kinds = plot.add_subparsers(dest="plot", metavar="PLOT", parser_class=_Parser, required=True)
    load, leftovers, porders = _add_load_vs_k(kinds), _add_leftovers(kinds), _add_orders(kinds)
    for p, default in ((load, "greedy"), (leftovers, "exact"), (porders, "greedy")):
        p.add_argument("--output", "-o", required=True, metavar="FILE", help="output file, .png or .svg")
        _add_strategy_argument(p, default)
        p.set_defaults(func=_cmd_plot)
    for p in (_add_storage(kinds), _add_run(kinds)):
        p.add_argument("--output", "-o", required=True, metavar="FILE", help="output file, .png or .svg")
        p.set_defaults(func=_cmd_plot)


def _add_load_vs_k(kinds: Any) -> Any:
    """``plot load-vs-k`` and its own options."""
    load = kinds.add_parser(
        "load-vs-k",
        help="uncoded, paired, coded, lower bound and worst case against K for random shuffles",
        description=(
            "Loads per point of random reshuffles (epochs 0 -> 1 of seeds 0..S-1) against K: mean "
            "with error bars of one standard deviation over the seeds."
        ),
    )
    load.add_argument("--k-min", type=_positive, default=2, metavar="K", help="smallest K (default 2)")
    load.add_argument("--k-max", type=_positive, default=10, metavar="K", help="largest K (default 10)")
    load.add_argument(
        "--points-per-worker", type=_positive, default=100, metavar="B", help="batch size (default 100)"
    )
    load.add_argument("--seeds", type=_positive, default=5, metavar="S", help="number of seeds (default 5)")
    return load


def _add_leftovers(kinds: Any) -> Any:
    """``plot leftovers`` and its own options."""
    leftovers = kinds.add_parser(
        "leftovers",
        help="the leftover graph of a shuffle matrix with its cycles",
        description="The leftover graph of a shuffle matrix, each packed cycle in its own colour.",
    )
    leftovers.add_argument(
        "--matrix",
        metavar="FILE",
        required=True,
        help="shuffle matrix S as JSON (list of K lists of K ints) or CSV; '-' reads standard input",
    )
    return leftovers


def _add_orders(kinds: Any) -> Any:
    """``plot orders`` and its own options."""
    porders = kinds.add_parser(
        "orders",
        help="each epoch order's coded and uncoded link load against how badly it mixes",
        description="The randomness / link cost trade-off of the epoch orders (see 'coded-shuffle orders').",
    )
    porders.add_argument("--workers", "-K", type=int, default=8, metavar="K", help="workers (default 8)")
    _add_shard_arguments(porders, shards=1000, shard_size=1000, block_size=20_000, batches=False)
    porders.add_argument("--seed", type=_non_negative, default=0, help="seed (default 0)")
    return porders


def _add_storage(kinds: Any) -> Any:
    """``plot storage`` and its own options."""
    pstore = kinds.add_parser(
        "storage",
        help="uncoded, coded and lower bound against the storage M, with the worst case R(t)",
        description=(
            "Loads per record of random reshuffles (epochs 0 -> 1 of seeds 0..S-1) against the storage "
            "M = 1..K of a worker (coded-shuffle rate --storage), with the worst case R(t) beside them."
        ),
    )
    pstore.add_argument(
        "--workers", "-K", type=int, default=8, metavar="K", help="workers, 2 to 16 (default 8)"
    )
    pstore.add_argument(
        "--points-per-worker", type=_positive, default=1000, metavar="B", help="batch size (default 1000)"
    )
    pstore.add_argument("--seeds", type=_positive, default=3, metavar="S", help="number of seeds (default 3)")
    return pstore


def _add_run(kinds: Any) -> Any:
    """``plot run`` and its own options."""
    prun = kinds.add_parser(
        "run",
        help="the results of run --json: each mode's bytes and seconds against its bounds and prediction",
        description=(
            "Each mode's busiest downlink and uplink in bytes against their bounds, and its seconds "
            "against its predicted time and the time bound on the --network the job ran with; means "
            "over the transitions of the JSON lines of coded-shuffle run --json (or simulate --json)."
        ),
    )
    prun.add_argument(
        "--results", required=True, metavar="FILE",
        help="the JSON lines of run --json FILE (or simulate --json); '-' reads standard input",
    )  # fmt: skip
    return prun
