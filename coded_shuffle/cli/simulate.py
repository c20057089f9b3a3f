"""``coded-shuffle simulate``: the in-process engine end to end, epoch after epoch."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from .._progress import Progress, say
from ..codec import FRAME_HEADER_BYTES, PACKED_TERMS_VERSION, RUN_BYTES, entry_bytes
from ..engine.schemes import names
from ._parser import COMMANDS, add_deprecated
from .common import (
    PROG,
    UsageError,
    _add_order_arguments,
    _add_storage_argument,
    _add_strategy_argument,
    _non_negative,
    _positive,
    add_network_argument,
    auto_mode,
    check_sizes,
    check_storage_option,
    compile_kernels,
    network_option,
    order_spec,
    print_table,
    print_times,
    rack_load_lines,
    worker_counts,
)
from .data import add_data_arguments, open_data, refuse_format_options, sizes_refusal, sizes_text
from .sized import ByteBound, StorageByteBound, sized_time_lines

_SIM_COLUMNS = (
    "epoch", "coded", "uncoded", "xor", "lone", "bound", "coded MB", "uncoded MB", "saving", "framing",
    "down MB", "down bound", "repairs", "verified", "seconds",
)  # fmt: skip


def _columns(sized: bool) -> tuple[str, ...]:
    """The table's columns; on records of different sizes with ``bound MB`` after ``uncoded MB``."""
    if not sized:
        return _SIM_COLUMNS
    at = _SIM_COLUMNS.index("uncoded MB") + 1
    return (*_SIM_COLUMNS[:at], "bound MB", *_SIM_COLUMNS[at:])


def _format_simulate(r: dict[str, Any]) -> list[str]:
    """One row of the table (:func:`_columns`: ``bound MB`` where the report has ``lower_bound_bytes``)."""
    cells = _cells(r)
    if "lower_bound_bytes" in r:
        star = "" if r["lower_bound_bytes_exact"] else "*"
        cells.insert(_SIM_COLUMNS.index("uncoded MB") + 1, f"{r['lower_bound_bytes'] / 1e6:.2f}{star}")
    return cells


def _cells(r: dict[str, Any]) -> list[str]:
    coded = r["coded_bytes"]  # None without the coded plan (an exchange's storage beyond 64 workers)
    return [
        str(r["epoch"]),
        "-" if r["coded_symbols"] is None else str(r["coded_symbols"]),
        str(r["uncoded_symbols"]),
        str(r["xor_symbols"]),
        str(r["lone_symbols"]),
        "-" if r["lower_bound"] is None else f"{r['lower_bound']}{'' if r['lower_bound_exact'] else '*'}",
        "-" if coded is None else f"{coded / 1e6:.2f}",
        f"{r['uncoded_bytes'] / 1e6:.2f}",
        f"{1 - coded / r['uncoded_bytes']:.1%}" if r["uncoded_bytes"] and coded is not None else "-",
        f"{r['framing_overhead']:.2%}",
        f"{r['max_received_bytes'] / 1e6:.2f}",
        f"{r['download_bound_bytes'] / 1e6:.2f}",
        str(r["repairs"]),
        "yes" if r["verified"] else "NO",
        f"{r['seconds']:.3f}",
    ]


def _check_simulate(args: argparse.Namespace) -> None:
    """Refuse, naming the option, what ``simulate`` cannot run."""
    check_sizes(args)
    if args.points * args.record_bytes > 1 << 34:
        raise UsageError(
            f"--points x --record-bytes must be at most 16 GiB, not {args.points * args.record_bytes}"
        )
    if args.record_bytes % args.subpackets:
        raise UsageError(
            f"--subpackets must divide --record-bytes ({args.record_bytes}), not {args.subpackets}"
        )
    if args.mode in ("uncoded", "split") and args.storage > 1:
        raise UsageError(f"--storage above 1 applies to --mode coded or exchange, not --mode {args.mode}")


