"""A job of peers under MPI: every rank is a worker, and only the workers' exchange moves data.

``--mode exchange`` alone runs on ``mpiexec -n K``: there is no master rank. At the first epoch
each rank reads what it holds itself: its records of ``--data``, opened through its format's
record source on every rank (a ``.npy`` file memory-mapped; every rank must be able to read it),
or of the random records drawn from the seed, and the table of every
unit's checksum is gathered from what the ranks read. Afterwards every transition is the
exchange of :class:`~coded_shuffle.engine.schemes.ExchangeScheme` among peers: rank 0 leads the
protocol's control rounds beside its own worker's role (the session's leader,
:class:`~coded_shuffle.engine.session.Session`), a damaged unit is taken again from another of
its holders, and every worker's holdings are checked against the table after each transition,
as in a job with a master.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._progress import say
from ...engine.mpi import Watchdog
from ...engine.protocol import MasterOptions
from ...engine.schemes import scheme_for
from ...engine.session import warm_up
from ...engine.state import synthetic_dataset
from ...records import NpyRecords, RecordSource
from ...transport import MPITransport
from ..sized import ByteBound, StorageByteBound
from .mpi_job import PROG, Epochs, Results, _hooks, job_refusal, probe_links, records_text
from .options import JobOptions

__all__ = ["peers"]


def _records(job: JobOptions) -> tuple[RecordSource, int, int] | str:
    """Every rank's view of the records: ``(source, N, width)``, the records read only when
    gathered (``--data`` opened through its format's record source, each rank its own)."""
    try:
        if job.data is not None:
            source = job.records()
            return source, len(source), int(source.width)
        sizes = job.synthetic()
        if isinstance(sizes, str):
            return sizes
        return NpyRecords(synthetic_dataset(*sizes, seed=job.seed).data), *sizes
    except (OSError, ValueError, MemoryError, ImportError, TypeError) as exc:
        said = " ".join(str(exc).split())
        return f"--data {job.data}: {said}" if job.data is not None else said


def peers(job: JobOptions, link: MPITransport, dog: Watchdog) -> int:
    """Every rank: the job's transitions among peers; the leader writes the results.

    The start-up steps (:data:`~coded_shuffle.cli.runner.mpi_job.STARTUP_STEPS`) are those of a job
    with a master, but for the first batches: each rank reads its own units."""
    K = link.K
    got = _records(job)
    rows, N, B = (None, 0, 0) if isinstance(got, str) else got
    sizes = None if rows is None or rows.record_bytes is not None else np.asarray(rows.sizes)
    variable = sizes is not None
    problem = got if isinstance(got, str) else job_refusal(job, K, N, B, peers=True, variable=variable)
    session = _hooks(job, link, dog)
    with session.setup("sizes"):
        bad = [(r, p) for r, p in enumerate(link.allgather(problem)) if p is not None]
    if bad:
        if link.is_leader:
            say(f"{PROG}: error: rank {bad[0][0]}: {bad[0][1]}")
        dog.close()
        return 2
    dog.for_records(N, B)
    ep = Epochs(job, N, B, K, peers=True, sizes=sizes)  # a storage cuts each record by its own length
    (scheme,) = ep.schemes.values()  # the one scheme of a job of peers, which runs among them
    session.schemes = (scheme,)
    now = ep.schedule.epoch(job.start_epoch)
    assert rows is not None  # every rank read the records (a problem returned above)
    session.gather(rows, now.held, N * scheme.pieces, ep.piece_bytes)
    del rows
    peer = scheme_for(scheme.name, K=K, peers=True)
    warm = warm_up(link, dog, (peer,), seed=job.seed, at=session.setup_hook)
    probe = probe_links(session, job)
    results = None
    if link.is_leader:
        bound: ByteBound | StorageByteBound | None = None  # in bytes, of the pieces with a storage
        if sizes is not None:
            one = job.storage == 1
            bound = ByteBound(ep.schedule, sizes) if one else StorageByteBound(ep.schedule, start=now)
        text = records_text(K, N, B, sizes, peers=True)
        results = Results(job, K, text, scheme.holding.note(B), warm, probe, bound)
    session.opts = MasterOptions(
        max_repair_rounds=job.max_repair_rounds, seed=job.seed, records=(N, B),
        network=None if results is None else results.network, measured=True,
    )  # fmt: skip
    if results is not None:
        session.extras = dataclasses.replace(session.extras, report=results.row)
    all_ok = True
    for turn in session.epochs(ep.schedule, now, job.start_epoch + job.epochs):
        all_ok &= all(rep.verified for rep in turn.reports)
    dog.close()
    code = results.close(all_ok, several=False) if results is not None else 0
    return int(session.end(code))
