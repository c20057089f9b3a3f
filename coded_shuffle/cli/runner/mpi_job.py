"""An MPI job: the epochs of an experiment across processes, in each mode, reported as it goes.

Rank 0 is the master: it alone holds the dataset (``--data`` in any record format, which it opens
itself, :meth:`~coded_shuffle.cli.runner.options.JobOptions.records`, or ``N`` random records of
``B`` bytes drawn from the seed). Records of different sizes: at one batch a worker the master
shares their lengths with their checksums; with a storage of ``M > 1`` (coded) it shares the
table of their sizes in the start-up step ``sizes``, and every rank cuts each record into pieces
by its own length from it; the table is in bytes (:mod:`coded_shuffle.cli.sized`). Rank
``k + 1`` is worker ``k``: it holds only its current batch and the table of record checksums.
Each transition ``t -> t + 1``, in each mode asked for, from the
same caches, is one run of the transition protocol (:mod:`coded_shuffle.engine.protocol`) under the
MPI driver (:func:`~coded_shuffle.engine.mpi.serve`, :func:`~coded_shuffle.engine.mpi.attend`):

1. every rank computes the placements of epochs ``t`` and ``t + 1`` from ``(seed, t)``,
   ``(seed, t + 1)``; the master plans the delivery and encodes it;
2. ``coded``: the master broadcasts the frames once; ``uncoded``: it sends each worker the records
   that move to it, in frames of lone symbols (same wire format); ``exchange``: the master takes
   no part, the workers send each other what each misses, directly (``MPI_Alltoallv``), each
   unit from the holder that keeps the busiest upload least;
3. each worker decodes its next batch from its cache and checks every decoded record; points
   that fail are re-sent alone (repairs);
4. the workers' ids and record checksums are gathered and checked against the master's ground
   truth, with conservation.

Before them the job starts up in steps (:data:`STARTUP_STEPS`): MPI's start, the records' sizes,
their checksums, the first batches, the warm-up; each is a control round that every rank must reach
within the job's timeout, then the step's collectives under the watchdog
(:func:`~coded_shuffle.engine.mpi.setup_step`), so that a rank frozen at any of them ends the job
with one line that names it, as in a transition.

Before the first transition, a warm-up transition in each mode
(:func:`~coded_shuffle.engine.session.warm_up`, ``4 K`` records of 8 bytes) loads the compiled
kernels on every rank and opens the links; it is reported apart (its own line above the table), so
that no row of the table carries the start-up.

``job`` is the job's options, a :class:`~coded_shuffle.cli.runner.options.JobOptions` that the MPI
program builds from its command line (:func:`coded_shuffle.cli.job.job_options`: checked, defaults
filled in). The master prints a table, or JSON lines, as each transition ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import math
import os
import sys
from typing import Any, TextIO

import numpy as np

from ..._progress import say
from ...codec import Cache, Dataset, load_dataset
from ...engine.elastic_epochs import ElasticSchedule
from ...engine.mpi import Watchdog, default_timeout
from ...engine.protocol import MasterOptions
from ...engine.recut import RecutReport
from ...engine.report import (
    TABLE_COLUMNS,
    LinkCounts,
    TransitionReport,
    table_cells,
    table_legend,
    time_lines,
)
from ...engine.rest import HeldStart
from ...engine.restore import RecoveryReport
from ...engine.schedule import EpochSchedule
from ...engine.schemes import REGISTRY, SCHEMES, Scheme, names, registered, scheme_for
from ...engine.session import WARM_RECORDS, Extras, Session, warm_up
from ...engine.state import storage_refusal, synthetic_dataset
from ...network import Network
from ...orders import SHUFFLE_ALGORITHMS, OrderSpec, auto_order
from ...records import npy_header, npy_problem
from ...transport import ControlLink
from ..data import sizes_text
from ..sized import (
    SIZED_COLUMNS,
    SIZED_WIDTHS,
    ByteBound,
    StorageByteBound,
    sized_cells,
    sized_legend,
    sized_time_lines,
)
from . import held
from .held import start_dict, start_line
from .hooks import hooks
from .options import JobOptions
from .probe import ProbedRates

#: The name the job's messages start with.
PROG = "coded-shuffle run"
#: What each ``mode`` runs, in this order, each transition: a registered scheme alone (by its
#: name or an old one, :data:`~coded_shuffle.engine.schemes.REGISTRY`), or two words for several.
MODES = {
    **{n: (registered(n).name,) for n in names(aliases=True)},
    "both": ("coded", "uncoded"),
    "all": ("coded", "uncoded", "exchange"),
}
#: The modes whose master sends coded frames to every worker (what ``--multicast`` carries).
CODED = frozenset(r.name for r in REGISTRY.values() if r.coded)
#: The modes whose master sends frames (its options then apply; its workers receive them).
MASTER_SENDS = frozenset(r.name for r in REGISTRY.values() if r.master_sends)


class Epochs:
    """A job's epochs: the batches its options name, held as its schemes' placement model says."""

    def __init__(
        self, job: JobOptions, N: int, B: int, K: int, *, peers: bool = False, sizes: np.ndarray | None = None
    ) -> None:
        self.job, self.N, self.K, self.B = job, N, K, B
        M = int(job.storage)
        #: The network the job says it runs on (a split's share is set by it), or None.
        self.network = None if job.network is None else Network.parse(job.network)
        #: The scheme of every mode the job runs; they share one placement model (with a storage of
        #: records of many sizes, ``sizes``, cut by their own lengths on every rank alike).
        self.schemes = {
            mode: scheme_for(
                mode, K=K, storage=M, peers=peers, record_bytes=B, network=self.network, sizes=sizes
            )
            for mode in MODES[job.mode]
        }
        #: The coded scheme: the plan every mode is reported against, and the placement model; a
        #: job of one mode has that mode's (the exchange's makes the coded plan after its delivery).
        one = next(iter(self.schemes.values())) if len(self.schemes) == 1 else None
        self.scheme = one or scheme_for("coded", K=K, storage=M, record_bytes=B, sizes=sizes)

        spec = OrderSpec(auto_order(job.order, N), job.shard_size, job.canonical_nodes, job.block_size)
        #: The job's epochs (the coded scheme's placement model serves every mode); with
        #: ``--epoch-workers``, epoch ``t``'s batches on its first ``K_t`` workers.
        self.schedule = EpochSchedule(N=N, K=K, seed=job.seed, spec=spec, scheme=self.scheme)
        if job.epoch_workers is not None:
            self.schedule = ElasticSchedule(N=N, K=K, seed=job.seed, spec=spec, scheme=self.scheme,
                                            workers=job.epoch_workers, start=job.start_epoch)  # fmt: skip

    @property
    def piece_bytes(self) -> int:
        return self.scheme.piece_bytes(self.B)


#: The steps of a job's start-up, in order: MPI's start, then the rounds of
#: :func:`~coded_shuffle.engine.mpi.setup_step` (a job of peers has no first batches to send: each
#: rank reads its own). A test's hooks (:class:`.hooks.Hooks`) may make a rank fail at one of them.
STARTUP_STEPS = ("start", "sizes", "checksums", "first batches", "warm-up")


def _hooks(job: JobOptions, link: ControlLink, dog: Watchdog, schemes: tuple[Scheme, ...] = ()) -> Session:
    """The session of the job on this rank, with the installed hooks (:func:`.hooks.hooks`, which do
    nothing but in a test) at every start-up step and transition and for the frames of the
    transitions, and the job's figures (the workers' digests, ``--count-links``, ``--bcast-baseline``)."""
    test, first = hooks(), job.start_epoch + 1

    def tamper(cache: Cache, units: np.ndarray, epoch: int) -> Any:
        return test.tamper(cache, units, worker=link.worker, epoch=epoch, first=first)

    extras = Extras(
        links=_link_counter if job.count_links else None, baseline=job.bcast_baseline, with_digest=True,
        tamper=tamper, before=lambda epoch: test.fail(epoch),
    )  # fmt: skip
    return Session(link, dog, schemes, extras=extras, at=lambda stage: test.fail(at=stage))


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


# --------------------------------------------------------------------------- worker


def startup_timeout(job: JobOptions) -> float:
    """The bound on each wait of the job's start-up: its timeout, else the default for its records
    (their sizes read from the options, or from the header of ``--data``)."""
    if job.timeout is not None:
        return float(job.timeout)
    N = B = 0
    if job.data is None:
        sizes = job.synthetic()
        N, B = sizes if isinstance(sizes, tuple) else (0, 0)
    elif job.format not in ("auto", "npy") or os.path.isdir(job.data):  # its bytes on disk, where seen
        N, B = 1, _bytes_on_disk(job.data)
    elif npy_problem(job.data) is None:  # else the master says why, at the first step
        shape, dtype = npy_header(job.data)
        N, B = shape[0], math.prod(shape[1:]) * dtype.itemsize
    return default_timeout(N, B)


def _bytes_on_disk(path: str) -> int:
    """The bytes of the file ``path``, or of the files under the directory ``path`` (0 where this
    rank cannot see it)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(d, f))
    return total