def _print_footer(args: argparse.Namespace, mode: str) -> None:
    """What the table's columns mean, under it."""
    print("coded/uncoded: symbols of the coded scheme / of sending every moved record alone;")
    print("xor/lone: coded symbols that combine two records / carry one; bound: genie lower bound.")
    if args.subpackets > 1:
        print(
            f"symbols are pieces of {args.record_bytes // args.subpackets} B, "
            f"1/{args.subpackets} record: divide the counts by {args.subpackets} for records."
        )
    if args.storage > 1:
        from ..engine.state import sized_pieces, storage_pieces
        from ..storage import STORAGE_MAX_K

        C, width = storage_pieces(args.record_bytes, args.workers, args.storage)  # checked
        M = args.storage
        cut = f"cut into {C} pieces of {width} B" if C > 1 else "stored whole"
        if getattr(args, "sizes", None) is not None:  # of many sizes: the pieces of their mean size
            C = sized_pieces(args.sizes, args.workers, M)
            cut = f"each cut by its own length into {C} pieces" if C > 1 else "stored whole"
        print(f"storage {M}: records {cut}, each held by {M} workers;")
        print(f"symbols are pieces (divide the counts by {C} for records): xor symbols sum up to {M + 1}")
        print("pieces, or chains of such sums; uncoded sends every missing piece alone. A frame lists the")
        print("pieces each symbol sums at the fewest bits of the frame's largest id and count (wire format")
        print(f"version {PACKED_TERMS_VERSION}).")
        if args.workers > STORAGE_MAX_K and mode == "exchange":
            print(f"Beyond {STORAGE_MAX_K} workers the exchange makes no coded plan: its columns are '-'.")
    if getattr(args, "sizes", None) is not None and args.storage > 1:
        print("records of different sizes: coded MB pads each symbol to its longest piece; bound MB: the")
        print("genie bound of the missing pieces weighted by their bytes: no delivery sends less payload.")
    elif getattr(args, "sizes", None) is not None:
        print("records of different sizes: coded MB pads each XOR of two records to the longer; bound MB:")
        print("the genie lower bound weighted by size, the payload bytes no coded delivery sends fewer of.")
    print("saving: 1 - coded MB / uncoded MB, the payload bytes the coded scheme does not send.")
    print(f"down MB: the most payload one worker received ({mode}); down bound: the most bytes a")
    print("worker misses, which no delivery can put under on the busiest downlink.")
    frame, symbol = FRAME_HEADER_BYTES, entry_bytes()[0]
    print("framing: bytes of frame headers, symbol entries, receiver indexes and padding "
          f"({frame} B a frame,")  # fmt: skip
    print(f"{symbol} B a symbol, {RUN_BYTES} B a row of an index, docs/wire-format.md), sent on top of "
          "coded MB, as a share of it.")  # fmt: skip


def _print_header(args: argparse.Namespace, order: str, mode: str, chose: str) -> None:
    """The run's inputs above the table; with ``--json``, only what ``--mode auto`` chose (on
    standard error)."""
    if args.json:
        if chose:
            say(f"{PROG}: {chose}")
        return
    print(
        f"K = {args.workers}, N = {args.points}, {_records_part(args)}, "
        f"epochs = {args.epochs}, seed = {args.seed}, strategy = {args.strategy}, "
        f"order = {order}, mode = {mode}"
        + (f" ({chose})" if chose else "")
        + (f", data = {args.data}" if args.data is not None else "")
        + (f", subpackets = {args.subpackets}" if args.subpackets > 1 else "")
        + (f", storage = {args.storage} batches" if args.storage > 1 else "")
    )


def _records_part(args: argparse.Namespace) -> str:
    """``record = 1024 B``, or for records of different sizes ``records of 10 to 200 B, mean 105 B``."""
    sizes = getattr(args, "sizes", None)
    return f"record = {args.record_bytes} B" if sizes is None else f"records of {sizes_text(sizes)}"


#: ``--points`` and ``--record-bytes`` without ``--data``.
_SIZE_DEFAULTS = {"points": 6000, "record_bytes": 1024}


def _with_data(args: argparse.Namespace) -> tuple[argparse.Namespace, Any]:
    """``args`` with ``--points`` and ``--record-bytes`` filled in, from ``--data``'s records when
    given (then also its record source, else None)."""
    filled = argparse.Namespace(**vars(args))
    if args.data is None:
        refuse_format_options(args)
        for dest, default in _SIZE_DEFAULTS.items():
            if getattr(args, dest) is None:
                setattr(filled, dest, default)
        return filled, None
    given = [f for d, f in (("points", "--points"), ("record_bytes", "--record-bytes")) if getattr(args, d)]
    if given:
        raise UsageError(f"--data cannot be combined with {' or '.join(given)}")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    source, _ = open_data(args, workers=args.workers)
    filled.points, filled.record_bytes = len(source), int(source.width)
    if source.record_bytes is None:  # records of different sizes
        filled.sizes = np.asarray(source.sizes)
        problem = sizes_refusal(args.data, filled.sizes, {
            f"--subpackets {args.subpackets}": args.subpackets != 1,
            "--simulator simgrid": args.simulator != "engine",
        })  # fmt: skip
        if problem is not None:
            raise UsageError(problem)
    return filled, source


