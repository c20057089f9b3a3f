"""Coded data shuffling across processes: the MPI program behind ``coded-shuffle run``.

    mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_program --points N --record-bytes B \\
        --epochs E --seed S --mode coded|uncoded|alltoallv|both|all [--strategy greedy|exact] \\
        [--link-mbps R] [--json FILE]

(``mpi/shuffle.py`` in the source tree is a thin entry to the same program.) Rank 0 is the
master: it alone holds the dataset (``--data FILE.npy``, or ``N`` random records of ``B`` bytes
drawn from ``--seed``). Rank ``k + 1`` is worker ``k``: it holds only its current batch and the
table of record checksums. Each transition ``t -> t + 1``, in each mode asked for, from the same
caches:

1. every rank computes the placements of epochs ``t`` and ``t + 1`` from ``(seed, t)``,
   ``(seed, t + 1)``; the master plans the delivery and encodes it (``coded_shuffle.plan`` and
   ``coded_shuffle.codec``);
2. ``coded``: the master broadcasts the frames once; ``uncoded``: it sends each worker the records
   that move to it, in frames of lone symbols (same wire format); ``alltoallv``: the master takes
   no part, the workers send each other the records that move, directly (``MPI_Alltoallv``);
3. each worker decodes its next batch from its cache (``coded_shuffle.codec.decode_worker``) and
   checks every decoded record; points that fail are re-sent alone (repairs);
4. the workers' ids and record checksums are gathered and checked against the master's ground
   truth, with conservation.

Run with ``python -m mpi4py`` so that an exception on any rank aborts the whole job. Nothing here
imports ``mpi4py`` at import time: :func:`main` sets MPICH's environment, then initializes MPI
through :func:`coded_shuffle.transport.mpi_world`. See docs/mpi.md for the options and the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import math
import os
import signal
import sys
from typing import Any, NoReturn, TextIO

import numpy as np

from .bounds import lower_bound
from .codec import DEFAULT_MAX_FRAME_BYTES, Cache, Dataset, load_dataset, parse_frame
from .engine import SCHEMES, MasterOptions, master_transition, synthetic_dataset, worker_transition
from .engine.mpi import Watchdog, attend, serve
from .orders import EPOCH_ORDERS, OrderSpec, Placement, auto_order, ignored_shard_options, order_placement
from .plan import STRATEGIES, plan_delivery
from .transport import MPITransport, TokenBucket, mpi_exit, mpi_world

PROG = "coded-shuffle run"
#: What ``--mode`` runs, in this order, each transition.
MODES = {
    "coded": ("coded",),
    "uncoded": ("uncoded",),
    "alltoallv": ("alltoallv",),
    "both": ("coded", "uncoded"),
    "all": ("coded", "uncoded", "alltoallv"),
}


class _Parser(argparse.ArgumentParser):
    """Every rank parses the same arguments; only rank 0 prints the error, all exit with 2."""

    def error(self, message: str) -> NoReturn:
        world = mpi_world()
        if world.Get_rank() == 0:
            print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
        # Every rank parses the same arguments and lands here; wait until rank 0 has printed,
        # or another rank's exit aborts the job before the message is out.
        world.Barrier()
        mpi_exit(2, status_file=_status_file(sys.argv[1:]))


def _status_file(argv: list[str]) -> str | None:
    """The ``--status-file`` of ``argv`` (read before the arguments are parsed), or None."""
    for i, a in enumerate(argv):
        if a.startswith("--status-file="):
            return a.partition("=")[2]
        if a == "--status-file" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _positive(text: str) -> int:
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {v}")
    return v


def _non_negative(text: str) -> int:
    v = int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, not {v}")
    return v


def _rate(text: str) -> float:
    v = float(text)
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of megabits a second, not {text}")
    return v


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
    if not os.path.exists(path):
        return f"--data: no such file: {path}"
    if not os.path.isfile(path):
        return f"--data: not a file: {path}"
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = np.lib.format.read_array_header_1_0(f)
            else:
                shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    except OSError as exc:
        return f"--data: cannot read {path}: {exc.strerror or exc}"
    except ValueError:
        return f"--data: not a .npy file (numpy's format, as written by numpy.save): {path}"
    if dtype.hasobject:
        return f"--data: {path} holds Python objects; records must be a plain dtype (numbers, bytes)"
    if len(shape) == 0 or shape[0] == 0:
        return f"--data: {path} holds no records (shape {shape}); one record a row, at least one row"
    if math.prod(shape[1:]) * dtype.itemsize == 0:
        return f"--data: {path} holds records of 0 bytes (shape {shape}); a record needs at least 1 byte"
    if shape[0] < workers:
        return f"--data: {path} holds {shape[0]} records, fewer than the {workers} workers"
    return None


def _given(argv: list[str], *names: str) -> list[str]:
    """The options among ``names`` that ``argv`` gives (``--x`` or ``--x=...``)."""
    return [
        n
        for n in names
        if any(a == n or a.startswith(n + "=") or (n[1] != "-" and a.startswith(n)) for a in argv)
    ]


def ignored_options(mode: str, given: list[str]) -> str | None:
    """Return an error if ``given`` holds an option that ``mode`` would ignore, else None.

    Examples
    --------
    >>> ignored_options("uncoded", ["--strategy"])
    '--strategy applies to the coded mode only, not --mode uncoded'
    >>> ignored_options("both", ["--strategy"]) is None
    True
    """
    modes = MODES[mode]
    if "--strategy" in given and "coded" not in modes:
        return f"--strategy applies to the coded mode only, not --mode {mode}"
    master = {"coded", "uncoded"} & set(modes)
    for opt in ("--max-frame-bytes", "--max-repair-rounds"):
        if opt in given and not master:
            return f"{opt} applies to the coded and uncoded modes only, not --mode {mode}"
    if "--link-mbps" in given and "alltoallv" in modes:
        return (
            f"--link-mbps paces only the master's link, and --mode {mode} runs alltoallv, between the "
            "workers: shape a real network instead (mpi/netns_cluster.sh)"
        )
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = _Parser(
        prog=PROG,
        description="Coded data shuffling with MPI: rank 0 master, ranks 1..K workers.",
        allow_abbrev=False,
    )
    p.add_argument("--points", "-N", type=_positive, default=6000, help="records (default 6000)")
    p.add_argument("--record-bytes", "-B", type=_positive, default=1024, help="bytes a record (default 1024)")
    p.add_argument("--data", metavar="FILE", help=".npy file of records, one a row (instead of random ones)")
    p.add_argument("--epochs", type=_positive, default=3, help="transitions (default 3)")
    p.add_argument("--start-epoch", type=_non_negative, default=0, help="epoch the workers start from")
    p.add_argument("--seed", type=_non_negative, default=0, help="seed of the orders and records (default 0)")
    p.add_argument("--mode", choices=tuple(MODES), default="coded")
    p.add_argument("--strategy", choices=sorted(STRATEGIES), default="greedy")
    p.add_argument(
        "--order", choices=("auto", *EPOCH_ORDERS), default="auto", help="epoch order (default auto)"
    )
    p.add_argument(
        "--shard-size", type=_positive, default=10_000, help="samples a shard (shard-aware orders)"
    )
    p.add_argument(
        "--canonical-nodes", type=_positive, default=1, help="canonical nodes (shard-aware orders)"
    )
    p.add_argument("--block-size", type=_positive, default=1 << 18, help="shuffle block (shard-aware orders)")
    p.add_argument("--link-mbps", type=_rate, metavar="R", help="pace the master's link at R megabits/s")
    p.add_argument("--json", metavar="FILE", help="JSON lines to FILE ('-': standard output, no table)")
    p.add_argument(
        "--max-frame-bytes", type=_positive, default=DEFAULT_MAX_FRAME_BYTES, help="payload bytes a frame"
    )
    p.add_argument("--max-repair-rounds", type=_non_negative, default=3)
    p.add_argument(
        "--timeout",
        type=_rate,
        metavar="SECONDS",
        help="end the job when a rank does not answer within SECONDS (default: 60 s and 1 s per 20 MB)",
    )
    p.add_argument(
        "--count-links",
        action="store_true",
        help="report the bytes each rank's network interfaces sent and received, per transition",
    )
    # For coded-shuffle run: where the master writes its results and the job's status.
    p.add_argument("--results", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--status-file", metavar="FILE", help=argparse.SUPPRESS)
    # For tests and benchmarks.
    p.add_argument("--bcast-baseline", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--fail-rank", type=_non_negative, help=argparse.SUPPRESS)
    p.add_argument("--fail-epoch", type=_positive, help=argparse.SUPPRESS)
    p.add_argument("--fail-how", choices=("raise", "exit", "stop"), default="raise", help=argparse.SUPPRESS)
    p.add_argument("--corrupt-worker", type=_non_negative, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.data is not None and _given(argv, "--points", "-N", "--record-bytes", "-B"):
        p.error("--data cannot be combined with --points or --record-bytes")
    problem = ignored_options(
        args.mode, _given(argv, "--strategy", "--max-frame-bytes", "--max-repair-rounds", "--link-mbps")
    )
    if problem is None and args.bcast_baseline and "coded" not in MODES[args.mode]:
        problem = "--bcast-baseline needs the coded mode"
    if problem is None and args.data is not None:
        problem = check_data_file(args.data)
    if problem is None:
        shard = _given(argv, "--shard-size", "--canonical-nodes", "--block-size")
        problem = ignored_shard_options(args.order, shard)
    if problem is not None:
        p.error(problem)
    return args


def placement(args: argparse.Namespace, N: int, K: int, *, epoch: int) -> Placement:
    """The batches of ``epoch``: the epoch order the options name, cut into ``K`` batches."""
    spec = OrderSpec(auto_order(args.order, N), args.shard_size, args.canonical_nodes, args.block_size)
    return order_placement(N, K, seed=args.seed, epoch=epoch, spec=spec)


def _maybe_fail(args: argparse.Namespace, epoch: int) -> None:
    if args.fail_rank is None or args.fail_rank != mpi_world().Get_rank():
        return
    if args.fail_epoch is not None and args.fail_epoch != epoch:
        return
    if args.fail_how == "exit":
        print(
            f"rank {args.fail_rank}: deliberate exit at epoch {epoch} (--fail-rank)",
            file=sys.stderr,
            flush=True,
        )
        os._exit(3)
    if args.fail_how == "stop":  # this rank stops answering, as under kill -STOP
        what = f"rank {args.fail_rank}: deliberate stop at epoch {epoch} (--fail-rank)"
        print(what, file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
        return
    raise RuntimeError(f"rank {args.fail_rank}: deliberate failure at epoch {epoch} (--fail-rank)")


def link_bytes() -> tuple[int, int]:
    """Bytes sent and received so far by this host's network interfaces (loopback left out).

    Read from the kernel's counters (``/sys/class/net/*/statistics``) of the network namespace
    the rank runs in; on hosts made of namespaces (``mpi/netns_cluster.sh``) that is the rank's
    own link. Meaningless on a shared host, where other traffic counts too.

    Examples
    --------
    >>> tx, rx = link_bytes()
    >>> tx >= 0 and rx >= 0
    True
    """
    tx = rx = 0
    for stats in glob.glob("/sys/class/net/*/statistics"):
        if os.path.basename(os.path.dirname(stats)) == "lo":
            continue
        try:
            with open(os.path.join(stats, "tx_bytes")) as f:
                tx += int(f.read())
            with open(os.path.join(stats, "rx_bytes")) as f:
                rx += int(f.read())
        except (OSError, ValueError):
            continue
    return tx, rx


def _corrupter(cache: Cache, need: np.ndarray) -> Any:
    """Flip one payload byte of a symbol this worker decodes (to exercise repairs)."""
    want = np.setdiff1d(need, cache.ids)

    def tamper(frames: list[np.ndarray]) -> list[np.ndarray]:
        for q, raw in enumerate(frames):
            f = parse_frame(raw)
            hit = np.flatnonzero(np.isin(f.a, want) | np.isin(f.b, want))
            if hit.size:
                buf = raw.copy()
                buf[f.header_bytes + int(hit[0]) * f.record_bytes] ^= 0xFF
                frames[q] = buf
                break
        return frames

    return tamper


# --------------------------------------------------------------------------- worker


def worker(args: argparse.Namespace, link: MPITransport) -> int:
    k = link.worker
    assert k is not None
    N, B, status = link.share()
    if status:
        return int(link.share())
    sums = link.share_array(np.empty(N, dtype=np.uint64))
    K = link.K
    dog = Watchdog.for_job(args.timeout, N, B, rank=link.rank, prog=PROG)
    p_t = placement(args, N, K, epoch=args.start_epoch)
    ids = p_t.batch(k)
    cache = Cache(ids=ids, data=link.receive_rows(np.empty((ids.size, B), dtype=np.uint8)), lengths=None)
    # Receive and output buffers are set up (pages touched) once: a batch has the same size at
    # every epoch, and a delivery carries at most N (K - 1) / K coded symbols.
    modes = MODES[args.mode]
    if {"coded", "uncoded"} & set(modes):
        link.reserve(-(-N * (K - 1) // K) * (B + 24) + (N * B // args.max_frame_bytes + 2) * 4160)
    spare = [np.zeros_like(cache.data) for _ in modes]
    for t in range(args.start_epoch, args.start_epoch + args.epochs):
        _maybe_fail(args, t + 1)
        p_t1 = placement(args, N, K, epoch=t + 1)
        results = []
        for mode, out in zip(modes, spare, strict=True):
            corrupt = args.corrupt_worker == k and t == args.start_epoch and mode != "alltoallv"
            role = worker_transition(
                link, SCHEMES[mode], k, cache, (p_t, p_t1), epoch=t + 1, checksums=sums, spare=out,
                with_digest=True, tamper=_corrupter(cache, p_t1.batch(k)) if corrupt else None,
                links=_link_counter() if args.count_links else None,
            )  # fmt: skip
            res = attend(link, role, watchdog=dog)
            results.append(res.cache)
            if mode == "coded" and args.bcast_baseline:
                link.baseline_broadcast(0)
        spare = [cache.data, *(r.data for r in results[1:])]
        cache = results[0]
        p_t = p_t1
    dog.close()
    return int(link.share())


def _link_counter() -> Any:
    """A function that returns the bytes this rank's links sent and received since this call."""
    tx0, rx0 = link_bytes()

    def since() -> tuple[int, int]:
        tx, rx = link_bytes()
        return tx - tx0, rx - rx0

    return since


