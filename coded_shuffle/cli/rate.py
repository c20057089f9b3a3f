"""``coded-shuffle rate``: the loads of each epoch transition, or of one given shuffle matrix."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .._progress import Progress
from ..bounds import EXACT_BOUND_MAX_K, EXACT_BOUND_NODE_LIMIT, lower_bound, optimality_gap, worst_case
from ..matrix import MAX_POINTS, feistel_shuffle_matrix, shuffle_matrix
from ..orders import (
    OrderSpec,
    order_placement,
)
from ..plan import PROGRESS_MIN_LEFTOVERS, rates
from ..plan import exact as plan_exact
from ._parser import COMMANDS, add_deprecated
from .common import (
    UsageError,
    _add_order_arguments,
    _add_storage_argument,
    _add_strategy_argument,
    _non_negative,
    _number,
    _positive,
    _shard_options_given,
    _warn_once,
    check_storage_option,
    compile_kernels,
    order_spec,
    print_table,
    print_times,
    worker_counts,
)
from .matrices import read_matrix
from .rate_bytes import add_bytes_arguments, byte_rows, bytes_lines, network_options, read_sizes


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


#: Points from which ``rate`` announces counting each shuffle matrix and shows its progress
#: (a second or more of work).
LONG_POINTS = 1 << 24


#: Workers from which ``rate --strategy exact`` announces its packing (seconds of HiGHS from
#: about K = 24; 12 s at K = 32).
ANNOUNCE_EXACT_K = 24


@contextlib.contextmanager
def _timed(what: str) -> Iterator[None]:
    """Announce a step bounded by a count of work, not seconds; on a terminal, its time so far."""
    bar = Progress(what, unit="s")
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(0.5):
            bar.update(int(bar.seconds))

    with bar:
        ticker = threading.Thread(target=tick, name="coded_shuffle-progress", daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join()


def _storage_row(S: np.ndarray, epoch: int | None, order_name: str | None, *, M: int) -> dict[str, Any]:
    """The row of :func:`rate_rows` for ``S`` when every worker stores ``M > 1`` batches.

    Loads in records, exact (:mod:`coded_shuffle.storage`): ``uncoded`` every missing piece alone,
    ``paired`` the group symbols alone, ``coded`` the planner's load, ``lower_bound`` the genie
    bound on pieces and ``worst_case`` ``R(t)`` for equal batches.
    """
    from ..storage import storage_lower_bound, storage_rates, storage_worst_case

    r = storage_rates(S, M=M)
    lb = storage_lower_bound(S, M=M)
    certified = r.coded == lb.value
    K = S.shape[0]
    N = int(S.sum())
    worst = storage_worst_case(N, K, M) if unequal_batches(S) is None else None
    return {
        "epoch": epoch, "K": K, "K_t": K, "K_t1": K, "N": N, "order": order_name,
        "strategy": None, "storage_plan": r.chosen, "subpackets": 1, "storage": M, "pieces": r.pieces,
        **_exact_loads(uncoded=r.uncoded, paired=r.paired, coded=r.coded),
        "lower_bound": _number(lb.value),
        "lower_bound_fraction": str(lb.value), "lower_bound_exact": lb.exact or certified,
        "optimal": certified, "optimality_gap": optimality_gap(r.coded, lb.value),
        **_exact_loads(worst_case=worst),
        "cycles": None, "uncoded_leftovers": 0, "conserved": True,
        "packing_optimal": certified, "note": None,
    }  # fmt: skip


def _exact_loads(**loads: Fraction | int | None) -> dict[str, Any]:
    """Each load as a JSON number (an int when whole, else the float of it) and, beside it as
    ``<name>_fraction``, exactly as a string such as ``"16/3"`` (both null for a null load).

    Examples
    --------
    >>> _exact_loads(uncoded=Fraction(16, 3), coded=2, worst_case=None)  # doctest: +NORMALIZE_WHITESPACE
    {'uncoded': 5.333333333333333, 'uncoded_fraction': '16/3', 'coded': 2, 'coded_fraction': '2',
     'worst_case': None, 'worst_case_fraction': None}
    """
    out: dict[str, Any] = {}
    for name, value in loads.items():
        out[name] = None if value is None else _number(value)
        out[f"{name}_fraction"] = None if value is None else str(Fraction(value))
    return out


def _rate_row(
    S: np.ndarray,
    epoch: int | None,
    order_name: str | None,
    *,
    strategy: str,
    subpackets: int,
    progress: bool,
    exact_bound: bool | None,
    warn: Callable[[str], None] | None,
    storage: int = 1,
    network: Any = None,
    record_bytes: int | None = None,
) -> dict[str, Any]:
    """The row of :func:`rate_rows` for one shuffle matrix ``S``."""
    if storage > 1:
        return _storage_row(S, epoch, order_name, M=storage)
    row = _loads_row(S, epoch, order_name, strategy=strategy, subpackets=subpackets, progress=progress,
                     exact_bound=exact_bound, warn=warn)  # fmt: skip
    if network is not None:
        from ..network import transition_times

        assert record_bytes is not None
        coded = float(Fraction(row["coded_fraction"]))
        times = transition_times(
            S, record_bytes=record_bytes, network=network, coded_symbols=coded,
            lower_bound_symbols=row["lower_bound"],
        )  # fmt: skip
        row.update(network=str(network), record_bytes=record_bytes, **times.to_dict(), why=times.why)
    return row


def _loads_row(
    S: np.ndarray,
    epoch: int | None,
    order_name: str | None,
    *,
    strategy: str,
    subpackets: int,
    progress: bool,
    exact_bound: bool | None,
    warn: Callable[[str], None] | None,
) -> dict[str, Any]:
    """The loads of one shuffle matrix ``S`` with one batch a worker."""
    K = max(S.shape)
    if progress and strategy == "exact" and K >= ANNOUNCE_EXACT_K:
        limit = plan_exact.EXACT_NODE_LIMIT
        with _timed(f"exact cycle packing, K = {K}: integer programs (HiGHS, at most {limit} nodes each)"):
            r = rates(S, strategy=strategy, subpackets=subpackets)
    else:
        r = rates(S, strategy=strategy, subpackets=subpackets, progress=progress)
    if progress and exact_bound and r.K > EXACT_BOUND_MAX_K:
        with _timed(f"proving the lower bound, K = {r.K}: the linear ordering program (HiGHS, at most "
                    f"{EXACT_BOUND_NODE_LIMIT} nodes)"):  # fmt: skip
            lb = lower_bound(S, exact=exact_bound)
    elif progress and r.leftovers >= PROGRESS_MIN_LEFTOVERS and r.K > EXACT_BOUND_MAX_K:
        with Progress(f"lower bound by ordering, K = {r.K}", enabled=False):  # a line, no bar
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
        "storage": 1,
        **_exact_loads(uncoded=r.uncoded, paired=r.paired, coded=r.coded),
        "lower_bound": lb.value,
        "lower_bound_exact": lb.exact or certified,
        "optimal": certified,
        "optimality_gap": optimality_gap(r.coded, lb.value),
        **_exact_loads(worst_case=worst_case(r.N, r.K) if why is None else None),
        "cycles": r.cycles_used,
        "uncoded_leftovers": _number(r.uncoded_leftovers),
        "conserved": r.conserved,
        "packing_optimal": r.packing.optimal or certified,
        "note": "; ".join(n for n in (r.packing.note, None if certified else lb.note) if n) or None,
    }


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
    storage: int = 1,
    network: Any = None,
    record_bytes: int | None = None,
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
    ``exact_bound`` is passed to :func:`coded_shuffle.bounds.lower_bound` as ``exact``. With
    ``storage = M > 1`` every worker stores ``M`` batches and the loads are those of
    :mod:`coded_shuffle.storage` (``paired`` is then the group symbols alone). With a ``network``
    (:class:`coded_shuffle.network.Network`) and ``record_bytes``, a row also has the transition's
    time bound and each mode's predicted time on it (:func:`coded_shuffle.network.transition_times`).

    The key ``optimal`` is the certificate ``coded == lower_bound``: then no scheme sends fewer
    symbols, so the packing is a maximum one and the bound the maximum over orderings, and
    ``packing_optimal`` and ``lower_bound_exact`` are true whatever the strategy and ``K``.
    """

    row = functools.partial(
        _rate_row,
        strategy=strategy,
        subpackets=subpackets,
        progress=progress,
        exact_bound=exact_bound,
        warn=warn,
        storage=storage,
        network=network,
        record_bytes=record_bytes,
    )
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
    ("optimality_gap", "gap"),
    ("optimal", "optimal"),
    ("worst_case", "worst"),
    ("gain", "gain"),
)