def _cmd_simulate(args: argparse.Namespace) -> int:
    counts = worker_counts(args.workers)
    args.workers = max(counts)
    if len(counts) > 1:
        return _run_elastic(args, counts)
    args.epochs = 3 if args.epochs is None else args.epochs
    args, source = _with_data(args)
    if args.simulator == "simgrid":  # the deliveries replayed on a simulated network
        from .replay import cmd_replay

        return cmd_replay(args)
    return _run_engine(args, source)


def _run_engine(args: argparse.Namespace, source: Any = None) -> int:
    """``simulate`` on the in-process engine: every transition delivered, decoded and verified,
    on ``source``'s records (``--data``) or random ones."""
    from ..codec import load_dataset
    from ..engine import run, simulate

    _check_simulate(args)
    check_storage_option(args, args.workers, args.record_bytes)
    network = network_option(args, stored=True)  # a storage timed in its pieces, on racks too
    spec = order_spec(args, args.points)
    groups = ["packing", "planning", "ordering", "decoding"]
    groups += ["feistel"] if spec.name == "feistel" else []
    compile_kernels(groups + (["storage"] if args.storage > 1 else []))
    mode, chose = _mode(args, spec, network)
    sizes = getattr(args, "sizes", None)
    # A tiny run first: the compiled kernels load here, so that the first transition's time is
    # the transition's alone.
    simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0, strategy=args.strategy)
    bound = _byte_bound(args, spec, network if mode == "exchange" else None)
    verified = [True]
    rows: list[list[str]] = []
    reports: list[dict[str, Any]] = []
    _print_header(args, spec.name, mode, chose)
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
        if bound is not None:  # records of different sizes: the bound weighted by size
            d["lower_bound_bytes"], d["lower_bound_bytes_exact"] = bound(rep.epoch)
        verified[0] &= bool(d["verified"])
        if args.json:
            print(json.dumps(d), flush=True)
        else:
            rows.append(_format_simulate(d))
            reports.append(d)
            bar.advance()

    options = dict(
        epochs=args.epochs, seed=args.seed, strategy=args.strategy, on_transition=on_transition, order=spec,
        subpackets=args.subpackets, storage=args.storage, mode=mode, network=network,
    )  # fmt: skip
    with bar:
        if source is None:
            simulate(K=args.workers, N=args.points, record_bytes=args.record_bytes, **options)
        else:
            run(load_dataset(source), K=args.workers, **options)
    if not args.json:
        print_table(iter(rows), _columns(bound is not None), sys.stdout)
        _print_footer(args, mode)
        timed = [r for r in reports if r["network"] is not None]
        if timed and sizes is not None:  # in bytes
            print("\n".join(sized_time_lines(timed, sizes)))
        elif timed:
            print_times(timed)
        for line in rack_load_lines(timed):  # the exchange on racks
            print(line)
    if not verified[0]:
        say(f"{PROG}: error: a transition was not verified")
        return 1
    return 0


def _mode(args: argparse.Namespace, spec: Any, network: Any) -> tuple[str, str]:
    """``--mode``, and with ``auto`` the mode it chose and why; on records of different sizes
    (``args.sizes``) chosen on the times in bytes."""
    if args.mode != "auto":
        return args.mode, ""
    return auto_mode(args.points, args.workers, args.seed, spec, args.record_bytes, network, args.strategy,
                     sizes=getattr(args, "sizes", None), storage=args.storage)  # fmt: skip


def _byte_bound(
    args: argparse.Namespace, spec: Any, network: Any = None
) -> ByteBound | StorageByteBound | None:  # fmt: skip
    """Records of different sizes (``args.sizes``): each transition's bound weighted by size, on
    the epochs :func:`~coded_shuffle.engine.run` delivers (a storage's pieces placed across the
    racks of ``network``, the exchange's, where it has them); else None."""
    sizes = getattr(args, "sizes", None)
    if sizes is None:
        return None
    from ..engine import scheme_for
    from ..engine.schedule import EpochSchedule

    K = args.workers
    if args.storage > 1:  # the demand of the pieces each record is cut into, weighted by their bytes
        scheme = scheme_for("exchange" if network is not None else "coded", K=K, storage=args.storage,
                            sizes=sizes, network=network)  # fmt: skip
        return StorageByteBound(EpochSchedule(N=args.points, K=K, seed=args.seed, spec=spec, scheme=scheme))
    schedule = EpochSchedule(N=args.points, K=K, seed=args.seed, spec=spec, scheme=scheme_for("coded", K=K))
    return ByteBound(schedule, sizes)


