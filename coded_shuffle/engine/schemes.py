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

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bounds import lower_bound
from ..codec import (
    DEFAULT_MAX_FRAME_BYTES,
    Cache,
    Dataset,
    DecodeResult,
    decode_worker,
    encode_held,
    encode_plan,
    encode_plan_arrays,
    parse_frame,
)  # fmt: skip
from ..errors import DecodeError
from ..orders import Placement
from ..plan import DeliveryPlan, assign_senders, plan_delivery
from .holding import Batches, PieceStorage, holding_for
from .state import check_holdings

__all__ = [
    "Planned", "Encoded", "Given", "Taken", "Scheme", "CodedScheme", "UncodedScheme", "ExchangeScheme",
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
    #: The busiest download of any delivery: the most bytes a worker misses.
    download_bound_bytes: int = 0
    #: The least busiest upload of an exchange between the workers (:func:`~coded_shuffle.plan.upload_bound`).
    upload_bound_bytes: int = 0


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
class Given:
    """What a worker's half of a scheme sent other workers: payload and framing bytes, and the
    exchange it took part in (``demand``: the units missing, their wanters and holders, and the
    sender of each), for its repairs."""

    bytes: int = 0
    header_bytes: int = 0
    demand: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None


@dataclass(frozen=True)
class Taken:
    """What a worker's half of a scheme rebuilt: the decode result and what it cost.

    ``received_bytes`` counts the payload of the frames it received, ``received_header_bytes``
    the rest of them (framing, and frames it rejected).
    """

    result: DecodeResult
    rejected: int
    deliver_seconds: float
    decode_seconds: float
    received_bytes: int = 0
    received_header_bytes: int = 0


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
    raw: list[np.ndarray] | None = None,
) -> Taken:
    """A worker: receive one delivery's frames, drop the malformed ones, decode its batch ``need``.

    The frames are the master's (``link.receive``), or ``raw`` when the caller has them.
    """
    t0 = time.perf_counter()
    frames, rejected, payload, header = _parsed(
        link.receive(worker) if raw is None else raw, epoch, cache, tamper,
        lambda f: (f.len_a is not None) == variable,
    )  # fmt: skip
    t_recv = time.perf_counter() - t0
    res = decode_worker(cache, frames, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out)
    return Taken(res, rejected, t_recv, time.perf_counter() - t0 - t_recv, payload, header)


def _parsed(
    raw: list[np.ndarray], epoch: int, cache: Cache, tamper: Tamper | None, fits: Callable[[Any], bool]
) -> tuple[list[Any], int, int, int]:
    """A worker's frames of one delivery, parsed, with the rejected count, payload and other bytes.

    A malformed frame, or one that does not ``fit`` the scheme, is dropped and counted (its
    records are then missing, and repaired).
    """
    if tamper is not None:
        raw = tamper(list(raw))
    frames, rejected, payload = [], 0, 0
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
        payload += frame.payload_bytes
    return frames, rejected, payload, sum(int(np.asarray(b).nbytes) for b in raw) - payload


