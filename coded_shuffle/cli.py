"""The command line: ``coded-shuffle`` (also ``python -m coded_shuffle``).

Every command validates its input and reports a bad one as a single line on standard error,
``coded-shuffle: error: ...``, with exit status 2; a failure of the domain exits with 1. Tables go
to standard output; ``--json`` prints one JSON object a line instead.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any, NoReturn

import numpy as np

from ._progress import Progress
from .bounds import EXACT_BOUND_MAX_K, lower_bound, worst_case
from .errors import CodedShuffleError
from .matrix import check_shuffle_matrix, feistel_shuffle_matrix, shuffle_matrix
from .orders import (
    AUTO_FEISTEL_POINTS,
    EPOCH_ORDERS,
    OrderSpec,
    auto_order,
    ignored_shard_options,
    order_placement,
)
from .plan import PROGRESS_MIN_LEFTOVERS, STRATEGIES, rates

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
    ``i`` and needed by worker ``j``. CSV: ``K`` lines of ``K`` such ints, separated by commas,
    semicolons (when any line has one) or blanks, optionally under one header line of labels
    (no cell of it an integer). The format is taken from the content: JSON if it starts with
    ``[`` or ``{``. A UTF-8 byte order mark is skipped. Anything else is refused, naming the
    line and column at fault.
    """
    try:
        if path == "-":
            raw = getattr(sys.stdin, "buffer", None)
            text = raw.read().decode("utf-8") if raw is not None else sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read matrix file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"matrix file {path!r} is not UTF-8 text") from None
    text = text.removeprefix("\ufeff")
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"matrix file {path!r} is empty")
    if stripped[0] in "[{":
        return _json_matrix(stripped, path)
    return _csv_matrix(text, path)


def _json_matrix(text: str, path: str) -> np.ndarray:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"matrix file {path!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise UsageError(f"matrix file {path!r} must hold a JSON list of lists")
    K = len(rows)
    for i, row in enumerate(rows):
        if len(row) != K:
            raise UsageError(
                f"matrix in {path!r} is not square: row {i + 1} has {len(row)} entries, expected {K}"
            )
    values = [[_entry(v, f"matrix in {path!r}, row {i + 1}, column {j + 1}") for j, v in enumerate(row)]
              for i, row in enumerate(rows)]  # fmt: skip
    return _checked(values, path)


def _csv_matrix(text: str, path: str) -> np.ndarray:
    """Read CSV: the separator is ``;`` if any line has one, else ``,`` if any has one, else blanks.

    A separator ending a line (as some spreadsheets write) ends it; it adds no empty entry.
    """
    sep = ";" if ";" in text else "," if "," in text else None
    lines: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in next(csv.reader([line], delimiter=sep))] if sep else line.split()
        if len(cells) > 1 and not cells[-1]:
            cells.pop()
        lines.append((number, cells))
    first = lines[0][1]
    if len(lines) > 1 and not any(_is_int(c) for c in first):
        lines = lines[1:]  # a header of labels
    K = len(lines)
    for number, cells in lines:
        if len(cells) != K:
            raise UsageError(
                f"matrix in {path!r} is not square: line {number} has {len(cells)} entries, expected {K}"
            )
    values = [[_entry(c, f"matrix in {path!r}, line {number}, column {j + 1}") for j, c in enumerate(cells)]
              for number, cells in lines]  # fmt: skip
    return _checked(values, path)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _checked(values: list[list[int]], path: str) -> np.ndarray:
    K = len(values)
    out = np.zeros((K, K), dtype=np.int64)
    for i, row in enumerate(values):
        out[i, :] = row
    try:
        return check_shuffle_matrix(out)
    except ValueError as exc:
        raise UsageError(f"matrix in {path!r}: {exc}") from None


