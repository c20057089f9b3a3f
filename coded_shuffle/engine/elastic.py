"""Transitions from whatever the workers hold: a change of ``K``, a restart, a lost host.

Notation
--------
=============  ==========================================================================
``K'``         workers of the next epoch, numbered ``0 .. K' - 1``
``H_k``        the records worker ``k`` holds before the transition (checked, possibly none)
``A_k^{t+1}``  its batch of the next epoch
source         the records' own store (the master's dataset, or the record source on disk)
=============  ==========================================================================

One batch a worker (``M = 1``). Every ordinary transition plans from the batches of epoch ``t``;
this one plans from the holdings ``H_k``, which may be anything: the batches of ``K`` workers of
which some left and some joined (a joining worker brings an empty cache, a leaving worker's cache
is gone: it is not among the holdings), the caches a restarted job read back from disk
(:mod:`.cache_dir`), those of the survivors of a lost host. A record that no worker holds is
held by one more slot, ``K'``, the *source*: it holds nothing next, so its column of the shuffle
matrix is zero, as that of a leaving worker in :func:`~coded_shuffle.matrix.elastic_matrix`
(the leaving workers' rows, merged into one). Then the transition is an ordinary one of the
protocol on ``K' + 1`` slots:

- ``coded`` and ``uncoded``: the master holds every record; the source's records can be paired
  with nothing (no worker can decode with the source's cache) and go uncoded. The coded load is
  that of the rectangular shuffle ``K x K'`` and its genie bound is the bound of
  :func:`~coded_shuffle.bounds.lower_bound` on it (a leaving worker is last in every best ordering,
  so its records count in full, merged or not).
- ``exchange``: the workers send each other what each misses; the source slot sends the records
  no worker holds (read from the store), and the report counts its bytes apart
  (:attr:`ElasticReport.source_bytes`), beside those that came from peers.

With a storage of ``M > 1`` batches the pieces are labelled by the ``t``-subsets of the other
``K - 1`` workers (``C(K - 1, t)`` pieces a record, held by ``t + 1`` workers each), so at
``K' != K`` both the cut and the labels change, and no worker's pieces are pieces of the storage
at ``K'``: this module's transitions take one batch a worker, and a change of ``K`` with a
storage is a re-cut of the bytes the workers hold (:mod:`.recut`). A restart at the same ``K``
with every worker's storage back is an ordinary transition (:mod:`.recover`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..bounds import lower_bound
from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..matrix import shuffle_matrix
from ..orders import OrderSpec, Placement, order_placement, placement_from_owner
from ..plan import STRATEGIES
from ..transport import InProcessTransport
from .inprocess import drive
from .protocol import MasterOptions
from .report import TransitionReport
from .rest import _bound_bytes, batches_of, deal_rest
from .schemes import scheme_for

__all__ = [
    "ElasticReport",
    "held_placement",
    "elastic_transition",
    "elastic_run",
    "restart_transition",
    "remainder_batches",
    "ResumeReport",
    "resume_epoch",
    "batches_of",
    "ELASTIC_MODES",
]

#: The delivery modes a transition from arbitrary holdings runs in (one batch a worker).
ELASTIC_MODES = ("coded", "uncoded", "exchange")


@dataclass(frozen=True)
class ElasticReport:
    """One transition from the workers' holdings to the batches of ``K`` workers.

    Attributes
    ----------
    K : int
        Workers of the next epoch.
    mode : str
        The delivery.
    joined : tuple of int
        The workers that brought an empty cache (they joined, or lost everything).
    held_records : int
        Records some worker held and that passed their checksum.
    dropped_records : int
        Records in the holdings that failed their checksum or were held twice: treated as absent.
    kept_records : int
        Records already with their next holder (nothing sent).
    source_records, source_bytes : int
        Records no worker held, delivered from the source, and their payload bytes.
    peer_bytes : int
        Payload bytes the workers sent each other (``exchange``; 0 otherwise).
    bound : int
        The genie bound of the rectangular shuffle from the holdings to the next batches, in
        records (:func:`~coded_shuffle.bounds.lower_bound`): no delivery, coded or not, sends
        fewer.
    bound_bytes : int
        The same bound in payload bytes: ``bound`` times the record's bytes, or, records of
        different sizes, that of the matrix in bytes (:func:`~coded_shuffle.matrix.shuffle_matrix`).
    transition : TransitionReport
        The protocol's report, on ``K + 1`` slots when some record came from the source (slot
        ``K``), else on ``K``.
    """

    K: int
    mode: str
    joined: tuple[int, ...]
    held_records: int
    dropped_records: int
    kept_records: int
    source_records: int
    source_bytes: int
    peer_bytes: int
    bound: int
    bound_bytes: int
    transition: TransitionReport

    @property
    def verified(self) -> bool:
        """The protocol's verdict: every worker holds exactly its batch, every record checked."""
        return bool(self.transition.verified)

    @property
    def symbols(self) -> int:
        """Records (symbols) the delivery planned to send: the coded load, or every moved record."""
        t = self.transition
        n = t.coded_symbols if self.mode == "coded" else t.uncoded_symbols
        return int(n or 0)  # never None: a coded delivery has its plan

    @property
    def load_bytes(self) -> int:
        """The payload bytes of :attr:`symbols`: the coded load (each XOR as long as its longer
        record), or every moved record's bytes; at least :attr:`bound_bytes`."""
        t = self.transition
        return int((t.coded_bytes if self.mode == "coded" else t.uncoded_bytes) or 0)

    def to_dict(self) -> dict[str, Any]:
        """The report as one flat JSON object: these fields, then the transition's under ``transition``."""
        out: dict[str, Any] = {
            name: getattr(self, name)
            for name in ("K", "mode", "held_records", "dropped_records", "kept_records", "source_records",
                         "source_bytes", "peer_bytes", "bound", "bound_bytes", "symbols", "load_bytes",
                         "verified")
        }  # fmt: skip
        out["joined"] = list(self.joined)
        out["transition"] = self.transition.to_dict()
        return out


