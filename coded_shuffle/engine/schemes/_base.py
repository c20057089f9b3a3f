"""What every scheme shares: the plan, the delivery and what a worker took of it, and :class:`Scheme`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ...bounds import lower_bound
from ...codec import (
    DEFAULT_MAX_FRAME_BYTES,
    Cache,
    Dataset,
    DecodeResult,
    decode_worker,
    encode_plan_arrays,
    frame_sizes,
    parse_frame,
)  # fmt: skip
from ...errors import DecodeError
from ...orders import Placement
from ...plan import SenderAssignment, assign_senders, plan_delivery, upload_bound
from ...transport import Transport
from ..holding import Batches, Holding
from ..state import check_holdings


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


class Compared(Planned):
    """A scheme's own plan, whose figures of another scheme's plan (``coded_symbols``,
    ``coded_bytes``, ``lower_bound``, ``lower_bound_exact``: the coded plan the report compares
    with) are made when first read: by the report, after the delivery, off its critical path.
    They are None where that plan cannot be made (``compare()`` returns None).
    """

    def __init__(self, plan: Any, *, compare: Callable[[], Planned | None], **own: Any) -> None:
        for name, value in {"plan": plan, **own}.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_compare", compare)
        object.__setattr__(self, "_other", None)

    def _of_other(self, name: str) -> Any:
        other = self.__dict__["_other"]
        if other is None:
            other = (self.__dict__["_compare"](),)
            object.__setattr__(self, "_other", other)
        return None if other[0] is None else getattr(other[0], name)

    coded_symbols = property(lambda self: self._of_other("coded_symbols"))  # type: ignore[assignment]
    coded_bytes = property(lambda self: self._of_other("coded_bytes"))  # type: ignore[assignment]
    lower_bound = property(lambda self: self._of_other("lower_bound"))  # type: ignore[assignment]
    lower_bound_exact = property(lambda self: self._of_other("lower_bound_exact"))  # type: ignore[assignment]


#: ``(units, wanters, holder bitmasks, the assignment of senders)`` of one shuffle's exchange.
ExchangePlan = tuple[np.ndarray, np.ndarray, np.ndarray, SenderAssignment]

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
    #: A split's own bound on its busiest sending uplink, in units (the larger of its coded half's
    #: genie lower bound and its exchanged half's least busiest upload); None for the other modes.
    split_uplink_bound: int | None = None


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
    sizes = [frame_sizes(f) for f in flat]  # the counts the encoder wrote in each header
    return Encoded(
        frames=frames,
        planned_symbols=planned,
        xor_symbols=xor,
        lone_symbols=planned - xor,
        payload_bytes=sum(z.payload_bytes for z in sizes),
        header_bytes=sum(z.header_bytes for z in sizes),
        n_frames=len(flat),
        encode_seconds=time.perf_counter() - tic,
    )


def send(link: Transport, encoded: Encoded) -> float:
    """Put ``encoded`` on ``link`` (a broadcast, or unicast to each worker); return the seconds."""
    tic = time.perf_counter()
    if isinstance(encoded.frames, dict):
        link.send_to(encoded.frames)
    elif encoded.frames is not None:
        link.send(encoded.frames)
    return time.perf_counter() - tic


def receive_decode(
    link: Transport,
    worker: int,
    cache: Cache,
    need: np.ndarray,
    *,
    epoch: int,
    checksums: np.ndarray,
    variable: bool,
    out: np.ndarray | None = None,
    out_lengths: np.ndarray | None = None,
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
    res = decode_worker(
        cache, frames, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out,
        out_lengths=out_lengths,
    )  # fmt: skip
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
    frames, payload = [], 0
    for buf in raw:
        frame = _parsed_one(buf, epoch, cache, fits)
        if frame is not None:
            frames.append(frame)
            payload += frame.payload_bytes
    return frames, len(raw) - len(frames), payload, sum(int(np.asarray(b).nbytes) for b in raw) - payload


def _parsed_one(buf: np.ndarray, epoch: int, cache: Cache, fits: Callable[[Any], bool]) -> Any:
    """One frame of a delivery parsed, or None if it is malformed or does not ``fit`` (:func:`_parsed`)."""
    try:
        frame = parse_frame(buf, epoch=epoch, record_bytes=cache.width, unpack=False)
    except DecodeError:
        return None
    return frame if fits(frame) else None


def _empty(cache: Cache) -> Cache:
    return Cache(
        ids=np.empty(0, np.int64),
        data=np.empty((0, cache.width), np.uint8),
        lengths=None if cache.lengths is None else np.empty(0, np.int64),
    )


@runtime_checkable
class Scheme(Protocol):
    """The interface the transition protocol and the drivers use of a scheme (the package
    docstring says what each half does); :class:`SchemeBase` implements what schemes share.

    Every member is declared with its exact signature: a scheme that takes other arguments, or
    drops one, fails the contract tests (``tests/engine/test_interfaces.py``).
    """

    name: str
    holding: Holding
    #: Whether it runs in a job of peers (no master holds the records; repairs come from holders).
    peers: bool
    #: Whether a worker decodes a packed cache (records of many sizes end to end, :class:`Cache`)
    #: into a packed batch, given a spare packed buffer; the others write rows of the width.
    packs: bool

    @property
    def peer_repairs(self) -> bool:
        """Whether the workers re-send in a repair round (then every one offers before any collects)."""

    # ---- the placement model
    @property
    def M(self) -> int: ...

    @property
    def pieces(self) -> int: ...

    def piece_bytes(self, record_bytes: int) -> int: ...

    def dataset(self, dataset: Dataset) -> Dataset: ...

    def start(self, placement: Placement) -> Any: ...

    def following(self, held: Any, placement_next: Placement) -> Any: ...

    def held(self, held: Any, worker: int) -> np.ndarray: ...

    def owners(self, held: Any) -> np.ndarray: ...

    def records(self, cache: Cache, ids: np.ndarray, record_bytes: int) -> np.ndarray: ...

    # ---- the master's half
    def plan(
        self, p_t: Placement, p_t1: Placement, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned: ...

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded: ...

    def resend(self, link: Transport, dataset: Dataset, ids: np.ndarray, *, epoch: int) -> None: ...

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]: ...

    # ---- a worker's half
    def need(self, placement_next: Any, worker: int) -> np.ndarray: ...

    def prepare(self, cache: Cache, need: np.ndarray, out: np.ndarray | None) -> np.ndarray | None: ...

    def give(
        self,
        link: Transport,
        worker: int,
        cache: Cache,
        placements: tuple[Any, Any],
        *,
        epoch: int,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> Given: ...

    def take(
        self,
        link: Transport,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        out_lengths: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken: ...

    def reoffer(
        self, link: Transport, worker: int, cache: Cache, word: Any, given: Given, *, epoch: int
    ) -> None: ...

    def retake(
        self,
        link: Transport,
        worker: int,
        cache: Cache,
        failed: np.ndarray,
        word: Any,
        given: Given,
        *,
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
    ) -> Taken: ...


class SchemeBase(Scheme):
    """What every scheme shares: its placement model, the coded plan of the shuffle, its bound,
    and the check of holdings.

    A scheme owns its placement model (:mod:`coded_shuffle.engine.holding`), given when it is
    built (:func:`scheme_for`): what the workers hold at the start and after each transition,
    what each must hold, how whole records are read back, and the report's units.
    """

    name = "scheme"
    peers = False
    packs = False

    def __init__(self, holding: Holding | None = None) -> None:
        self.holding: Holding = Batches() if holding is None else holding
        self._exchange: tuple[Any, Any, ExchangePlan] | None = None

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

    # ---- the transition

    def plan(
        self, p_t: Placement, p_t1: Placement, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned:
        tic = time.perf_counter()
        plan = plan_delivery(p_t, p_t1, strategy=strategy, sizes=dataset.lengths)  # similar sizes paired
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

    def exchange_plan(self, p_t: Any, p_t1: Any) -> ExchangePlan:
        """The units missing for ``p_t1``, their wanters and holders, and who sends each
        (:func:`~coded_shuffle.plan.assign_senders`). Computed once for a pair of placements: the
        master's bounds and every worker of this process (in-process, all ``K``) share it."""
        last = self._exchange
        if last is None or last[0] is not p_t or last[1] is not p_t1:
            units, wanter, holders = self.holding.demand(p_t, p_t1)
            lengths = getattr(self.holding, "unit_lengths", None)  # pieces of many sizes: in bytes
            sizes = None if lengths is None else lengths[units]
            last = (p_t, p_t1, (units, wanter, holders, self.senders(wanter, holders, K=p_t.K, sizes=sizes)))
            self._exchange = last
        return last[2]

    def senders(
        self, wanter: np.ndarray, holders: np.ndarray, *, K: int, sizes: np.ndarray | None = None
    ) -> SenderAssignment:  # fmt: skip
        """Who sends each missing unit: the least busiest upload
        (:func:`~coded_shuffle.plan.assign_senders`, in bytes where the units' ``sizes`` differ);
        a scheme on racks chooses by their links."""
        return assign_senders(wanter, holders, K=K, sizes=sizes)

    def peer_bounds(self, p_t: Any, p_t1: Any, dataset: Dataset) -> tuple[int, int]:
        """``(download, upload)`` bounds in bytes of this shuffle: the most bytes a worker misses,
        and the least busiest upload of any exchange between the workers (fractional, rounded up)."""
        units, wanter, holders, a = self.exchange_plan(p_t, p_t1)
        if dataset.lengths is None:
            width = dataset.record_bytes
            bound = a.upload_bound * width
            return a.max_download * width, -(-bound.numerator // bound.denominator)
        lengths = dataset.lengths[units]  # units of many sizes: the bound weighted by their bytes
        down = np.bincount(wanter, weights=lengths, minlength=p_t.K)
        bound = upload_bound(holders, K=p_t.K, sizes=lengths)
        return int(down.max(initial=0)), -(-bound.numerator // bound.denominator)

    def give(
        self,
        link: Transport,
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
        link: Transport,
        worker: int,
        cache: Cache,
        need: np.ndarray,
        *,
        placements: tuple[Any, Any],
        epoch: int,
        checksums: np.ndarray,
        variable: bool,
        out: np.ndarray | None = None,
        out_lengths: np.ndarray | None = None,
        tamper: Tamper | None = None,
    ) -> Taken:
        """A worker: receive the delivery and rebuild its units ``need`` from ``cache`` and it."""
        raise NotImplementedError  # pragma: no cover - every scheme has its own

    #: Whether the workers re-send in a repair round (then every one offers before any collects).
    peer_repairs = False

    def reoffer(
        self, link: Transport, worker: int, cache: Cache, word: Any, given: Given, *, epoch: int
    ) -> None:
        """A worker, in a repair round whose units the workers re-send: offer its share of them."""

    def resend(self, link: Transport, dataset: Dataset, ids: np.ndarray, *, epoch: int) -> None:
        """The master, in a repair round: send ``ids`` again, alone, in one repair frame broadcast."""
        frame = encode_plan_arrays(dataset, ids, np.full(ids.size, -1), epoch=epoch, repair=True)
        link.send([frame], repair=True)

    def retake(
        self,
        link: Transport,
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