def _entry(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise UsageError(f"{where}: {v!r} is not an integer")
    if isinstance(v, int):
        out = v
    elif isinstance(v, float) and v.is_integer():
        out = int(v)
    elif isinstance(v, str):
        if not v:
            raise UsageError(f"{where}: the entry is empty")
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


def unequal_batches(S: np.ndarray) -> str | None:
    """Return why ``N (K - 1) / K`` is not the worst case of ``S``'s batches, or ``None`` if it is.

    That worst case (Attia and Tandon 2016) is over shuffles of ``K`` equal batches: every row
    sum and every column sum of ``S`` equal to ``N / K``. With unequal batches (``K`` not
    dividing ``N``, a hand-made matrix) or a changing ``K`` the coded load can exceed it.

    Examples
    --------
    >>> unequal_batches(np.array([[2, 1], [1, 2]])) is None
    True
    >>> unequal_batches(np.array([[0, 5], [0, 0]]))[:65]
    'the batches are unequal (held: 5 and 0 points, needed: 0 and 5), '
    """
    K_t, K_t1 = S.shape
    if K_t != K_t1:
        return f"K changes from {K_t} to {K_t1}, and N(K-1)/K holds for a fixed K only"
    held, needed = S.sum(axis=1), S.sum(axis=0)
    if int(held.min()) == int(held.max()) == int(needed.min()) == int(needed.max()):
        return None

    def sizes(v: np.ndarray) -> str:
        lo, hi = int(v.min()), int(v.max())
        return f"{v[0]} and {v[1]}" if v.size == 2 else (f"{lo}" if lo == hi else f"{lo} to {hi}")

    return (
        f"the batches are unequal (held: {sizes(held)} points, needed: {sizes(needed)}), "
        "and N(K-1)/K holds for equal batches only"
    )


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
    subpackets: int = 1,
    warn: Callable[[str], None] | None = None,
    long_from: int | None = None,
    progress: bool = False,
    exact_bound: bool | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one result dict per transition: for a given ``matrix``, or epochs of ``(K, N, seed)``.

    ``K`` is one worker count, or one per epoch ``start_epoch .. start_epoch + epochs`` (elastic
    ``K``). The key ``epoch`` is the epoch delivered, ``t + 1`` (``None`` for a given matrix).
    The ``feistel`` order streams the shuffle matrix in bounded memory. With ``subpackets = q``
    the cycles are packed on the pieces (:func:`coded_shuffle.plan.rates`); ``coded`` is then a
    plain number and ``coded_fraction`` the exact load as a string such as ``"21/2"``.
    ``worst_case`` is ``None`` unless all batches are equal, and ``warn`` (if given) is called
    with the reason. From ``long_from`` points on, counting each shuffle matrix is announced on
    standard error, with a bar on a terminal (closed before the row is made). ``progress``
    announces a long cycle packing, and the lower bound after it, on standard error.
    ``exact_bound`` is passed to :func:`coded_shuffle.bounds.lower_bound` as ``exact``.

    The key ``optimal`` is the certificate ``coded == lower_bound``: then no scheme sends fewer
    symbols, so the packing is a maximum one and the bound the maximum over orderings, and
    ``packing_optimal`` and ``lower_bound_exact`` are true whatever the strategy and ``K``.
    """

    def row(S: np.ndarray, epoch: int | None, order_name: str | None) -> dict[str, Any]:
        r = rates(S, strategy=strategy, subpackets=subpackets, progress=progress)
        if progress and r.leftovers >= PROGRESS_MIN_LEFTOVERS and r.K > EXACT_BOUND_MAX_K:
            how = "ordering program" if exact_bound else "ordering"
            with Progress(f"lower bound by {how}, K = {r.K}", enabled=False):  # a line, no bar
                lb = lower_bound(S, exact=exact_bound)
        else:
            lb = lower_bound(S, exact=exact_bound)
        certified = r.coded == lb.value
        K_t, K_t1 = S.shape
        why = unequal_batches(S)
        if why is not None and warn is not None:
            warn(f"worst_case is null: {why}")
        return {
            "epoch": epoch,
            "K": r.K,
            "K_t": K_t,
            "K_t1": K_t1,
            "N": r.N,
            "order": order_name,
            "strategy": strategy,
            "subpackets": r.subpackets,
            "uncoded": r.uncoded,
            "paired": r.paired,
            "coded": _number(r.coded),
            "coded_fraction": str(Fraction(r.coded)),
            "lower_bound": lb.value,
            "lower_bound_exact": lb.exact or certified,
            "optimal": certified,
            "worst_case": _number(worst_case(r.N, r.K)) if why is None else None,
            "cycles": r.cycles_used,
            "uncoded_leftovers": _number(r.uncoded_leftovers),
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

    def counting(t: int) -> Progress | None:
        if long_from is None or N < long_from:
            return None
        what = f"counting S of epoch {t} -> {t + 1} over {N:,} points ({spec.name} order)"
        return Progress(what, total=N, unit="points")

    if spec.name == "feistel":
        for t in range(start_epoch, start_epoch + epochs):
            k_t, k_t1 = schedule[t - start_epoch], schedule[t - start_epoch + 1]
            bar = counting(t)
            with bar if bar is not None else contextlib.nullcontext():
                done = None if bar is None else bar.update
                S = feistel_shuffle_matrix(N, k_t, k_t1, seed=seed, epoch=t, progress=done)
            yield row(S, t + 1, spec.name)
        return
    prev = order_placement(N, schedule[0], seed=seed, epoch=start_epoch, spec=spec)
    for t in range(start_epoch, start_epoch + epochs):
        bar = counting(t)
        with bar if bar is not None else contextlib.nullcontext():
            nxt = order_placement(N, schedule[t - start_epoch + 1], seed=seed, epoch=t + 1, spec=spec)
            S = shuffle_matrix(prev, nxt)
            if bar is not None:
                bar.update(N)
        yield row(S, t + 1, spec.name)
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
        elif key == "coded":
            out.append(row["coded_fraction"])
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


#: Points from which ``rate`` announces counting each shuffle matrix and shows its progress
#: (a second or more of work).
LONG_POINTS = 1 << 24


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
    from .warmup import uncompiled, warm_up

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
            print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)

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
    kernels = ["packing", "ordering"]
    if args.matrix is not None:
        given = [
            f"--{n.replace('_', '-')}"
            for n in ("workers", "points", "seed", "epochs", "start_epoch")
            if getattr(args, n) is not None
        ]
        given += ["--order"] if args.order != "auto" else []
        given += _shard_options_given(args)
        if given:
            raise UsageError(f"--matrix cannot be combined with {', '.join(given)}")
        S = read_matrix(args.matrix)
        rows = rate_rows(
            matrix=S,
            strategy=args.strategy,
            subpackets=args.subpackets,
            warn=_warn_once(),
            progress=True,
            exact_bound=args.exact_bound,
        )
    else:
        args.seed = 0 if args.seed is None else args.seed
        args.epochs = 1 if args.epochs is None else args.epochs
        args.start_epoch = 0 if args.start_epoch is None else args.start_epoch
        schedule = _workers_schedule(args.workers, args.epochs)
        N = 1200 if args.points is None else args.points
        if N < max(schedule):
            raise UsageError(f"--points must be at least --workers ({max(schedule)}), not {N}")
        spec = order_spec(args, N)
        kernels += ["feistel"] if spec.name == "feistel" else []
        rows = rate_rows(
            K=schedule[0] if len(schedule) == 1 else schedule,
            N=N,
            seed=args.seed,
            epochs=args.epochs,
            start_epoch=args.start_epoch,
            strategy=args.strategy,
            order=spec,
            subpackets=args.subpackets,
            warn=_warn_once(),
            long_from=LONG_POINTS,
            progress=True,
            exact_bound=args.exact_bound,
        )
    compile_kernels(kernels)
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
                if r["subpackets"] > 1:
                    flags.add(f"records cut into {r['subpackets']} pieces; loads in records, coded exact")
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
        elif args.plot == "orders":
            _check_shard_setup(args)
            compile_kernels(["packing", "ordering", "feistel"])
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
            S = read_matrix(args.matrix)
            compile_kernels(["packing", "ordering"])
            out = plots.plot_leftovers(S, args.output, strategy=args.strategy)
    except ImportError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        raise UsageError(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    print(out)
    return 0


# --------------------------------------------------------------------------- simulate

_SIM_COLUMNS = (
    "epoch", "coded", "uncoded", "xor", "lone", "bound", "coded MB", "uncoded MB", "saving", "framing",
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
        f"{1 - r['coded_bytes'] / r['uncoded_bytes']:.1%}" if r["uncoded_bytes"] else "-",
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
    if args.record_bytes % args.subpackets:
        raise UsageError(
            f"--subpackets must divide --record-bytes ({args.record_bytes}), not {args.subpackets}"
        )
    spec = order_spec(args, args.points)
    groups = ["packing", "planning", "ordering", "decoding"]
    compile_kernels(groups + (["feistel"] if spec.name == "feistel" else []))
    # A tiny run first: the compiled kernels load here, so that the first transition's time is
    # the transition's alone.
    simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0, strategy=args.strategy)
    verified = [True]
    rows: list[list[str]] = []
    if not args.json:
        print(
            f"K = {args.workers}, N = {args.points}, record = {args.record_bytes} B, "
            f"epochs = {args.epochs}, seed = {args.seed}, strategy = {args.strategy}, "
            f"order = {spec.name}"
            + (f", subpackets = {args.subpackets}" if args.subpackets > 1 else "")
        )
    # JSON lines are the progress; a table comes at the end, so a bar (on a terminal) or one
    # announcement (elsewhere) says what happens meanwhile.
    quiet = args.json or args.no_progress
    bar = Progress(
        f"simulating {args.epochs} transition{'s' if args.epochs > 1 else ''} of {args.points:,} records",
        total=args.epochs,
        unit="transitions",
        enabled=False if quiet else None,
        announce=not quiet,
    )

    def on_transition(rep: Any) -> None:
        d = rep.to_dict()
        verified[0] &= bool(d["verified"])
        if args.json:
            print(json.dumps(d), flush=True)
        else:
            rows.append(_format_simulate(d))
            bar.advance()

    with bar:
        simulate(
            K=args.workers,
            N=args.points,
            record_bytes=args.record_bytes,
            epochs=args.epochs,
            seed=args.seed,
            strategy=args.strategy,
            on_transition=on_transition,
            order=spec,
            subpackets=args.subpackets,
        )
    if not args.json:
        print_table(iter(rows), _SIM_COLUMNS, sys.stdout)
        print("coded/uncoded: symbols of the coded scheme / of sending every moved record alone;")
        print("xor/lone: coded symbols that combine two records / carry one; bound: genie lower bound.")
        if args.subpackets > 1:
            print(
                f"symbols are pieces of {args.record_bytes // args.subpackets} B, "
                f"1/{args.subpackets} record: divide the counts by {args.subpackets} for records."
            )
        print("saving: 1 - coded MB / uncoded MB, the payload bytes the coded scheme does not send.")
        print("framing: bytes of frame headers, symbol entries, receiver indexes and padding (40 B a frame,")
        print("12 B a symbol, 12 B a row of an index, docs/wire-format.md), sent on top of coded MB, as a")
        print("share of it.")
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


#: ``coded-shuffle run`` launches ``mpiexec -n K+1 python -m mpi4py -m MPI_PROGRAM ...``.
MPI_PROGRAM = "coded_shuffle.mpi_program"


def run_command(args: argparse.Namespace, mpiexec: str) -> list[str]:
    """Return the ``mpiexec`` command line that ``coded-shuffle run`` launches.

    Options left at their defaults are not passed on, so the program sees what the user gave.
    """
    cmd = [mpiexec, "-n", str(args.workers + 1), sys.executable, "-m", "mpi4py", "-m", MPI_PROGRAM]
    if args.data is not None:
        cmd += ["--data", args.data]
    else:
        cmd += ["--points", str(args.points), "--record-bytes", str(args.record_bytes)]
    cmd += ["--epochs", str(args.epochs), "--start-epoch", str(args.start_epoch), "--seed", str(args.seed)]
    cmd += ["--mode", args.mode, "--order", args.order]
    if args.strategy is not None:
        cmd += ["--strategy", args.strategy]
    for name in SHARD_ORDER_DEFAULTS:
        if getattr(args, name) is not None:
            cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if args.link_mbps is not None:
        cmd += ["--link-mbps", repr(args.link_mbps)]
    if args.timeout is not None:
        cmd += ["--timeout", repr(args.timeout)]
    if args.json:
        cmd += ["--json", "-"]
    return cmd


def _cmd_run(args: argparse.Namespace) -> int:
    import importlib.util

    from .mpi_program import check_data_file, ignored_options

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.data is not None:
        sizes = (("--points", args.points), ("--record-bytes", args.record_bytes))
        given = [o for o, v in sizes if v is not None]
        if given:
            raise UsageError(f"--data cannot be combined with {' or '.join(given)}")
        problem = check_data_file(args.data, workers=args.workers)
        if problem is not None:
            raise UsageError(problem)
    else:
        args.points = 6000 if args.points is None else args.points
        args.record_bytes = 1024 if args.record_bytes is None else args.record_bytes
        if args.points < args.workers:
            raise UsageError(f"--points must be at least --workers ({args.workers}), not {args.points}")
        if args.record_bytes < 1:
            raise UsageError(f"--record-bytes must be at least 1, not {args.record_bytes}")
    if args.link_mbps is not None and not 0 < args.link_mbps < float("inf"):
        raise UsageError(f"--link-mbps must be a positive number, not {args.link_mbps}")
    if args.timeout is not None and not 0 < args.timeout < 1e9:
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}")
    given = [o for o, v in (("--strategy", args.strategy), ("--link-mbps", args.link_mbps)) if v is not None]
    problem = ignored_options(args.mode, given)
    if problem is not None:
        raise UsageError(problem)
    if args.data is None:
        order_spec(args, args.points)  # validates the order options before launching
    mpiexec = find_mpiexec()
    if mpiexec is None or importlib.util.find_spec("mpi4py") is None:
        what = "mpiexec" if mpiexec is None else "mpi4py"
        raise UsageError(f"{what} not found; install the MPI extra: {MPI_INSTALL_HINT}")
    from .warmup import KERNEL_GROUPS

    compile_kernels(KERNEL_GROUPS)  # once here, not in every rank
    sys.stdout.flush()
    return launch(run_command(args, mpiexec))


#: The signals ``coded-shuffle run`` passes on to its MPI job before it ends.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _copy_new(path: str, offset: int) -> int:
    """Copy to standard output the whole lines added to ``path`` after ``offset``; return the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1
    if end:
        sys.stdout.buffer.write(data[:end])
        sys.stdout.flush()
    return offset + end


def _end_job(proc: Any, grace: float) -> None:
    """End the job's process group: SIGTERM, and SIGKILL to whatever is left after ``grace`` s."""
    import subprocess

    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)