def _checked_ids(dataset: Dataset, cache: Cache) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``cache`` whose record passes its load-time checksum, and their ids, in
    increasing order of id, one row an id (a second copy in the same cache is dropped)."""
    ids = np.asarray(cache.ids, dtype=np.int64)
    inside = (ids >= 0) & (ids < dataset.N)
    good = np.zeros(ids.size, dtype=bool)
    if ids.size:
        good[inside] = cache.checksums()[inside] == dataset.checksums[ids[inside]]
        if dataset.lengths is not None and cache.lengths is not None:
            good[inside] &= cache.lengths[inside] == dataset.lengths[ids[inside]]
    rows = np.flatnonzero(good)
    rows = rows[np.argsort(ids[rows], kind="stable")]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = ids[rows[1:]] != ids[rows[:-1]]
    return rows[first], ids[rows[first]]


def held_placement(
    dataset: Dataset, holdings: Sequence[Cache | None], placement_next: Placement
) -> tuple[Placement, list[np.ndarray], int]:
    """The placement of what the workers hold, on ``K'`` slots and one for the source.

    ``holdings[k]`` is worker ``k``'s cache (None: empty). A record is held by the worker whose
    cache holds it with its load-time checksum; held twice, by the one whose batch it is next,
    else the first; held by none, by slot ``K'`` (the source). Returns the placement (on ``K' + 1``
    slots when the source holds anything, else ``K'``), each worker's rows of its cache in it,
    and the records dropped (a failed checksum, or a second copy).

    Examples
    --------
    >>> from coded_shuffle.codec import load_dataset
    >>> ds = load_dataset(np.arange(8, dtype=np.uint8).reshape(4, 2))
    >>> nxt = placement_from_owner([0, 1, 0, 1], 2)
    >>> held, rows, dropped = held_placement(ds, [ds.cache([0, 1]), None], nxt)
    >>> held.K, held.owner.tolist(), dropped
    (3, [0, 0, 2, 2], 0)
    """
    K = placement_next.K
    owner = np.full(dataset.N, K, dtype=np.int64)
    nxt = np.asarray(placement_next.owner, dtype=np.int64)
    checked, dropped = [], 0
    for cache in holdings:
        if cache is None:
            checked.append((np.empty(0, np.int64), np.empty(0, np.int64)))
            continue
        rows, ids = _checked_ids(dataset, cache)
        dropped += len(cache) - int(ids.size)
        checked.append((rows, ids))
    for k, (_, ids) in enumerate(checked):  # first the copies that are where they go next
        mine = nxt[ids] == k
        owner[ids[mine]] = k
    for k, (_, ids) in enumerate(checked):
        free = owner[ids] == K
        owner[ids[free]] = k
    kept_rows = []
    for k, (rows, ids) in enumerate(checked):
        mine = owner[ids] == k
        dropped += int(ids.size - mine.sum())
        kept_rows.append(rows[mine])
    slots = K + 1 if bool((owner == K).any()) else K
    return placement_from_owner(owner, slots), kept_rows, dropped


def _check_holdings(dataset: Dataset, holdings: object, K: int | None) -> None:
    """Refuse, naming the argument, ``holdings`` that are not ``K`` caches (any number ``>= 1``
    when ``K`` is None) or None, or whose records are not of the dataset's width."""
    if (
        isinstance(holdings, (str, bytes)) or not isinstance(holdings, Sequence)
        or len(holdings) != (K if K is not None else max(len(holdings), 1))
    ):  # fmt: skip
        many = f"K' = {K}" if K is not None else "at least one"
        raise ValueError(f"Argument 'holdings' must be a sequence of {many} caches (or None), one a worker.")
    for k, c in enumerate(holdings):
        if c is not None and not isinstance(c, Cache):
            raise TypeError(
                f"Argument 'holdings' must hold Cache objects or None, not {type(c).__name__} at {k}."
            )
        if c is not None and len(c) and c.width != dataset.record_bytes:
            raise ValueError(
                f"Argument 'holdings' must hold records of {dataset.record_bytes} bytes, not "
                f"{c.width} (worker {k})."
            )