_ELASTIC_COLUMNS = (
    "epoch", "K", "load", "bound", "load/bound", "uncoded", "bound MB", "source MB", "peer MB", "verified",
    "seconds",
)  # fmt: skip


def _format_elastic(d: dict[str, Any]) -> list[str]:
    return [
        str(d["transition"]["epoch"]),
        f"{d['K_before']} -> {d['K']}",
        str(d["symbols"]),
        str(d["bound"]),
        f"{d['symbols'] / d['bound']:.3f}" if d["bound"] else "-",
        str(d["transition"]["uncoded_symbols"]),
        f"{d['bound_bytes'] / 1e6:.2f}",
        f"{d['source_bytes'] / 1e6:.2f}",
        f"{d['peer_bytes'] / 1e6:.2f}",
        "yes" if d["verified"] else "NO",
        f"{d['transition']['seconds']:.3f}",
    ]


#: :data:`_ELASTIC_COLUMNS` on records of different sizes: the loads in payload bytes beside the
#: counts, and ``load/bound`` the ratio of the bytes.
_SIZED_ELASTIC_COLUMNS = (
    "epoch", "K", "load", "bound", "uncoded", "load MB", "bound MB", "load/bound", "uncoded MB", "source MB",
    "peer MB", "verified", "seconds",
)  # fmt: skip


def _format_sized_elastic(d: dict[str, Any]) -> list[str]:
    mb = lambda n: f"{n / 1e6:.2f}"  # noqa: E731
    load, bound = d["load_bytes"], d["bound_bytes"]
    return [
        str(d["transition"]["epoch"]), f"{d['K_before']} -> {d['K']}", str(d["symbols"]), str(d["bound"]),
        str(d["transition"]["uncoded_symbols"]), mb(load), mb(bound), f"{load / bound:.3f}" if bound else "-",
        mb(d["transition"]["uncoded_bytes"]), mb(d["source_bytes"]), mb(d["peer_bytes"]),
        "yes" if d["verified"] else "NO", f"{d['transition']['seconds']:.3f}",
    ]  # fmt: skip


def _check_elastic(args: argparse.Namespace, counts: list[int]) -> None:
    """Refuse, naming the option, what a changing number of workers cannot run with."""
    from ..engine.elastic import ELASTIC_MODES

    named = f"--workers {','.join(map(str, counts))}"
    if args.mode not in ELASTIC_MODES:
        raise UsageError(f"--mode {args.mode} cannot run {named}: it takes --mode coded, uncoded or exchange")
    if args.storage > 1 and args.mode not in ("coded", "exchange"):
        raise UsageError(f"--storage above 1 with {named} takes --mode coded or exchange, not {args.mode}")
    if args.storage > min(counts):
        raise UsageError(
            f"--storage must be at most the fewest workers of {named}, {min(counts)}, not {args.storage}"
        )
    for given, option in (
        (args.subpackets != 1, "--subpackets"), (args.network is not None, "--network"),
        (args.simulator != "engine", "--simulator simgrid"),
    ):  # fmt: skip
        if given:
            raise UsageError(f"{option} cannot be combined with {named} (whole records, in process)")
    if args.epochs is not None and args.epochs != len(counts) - 1:
        raise UsageError(
            f"--transitions must be one fewer than the {len(counts)} worker counts of {named}, "
            f"not {args.epochs}"
        )