def launch(cmd: list[str]) -> int:
    """Run the MPI job ``cmd`` (``mpiexec ...``) to its end and return ``coded-shuffle run``'s status.

    The master writes its results to a file that is copied to standard output line by line as
    the job runs, and its status to another; ``mpiexec`` and every rank write to standard error
    only, so that MPICH's reports never reach standard output. The job runs in a process group
    of its own; SIGTERM, SIGINT and SIGHUP to this process end it (SIGTERM, then SIGKILL after
    3 s), and the ranks watch this process, so that none outlives it by more than a few seconds
    even after a SIGKILL (:mod:`coded_shuffle.engine.mpi`). Status: the master's (0, 1 for a
    failed verification, 2 for bad input), 1 for a job that failed otherwise, 128 + N after
    signal N.
    """
    import subprocess
    import tempfile

    from .engine.mpi import LAUNCHER_ENV

    got: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        got.append(signum)

    with tempfile.TemporaryDirectory(prefix="coded-shuffle-run-") as tmp:
        results, status = os.path.join(tmp, "results"), os.path.join(tmp, "status")
        env = dict(os.environ, **{LAUNCHER_ENV: str(os.getpid())})
        previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
        offset = 0
        try:
            proc = subprocess.Popen(
                [*cmd, "--results", results, "--status-file", status],
                stdout=sys.stderr.fileno(),
                env=env,
                start_new_session=True,
            )
            while not got:  # copy the results as they come, until mpiexec ends or a signal comes
                offset = _copy_new(results, offset)
                try:
                    proc.wait(0.1)
                    break
                except subprocess.TimeoutExpired:
                    continue
            # After a signal: end the job. Otherwise mpiexec has ended, and so have the ranks; a
            # rank that has not is ended too.
            _end_job(proc, grace=3.0 if got else 0.5)
            _copy_new(results, offset)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if got:
            name = signal.Signals(got[0]).name
            print(f"{PROG}: error: stopped by {name}; the MPI job was ended", file=sys.stderr)
            return 128 + got[0]
        code = _read_status(status)
    if code is None:
        print(f"{PROG}: error: the MPI job failed (mpiexec exit status {proc.returncode})", file=sys.stderr)
        return 1
    return code