def _load_cell(v: Fraction) -> str:
    """A load of the table: whole as an int, else with two decimals (the exact fractions are in
    --json), so that the loads of one row read one way."""
    return str(v.numerator) if v.denominator == 1 else f"{float(v):.2f}"


def _format_rate(row: dict[str, Any]) -> list[str]:
    out = []
    for key, _ in _RATE_COLUMNS:
        v = row.get(key)
        if key == "gain":
            out.append(f"{row['uncoded'] / row['coded']:.3f}x" if row["coded"] else "-")
        elif key == "K" and row["K_t"] != row["K_t1"]:
            out.append(f"{row['K_t']}->{row['K_t1']}")
        elif key == "lower_bound":
            exact = Fraction(row.get("lower_bound_fraction", row["lower_bound"]))
            out.append(f"{_load_cell(exact)}{'' if row['lower_bound_exact'] else '*'}")
        elif key == "coded":
            out.append(_load_cell(Fraction(row["coded_fraction"])))
        elif key in ("uncoded", "paired") and v is not None:
            out.append(_load_cell(Fraction(row.get(f"{key}_fraction", v))))
        elif key == "optimal":
            out.append("yes" if v else "-")
        elif key == "optimality_gap":
            out.append(f"{v:.2%}")
        elif v is None:
            out.append("-")
        elif isinstance(v, float):
            out.append(f"{v:.2f}")
        else:
            out.append(str(v))
    return out


