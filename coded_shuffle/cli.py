"""The command line: ``coded-shuffle`` (also ``python -m coded_shuffle``).

Every command validates its input and reports a bad one as a single line on standard error,
``coded-shuffle: error: ...``, with exit status 2; a failure of the domain exits with 1. Tables go
to standard output; ``--json`` prints one JSON object a line instead.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from .bounds import lower_bound, worst_case
from .errors import CodedShuffleError
from .matrix import check_shuffle_matrix, feistel_shuffle_matrix, shuffle_matrix
from .orders import AUTO_FEISTEL_POINTS, EPOCH_ORDERS, OrderSpec, auto_order, order_placement
from .plan import STRATEGIES, rates

PROG = "coded-shuffle"


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _number(value: Fraction | int) -> int | float:
    """A plain JSON number: an int when whole."""
    value = Fraction(value)
    return int(value) if value.denominator == 1 else float(value)


# --------------------------------------------------------------------------- matrix files


def read_matrix(path: str) -> np.ndarray:
    """Read a shuffle matrix from a JSON or CSV file (``-`` reads standard input).

    JSON: a list of ``K`` lists of ``K`` non-negative ints, ``S[i][j]`` the points held by worker
    ``i`` and needed by worker ``j``. CSV: ``K`` rows of ``K`` such ints (no header). The format is
    taken from the content: JSON if it starts with ``[`` or ``{``.
    """
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read matrix file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"matrix file {path!r} is not text") from None
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"matrix file {path!r} is empty")
    rows: list[list[Any]]
    if stripped[0] in "[{":
        try:
            rows = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"matrix file {path!r} is not valid JSON: {exc.msg} at line {exc.lineno}"
            ) from None
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise UsageError(f"matrix file {path!r} must hold a JSON list of lists")
    else:
        rows = [
            [c.strip() for c in r] for r in csv.reader(io.StringIO(stripped)) if any(c.strip() for c in r)
        ]
    K = len(rows)
    for i, row in enumerate(rows):
        if len(row) != K:
            raise UsageError(
                f"matrix in {path!r} is not square: row {i + 1} has {len(row)} entries, expected {K}"
            )
    values = np.zeros((K, K), dtype=np.int64)
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            values[i, j] = _entry(v, path, i, j)
    try:
        return check_shuffle_matrix(values)
    except ValueError as exc:
        raise UsageError(f"matrix in {path!r}: {exc}") from None


def _entry(v: Any, path: str, i: int, j: int) -> int:
    where = f"matrix in {path!r}, row {i + 1}, column {j + 1}"
    if isinstance(v, bool):
        raise UsageError(f"{where}: {v!r} is not an integer")
    if isinstance(v, int):
        out = v
    elif isinstance(v, float) and v.is_integer():
        out = int(v)
    elif isinstance(v, str):
        try:
            out = int(v)
        except ValueError:
            raise UsageError(f"{where}: {v!r} is not an integer") from None
    else:
        raise UsageError(f"{where}: {v!r} is not an integer")
    if out < 0:
        raise UsageError(f"{where}: {out} is negative")
    if out >= 2**62:
        raise UsageError(f"{where}: {out} is too large")
    return out


# --------------------------------------------------------------------------- rate


def rate_rows(
    *,
    matrix: np.ndarray | None = None,
    K: int | Sequence[int] | None = None,
    N: int | None = None,
    seed: int = 0,
    epochs: int = 1,
    start_epoch: int = 0,
    strategy: str = "greedy",
    order: OrderSpec | None = None,
    exact_bound: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one result dict per transition: for a given ``matrix``, or epochs of ``(K, N, seed)``.

    ``K`` is one worker count, or one per epoch ``start_epoch .. start_epoch + epochs`` (elastic
    ``K``). The key ``epoch`` is the epoch delivered, ``t + 1`` (``None`` for a given matrix).
    The ``feistel`` order streams the shuffle matrix in bounded memory. ``exact_bound`` is
    passed to :func:`coded_shuffle.bounds.lower_bound` as ``exact``.

    The key ``optimal`` is the certificate ``coded == lower_bound``: then no scheme sends fewer
    symbols, so the packing is a maximum one and the bound the maximum over orderings, and
    ``packing_optimal`` and ``lower_bound_exact`` are true whatever the strategy and ``K``.
    """

    def row(S: np.ndarray, epoch: int | None, order_name: str | None) -> dict[str, Any]:
        r = rates(S, strategy=strategy)
        lb = lower_bound(S, exact=exact_bound)
        certified = r.coded == lb.value
        K_t, K_t1 = S.shape
        return {
            "epoch": epoch,
            "K": r.K,
            "K_t": K_t,
            "K_t1": K_t1,
            "N": r.N,
            "order": order_name,
            "strategy": strategy,
            "uncoded": r.uncoded,
            "paired": r.paired,
            "coded": r.coded,
            "lower_bound": lb.value,
            "lower_bound_exact": lb.exact or certified,
            "optimal": certified,
            "worst_case": _number(worst_case(r.N, r.K)) if K_t == K_t1 else None,
            "cycles": r.cycles_used,
            "uncoded_leftovers": r.uncoded_leftovers,
            "conserved": r.conserved,
            "packing_optimal": r.packing.optimal or certified,
            "note": "; ".join(n for n in (r.packing.note, None if certified else lb.note) if n) or None,
        }

    if matrix is not None:
        yield row(matrix, None, None)
        return
    assert K is not None and N is not None
    schedule = [K] * (epochs + 1) if isinstance(K, int) else list(K)
    if len(schedule) != epochs + 1:
        raise ValueError(f"Argument 'K' must give 1 or {epochs + 1} worker counts, not {len(schedule)}.")
    spec = order or OrderSpec()
    if spec.name == "feistel":
        for t in range(start_epoch, start_epoch + epochs):
            k_t, k_t1 = schedule[t - start_epoch], schedule[t - start_epoch + 1]
            yield row(feistel_shuffle_matrix(N, k_t, k_t1, seed=seed, epoch=t), t + 1, spec.name)
        return
    prev = order_placement(N, schedule[0], seed=seed, epoch=start_epoch, spec=spec)
    for t in range(start_epoch, start_epoch + epochs):
        nxt = order_placement(N, schedule[t - start_epoch + 1], seed=seed, epoch=t + 1, spec=spec)
        yield row(shuffle_matrix(prev, nxt), t + 1, spec.name)
        prev = nxt


_RATE_COLUMNS = (
    ("epoch", "epoch"),
    ("K", "K"),
    ("N", "N"),
    ("order", "order"),
    ("strategy", "strategy"),
    ("uncoded", "uncoded"),
    ("paired", "paired"),
    ("coded", "coded"),
    ("lower_bound", "bound"),
    ("optimal", "optimal"),
    ("worst_case", "worst"),
    ("gain", "gain"),
)


def _format_rate(row: dict[str, Any]) -> list[str]:
    out = []
    for key, _ in _RATE_COLUMNS:
        v = row.get(key)
        if key == "gain":
            out.append(f"{row['uncoded'] / row['coded']:.3f}x" if row["coded"] else "-")
        elif key == "K" and row["K_t"] != row["K_t1"]:
            out.append(f"{row['K_t']}->{row['K_t1']}")
        elif key == "lower_bound":
            out.append(f"{v}{'' if row['lower_bound_exact'] else '*'}")
        elif key == "optimal":
            out.append("yes" if v else "-")
        elif v is None:
            out.append("-")
        elif isinstance(v, float):
            out.append(f"{v:.2f}")
        else:
            out.append(str(v))
    return out


def print_table(rows: Iterator[list[str]], headers: Sequence[str], out: Any) -> None:
    """Print rows under headers, right-aligned, as they come (widths from the headers and row 1)."""
    widths: list[int] | None = None
    for cells in rows:
        if widths is None:
            widths = [max(len(h), len(c)) + 2 for h, c in zip(headers, cells, strict=True)]
            print("".join(h.rjust(w) for h, w in zip(headers, widths, strict=True)), file=out)
        print("".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)), file=out, flush=True)


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


