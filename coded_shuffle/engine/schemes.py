"""Schemes: what the master sends in one transition and how a worker takes it in.

A scheme is the one object the transition protocol (:mod:`coded_shuffle.engine.protocol`) is
given (a :class:`Scheme`). The master's half:

``plan(p_t, p_t1, dataset, *, strategy, exact_bound) -> Planned``
    this shuffle's plan, with the loads and the bound the report gives;
``encode(plan, dataset, *, epoch, max_frame_bytes) -> Encoded``
    its delivery as frames, made before the delivery is timed; the protocol then puts them on
    the link with :func:`send`;
``check(dataset, held, p_t1) -> (records checked, ok)``
    the verdict on what the workers hold afterwards.

A worker's half:

``need(p_t1, worker) -> ids``
    what it must hold after the transition;
``take(link, worker, cache, need, ...) -> Taken``
    receive what was sent and rebuild those from its cache.

:class:`CodedScheme` sends the coded plan (order-2 XORs, cycle symbols, lone leftovers) in one
broadcast; :class:`UncodedScheme` sends every record that changes worker alone, to its new holder
only; :class:`ExchangeBaseline` is the alternative without a master: the workers send each other
the records that move (``MPI_Alltoallv``); :class:`StorageScheme` delivers, when every worker
stores ``M > 1`` batches, the pieces of :mod:`coded_shuffle.storage` in symbols of many terms. A
new scheme is a new object of this kind, never a new copy of the transition loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bounds import lower_bound
from ..codec import Cache, Dataset, DecodeResult, decode_worker, encode_plan, encode_plan_arrays, parse_frame
from ..errors import DecodeError
from ..orders import Placement
from ..plan import DeliveryPlan, plan_delivery
from .holding import Batches, PieceStorage, holding_for
from .state import check_holdings

__all__ = [
    "Planned", "Encoded", "Taken", "Scheme", "CodedScheme", "UncodedScheme", "ExchangeBaseline",
    "StorageScheme", "SCHEMES", "MODES", "scheme_for", "send", "uncoded_frames",
]  # fmt: skip


@dataclass(frozen=True)
class Planned:
    """One shuffle's plan as the master's half of a scheme made it, with what the report gives.

    Counts are in symbols: records, or pieces when records are cut (``subpackets``, storage).
    """

    plan: Any
    coded_symbols: int
    uncoded_symbols: int
    lower_bound: int
    lower_bound_exact: bool
    coded_bytes: int
    uncoded_bytes: int
    seconds: float


#: ``tamper(frames) -> frames``: what a worker decodes instead of what it received (tests only).
Tamper = Callable[[list[np.ndarray]], list[np.ndarray]]


@dataclass(frozen=True)
class Encoded:
    """One delivery as the master's half of a scheme made it, ready to go on the link.

    ``frames`` is a list broadcast to every worker, a mapping of worker to its own frames
    (unicast), or None when the master sends nothing.
    """

    frames: list[np.ndarray] | dict[int, list[np.ndarray]] | None
    planned_symbols: int
    xor_symbols: int
    lone_symbols: int
    payload_bytes: int
    header_bytes: int
    n_frames: int
    encode_seconds: float


@dataclass(frozen=True)
class Taken:
    """What a worker's half of a scheme rebuilt: the decode result and what it cost."""

    result: DecodeResult
    rejected: int
    deliver_seconds: float
    decode_seconds: float
    exchanged_bytes: int = 0


def _encoded(
    frames: list[np.ndarray] | dict[int, list[np.ndarray]], planned: int, xor: int, tic: float
) -> Encoded:
    flat = frames if isinstance(frames, list) else [f for fs in frames.values() for f in fs]
    parsed = [parse_frame(f) for f in flat]
    return Encoded(
        frames=frames,
        planned_symbols=planned,
        xor_symbols=xor,
        lone_symbols=planned - xor,
        payload_bytes=sum(f.payload_bytes for f in parsed),
        header_bytes=sum(f.header_bytes for f in parsed),
        n_frames=len(flat),
        encode_seconds=time.perf_counter() - tic,
    )