def _sub_cache(cache: Cache | None, rows: np.ndarray, width: int, variable: bool) -> Cache:
    if cache is None or rows.size == 0:
        return Cache(
            ids=np.empty(0, np.int64), data=np.empty((0, width), np.uint8),
            lengths=np.empty(0, np.int64) if variable else None,
        )  # fmt: skip
    data = np.ascontiguousarray(cache.data[rows])
    lengths = None if cache.lengths is None else np.ascontiguousarray(cache.lengths[rows])
    return Cache(ids=np.asarray(cache.ids, dtype=np.int64)[rows], data=data, lengths=lengths)


def elastic_transition(
    dataset: Dataset,
    holdings: Sequence[Cache | None],
    placement_next: Placement,
    *,
    epoch: int,
    mode: str = "coded",
    strategy: str = "greedy",
    max_repair_rounds: int = 3,
    seed: int | None = None,
) -> tuple[ElasticReport, list[Cache]]:
    """Deliver the batches of ``placement_next`` from whatever the workers hold; return the
    report and the ``K'`` new caches.

    Parameters
    ----------
    dataset : Dataset
        The records with their load-time checksums (the source).
    holdings : sequence of Cache or None
        One a worker of the next epoch, ``K'`` in all: the cache worker ``k`` brings (the
        batch it held at ``K`` workers, a cache read back from disk, anything), or None when it
        starts empty (it joined). A leaving worker is simply not among them. Records that fail
        their checksum are treated as absent, and delivered.
    placement_next : Placement
        The batches of the next epoch, ``K'`` workers.
    epoch : int
        The next epoch (in the frame headers).
    mode : str
        ``coded``, ``uncoded`` or ``exchange`` (:data:`ELASTIC_MODES`).
    strategy, max_repair_rounds, seed
        As :func:`~coded_shuffle.engine.inprocess.transition`.

    Returns
    -------
    (ElasticReport, list of Cache)

    Examples
    --------
    Eight workers become six (workers 6 and 7 leave with their caches):

    >>> from coded_shuffle.engine import synthetic_dataset, initial_caches
    >>> from coded_shuffle.orders import epoch_placement
    >>> ds = synthetic_dataset(240, 16, seed=0)
    >>> p0, p1 = epoch_placement(240, 8, seed=1, epoch=0), epoch_placement(240, 6, seed=1, epoch=1)
    >>> rep, caches = elastic_transition(ds, initial_caches(ds, p0)[:6], p1, epoch=1)
    >>> rep.verified, rep.source_records, rep.bound <= rep.symbols, len(caches)
    (True, 60, True, 6)
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if not isinstance(placement_next, Placement) or placement_next.N != dataset.N:
        raise ValueError(
            f"Argument 'placement_next' must be a Placement of the dataset's N = {dataset.N} records."
        )
    K = placement_next.K
    _check_holdings(dataset, holdings, K)
    epoch = check_int(epoch, "epoch", minimum=0)
    mode = check_choice(mode, "mode", ELASTIC_MODES)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    held, rows, dropped = held_placement(dataset, holdings, placement_next)
    slots = held.K
    nxt = placement_from_owner(placement_next.owner, slots)
    width, variable = dataset.record_bytes, dataset.lengths is not None
    caches = [_sub_cache(holdings[k], rows[k], width, variable) for k in range(K)]
    source = held.batch(K) if slots > K else np.empty(0, np.int64)
    if slots > K:  # the source slot sends from the store in an exchange; with a master, it holds nothing
        caches.append(
            dataset.cache(source) if mode == "exchange" else _sub_cache(None, source, width, variable)
        )
    scheme = scheme_for(mode, K=slots)
    opts = MasterOptions(strategy=strategy, max_repair_rounds=max_repair_rounds, seed=seed)
    rep, new = drive(InProcessTransport(slots), scheme, dataset, caches, (held, nxt), epoch=epoch, opts=opts)
    lengths = dataset.lengths
    src_bytes = int(source.size) * width if lengths is None else int(lengths[source].sum())
    peer = 0 if rep.exchange is None else int(rep.exchange.exchange_bytes) - src_bytes
    owner = np.asarray(held.owner, dtype=np.int64)
    bound = int(lower_bound(shuffle_matrix(held, nxt)).value)
    report = ElasticReport(
        K=K, mode=mode, joined=tuple(k for k in range(K) if not rows[k].size),
        held_records=int((owner < K).sum()), dropped_records=int(dropped),
        kept_records=int((owner == np.asarray(placement_next.owner, dtype=np.int64)).sum()),
        source_records=int(source.size), source_bytes=src_bytes, peer_bytes=max(peer, 0),
        bound=bound, bound_bytes=_bound_bytes(held, nxt, bound, width, lengths), transition=rep,
    )  # fmt: skip
    return report, new[:K]


def elastic_run(
    dataset: Dataset,
    *,
    workers: Sequence[int],
    seed: int,
    mode: str = "coded",
    strategy: str = "greedy",
    order: OrderSpec | None = None,
    start_epoch: int = 0,
) -> list[ElasticReport]:
    """Run the epochs ``start_epoch .. start_epoch + len(workers) - 1`` with ``workers[i]`` workers
    in the ``i``-th; return one report a transition.

    The batches of epoch ``t`` at ``K`` workers are
    :func:`~coded_shuffle.orders.order_placement` ``(N, K, seed=seed, epoch=t, spec=order)``; the
    epoch order does not depend on ``K``, only its cut into batches does. Worker ``k`` keeps its
    index: when ``K`` grows the new workers start empty, when it shrinks the last ones leave with
    their caches.

    Examples
    --------
    >>> from coded_shuffle.engine import synthetic_dataset
    >>> reps = elastic_run(synthetic_dataset(240, 16, seed=0), workers=[8, 6, 8], seed=1)
    >>> [(r.K, r.verified, r.source_records, r.joined) for r in reps]
    [(6, True, 60, ()), (8, True, 0, (6, 7))]
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if isinstance(workers, (str, bytes)) or not isinstance(workers, Sequence) or len(workers) < 1:
        raise ValueError("Argument 'workers' must be a sequence of at least one worker count.")
    mode = check_choice(mode, "mode", ELASTIC_MODES)  # checked before any epoch, even with one
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    Ks = [check_int(K, "workers", minimum=1) for K in workers]
    if max(Ks) > dataset.N:
        raise ValueError(f"Argument 'workers' must be at most N = {dataset.N} each, not {max(Ks)}.")
    start_epoch = check_int(start_epoch, "start_epoch", minimum=0)
    spec = order or OrderSpec()
    p = order_placement(dataset.N, Ks[0], seed=seed, epoch=start_epoch, spec=spec)
    caches: list[Cache | None] = [dataset.cache(p.batch(k)) for k in range(Ks[0])]
    reports = []
    for i, K in enumerate(Ks[1:], start=1):
        p = order_placement(dataset.N, K, seed=seed, epoch=start_epoch + i, spec=spec)
        holdings = [caches[k] if k < len(caches) else None for k in range(K)]
        rep, new = elastic_transition(
            dataset, holdings, p, epoch=start_epoch + i, mode=mode, strategy=strategy, seed=seed
        )
        reports.append(rep)
        caches = list(new)
    return reports


