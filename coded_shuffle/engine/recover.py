"""A restart with a storage of ``M > 1`` batches: every worker's storage back from its file, from
its peers' storage, or from the source, then the next transition as usual.

With ``M = 1 + t`` batches a worker, every piece of every record is held by ``t + 1`` workers
(:mod:`coded_shuffle.storage`): a worker that lost its storage (its host went away and came
back empty, its file was cut short or altered) can have every piece of it again from the other
holders, and nothing from the source. :func:`storage_restart` reads what each worker's file still
holds (:func:`~.cache_dir.load_cache_dir`, every piece checked against its load-time checksum),
puts every piece a worker lacks back from another holder that has it (the least busy one), or
from the source when no holder has it, checks every piece restored, and then runs the
transition to the next epoch on the storage as it was: its plan and its report are those of a job
that never stopped. The report counts the pieces and bytes from peers and from the source.

The number of workers stays ``K``: at another ``K`` the pieces are not those of the storage
(their labels are subsets of the other ``K - 1`` workers; :mod:`.elastic`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..orders import OrderSpec
from ..transport import InProcessTransport
from .cache_dir import load_cache_dir, save_cache_dir
from .inprocess import drive
from .protocol import MasterOptions
from .report import TransitionReport
from .schedule import EpochSchedule
from .schemes import Scheme, scheme_for

__all__ = ["RecoveryReport", "RestorePlan", "restore_plan", "storage_restart", "save_storage", "holders_of"]


@dataclass(frozen=True)
class RecoveryReport:
    """A restart's recovery of every worker's storage, and the transition that followed.

    Attributes
    ----------
    K, M : int
        Workers, and batches each stores.
    kept_pieces : int
        Pieces the workers' files still held, checked.
    peer_pieces, peer_bytes : int
        Pieces (and bytes) a worker had again from another holder's storage.
    source_pieces, source_bytes : int
        Pieces (and bytes) no worker held any more, read from the source.
    notes : tuple of str
        A line for every file treated as absent or with pieces dropped.
    transition : TransitionReport
        The transition to the next epoch, from the storage restored.
    """

    K: int
    M: int
    kept_pieces: int
    peer_pieces: int
    peer_bytes: int
    source_pieces: int
    source_bytes: int
    notes: tuple[str, ...]
    transition: TransitionReport

    @property
    def verified(self) -> bool:
        """Every restored piece checked and the transition's verdict."""
        return bool(self.transition.verified)


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


@dataclass(frozen=True)
class RestorePlan:
    """How every worker's storage ``expected[k]`` comes back, in two steps.

    First the source sends worker ``k`` the pieces ``source[k]`` (each a piece no worker held:
    sent once, to the first worker that stores it); then the workers send each other the pieces
    ``peers[k]``, piece ``peers[k][i]`` from worker ``senders[k][i]``, which held it from the start
    or has it from the source. ``kept[k]``: the pieces worker ``k`` still held, checked.
    """

    expected: tuple[np.ndarray, ...]
    kept: tuple[np.ndarray, ...]
    source: tuple[np.ndarray, ...]
    peers: tuple[np.ndarray, ...]
    senders: tuple[np.ndarray, ...]

    def counts(self) -> tuple[int, int, int]:
        """Pieces kept, had from peers and from the source, over every worker."""
        return tuple(sum(int(a.size) for a in part) for part in (self.kept, self.peers, self.source))  # type: ignore[return-value]

    def sent_by(self, h: int, j: int) -> np.ndarray:
        """The pieces worker ``h`` sends worker ``j``, in the order of ``peers[j]``."""
        return self.peers[j][self.senders[j] == h]