def send(link: Any, encoded: Encoded) -> float:
    """Put ``encoded`` on ``link`` (a broadcast, or unicast to each worker); return the seconds."""
    tic = time.perf_counter()
    if isinstance(encoded.frames, dict):
        link.send_to(encoded.frames)
    elif encoded.frames is not None:
        link.send(encoded.frames)
    return time.perf_counter() - tic


def receive_decode(
    link: Any,
    worker: int,
    cache: Cache,
    need: np.ndarray,
    *,
    epoch: int,
    checksums: np.ndarray,
    variable: bool,
    out: np.ndarray | None = None,
    tamper: Tamper | None = None,
) -> Taken:
    """A worker: receive one delivery's frames, drop the malformed ones, decode its batch ``need``."""
    t0 = time.perf_counter()
    frames, rejected = _received(
        link, worker, epoch, cache, tamper, lambda f: (f.len_a is not None) == variable
    )
    t_recv = time.perf_counter() - t0
    res = decode_worker(cache, frames, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out)
    return Taken(res, rejected, t_recv, time.perf_counter() - t0 - t_recv)


def _received(
    link: Any, worker: int, epoch: int, cache: Cache, tamper: Tamper | None, fits: Callable[[Any], bool]
) -> tuple[list[Any], int]:
    """A worker's frames of one delivery, parsed; a malformed one, or one that does not ``fit``
    the scheme, is dropped and counted (its records are then missing, and repaired)."""
    raw = link.receive(worker)
    if tamper is not None:
        raw = tamper(list(raw))
    frames, rejected = [], 0
    for buf in raw:
        try:
            frame = parse_frame(buf, epoch=epoch, record_bytes=int(cache.data.shape[1]))
        except DecodeError:
            rejected += 1
            continue
        if not fits(frame):
            rejected += 1
            continue
        frames.append(frame)
    return frames, rejected


