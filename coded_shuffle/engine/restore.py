"""The restore of every worker's storage of ``M > 1`` batches: one plan, whatever the driver.

A worker's storage (:mod:`coded_shuffle.storage`: with ``M = 1 + t`` batches every piece is held
by ``t + 1`` workers) comes back from what it still holds, checked, from another holder that has
a piece it lacks, or from the source when no worker has it (:func:`restore_plan`). The plan runs
in two steps: the source sends the pieces no worker held (each once, to the first worker that
stores it), then the workers send each other the rest. In one process
:func:`~coded_shuffle.engine.recover.storage_restart` runs it; across processes
:func:`serve_storage` (the master) and :func:`receive_storage` (each worker), where every rank
makes the same plan from the pieces every worker posted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..transport import ControlLink
from .mpi import Watchdog, posts_round, setup_step
from .report import TransitionReport
from .rest import _at, _bytes_of, _checked_rows
from .schemes import Scheme

__all__ = [
    "RecoveryReport", "RestorePlan", "restore_plan", "holders_of", "serve_storage", "receive_storage",
    "recovery_report",
]  # fmt: skip


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
        Pieces (and bytes) a worker had again from another holder's storage (pieces of records
        of many sizes at their own lengths).
    source_pieces, source_bytes : int
        Pieces (and bytes) no worker held any more, read from the source (as ``peer_bytes``).
    notes : tuple of str
        A line for every file treated as absent or with pieces dropped (in one process; across
        processes each worker says its own, ``MPILoader.cache_notes``, and these are empty).
    transition : TransitionReport or None
        The transition to the next epoch, from the storage restored (None when the job starts at
        the storage restored, or until that transition has run: :func:`serve_storage`).
    """

    K: int
    M: int
    kept_pieces: int
    peer_pieces: int
    peer_bytes: int
    source_pieces: int
    source_bytes: int
    notes: tuple[str, ...]
    transition: TransitionReport | None

    @property
    def verified(self) -> bool:
        """Every restored piece checked and the transition's verdict (if any)."""
        return self.transition is None or bool(self.transition.verified)


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
    have: list[np.ndarray], expected: list[np.ndarray], holders: np.ndarray, K: int,
    racks: tuple[int, ...] | None = None,
) -> RestorePlan:  # fmt: skip
    """The plan that gives every worker ``k`` its storage ``expected[k]`` back from ``have`` (the
    pieces each still holds, checked): its own, then each piece it lacks from another holder that
    has it (:func:`_senders`: the holders share the work; with ``racks``, the workers of each
    rack in turn, a holder in the worker's own rack first), or from the source when none has it,
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
        sender = np.asarray(_senders(lack, holders, have, k, K, racks), dtype=np.int64)
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
    own: Cache | None, kept: np.ndarray, source: np.ndarray, rows: np.ndarray, width: int,
    lengths: np.ndarray | None = None,
) -> Cache:  # fmt: skip
    """What a worker holds after the source's step: the pieces ``kept`` of ``own`` and those of
    ``source`` (their ``rows``), by increasing id (pieces of many sizes: with their ``lengths``,
    the table of every piece's)."""
    ids = np.concatenate([kept, source])
    data = np.concatenate([_rows_of(own, kept, width), rows.reshape(-1, width)])
    order = np.argsort(ids, kind="stable")
    return Cache(ids=ids[order], data=data[order], lengths=_at(lengths, ids[order]))


def _last_step(
    first: Cache, plan: RestorePlan, k: int, got: dict[int, np.ndarray], width: int,
    lengths: np.ndarray | None = None,
) -> Cache:  # fmt: skip
    """Worker ``k``'s storage, ``plan.expected[k]`` in order: from ``first`` (its pieces after the
    source's step) and ``got[h]`` (the rows worker ``h`` sent it, in the plan's order); pieces of
    many sizes with their ``lengths`` (the table of every piece's)."""
    need = plan.expected[k]
    data = np.empty((need.size, width), dtype=np.uint8)
    mine = first.rows(need)
    data[mine >= 0] = np.asarray(first.data)[mine[mine >= 0]]
    for h, rows in got.items():
        data[np.searchsorted(need, plan.sent_by(h, k))] = rows.reshape(-1, width)
    return Cache(ids=need.copy(), data=data, lengths=_at(lengths, need))


def _senders(
    pieces: np.ndarray, holders: np.ndarray, have: list[np.ndarray], k: int, K: int,
    racks: tuple[int, ...] | None = None,
) -> np.ndarray:  # fmt: skip
    """For each of ``pieces`` worker ``k`` lacks, another holder that has it (the ``i``-th piece
    from the first such holder after worker ``i mod K``, so that the holders share the work; with
    ``racks``, the hosts of each rack, a holder in ``k``'s rack before any other), or ``-1`` when
    none has it."""
    mask = holders[pieces].astype(np.uint64)
    has = np.zeros((pieces.size, K), dtype=bool)
    for h in range(K):
        if h != k:
            has[:, h] = ((mask >> np.uint64(h)) & np.uint64(1)).astype(bool) & np.isin(pieces, have[h])
    turn = (np.arange(K)[None, :] - (np.arange(pieces.size) % K)[:, None]) % K
    if racks is not None:  # another rack's holders after every one of this rack's
        rack = np.repeat(np.arange(len(racks)), racks)
        turn = turn + K * (rack[None, :] != rack[k])
    if not pieces.size:
        return np.empty(0, np.int64)
    key = np.where(has, turn, 2 * K)  # 2 K: no holder has it
    return np.where(key.min(axis=1) < 2 * K, np.argmin(key, axis=1), -1)


def holders_of(scheme: Scheme, held: Any) -> np.ndarray:
    """Each unit's holders under ``held`` as a bitmask (one word a unit): a storage's holder sets,
    or, one batch a worker, its one holder."""
    if scheme.M > 1:
        return np.asarray(held.holders).reshape(-1)
    return np.left_shift(np.uint64(1), np.asarray(held.owner, dtype=np.uint64))


def _plan_of(scheme: Scheme, held: Any, posted: list[np.ndarray], K: int) -> RestorePlan:
    """:func:`restore_plan` of the storage ``held`` from the pieces each worker ``posted``: every
    rank makes the same plan from the same posts."""
    expected = [scheme.held(held, k) for k in range(K)]
    have = [np.intersect1d(np.asarray(p, dtype=np.int64), e) for p, e in zip(posted, expected, strict=True)]
    return restore_plan(have, expected, holders_of(scheme, held), K, getattr(scheme.holding, "racks", None))


def serve_storage(
    link: ControlLink, watchdog: Watchdog, work: Dataset, scheme: Scheme, held: Any
) -> RecoveryReport:
    """Master, collective with :func:`receive_storage` on every worker: every worker's storage
    ``held`` (the pieces of ``work``, the units of ``scheme``) back from what the workers still
    hold, by :func:`restore_plan`: the master sends each worker the pieces no worker held, then the
    workers send each other the rest of what each lacks (the master takes no part).

    Returns the counts (:class:`RecoveryReport`, its transition None until the loader runs one).
    """
    posts = posts_round(link, watchdog, None, "rest: holdings")
    posted = [np.asarray(p[0], dtype=np.int64) for p in posts]
    with setup_step(link, watchdog, "storage: pieces"):
        link.share(posted)
        plan = _plan_of(scheme, held, posted, link.K)
        for k in range(link.K):
            link.send_rows(k, np.ascontiguousarray(work.data[plan.source[k]]))
    return recovery_report(plan, work, link.K, scheme.M)


def recovery_report(
    plan: RestorePlan, work: Dataset, K: int, M: int, notes: tuple[str, ...] = (),
    transition: TransitionReport | None = None,
) -> RecoveryReport:  # fmt: skip
    """The counts of ``plan`` (pieces, and their bytes: each piece's own length where the pieces of
    ``work`` differ in size)."""
    kept, peers, source = plan.counts()
    empty = np.empty(0, np.int64)
    peer_bytes = _bytes_of(work, np.concatenate([empty, *plan.peers]))
    source_bytes = _bytes_of(work, np.concatenate([empty, *plan.source]))
    return RecoveryReport(
        K=K, M=M, kept_pieces=kept, peer_pieces=peers, peer_bytes=peer_bytes, source_pieces=source,
        source_bytes=source_bytes, notes=notes, transition=transition,
    )  # fmt: skip


def receive_storage(
    link: ControlLink, watchdog: Watchdog, scheme: Scheme, mine: Cache | None, checksums: np.ndarray,
    width: int, held: Any, lengths: np.ndarray | None = None,
) -> Cache:  # fmt: skip
    """Worker, collective with :func:`serve_storage`: post the pieces of ``mine`` (what it holds)
    that pass their checksum in ``checksums`` (the master's table; pieces of many sizes at their
    ``lengths``, the table of every piece's), receive from the master the pieces no worker held,
    send its peers what the plan says and receive what it lacks from them. Returns its storage
    under ``held``, every piece checked."""
    from ..codec import record_checksums

    k = link.worker
    assert k is not None
    rows, ids, _ = _checked_rows(mine, checksums, lengths)
    posts_round(link, watchdog, (ids,), "rest: holdings")
    own = None
    if mine is not None:
        own = Cache(ids=ids, data=np.asarray(mine.data)[rows], lengths=_at(lengths, ids))
    with setup_step(link, watchdog, "storage: pieces"):
        plan = _plan_of(scheme, held, list(link.share()), link.K)
        got = link.receive_rows(np.empty((plan.source[k].size, width), dtype=np.uint8))
        first = _first_step(own, plan.kept[k], plan.source[k], got, width, lengths)
        frames = {j: [_rows_of(first, plan.sent_by(k, j), width).reshape(-1)] for j in range(link.K)
                  if j != k and plan.sent_by(k, j).size}  # fmt: skip
        link.offer(k, frames)
        received = link.collect(k)
    senders = [h for h in range(link.K) if h != k and plan.sent_by(h, k).size]
    if len(received) != len(senders):  # pragma: no cover - a peer that did not follow the plan
        raise IntegrityError(
            f"Worker {k}: {len(received)} frames of pieces from its peers, not {len(senders)}."
        )
    cache = _last_step(first, plan, k, dict(zip(senders, received, strict=True)), width, lengths)
    if not np.array_equal(record_checksums(cache.data, cache.lengths), np.asarray(checksums)[cache.ids]):
        raise IntegrityError(f"Worker {k}: the storage restored does not match the master's checksums.")
    return cache