def restart_transition(
    dataset: Dataset,
    cache_dir: str | os.PathLike[str],
    placement_next: Placement,
    *,
    epoch: int,
    mode: str = "coded",
    seed: int | None = None,
    strategy: str = "greedy",
) -> tuple[ElasticReport, list[Cache], list[str]]:
    """The first transition of a restarted job: from what ``cache_dir`` still holds of every
    worker of ``placement_next`` (:func:`~.cache_dir.load_cache_dir`) to its batches.

    Returns the report, the new caches and a line for every cache file treated as absent or with
    rows dropped. A worker without a (whole) file starts empty; a file of another job raises.

    Examples
    --------
    >>> import tempfile
    >>> from coded_shuffle.engine import synthetic_dataset, initial_caches
    >>> from coded_shuffle.engine.cache_dir import save_cache_dir
    >>> from coded_shuffle.orders import epoch_placement
    >>> ds = synthetic_dataset(80, 16, seed=0)
    >>> p3, p4 = (epoch_placement(80, 4, seed=1, epoch=t) for t in (3, 4))
    >>> with tempfile.TemporaryDirectory() as d:
    ...     _ = save_cache_dir(d, initial_caches(ds, p3), ds, epoch=3, seed=1)
    ...     rep, caches, notes = restart_transition(ds, d, p4, epoch=4, seed=1)
    >>> rep.verified, rep.source_records, rep.held_records, notes
    (True, 0, 80, [])
    """
    from .cache_dir import load_cache_dir

    if not isinstance(placement_next, Placement):
        got = type(placement_next).__name__
        raise TypeError(f"Argument 'placement_next' must be a Placement, not {got}.")
    holdings, notes = load_cache_dir(cache_dir, dataset, K=placement_next.K, seed=seed)
    rep, caches = elastic_transition(
        dataset, holdings, placement_next, epoch=epoch, mode=mode, strategy=strategy, seed=seed
    )
    return rep, caches, notes