def _workers_schedule(text: str | None, epochs: int) -> list[int]:
    if text is None:
        return [4]
    counts = worker_counts(text)
    if len(counts) not in (1, epochs + 1):
        raise UsageError(
            f"--workers must give 1 or --transitions + 1 = {epochs + 1} worker counts, not {len(counts)}"
        )
    return counts


def _row_notes(r: dict[str, Any]) -> set[str]:
    """The ``note:`` lines that explain the flags of one row of the table."""
    flags: set[str] = set()
    if not r["lower_bound_exact"]:
        flags.add("bound* is a valid lower bound from a good ordering, not proven maximal")
    flags.add("gap = coded / bound - 1: at most how far coded is from the best possible load")
    if r["optimal"]:
        flags.add(
            "optimal yes: coded == bound, so no scheme sends fewer symbols "
            "(the packing is maximum and the bound exact)"
        )
    else:
        flags.add("optimal -: not proven; the best load lies between bound and coded")
        if r["packing_optimal"]:
            flags.add(
                "the cycle packing is proven maximum (packing_optimal in --json): no packing "
                "of this scheme does better, so any gap left is the bound's or the scheme's"
            )
    if r["note"]:
        flags.add(r["note"])
    if r.get("storage", 1) > 1:
        flags.add(
            f"storage {r['storage']}: records cut into {r['pieces']} pieces, each held by {r['storage']} "
            f"workers; loads in records, rounded to two decimals here, exact in --json (the keys "
            f"ending _fraction); paired: the group symbols alone; plan: {r['storage_plan']}"
        )
    if r["subpackets"] > 1:
        flags.add(f"records cut into {r['subpackets']} pieces; loads in records, rounded to two decimals "
                  "here, exact in --json (coded_fraction)")  # fmt: skip
    if r["uncoded_leftovers"]:
        flags.add("leftovers no cycle can carry (unequal batches, a changed K) are sent uncoded")
    return flags


def _check_storage(args: argparse.Namespace, schedule: list[int]) -> None:
    """Refuse a ``--storage`` that cannot go with the other options, naming the option."""
    if args.storage == 1:
        return
    if args.exact_bound:
        raise UsageError(
            "--exact-bound applies to --storage 1 only; the bound on pieces is exact up to K = 20"
        )
    if len(set(schedule)) > 1:
        shape = " x ".join(map(str, schedule))
        given = f"--workers {args.workers}" if args.matrix is None else f"a {shape} --matrix"
        raise UsageError(f"--storage above 1 needs a fixed number of workers, not {given}")
    check_storage_option(args, schedule[0])


def _cmd_rate(args: argparse.Namespace) -> int:
    kernels = ["packing", "ordering"] + (["storage"] if args.storage > 1 else [])
    rows = _matrix_rows(args) if args.matrix is not None else _order_rows(args, kernels)
    compile_kernels(kernels)
    if args.json:
        for row in rows:
            print(json.dumps(row), flush=True)
        return 0
    flags: set[str] = set()
    rows_seen: list[dict[str, Any]] = []

    def cells() -> Iterator[list[str]]:
        for r in rows:
            rows_seen.append(r)
            flags.update(_row_notes(r))
            yield _format_rate(r)

    print_table(cells(), [h for _, h in _RATE_COLUMNS], sys.stdout)
    for line in sorted(flags):
        print(f"note: {line}")
    if args.sizes is not None:
        print("\n".join(bytes_lines(rows_seen, args.sizes_read, args.sizes)))  # the file read once
    if args.network is not None:
        print_times(rows_seen)
    return 0