# --------------------------------------------------------------------------- master


_COLUMNS = (
    "epoch", "mode", "symbols", "planned", "bound", "sent MB", "framing", "seconds", "MB/s", "repairs",
    "verified",
)  # fmt: skip


def _cells(r: dict[str, Any]) -> list[str]:
    # What was sent: by the master (coded, uncoded), or by the workers to each other (alltoallv).
    mb = (r["exchange_bytes"] if r["mode"] == "alltoallv" else r["wire_bytes"]) / 1e6
    return [
        str(r["epoch"]),
        r["mode"],
        str(r["wire_symbols"]),
        str(r["planned_symbols"]),
        f"{r['lower_bound']}{'' if r['lower_bound_exact'] else '*'}",
        f"{mb:.3f}",
        f"{r['framing_overhead']:.2%}" if r["payload_bytes"] else "-",
        f"{r['seconds']:.3f}",
        f"{mb / r['seconds']:.1f}" if r["seconds"] > 0 else "-",
        str(r["repairs"]),
        "yes" if r["verified"] else "NO",
        *(
            [f"{r['link_tx_bytes'][0] / 1e6:.3f}", f"{max(r['link_rx_bytes'][1:]) / 1e6:.3f}"]
            if r.get("link_tx_bytes")
            else []
        ),
    ]