def order_spec(args: argparse.Namespace, N: int) -> OrderSpec:
    """Return the epoch order the options ask for, ``auto`` resolved for ``N`` points."""
    _at_least(args, shard_size=1, canonical_nodes=1, block_size=1)
    if args.canonical_nodes > N:
        raise UsageError(f"--canonical-nodes must be at most --points ({N}), not {args.canonical_nodes}")
    return OrderSpec(auto_order(args.order, N), args.shard_size, args.canonical_nodes, args.block_size)


def _workers_schedule(text: str | None, epochs: int) -> list[int]:
    if text is None:
        return [4]
    try:
        counts = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"--workers must be an integer or a comma-separated list, not {text!r}") from None
    if any(k < 1 for k in counts):
        raise UsageError(f"--workers must be at least 1, not {min(counts)}")
    if len(counts) not in (1, epochs + 1):
        raise UsageError(
            f"--workers must give 1 or --epochs + 1 = {epochs + 1} worker counts, not {len(counts)}"
        )
    return counts


def _cmd_rate(args: argparse.Namespace) -> int:
    if args.matrix is not None:
        given = [f"--{n}" for n in ("workers", "points") if getattr(args, n) is not None]
        if given:
            raise UsageError(f"--matrix cannot be combined with {', '.join(given)}")
        S = read_matrix(args.matrix)
        rows = rate_rows(matrix=S, strategy=args.strategy, exact_bound=args.exact_bound)
    else:
        schedule = _workers_schedule(args.workers, args.epochs)
        N = 1200 if args.points is None else args.points
        if N < max(schedule):
            raise UsageError(f"--points must be at least --workers ({max(schedule)}), not {N}")
        rows = rate_rows(
            K=schedule[0] if len(schedule) == 1 else schedule,
            N=N,
            seed=args.seed,
            epochs=args.epochs,
            start_epoch=args.start_epoch,
            strategy=args.strategy,
            order=order_spec(args, N),
            exact_bound=args.exact_bound,
        )
    if args.json:
        for row in rows:
            print(json.dumps(row), flush=True)
    else:
        flags: set[str] = set()

        def cells() -> Iterator[list[str]]:
            for r in rows:
                if not r["lower_bound_exact"]:
                    flags.add("bound* is a valid lower bound from a good ordering, not proven maximal")
                if r["optimal"]:
                    flags.add(
                        "optimal yes: coded == bound, so no scheme sends fewer symbols "
                        "(the packing is maximum and the bound exact)"
                    )
                if r["note"]:
                    flags.add(r["note"])
                if r["uncoded_leftovers"]:
                    flags.add("leftovers no cycle can carry (unequal batches, a changed K) are sent uncoded")
                yield _format_rate(r)

        print_table(cells(), [h for _, h in _RATE_COLUMNS], sys.stdout)
        for line in sorted(flags):
            print(f"note: {line}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from . import plots

    ext = os.path.splitext(args.output)[1].lower()
    if ext not in plots.FORMATS:
        raise UsageError(f"--output must end in {' or '.join(plots.FORMATS)}, not {args.output!r}")
    try:
        if args.plot == "load-vs-k":
            if args.k_min < 2:
                raise UsageError(f"--k-min must be at least 2, not {args.k_min}")
            if args.k_max < args.k_min:
                raise UsageError(f"--k-max must be at least --k-min ({args.k_min}), not {args.k_max}")
            out = plots.plot_load_vs_k(
                args.output,
                k_min=args.k_min,
                k_max=args.k_max,
                points_per_worker=args.points_per_worker,
                seeds=args.seeds,
                strategy=args.strategy,
            )
        elif args.plot == "orders":
            _check_shard_setup(args)
            out = plots.plot_orders(
                args.output,
                K=args.workers,
                shards=args.shards,
                shard_size=args.shard_size,
                canonical_nodes=args.canonical_nodes,
                block_size=args.block_size,
                seed=args.seed,
                strategy=args.strategy,
            )
        else:
            out = plots.plot_leftovers(read_matrix(args.matrix), args.output, strategy=args.strategy)
    except ImportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


# --------------------------------------------------------------------------- simulate

_SIM_COLUMNS = (
    "epoch", "coded", "uncoded", "xor", "lone", "bound", "coded MB", "uncoded MB", "framing",
    "repairs", "verified", "seconds",
)  # fmt: skip


def _format_simulate(r: dict[str, Any]) -> list[str]:
    return [
        str(r["epoch"]),
        str(r["coded_symbols"]),
        str(r["uncoded_symbols"]),
        str(r["xor_symbols"]),
        str(r["lone_symbols"]),
        f"{r['lower_bound']}{'' if r['lower_bound_exact'] else '*'}",
        f"{r['coded_bytes'] / 1e6:.2f}",
        f"{r['uncoded_bytes'] / 1e6:.2f}",
        f"{r['framing_overhead']:.2%}",
        str(r["repairs"]),
        "yes" if r["verified"] else "NO",
        f"{r['seconds']:.3f}",
    ]


def _cmd_simulate(args: argparse.Namespace) -> int:
    from .engine import simulate

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.points < args.workers:
        raise UsageError(f"--points must be at least --workers ({args.workers}), not {args.points}")
    if args.record_bytes < 1:
        raise UsageError(f"--record-bytes must be at least 1, not {args.record_bytes}")
    if args.points * args.record_bytes > 1 << 34:
        raise UsageError(
            f"--points x --record-bytes must be at most 16 GiB, not {args.points * args.record_bytes}"
        )
    # A tiny run first: the compiled kernels load (or compile, once per install) here, so that
    # the first transition's time is the transition's alone.
    tic = time.perf_counter()
    simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0, strategy=args.strategy)
    if time.perf_counter() - tic > 1 and not args.json:
        print(
            f"compiled the kernels in {time.perf_counter() - tic:.1f} s (cached for later runs)",
            file=sys.stderr,
        )
    show_progress = not args.json and not args.no_progress and sys.stderr.isatty() and args.epochs > 1
    done = [0]
    verified = [True]

    def progress() -> None:
        width = 30
        fill = width * done[0] // args.epochs
        print(
            f"\r[{'#' * fill}{'.' * (width - fill)}] {done[0]}/{args.epochs}",
            end="",
            file=sys.stderr,
            flush=True,
        )

    rows: list[list[str]] = []
    if not args.json:
        print(
            f"K = {args.workers}, N = {args.points}, record = {args.record_bytes} B, "
            f"epochs = {args.epochs}, seed = {args.seed}, strategy = {args.strategy}, "
            f"order = {order_spec(args, args.points).name}"
        )

    def on_transition(rep: Any) -> None:
        d = rep.to_dict()
        verified[0] &= bool(d["verified"])
        done[0] += 1
        if args.json:
            print(json.dumps(d), flush=True)
        else:
            rows.append(_format_simulate(d))
            if show_progress:
                progress()

    if show_progress:
        progress()
    simulate(
        K=args.workers,
        N=args.points,
        record_bytes=args.record_bytes,
        epochs=args.epochs,
        seed=args.seed,
        strategy=args.strategy,
        on_transition=on_transition,
        order=order_spec(args, args.points),
    )
    if show_progress:
        print(file=sys.stderr)
    if not args.json:
        print_table(iter(rows), _SIM_COLUMNS, sys.stdout)
        print("coded/uncoded: symbols of the coded scheme / of sending every moved record alone;")
        print("xor/lone: coded symbols that combine two records / carry one; bound: genie lower bound.")
    if not verified[0]:
        print(f"{PROG}: error: a transition was not verified", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- run (MPI)

MPI_INSTALL_HINT = "pip install 'coded_shuffle[mpi]'"


def find_mpiexec() -> str | None:
    """Return the ``mpiexec`` beside the running Python (the MPI extra's), else the one on PATH."""
    import shutil

    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def mpi_program() -> str:
    """Return the path of ``mpi/shuffle.py`` (in the source tree beside the package)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mpi", "shuffle.py")


def run_command(args: argparse.Namespace, mpiexec: str) -> list[str]:
    """Return the ``mpiexec`` command line that ``coded-shuffle run`` launches."""
    cmd = [mpiexec, "-n", str(args.workers + 1), sys.executable, "-m", "mpi4py", mpi_program()]
    if args.data is not None:
        cmd += ["--data", args.data]
    else:
        cmd += ["--points", str(args.points), "--record-bytes", str(args.record_bytes)]
    cmd += ["--epochs", str(args.epochs), "--start-epoch", str(args.start_epoch), "--seed", str(args.seed)]
    cmd += ["--mode", args.mode, "--strategy", args.strategy, "--order", args.order]
    cmd += ["--shard-size", str(args.shard_size), "--canonical-nodes", str(args.canonical_nodes)]
    cmd += ["--block-size", str(args.block_size)]
    if args.link_mbps is not None:
        cmd += ["--link-mbps", repr(args.link_mbps)]
    if args.json:
        cmd += ["--json", "-"]
    return cmd


def _cmd_run(args: argparse.Namespace) -> int:
    import importlib.util
    import subprocess

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.data is None and args.points < args.workers:
        raise UsageError(f"--points must be at least --workers ({args.workers}), not {args.points}")
    if args.record_bytes < 1:
        raise UsageError(f"--record-bytes must be at least 1, not {args.record_bytes}")
    if args.link_mbps is not None and not 0 < args.link_mbps < float("inf"):
        raise UsageError(f"--link-mbps must be a positive number, not {args.link_mbps}")
    if args.data is None:
        order_spec(args, args.points)  # validates the order options before launching
    mpiexec = find_mpiexec()
    if mpiexec is None or importlib.util.find_spec("mpi4py") is None:
        what = "mpiexec" if mpiexec is None else "mpi4py"
        raise UsageError(f"{what} not found; install the MPI extra: {MPI_INSTALL_HINT}")
    if not os.path.isfile(mpi_program()):
        raise UsageError(f"the MPI program {mpi_program()} is missing; run from a source checkout")
    sys.stdout.flush()
    proc = subprocess.run(run_command(args, mpiexec), check=False)
    if proc.returncode:
        print(f"{PROG}: error: the MPI job failed (mpiexec exit status {proc.returncode})", file=sys.stderr)
        return 1 if proc.returncode != 2 else 2
    return 0


# --------------------------------------------------------------------------- parser


def _non_negative(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, not {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {v}")
    return v


def _positive(text: str) -> int:
    v = _non_negative(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _cmd_quality(args: argparse.Namespace) -> int:
    from .orders import SHUFFLE_ALGORITHMS, quality_report

    if args.algo not in SHUFFLE_ALGORITHMS:
        raise UsageError(f"--algo must be one of {', '.join(sorted(SHUFFLE_ALGORITHMS))}, not {args.algo!r}")
    _at_least(args, shards=2, shard_size=1, canonical_nodes=1, block_size=1, batches=1, batch_size=1, seeds=1)
    if args.canonical_nodes > args.shards * args.shard_size:
        raise UsageError("--canonical-nodes must be at most the number of samples")
    reports = [
        quality_report(
            args.algo,
            shards=args.shards,
            shard_size=args.shard_size,
            canonical_nodes=args.canonical_nodes,
            block_size=args.block_size,
            batches=args.batches,
            batch_size=args.batch_size,
            seed=args.seed + k,
            epoch=args.epoch,
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
    from .tradeoff import order_link_cost

    names = list(EPOCH_ORDERS) if args.orders is None else [n.strip() for n in args.orders.split(",")]
    unknown = [n for n in names if n not in EPOCH_ORDERS]
    if unknown or not names:
        raise UsageError(f"--orders must name orders among {', '.join(EPOCH_ORDERS)}, not {args.orders!r}")
    _at_least(args, batches=1, batch_size=1)
    _check_shard_setup(args)

    def rows() -> Iterator[dict[str, Any]]:
        for name in names:
            yield order_link_cost(
                name,
                K=args.workers,
                shards=args.shards,
                shard_size=args.shard_size,
                canonical_nodes=args.canonical_nodes,
                block_size=args.block_size,
                seed=args.seed,
                epoch=args.epoch,
                batches=args.batches,
                batch_size=args.batch_size,
                strategy=args.strategy,
            )

    if args.json:
        for row in rows():
            print(json.dumps(row), flush=True)
        return 0
    print(
        f"K = {args.workers}, {args.shards} shards x {args.shard_size} samples, "
        f"canonical nodes = {args.canonical_nodes}, block = {args.block_size}, epoch {args.epoch} -> "
        f"{args.epoch + 1}, seed = {args.seed}"
    )

    def cells() -> Iterator[list[str]]:
        for row in rows():
            yield [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k, _ in _ORDERS_COLUMNS]

    print_table(cells(), [h for _, h in _ORDERS_COLUMNS], sys.stdout)
    print(
        "dev %: mean deviation of the A share from 50% over all batches of the epoch; "
        "shards/batch: distinct shards per batch; open/node: most shards a node needs at once; "
        "in-order: longest run left in shard order; loads in records, epoch t -> t+1."
    )
    return 0


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
    parser.add_argument(
        "--shard-size", type=int, default=10_000, metavar="Z", help="samples per shard (default 10000)"
    )
    parser.add_argument(
        "--canonical-nodes", type=int, default=1, metavar="C", help="canonical nodes (default 1)"
    )
    parser.add_argument(
        "--block-size", type=int, default=1 << 18, metavar="B", help="shuffle block size (default 262144)"
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


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``coded-shuffle``."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Coded data shuffling: loads, plans and simulations of epoch reshuffles.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    rate = sub.add_parser(
        "rate",
        help="uncoded, paired and coded loads with the lower bound, per epoch transition",
        description=(
            "Loads of each epoch transition, in symbols of one record: uncoded, after the order-2 "
            "phase (paired), after leftover combining (coded), the lower bound and the worst case "
            "N(K-1)/K. Either epochs of a random permutation (--workers, --points, --seed, --epochs) "
            "or one given shuffle matrix (--matrix)."
        ),
    )
    rate.add_argument(
        "--workers",
        "-K",
        metavar="K",
        help="number of workers (default 4), or one per epoch as K0,K1,...: elastic K",
    )
    rate.add_argument("--points", "-N", type=int, metavar="N", help="number of data points (default 1200)")
    rate.add_argument("--seed", type=_non_negative, default=0, help="seed of the epoch orders (default 0)")
    rate.add_argument(
        "--epochs", type=_positive, default=1, metavar="E", help="transitions to compute (default 1)"
    )
    rate.add_argument(
        "--start-epoch",
        type=_non_negative,
        default=0,
        metavar="T",
        help="first epoch t of t -> t+1 (default 0)",
    )
    rate.add_argument(
        "--matrix",
        metavar="FILE",
        help="shuffle matrix S as JSON (list of K lists of K ints) or CSV; '-' reads standard input",
    )
    _add_strategy_argument(rate)
    rate.add_argument(
        "--exact-bound",
        action="store_true",
        default=None,
        help=(
            "prove the lower bound for K > 20 too, by a feedback arc set program (HiGHS, up to "
            "60 s a transition; an unproven bound keeps its *)"
        ),
    )
    _add_order_arguments(rate)
    rate.add_argument("--json", action="store_true", help="one JSON object per transition")
    rate.set_defaults(func=_cmd_rate)

    quality = sub.add_parser(
        "quality",
        help="quality and locality of one shard-aware epoch order (mixture experiment)",
        description=(
            "Generate one shard-aware order on M shards of Z samples, the first half of kind A, the "
            "second of kind B, and report the deviation of the A share from 50%% over the first "
            "batches and over the whole epoch, a decile chi-square test of the head, distinct shards "
            "per batch, shards per node, and the longest stretch left in shard order."
        ),
    )
    quality.add_argument("--algo", required=True, help="naive, py1s, py2s, py1b, py1br or py1e")
    _add_shard_arguments(quality, shards=10_000, shard_size=10_000, block_size=1 << 18)
    quality.add_argument("--seed", type=_non_negative, default=1, help="seed (default 1)")
    quality.add_argument("--epoch", type=_non_negative, default=1, help="epoch (default 1)")
    quality.add_argument(
        "--seeds", type=int, default=1, metavar="R", help="also summarize seeds S..S+R-1 (default 1)"
    )
    quality.add_argument("--json", action="store_true", help="one JSON object")
    quality.set_defaults(func=_cmd_quality)

    orders = sub.add_parser(
        "orders",
        help="each epoch order's quality next to its coded and uncoded link load",
        description=(
            "How random, at what link cost: for each epoch order, its generation time, mixing and "
            "locality figures, and the uncoded, coded and lower-bound loads of one epoch transition."
        ),
    )
    orders.add_argument("--orders", metavar="A,B,...", help="orders to compare (default all)")
    orders.add_argument("--workers", "-K", type=int, default=8, metavar="K", help="workers (default 8)")
    _add_shard_arguments(orders, shards=1000, shard_size=1000, block_size=20_000)
    orders.add_argument("--seed", type=_non_negative, default=0, help="seed (default 0)")
    orders.add_argument(
        "--epoch", type=_non_negative, default=0, help="first epoch t of t -> t+1 (default 0)"
    )
    _add_strategy_argument(orders)
    orders.add_argument("--json", action="store_true", help="one JSON object per order")
    orders.set_defaults(func=_cmd_orders)

    plot = sub.add_parser(
        "plot",
        help="draw loads against K, or a leftover graph, as PNG or SVG (needs matplotlib)",
        description="Plots written as PNG or SVG by the extension of --output (needs matplotlib).",
    )
    kinds = plot.add_subparsers(dest="plot", metavar="PLOT", parser_class=_Parser, required=True)
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
    porders = kinds.add_parser(
        "orders",
        help="each epoch order's coded and uncoded link load against how badly it mixes",
        description="The randomness / link cost trade-off of the epoch orders (see 'coded-shuffle orders').",
    )
    porders.add_argument("--workers", "-K", type=int, default=8, metavar="K", help="workers (default 8)")
    _add_shard_arguments(porders, shards=1000, shard_size=1000, block_size=20_000, batches=False)
    porders.add_argument("--seed", type=_non_negative, default=0, help="seed (default 0)")
    for p, default in ((load, "greedy"), (leftovers, "exact"), (porders, "greedy")):
        p.add_argument("--output", "-o", required=True, metavar="FILE", help="output file, .png or .svg")
        _add_strategy_argument(p, default)
        p.set_defaults(func=_cmd_plot)

    sim = sub.add_parser(
        "simulate",
        help="run the in-process engine end to end on random records, epoch after epoch",
        description=(
            "Deliver each epoch's batches as XOR-coded symbols to K in-process workers holding real "
            "(random) records; every worker decodes its batch and checks every record against the "
            "master's checksums. Prints per transition the symbols and bytes of the coded scheme "
            "against sending every moved record alone, the lower bound, repairs, verification and time."
        ),
    )
    sim.add_argument(
        "--workers", "-K", type=int, default=6, metavar="K", help="number of workers (default 6)"
    )
    sim.add_argument(
        "--points", "-N", type=int, default=6000, metavar="N", help="number of records (default 6000)"
    )
    sim.add_argument(
        "--record-bytes", "-B", type=int, default=1024, metavar="B", help="bytes per record (default 1024)"
    )
    sim.add_argument(
        "--epochs", type=_positive, default=3, metavar="E", help="transitions to run (default 3)"
    )
    sim.add_argument(
        "--seed", type=_non_negative, default=0, help="seed of the orders and records (default 0)"
    )
    _add_strategy_argument(sim)
    _add_order_arguments(sim)
    sim.add_argument("--json", action="store_true", help="one JSON object per transition")
    sim.add_argument("--no-progress", action="store_true", help="no progress bar on standard error")
    sim.set_defaults(func=_cmd_simulate)

    mpi = sub.add_parser(
        "run",
        help="run the coded shuffle across processes with MPI (rank 0 master, ranks 1..K workers)",
        description=(
            "Launch mpiexec -n K+1 python -m mpi4py mpi/shuffle.py: the master holds the dataset, each "
            "worker only its batch; each transition is delivered coded (one broadcast) and/or uncoded "
            "(each moved record to its new holder), decoded and verified against the master's checksums. "
            f"Needs the MPI extra: {MPI_INSTALL_HINT}."
        ),
    )
    mpi.add_argument(
        "--workers", "-K", type=int, default=4, metavar="K", help="number of workers (default 4)"
    )
    mpi.add_argument("--points", "-N", type=int, default=6000, metavar="N", help="records (default 6000)")
    mpi.add_argument(
        "--record-bytes", "-B", type=int, default=1024, metavar="B", help="bytes per record (default 1024)"
    )
    mpi.add_argument(
        "--data", metavar="FILE", help=".npy file of records, one a row (instead of random ones)"
    )
    mpi.add_argument("--epochs", type=_positive, default=3, metavar="E", help="transitions (default 3)")
    mpi.add_argument(
        "--start-epoch", type=_non_negative, default=0, metavar="T", help="epoch to start from (default 0)"
    )
    mpi.add_argument(
        "--seed", type=_non_negative, default=0, help="seed of the orders and records (default 0)"
    )
    mpi.add_argument(
        "--mode", choices=("coded", "uncoded", "both"), default="coded", help="delivery (default coded)"
    )
    _add_strategy_argument(mpi)
    mpi.add_argument(
        "--link-mbps", type=float, metavar="R", help="pace the master's link at R megabits/s (default: raw)"
    )
    _add_order_arguments(mpi)
    mpi.add_argument("--json", action="store_true", help="one JSON object per transition and mode")
    mpi.set_defaults(func=_cmd_run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coded-shuffle`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except CodedShuffleError as exc:
        print(f"{PROG}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{PROG}: error: out of memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