def _read_status(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


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
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _cmd_quality(args: argparse.Namespace) -> int:
    from .orders import SHUFFLE_ALGORITHMS, quality_report
    from .orders.quality import REPORT_STEPS

    if args.algo not in SHUFFLE_ALGORITHMS:
        raise UsageError(f"--algo must be one of {', '.join(sorted(SHUFFLE_ALGORITHMS))}, not {args.algo!r}")
    _at_least(args, shards=2, shard_size=1, canonical_nodes=1, block_size=1, batches=1, batch_size=1, seeds=1)
    if args.canonical_nodes > args.shards * args.shard_size:
        raise UsageError("--canonical-nodes must be at most the number of samples")
    seeds = f", {args.seeds} seeds" if args.seeds > 1 else ""
    with Progress(
        f"measuring {args.algo} on {args.shards:,} shards x {args.shard_size:,} samples{seeds}",
        total=args.seeds * REPORT_STEPS,
        unit="steps",
    ) as bar:
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
    from .tradeoff import LINK_COST_STEPS, order_link_cost

    names = list(EPOCH_ORDERS) if args.orders is None else [n.strip() for n in args.orders.split(",")]
    unknown = [n for n in names if n not in EPOCH_ORDERS]
    if unknown or not names:
        raise UsageError(f"--orders must name orders among {', '.join(EPOCH_ORDERS)}, not {args.orders!r}")
    _at_least(args, batches=1, batch_size=1)
    _check_shard_setup(args)
    compile_kernels(["packing", "ordering", "feistel"] if "feistel" in names else ["packing", "ordering"])
    bar = Progress(
        f"generating and measuring {len(names)} order{'s' if len(names) > 1 else ''} "
        f"of {args.shards * args.shard_size:,} samples",
        total=len(names) * LINK_COST_STEPS,
        unit="steps",
    )
    out = _AboveBar(bar, sys.stdout)

    def rows() -> Iterator[dict[str, Any]]:
        for i, name in enumerate(names):
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
                progress=_shifted(bar.update, i * LINK_COST_STEPS),
            )

    if args.json:
        for row in _under(bar, rows()):
            print(json.dumps(row), file=out, flush=True)
        return 0
    print(
        f"K = {args.workers}, {args.shards} shards x {args.shard_size} samples, "
        f"canonical nodes = {args.canonical_nodes}, block = {args.block_size}, epoch {args.epoch} -> "
        f"{args.epoch + 1}, seed = {args.seed}"
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
    # No defaults here: --matrix refuses them when given; the epochs branch fills them in.
    rate.add_argument("--seed", type=_non_negative, help="seed of the epoch orders (default 0)")
    rate.add_argument("--epochs", type=_positive, metavar="E", help="transitions to compute (default 1)")
    rate.add_argument(
        "--start-epoch",
        type=_non_negative,
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
        "--subpackets",
        type=_positive,
        default=1,
        metavar="Q",
        help=(
            "cut every record into Q pieces and pack the cycles on Q times the leftovers; the loads "
            "stay in records, exact (default 1)"
        ),
    )
    rate.add_argument(
        "--exact-bound",
        action="store_true",
        default=None,
        help=(
            "prove the lower bound for K > 20 too, by a linear ordering program (HiGHS, up to "
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
            "second of kind B, and report the deviation of the A share from 50% over the first "
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
    sim.add_argument(
        "--subpackets",
        type=_positive,
        default=1,
        metavar="Q",
        help="cut every record into Q pieces of B/Q bytes (Q must divide B) and code the pieces (default 1)",
    )
    _add_order_arguments(sim)
    sim.add_argument("--json", action="store_true", help="one JSON object per transition")
    sim.add_argument(
        "--no-progress", action="store_true", help="no progress bar or announcement on standard error"
    )
    sim.set_defaults(func=_cmd_simulate)

    mpi = sub.add_parser(
        "run",
        help="run the coded shuffle across processes with MPI (rank 0 master, ranks 1..K workers)",
        description=(
            "Launch mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_program: the master holds the "
            "dataset, each worker only its batch; each transition is delivered coded (one broadcast), "
            "uncoded (each moved record from the master to its new holder) and/or alltoallv (the workers "
            "send each other the records that move), decoded and verified against the master's checksums. "
            f"Needs the MPI extra: {MPI_INSTALL_HINT}."
        ),
    )
    mpi.add_argument(
        "--workers", "-K", type=int, default=4, metavar="K", help="number of workers (default 4)"
    )
    mpi.add_argument("--points", "-N", type=int, metavar="N", help="records (default 6000)")
    mpi.add_argument("--record-bytes", "-B", type=int, metavar="B", help="bytes per record (default 1024)")
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
        "--mode",
        choices=("coded", "uncoded", "alltoallv", "both", "all"),
        default="coded",
        help="delivery: both = coded and uncoded, all = coded, uncoded and alltoallv (default coded)",
    )
    _add_strategy_argument(mpi)
    mpi.set_defaults(strategy=None)  # greedy; given only where the mode plans (coded)
    mpi.add_argument(
        "--link-mbps", type=float, metavar="R", help="pace the master's link at R megabits/s (default: raw)"
    )
    _add_order_arguments(mpi)
    mpi.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="end the job, with one line naming the rank, when a rank does not answer within SECONDS "
        "(default: 60 s plus 1 s per 20 MB of records)",
    )
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
