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
import glob
import hashlib
import json
import os
import sys
import time
from typing import Any, NoReturn, TextIO

import numpy as np

from .bounds import lower_bound
from .codec import (
    DEFAULT_MAX_FRAME_BYTES,
    Cache,
    Dataset,
    decode_worker,
    encode_plan,
    encode_plan_arrays,
    load_dataset,
    parse_frame,
)
from .engine import check_holdings, synthetic_dataset
from .errors import DecodeError, IntegrityError
from .orders import EPOCH_ORDERS, OrderSpec, Placement, auto_order, ignored_shard_options, order_placement
from .plan import STRATEGIES, DeliveryPlan, plan_delivery
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
_INIT_TAG = 11


class _Parser(argparse.ArgumentParser):
    """Every rank parses the same arguments; only rank 0 prints the error, all exit with 2."""

    def error(self, message: str) -> NoReturn:
        world = mpi_world()
        if world.Get_rank() == 0:
            print(f"{PROG}: error: {message}", file=sys.stderr, flush=True)
        # Every rank parses the same arguments and lands here; wait until rank 0 has printed,
        # or another rank's exit aborts the job before the message is out.
        world.Barrier()
        mpi_exit(2)


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
    and hold at least one record a worker (``workers``) of a plain (not object) dtype.

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
        "--count-links",
        action="store_true",
        help="report the bytes each rank's network interfaces sent and received, per transition",
    )
    # For tests and benchmarks.
    p.add_argument("--bcast-baseline", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--fail-rank", type=_non_negative, help=argparse.SUPPRESS)
    p.add_argument("--fail-epoch", type=_positive, help=argparse.SUPPRESS)
    p.add_argument("--fail-how", choices=("raise", "exit"), default="raise", help=argparse.SUPPRESS)
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


def digest(cache: Cache) -> str:
    """A digest of the ids and bytes a worker holds (equal digests: same bytes)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(np.ascontiguousarray(cache.ids, dtype="<i8").tobytes())
    h.update(np.ascontiguousarray(cache.data).data)
    return h.hexdigest()


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


class _Counters:
    """Per transition: this rank's link bytes, gathered at the master (with ``--count-links``)."""

    def __init__(self, args: argparse.Namespace, comm: Any) -> None:
        self.on = bool(args.count_links)
        self.comm = comm
        self.start = link_bytes() if self.on else (0, 0)

    def gather(self) -> dict[str, list[int]]:
        if not self.on:
            return {}
        tx, rx = link_bytes()
        got = self.comm.gather((tx - self.start[0], rx - self.start[1]), root=0)
        if got is None:
            return {}
        return {"link_tx_bytes": [int(a) for a, _ in got], "link_rx_bytes": [int(b) for _, b in got]}


# --------------------------------------------------------------------------- worker


def _corrupt(frames: list[np.ndarray], cache: Cache, need: np.ndarray) -> None:
    """Flip one payload byte of a symbol this worker decodes (to exercise repairs)."""
    want = np.setdiff1d(need, cache.ids)
    for q, raw in enumerate(frames):
        f = parse_frame(raw)
        hit = np.flatnonzero(np.isin(f.a, want) | np.isin(f.b, want))
        if hit.size:
            buf = raw.copy()
            buf[f.header_bytes + int(hit[0]) * f.record_bytes] ^= 0xFF
            frames[q] = buf
            return


def _decode(
    link: MPITransport,
    cache: Cache,
    need: np.ndarray,
    *,
    epoch: int,
    sums: np.ndarray,
    corrupt: bool,
    out: np.ndarray | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Receive one delivery and decode it: the worker side of the engine's decode stage."""
    k = link.worker
    assert k is not None
    t0 = time.perf_counter()
    raw = link.receive(k)
    t_recv = time.perf_counter() - t0
    if corrupt:
        _corrupt(raw, cache, need)
    frames, rejected = [], 0
    for buf in raw:
        try:
            frames.append(parse_frame(buf, epoch=epoch, record_bytes=int(cache.data.shape[1])))
        except DecodeError:
            rejected += 1
    res = decode_worker(cache, frames, need=need, worker=k, epoch=epoch, checksums=sums, out=out)
    info = {
        "recv": t_recv,
        "done": time.perf_counter() - t0,
        "failed": res.failed,
        "rejected": rejected,
        "decoded": int(res.decoded.size),
    }
    return res, info


def worker_transition(
    args: argparse.Namespace,
    link: MPITransport,
    cache: Cache,
    need: np.ndarray,
    epoch: int,
    sums: np.ndarray,
    out: np.ndarray,
) -> Cache:
    comm = link.comm
    corrupt = args.corrupt_worker == link.worker and epoch == args.start_epoch + 1
    counters = _Counters(args, comm)
    comm.Barrier()
    res, info = _decode(link, cache, need, epoch=epoch, sums=sums, corrupt=corrupt, out=out)
    comm.gather(info, root=0)
    new = res.cache
    failed = res.failed
    while comm.bcast(None, root=0):  # a repair round: the master re-sends failed points alone
        empty = Cache(
            ids=np.empty(0, np.int64), data=np.empty((0, new.data.shape[1]), np.uint8), lengths=None
        )
        fix, rinfo = _decode(link, empty, failed, epoch=epoch, sums=sums, corrupt=False)
        good = np.setdiff1d(fix.cache.ids, fix.failed)
        if good.size:
            rows = fix.cache.rows(good)
            new = new.patched(Cache(ids=good, data=fix.cache.data[rows], lengths=None))
        failed = fix.failed
        comm.gather(rinfo, root=0)
    comm.gather((new.ids, new.checksums(), digest(new)), root=0)
    counters.gather()
    return new


def worker_exchange(
    args: argparse.Namespace,
    link: MPITransport,
    cache: Cache,
    p_t: Placement,
    p_t1: Placement,
    out: np.ndarray,
) -> Cache:
    """The alltoallv mode: send the records that move straight to their next holders, uncoded."""
    comm = link.comm
    k = link.worker
    assert k is not None
    counters = _Counters(args, comm)
    sent_before = link.exchanged_bytes
    comm.Barrier()
    t0 = time.perf_counter()
    dest = p_t1.owner[cache.ids]
    go = np.flatnonzero(dest != k)
    go = go[np.argsort(dest[go], kind="stable")]  # by destination, ids increasing within each
    counts = np.bincount(dest[go], minlength=link.K)
    recv, _ = link.exchange(cache.data[go], counts)
    t_recv = time.perf_counter() - t0
    # Who sends what is known to all from the two placements: the records that come to k, from
    # worker 0 first, ids increasing within each sender (the order the senders used).
    came = np.flatnonzero((p_t1.owner == k) & (p_t.owner != k))
    came = came[np.argsort(p_t.owner[came], kind="stable")]
    need = p_t1.batch(k)
    stay = dest == k
    out[np.searchsorted(need, cache.ids[stay])] = cache.data[stay]
    out[np.searchsorted(need, came)] = recv
    new = Cache(ids=need, data=out, lengths=None)
    info = {
        "recv": t_recv,
        "done": time.perf_counter() - t0,
        "failed": np.empty(0, np.int64),
        "rejected": 0,
        "decoded": int(came.size),
        "sent": link.exchanged_bytes - sent_before,
    }
    comm.gather(info, root=0)
    comm.gather((new.ids, new.checksums(), digest(new)), root=0)
    counters.gather()
    return new


def bcast_baseline_worker(comm: Any) -> None:
    n = comm.bcast(None, root=0)
    buf = np.ones(n, dtype=np.uint8)
    comm.Barrier()
    t0 = time.perf_counter()
    comm.Bcast(buf, root=0)
    comm.gather(time.perf_counter() - t0, root=0)


def worker(args: argparse.Namespace, link: MPITransport) -> int:
    comm = link.comm
    k = link.worker
    assert k is not None
    meta = np.empty(3, dtype=np.int64)
    comm.Bcast(meta, root=0)
    N, B, status = (int(v) for v in meta)
    if status:
        return int(comm.bcast(None, root=0))
    sums = np.empty(N, dtype=np.uint64)
    comm.Bcast(sums, root=0)
    K = link.K
    ids = placement(args, N, K, epoch=args.start_epoch).batch(k)
    data = np.empty((ids.size, B), dtype=np.uint8)
    comm.Recv(data, source=0, tag=_INIT_TAG)
    cache = Cache(ids=ids, data=data, lengths=None)
    # Receive and output buffers are set up (pages touched) once: a batch has the same size at
    # every epoch, and a delivery carries at most N (K - 1) / K coded symbols.
    modes = MODES[args.mode]
    if {"coded", "uncoded"} & set(modes):
        link.reserve(-(-N * (K - 1) // K) * (B + 24) + (N * B // args.max_frame_bytes + 2) * 4160)
    spare = [np.zeros_like(data) for _ in modes]
    p_t = placement(args, N, K, epoch=args.start_epoch)
    for t in range(args.start_epoch, args.start_epoch + args.epochs):
        _maybe_fail(args, t + 1)
        p_t1 = placement(args, N, K, epoch=t + 1)
        need = p_t1.batch(k)
        results = []
        for mode, out in zip(modes, spare, strict=True):
            if mode == "alltoallv":
                results.append(worker_exchange(args, link, cache, p_t, p_t1, out))
            else:
                results.append(worker_transition(args, link, cache, need, t + 1, sums, out))
            if mode == "coded" and args.bcast_baseline:
                bcast_baseline_worker(comm)
        spare = [cache.data, *(r.data for r in results[1:])]
        cache = results[0]
        p_t = p_t1
    return int(comm.bcast(None, root=0))


# --------------------------------------------------------------------------- master


def _from_workers(comm: Any, value: Any) -> list[Any]:
    """Master: gather one value from each worker, in worker order (the master's own is dropped)."""
    got = comm.gather(value, root=0)
    return list(got)[1:]


def uncoded_frames(
    dataset: Dataset, p_t: Placement, p_t1: Placement, *, epoch: int, max_frame_bytes: int
) -> dict[int, list[np.ndarray]]:
    """Every point that changes worker, alone, in frames to its new holder."""
    moved = p_t.owner != p_t1.owner
    per = max(1, max_frame_bytes // dataset.record_bytes)
    out: dict[int, list[np.ndarray]] = {}
    for j in range(p_t1.K):
        ids = np.flatnonzero(moved & (p_t1.owner == j))
        out[j] = [
            encode_plan_arrays(dataset, ids[lo : lo + per], np.full(min(per, ids.size - lo), -1), epoch=epoch)
            for lo in range(0, ids.size, per)
        ]
    return out


def master_transition(
    args: argparse.Namespace,
    link: MPITransport,
    dataset: Dataset,
    plan: DeliveryPlan,
    *,
    mode: str,
    epoch: int,
) -> dict[str, Any]:
    comm = link.comm
    B = dataset.record_bytes
    tic = time.perf_counter()
    if mode == "coded":
        frames = encode_plan(plan, dataset, epoch=epoch, max_frame_bytes=args.max_frame_bytes)
        by_worker = None
        flat = frames
        planned = plan.n_symbols
    elif mode == "uncoded":
        by_worker = uncoded_frames(
            dataset, plan.placement_t, plan.placement_t1, epoch=epoch, max_frame_bytes=args.max_frame_bytes
        )
        flat = [f for fs in by_worker.values() for f in fs]
        planned = int(plan.rates.uncoded)
    else:  # alltoallv: the workers exchange the moved records; nothing leaves the master
        by_worker, flat, planned = None, [], int(plan.rates.uncoded)
    framing = sum(parse_frame(f).header_bytes for f in flat)
    encode_s = time.perf_counter() - tic
    before, control_before = link.stats, link.control_bytes
    waited_before = link.pace.waited if link.pace is not None else 0.0
    counters = _Counters(args, comm)
    comm.Barrier()
    t0 = time.perf_counter()
    if mode == "coded":
        link.send(frames)
    elif mode == "uncoded":
        link.send_to(by_worker or {})
    sent_s = time.perf_counter() - t0
    infos = _from_workers(comm, None)
    sent = link.stats - before
    pending = {k: i["failed"] for k, i in enumerate(infos) if i["failed"].size}
    repairs = rounds = 0
    while pending and mode != "alltoallv":
        if rounds == args.max_repair_rounds:
            k = min(pending)
            raise IntegrityError(
                f"Worker {k}: {pending[k].size} record(s) still unverified after {rounds} repair round(s), "
                f"first point {int(pending[k][0])}."
            )
        comm.bcast(True, root=0)
        rounds += 1
        ids = np.unique(np.concatenate(list(pending.values())))
        repairs += int(ids.size)
        link.send([encode_plan_arrays(dataset, ids, np.full(ids.size, -1), epoch=epoch, repair=True)])
        rinfos = _from_workers(comm, None)
        pending = {k: i["failed"] for k, i in enumerate(rinfos) if i["failed"].size}
    if mode != "alltoallv":
        comm.bcast(False, root=0)
    seconds = time.perf_counter() - t0
    total = link.stats - before
    held = _from_workers(comm, None)
    checked, ok = check_holdings(dataset, [i for i, _, _ in held], [c for _, c, _ in held], plan.placement_t1)
    links = counters.gather()
    lb = lower_bound(plan.S)
    row: dict[str, Any] = {
        "epoch": epoch,
        "mode": mode,
        "K": link.K,
        "N": dataset.N,
        "record_bytes": B,
        "seed": args.seed,
        "strategy": args.strategy,
        "link_mbps": args.link_mbps,
        "planned_symbols": planned,
        "master_symbols": total.symbols,
        "master_bytes": total.bytes,
        "payload_bytes": planned * B,
        "framing_bytes": framing,
        "frames": sent.frames,
        "control_bytes": link.control_bytes - control_before,
        "coded_symbols": plan.n_symbols,
        "uncoded_symbols": int(plan.rates.uncoded),
        "lower_bound": int(lb.value),
        "lower_bound_exact": bool(lb.exact),
        "seconds": seconds,
        "send_seconds": sent_s,
        "deliver_seconds": max(i["recv"] for i in infos),
        "decode_seconds": max(i["done"] - i["recv"] for i in infos),
        "encode_seconds": encode_s,
        "paced_wait_seconds": (link.pace.waited - waited_before) if link.pace is not None else 0.0,
        "frames_rejected": sum(i["rejected"] for i in infos),
        "repairs": repairs,
        "repair_rounds": rounds,
        "repair_bytes": total.bytes - sent.bytes,
        "records_checked": checked,
        "verified": ok,
        "exchange_bytes": sum(int(i.get("sent", 0)) for i in infos),
        "digests": [d for _, _, d in held],
        **links,
    }
    if mode == "coded" and args.bcast_baseline:
        n = int(sent.bytes)
        comm.bcast(n, root=0)
        buf = np.ones(n, dtype=np.uint8)
        comm.Barrier()
        t1 = time.perf_counter()
        comm.Bcast(buf, root=0)
        times = _from_workers(comm, time.perf_counter() - t1)
        row["bcast_bytes"] = n
        row["bcast_seconds"] = max(times)
    return row


_COLUMNS = (
    "epoch", "mode", "symbols", "planned", "bound", "sent MB", "framing", "seconds", "MB/s", "repairs",
    "verified",
)  # fmt: skip


def _cells(r: dict[str, Any]) -> list[str]:
    # What was sent: by the master (coded, uncoded), or by the workers to each other (alltoallv).
    mb = (r["exchange_bytes"] if r["mode"] == "alltoallv" else r["master_bytes"]) / 1e6
    return [
        str(r["epoch"]),
        r["mode"],
        str(r["master_symbols"]),
        str(r["planned_symbols"]),
        f"{r['lower_bound']}{'' if r['lower_bound_exact'] else '*'}",
        f"{mb:.3f}",
        f"{r['framing_bytes'] / r['payload_bytes']:.2%}" if r["payload_bytes"] else "-",
        f"{r['seconds']:.3f}",
        f"{mb / r['seconds']:.1f}" if r["seconds"] > 0 else "-",
        str(r["repairs"]),
        "yes" if r["verified"] else "NO",
        *(
            [f"{r['link_tx_bytes'][0] / 1e6:.3f}", f"{max(r['link_rx_bytes'][1:]) / 1e6:.3f}"]
            if "link_tx_bytes" in r
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
    comm = link.comm
    K = link.K
    dataset = _load(args, K)
    if isinstance(dataset, str):
        print(f"{PROG}: error: {dataset}", file=sys.stderr, flush=True)
        comm.Bcast(np.array([0, 0, 2], dtype=np.int64), root=0)
        comm.bcast(2, root=0)
        return 2
    N, B = dataset.N, dataset.record_bytes
    comm.Bcast(np.array([N, B, 0], dtype=np.int64), root=0)
    comm.Bcast(np.ascontiguousarray(dataset.checksums), root=0)
    p_t = placement(args, N, K, epoch=args.start_epoch)
    for k in range(K):  # setup, not counted: each worker starts with its batch of the first epoch
        comm.Send(np.ascontiguousarray(dataset.data[p_t.batch(k)]), dest=link.rank_of(k), tag=_INIT_TAG)

    out: TextIO | None = None
    if args.json == "-":
        out = sys.stdout
    elif args.json is not None:
        out = open(args.json, "w", encoding="utf-8")  # noqa: SIM115
    table = args.json != "-"
    if table:
        pace = f"{args.link_mbps:g} Mbit/s" if args.link_mbps else "unpaced"
        print(
            f"K = {K}, N = {N}, record = {B} B, "
            f"epochs = {args.start_epoch}..{args.start_epoch + args.epochs}, seed = {args.seed}, "
            f"mode = {args.mode}, link = {pace}",
            flush=True,
        )
        links = ("up MB", "down MB") if args.count_links else ()  # master's uplink, busiest downlink
        print("".join(h.rjust(11) for h in (*_COLUMNS, *links)), flush=True)
    modes = MODES[args.mode]
    all_ok = True
    for t in range(args.start_epoch, args.start_epoch + args.epochs):
        _maybe_fail(args, t + 1)
        p_t1 = placement(args, N, K, epoch=t + 1)
        plan = plan_delivery(p_t, p_t1, strategy=args.strategy)
        for mode in modes:
            row = master_transition(args, link, dataset, plan, mode=mode, epoch=t + 1)
            all_ok &= row["verified"]
            if out is not None:
                print(json.dumps(row), file=out, flush=True)
            if table:
                print("".join(c.rjust(11) for c in _cells(row)), flush=True)
        p_t = p_t1
    if out is not None and out is not sys.stdout:
        out.close()
    code = 0 if all_ok else 1
    if not all_ok:
        print(f"{PROG}: error: a transition was not verified", file=sys.stderr, flush=True)
    comm.bcast(code, root=0)
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
        mpi_exit(2)
    pace = TokenBucket.from_mbps(args.link_mbps) if args.link_mbps else None
    link = MPITransport(comm, pace=pace)
    code = master(args, link) if link.is_master else worker(args, link)
    if code:  # every rank has the same code (the master broadcast it): a clean end, no MPI_Abort
        mpi_exit(code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