class Scheme:
    """What every scheme shares: its placement model, the coded plan of the shuffle, its bound,
    and the check of holdings.

    A scheme owns its placement model (:mod:`coded_shuffle.engine.holding`), given when it is
    built (:func:`scheme_for`): what the workers hold at the start and after each transition,
    what each must hold, how whole records are read back, and the report's units.
    """

    name = "scheme"

    def __init__(self, holding: Batches | PieceStorage | None = None) -> None:
        self.holding: Batches | PieceStorage = Batches() if holding is None else holding

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.holding!r})"

    # ---- the placement model, for the drivers

    @property
    def M(self) -> int:
        """Batches a worker stores."""
        return self.holding.M

    @property
    def pieces(self) -> int:
        """Units a record (1, sub-packets, or the storage's pieces)."""
        return self.holding.pieces

    def piece_bytes(self, record_bytes: int) -> int:
        """Bytes of one unit of records of ``record_bytes``."""
        return self.holding.piece_bytes(record_bytes)

    def dataset(self, dataset: Dataset) -> Dataset:
        """The dataset the transitions deliver: the records, or their pieces."""
        return self.holding.dataset(dataset)

    def start(self, placement: Placement) -> Any:
        """What the workers hold at the first epoch, as the placement this scheme plans from."""
        return self.holding.start(placement)

    def following(self, held: Any, placement_next: Placement) -> Any:
        """What they hold after the delivery of ``placement_next``'s batches."""
        return self.holding.following(held, placement_next)

    def held(self, held: Any, worker: int) -> np.ndarray:
        """The unit ids ``worker`` holds."""
        return self.holding.held(held, worker)

    def owners(self, held: Any) -> np.ndarray:
        """Every record's owner under ``held``."""
        return self.holding.owners(held)

    def records(self, cache: Cache, ids: np.ndarray, record_bytes: int) -> np.ndarray:
        """The rows of records ``ids`` (any order), whole, from a worker's cache; KeyError if not held."""
        return self.holding.records(cache, ids, record_bytes)

    def report(self, rep: Any, dataset: Dataset) -> Any:
        """A report of this scheme's transitions given in records of ``dataset`` (counts in units)."""
        return self.holding.report(rep, dataset)

    # ---- the transition

    def plan(
        self, p_t: Placement, p_t1: Placement, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned:
        tic = time.perf_counter()
        plan = plan_delivery(p_t, p_t1, strategy=strategy)
        lb = lower_bound(plan.S, exact=exact_bound)
        moved = p_t.owner != p_t1.owner
        if dataset.lengths is None:
            uncoded_bytes = int(moved.sum()) * dataset.record_bytes
            coded_bytes = plan.n_symbols * dataset.record_bytes
        else:
            uncoded_bytes = int(dataset.lengths[moved].sum())
            a, b, _ = plan.transmissions()  # a symbol is as long as the longer of its records
            lens_b = np.where(b >= 0, dataset.lengths[np.maximum(b, 0)], 0)
            coded_bytes = int(np.maximum(dataset.lengths[a], lens_b).sum())
        return Planned(
            plan, plan.n_symbols, int(plan.rates.uncoded), int(lb.value), bool(lb.exact),
            coded_bytes, uncoded_bytes, time.perf_counter() - tic,
        )  # fmt: skip

    def need(self, placement_next: Any, worker: int) -> np.ndarray:
        """What ``worker`` must hold after the transition."""
        return self.holding.held(placement_next, worker)

    def prepare(self, cache: Cache, need: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        """A worker, before the delivery starts: what it can make ready without the frames.

        Returns the buffer of its new rows (``out``, or a new one), or None to leave it to
        :meth:`take`.
        """
        return out

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]:
        return check_holdings(
            dataset, [h.ids for h in held], [h.checksums for h in held], placement_next,
            lengths=[h.lengths for h in held],
        )  # fmt: skip


class CodedScheme(Scheme):
    """The coded delivery: the plan's symbols in frames broadcast once to every worker.

    Examples
    --------
    >>> CodedScheme().name
    'coded'
    """

    name = "coded"

    def encode(self, plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        tic = time.perf_counter()
        frames = encode_plan(plan, dataset, epoch=epoch, max_frame_bytes=max_frame_bytes)
        _, b, _ = plan.transmissions()
        return _encoded(frames, plan.n_symbols, int((b >= 0).sum()), tic)

    def take(
        self, link: Any, worker: int, cache: Cache, need: np.ndarray, *, placements: Any = None, **kw: Any
    ) -> Taken:
        return receive_decode(link, worker, cache, need, **kw)


def uncoded_frames(
    dataset: Dataset, p_t: Placement, p_t1: Placement, *, epoch: int, max_frame_bytes: int
) -> dict[int, list[np.ndarray]]:
    """Every point that changes worker, alone, in frames to its new holder.

    Examples
    --------
    >>> from coded_shuffle.codec import load_dataset
    >>> from coded_shuffle.orders import placement_from_owner
    >>> ds = load_dataset(np.eye(4, dtype=np.uint8))
    >>> p0, p1 = placement_from_owner([0, 0, 1, 1], 2), placement_from_owner([0, 1, 0, 1], 2)
    >>> {k: len(fs) for k, fs in uncoded_frames(ds, p0, p1, epoch=1, max_frame_bytes=4).items()}
    {0: 1, 1: 1}
    """
    moved = p_t.owner != p_t1.owner
    per = max(1, max_frame_bytes // max(1, dataset.record_bytes))
    out: dict[int, list[np.ndarray]] = {}
    for j in range(p_t1.K):
        ids = np.flatnonzero(moved & (p_t1.owner == j))
        out[j] = [
            encode_plan_arrays(dataset, ids[lo : lo + per], np.full(min(per, ids.size - lo), -1), epoch=epoch)
            for lo in range(0, ids.size, per)
        ]
    return out


class UncodedScheme(CodedScheme):
    """The uncoded delivery: every record that changes worker, alone, sent to its new holder only.

    Examples
    --------
    >>> UncodedScheme().name
    'uncoded'
    """

    name = "uncoded"

    def encode(self, plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        tic = time.perf_counter()
        by_worker = uncoded_frames(
            dataset, plan.placement_t, plan.placement_t1, epoch=epoch, max_frame_bytes=max_frame_bytes
        )
        return _encoded(by_worker, int(plan.rates.uncoded), 0, tic)


class ExchangeBaseline(Scheme):
    """The workers send each other the records that move, directly; the master sends nothing.

    Needs a transport with ``exchange`` (:class:`~coded_shuffle.transport.MPITransport`).
    Who sends what is known to every worker from the two placements, so nothing is framed and
    nothing can fail to decode: the holdings are checked as for the other schemes.
    """

    name = "alltoallv"

    def encode(self, plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        W = int(plan.rates.uncoded)
        return Encoded(None, W, 0, W, 0, 0, 0, 0.0)

    def take(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Placement, Placement],
        out: np.ndarray | None = None,
        **_: Any,
    ) -> Taken:
        p_t, p_t1 = placements
        k = worker
        t0 = time.perf_counter()
        sent_before = link.exchanged_bytes
        dest = p_t1.owner[cache.ids]
        go = np.flatnonzero(dest != k)
        go = go[np.argsort(dest[go], kind="stable")]  # by destination, ids increasing within each
        recv, _ = link.exchange(cache.data[go], np.bincount(dest[go], minlength=link.K))
        t_recv = time.perf_counter() - t0
        # The records that come to k, from worker 0 first, ids increasing within each sender.
        came = np.flatnonzero((p_t1.owner == k) & (p_t.owner != k))
        came = came[np.argsort(p_t.owner[came], kind="stable")]
        if out is None or out.shape != (need.size, cache.data.shape[1]):
            out = np.empty((need.size, cache.data.shape[1]), dtype=np.uint8)
        stay = dest == k
        out[np.searchsorted(need, cache.ids[stay])] = cache.data[stay]
        out[np.searchsorted(need, came)] = recv
        empty = np.empty(0, np.int64)
        res = DecodeResult(
            worker=k,
            cache=Cache(ids=need, data=out, lengths=None),
            decoded=came,
            bad=empty,
            missing=empty,
            steps=0,
            rounds=0,
            verified=0,
        )
        took = time.perf_counter() - t0 - t_recv
        return Taken(res, 0, t_recv, took, exchanged_bytes=link.exchanged_bytes - sent_before)


#: The schemes by name, as ``--mode`` names them.
SCHEMES: dict[str, Any] = {
    "coded": CodedScheme(),
    "uncoded": UncodedScheme(),
    "alltoallv": ExchangeBaseline(),
}


class StorageScheme(Scheme):
    """The coded delivery when every worker stores ``M > 1`` batches (:mod:`coded_shuffle.storage`).

    The dataset is that of the pieces (:func:`~coded_shuffle.engine.state.storage_dataset`), a
    worker's cache the pieces it stores, and the placements the protocol is given are piece
    placements (:class:`~coded_shuffle.storage.PiecePlacement`), the second one updated from the
    first (:func:`~coded_shuffle.storage.update_storage`). The plan is
    :func:`~coded_shuffle.storage.plan_storage`; its symbols, XORs of pieces, go out in one
    broadcast of frames of many-term symbols (:func:`~coded_shuffle.codec.encode_terms`), and a
    worker solves them (:func:`~coded_shuffle.codec.decode_terms`). Afterwards every worker must
    hold exactly its share of the next piece placement, every piece with its checksum.

    Examples
    --------
    >>> StorageScheme().name
    'coded'
    """

    name = "coded"

    def plan(
        self, p_t: Any, p_t1: Any, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned:
        from ..storage import plan_storage, storage_lower_bound

        tic = time.perf_counter()
        plan = plan_storage(p_t, p_t1.placement, packing=strategy)
        lb = storage_lower_bound(plan.S, M=p_t.M, exact=exact_bound)
        width = dataset.record_bytes
        n, W = plan.n_symbols, int(plan.demand.shape[0])
        return Planned(
            plan, n, W, int(lb.pieces), bool(lb.exact), n * width, W * width, time.perf_counter() - tic
        )

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        from ..codec import encode_terms

        tic = time.perf_counter()
        offsets, terms = plan.offsets, plan.terms
        counts = np.diff(offsets)
        owner = np.asarray(plan.placement_next.owner, dtype=np.int64)
        wanter = owner[terms // plan.storage.pieces]
        frames = encode_terms(
            dataset,
            offsets,
            terms,
            epoch=epoch,
            wanter=wanter,
            K=plan.storage.K,
            max_frame_bytes=max_frame_bytes,
        )
        return _encoded(frames, plan.n_symbols, int((counts > 1).sum()), tic)

    def prepare(self, cache: Cache, need: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        """The pieces a worker keeps, copied into its new rows before the delivery starts."""
        from ..codec import keep_rows

        rows = np.empty((need.size, cache.data.shape[1]), dtype=np.uint8) if out is None else out
        keep_rows(cache, need, rows)
        return rows

    def take(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: Any = None,
        epoch: int,
        checksums: np.ndarray,
        out: np.ndarray | None = None,
        tamper: Tamper | None = None,
        **_: Any,
    ) -> Taken:
        from ..codec import decode_terms

        t0 = time.perf_counter()
        frames, rejected = _received(link, worker, epoch, cache, tamper, lambda f: f.terms is not None)
        t_recv = time.perf_counter() - t0
        res = decode_terms(
            cache,
            frames,
            need=need,
            worker=worker,
            epoch=epoch,
            checksums=checksums,
            out=out,
            kept=out is not None,
        )
        return Taken(res, rejected, t_recv, time.perf_counter() - t0 - t_recv)

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]:
        """Every worker holds exactly its pieces of ``placement_next``, each with its checksum.

        Returns the records checked: those whose every piece the new owner holds and matched.
        """
        from ..errors import InvalidPlanError
        from ..storage import check_piece_placement

        pp = placement_next
        try:
            check_piece_placement(pp)
            ok = len(held) == pp.K
        except InvalidPlanError:
            ok = False
        C = pp.pieces
        good = np.zeros(pp.N, dtype=np.int64)
        owner = np.asarray(pp.placement.owner, dtype=np.int64)
        for k, h in enumerate(held[: pp.K]):
            match = np.array_equal(h.ids, pp.held_by(k)) and np.array_equal(
                h.checksums, dataset.checksums[h.ids]
            )
            ok &= bool(match)
            if match:
                r = h.ids // C
                np.add.at(good, r[owner[r] == k], 1)
        checked = int((good == C).sum())
        return checked, bool(ok and checked == pp.N)


#: The delivery modes a scheme is built for, and the old names they still answer to.
MODES = ("coded", "uncoded", "alltoallv")
_ALIASES: dict[str, str] = {}


def scheme_for(mode: str, *, K: int, storage: int = 1, subpackets: int = 1) -> Scheme:
    """The scheme of delivery ``mode`` on ``K`` workers that store ``storage`` batches each.

    The one factory of schemes: it builds the placement model
    (:func:`~coded_shuffle.engine.holding.holding_for`) and the delivery that serves it, the
    coded plan of :mod:`coded_shuffle.storage` above one batch. Raises, naming the argument, a
    mode it does not know or one that cannot serve that storage.

    Examples
    --------
    >>> scheme_for("coded", K=4, storage=2)
    StorageScheme(PieceStorage(K=4, M=2))
    >>> scheme_for("uncoded", K=4, subpackets=2).pieces
    2
    """
    mode = _ALIASES.get(mode, mode) if isinstance(mode, str) else mode
    if mode not in MODES:
        raise ValueError(f"Argument 'mode' must be one of {', '.join(MODES)}, not {mode!r}.")
    holding = holding_for(K=K, storage=storage, subpackets=subpackets)
    if isinstance(holding, PieceStorage):
        if mode != "coded":
            raise ValueError(
                f"Argument 'mode' must be 'coded' with a storage of M = {holding.M} batches, not {mode!r}."
            )
        return StorageScheme(holding)
    kinds: dict[str, type[Scheme]] = {
        "coded": CodedScheme, "uncoded": UncodedScheme, "alltoallv": ExchangeBaseline,
    }  # fmt: skip
    return kinds[mode](holding)