def _run_elastic(args: argparse.Namespace, counts: list[int]) -> int:
    """``simulate --workers K0,K1,...``: every transition from the workers of one epoch to those of
    the next (:func:`~coded_shuffle.engine.elastic.elastic_run`), delivered, decoded and verified."""
    from ..codec import load_dataset
    from ..engine import synthetic_dataset
    from ..engine.elastic import elastic_run

    _check_elastic(args, counts)
    args.epochs = len(counts) - 1
    args, source = _with_data(args)
    _check_simulate(args)
    spec = order_spec(args, args.points)
    groups = ["packing", "planning", "ordering", "decoding"]
    compile_kernels(groups + (["feistel"] if spec.name == "feistel" else []))
    if source is None:
        dataset = synthetic_dataset(args.points, args.record_bytes, seed=args.seed)
    else:
        dataset = load_dataset(source)
    if args.storage > 1:
        return _run_recut(args, counts, dataset, spec)
    # A tiny run first: the compiled kernels load here, not in the first transition's time.
    elastic_run(synthetic_dataset(8, 8, seed=0), workers=[2, 1], seed=0, mode=args.mode)
    reports = elastic_run(
        dataset, workers=counts, seed=args.seed, mode=args.mode, strategy=args.strategy, order=spec
    )
    rows = [{"K_before": K, **rep.to_dict()} for K, rep in zip(counts, reports, strict=False)]
    head = f"strategy = {args.strategy}, order = {spec.name}"
    table: tuple[Any, ...] = (_format_elastic, _ELASTIC_COLUMNS, _print_elastic_footer)
    if dataset.lengths is not None:  # records of different sizes: the loads in bytes beside the counts
        table = (_format_sized_elastic, _SIZED_ELASTIC_COLUMNS, _print_sized_elastic_footer)
    return _print_changes(args, counts, rows, head, *table)


def _print_changes(
    args: argparse.Namespace, counts: list[int], rows: list[dict[str, Any]], head: str,
    cells: Callable[[dict[str, Any]], list[str]], columns: Any, footer: Callable[[], None],
) -> int:  # fmt: skip
    """The rows of a run whose number of workers changes: JSON lines, or the header (the counts,
    the records, ``head``), the table of ``cells`` of each row under ``columns`` and the
    ``footer``; status 1 when a transition was not verified."""
    if args.json:
        for d in rows:
            print(json.dumps(d), flush=True)
    else:
        print(
            f"K = {','.join(map(str, counts))}, N = {args.points}, {_records_part(args)}, "
            f"seed = {args.seed}, {head}, mode = {args.mode}"
            + (f", data = {args.data}" if args.data is not None else "")
        )
        print_table(iter(cells(d) for d in rows), columns, sys.stdout)
        footer()
    if not all(d["verified"] for d in rows):
        say(f"{PROG}: error: a transition was not verified")
        return 1
    return 0


_RECUT_COLUMNS = (
    "epoch", "K", "delivery", "sent MB", "bound MB", "source MB", "source bound", "peer MB", "cold MB",
    "verified", "seconds",
)  # fmt: skip


def _recut_row(d: dict[str, Any]) -> list[str]:
    """A row of ``--workers K0,K1,... --storage M``: a re-cut (a change of ``K``), or the scheme's
    transition at the same ``K`` (its bound: the genie bound of the master's broadcast)."""
    mb = lambda n: "-" if n is None else f"{n / 1e6:.2f}"  # noqa: E731
    if "pieces_next" in d:
        sent, bound, source, alone, peers, cold = (
            d["peer_bytes"] + d["source_bytes"], d["download_bound"], d["source_bytes"], d["source_bound"],
            d["peer_bytes"], d["storage_bytes"],
        )  # fmt: skip
        what, epoch = "re-cut", d["epoch"]
    else:
        exchange = d["mode"] == "exchange"
        sent = d["exchange_bytes"] if exchange else d["coded_bytes"]
        bound = None if d["lower_bound"] is None else d["lower_bound"] * d["piece_bytes"]
        source, alone, peers, cold = 0, None, sent if exchange else 0, None
        what, epoch = d["mode"], d["epoch"]
    cells = [sent, bound, source, alone, peers, cold]
    return [str(epoch), f"{d['K_before']} -> {d['K_after']}", what, *(mb(c) for c in cells),
            "yes" if d["verified"] else "NO", f"{d['seconds']:.3f}"]  # fmt: skip


def _run_recut(args: argparse.Namespace, counts: list[int], dataset: Any, spec: Any) -> int:
    """``simulate --workers K0,K1,... --storage M``: each change of ``K`` a re-cut of the storage
    (:func:`~coded_shuffle.engine.recut.recut_run`), each transition at the same ``K`` the scheme's."""
    from ..engine import synthetic_dataset
    from ..engine.recut import recut_run

    compile_kernels(["packing", "planning", "ordering", "decoding", "storage"])
    recut_run(synthetic_dataset(12, 8, seed=0), workers=[3, 2, 2], M=2, seed=0, mode=args.mode)  # warm-up
    reports = recut_run(dataset, workers=counts, M=args.storage, seed=args.seed, mode=args.mode,
                        strategy=args.strategy, order=spec)  # fmt: skip
    rows = []
    for i, rep in enumerate(reports):
        d = rep.to_dict()
        d.setdefault("epoch", i + 1)
        rows.append({"K_before": counts[i], "K_after": counts[i + 1], **d})
    head = f"storage = {args.storage} batches, order = {spec.name}"
    return _print_changes(args, counts, rows, head, _recut_row, _RECUT_COLUMNS, _print_recut_footer)