def remainder_batches(
    N: int,
    *,
    K: int,
    K_next: int,
    seed: int,
    epoch: int,
    consumed: Sequence[int],
    order: OrderSpec | None = None,
) -> list[np.ndarray]:
    """The rest of epoch ``epoch`` for ``K_next`` workers, after ``K`` workers consumed some of it.

    At ``K`` workers, worker ``k`` reads its batch (the ``k``-th run of
    :func:`~coded_shuffle.orders.epoch_order`, sizes :func:`~coded_shuffle.orders.batch_sizes`)
    in order and has consumed its first ``consumed[k]`` samples; what is left, ``R_k``, is dealt to
    ``K_next`` workers so that every sample left is read exactly once and the workers' shares
    differ by at most one (those of :func:`~coded_shuffle.orders.batch_sizes` of the remainder):
    worker ``j`` below both ``K`` and ``K_next`` keeps the head of its own ``R_j`` (samples it
    holds already), up to its share; the rest of the remainders (a leaving worker's all) are dealt
    in order to the workers below their share. A function of the global state alone (``seed``,
    ``epoch``, the counts), so every rank of a resumed job computes the same.

    Examples
    --------
    >>> [b.tolist() for b in batches_of(12, 3, seed=0, epoch=0)]  # the epoch at K = 3
    [[1, 10, 9, 8], [11, 0, 5, 2], [6, 7, 3, 4]]
    >>> [b.tolist() for b in remainder_batches(12, K=3, K_next=2, seed=0, epoch=0, consumed=[2, 2, 2])]
    [[9, 8, 3], [5, 2, 4]]
    """
    N = check_int(N, "N", minimum=1)
    K = check_int(K, "K", minimum=1)
    K_next = check_int(K_next, "K_next", minimum=1)
    if isinstance(consumed, (str, bytes)) or not isinstance(consumed, Sequence) or len(consumed) != K:
        raise ValueError(f"Argument 'consumed' must give one count for each of the K = {K} workers.")
    batches = batches_of(N, K, seed=seed, epoch=epoch, order=order)
    left = []
    for k, (c, b) in enumerate(zip(consumed, batches, strict=True)):
        c = check_int(c, "consumed", minimum=0)
        if c > b.size:
            raise ValueError(f"Argument 'consumed' must be at most worker {k}'s {b.size} samples, not {c}.")
        left.append(b[c:])
    return deal_rest(left, K_next)


@dataclass(frozen=True)
class ResumeReport:
    """What a job resumed mid-epoch fetched so that every worker holds the rest it reads.

    ``kept_records``: samples of the rest a worker already held; ``peer_records``/``peer_bytes``:
    from another worker's cache; ``source_records``/``source_bytes``: from the source (held by
    no worker, or only by one that left).
    """

    K: int
    kept_records: int
    peer_records: int
    peer_bytes: int
    source_records: int
    source_bytes: int


