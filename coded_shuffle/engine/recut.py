"""A change of ``K`` with a storage of ``M > 1`` batches: the storage at ``K'`` cut again from the
bytes the workers still hold.

Notation
--------
=============  =============================================================================
``K``, ``K'``  workers before and after the change (``K'`` numbered ``0 .. K' - 1``)
``M = 1 + t``  batches each worker stores, the same before and after
``P``, ``P'``  pieces a record at ``K`` and at ``K'`` (:func:`~.state.storage_pieces`:
               ``C(K - 1, t)`` or fewer for small records)
segment        a run of a record's bytes cut at both: inside one piece at ``K`` and one at ``K'``
=============  =============================================================================

The pieces of a storage at ``K`` are labelled by ``t``-subsets of the other ``K - 1`` workers, and
their number ``P`` follows ``K``: at ``K' != K`` no piece of it is a piece of the storage at ``K'``.
The bytes survive. Piece ``p`` of record ``r`` is the bytes ``[p w, (p + 1) w)`` of ``r`` (``w =
ceil(B / P)``; a record of many sizes, ``L`` bytes: ``[p L // P, (p + 1) L // P)``) whatever its
label or holders, so cutting every record at both cuts gives *segments*, each inside one old
piece and one new piece. The storage at ``K'`` is that of the next epoch's batches
(:class:`~.holding.PieceStorage` ``(K', M).start``, :func:`~coded_shuffle.storage.piece_placement`),
each record's labels assigned to its slots so that the workers keep the most bytes
(:mod:`.recut_labels`); worker ``j`` of ``K'`` needs the segments of its new pieces
(:func:`recut_plan`):

- those of old pieces it holds (checked against their checksums) it keeps;
- the rest come from a *survivor* that holds the old piece (the holders in turn, so that they
  share the work), uncoded;
- a segment no survivor holds is read from the source once, by the first worker that stores
  it; the others that store it have it from that worker (as :func:`~.restore.restore_plan`).

The delivery is uncoded: the scheme's symbols XOR pieces of one storage, each wanted by one
member of a group and held by the others under the labels of that storage; here what a worker
holds is cut and labelled at ``K`` and what it wants at ``K'``, in segments of many lengths with
holder sets that follow no storage's labels, so the scheme has no group to code. Nor does the
exchange need coding: every worker receives exactly the bytes of its new storage it does not
hold, which is the download bound (:attr:`RecutReport.download_bound`: no delivery, coded or
not, brings a worker fewer bytes), and the source sends exactly the bytes no survivor holds
(:attr:`RecutReport.source_bound`: no delivery reads fewer from it). Both are met.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..codec import Cache, Dataset, record_checksums
from ..errors import IntegrityError
from ..orders import OrderSpec, Placement, order_placement
from ..plan import STRATEGIES
from ..transport import InProcessTransport
from .elastic import _checked_ids, _sub_cache
from .elastic_epochs import check_worker_counts
from .holding import PieceStorage
from .inprocess import drive
from .protocol import MasterOptions
from .recut_labels import LABELS
from .report import TransitionReport
from .schemes import scheme_for

__all__ = [
    "Segments", "RecutPlan", "RecutReport", "byte_cuts", "segments", "recut_plan", "recut_storage",
    "recut_run",
]  # fmt: skip


def byte_cuts(sizes: np.ndarray, P: int, *, width: int | None = None) -> np.ndarray:
    """``(N, P + 1)``: where each piece of each record starts, and the record's end last.

    Records of one size ``B`` (``width = ceil(B / P)``): piece ``p`` is ``[min(p w, B), min((p + 1)
    w, B))`` (the rest of its row is padding); records of many sizes (``width`` None): ``[p L // P,
    (p + 1) L // P)``, as :func:`~.state.piece_lengths`.

    Examples
    --------
    >>> byte_cuts(np.array([10]), 3, width=4).tolist(), byte_cuts(np.array([7, 2]), 3).tolist()
    ([[0, 4, 8, 10]], [[0, 2, 4, 7], [0, 0, 1, 2]])
    """
    L = np.asarray(sizes, dtype=np.int64)[:, None]
    p = np.arange(P + 1, dtype=np.int64)[None, :]
    return np.minimum(p * width, L) if width is not None else (p * L) // P


@dataclass(frozen=True)
class Segments:
    """Every record's bytes cut at the pieces of two storages: segment ``i`` is the bytes
    ``[start[i], stop[i])`` of record ``record[i]``, inside piece ``old[i]`` of the first (id
    ``r P + p``) and piece ``new[i]`` of the second (``r P' + q``), at ``old_at[i]`` and
    ``new_at[i]`` in them. Increasing by record, then by byte: a piece's segments are a run."""

    record: np.ndarray
    start: np.ndarray
    stop: np.ndarray
    old: np.ndarray
    new: np.ndarray
    old_at: np.ndarray
    new_at: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Bytes of each segment."""
        return self.stop - self.start


def _piece_of(cuts: np.ndarray, rec: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The piece of record ``rec`` that holds byte ``at`` (inside the record), by its cuts: the
    last piece that starts at or before it (a piece of no bytes never does, alone)."""
    big = int(cuts[:, -1].max(initial=0)) + 1
    n = cuts.shape[1]
    flat = (cuts + np.arange(cuts.shape[0], dtype=np.int64)[:, None] * big).reshape(-1)
    return np.searchsorted(flat, at + rec * big, side="right") - 1 - rec * n


def segments(old_cuts: np.ndarray, new_cuts: np.ndarray) -> Segments:
    """The segments of two cuts of the same records (:func:`byte_cuts`), empty ones left out.

    Examples
    --------
    >>> s = segments(byte_cuts(np.array([10]), 2, width=5), byte_cuts(np.array([10]), 3, width=4))
    >>> list(zip(s.start.tolist(), s.stop.tolist(), s.old.tolist(), s.new.tolist()))
    [(0, 4, 0, 0), (4, 5, 0, 1), (5, 8, 1, 1), (8, 10, 1, 2)]
    """
    both = np.sort(np.concatenate([old_cuts, new_cuts], axis=1), axis=1)
    keep = both[:, 1:] > both[:, :-1]
    rec = np.nonzero(keep)[0].astype(np.int64)
    start, stop = both[:, :-1][keep], both[:, 1:][keep]
    p, q = _piece_of(old_cuts, rec, start), _piece_of(new_cuts, rec, start)
    P, Q = old_cuts.shape[1] - 1, new_cuts.shape[1] - 1
    return Segments(
        record=rec, start=start, stop=stop, old=rec * P + p, new=rec * Q + q,
        old_at=start - old_cuts[rec, p], new_at=start - new_cuts[rec, q],
    )  # fmt: skip


@dataclass(frozen=True)
class RecutPlan:
    """Who sends what: row ``i`` gives worker ``worker[i]`` segment ``segment[i]``, from
    ``sender[i]`` (itself: kept; ``-1``: the source; else a peer: the holdings' index, a leaving
    worker's after the ``K'``), a peer that has it from its old storage or, ``relay[i]``, from the
    source in the first step. Rows by worker, then by segment."""

    segments: Segments
    worker: np.ndarray
    segment: np.ndarray
    sender: np.ndarray
    relay: np.ndarray
    #: Whether some holder (a survivor) holds each segment in its old storage.
    held: np.ndarray = field(repr=False)

    def lengths(self) -> np.ndarray:
        """Bytes of each row."""
        return self.segments.lengths[self.segment]

    def counts(self) -> tuple[int, int, int]:
        """Bytes kept, from peers and from the source, over every worker."""
        n = self.lengths()
        kept = self.sender == self.worker
        source = self.sender < 0
        return int(n[kept].sum()), int(n[~kept & ~source].sum()), int(n[source].sum())


def _rows_of(seg: Segments, wanted: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``(worker, segment)`` of every segment of every worker's wanted pieces (ids of the new cut)."""
    workers, segs = [], []
    for j, ids in enumerate(wanted):
        lo = np.searchsorted(seg.new, ids, side="left")
        n = np.searchsorted(seg.new, ids, side="right") - lo
        first = np.repeat(lo - (np.cumsum(n) - n), n)
        segs.append(first + np.arange(int(n.sum()), dtype=np.int64))
        workers.append(np.full(int(n.sum()), j, dtype=np.int64))
    return np.concatenate(workers), np.concatenate(segs)


#: Rows of a plan whose senders :func:`recut_plan` chooses at once (each weighs a key a holder).
_ROWS = 1 << 18


def recut_plan(seg: Segments, have: Sequence[np.ndarray], wanted: Sequence[np.ndarray]) -> RecutPlan:
    """The plan that gives each worker ``j < len(wanted)`` the segments of its new pieces
    ``wanted[j]`` (ids of the new cut, increasing): from its own old pieces ``have[j]`` (ids of the
    old cut, checked), else from another ``h`` of ``have`` (a leaving worker after the ``K'``) that
    holds the old piece, the ``i``-th row from the first such after ``i mod len(have)``; else from
    the source, once, to the first worker that stores it, and from that worker to the others.

    Examples
    --------
    Two workers, one record of 10 bytes cut in 2 pieces, to be cut in 3; worker 0 held the first
    old piece, worker 1 the second; each now stores two of the new pieces:

    >>> s = segments(byte_cuts(np.array([10]), 2, width=5), byte_cuts(np.array([10]), 3, width=4))
    >>> plan = recut_plan(s, [np.array([0]), np.array([1])], [np.array([0, 1]), np.array([1, 2])])
    >>> plan.sender.tolist(), plan.counts()
    ([0, 0, 1, 0, 1, 1], (10, 4, 0))
    """
    worker, segment = _rows_of(seg, wanted)
    H = len(have)
    has = np.zeros((H, seg.old.size), dtype=bool)
    for h, ids in enumerate(have):
        has[h] = np.isin(seg.old, ids)
    kept = has[worker, segment]
    sender = np.full(worker.size, -1, dtype=np.int64)
    for lo in range(0, worker.size, _ROWS):  # a block of rows at a time: H keys a row
        i = np.arange(lo, min(lo + _ROWS, worker.size))
        cand = has[:, segment[i]].T.copy()
        cand[np.arange(i.size), worker[i]] = False
        key = np.where(cand, (np.arange(H)[None, :] - (i % H)[:, None]) % H, H)
        sender[i] = np.where(key.min(axis=1, initial=H) < H, np.argmin(key, axis=1), -1)
    sender[kept] = worker[kept]
    relay = sender < 0
    first = np.full(seg.old.size, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, segment[relay], worker[relay])
    relay &= first[segment] != worker
    sender[relay] = first[segment[relay]]
    return RecutPlan(seg, worker, segment, sender, relay, np.asarray(has.any(axis=0)))


@dataclass(frozen=True)
class RecutReport:
    """A change from ``K`` to ``K'`` workers with a storage of ``M`` batches, delivered as a re-cut.

    Attributes
    ----------
    K, K_next, M : int
        Workers before and after, and batches each stores.
    pieces, pieces_next : int
        Pieces a record before and after (``P``, ``P'``).
    joined : tuple of int
        The workers of ``K'`` that brought nothing (they joined, or lost everything).
    dropped_pieces : int
        Old pieces that failed their checksum or were held twice by a worker: treated as absent.
    storage_bytes : int
        Payload bytes of the new storage, every worker's (the padding of a last piece not
        counted): what a cold start sends from the source.
    kept_bytes, peer_bytes, source_bytes : int
        Of those, the bytes a worker already held, had from a peer, and from the source.
    download_bound : int
        The bytes of its new storage each worker did not hold, summed: no delivery brings the
        workers fewer (each must receive what it lacks). ``peer_bytes + source_bytes`` meets it.
    source_bound : int
        The bytes of the new storage that no survivor held, each once: no delivery reads fewer
        from the source. ``source_bytes`` meets it.
    received, sent : tuple of int
        Bytes each worker of ``K'`` received (from peers and the source), and each holder sent
        (the ``K'``, then the leaving workers that served): the largest of each over the links'
        rates bounds the time.
    verified : bool
        Every worker holds exactly its pieces of the storage at ``K'``, each with its checksum.
    seconds : float
        Wall time of the plan, the delivery in this process and the checks.
    """

    K: int
    K_next: int
    M: int
    pieces: int
    pieces_next: int
    joined: tuple[int, ...]
    dropped_pieces: int
    storage_bytes: int
    kept_bytes: int
    peer_bytes: int
    source_bytes: int
    download_bound: int
    source_bound: int
    received: tuple[int, ...]
    sent: tuple[int, ...]
    verified: bool
    seconds: float = 0.0
    #: The storage at ``K'`` the workers hold (a :class:`~coded_shuffle.storage.PiecePlacement`):
    #: the job goes on from it (the scheme's ``following``). Not in :meth:`to_dict`.
    held: Any = field(default=None, repr=False, compare=False)
    #: How the labels went to the slots (:data:`~.recut_labels.LABELS`).
    labels: str = "kept"

    def to_dict(self) -> dict[str, Any]:
        """The report as one flat JSON object (all but ``held``)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "held"}
        out.update(joined=list(self.joined), received=list(self.received), sent=list(self.sent))
        return out


def _storage(dataset: Dataset, K: int, M: int) -> PieceStorage:
    """The placement model of a storage of ``M`` batches on ``K`` workers of these records (the
    engine's: :func:`~.schemes.scheme_for` with the records' size, or their sizes)."""
    return _storage_of(dataset.record_bytes, dataset.lengths, K, M)


def _storage_of(B: int, sizes: np.ndarray | None, K: int, M: int) -> PieceStorage:
    """:func:`_storage` of records of ``B`` bytes, or of many ``sizes`` (``B`` the widest), which
    every rank has without the records."""
    if sizes is not None:
        return PieceStorage(K=K, M=M, sizes=np.asarray(sizes, dtype=np.int64))
    return PieceStorage(K=K, M=M, record_bytes=B)


def _segments_of(
    N: int, B: int, sizes: np.ndarray | None, before: PieceStorage, after: PieceStorage
) -> Segments:
    """Every one of ``N`` records (of ``B`` bytes, or of many ``sizes``) cut at the pieces of both
    storages (:func:`segments` of their :func:`byte_cuts`)."""

    def cuts(P: int) -> np.ndarray:
        if sizes is None:
            return byte_cuts(np.full(N, B, dtype=np.int64), P, width=-(-B // P))
        return byte_cuts(np.asarray(sizes, dtype=np.int64), P)

    return segments(cuts(before.pieces), cuts(after.pieces))


def _copy(dst: np.ndarray, drow: np.ndarray, dat: np.ndarray, src: np.ndarray, srow: np.ndarray,
          sat: np.ndarray, n: np.ndarray) -> None:  # fmt: skip
    """``dst[drow[i], dat[i]:dat[i] + n[i]] = src[srow[i], sat[i]:sat[i] + n[i]]`` for every ``i``
    (:func:`_copy_spans`)."""
    _copy_spans(dst, drow * dst.shape[1] + dat, src, srow * src.shape[1] + sat, n)


def _copy_spans(dst: np.ndarray, doff: np.ndarray, src: np.ndarray, soff: np.ndarray, n: np.ndarray) -> None:
    """``flat(dst)[doff[i]:doff[i] + n[i]] = flat(src)[soff[i]:soff[i] + n[i]]`` for every ``i``, over
    the bytes of the C-contiguous buffer ``dst`` and of ``src``, one compiled pass (the spans of
    records of many sizes have as many shapes as spans)."""
    from ..codec._common import _i64, _kernels, _ro

    assert dst.flags.c_contiguous and dst.flags.writeable
    _kernels().copy_spans(dst.reshape(-1).view(np.ndarray), _i64(doff), _ro(src).reshape(-1), _i64(soff),
                          _i64(n), 0, int(n.size))  # fmt: skip


def _deliver(plan: RecutPlan, dataset: Dataset, old: list[Cache], wanted: list[np.ndarray],
             new: Dataset) -> list[Cache]:  # fmt: skip
    """Run ``plan`` in this process: the source's step, then the peers'. ``old[h]``: what holder
    ``h`` held (checked), ``wanted[j]`` the new pieces of worker ``j``, ``new`` their dataset."""
    seg, width = plan.segments, new.record_bytes
    bufs = [np.zeros((ids.size, width), dtype=np.uint8) for ids in wanted]
    n = plan.lengths()
    for relayed in (False, True):  # the kept and the source's first, then what the peers send
        for j, ids in enumerate(wanted):
            mine = (plan.worker == j) & (plan.relay == relayed)
            for h in np.unique(plan.sender[mine]).tolist():
                rows = np.flatnonzero(mine & (plan.sender == h))
                u = plan.segment[rows]
                drow = np.searchsorted(ids, seg.new[u])
                if h < 0:
                    src, srow, sat = dataset.data, seg.record[u], seg.start[u]
                elif relayed:
                    src, srow, sat = bufs[h], np.searchsorted(wanted[h], seg.new[u]), seg.new_at[u]
                else:
                    src, srow, sat = old[h].data, old[h].rows(seg.old[u]), seg.old_at[u]
                _copy(bufs[j], drow, seg.new_at[u], src, srow, sat, n[rows])
    lengths = new.lengths
    return [
        Cache(ids=ids, data=buf, lengths=None if lengths is None else np.asarray(lengths)[ids])
        for ids, buf in zip(wanted, bufs, strict=True)
    ]


def _checked(dataset: Dataset, holdings: Sequence[Cache | None], old: Dataset) -> tuple[list[Cache], int]:
    """Each holding's pieces that pass their checksum in ``old`` (the old cut's dataset), once
    each, and the pieces dropped."""
    width, variable = old.record_bytes, old.lengths is not None
    out, dropped = [], 0
    for k, c in enumerate(holdings):
        if c is not None and len(c) and c.width != width:
            raise ValueError(
                f"Argument 'holdings' must hold pieces of {width} bytes (the storage's cut), not "
                f"{c.width} (worker {k})."
            )
        if c is None or not len(c):
            out.append(_sub_cache(None, np.empty(0, np.int64), width, variable))
            continue
        rows, ids = _checked_ids(old, c)
        dropped += len(c) - int(ids.size)
        whole = rows.size == len(c) and bool(np.all(rows == np.arange(rows.size)))
        out.append(c if whole else _sub_cache(c, rows, width, variable))  # every piece good: as it is
    return out, dropped


def recut_storage(
    dataset: Dataset,
    holdings: Sequence[Cache | None],
    placement_next: Placement,
    *,
    K: int,
    M: int,
    leaving: Sequence[Cache | None] = (),
    labels: str = "kept",
) -> tuple[RecutReport, list[Cache]]:
    """Give the ``K'`` workers of ``placement_next`` their storage of ``M`` batches from the
    pieces of a storage at ``K`` they hold; return the report and the ``K'`` new storages.

    Parameters
    ----------
    dataset : Dataset
        The records with their load-time checksums (the source).
    holdings : sequence of Cache or None
        One a worker of ``K'``: the pieces of the storage at ``K`` it brings (ids ``r P + p`` of
        :func:`~.state.storage_dataset` at ``K``), or None when it starts empty (it joined).
        Pieces that fail their checksum are treated as absent.
    placement_next : Placement
        The batches of the next epoch on ``K'`` workers; the new storage is that of
        ``PieceStorage(K', M).start(placement_next)``, its labels assigned to the slots by
        ``labels`` (every worker's pieces: the report's ``held.held_by(j)``).
    K : int
        The workers of the storage the holdings are pieces of.
    M : int
        Batches each worker stores, before and after (``2 <= M <= min(K, K')``).
    leaving : sequence of Cache or None
        Storages of workers that leave after sending what the others lack (default: none, a
        leaving worker's storage is gone).
    labels : str
        Which slot of a record each of its labels at ``K'`` goes to (:data:`~.recut_labels.LABELS`):
        ``kept`` (default), the assignment that keeps the most bytes where they are;
        ``placement``, that of :func:`~coded_shuffle.storage.piece_placement`. Either is a storage
        at ``K'`` with every worker's share; the report's ``held`` is it.

    Returns
    -------
    (RecutReport, list of Cache)

    Examples
    --------
    Eight workers storing two batches become six (workers 6 and 7 leave with their storage):

    >>> from coded_shuffle.engine import synthetic_dataset
    >>> from coded_shuffle.orders import epoch_placement
    >>> ds = synthetic_dataset(96, 8192, seed=0)
    >>> p0, p1 = epoch_placement(96, 8, seed=1, epoch=0), epoch_placement(96, 6, seed=1, epoch=1)
    >>> st = PieceStorage(K=8, M=2, record_bytes=8192)
    >>> work, held = st.dataset(ds), st.start(p0)
    >>> rep, caches = recut_storage(ds, [work.cache(held.held_by(k)) for k in range(6)], p1, K=8, M=2)
    >>> rep.verified, rep.pieces, rep.pieces_next, rep.source_bytes == rep.source_bound
    (True, 7, 5, True)
    >>> rep.peer_bytes + rep.source_bytes == rep.download_bound < rep.storage_bytes
    True
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if not isinstance(placement_next, Placement) or placement_next.N != dataset.N:
        raise ValueError(
            f"Argument 'placement_next' must be a Placement of the dataset's N = {dataset.N} records."
        )
    K_next = placement_next.K
    K = check_int(K, "K", minimum=1)
    M = check_int(M, "M", minimum=2)
    if M > min(K, K_next):
        raise ValueError(f"Argument 'M' must be at most min(K, K') = {min(K, K_next)} batches, not {M}.")
    _check_many(holdings, K_next, "holdings")
    _check_many(leaving, None, "leaving")
    labels = check_choice(labels, "labels", tuple(LABELS))
    tic = time.perf_counter()
    before, after = _storage(dataset, K, M), _storage(dataset, K_next, M)
    old, new = before.dataset(dataset), after.dataset(dataset)
    have, dropped = _checked(dataset, [*holdings, *leaving], old)
    seg = _segments_of(dataset.N, dataset.record_bytes, dataset.lengths, before, after)
    held = LABELS[labels](after.start(placement_next), seg, [c.ids for c in have[:K_next]])
    wanted = [held.held_by(j) for j in range(K_next)]
    plan = recut_plan(seg, [c.ids for c in have], wanted)
    caches = _deliver(plan, dataset, have, wanted, new)
    ok = all(np.array_equal(record_checksums(c.data, c.lengths), new.checksums[c.ids]) for c in caches)
    rep = _report(plan, K, K_next, M, (before.pieces, after.pieces), have, dropped, ok)
    return replace(rep, seconds=time.perf_counter() - tic, held=held, labels=labels), caches


def _check_many(caches: object, K: int | None, name: str) -> None:
    """Refuse, naming ``name``, what is not a sequence of ``K`` (any number when None) caches or None."""
    if isinstance(caches, (str, bytes)) or not isinstance(caches, Sequence) or (
        K is not None and len(caches) != K
    ):  # fmt: skip
        many = f"K' = {K}" if K is not None else "any number of"
        raise ValueError(f"Argument {name!r} must be a sequence of {many} caches (or None), one a worker.")
    for k, c in enumerate(caches):
        if c is not None and not isinstance(c, Cache):
            got = type(c).__name__
            raise TypeError(f"Argument {name!r} must hold Cache objects or None, not {got} at {k}.")


def _report(plan: RecutPlan, K: int, K_next: int, M: int, pieces: tuple[int, int],
            have: Sequence[Cache | np.ndarray], dropped: int, ok: bool) -> RecutReport:  # fmt: skip
    """The report of ``plan``; ``have``: what each holder brought (its pieces, or their ids)."""
    n = plan.lengths()
    kept, peers, source = plan.counts()
    moved = plan.sender != plan.worker
    received = np.bincount(plan.worker[moved], weights=n[moved], minlength=K_next)
    out = moved & (plan.sender >= 0)
    sent = np.bincount(plan.sender[out], weights=n[out], minlength=len(have))
    alone = np.unique(plan.segment[~plan.held[plan.segment]])
    return RecutReport(
        K=K, K_next=K_next, M=M, pieces=pieces[0], pieces_next=pieces[1],
        joined=tuple(j for j in range(K_next) if not len(have[j])), dropped_pieces=int(dropped),
        storage_bytes=int(n.sum()), kept_bytes=kept, peer_bytes=peers, source_bytes=source,
        download_bound=int(n[moved].sum()), source_bound=int(plan.segments.lengths[alone].sum()),
        received=tuple(int(x) for x in received), sent=tuple(int(x) for x in sent), verified=bool(ok),
    )  # fmt: skip


def recut_run(
    dataset: Dataset,
    *,
    workers: Sequence[int],
    M: int,
    seed: int,
    mode: str = "coded",
    strategy: str = "greedy",
    order: OrderSpec | None = None,
    start_epoch: int = 0,
) -> list[RecutReport | TransitionReport]:
    """Run the epochs ``start_epoch .. start_epoch + len(workers) - 1`` with ``workers[i]``
    workers in the ``i``-th, each storing ``M`` batches; return one report a transition.

    The batches are those of :func:`~.elastic.elastic_run`. Where the number of workers changes
    the storage is cut again (:func:`recut_storage`, a :class:`RecutReport`; worker ``k`` keeps its
    index, the last ones leave with their storage, new ones join empty); where it stays, the
    transition is the scheme's (``mode``, ``coded`` or ``exchange``: a
    :class:`~.report.TransitionReport`) from the storage of the epoch before.

    Examples
    --------
    >>> from coded_shuffle.engine import synthetic_dataset
    >>> reps = recut_run(synthetic_dataset(96, 4096, seed=0), workers=[4, 3, 3, 4], M=2, seed=1)
    >>> [(type(r).__name__, r.verified) for r in reps]
    [('RecutReport', True), ('TransitionReport', True), ('RecutReport', True)]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    Ks = check_worker_counts(workers, N=dataset.N)
    M = check_int(M, "M", minimum=2)
    if M > min(Ks):
        raise ValueError(f"Argument 'M' must be at most the fewest workers, {min(Ks)}, not {M}.")
    mode = check_choice(mode, "mode", ("coded", "exchange"))
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    seed, start_epoch = check_int(seed, "seed", minimum=0), check_int(start_epoch, "start_epoch", minimum=0)
    spec = order or OrderSpec()
    lengths = None if dataset.lengths is None else np.asarray(dataset.lengths)

    def scheme_at(K: int) -> Any:
        return scheme_for(mode, K=K, storage=M, record_bytes=dataset.record_bytes, sizes=lengths)

    p = order_placement(dataset.N, Ks[0], seed=seed, epoch=start_epoch, spec=spec)
    scheme = scheme_at(Ks[0])
    work, held = scheme.dataset(dataset), scheme.start(p)
    caches: list[Cache] = [work.cache(scheme.held(held, k)) for k in range(Ks[0])]
    opts = MasterOptions(strategy=strategy, seed=seed, records=(dataset.N, dataset.record_bytes))
    reports: list[RecutReport | TransitionReport] = []
    for i, K in enumerate(Ks[1:], start=1):
        p = order_placement(dataset.N, K, seed=seed, epoch=start_epoch + i, spec=spec)
        if K != Ks[i - 1]:
            holdings = [caches[k] if k < len(caches) else None for k in range(K)]
            rep, caches = recut_storage(dataset, holdings, p, K=Ks[i - 1], M=M)
            scheme = scheme_at(K)
            work, held = scheme.dataset(dataset), rep.held
            reports.append(rep)
            continue
        nxt = scheme.following(held, p)
        tr, caches = drive(InProcessTransport(K), scheme, work, caches, (held, nxt), epoch=start_epoch + i,
                           opts=opts)  # fmt: skip
        if not tr.verified:  # pragma: no cover - the protocol's own check
            raise IntegrityError(f"The transition to epoch {start_epoch + i} was not verified.")
        held = nxt
        reports.append(tr)
    return reports
