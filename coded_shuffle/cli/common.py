"""What the commands share: the parser that reports bad input as one line, number and order
options, tables, progress and the kernels compiled once."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

from .._progress import Progress, say
from ..orders import (
    AUTO_FEISTEL_POINTS,
    EPOCH_ORDERS,
    OrderSpec,
    auto_order,
    ignored_shard_options,
)
from ..plan import STRATEGIES
from ._parser import PROG, UsageError, _Parser  # noqa: F401 (the commands import them from here)


def _number(value: Fraction | int) -> int | float:
    """A plain JSON number: an int when whole."""
    value = Fraction(value)
    return int(value) if value.denominator == 1 else float(value)


def print_table(rows: Iterator[list[str]], headers: Sequence[str], out: Any) -> None:
    """Print rows under headers, right-aligned, as they come (widths from the headers and row 1)."""
    widths: list[int] | None = None
    for cells in rows:
        if widths is None:
            widths = [max(len(h), len(c)) + 2 for h, c in zip(headers, cells, strict=True)]
            print("".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)), file=out)
        print("".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), file=out, flush=True)


class _AboveBar:
    """Standard output under a progress bar on standard error: a line written erases the bar
    from its line first, and the bar is drawn again below it when the line is flushed."""

    def __init__(self, bar: Progress, out: Any) -> None:
        self.bar = bar
        self.out = out

    def write(self, text: str) -> int:
        self.bar.clear()
        return int(self.out.write(text))

    def flush(self) -> None:
        self.out.flush()
        self.bar.update(self.bar.done)


def _shifted(update: Callable[[int], None], base: int) -> Callable[[int], None]:
    """Return ``done -> update(base + done)``: one step's progress as part of a longer count."""
    return lambda done: update(base + done)


def _under(bar: Progress, items: Iterator[Any]) -> Iterator[Any]:
    """Yield ``items`` with ``bar`` open: announced before the first is made, closed after the last."""
    with bar:
        yield from items


def compile_kernels(groups: Sequence[str]) -> None:
    """Compile the kernels of ``groups`` not yet cached, announced on standard error first.

    Groups are those of :data:`coded_shuffle.warmup.KERNEL_GROUPS`; nothing is said or done
    when all of them are cached already.

    Examples
    --------
    >>> compile_kernels(["packing"])  # at most once per install: on standard error
    >>> compile_kernels(["packing"])
    """
    from ..warmup import uncompiled, warm_up

    todo = uncompiled(groups)
    if todo:
        with Progress("compiling kernels (once per install)", total=len(todo), unit="groups") as bar:
            warm_up(todo, progress=bar.update)


def _warn_once() -> Callable[[str], None]:
    """Return a function printing each distinct warning once, as one line on standard error."""
    seen: set[str] = set()

    def warn(message: str) -> None:
        if message not in seen:
            seen.add(message)
            say(f"{PROG}: warning: {message}")

    return warn


def _at_least(args: argparse.Namespace, **minimums: int) -> None:
    """Raise a UsageError naming the first option below its minimum."""
    for flag, low in minimums.items():
        if getattr(args, flag) < low:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least {low}, not {getattr(args, flag)}")


def _check_shard_setup(args: argparse.Namespace) -> None:
    """Check the options of a sharded dataset read by ``--workers`` workers."""
    _at_least(args, workers=1, shards=2, shard_size=1, canonical_nodes=1, block_size=1)
    if args.shards * args.shard_size < max(args.workers, args.canonical_nodes):
        raise UsageError("--shards x --shard-size must be at least --workers and --canonical-nodes")


#: The options of the shard-aware orders, with their defaults.
SHARD_ORDER_DEFAULTS = {"shard_size": 10_000, "canonical_nodes": 1, "block_size": 1 << 18}


def _shard_options_given(args: argparse.Namespace) -> list[str]:
    return [f"--{n.replace('_', '-')}" for n in SHARD_ORDER_DEFAULTS if getattr(args, n, None) is not None]