def resume_epoch(
    dataset: Dataset,
    holdings: Sequence[Cache | None],
    *,
    K: int,
    seed: int,
    epoch: int,
    consumed: Sequence[int],
    order: OrderSpec | None = None,
) -> tuple[ResumeReport, list[Cache], list[np.ndarray]]:
    """Resume epoch ``epoch`` of a job checkpointed at ``K`` workers on ``len(holdings)`` workers.

    ``consumed[k]``: the samples worker ``k`` of the ``K`` had read (the checkpoint's global
    state, with ``seed`` and ``epoch``). The rest of the epoch is dealt by
    :func:`remainder_batches`; each worker fetches what it lacks of its share from another
    worker's cache (records checked against their load-time checksums), else from the source.
    Returns the report, every worker's cache (what it held, with what it fetched) and the
    samples each reads for the rest of the epoch, in order; at the epoch's end,
    :func:`elastic_transition` plans the next from those caches.

    Examples
    --------
    >>> from coded_shuffle.engine import synthetic_dataset
    >>> ds = synthetic_dataset(120, 16, seed=0)
    >>> at4 = batches_of(120, 4, seed=1, epoch=2)
    >>> caches = [ds.cache(b) for b in at4[:3]]  # worker 3 is gone
    >>> rep, caches, rest = resume_epoch(ds, caches, K=4, seed=1, epoch=2, consumed=[10] * 4)
    >>> sum(r.size for r in rest), rep.source_records, rep.kept_records + rep.peer_records
    (80, 20, 60)
    """
    if not isinstance(dataset, Dataset):
        raise TypeError(f"Argument 'dataset' must be a Dataset, not {type(dataset).__name__}.")
    if dataset.lengths is not None:
        raise ValueError("Argument 'dataset' must hold fixed-size records (resume_epoch fetches rows).")
    _check_holdings(dataset, holdings, None)
    rest = remainder_batches(
        dataset.N, K=K, K_next=len(holdings), seed=seed, epoch=epoch, consumed=consumed, order=order
    )
    checked: list[tuple[Cache | None, np.ndarray]] = []
    for c in holdings:
        if c is None or len(c) == 0:
            checked.append((None, np.empty(0, np.int64)))
            continue
        rows, ids = _checked_ids(dataset, c)  # a record that fails its checksum is absent
        checked.append((_sub_cache(c, rows, dataset.record_bytes, False), ids))
    width, counts = dataset.record_bytes, [0, 0, 0]
    out = []
    for j, want in enumerate(rest):
        cache, ids = checked[j]
        mine = np.isin(want, ids)
        extra = np.sort(want[~mine])
        data = np.empty((extra.size, width), dtype=np.uint8)
        got = np.zeros(extra.size, dtype=bool)
        for h, (other, held) in enumerate(checked):
            if h == j or other is None:
                continue
            take = ~got & np.isin(extra, held)
            if take.any():
                data[take] = np.asarray(other.data)[other.rows(extra[take])]
                got |= take
        data[~got] = dataset.data[extra[~got]]
        counts[0] += int(mine.sum())
        counts[1] += int(got.sum())
        counts[2] += int((~got).sum())
        out.append(_merged(cache, extra, data, width))
    for j, c in enumerate(out):  # every record fetched, checked before it is read
        if not np.array_equal(c.checksums(), dataset.checksums[c.ids]):
            raise IntegrityError(f"Worker {j}: a record fetched fails its checksum.")  # pragma: no cover
    report = ResumeReport(
        K=len(holdings), kept_records=counts[0], peer_records=counts[1], peer_bytes=counts[1] * width,
        source_records=counts[2], source_bytes=counts[2] * width,
    )  # fmt: skip
    return report, out, rest


def _merged(cache: Cache | None, ids: np.ndarray, data: np.ndarray, width: int) -> Cache:
    """``cache`` with the records ``ids`` (rows ``data``) added, ids increasing."""
    if cache is None:
        return Cache(ids=ids, data=data, lengths=None)
    all_ids = np.concatenate([np.asarray(cache.ids, dtype=np.int64), ids])
    rows = np.argsort(all_ids, kind="stable")
    both = np.concatenate([np.asarray(cache.data).reshape(-1, width), data])
    return Cache(ids=all_ids[rows], data=np.ascontiguousarray(both[rows]), lengths=None)