def restore_plan(
    have: list[np.ndarray], expected: list[np.ndarray], holders: np.ndarray, K: int
) -> RestorePlan:
    """The plan that gives every worker ``k`` its storage ``expected[k]`` back from ``have`` (the
    pieces each still holds, checked): its own, then each piece it lacks from another holder that
    has it (:func:`_senders`: the holders share the work), or from the source when none has it,
    once: a later worker that stores it too has it from the first.

    Examples
    --------
    >>> exp = [np.array([0, 1]), np.array([0, 1])]  # both workers store pieces 0 and 1
    >>> plan = restore_plan([np.array([0, 1]), np.empty(0, np.int64)], exp, np.array([3, 3]), 2)
    >>> plan.counts(), plan.sent_by(0, 1).tolist()
    ((2, 2, 0), [0, 1])
    """
    units = max((int(e.max()) + 1 for e in expected if e.size), default=0)
    first = np.full(units, -1, dtype=np.int64)  # the worker that has a piece from the source
    kept, source, peers, senders = [], [], [], []
    for k in range(K):
        need = np.asarray(expected[k], dtype=np.int64)
        own = np.isin(need, have[k])
        lack = need[~own]
        sender = np.asarray(_senders(lack, holders, have, k, K), dtype=np.int64)
        none = np.flatnonzero(sender < 0)
        sender[none] = first[lack[none]]
        first[lack[none][sender[none] < 0]] = k
        kept.append(need[own])
        source.append(lack[sender < 0])
        peers.append(lack[sender >= 0])
        senders.append(sender[sender >= 0])
    return RestorePlan(tuple(expected), tuple(kept), tuple(source), tuple(peers), tuple(senders))


def _checked_have(
    work: Dataset, holdings: list[Cache | None], expected: list[np.ndarray]
) -> list[np.ndarray]:
    """The pieces of ``expected[k]`` that worker ``k``'s cache holds with their load-time checksum."""
    have = []
    for k, c in enumerate(holdings):
        ids = np.empty(0, np.int64) if c is None else np.asarray(c.ids, dtype=np.int64)
        ok = np.zeros(ids.size, dtype=bool)
        if ids.size:
            ok = c.checksums() == work.checksums[ids]  # type: ignore[union-attr]
        have.append(np.intersect1d(ids[ok], expected[k]))
    return have


def _rows_of(cache: Cache | None, ids: np.ndarray, width: int) -> np.ndarray:
    """The rows of ``ids`` from ``cache`` (each held)."""
    if not ids.size:
        return np.empty((0, width), dtype=np.uint8)
    assert cache is not None
    return np.asarray(cache.data)[cache.rows(ids)]


def _first_step(
    own: Cache | None, kept: np.ndarray, source: np.ndarray, rows: np.ndarray, width: int
) -> Cache:
    """What a worker holds after the source's step: the pieces ``kept`` of ``own`` and those of
    ``source`` (their ``rows``), by increasing id."""
    ids = np.concatenate([kept, source])
    data = np.concatenate([_rows_of(own, kept, width), rows.reshape(-1, width)])
    order = np.argsort(ids, kind="stable")
    return Cache(ids=ids[order], data=data[order], lengths=None)


def _last_step(first: Cache, plan: RestorePlan, k: int, got: dict[int, np.ndarray], width: int) -> Cache:
    """Worker ``k``'s storage, ``plan.expected[k]`` in order: from ``first`` (its pieces after the
    source's step) and ``got[h]`` (the rows worker ``h`` sent it, in the plan's order)."""
    need = plan.expected[k]
    data = np.empty((need.size, width), dtype=np.uint8)
    mine = first.rows(need)
    data[mine >= 0] = np.asarray(first.data)[mine[mine >= 0]]
    for h, rows in got.items():
        data[np.searchsorted(need, plan.sent_by(h, k))] = rows.reshape(-1, width)
    return Cache(ids=need.copy(), data=data, lengths=None)


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


def _senders(pieces: np.ndarray, holders: np.ndarray, have: list[np.ndarray], k: int, K: int) -> np.ndarray:
    """For each of ``pieces`` worker ``k`` lacks, another holder that has it (the ``i``-th piece
    from the first such holder after worker ``i mod K``, so that the holders share the work), or
    ``-1`` when none has it."""
    mask = holders[pieces].astype(np.uint64)
    has = np.zeros((pieces.size, K), dtype=bool)
    for h in range(K):
        if h != k:
            has[:, h] = ((mask >> np.uint64(h)) & np.uint64(1)).astype(bool) & np.isin(pieces, have[h])
    turn = (np.arange(K)[None, :] - (np.arange(pieces.size) % K)[:, None]) % K
    key = np.where(has, turn, K)
    first = np.argmin(key, axis=1)
    return np.where(key.min(axis=1, initial=K) < K, first, -1) if pieces.size else np.empty(0, np.int64)


def holders_of(scheme: Scheme, held: Any) -> np.ndarray:
    """Each unit's holders under ``held`` as a bitmask (one word a unit): a storage's holder sets,
    or, one batch a worker, its one holder."""
    if scheme.M > 1:
        return np.asarray(held.holders).reshape(-1)
    return np.left_shift(np.uint64(1), np.asarray(held.owner, dtype=np.uint64))


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