def order_spec(args: argparse.Namespace, N: int) -> OrderSpec:
    """Return the epoch order the options ask for, ``auto`` resolved for ``N`` points.

    The shard options are refused for an order that is not shard-aware (they would be ignored);
    those not given take their defaults (``args`` is left as it came).
    """
    order = auto_order(args.order, N)
    problem = ignored_shard_options(args.order, _shard_options_given(args))
    if problem is not None:
        raise UsageError(problem + (f" ({order})" if args.order == "auto" else ""))
    values = {n: d if getattr(args, n) is None else getattr(args, n) for n, d in SHARD_ORDER_DEFAULTS.items()}
    _at_least(argparse.Namespace(**values), shard_size=1, canonical_nodes=1, block_size=1)
    if values["canonical_nodes"] > N:
        raise UsageError(f"--canonical-nodes must be at most --points ({N}), not {values['canonical_nodes']}")
    return OrderSpec(order, values["shard_size"], values["canonical_nodes"], values["block_size"])


def _non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {v}")
    return v


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _add_strategy_argument(parser: argparse.ArgumentParser, default: str = "greedy") -> None:
    parser.add_argument(
        "--strategy",
        choices=sorted(STRATEGIES),
        default=default,
        help=f"cycle packing strategy (default {default})",
    )


def _add_order_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--order",
        choices=("auto", *EPOCH_ORDERS),
        default="auto",
        help=(
            "epoch order: a uniform permutation, a keyed Feistel bijection (bounded memory), or one "
            f"of streaming's shard-aware shuffles; auto = permutation up to {AUTO_FEISTEL_POINTS:,} "
            "points, feistel above (default auto)"
        ),
    )
    # No defaults here: an order that is not shard-aware refuses them; order_spec fills them in.
    parser.add_argument(
        "--shard-size", type=int, metavar="Z", help="samples per shard, shard-aware orders (default 10000)"
    )
    parser.add_argument(
        "--canonical-nodes", type=int, metavar="C", help="canonical nodes, shard-aware orders (default 1)"
    )
    parser.add_argument(
        "--block-size", type=int, metavar="B", help="shuffle block size, shard-aware orders (default 262144)"
    )


def shard_options(args: argparse.Namespace) -> dict[str, int]:
    """The sharded dataset's options of :func:`_add_shard_arguments`, as keywords of the orders'
    functions (``order_link_cost``, ``quality_report``, ``plot_orders``)."""
    return {
        "shards": args.shards,
        "shard_size": args.shard_size,
        "canonical_nodes": args.canonical_nodes,
        "block_size": args.block_size,
    }


def orders_bar(n: int, args: argparse.Namespace, *, steps: int, purpose: str = "") -> Progress:
    """The progress of generating and measuring ``n`` orders of the sharded dataset of ``args``,
    ``steps`` steps each."""
    return Progress(
        f"generating and measuring {n} order{'s' if n > 1 else ''} of {args.shards * args.shard_size:,} "
        f"samples{purpose}",
        total=n * steps,
        unit="steps",
    )


def _add_shard_arguments(
    parser: argparse.ArgumentParser, *, shards: int, shard_size: int, block_size: int, batches: bool = True
) -> None:
    """The options of a sharded dataset: shards, their size, canonical nodes, block, batches."""
    parser.add_argument("--shards", type=int, default=shards, metavar="M", help=f"shards (default {shards})")
    parser.add_argument(
        "--shard-size",
        type=int,
        default=shard_size,
        metavar="Z",
        help=f"samples per shard (default {shard_size})",
    )
    parser.add_argument(
        "--canonical-nodes", type=int, default=1, metavar="C", help="canonical nodes (default 1)"
    )
    parser.add_argument(
        "--block-size",
        type=int,
        default=block_size,
        metavar="B",
        help=f"shuffle block size (default {block_size})",
    )
    if batches:
        parser.add_argument(
            "--batches", type=int, default=100, help="batches in the head figures (default 100)"
        )
        parser.add_argument("--batch-size", type=int, default=2000, help="samples per batch (default 2000)")


def _add_storage_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """``--storage M``: every worker stores ``M`` batches; ``what`` says what it changes."""
    parser.add_argument(
        "--storage",
        type=_positive,
        default=1,
        metavar="M",
        help=(
            "every worker stores M batches (1 <= M <= K, M = 1 + t): records cut into up to C(K-1, t) "
            "pieces of at least 1 KiB (records under 2 KiB stay whole), each piece held by t + 1 "
            f"workers; {what} (default 1)"
        ),
    )


