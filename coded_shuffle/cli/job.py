"""The options of an MPI job: one specification for ``coded-shuffle run`` and the MPI program.

``coded-shuffle run`` parses them (with ``--workers``, which it turns into ``mpiexec -n K+1``),
checks them before any process starts, and passes on those given; the program parses the same
options on every rank and applies the same checks (:func:`check_job`). Options left out take
their defaults in :func:`check_job`, so that "given" can be told from "default" (an option the
chosen ``--mode`` or ``--order`` would ignore is refused, not dropped).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from typing import Any

import numpy as np

from ..codec import DEFAULT_MAX_FRAME_BYTES
from ..engine.schemes import REGISTRY, runs_among_peers
from ..orders import ignored_shard_options
from ..plan import STRATEGIES
from ..records import npy_header, npy_problem
from ._parser import add_deprecated
from .common import (
    SHARD_ORDER_DEFAULTS,
    UsageError,
    _add_order_arguments,
    _add_storage_argument,
    _non_negative,
    _positive,
    _shard_options_given,
    add_cache_dir_argument,
    add_network_argument,
    network_option,
    order_spec,
)
from .data import add_data_arguments, check_format, open_data, refuse_format_options, sizes_text
from .runner.held import cache_dir_problem
from .runner.mpi_job import CODED, MASTER_SENDS, MODES, job_refusal
from .runner.options import JobOptions

#: Defaults of the options that have no argparse default (see the module docstring).
JOB_DEFAULTS: dict[str, int | str] = {
    "datagram_bytes": 1472,
    "multicast_scope": "auto",
    "points": 6000,
    "record_bytes": 1024,
    "strategy": "greedy",
    "max_frame_bytes": DEFAULT_MAX_FRAME_BYTES,
    "max_repair_rounds": 3,
}

#: The fewest payload bytes a frame by default with ``--multicast`` (16 datagrams if more; a lost
#: datagram costs its own bytes again, whatever the frame's size).
MULTICAST_FRAME_BYTES = 1 << 17
#: Bytes a phase of ``--probe`` given alone.
PROBE_BYTES = 1 << 22
#: The most bytes a phase of ``--probe`` (every rank holds a buffer of that size, and one more).
PROBE_MAX_BYTES = 1 << 30
#: The group and port of ``--multicast`` given bare: a group of the organization-local scope of
#: 239.0.0.0/8 (RFC 2365), with room above it for the scoped groups of any number of workers.
MULTICAST_DEFAULT = "239.192.0.1:5000"
#: Why a split needs ``--multicast``.
SPLIT_MULTICAST = (
    "--mode split needs --multicast GROUP:PORT: the master's frames go as datagrams while the workers "
    "exchange the rest"
)

#: The options ``coded-shuffle run`` passes on to the program when given: (dest, flag).
PASSED_ON = (
    ("data", "--data"),
    ("format", "--format"),
    ("token_window", "--token-window"),
    ("token_dtype", "--token-dtype"),
    ("field", "--field"),
    ("points", "--points"),
    ("record_bytes", "--record-bytes"),
    ("epochs", "--transitions"),
    ("epoch_workers", "--epoch-workers"),
    ("start_epoch", "--start-epoch"),
    ("seed", "--seed"),
    ("mode", "--mode"),
    ("strategy", "--strategy"),
    ("storage", "--storage"),
    ("order", "--order"),
    ("shard_size", "--shard-size"),
    ("canonical_nodes", "--canonical-nodes"),
    ("block_size", "--block-size"),
    ("link_mbps", "--link-mbps"),
    ("max_frame_bytes", "--max-frame-bytes"),
    ("max_repair_rounds", "--max-repair-rounds"),
    ("timeout", "--timeout"),
    ("count_links", "--count-links"),
    ("probe", "--probe"),
    ("network", "--network"),
    ("multicast", "--multicast"),
    ("datagram_bytes", "--datagram-bytes"),
    ("multicast_scope", "--multicast-scope"),
    ("json", "--json"),
    ("cache_dir", "--cache-dir"),
)


def _megabits(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not 0 < v < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of megabits a second, not {text}")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not 0 < v < 1e9:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text}")
    return v


def _worker_counts(text: str) -> tuple[int, ...]:
    """``K`` or ``K0,K1,...``: one positive count of workers, or one an epoch."""
    return tuple(_positive(part.strip()) for part in text.split(","))


class _Workers(argparse.Action):
    """``--workers K`` or ``K0,K1,...``: ``workers`` the most (the job's ranks), and
    ``epoch_workers`` the count of each epoch (None for one count)."""

    def __call__(self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None) -> None:
        namespace.workers = max(values)
        namespace.epoch_workers = values if len(values) > 1 else None


def add_job_arguments(p: argparse.ArgumentParser, *, launcher: bool) -> None:
    """Add the options of an MPI job to ``p``; ``launcher``: those of ``coded-shuffle run`` too."""
    if launcher:
        p.add_argument("--workers", "-K", type=_worker_counts, action=_Workers, default=4, metavar="K", help=(
            "workers (default 4), or one count an epoch as K0,K1,... (--transitions + 1 of them): the job's "
            "ranks are the most, epoch t's batches on its first K_t workers"))  # fmt: skip
    p.add_argument("--epoch-workers", type=_worker_counts, metavar="K0,K1,...", help=(
        "workers of each epoch (--transitions + 1 counts, the largest the job's workers; what run "
        "--workers K0,K1,... passes on): epoch t's batches on its first K_t workers"))  # fmt: skip
    p.add_argument("--points", "-N", type=_positive, metavar="N", help="random records (default 6000)")
    p.add_argument("--record-bytes", "-B", type=_positive, metavar="B", help="bytes a record (default 1024)")
    p.add_argument(
        "--data", metavar="PATH", help="the records, in the format of --format (instead of random ones)"
    )
    add_data_arguments(p, data=False)
    p.add_argument("--transitions", type=_positive, default=3, metavar="E", dest="epochs",
                   help="epoch transitions t -> t+1 to run, so E + 1 epochs (default 3)")  # fmt: skip
    add_deprecated(p, "--epochs", "--transitions", dest="epochs", type=_positive, metavar="E")
    p.add_argument(
        "--start-epoch", type=_non_negative, default=0, metavar="T", help="epoch to start from (default 0)"
    )
    p.add_argument("--seed", type=_non_negative, default=0, help="seed of the orders and records (default 0)")
    add_cache_dir_argument(p)
    p.add_argument(
        "--mode",
        choices=tuple(MODES) + (("auto",) if launcher else ()),
        default="coded",
        help="delivery: coded (the master's broadcast), uncoded (each moved record from the master to its "
        "new holder), exchange (the workers send each other what each misses; alltoallv is its old name), "
        "split (the master's coded multicast of a share of the moved records while the workers exchange "
        "the rest; needs --network with multicast and --multicast), both = coded and uncoded, "
        "all = coded, uncoded and exchange"
        + (", auto = the one of least predicted time on --network" if launcher else "")
        + " (default coded)",
    )
    p.add_argument(
        "--strategy", choices=sorted(STRATEGIES), help="cycle packing of the coded plan (default greedy)"
    )
    _add_storage_argument(p, "--mode coded or exchange; the workers keep their share from epoch to epoch")
    _add_order_arguments(p)
    _add_link_arguments(p)
    add_network_argument(p)
    p.add_argument(
        "--multicast",
        nargs="?",
        const=MULTICAST_DEFAULT,
        metavar="GROUP:PORT",
        help="send the master's broadcasts as UDP multicast datagrams to GROUP:PORT (an IPv4 group, "
        f"239.0.0.0/8 on a local network; alone: {MULTICAST_DEFAULT}; control stays on MPI; lost "
        "datagrams are repaired)",
    )
    p.add_argument(
        "--multicast-scope", choices=("auto", "receivers", "all"),
        help="receivers: each span of a frame to a group of its readers alone (a pair's, a worker's; "
        "the framing to all), so a switch that forwards groups to their members spares each downlink "
        "what it does not decode; all: every datagram to GROUP; auto: receivers where --network says "
        "snooping, else all (default auto)",
    )  # fmt: skip
    p.add_argument(
        "--datagram-bytes", type=_positive, metavar="BYTES",
        help="UDP payload of a multicast datagram (default 1472: one 1500-byte Ethernet frame)",
    )  # fmt: skip


def _add_link_arguments(p: argparse.ArgumentParser) -> None:
    """The options of a job's links: pacing, frames, repairs, deadlines and counts, and its output."""
    p.add_argument(
        "--link-mbps",
        type=_megabits,
        metavar="R",
        help="pace the master's link at R megabits/s, and each worker's sends of the exchange at R "
        "(or at --network's up=R) (default: raw)",
    )
    p.add_argument(
        "--max-frame-bytes",
        type=_positive,
        metavar="BYTES",
        help=f"payload bytes a frame (default {DEFAULT_MAX_FRAME_BYTES})",
    )
    p.add_argument(
        "--max-repair-rounds",
        type=_non_negative,
        metavar="R",
        help="rounds of re-sending records that failed their check before giving up (default 3)",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="end the job, with one line naming the rank, when a rank does not answer within SECONDS "
        "(default: 60 s plus 1 s per 20 MB of records)",
    )
    p.add_argument(
        "--count-links",
        action="store_true",
        help="per transition, the bytes each rank's network interfaces sent and received (hosts of "
        "their own, such as those of mpi/netns_cluster.sh)",
    )
    p.add_argument(
        "--probe",
        type=_positive,
        nargs="?",
        const=PROBE_BYTES,
        metavar="BYTES",
        help="before the first transition, time transfers of BYTES a phase (default 4194304) from the "
        "master and between the workers, and report the rates the links reached as a --network SPEC",
    )
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="one JSON object per transition and mode, to FILE; alone, or '-': on standard output "
        "instead of the table",
    )