def _load(args: argparse.Namespace, K: int) -> Dataset | str:
    try:
        if args.data is not None:
            dataset = load_dataset(args.data)
        else:
            if args.points * args.record_bytes > 1 << 34:
                return "--points x --record-bytes must be at most 16 GiB"
            dataset = synthetic_dataset(args.points, args.record_bytes, seed=args.seed)
    except (ValueError, MemoryError) as exc:
        return str(exc)
    if dataset.N < K:
        return f"the dataset has {dataset.N} records, fewer than the {K} workers"
    return dataset


def master(args: argparse.Namespace, link: MPITransport) -> int:
    K = link.K
    dataset = _load(args, K)
    if isinstance(dataset, str):
        print(f"{PROG}: error: {dataset}", file=sys.stderr, flush=True)
        link.share((0, 0, 2))
        link.share(2)
        return 2
    N, B = dataset.N, dataset.record_bytes
    link.share((N, B, 0))
    link.share_array(dataset.checksums)
    dog = Watchdog.for_job(args.timeout, N, B, rank=link.rank, prog=PROG)
    p_t = placement(args, N, K, epoch=args.start_epoch)
    for k in range(K):  # setup, not counted: each worker starts with its batch of the first epoch
        link.send_rows(k, dataset.data[p_t.batch(k)])

    # Results go to standard output, or to the file coded-shuffle run reads them from.
    res: TextIO = sys.stdout if args.results is None else open(args.results, "w", encoding="utf-8")  # noqa: SIM115
    out: TextIO | None = None
    if args.json == "-":
        out = res
    elif args.json is not None:
        out = open(args.json, "w", encoding="utf-8")  # noqa: SIM115
    table = args.json != "-"
    if table:
        pace = f"{args.link_mbps:g} Mbit/s" if args.link_mbps else "unpaced"
        print(
            f"K = {K}, N = {N}, record = {B} B, "
            f"epochs = {args.start_epoch}..{args.start_epoch + args.epochs}, seed = {args.seed}, "
            f"mode = {args.mode}, link = {pace}",
            file=res,
            flush=True,
        )
        links = ("up MB", "down MB") if args.count_links else ()  # master's uplink, busiest downlink
        print("".join(h.rjust(11) for h in (*_COLUMNS, *links)), file=res, flush=True)
    opts = MasterOptions(
        strategy=args.strategy, max_repair_rounds=args.max_repair_rounds,
        max_frame_bytes=args.max_frame_bytes, seed=args.seed, link_mbps=args.link_mbps,
    )  # fmt: skip
    all_ok = True
    for t in range(args.start_epoch, args.start_epoch + args.epochs):
        _maybe_fail(args, t + 1)
        p_t1 = placement(args, N, K, epoch=t + 1)
        plan = plan_delivery(p_t, p_t1, strategy=args.strategy)
        planned = (plan, lower_bound(plan.S))
        for mode in MODES[args.mode]:
            role = master_transition(
                link, SCHEMES[mode], dataset, p_t, p_t1, epoch=t + 1, opts=opts, planned=planned,
                links=_link_counter() if args.count_links else None,
            )  # fmt: skip
            rep = serve(link, role, watchdog=dog)
            if mode == "coded" and args.bcast_baseline:
                n = rep.wire_bytes
                rep = dataclasses.replace(rep, bcast_bytes=n, bcast_seconds=link.baseline_broadcast(n))
            all_ok &= rep.verified
            if out is not None:
                print(json.dumps(rep.to_dict()), file=out, flush=True)
            if table:
                print("".join(c.rjust(11) for c in _cells(rep.to_dict())), file=res, flush=True)
        p_t = p_t1
    dog.close()
    if out is not None and out is not res:
        out.close()
    if res is not sys.stdout:
        res.close()
    code = 0 if all_ok else 1
    if not all_ok:
        print(f"{PROG}: error: a transition was not verified", file=sys.stderr, flush=True)
    link.share(code)
    return code


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # More ranks than cores on this node (tests and benchmarks on a laptop): let MPICH's busy-wait
    # loops yield the core (nanosleep), or waiting ranks starve the ones that compute. Set before
    # MPI starts.
    if int(os.environ.get("MPI_LOCALNRANKS", "1")) > (os.cpu_count() or 1):
        os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    comm = mpi_world()
    if comm.Get_size() < 2:
        if comm.Get_rank() == 0:
            print(f"{PROG}: error: needs a master and at least one worker: mpiexec -n K+1", file=sys.stderr)
        mpi_exit(2, status_file=args.status_file)
    pace = TokenBucket.from_mbps(args.link_mbps) if args.link_mbps else None
    link = MPITransport(comm, pace=pace)
    code = master(args, link) if link.is_master else worker(args, link)
    if code or args.status_file:  # every rank has the master's code: a clean end, no MPI_Abort
        mpi_exit(code, status_file=args.status_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