def check_storage_option(args: argparse.Namespace, K: int, record_bytes: int | None = None) -> None:
    """Refuse a ``--storage`` that cannot go with the other options, naming the option.

    With ``record_bytes``, records too small for their pieces are refused too.
    """
    if args.storage == 1:
        return
    if getattr(args, "subpackets", 1) != 1:
        raise UsageError("--storage cannot be combined with --subpackets (pieces are cut by the storage)")
    from ..engine.state import storage_refusal

    refusal = storage_refusal(record_bytes, K, args.storage)
    if refusal is not None:
        raise UsageError(refusal)


#: The one line refusing ``--network`` with ``--storage`` above 1 where a storage is not timed.
NETWORK_STORAGE = "--network applies to one batch a worker only, not --storage above 1"


def network_option(args: argparse.Namespace, *, pieces: bool = False, stored: bool = False) -> Any:
    """The :class:`~coded_shuffle.network.Network` of ``--network``, or None; ``--mode auto``
    without one, a SPEC that does not parse, racks that do not hold the job's workers, a storage
    above one batch (unless ``stored``, where it is timed in the bytes of its pieces, on racks
    too: :func:`~coded_shuffle.engine.schedule.storage_times`), or (unless ``pieces``, for loads
    counted in records) sub-packets: one line naming it."""
    mode = getattr(args, "mode", None)
    if args.network is None:
        if mode == "auto":
            raise UsageError("--mode auto needs --network SPEC: it chooses the mode of least predicted time")
        if mode == "split":
            raise UsageError("--mode split needs --network SPEC with multicast: the rates set its share")
        return None
    from ..network import Network

    try:
        network = Network.parse(args.network)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if mode == "split" and not network.multicast:
        raise UsageError(
            "--mode split needs a --network that multicasts: the master's datagrams and the workers' "
            "exchange run at once only there"
        )
    workers = getattr(args, "workers", None)
    workers = int(workers) if isinstance(workers, str) and workers.isdigit() else workers
    if network.racks is not None and isinstance(workers, int) and network.workers != workers:
        raise UsageError(
            f"--network: {network.racks_part}: {network.workers} hosts, not the job's {workers} workers"
        )
    if getattr(args, "storage", 1) != 1 and not stored:
        raise UsageError(NETWORK_STORAGE)
    if not pieces and getattr(args, "subpackets", 1) != 1:
        raise UsageError("--network applies to whole records, not --subpackets above 1")
    return network


def print_times(rows: list[dict[str, Any]]) -> None:
    """Each transition's time bound and predicted times, after a table
    (:func:`~coded_shuffle.engine.report.time_lines`)."""
    from ..engine.report import time_lines

    for line in time_lines(rows):
        print(line)


def rack_load_lines(rows: list[dict[str, Any]]) -> list[str]:
    """What the exchange's senders put on the links of a network with racks, a line a transition
    (its report's ``rack_loads``: records or pieces, and bytes), after a heading; none without.

    >>> loads = {"cross": 3, "cross_bytes": 900, "rack_up": [3, 0], "rack_up_bytes": [900, 0],
    ...          "rack_down": [0, 3], "rack_down_bytes": [0, 900], "uploads": [1, 2],
    ...          "uploads_bytes": [500, 400]}
    >>> for line in rack_load_lines([{"epoch": 1, "storage": 2, "rack_loads": loads}]):
    ...     print(line.replace("; ", ";\\n   "))
    the exchange on racks (pieces, and their bytes):
      epoch 1: between racks 3 (900 B);
       busiest rack uplink 3 (900 B), downlink 3 (900 B);
       busiest upload 2 (500 B)
    """
    racked = [r for r in rows if r.get("rack_loads")]
    if not racked:
        return []
    units = "pieces" if racked[0]["storage"] > 1 else "records"
    lines = [f"the exchange on racks ({units}, and their bytes):"]
    for r in racked:
        x = r["rack_loads"]
        most = {k: f"{max(x[k])} ({max(x[k + '_bytes']):,} B)" for k in ("rack_up", "rack_down", "uploads")}
        lines.append(
            f"  epoch {r['epoch']}: between racks {x['cross']} ({x['cross_bytes']:,} B); busiest rack uplink "
            f"{most['rack_up']}, downlink {most['rack_down']}; busiest upload {most['uploads']}"
        )
    return lines