def _empty(cache: Cache) -> Cache:
    return Cache(
        ids=np.empty(0, np.int64),
        data=np.empty((0, cache.data.shape[1]), np.uint8),
        lengths=None if cache.lengths is None else np.empty(0, np.int64),
    )


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
        down, up = self.peer_bounds(p_t, p_t1, dataset)
        return Planned(
            plan, plan.n_symbols, int(plan.rates.uncoded), int(lb.value), bool(lb.exact),
            coded_bytes, uncoded_bytes, time.perf_counter() - tic, down, up,
        )  # fmt: skip

    def need(self, placement_next: Any, worker: int) -> np.ndarray:
        """What ``worker`` must hold after the transition."""
        return self.holding.held(placement_next, worker)

    def peer_bounds(self, p_t: Any, p_t1: Any, dataset: Dataset) -> tuple[int, int]:
        """``(download, upload)`` bounds in bytes of this shuffle: the most bytes a worker misses,
        and the least busiest upload of any exchange between the workers (fractional, rounded up)."""
        units, wanter, holders = self.holding.demand(p_t, p_t1)
        a = assign_senders(wanter, holders, K=p_t.K)
        if dataset.lengths is None:
            width = dataset.record_bytes
            bound = a.upload_bound * width
            return a.max_download * width, -(-bound.numerator // bound.denominator)
        lengths = dataset.lengths[units]  # one holder a record: the upload is forced
        down = np.bincount(wanter, weights=lengths, minlength=p_t.K)
        up = np.bincount(a.sender, weights=lengths, minlength=p_t.K)
        return int(down.max(initial=0)), int(up.max(initial=0))

    def give(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        placements: tuple[Any, Any],
        *,
        epoch: int,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> Given:
        """A worker, before the delivery: offer the link what it sends other workers (none here)."""
        return Given()

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        """The master, before the delivery: ``plan``'s delivery as frames (or none)."""
        raise NotImplementedError  # pragma: no cover - every scheme has its own

    def take(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken:
        """A worker: receive the delivery and rebuild its units ``need`` from ``cache`` and it."""
        raise NotImplementedError  # pragma: no cover - every scheme has its own

    #: Whether the workers re-send in a repair round (then every one offers before any collects).
    peer_repairs = False

    def reoffer(self, link: Any, worker: int, cache: Cache, word: Any, given: Given, *, epoch: int) -> None:
        """A worker, in a repair round whose units the workers re-send: offer its share of them."""

    def resend(self, link: Any, dataset: Dataset, ids: np.ndarray, *, epoch: int) -> None:
        """The master, in a repair round: send ``ids`` again, alone, in one repair frame broadcast."""
        link.send([encode_plan_arrays(dataset, ids, np.full(ids.size, -1), epoch=epoch, repair=True)])

    def retake(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        failed: np.ndarray,
        word: Any,
        given: Given,
        *,
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
    ) -> Taken:
        """A worker, in a repair round (``word``, a :class:`~.protocol.Repair`): rebuild ``failed``
        from what is re-sent (here the master's repair frame)."""
        return receive_decode(
            link, worker, _empty(cache), failed, epoch=epoch, checksums=checksums, variable=variable
        )

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
        self,
        link: Any,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken:
        return receive_decode(
            link, worker, cache, need, epoch=epoch, checksums=checksums, variable=variable, out=out,
            tamper=tamper,
        )  # fmt: skip


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


def _collected(link: Any, worker: int, decode: Callable[[list[np.ndarray]], Taken]) -> Taken:
    """``decode`` of the frames the exchange brings ``worker``, the exchange counted in its delivery time."""
    tic = time.perf_counter()
    raw = link.collect(worker)
    took = time.perf_counter() - tic
    taken = decode(raw)
    return dataclasses.replace(taken, deliver_seconds=taken.deliver_seconds + took)


def _holder_after(holders: int, first: int, steps: int) -> int:
    """The holder ``steps`` places after ``first`` among ``holders`` (a bitmask), cyclically."""
    members = [w for w in range(holders.bit_length()) if (holders >> w) & 1]
    return members[(members.index(first) + steps) % len(members)]


class ExchangeScheme(Scheme):
    """The workers send each other the units they miss, directly; the master sends nothing.

    Each unit a worker misses for its next holdings (a record, or a piece of a storage of ``M``
    batches) comes from one of its holders, chosen by :func:`~coded_shuffle.plan.assign_senders`
    so that the busiest upload is the least possible; every worker computes that choice from the
    two placements, so nothing is negotiated. A worker frames the units it sends as lone symbols
    (:func:`~coded_shuffle.codec.encode_held`) and offers them to the link before the delivery
    (:meth:`give`); the delivery is one exchange among the workers (the link's ``collect``), and
    each worker decodes and checks every unit it received like any frame
    (:func:`~coded_shuffle.codec.decode_worker`): a unit lost or damaged is repaired by the
    protocol's repair rounds. The plan and the bound the report gives are those of the coded
    scheme of the same placement model, for comparison.

    Examples
    --------
    >>> ExchangeScheme().name
    'exchange'
    """

    name = "exchange"

    def __init__(self, holding: Batches | PieceStorage | None = None, *, peers: bool = False) -> None:
        super().__init__(holding)
        #: Whether the job has no master holding the records: repairs then come from the holders.
        self.peers = bool(peers)
        self._coded = (
            StorageScheme(self.holding)
            if isinstance(self.holding, PieceStorage)
            else CodedScheme(self.holding)
        )

    def plan(
        self, p_t: Any, p_t1: Any, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned:
        return self._coded.plan(p_t, p_t1, dataset, strategy=strategy, exact_bound=exact_bound)

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        W = int(plan.rates.uncoded) if isinstance(plan, DeliveryPlan) else int(plan.demand.shape[0])
        return Encoded(None, W, 0, W, 0, 0, 0, 0.0)

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]:
        return self._coded.check(dataset, held, placement_next)

    def give(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        placements: tuple[Any, Any],
        *,
        epoch: int,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> Given:
        """Frame the units this worker sends and offer them to the link (nothing moves yet)."""
        units, wanter, holders = self.holding.demand(*placements)
        sender = assign_senders(wanter, holders, K=placements[0].K).sender
        demand = (units, wanter, holders, sender)
        mine = sender == worker
        units, wanter = units[mine], wanter[mine]
        order = np.lexsort((units, wanter))  # by wanter, units increasing within each
        units, wanter = units[order], wanter[order]
        cut = np.searchsorted(wanter, np.arange(placements[0].K + 1))
        frames = {
            j: encode_held(cache, units[cut[j] : cut[j + 1]], epoch=epoch, max_frame_bytes=max_frame_bytes)
            for j in range(placements[0].K)
            if cut[j + 1] > cut[j]
        }
        link.offer(worker, frames)
        if cache.lengths is None:
            payload = int(units.size) * int(cache.data.shape[1])
        else:
            payload = int(cache.lengths[cache.rows(units)].sum())
        total = sum(int(f.shape[0]) for fs in frames.values() for f in fs)
        return Given(payload, total - payload, demand)

    def resend(self, link: Any, dataset: Dataset, ids: np.ndarray, *, epoch: int) -> None:
        """The master's repair frame; among peers (no master's records) the holders re-send."""
        if not self.peers:
            super().resend(link, dataset, ids, epoch=epoch)

    @property
    def peer_repairs(self) -> bool:  # type: ignore[override]
        """Among peers the holders re-send in a repair round."""
        return self.peers

    def reoffer(self, link: Any, worker: int, cache: Cache, word: Any, given: Given, *, epoch: int) -> None:
        """Offer, of each unit another worker still lacks, those this worker is to re-send in round
        ``r``: the holder ``r`` places after the first sender among its holders."""
        assert given.demand is not None
        units, _, holders, sender = given.demand
        frames = {}
        for j, ids in sorted(word.pending.items()):
            rows = np.searchsorted(units, ids)
            if np.any(rows >= units.size) or np.any(units[np.minimum(rows, units.size - 1)] != ids):
                continue  # not a unit of this exchange: nothing a peer can send (the verdict fails)
            mine = [int(u) for u, r in zip(ids.tolist(), rows.tolist(), strict=True)
                    if _holder_after(int(holders[r]), int(sender[r]), word.round) == worker]  # fmt: skip
            if mine:
                frames[int(j)] = encode_held(cache, np.asarray(mine, dtype=np.int64), epoch=epoch)
        link.offer(worker, frames)

    def retake(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        failed: np.ndarray,
        word: Any,
        given: Given,
        *,
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
    ) -> Taken:
        """Among peers, repair round ``r`` takes every unit still lacking from the holder ``r`` places
        after the first sender among its holders (another holder where there is one), in one
        exchange; with a master, its repair frame."""
        if not self.peers:
            return super().retake(
                link, worker, cache, failed, word, given, epoch=epoch, checksums=checksums, variable=variable
            )
        return _collected(
            link, worker, lambda raw: receive_decode(
                link, worker, _empty(cache), failed, epoch=epoch, checksums=checksums, variable=variable,
                raw=raw,
            ),
        )  # fmt: skip

    def take(
        self,
        link: Any,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken:
        return _collected(
            link, worker, lambda raw: receive_decode(
                link, worker, cache, need, epoch=epoch, checksums=checksums, variable=variable, out=out,
                tamper=tamper, raw=raw,
            ),
        )  # fmt: skip


#: The schemes by name, as ``--mode`` names them.
SCHEMES: dict[str, Any] = {
    "coded": CodedScheme(),
    "uncoded": UncodedScheme(),
    "exchange": ExchangeScheme(),
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
        down, up = self.peer_bounds(p_t, p_t1, dataset)
        return Planned(
            plan,
            n,
            W,
            int(lb.pieces),
            bool(lb.exact),
            n * width,
            W * width,
            time.perf_counter() - tic,
            down,
            up,
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
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken:
        from ..codec import decode_terms

        t0 = time.perf_counter()
        frames, rejected, payload, header = _parsed(
            link.receive(worker), epoch, cache, tamper, lambda f: f.terms is not None
        )
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
        return Taken(res, rejected, t_recv, time.perf_counter() - t0 - t_recv, payload, header)

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
MODES = ("coded", "uncoded", "exchange")
_ALIASES = {"alltoallv": "exchange"}


def scheme_for(mode: str, *, K: int, storage: int = 1, subpackets: int = 1, peers: bool = False) -> Scheme:
    """The scheme of delivery ``mode`` on ``K`` workers that store ``storage`` batches each.

    The one factory of schemes: it builds the placement model
    (:func:`~coded_shuffle.engine.holding.holding_for`) and the delivery that serves it, the
    coded plan of :mod:`coded_shuffle.storage` above one batch. ``peers``: a job without a
    master (the exchange alone), whose repairs come from the other holders. Raises, naming the
    argument, a mode it does not know or one that cannot serve that storage.

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
    if mode == "exchange":
        return ExchangeScheme(holding, peers=peers)
    if peers:
        raise ValueError(f"Argument 'peers' must be False for mode {mode!r}: its master holds the records.")
    if isinstance(holding, PieceStorage):
        if mode == "uncoded":
            raise ValueError(
                f"Argument 'mode' must be 'coded' or 'exchange' with a storage of M = {holding.M} batches, "
                f"not {mode!r}."
            )
        return StorageScheme(holding)
    return CodedScheme(holding) if mode == "coded" else UncodedScheme(holding)