def start_watchdog(job: JobOptions, rank: int) -> Watchdog:
    """The job's watchdog, from its start (:func:`startup_timeout`; without a timeout given, the
    default for its records once every rank knows them)."""
    return Watchdog(timeout=startup_timeout(job), rank=rank, prog=PROG, fixed=job.timeout is not None)


def worker(job: JobOptions, link: ControlLink, dog: Watchdog) -> int:
    session = _hooks(job, link, dog)
    with session.setup("sizes"):
        N, B, status, variable = link.share()
        code = link.share() if status else 0
        sizes = _record_sizes(link, job, N, variable) if not status else None
    if status:
        dog.close()
        return int(code)
    dog.for_records(N, B)
    K = link.K
    ep = Epochs(job, N, B, K, sizes=sizes)
    modes = MODES[job.mode]
    session.schemes = tuple(ep.schemes[m] for m in modes)
    start = held.receive(session, job, ep.schedule, N, B, variable=variable)
    # Receive and output buffers are set up (pages touched) once: a batch has the same size at
    # every epoch, and a delivery carries at most N (K - 1) / K coded symbols (with a storage,
    # about the uncoded load of pieces at most; the buffer grows if a delivery needs more).
    if MASTER_SENDS & set(modes):
        per = ep.scheme.pieces * (K - ep.scheme.M) // max(K - 1, 1)
        frames = (N * B // job.max_frame_bytes + 2) * 4160
        link.reserve(-(-N * per * (K - 1) // K) * (ep.piece_bytes + 24) + frames)
    warm_up(link, dog, _warm_schemes(modes, K, ep.network), seed=job.seed, at=session.setup_hook)
    probe_links(session, job)
    start.arrive()
    for turn in session.epochs(ep.schedule, start.now, job.start_epoch + job.epochs):
        start.keep(turn.epoch)
    dog.close()
    return int(session.end())


def _record_sizes(link: ControlLink, job: JobOptions, N: int, variable: bool, sizes: Any = None) -> Any:
    """Collective, in the step ``sizes``: every record's size, from the master (``sizes``) to the
    workers, where a storage of ``M > 1`` cuts records of many sizes by their own lengths (each
    rank computes the pieces' lengths from them); None otherwise."""
    if not variable or job.storage == 1:
        return None
    return link.share_array(np.empty(N, dtype=np.int64) if sizes is None else sizes)


def _warm_schemes(modes: tuple[str, ...], K: int, network: Network | None) -> tuple[Scheme, ...]:
    """The schemes of the warm-up of ``modes`` (a split's share set by ``network``, the job's)."""
    return tuple(SCHEMES[m] if m in SCHEMES else scheme_for(m, K=K, network=network) for m in modes)


def probe_links(session: Session, job: JobOptions) -> ProbedRates | None:
    """Collective, with ``--probe``: the rates the links reach (:mod:`coded_shuffle.cli.runner.probe`),
    on the leading rank (None elsewhere, and without ``--probe``)."""
    if job.probe is None:
        return None
    link = session.link
    with session.setup("probe"):
        seconds = link.probe_phases(job.probe)  # type: ignore[attr-defined]
    return None if seconds is None else ProbedRates(job.probe, link.K, seconds)


def _link_counter() -> Any:
    """A function that returns the bytes this rank's links sent and received since this call."""
    tx0, rx0 = link_bytes()

    def since() -> tuple[int, int]:
        tx, rx = link_bytes()
        return tx - tx0, rx - rx0

    return since


# --------------------------------------------------------------------------- master


#: Under the table of several modes on a link the engine does not pace: why ``seconds`` need not
#: show the gain. Whether something else shapes the link (``tc`` on hosts of their own) is not
#: known here, so the note says what holds where nothing does.
UNPACED_NOTE = (
    "note: the engine does not pace the link and cannot tell whether anything shapes it; on one "
    "machine, unshaped, a broadcast costs about as much per delivered byte as unicast, so seconds need "
    "not follow the bytes; the coded gain is in 'sent MB', and shows in time where the master's link "
    "is the bottleneck (shaped, or paced by --link-mbps R at R Mbit/s)"
)


#: Widths of the table's columns (the link counters' last).
_WIDTHS = (6, 10, 9, 9, 9, 13, 13, 9, 9, 9, 8, 8, 9, 9, 9)


def _line(cells: Any) -> str:
    return "".join(c.rjust(w) for c, w in zip(cells, _WIDTHS, strict=False))


#: The last epoch a job may reach: a frame's epoch is 64 bits.
LAST_EPOCH = 2**64 - 1


def job_refusal(
    job: JobOptions, K: int, N: int, B: int, *, peers: bool = False, variable: bool = False
) -> str | None:
    """Why ``job`` cannot run on ``K`` workers over ``N`` records of ``B`` bytes, in one line
    naming its option, or None when it can.

    The one check of a job against its workers and records: the ranks make it once they know
    the records (the master, or every peer), and ``coded-shuffle run`` before it launches any
    (:func:`coded_shuffle.cli.job.check_job`), with the records' number and size from the
    options or the ``.npy`` file's header. ``peers``: a job of peers (no master sends frames).

    Examples
    --------
    >>> job_refusal(JobOptions(mode="exchange"), 128, 100, 1024, peers=True)
    'the dataset has 100 records, fewer than the 128 workers'
    >>> job_refusal(JobOptions(), 4, 6000, 1024) is None
    True
    """
    if job.data is None:
        sizes = job.synthetic()
        if isinstance(sizes, str):
            return sizes
    if N < K:
        return f"the dataset has {N} records, fewer than the {K} workers"
    if job.epoch_workers is not None:
        problem = _elastic_refusal(job, K)
        if problem is not None:
            return problem
    stored = f"--storage {job.storage}"
    # auto (the launcher's) with a storage chooses coded or exchange (engine.schedule.storage_times)
    sized = (
        (job.storage != 1 and not set(MODES.get(job.mode, ("coded", "exchange"))) <= {"coded", "exchange"},
         f"{stored} --mode {job.mode}"),  # fmt: skip
    )
    for given, flag in sized:
        if variable and given:
            return f"{flag} needs records of one size: those of --data {job.data} differ in size"
    if not peers and job.max_frame_bytes < B:
        return (
            f"--max-frame-bytes must be at least the record width, {B} bytes "
            f"(a frame carries at least one symbol), not {job.max_frame_bytes}"
        )
    if job.start_epoch + job.epochs > LAST_EPOCH:
        return (
            f"--start-epoch + --transitions must be at most 2**64 - 1 (a frame's epoch is 64 bits), "
            f"not {job.start_epoch + job.epochs}"
        )
    if auto_order(job.order, N) in SHUFFLE_ALGORITHMS:  # the shard-aware orders' options
        shard = {"--shard-size": job.shard_size, "--canonical-nodes": job.canonical_nodes}
        for flag, value in {**shard, "--block-size": job.block_size}.items():
            if value < 1:
                return f"{flag} must be at least 1, not {value}"
        if job.canonical_nodes > N:
            return f"--canonical-nodes must be at most the {N} records, not {job.canonical_nodes}"
    return storage_refusal(B, K, job.storage)


def _elastic_refusal(job: JobOptions, K: int) -> str | None:
    """Why the workers of each epoch (``--epoch-workers``, ``run --workers K0,K1,...``) cannot run
    on ``K`` workers, or None: ``--transitions + 1`` counts, the largest ``K``, one batch a worker
    (records of one size or of many, each transition then reported in bytes against the bound of
    the rectangular shuffle weighted by size), a mode with a master's unicast or the workers'
    exchange."""
    counts = job.epoch_workers
    assert counts is not None
    if len(counts) != job.epochs + 1:
        return (
            f"--workers must give 1 or --transitions + 1 = {job.epochs + 1} worker counts, not {len(counts)}"
        )
    if max(counts) != K:
        return f"--epoch-workers must have the job's {K} workers as its largest count, not {max(counts)}"
    given = (
        (job.storage != 1, f"--storage {job.storage} in one job: a storage is cut again at each change (in "
         "process: simulate --workers; across jobs: run again on another -K with --cache-dir)"),
        (job.mode == "split", "--mode split"),
        (job.network is not None, "--network"),
        (job.multicast is not None, "--multicast"),
    )  # fmt: skip
    for refused, what in given:
        if refused:
            listed = ",".join(map(str, counts))
            return f"a number of workers that changes (--workers {listed}) cannot run with {what}"
    return None


def _workers_note(job: JobOptions) -> str:
    """What the header says of the workers of each epoch (nothing when they do not change)."""
    if job.epoch_workers is None:
        return ""
    listed = ", ".join(map(str, job.epoch_workers))
    return f", workers of each epoch = {listed} (a transition's bound is that of the rectangular shuffle)"


def _load(job: JobOptions, K: int) -> Dataset | str:
    """The master's records: those of ``--data`` read through its record source (a ``.npy`` file
    stays a memory map; records of different sizes are zero-padded rows, made once), or random
    ones; else why not, in one line."""
    try:
        if job.data is not None:
            dataset = load_dataset(job.records())
        else:
            sizes = job.synthetic()
            if isinstance(sizes, str):
                return sizes
            dataset = synthetic_dataset(*sizes, seed=job.seed)
    except (ValueError, MemoryError, OSError, ImportError, TypeError) as exc:
        said = " ".join(str(exc).split())
        return said if job.data is None else f"--data {job.data}: {said}"
    refusal = job_refusal(job, K, dataset.N, dataset.record_bytes, variable=dataset.variable)
    return dataset if refusal is None else refusal


def records_text(K: int, N: int, B: int, lengths: np.ndarray | None, *, peers: bool = False) -> str:
    """``K = 4, N = 40, record = 64 B``: the job's workers and records, for the header.

    >>> records_text(2, 3, 9, np.array([3, 9, 4]))
    'K = 2, N = 3, records of 3 to 9 B, mean 5.3 B'
    """
    head = f"K = {K}{' peers' if peers else ''}, N = {N}"
    return f"{head}, record = {B} B" if lengths is None else f"{head}, records of {sizes_text(lengths)}"


class Results:
    """The job's results as the leading rank writes them: a header and a table, or JSON lines.

    They go to standard output, or to the file ``coded-shuffle run`` reads them from
    (``--results``); ``--json FILE`` writes the JSON lines there as well.
    """

    def __init__(
        self, job: JobOptions, K: int, sizes: str, note: str, warm: float, probe: ProbedRates | None = None,
        bound: ByteBound | StorageByteBound | None = None,
        held: HeldStart | RecoveryReport | RecutReport | None = None,
    ) -> None:  # fmt: skip
        self.job = job
        #: Records of different sizes: each transition's bound weighted by size; the table in bytes.
        self.bound = bound
        #: The network the job says it runs on: each row then has its time bound and gap to it (in
        #: bytes on records of different sizes), timed by the protocol.
        self.network = None if job.network is None else Network.parse(job.network)
        self._timed: list[dict[str, Any]] = []
        #: The rows of the table, for its legend.
        self._rows: list[dict[str, Any]] = []
        self.res: TextIO = sys.stdout if job.results is None else open(job.results, "w", encoding="utf-8")  # noqa: SIM115
        self.out: TextIO | None = None
        if job.json == "-":
            self.out = self.res
        elif job.json is not None:
            self.out = open(job.json, "w", encoding="utf-8")  # noqa: SIM115
        self.table = job.json != "-"
        multicast = job.multicast is not None
        if probe is not None and self.out is not None:
            print(json.dumps({"probe": probe.to_dict(multicast=multicast)}), file=self.out, flush=True)
        if held is not None and self.out is not None:  # --cache-dir: how the job started
            print(json.dumps({"held_start": start_dict(held)}), file=self.out, flush=True)
        if not self.table:
            return
        pace = (
            f"paced at {job.link_mbps:g} Mbit/s by the engine"
            if job.link_mbps
            else "not paced by the engine; shaping unknown"
        )
        self._print(
            f"{sizes}, epochs = {job.start_epoch}..{job.start_epoch + job.epochs}, seed = {job.seed}, "
            f"mode = {job.mode}, link = {pace}" + note + _workers_note(job)
        )
        self._print(
            f"warm-up: one transition of {WARM_RECORDS * K} records a mode, {warm:.3f} s "
            "(kernels loaded and links opened on every rank; not in the rows below)"
        )
        if probe is not None:
            self._print(probe.line(self.network, multicast=multicast))
        if held is not None:
            self._print(start_line(held, str(job.cache_dir)))
        links = ("up MB", "down MB") if job.count_links else ()  # master's uplink, busiest downlink
        self._print(self._line((*(TABLE_COLUMNS if bound is None else SIZED_COLUMNS), *links)))

    def _print(self, line: str) -> None:
        print(line, file=self.res, flush=True)

    def _line(self, cells: Any) -> str:
        if self.bound is None:
            return _line(cells)
        return "".join(c.rjust(w) for c, w in zip(cells, SIZED_WIDTHS, strict=False))

    def _dict(self, rep: TransitionReport, links: LinkCounts | None) -> dict[str, Any]:
        """The report as JSON takes it (with ``links``); on records of different sizes with its
        bound weighted by size (``lower_bound_bytes``, ``lower_bound_bytes_exact``)."""
        d = rep.to_dict(links)
        if self.bound is not None:
            d["lower_bound_bytes"], d["lower_bound_bytes_exact"] = self.bound(rep.epoch)
        return d

    def row(self, rep: TransitionReport, lost_all: bool = False, links: LinkCounts | None = None) -> None:
        """One transition's report (with its times on the network, where the job states one);
        ``lost_all``: no worker received a byte of its multicast delivery; ``links``: the bytes
        the interfaces counted (``--count-links``)."""
        flat = self._dict(rep, links)
        if flat["network"] is not None:
            self._timed.append(flat)
        if lost_all:
            say(f"{PROG}: warning: epoch {rep.epoch}: every multicast frame was lost on every worker; the "
                "records came by the repairs, over MPI")  # fmt: skip
        if self.out is not None:
            print(json.dumps(flat), file=self.out, flush=True)
        if self.table:
            self._rows.append(flat)
            self._print(self._line((table_cells if self.bound is None else sized_cells)(flat)))

    def close(self, all_ok: bool, *, several: bool) -> int:
        """The end of the results; returns the job's status (1 if a transition was not verified)."""
        if self.table:
            for line in (table_legend if self.bound is None else sized_legend)(self._rows):
                self._print(line)
        if self.table and not self.job.link_mbps and several:
            self._print(UNPACED_NOTE)
        if self.table and self._timed:
            sizes = None if self.bound is None else self.bound.sizes  # records of different sizes
            for line in time_lines(self._timed) if sizes is None else sized_time_lines(self._timed, sizes):
                self._print(line)
        if self.out is not None and self.out is not self.res:
            self.out.close()
        if self.res is not sys.stdout:
            self.res.close()
        if not all_ok:
            say(f"{PROG}: error: a transition was not verified")
        return 0 if all_ok else 1


def master(job: JobOptions, link: ControlLink, dog: Watchdog) -> int:
    K = link.K
    dataset = _load(job, K)
    session = _hooks(job, link, dog)
    if isinstance(dataset, str):
        say(f"{PROG}: error: {dataset}")
        with session.setup("sizes"):
            link.share((0, 0, 2, False))
            link.share(2)
        dog.close()
        return 2
    N, B = dataset.N, dataset.record_bytes
    dog.for_records(N, B)
    lengths = None if dataset.lengths is None else np.ascontiguousarray(dataset.lengths, dtype=np.int64)
    with session.setup("sizes"):
        link.share((N, B, 0, dataset.variable))
        sizes = _record_sizes(link, job, N, dataset.variable, lengths)
    ep = Epochs(job, N, B, K, sizes=sizes)
    modes = MODES[job.mode]
    session.schemes = tuple(ep.schemes[m] for m in modes)
    start = held.deal(session, job, ep.schedule, dataset)
    warm = warm_up(link, dog, _warm_schemes(modes, K, ep.network), seed=job.seed, at=session.setup_hook)
    probe = probe_links(session, job)
    # records of different sizes: the bound weighted by size (that of the pieces, with a storage)
    bound: ByteBound | StorageByteBound | None = None
    if lengths is not None:
        stored = sizes is not None  # a storage of pieces cut by the records' sizes
        bound = (StorageByteBound(ep.schedule, start=start.now) if stored
                 else ByteBound(ep.schedule, lengths, first=start.first))  # fmt: skip
    results = Results(job, K, records_text(K, N, B, dataset.lengths), ep.scheme.holding.note(B), warm, probe,
                      bound, held=start.report)  # fmt: skip
    session.opts = MasterOptions(
        strategy=job.strategy, max_repair_rounds=job.max_repair_rounds,
        max_frame_bytes=job.max_frame_bytes, seed=job.seed, link_mbps=job.link_mbps,
        records=(N, B), network=results.network, measured=True,
    )  # fmt: skip
    session.extras = dataclasses.replace(session.extras, planned_by=ep.scheme, report=results.row)
    all_ok = start.arrive()
    for turn in session.epochs(ep.schedule, start.now, job.start_epoch + job.epochs):
        all_ok &= all(rep.verified for rep in turn.reports)
    dog.close()
    code = results.close(all_ok, several=len(modes) > 1)
    session.end(code)
    return code
