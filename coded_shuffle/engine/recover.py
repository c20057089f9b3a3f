"""A restart with a storage of ``M > 1`` batches: every worker's storage back from its file, from
its peers' storage, or from the source, then the next transition as usual.

With ``M = 1 + t`` batches a worker, every piece of every record is held by ``t + 1`` workers
(:mod:`coded_shuffle.storage`): a worker that lost its storage (its host went away and came
back empty, its file was cut short or altered) can have every piece of it again from the other
holders, and nothing from the source. :func:`storage_restart` reads what each worker's file still
holds (:func:`~.cache_dir.load_cache_dir`, every piece checked against its load-time checksum),
puts every piece a worker lacks back from another holder that has it, or from the source when
no holder has it (:func:`~.restore.restore_plan`, the plan every driver runs), checks every piece
restored, and then runs the transition to the next epoch on the storage as it was: its plan and
its report are those of a job that never stopped. The report counts the pieces and bytes from
peers and from the source.

:func:`storage_restart` keeps the number of workers: at another ``K`` the pieces are not those
of the storage (their labels are subsets of the other ``K - 1`` workers; :mod:`.elastic`). A job
relaunched on another number of workers, the survivors of a lost host say, starts instead from
the storage at ``K'`` of the next epoch, cut again from the bytes the files still hold
(:func:`recut_restart`, :func:`~.recut.recut_storage`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..network import Network
from ..orders import OrderSpec, order_placement
from ..transport import InProcessTransport
from .cache_dir import load_cache_dir, save_cache_dir
from .inprocess import drive
from .protocol import MasterOptions
from .recut import RecutReport, _storage, recut_storage
from .restore import (
    RecoveryReport,
    RestorePlan,
    _checked_have,
    _first_step,
    _last_step,
    _rows_of,
    holders_of,
    recovery_report,
    restore_plan,
)
from .schedule import EpochSchedule
from .schemes import scheme_for

__all__ = ["RecoveryReport", "storage_restart", "save_storage", "recut_restart"]


def _schedule(
    dataset: Dataset, *, K: int, M: int, seed: int, mode: str, order: OrderSpec | None,
    network: Network | None = None,
) -> EpochSchedule:  # fmt: skip
    """The job's epochs; ``network``: its racks place the exchange's pieces across them (records of
    many sizes: each cut into pieces by its own length)."""
    scheme = scheme_for(mode, K=K, storage=M, record_bytes=dataset.record_bytes, network=network,
                        sizes=dataset.lengths)  # fmt: skip
    return EpochSchedule(N=dataset.N, K=K, seed=seed, spec=order or OrderSpec(), scheme=scheme)


def _checked(dataset: Dataset, *, K: int, seed: int, epoch: int, mode: str) -> tuple[int, int, int, str]:
    """The arguments of :func:`save_storage` and :func:`storage_restart`, checked at the boundary."""
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    K = check_int(K, "K", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    epoch = check_int(epoch, "epoch", minimum=0)
    return K, seed, epoch, check_choice(mode, "mode", ("coded", "exchange"))


def save_storage(
    cache_dir: str | os.PathLike[str], dataset: Dataset, *, K: int, M: int, seed: int, epoch: int,
    mode: str = "coded", order: OrderSpec | None = None, network: Network | None = None,
) -> list[os.PathLike[str]]:  # fmt: skip
    """Write every worker's storage of ``epoch`` (a job of ``K`` workers storing ``M`` batches,
    started at epoch 0) to ``cache_dir``: the files a host keeps, as the in-process engine holds
    them all (its pieces, :func:`~.cache_dir.save_cache_dir`). ``network``: the job's, whose racks
    place the exchange's pieces across them (``engine.run(..., network=)``)."""
    K, seed, epoch, mode = _checked(dataset, K=K, seed=seed, epoch=epoch, mode=mode)
    sched = _schedule(dataset, K=K, M=M, seed=seed, mode=mode, order=order, network=network)
    *_, now = sched.epochs(start=0, count=epoch + 1)
    work = sched.scheme.dataset(dataset)
    caches = [work.cache(sched.scheme.held(now.held, k)) for k in range(K)]
    return list(save_cache_dir(cache_dir, caches, work, epoch=epoch, seed=seed))


def _restore(
    work: Dataset, holdings: list[Cache | None], expected: list[np.ndarray], holders: np.ndarray, K: int,
    racks: tuple[int, ...] | None = None,
) -> tuple[list[Cache], RestorePlan]:  # fmt: skip
    """Every worker's storage ``expected[k]`` by :func:`restore_plan`, in this process."""
    plan = restore_plan(_checked_have(work, holdings, expected), expected, holders, K, racks)
    width, lengths = work.record_bytes, work.lengths
    first = [
        _first_step(holdings[k], plan.kept[k], plan.source[k], work.data[plan.source[k]], width, lengths)
        for k in range(K)
    ]
    caches = [
        _last_step(
            first[k], plan, k, {h: _rows_of(first[h], plan.sent_by(h, k), width) for h in range(K)}, width,
            lengths,
        )
        for k in range(K)
    ]  # fmt: skip
    return caches, plan