def _print_recut_footer() -> None:
    """What the columns of ``--workers K0,K1,... --storage M`` mean, under the table."""
    print("re-cut: a change of K; each worker keeps the bytes of its storage at K' it holds, has the")
    print("rest uncoded from a worker that holds them, or once from the source (source bound: the")
    print("bytes no worker holds); bound MB: the bytes the workers lack (the download bound), or,")
    print("at the same K, the genie bound of the master's broadcast; cold MB: the storage at K'.")


def _print_elastic_footer() -> None:
    """What the columns of ``--workers K0,K1,...`` mean, under the table."""
    print("K -> K': a joining worker starts empty, a leaving one's cache is gone (the last workers leave).")
    print("load: records sent (coded: the coded symbols; uncoded and exchange: every moved record);")
    print("bound: genie lower bound of the rectangular K x K' shuffle from what the workers hold to")
    print("the next batches, which no delivery sends fewer than (bound MB: in payload bytes);")
    print("uncoded: every moved record alone. source MB: records no worker held (a leaving worker's),")
    print("from the source; peer MB: what the workers sent each other (exchange).")


def _print_sized_elastic_footer() -> None:
    """:func:`_print_elastic_footer`, on records of different sizes."""
    _print_elastic_footer()
    print("records of different sizes: load MB, the payload bytes of the load (coded: each XOR as long")
    print("as its longer record); bound MB, the genie bound of the shuffle matrix in bytes, which no")
    print("delivery sends fewer bytes than; load/bound, their ratio; uncoded MB, every moved record's.")


_TRANSITIONS_HELP = (
    "epoch transitions t -> t+1 to run, so E + 1 epochs (default 3; with --workers K0,K1,..., one fewer "
    "than the counts)"
)


def add_parser(sub: Any) -> None:
    """Add the ``simulate`` command to the subcommands ``sub``."""
    sim = sub.add_parser(
        "simulate",
        help=COMMANDS["simulate"],
        description=(
            "Deliver each epoch's batches as XOR-coded symbols to K in-process workers holding real "
            "records (random ones, or those of --data); every worker decodes its batch and checks every "
            "record against the master's checksums. Prints per transition the symbols and bytes of the "
            "coded scheme against sending every moved record alone, the lower bound, repairs, "
            "verification and time."
        ),
    )
    sim.add_argument(
        "--workers", "-K", default="6", metavar="K",
        help="number of workers (default 6), or one per epoch as K0,K1,...: workers that come and go, "
        "a joining one empty, a leaving one's cache gone (--mode coded, uncoded or exchange)",
    )  # fmt: skip
    sim.add_argument("--points", "-N", type=int, metavar="N", help="number of random records (default 6000)")
    sim.add_argument(
        "--record-bytes", "-B", type=int, metavar="B", help="bytes per random record (default 1024)"
    )
    add_data_arguments(sim)
    sim.add_argument("--transitions", type=_positive, metavar="E", dest="epochs", help=_TRANSITIONS_HELP)
    add_deprecated(sim, "--epochs", "--transitions", dest="epochs", type=_positive, metavar="E")
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
    _add_storage_argument(sim, "the workers keep their share of the pieces from epoch to epoch")
    sim.add_argument(
        "--mode",
        choices=(*names(), "auto"),
        default="coded",
        help="delivery: coded (the master's broadcast), uncoded (each moved record from the master to its "
        "new holder), exchange (the workers send each other what each misses), split (with a --network "
        "that multicasts: the master codes a share of the moved records, the workers exchange the rest), "
        "or auto (with --network: the one of least predicted time) (default coded)",
    )
    add_network_argument(sim)
    sim.add_argument(
        "--simulator",
        choices=("engine", "simgrid"),
        default="engine",
        help="engine: run the in-process engine on real records; simgrid (needs --network and SimGrid's "
        "Python module): replay each transition's transfers of every mode the network runs on a SimGrid "
        "platform of its topology and print their simulated seconds beside the predicted (default engine)",
    )
    _add_order_arguments(sim)
    sim.add_argument("--json", action="store_true", help="one JSON object per transition")
    sim.add_argument(
        "--no-progress", action="store_true", help="no progress bar or announcement on standard error"
    )
    sim.set_defaults(func=_cmd_simulate)
