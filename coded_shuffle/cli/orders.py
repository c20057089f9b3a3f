"""``coded-shuffle orders``: each epoch order's quality beside its link load."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from ..orders import (
    EPOCH_ORDERS,
)
from ._parser import COMMANDS, add_deprecated
from .common import (
    UsageError,
    _AboveBar,
    _add_shard_arguments,
    _add_storage_argument,
    _add_strategy_argument,
    _at_least,
    _check_shard_setup,
    _non_negative,
    _shifted,
    _under,
    check_storage_option,
    compile_kernels,
    orders_bar,
    print_table,
    shard_options,
)

_ORDERS_COLUMNS = (
    ("order", "order"),
    ("seconds", "gen s"),
    ("epoch_mean_deviation_pct", "dev %"),
    ("mean_shards_per_batch", "shards/batch"),
    ("max_open_shards_per_node", "open/node"),
    ("longest_in_order_run", "in-order"),
    ("uncoded", "uncoded"),
    ("coded", "coded"),
    ("lower_bound", "bound"),
)


def _cmd_orders(args: argparse.Namespace) -> int:
    from ..tradeoff import LINK_COST_STEPS, order_link_cost

    names = list(EPOCH_ORDERS) if args.orders is None else [n.strip() for n in args.orders.split(",")]
    unknown = [n for n in names if n not in EPOCH_ORDERS]
    if unknown or not names:
        raise UsageError(f"--orders must name orders among {', '.join(EPOCH_ORDERS)}, not {args.orders!r}")
    _at_least(args, batches=1, batch_size=1)
    _check_shard_setup(args)
    check_storage_option(args, args.workers)
    compile_kernels(["packing", "ordering", "feistel"] if "feistel" in names else ["packing", "ordering"])
    bar = orders_bar(len(names), args, steps=LINK_COST_STEPS)
    out = _AboveBar(bar, sys.stdout)

    def rows() -> Iterator[dict[str, Any]]:
        for i, name in enumerate(names):
            yield order_link_cost(
                name,
                K=args.workers,
                **shard_options(args),
                seed=args.seed,
                epoch=args.start_epoch,
                batches=args.batches,
                batch_size=args.batch_size,
                strategy=args.strategy,
                progress=_shifted(bar.update, i * LINK_COST_STEPS),
                storage=args.storage,
            )

    if args.json:
        for row in _under(bar, rows()):
            print(json.dumps(row), file=out, flush=True)
        return 0
    print(
        f"K = {args.workers}, {args.shards} shards x {args.shard_size} samples, "
        f"canonical nodes = {args.canonical_nodes}, block = {args.block_size}, epoch {args.start_epoch} -> "
        f"{args.start_epoch + 1}, seed = {args.seed}"
        + (f", storage = {args.storage} batches" if args.storage > 1 else "")
    )

    def cells() -> Iterator[list[str]]:
        for row in _under(bar, rows()):
            yield [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k, _ in _ORDERS_COLUMNS]

    print_table(cells(), [h for _, h in _ORDERS_COLUMNS], out)
    print(
        "dev %: mean deviation of the A share from 50% over all batches of the epoch; "
        "shards/batch: distinct shards per batch; open/node: most shards a node needs at once; "
        "in-order: longest run left in shard order; loads in records, epoch t -> t+1."
    )
    return 0


def add_parser(sub: Any) -> None:
    """Add the ``orders`` command to the subcommands ``sub``."""
    orders = sub.add_parser(
        "orders",
        help=COMMANDS["orders"],
        description=(
            "How random, at what link cost: for each epoch order, its generation time, mixing and "
            "locality figures, and the uncoded, coded and lower-bound loads of one epoch transition."
        ),
    )
    orders.add_argument("--orders", metavar="A,B,...", help="orders to compare (default all)")
    orders.add_argument("--workers", "-K", type=int, default=8, metavar="K", help="workers (default 8)")
    _add_shard_arguments(orders, shards=1000, shard_size=1000, block_size=20_000)
    orders.add_argument("--seed", type=_non_negative, default=0, help="seed (default 0)")
    orders.add_argument("--start-epoch", type=_non_negative, default=0, metavar="T",
                        help="first epoch t of t -> t+1 (default 0)")  # fmt: skip
    add_deprecated(orders, "--epoch", "--start-epoch", dest="start_epoch", type=_non_negative, metavar="T")
    _add_strategy_argument(orders)
    _add_storage_argument(orders, "loads in records")
    orders.add_argument("--json", action="store_true", help="one JSON object per order")
    orders.set_defaults(func=_cmd_orders)
