"""Schemes: what the master sends in one transition and how a worker takes it in.

A scheme is the one object the transition protocol (:mod:`coded_shuffle.engine.protocol`) is
given. It has two halves:

``encode(plan, dataset, *, epoch, max_frame_bytes) -> Encoded``
    the master's: this shuffle's delivery as frames, made before the delivery is timed; the
    protocol then puts them on the link with :func:`send`;
``take(link, worker, cache, need, ...) -> Taken``
    a worker's: receive what was sent and rebuild its next batch from its cache.

:class:`CodedScheme` sends the coded plan (order-2 XORs, cycle symbols, lone leftovers) in one
broadcast; :class:`UncodedScheme` sends every record that changes worker alone, to its new holder
only; :class:`ExchangeBaseline` is the alternative without a master: the workers send each other
the records that move (``MPI_Alltoallv``). A new scheme is a new object of this kind, never a new
copy of the transition loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codec import Cache, Dataset, DecodeResult, decode_worker, encode_plan, encode_plan_arrays, parse_frame
from ..errors import DecodeError
from ..orders import Placement
from ..plan import DeliveryPlan

__all__ = [
    "Encoded", "Taken", "CodedScheme", "UncodedScheme", "ExchangeBaseline", "SCHEMES", "send",
    "uncoded_frames",
]  # fmt: skip

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
    raw = link.receive(worker)
    t_recv = time.perf_counter() - t0
    if tamper is not None:
        raw = tamper(list(raw))
    frames, rejected = [], 0
    for buf in raw:
        try:
            frame = parse_frame(buf, epoch=epoch, record_bytes=int(cache.data.shape[1]))
        except DecodeError:
            rejected += 1
            continue
        if (frame.len_a is not None) != variable:
            rejected += 1
            continue
        frames.append(frame)
    res = decode_worker(cache, frames, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out)
    return Taken(res, rejected, t_recv, time.perf_counter() - t0 - t_recv)


class CodedScheme:
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


class ExchangeBaseline:
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