def storage_restart(
    dataset: Dataset,
    cache_dir: str | os.PathLike[str],
    *,
    K: int,
    M: int,
    seed: int,
    epoch: int,
    mode: str = "coded",
    order: OrderSpec | None = None,
    strategy: str = "greedy",
    network: Network | None = None,
) -> tuple[RecoveryReport, list[Cache]]:
    """Restart a job of ``K`` workers storing ``M`` batches whose storage of ``epoch`` is in
    ``cache_dir``: restore every worker's storage, then deliver epoch ``epoch + 1``.

    A worker's file that is missing, cut short or altered counts as empty; pieces that fail their
    checksum as absent. Returns the report and the workers' storage of epoch ``epoch + 1``.
    ``network``: the job's; with racks, the exchange's pieces placed across them as the job placed
    them, and a piece a worker lacks taken from a holder in its own rack where one has it.

    Examples
    --------
    A host is lost (worker 2's file gone); with ``M = 2`` its peers hold every piece of it:

    >>> import tempfile, os
    >>> from coded_shuffle.engine import synthetic_dataset
    >>> ds = synthetic_dataset(60, 2048, seed=0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_storage(d, ds, K=3, M=2, seed=1, epoch=2)
    ...     os.remove(os.path.join(d, "worker-2.cache"))
    ...     rep, caches = storage_restart(ds, d, K=3, M=2, seed=1, epoch=2)
    >>> rep.verified, rep.source_pieces, rep.peer_pieces > 0
    (True, 0, True)
    """
    K, seed, epoch, mode = _checked(dataset, K=K, seed=seed, epoch=epoch, mode=mode)
    sched = _schedule(dataset, K=K, M=M, seed=seed, mode=mode, order=order, network=network)
    scheme = sched.scheme
    *_, now, nxt = sched.epochs(start=0, count=epoch + 2)
    work = scheme.dataset(dataset)
    loaded, notes = load_cache_dir(cache_dir, work, K=K, seed=seed, epoch=epoch)
    holdings = list(loaded)
    expected = [scheme.held(now.held, k) for k in range(K)]
    racks = getattr(scheme.holding, "racks", None)
    caches, plan = _restore(work, holdings, expected, holders_of(scheme, now.held), K, racks)
    for k, c in enumerate(caches):  # every piece restored, checked before it is used
        if not np.array_equal(c.checksums(), work.checksums[c.ids]):
            raise IntegrityError(f"Worker {k}: a restored piece fails its checksum.")  # pragma: no cover
    opts = MasterOptions(strategy=strategy, seed=seed, records=(dataset.N, dataset.record_bytes))
    rep, new = drive(
        InProcessTransport(K), scheme, work, caches, (now.held, nxt.held), epoch=nxt.t, opts=opts
    )
    return recovery_report(plan, work, K, scheme.M, tuple(notes), rep), new


def recut_restart(
    dataset: Dataset,
    cache_dir: str | os.PathLike[str],
    *,
    K: int,
    K_next: int,
    M: int,
    seed: int,
    epoch: int,
    workers: Sequence[int | None] | None = None,
    order: OrderSpec | None = None,
) -> tuple[RecutReport, list[Cache], list[str]]:
    """Relaunch on ``K_next`` workers a job of ``K`` workers storing ``M`` batches whose storage of
    ``epoch`` is in ``cache_dir``: every worker's storage of epoch ``epoch + 1`` at ``K_next``, cut
    again from what the files still hold (:func:`~.recut.recut_storage`).

    ``workers[j]``: the worker of the ``K`` whose file worker ``j`` of the ``K_next`` reads (None:
    none, it starts empty); by default the workers whose files are whole, in order, the first
    ``K_next`` of them (the survivors of a lost host). Returns the report, the new storages (the
    job goes on from them: the report's ``held``, the storage at ``K_next`` of epoch ``epoch + 1``)
    and a line for every file treated as absent or with pieces dropped. Records of many sizes
    (``dataset.lengths``): each record's pieces are its own bytes ``[p L // P, (p + 1) L // P)`` at
    both ``K`` and ``K_next``, the new ones checked at their lengths.

    Examples
    --------
    A host is lost (worker 2's file gone) and the job is relaunched on the three survivors; with
    ``M = 2`` every byte is held by a survivor, nothing comes from the source:

    >>> import tempfile, os
    >>> from coded_shuffle.engine import synthetic_dataset
    >>> ds = synthetic_dataset(48, 3072, seed=0)
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_storage(d, ds, K=4, M=2, seed=1, epoch=2)
    ...     os.remove(os.path.join(d, "worker-2.cache"))
    ...     rep, caches, notes = recut_restart(ds, d, K=4, K_next=3, M=2, seed=1, epoch=2)
    >>> rep.verified, rep.source_bytes, rep.peer_bytes == rep.download_bound, notes
    (True, 0, True, [])
    """
    K, seed, epoch, _ = _checked(dataset, K=K, seed=seed, epoch=epoch, mode="coded")
    K_next = check_int(K_next, "K_next", minimum=1)
    before = _storage(dataset, K, check_int(M, "M", minimum=2))
    loaded, notes = load_cache_dir(cache_dir, before.dataset(dataset), K=K, seed=seed, epoch=epoch)
    if workers is None:
        alive = [k for k, c in enumerate(loaded) if c is not None][:K_next]
        workers = alive + [None] * (K_next - len(alive))
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence) or len(workers) != K_next:
        raise ValueError(
            f"Argument 'workers' must name a worker of the K = {K} (or None) for each of the {K_next}."
        )
    picked = [None if k is None else check_int(k, "workers", minimum=0) for k in workers]
    if any(k is not None and k >= K for k in picked):
        top = max(k or 0 for k in picked)
        raise ValueError(f"Argument 'workers' must name workers below K = {K}, not {top}.")
    holdings = [None if k is None else loaded[k] for k in picked]
    nxt = order_placement(dataset.N, K_next, seed=seed, epoch=epoch + 1, spec=order or OrderSpec())
    rep, caches = recut_storage(dataset, holdings, nxt, K=K, M=M)
    return rep, caches, notes
