"""A job of peers under MPI: every rank is a worker, and only the workers' exchange moves data.

``--mode exchange`` alone runs on ``mpiexec -n K``: there is no master rank. At the first epoch
each rank reads what it holds itself: its rows of the ``.npy`` file (memory-mapped; every rank
must be able to read it) or of the random records drawn from the seed, and the table of every
unit's checksum is gathered from what the ranks read. Afterwards every transition is the
exchange of :class:`~coded_shuffle.engine.schemes.ExchangeScheme` among peers: rank 0 leads the
protocol's control rounds beside its own worker's role (:func:`~coded_shuffle.engine.mpi.lead`),
a damaged unit is taken again from another of its holders, and every worker's holdings are
checked against the table after each transition, as in a job with a master.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..codec import Cache, Dataset, load_dataset, record_checksums
from ..orders import epoch_placement
from ..records import NpyRecords, RecordSource, fixed_record_bytes
from ..transport import ControlLink, MPITransport
from .mpi import Rounds, Watchdog, attend, lead, setup_step
from .mpi_job import (
    _WARM_BYTES,
    _WARM_RECORDS,
    PROG,
    Epochs,
    Results,
    _corrupter,
    _link_counter,
    _maybe_fail,
    _setup,
    job_refusal,
    probe_links,
)  # fmt: skip
from .options import JobOptions
from .protocol import MasterOptions, master_transition, worker_transition
from .schemes import Scheme, scheme_for
from .state import synthetic_dataset

__all__ = ["peers", "peer_transition", "own_units", "checksum_table", "catalog"]


def _records(job: JobOptions) -> tuple[RecordSource, int, int] | str:
    """Every rank's view of the records: ``(source, N, B)``, the records read only when gathered."""
    try:
        if job.data is not None:
            source = NpyRecords(job.data, name="data")
            return source, len(source), fixed_record_bytes(source, "data")
        sizes = job.synthetic()
        if isinstance(sizes, str):
            return sizes
        return NpyRecords(synthetic_dataset(*sizes, seed=job.seed).data), *sizes
    except (OSError, ValueError, MemoryError) as exc:
        return f"--data {job.data}: {exc}" if job.data is not None else str(exc)