def add_cache_dir_argument(parser: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR`` of an MPI job (:mod:`coded_shuffle.cli.runner.held`)."""
    parser.add_argument("--cache-dir", metavar="DIR", help=(
        "each worker keeps its batch (with --storage, its storage) of every epoch in DIR/worker-<k>.cache on "
        "its host, and the job starts from what those files hold: the source sends only what no file "
        "holds (each file checked; a damaged or foreign one is treated as absent); a storage written at "
        "another -K is cut again at this one"))  # fmt: skip


def add_network_argument(parser: argparse.ArgumentParser) -> None:
    """``--network SPEC`` of ``simulate`` and ``run``."""
    parser.add_argument(
        "--network",
        metavar="SPEC",
        help="the network the transitions run on, master=R,up=R,down=R[,multicast][,racks=NxH,rack-up=R] "
        "in Mbit/s (docs/cli.md): each report gets its time bound and each mode's predicted time; "
        "--mode auto chooses on it",
    )


def auto_mode(
    N: int, K: int, seed: int, spec: OrderSpec, record_bytes: int, network: Any, strategy: str | None,
    *, epoch: int = 0, refusal: Callable[[str], str | None] | None = None, sizes: Any = None,
    storage: int = 1,
) -> tuple[str, str]:  # fmt: skip
    """``--mode auto``: the mode of least predicted time of the first transition on ``network``,
    and the one line that says which and why. With ``refusal`` (a mode's refusal of the options
    given, or None where they can run it), only among the modes it lets run: the line then names
    a faster mode left out and why; a UsageError where it lets none run. ``sizes``: the bytes of
    each record, where they differ (the times then count every link's bytes); ``storage``: ``M``,
    the times then of its pieces."""
    from ..engine.schedule import predicted_times
    from ..network import explain

    t = predicted_times(N, K, seed=seed, spec=spec, epoch=epoch, record_bytes=record_bytes, network=network,
                        strategy=strategy or "greedy", sizes=sizes, storage=storage)  # fmt: skip
    if refusal is None:
        return t.choice, f"mode auto chose {t.why}, on {network}"
    fastest = sorted((v, i, m) for i, (m, v) in enumerate(t.predicted_seconds.items()) if math.isfinite(v))
    refused: dict[str, str] = {}
    for _, _, mode in fastest:
        why = refusal(mode)
        if why is None:
            break
        refused[mode] = why
    else:
        raise UsageError(f"--mode auto chose {t.choice}: {refused[t.choice]}")
    if not refused:
        return mode, f"mode auto chose {t.why}, on {network}"
    runs = {m: v for m, v in t.predicted_seconds.items() if m not in refused}
    left, why = next(iter(refused.items()))
    return mode, (
        f"mode auto chose {explain(runs, mode)}, on {network}; not {left} "
        f"({t.predicted_seconds[left]:.3g} s): {why}"
    )


def worker_counts(text: str) -> list[int]:
    """``--workers`` as one count, or one count an epoch ``K0,K1,...``; refused in one line.

    Examples
    --------
    >>> worker_counts("8,6,8"), worker_counts("4")
    ([8, 6, 8], [4])
    """
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--workers must be an integer or a comma-separated list, not {text!r}") from None
    if any(k < 1 for k in counts):
        raise UsageError(f"--workers must be at least 1, not {min(counts)}")
    return counts


def check_sizes(args: argparse.Namespace) -> None:
    """Refuse, naming the option, ``--workers``, ``--points`` and ``--record-bytes`` that make no job."""
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.points < args.workers:
        raise UsageError(f"--points must be at least --workers ({args.workers}), not {args.points}")
    if args.record_bytes < 1:
        raise UsageError(f"--record-bytes must be at least 1, not {args.record_bytes}")