def _matrix_rows(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """The rows of ``rate --matrix``: one shuffle matrix, read from its file."""
    named = {"workers": "--workers", "points": "--points", "seed": "--seed", "epochs": "--transitions",
             "start_epoch": "--start-epoch"}  # fmt: skip
    given = [flag for n, flag in named.items() if getattr(args, n) is not None]
    given += ["--order"] if args.order != "auto" else []
    given += _shard_options_given(args) + (["--sizes"] if args.sizes else [])
    given += ["--balance"] if args.balance != "count" else []
    if given:
        raise UsageError(f"--matrix cannot be combined with {', '.join(given)}")
    S = read_matrix(args.matrix)
    _check_storage(args, list(S.shape))
    return rate_rows(
        matrix=S, strategy=args.strategy, subpackets=args.subpackets, warn=_warn_once(), progress=True,
        exact_bound=args.exact_bound, storage=args.storage, **network_options(args),
    )  # fmt: skip


def _order_rows(args: argparse.Namespace, kernels: list[str]) -> Iterator[dict[str, Any]]:
    """The rows of ``rate`` on the transitions of an order (adding the kernels it needs)."""
    args.seed = 0 if args.seed is None else args.seed
    args.epochs = 1 if args.epochs is None else args.epochs
    args.start_epoch = 0 if args.start_epoch is None else args.start_epoch
    schedule = _workers_schedule(args.workers, args.epochs)
    sizes = args.sizes_read = None if args.sizes is None else read_sizes(args.sizes)
    if sizes is None and args.balance == "bytes":
        raise UsageError("--balance bytes needs --sizes FILE, the bytes of each record")
    if sizes is not None and args.points not in (None, sizes.shape[0]):
        raise UsageError(f"--points must be the {sizes.shape[0]} records of --sizes, not {args.points}")
    N = (1200 if args.points is None else args.points) if sizes is None else sizes.shape[0]
    if N > MAX_POINTS:
        raise UsageError(f"--points must be at most 2**53 = {MAX_POINTS}, not {N}")
    if N < max(schedule):
        if sizes is not None:
            raise UsageError(f"--sizes: {args.sizes}: {N} records, fewer than --workers ({max(schedule)})")
        raise UsageError(f"--points must be at least --workers ({max(schedule)}), not {N}")
    spec = order_spec(args, N)
    _check_storage(args, schedule)
    kernels += ["feistel"] if spec.name == "feistel" else []
    if sizes is not None:
        return byte_rows(args, schedule=schedule, spec=spec, sizes=sizes)
    return rate_rows(
        K=schedule[0] if len(schedule) == 1 else schedule, N=N, seed=args.seed, epochs=args.epochs,
        start_epoch=args.start_epoch, strategy=args.strategy, order=spec, subpackets=args.subpackets,
        warn=_warn_once(), long_from=LONG_POINTS, progress=True, exact_bound=args.exact_bound,
        storage=args.storage, **network_options(args),
    )  # fmt: skip


def add_parser(sub: Any) -> None:
    """Add the ``rate`` command to the subcommands ``sub``."""
    rate = sub.add_parser(
        "rate",
        help=COMMANDS["rate"],
        description=(
            "Loads of each epoch transition, in symbols of one record: uncoded, after the order-2 "
            "phase (paired), after leftover combining (coded), the lower bound and the worst case "
            "N(K-1)/K. Either epochs of a random permutation (--workers, --points, --seed, --transitions) "
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
    rate.add_argument("--transitions", type=_positive, metavar="E", dest="epochs",
                      help="epoch transitions t -> t+1 to compute (default 1)")  # fmt: skip
    add_deprecated(rate, "--epochs", "--transitions", dest="epochs", type=_positive, metavar="E")
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
    _add_storage_argument(rate, "loads in records, exact")
    rate.add_argument(
        "--exact-bound",
        action="store_true",
        default=None,
        help=(
            "prove the lower bound for K > 20 too, by a linear ordering program (HiGHS, up to "
            "60 s a transition; an unproven bound keeps its *)"
        ),
    )
    add_bytes_arguments(rate)
    _add_order_arguments(rate)
    rate.add_argument("--json", action="store_true", help="one JSON object per transition")
    rate.set_defaults(func=_cmd_rate)