def output_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be written as an output file (checked before any rank starts), or None."""
    if os.path.isdir(path):
        return "is a directory; give a file to write"
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"no such directory: {parent}"
    if not os.access(parent, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        return "not writable"
    return None


def check_job(args: argparse.Namespace, *, workers: int | None = None) -> argparse.Namespace:
    """Return the options of a job checked, defaults filled in (``args`` is left as it came), or
    raise a :class:`UsageError`.

    ``workers`` is the number of workers, when known: ``coded-shuffle run`` knows it before the
    job, and then also makes the check every rank makes once it knows the records
    (:func:`~coded_shuffle.cli.runner.mpi_job.job_refusal`), so that no rank starts to refuse.
    """
    launcher, workers = workers is not None, 1 if workers is None else workers
    points = int(JOB_DEFAULTS["points"]) if args.points is None else args.points
    if args.data is None:
        refuse_format_options(args)
    if args.data is not None:
        given = [
            f for d, f in (("points", "--points"), ("record_bytes", "--record-bytes")) if getattr(args, d)
        ]
        if given:
            raise UsageError(f"--data cannot be combined with {' or '.join(given)}")
        if check_format(args) == "npy":  # its header read here; another format opened by the launcher
            problem = check_data_file(args.data, workers=workers)
            if problem is not None:
                raise UsageError(problem)
    elif points < workers:
        raise UsageError(f"--points must be at least --workers ({workers}), not {points}")
    problem = ignored_options(args.mode, mode_options_given(args))
    if problem is None and args.data is not None:  # the records' number is known on the master only
        problem = ignored_shard_options(args.order, _shard_options_given(args))
    if problem is not None:
        raise UsageError(problem)
    if args.data is None:
        order_spec(args, points)  # the order options, checked for N records
    network = network_option(args, stored=True)  # a SPEC that parses; auto only with one
    _check_multicast(args, workers, network)
    if args.probe is not None and args.probe > PROBE_MAX_BYTES:
        raise UsageError(f"--probe must be at most {PROBE_MAX_BYTES} bytes a phase, not {args.probe}")
    if args.mode == "split" and args.multicast is None:
        raise UsageError(SPLIT_MULTICAST)
    if args.json not in (None, "-"):
        problem = output_file_problem(args.json)
        if problem is not None:
            raise UsageError(f"--json {args.json}: {problem}")
    if args.cache_dir is not None:
        _check_cache_dir(args)
    # auto: the mode it chooses is checked (coded_shuffle.cli.run), the modes it refuses left out
    if args.storage != 1 and args.mode != "auto" and not all(REGISTRY[m].storage for m in MODES[args.mode]):
        served = " and ".join(r.name for r in REGISTRY.values() if r.storage)
        raise UsageError(f"--storage above 1 applies to --mode {served} only, not --mode {args.mode}")
    filled = argparse.Namespace(**vars(args))
    for dest, default in (*JOB_DEFAULTS.items(), *SHARD_ORDER_DEFAULTS.items()):
        if getattr(args, dest) is None and not (args.data is not None and dest in ("points", "record_bytes")):
            setattr(filled, dest, default)
    if args.multicast is not None and args.max_frame_bytes is None:
        # frames of 16 datagrams, at least 128 KiB
        filled.max_frame_bytes = max(MULTICAST_FRAME_BYTES, 16 * filled.datagram_bytes)
    if launcher:
        _check_before_launch(filled, workers)
        problem = None if args.cache_dir is None else cache_dir_problem(args.cache_dir)
        if problem is not None:  # last: a folder it makes is that of a job that starts
            raise UsageError(f"--cache-dir {args.cache_dir}: {problem}")
    return filled


def _check_cache_dir(args: argparse.Namespace) -> None:
    """``--cache-dir``: a job with a master (among peers every rank reads its own records) and
    one number of workers (before the launch, the folder is checked last: :func:`check_job`)."""
    if args.mode != "auto" and runs_among_peers(MODES[args.mode]):
        raise UsageError(f"--cache-dir needs a job with a master, not --mode {args.mode} (a job of peers)")
    if args.epoch_workers is not None:
        listed = ",".join(map(str, args.epoch_workers))
        raise UsageError(f"--cache-dir needs the same workers at every epoch, not {listed}")


def _check_before_launch(filled: argparse.Namespace, workers: int) -> None:
    """Refuse what the ranks would refuse once they know the records (``filled``: the options
    checked, defaults filled in): :func:`~coded_shuffle.cli.runner.mpi_job.job_refusal`, the records'
    number and sizes read from the options or from ``--data`` (:func:`data_records`). Under
    ``--mode auto`` the checks of a mode wait for the mode it chooses."""
    if filled.data is None:
        N, B, sizes = filled.points, filled.record_bytes, None
    else:
        N, B, sizes = data_records(filled, workers)
    given = {f.name for f in dataclasses.fields(JobOptions)} & set(vars(filled))
    job = JobOptions(**{name: getattr(filled, name) for name in given})
    peers = filled.mode == "auto" or runs_among_peers(MODES[filled.mode])
    refusal = job_refusal(job, workers, N, B, peers=peers, variable=sizes is not None)
    if refusal is not None:
        if sizes is not None:  # the sizes the records of --data have
            refusal = refusal.replace("differ in size", f"are {sizes_text(sizes)}")
        raise UsageError(refusal)


def data_records(args: argparse.Namespace, workers: int) -> tuple[int, int, Any]:
    """``(N, width, sizes)`` of ``--data``: its number of records, the bytes of the widest, and
    every record's size where they differ (else None); a UsageError naming the option or the file
    where it cannot be read. A ``.npy`` file is read from its header; another format is opened
    through its record source (:func:`~coded_shuffle.cli.data.open_data`), once: what it found
    is kept in ``args.records``, which ``coded-shuffle run`` then reads."""
    known = getattr(args, "records", None)
    if known is not None:
        return known  # type: ignore[no-any-return]
    if check_format(args) == "npy":
        problem = npy_problem(args.data)
        if problem is not None:
            raise UsageError(f"--data: {problem}")
        shape, dtype = npy_header(args.data)
        return shape[0], math.prod(shape[1:]) * dtype.itemsize, None
    source, _ = open_data(args, workers=workers)
    sizes = None if source.record_bytes is not None else np.asarray(source.sizes)
    args.records = (len(source), int(source.width), sizes)
    return args.records  # type: ignore[no-any-return]


def multicast_scope(scope: str, network: object) -> str:
    """``--multicast-scope``, ``auto`` resolved on ``network`` (a
    :class:`~coded_shuffle.network.Network` or None): ``receivers`` where its switch snoops, else
    ``all`` (on a switch that floods every group scoping spares no downlink).

    Examples
    --------
    >>> from coded_shuffle.network import Network
    >>> multicast_scope("auto", Network.parse("master=1000,down=300,multicast,snooping"))
    'receivers'
    >>> multicast_scope("auto", None), multicast_scope("receivers", None)
    ('all', 'receivers')
    """
    if scope != "auto":
        return scope
    return "receivers" if getattr(network, "snooping", False) else "all"


def _check_multicast(args: argparse.Namespace, workers: int, network: object) -> None:
    if args.multicast is None:
        for dest, flag in (("datagram_bytes", "--datagram-bytes"), ("multicast_scope", "--multicast-scope")):
            if getattr(args, dest) is not None:
                raise UsageError(f"{flag} applies with --multicast only")
        return
    from ..transport.multicast import DATAGRAM_HEADER_BYTES, parse_group, scope_groups

    try:
        group, _ = parse_group(args.multicast)
        if workers > 1 and multicast_scope(args.multicast_scope or "auto", network) == "receivers":
            scope_groups(group, workers)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.mode != "auto" and not CODED & set(MODES[args.mode]):
        raise UsageError(f"--multicast carries the master's coded broadcast, not --mode {args.mode}")
    if args.datagram_bytes is not None and not DATAGRAM_HEADER_BYTES < args.datagram_bytes <= 65507:
        raise UsageError(
            f"--datagram-bytes must be {DATAGRAM_HEADER_BYTES + 1} to 65507, not {args.datagram_bytes}"
        )


def job_options(args: argparse.Namespace) -> JobOptions:
    """The typed options of the job (:class:`~coded_shuffle.cli.runner.options.JobOptions`) from
    ``args`` as :func:`check_job` returns them (checked, defaults filled in)."""
    return JobOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(JobOptions)})


def job_arguments(args: argparse.Namespace) -> list[str]:
    """The program's arguments for the options of ``args`` that were given (not defaults).

    Examples
    --------
    >>> p = argparse.ArgumentParser()
    >>> add_job_arguments(p, launcher=True)
    >>> job_arguments(p.parse_args(["-K", "2", "--points", "100", "--json"]))
    ['--points', '100', '--json', '-']
    """
    out: list[str] = []
    defaults = {"epochs": 3, "start_epoch": 0, "seed": 0, "mode": "coded", "order": "auto", "storage": 1,
                "format": "auto"}  # fmt: skip
    for dest, flag in PASSED_ON:
        v = getattr(args, dest)
        if v is None or v is False or defaults.get(dest, object()) == v:
            continue
        if isinstance(v, tuple):
            v = ",".join(map(str, v))
        out += [flag] if v is True else [flag, repr(v) if isinstance(v, float) else str(v)]
    return out


def check_data_file(path: str, *, workers: int = 1) -> str | None:
    """Return why ``path`` is not a usable ``.npy`` file of records, or None if it is.

    Reads only the file's header: it must exist, be a ``.npy`` file (magic string and header),
    and hold at least one record a worker (``workers``), of at least one byte, of a plain (not
    object) dtype.

    Examples
    --------
    >>> check_data_file("no/such/file.npy")
    '--data: no such file: no/such/file.npy'
    """
    problem = npy_problem(path)
    if problem is not None:
        return f"--data: {problem}"
    shape, _ = npy_header(path)
    if shape[0] < workers:
        return f"--data: {path} holds {shape[0]} records, fewer than the {workers} workers"
    return None


def mode_options_given(args: argparse.Namespace) -> list[str]:
    """The options given in ``args`` that some mode ignores (:func:`ignored_options`)."""
    return [f for d, f in PASSED_ON if d in ("strategy", "max_frame_bytes", "max_repair_rounds", "link_mbps")
            and getattr(args, d) is not None]  # fmt: skip


def ignored_options(mode: str, given: list[str]) -> str | None:
    """Return an error if ``given`` holds an option that ``mode`` would ignore, else None.

    Examples
    --------
    >>> ignored_options("uncoded", ["--strategy"])
    '--strategy applies to the coded mode only, not --mode uncoded'
    >>> ignored_options("both", ["--strategy"]) is None
    True
    """
    if mode == "auto":  # checked against the mode it chooses, before the job starts
        return None
    modes = MODES[mode]
    if "--strategy" in given and not CODED & set(modes):
        return f"--strategy applies to the coded mode only, not --mode {mode}"
    master = MASTER_SENDS & set(modes)
    for opt in ("--max-frame-bytes", "--max-repair-rounds"):
        if opt in given and not master:
            return f"{opt} applies to the coded and uncoded modes only, not --mode {mode}"
    return None