def own_units(scheme: Scheme, source: RecordSource, held: Any, worker: int) -> Cache:
    """The units ``worker`` holds under ``held``, cut from its own read of the records ``source``."""
    ids = scheme.held(held, worker)
    C = scheme.pieces
    mine = np.unique(ids // C)
    raw = source.gather(mine)
    local = scheme.dataset(load_dataset(raw, checksums=False))
    pick = np.searchsorted(mine, ids // C) * C + ids % C
    data = np.ascontiguousarray(local.data[pick])
    return Cache(ids=ids, data=data, lengths=None)


def checksum_table(link: ControlLink, cache: Cache, n_units: int) -> np.ndarray:
    """Every unit's checksum, gathered from what the ranks read (collective)."""
    got = link.allgather((cache.ids, record_checksums(cache.data)))
    table = np.zeros(n_units, dtype=np.uint64)
    for ids, sums in got:
        table[ids] = sums
    return table


def catalog(N: int, B: int, checksums: np.ndarray) -> Dataset:
    """The leader's view of the units for the master's role: their count, size and checksums,
    no bytes (the role among peers plans, checks and reports; it never sends a record)."""
    data = np.broadcast_to(np.zeros((1, B), dtype=np.uint8), (N, B))
    return Dataset(data=data, lengths=None, checksums=checksums)


def peer_transition(
    link: ControlLink,
    scheme: Scheme,
    units: Dataset,
    cache: Cache,
    placements: tuple[Any, Any],
    *,
    epoch: int,
    dog: Watchdog,
    opts: MasterOptions,
    tamper: Any = None,
    count_links: bool = False,
    spare: np.ndarray | None = None,
) -> tuple[Any, Any]:
    """One transition among peers: ``(the leader's report or None, this worker's result)``.

    With ``count_links`` every rank counts its interfaces' bytes (``run --count-links``); the
    report's first entries, a master's, are then 0.
    """
    k = link.worker
    assert k is not None
    role = worker_transition(
        link, scheme, k, cache, placements, epoch=epoch, checksums=units.checksums, with_digest=True,
        tamper=tamper, links=_link_counter() if count_links else None, spare=spare,
    )  # fmt: skip
    if not link.is_leader:
        return None, attend(link, role, watchdog=dog)
    master = master_transition(
        Rounds(link), scheme, units, *placements, epoch=epoch, opts=opts,
        links=(lambda: (0, 0)) if count_links else None,
    )  # fmt: skip
    return lead(link, master, role, watchdog=dog)


def _warm_up(link: MPITransport, dog: Watchdog, *, seed: int, mode: str = "exchange") -> float:
    """One transition of ``4 K`` records of 8 bytes among the peers in ``mode``: kernels and links
    warmed (after the round of the start-up step ``"warm-up"``)."""
    import time

    from ..errors import IntegrityError

    tic = time.perf_counter()
    K = link.K
    N = _WARM_RECORDS * K
    scheme = scheme_for(mode, K=K, peers=True)
    ds = synthetic_dataset(N, _WARM_BYTES, seed=seed)
    p_t, p_t1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    assert link.worker is not None
    cache = ds.cache(p_t.batch(link.worker))
    with setup_step(link, dog, "warm-up"):
        pass  # every peer is here
    rep, res = peer_transition(
        link, scheme, catalog(N, _WARM_BYTES, ds.checksums), cache, (p_t, p_t1), epoch=1, dog=dog,
        opts=MasterOptions(),
    )  # fmt: skip
    if not res.verified:
        raise IntegrityError("The warm-up transition was not verified.")
    return time.perf_counter() - tic


def peers(job: JobOptions, link: MPITransport, dog: Watchdog) -> int:
    """Every rank: the job's transitions among peers; the leader writes the results.

    The start-up steps (:data:`~coded_shuffle.engine.mpi_job.STARTUP_STEPS`) are those of a job
    with a master, but for the first batches: each rank reads its own units."""
    k, K = link.worker, link.K
    assert k is not None
    got = _records(job)
    rows, N, B = (None, 0, 0) if isinstance(got, str) else got
    problem = got if isinstance(got, str) else job_refusal(job, K, N, B, peers=True)
    with _setup(job, link, dog, "sizes"):
        bad = [(r, p) for r, p in enumerate(link.allgather(problem)) if p is not None]
    if bad:
        if link.is_leader:
            print(f"{PROG}: error: rank {bad[0][0]}: {bad[0][1]}", file=sys.stderr, flush=True)
        dog.close()
        return 2
    dog.for_records(N, B)
    ep = Epochs(job, N, B, K, peers=True)
    (scheme,) = ep.schemes.values()  # the one scheme of a job of peers, which runs among them
    held = ep.first()
    assert rows is not None  # every rank read the records (a problem returned above)
    cache = own_units(scheme, rows, held, k)
    del rows
    with _setup(job, link, dog, "checksums"):
        table = checksum_table(link, cache, N * scheme.pieces)
    units = catalog(N * scheme.pieces, ep.piece_bytes, table)
    _maybe_fail(job, at="warm-up")
    warm = _warm_up(link, dog, seed=job.seed, mode=scheme.name)
    probe = probe_links(link, job, dog)
    sizes = f"K = {K} peers, N = {N}, record = {B} B"
    results = Results(job, K, sizes, scheme.holding.note(B), warm, probe) if link.is_leader else None
    opts = MasterOptions(
        max_repair_rounds=job.max_repair_rounds, seed=job.seed, records=(N, B),
        network=None if results is None else results.network, measured=True,
    )  # fmt: skip
    all_ok = True
    for t in range(job.start_epoch, job.start_epoch + job.epochs):
        _maybe_fail(job, t + 1)
        nxt = ep.following(held, t + 1)
        corrupt = job.corrupt_worker == k and t == job.start_epoch
        rep, res = peer_transition(
            link, scheme, units, cache, (held, nxt), epoch=t + 1, dog=dog, opts=opts,
            tamper=_corrupter(cache, scheme.held(nxt, k)) if corrupt else None, count_links=job.count_links,
        )  # fmt: skip
        if results is not None:
            all_ok &= rep.verified
            results.row(rep)
        cache, held = res.cache, nxt
    dog.close()
    code = results.close(all_ok, several=False) if results is not None else 0
    return int(link.share(code))
