"""How the workers of an MPI job start: dealt their batches of the first epoch, or (``--cache-dir
DIR``) from what their cache files on their hosts still hold.

With ``--cache-dir`` every worker keeps its units of every epoch (its batch, or with ``--storage
M`` its storage) in ``DIR/worker-<k>.cache`` on its host (:mod:`coded_shuffle.engine.cache_dir`:
crash-safe, checksummed), written after the job's first epoch and after each transition, and a
job of the same records, seed and ``K`` starts from those files, as ``MPILoader(cache_dir=...)``
does, through the same calls of the session:

- one batch a worker: each worker reads its file back and checks it (a file cut short, altered,
  of another job or of another worker is treated as absent, in one line on standard error naming
  the file and what differs), the master sends from the source only the records no worker holds
  (:meth:`~coded_shuffle.engine.session.Session.deal_held`,
  :func:`~coded_shuffle.engine.rest.serve_held`), and the batches of the first epoch ``T`` come by
  a transition of the job's modes from those holdings (the job's first row, epoch ``T``; no
  record moves when the files hold epoch ``T``);
- a storage of ``M > 1`` batches, which follows from epoch 0 whatever the job's first epoch: the
  storage of epoch ``T`` comes back from the pieces the files still hold, a piece a worker lacks
  from another worker that stores it, from the source when none does
  (:func:`~coded_shuffle.engine.restore.restore_plan`), and the transitions are those of a job that
  never stopped; files written by a job of another number of workers (or that do not fit the
  storage a restore plans from) are cut again into the storage of epoch ``T`` at this job's ``K``
  (:mod:`~coded_shuffle.engine.recut_serve`, as ``MPILoader`` does), the job going on from it.

Records of several sizes (a ``--data`` of them) are kept each at its length (or each piece of a
storage, every record cut by its own length), and counted at their own bytes; their storage is
restored at the ``K`` that wrote it, or cut again at another (each record's pieces at its own
length at both).

The master reports how the job started (:func:`start_dict`, :func:`start_line`): records held,
dropped and sent from the source (:class:`~coded_shuffle.engine.rest.HeldStart`), pieces kept,
from peers and from the source (:class:`~coded_shuffle.engine.restore.RecoveryReport`), or the
bytes of a re-cut (:class:`~coded_shuffle.engine.recut.RecutReport`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..._progress import say
from ...codec import Cache, Dataset
from ...engine.mpi import end_job
from ...engine.recut import RecutReport
from ...engine.recut_serve import receive_recut_start, serve_recut_start
from ...engine.rest import HeldStart, load_worker_cache, save_worker_cache, table_dataset
from ...engine.restore import RecoveryReport
from ...engine.schedule import Epoch, EpochSchedule
from ...engine.session import Session
from .options import JobOptions

__all__ = ["Start", "cache_dir_problem", "deal", "first_epoch", "receive", "start_dict", "start_line"]

#: The name the job's messages start with (that of :mod:`.mpi_job`).
PROG = "coded-shuffle run"


def cache_dir_problem(path: str) -> str | None:
    """Why ``path`` cannot be the folder of a job's cache files on this host, or None: a folder
    in which a file can be written, or (where it does not exist) the nearest folder above it one
    in which a folder can be made (each tried, then removed: the check leaves nothing behind).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     cache_dir_problem(os.path.join(d, "new", "cache")) is None, cache_dir_problem(__file__)
    (True, 'is a file, not a folder')
    """
    import tempfile

    if os.path.exists(path) and not os.path.isdir(path):
        return "is a file, not a folder"
    here = os.path.abspath(path)
    while not os.path.exists(here):  # the folders the workers would make, from the nearest one above
        here = os.path.dirname(here)
    if not os.path.isdir(here):
        return f"cannot be made: {here} is a file, not a folder"
    try:
        if here == os.path.abspath(path):
            with tempfile.TemporaryFile(dir=here):
                pass
        else:
            os.rmdir(tempfile.mkdtemp(dir=here))
    except OSError as exc:
        what = "cannot be written" if here == os.path.abspath(path) else f"cannot be made in {here}"
        return f"{what}: {exc.strerror or exc}"
    return None


def first_epoch(job: JobOptions, schedule: EpochSchedule) -> Epoch:
    """The job's first epoch, ``--start-epoch``: what the workers hold starts there, but for a
    storage of ``M > 1`` batches kept in a ``--cache-dir``, which follows from epoch 0 (so that
    every job on the same files agrees on which workers store each piece)."""
    if job.cache_dir is None or schedule.scheme.M == 1 or job.start_epoch == 0:
        return schedule.epoch(job.start_epoch)
    *_, now = schedule.epochs(start=0, count=job.start_epoch + 1)
    return now


@dataclass
class Start:
    """How this rank's job started: its first epoch ``now``; ``held``, the placement of what the
    workers held (a transition to ``now`` follows), or None (they hold ``now``'s units: dealt, or
    a storage restored); ``report``, the master's :class:`~coded_shuffle.engine.rest.HeldStart` or
    :class:`~coded_shuffle.engine.restore.RecoveryReport` (None elsewhere, and without a
    ``--cache-dir``)."""

    job: JobOptions
    session: Session
    now: Epoch
    held: Any = None
    report: HeldStart | RecoveryReport | RecutReport | None = None

    @property
    def first(self) -> tuple[int, Any] | None:
        """``(t, p)``: the first epoch ``t`` comes by a transition from the placement ``p`` of what the
        workers held (before :meth:`arrive`); None when no transition is due."""
        return None if self.held is None else (self.now.t, self.held)

    def arrive(self) -> bool:
        """Collective: the transition from what the workers held to the first epoch, where one is
        due (reported as the job's first row); then, on a worker, its units to its cache file.
        Returns whether it was verified (True where none ran, and on a worker, whose check the
        master's verdict covers)."""
        ok = not isinstance(self.report, RecutReport) or self.report.verified  # every worker's verdict
        if self.held is not None:
            turn = self.session.transition(self.held, self.now.held, epoch=self.now.t)
            ok = all(rep.verified for rep in turn.reports)
            self.held = None
        self.keep(self.now)
        return ok

    def keep(self, epoch: Epoch | None) -> None:
        """With a ``--cache-dir``, on a worker: its units of ``epoch`` to its file (crash-safe)."""
        k, cache, sums = self.session.link.worker, self.session.cache, self.session.checksums
        if self.job.cache_dir is None or k is None or epoch is None:
            return
        assert cache is not None and sums is not None
        table = table_dataset(sums, cache.width, self.session.lengths)
        folder, seed = self.job.cache_dir, self.job.seed
        try:
            save_worker_cache(folder, k, cache.ids, np.asarray(cache.data), table, epoch=epoch.t, seed=seed)
        except OSError as exc:  # this host's folder: one line, and the job ends
            said = f"--cache-dir {folder}: worker {k} cannot write its cache file: {exc.strerror or exc}"
            end_job(PROG, self.session.link.rank, said, self.session.dog.abort)


def deal(session: Session, job: JobOptions, schedule: EpochSchedule, dataset: Dataset) -> Start:
    """Master: each worker's units of the first epoch, dealt from ``dataset`` (cut into the units
    of the job's scheme), or with a ``--cache-dir`` what the workers' files hold and the rest from
    the source (:meth:`~coded_shuffle.engine.session.Session.deal_held`; a storage written at
    another number of workers cut again, :func:`~coded_shuffle.engine.recut_serve.serve_recut_start`)."""
    now = first_epoch(job, schedule)
    scheme = schedule.scheme
    work = scheme.dataset(dataset)
    if job.cache_dir is None:
        session.deal(work, now.held)
        return Start(job, session, now)
    try:
        rep = serve_recut_start(session, dataset, work, scheme.M, now) if scheme.M > 1 else None
    except ValueError as exc:  # files the re-cut refuses: one line
        said = str(exc).removeprefix("Argument 'cache_dir' ")
        end_job(PROG, session.link.rank, f"--cache-dir {job.cache_dir}: {said}", session.dog.abort)
    if rep is not None:  # files of another K: the storage at this K cut from them
        return Start(job, session, replace(now, held=rep.held), None, rep)
    held, report = session.deal_held(work, now.held)
    return Start(job, session, now, None if held is now.held else held, report)


def receive(
    session: Session, job: JobOptions, schedule: EpochSchedule, N: int, B: int, *, variable: bool
) -> Start:
    """Worker: its units of the first epoch (of ``N`` records of ``B`` bytes, cut as the job's
    scheme cuts them) from the master, or with a ``--cache-dir`` from its file, checked, and what
    it lacks from the master (or, a storage, from its peers:
    :meth:`~coded_shuffle.engine.session.Session.receive_held`; cut again from files written at
    another number of workers, :func:`~coded_shuffle.engine.recut_serve.receive_recut_start`)."""
    now = first_epoch(job, schedule)
    scheme = schedule.scheme
    n_units, width = N * scheme.pieces, scheme.piece_bytes(B)
    if job.cache_dir is None:
        session.receive(n_units, width, now.held, variable=variable)
        return Start(job, session, now)
    folder, k = job.cache_dir, session.link.worker
    assert k is not None

    def tell(note: str) -> None:  # a line of what this worker found of its file
        say(f"{PROG}: rank {session.link.rank} (worker {k}): {note}")

    if scheme.M > 1:
        try:
            got = receive_recut_start(session, folder, N=N, B=B, seed=job.seed, scheme=scheme, held=now.held,
                                      now=now)  # fmt: skip
        except ValueError:  # the master says it in one line and ends the job
            time.sleep(session.dog.timeout)
            raise
        if got is not None:  # files of another K: its storage at this K cut from them
            for note in got[1]:
                tell(note)
            return Start(job, session, got[0])

    def read(sums: np.ndarray, lengths: np.ndarray | None) -> Cache | None:
        cache, note = load_worker_cache(folder, k, table_dataset(sums, width, lengths), seed=job.seed)
        if note is not None:
            tell(note)
        return cache

    held = session.receive_held(n_units, width, read, now.held, lengths=True if variable else None)
    return Start(job, session, now, None if held is now.held else held)


def start_dict(report: HeldStart | RecoveryReport | RecutReport) -> dict[str, Any]:
    """How a job started from its workers' cache files, as its JSON line's ``held_start`` takes it:
    ``HeldStart``'s fields (``storage`` 1), or a storage's recovery (``storage`` ``M``, the
    pieces kept, from peers and from the source, with their bytes).

    Examples
    --------
    >>> s = HeldStart(K=2, held_records=9, dropped_records=1, joined=(1,), source_records=1,
    ...               source_bytes=8, bound=1, bound_bytes=8)
    >>> start_dict(s)["source_records"], start_dict(s)["joined"], start_dict(s)["storage"]
    (1, [1], 1)
    """
    if isinstance(report, RecutReport):
        return {"storage": report.M, "recut": True, **report.to_dict()}
    if isinstance(report, HeldStart):
        return {"storage": 1, "K": report.K, "held_records": report.held_records,
                "dropped_records": report.dropped_records, "joined": list(report.joined),
                "source_records": report.source_records, "source_bytes": report.source_bytes,
                "bound": report.bound, "bound_bytes": report.bound_bytes}  # fmt: skip
    return {"storage": report.M, "K": report.K, "kept_pieces": report.kept_pieces,
            "peer_pieces": report.peer_pieces, "peer_bytes": report.peer_bytes,
            "source_pieces": report.source_pieces, "source_bytes": report.source_bytes}  # fmt: skip


def start_line(report: HeldStart | RecoveryReport | RecutReport, cache_dir: str) -> str:
    """The line of the table's header that says how the job started from ``cache_dir``.

    Examples
    --------
    >>> s = HeldStart(K=2, held_records=9, dropped_records=1, joined=(1,), source_records=1,
    ...               source_bytes=8, bound=1, bound_bytes=8)
    >>> start_line(s, "/tmp/c")  # doctest: +NORMALIZE_WHITESPACE
    'start from --cache-dir /tmp/c: 9 records held, 1 dropped, 1 (8 B) sent from the source;
    worker 1 held nothing; bound of the start, the source one more holder: 1 record (8 B)'
    """
    if isinstance(report, RecutReport):
        return (
            f"start from --cache-dir {cache_dir}: the storage of {report.M} batches of K = {report.K} "
            f"cut again at K = {report.K_next}: {report.kept_bytes} B kept, {report.peer_bytes} B from "
            f"peers, {report.source_bytes} B from the source (bounds: {report.download_bound} B to "
            f"receive, {report.source_bound} B from the source)"
        )
    if isinstance(report, RecoveryReport):
        return (
            f"start from --cache-dir {cache_dir}: storage of {report.M} batches restored, "
            f"{report.kept_pieces} pieces kept, {report.peer_pieces} ({report.peer_bytes} B) from peers, "
            f"{report.source_pieces} ({report.source_bytes} B) from the source"
        )
    joined = report.joined
    empty = "" if not joined else (
        f"; worker{'s' if len(joined) > 1 else ''} {', '.join(map(str, joined))} held nothing"
    )  # fmt: skip
    bound = f"{report.bound} record{'s' if report.bound != 1 else ''} ({report.bound_bytes} B)"
    return (
        f"start from --cache-dir {cache_dir}: {report.held_records} records held, {report.dropped_records} "
        f"dropped, {report.source_records} ({report.source_bytes} B) sent from the source{empty}; "
        f"bound of the start, the source one more holder: {bound}"
    )
