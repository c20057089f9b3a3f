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

The number of workers stays ``K``: at another ``K`` the pieces are not those of the storage
(their labels are subsets of the other ``K - 1`` workers; :mod:`.elastic`).
"""

from __future__ import annotations

import os

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..orders import OrderSpec
from ..transport import InProcessTransport
from .cache_dir import load_cache_dir, save_cache_dir
from .inprocess import drive
from .protocol import MasterOptions
from .restore import (
    RecoveryReport,
    RestorePlan,
    _checked_have,
    _first_step,
    _last_step,
    _rows_of,
    holders_of,
    restore_plan,
)
from .schedule import EpochSchedule
from .schemes import scheme_for

__all__ = ["RecoveryReport", "storage_restart", "save_storage"]


def _schedule(
    dataset: Dataset, *, K: int, M: int, seed: int, mode: str, order: OrderSpec | None
) -> EpochSchedule:
    scheme = scheme_for(mode, K=K, storage=M, record_bytes=dataset.record_bytes)
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
    mode: str = "coded", order: OrderSpec | None = None,
) -> list[os.PathLike[str]]:  # fmt: skip
    """Write every worker's storage of ``epoch`` (a job of ``K`` workers storing ``M`` batches,
    started at epoch 0) to ``cache_dir``: the files a host keeps, as the in-process engine holds
    them all (its pieces, :func:`~.cache_dir.save_cache_dir`)."""
    K, seed, epoch, mode = _checked(dataset, K=K, seed=seed, epoch=epoch, mode=mode)
    sched = _schedule(dataset, K=K, M=M, seed=seed, mode=mode, order=order)
    *_, now = sched.epochs(start=0, count=epoch + 1)
    work = sched.scheme.dataset(dataset)
    caches = [work.cache(sched.scheme.held(now.held, k)) for k in range(K)]
    return list(save_cache_dir(cache_dir, caches, work, epoch=epoch, seed=seed))


def _restore(
    work: Dataset, holdings: list[Cache | None], expected: list[np.ndarray], holders: np.ndarray, K: int
) -> tuple[list[Cache], RestorePlan]:
    """Every worker's storage ``expected[k]`` by :func:`restore_plan`, in this process."""
    plan = restore_plan(_checked_have(work, holdings, expected), expected, holders, K)
    width = work.record_bytes
    first = [
        _first_step(holdings[k], plan.kept[k], plan.source[k], work.data[plan.source[k]], width)
        for k in range(K)
    ]
    caches = [
        _last_step(
            first[k], plan, k, {h: _rows_of(first[h], plan.sent_by(h, k), width) for h in range(K)}, width
        )
        for k in range(K)
    ]
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
) -> tuple[RecoveryReport, list[Cache]]:
    """Restart a job of ``K`` workers storing ``M`` batches whose storage of ``epoch`` is in
    ``cache_dir``: restore every worker's storage, then deliver epoch ``epoch + 1``.

    A worker's file that is missing, cut short or altered counts as empty; pieces that fail their
    checksum as absent. Returns the report and the workers' storage of epoch ``epoch + 1``.

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
    sched = _schedule(dataset, K=K, M=M, seed=seed, mode=mode, order=order)
    scheme = sched.scheme
    *_, now, nxt = sched.epochs(start=0, count=epoch + 2)
    work = scheme.dataset(dataset)
    loaded, notes = load_cache_dir(cache_dir, work, K=K, seed=seed, epoch=epoch)
    holdings = list(loaded)
    expected = [scheme.held(now.held, k) for k in range(K)]
    caches, plan = _restore(work, holdings, expected, holders_of(scheme, now.held), K)
    kept, peers, source = plan.counts()
    for k, c in enumerate(caches):  # every piece restored, checked before it is used
        if not np.array_equal(c.checksums(), work.checksums[c.ids]):
            raise IntegrityError(f"Worker {k}: a restored piece fails its checksum.")  # pragma: no cover
    opts = MasterOptions(strategy=strategy, seed=seed, records=(dataset.N, dataset.record_bytes))
    rep, new = drive(
        InProcessTransport(K), scheme, work, caches, (now.held, nxt.held), epoch=nxt.t, opts=opts
    )
    width = work.record_bytes
    report = RecoveryReport(
        K=K, M=scheme.M, kept_pieces=kept, peer_pieces=peers, peer_bytes=peers * width,
        source_pieces=source, source_bytes=source * width, notes=tuple(notes), transition=rep,
    )  # fmt: skip
    return report, new
