"""The workers' exchange: each receives what it misses from a holder, with a master or among peers."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ..._threads import behind
from ...codec import (
    DEFAULT_MAX_FRAME_BYTES,
    Cache,
    Dataset,
    encode_held,
)  # fmt: skip
from ...plan import DeliveryPlan, SenderAssignment, assign_senders_racks, exchange_rounds, holder_set
from ...transport import Transport
from ..holding import Holding, PieceStorage
from ._base import (
    Compared,
    Encoded,
    Given,
    Planned,
    SchemeBase,
    Taken,
    Tamper,
    _empty,
    _parsed_one,
    receive_decode,
)  # fmt: skip
from .storage import coded_scheme


def _collected(
    link: Transport, worker: int, decode: Callable[[list[np.ndarray]], Taken], *, master: bool = False
) -> Taken:
    """``decode`` of the frames the exchange brings ``worker`` (then, with ``master``, the master's
    frames too), the exchange and that reception counted in its delivery time."""
    tic = time.perf_counter()
    raw = link.collect(worker)
    if master:
        raw = [*raw, *link.receive(worker)]
    took = time.perf_counter() - tic
    taken = decode(raw)
    return dataclasses.replace(taken, deliver_seconds=taken.deliver_seconds + took)


def _holder_after(holders: int, first: int, steps: int) -> int:
    """The holder ``steps`` places after ``first`` among ``holders`` (a bitmask), cyclically."""
    members = [w for w in range(holders.bit_length()) if (holders >> w) & 1]
    return members[(members.index(first) + steps) % len(members)]


class ExchangeScheme(SchemeBase):
    """The workers send each other the units they miss, directly; the master sends nothing.

    Each unit a worker misses for its next holdings (a record, or a piece of a storage of ``M``
    batches) comes from one of its holders, chosen by :func:`~coded_shuffle.plan.assign_senders`
    so that the busiest upload is the least possible; every worker computes that choice from the
    two placements, so nothing is negotiated. A worker frames the units it sends as lone symbols
    (:func:`~coded_shuffle.codec.encode_held`) and offers them to the link before the delivery
    (:meth:`give`), on a link whose ``exchange_schedule`` is ``"rounds"`` with the rounds they go
    in (:meth:`rounds`: matchings in which every worker sends once and receives once, at the
    busiest port's bound in a fluid model); the delivery is
    one exchange among the workers (the link's ``collect_each``), and each worker stores and
    checks every unit it received as its round comes (:meth:`take`,
    :class:`~coded_shuffle.codec.HeldDecoder`, the result
    :func:`~coded_shuffle.codec.decode_worker` gives): a unit lost or damaged is repaired by the
    protocol's repair rounds. The coded load and bound the report gives are those of the coded
    scheme of the same placement model, for comparison, made after the delivery (:meth:`plan`).

    Examples
    --------
    >>> ExchangeScheme().name
    'exchange'
    """

    name = "exchange"

    def __init__(self, holding: Holding | None = None, *, peers: bool = False, network: Any = None) -> None:
        #: The network whose racks the senders are chosen on (:meth:`senders`), or None; a storage's
        #: pieces are then placed across its racks too (:class:`~coded_shuffle.engine.holding.PieceStorage`).
        self.network = network if getattr(network, "racks", None) is not None and network.up else None
        if self.network is not None and isinstance(holding, PieceStorage):
            holding = dataclasses.replace(holding, racks=tuple(self.network.racks))
        super().__init__(holding)
        #: Whether the job has no master holding the records: repairs then come from the holders.
        self.peers = bool(peers)
        self._coded = coded_scheme(self.holding)  # the plan and bound the report compares with
        self._rounds: tuple[Any, Any, list[dict[int, tuple[int, int]]]] | None = None

    def senders(
        self, wanter: np.ndarray, holders: np.ndarray, *, K: int, sizes: np.ndarray | None = None
    ) -> SenderAssignment:  # fmt: skip
        """Who sends each missing unit: on a network with racks, the least time of the busiest
        link of the hierarchy (:func:`~coded_shuffle.plan.assign_senders_racks`), else the least
        busiest upload; in bytes where the units' ``sizes`` differ."""
        net = self.network
        if net is None:
            return super().senders(wanter, holders, K=K, sizes=sizes)
        net.check_workers(K)
        return assign_senders_racks(wanter, holders, K=K, rack=net.rack_of(), up=net.up,
                                    rack_up=net.rack_up, rack_down=net.rack_down, sizes=sizes)  # fmt: skip

    def plan(
        self, p_t: Any, p_t1: Any, dataset: Dataset, *, strategy: str, exact_bound: bool | None
    ) -> Planned:
        """The exchange's own plan: who sends each missing unit (:meth:`exchange_plan`, made once
        for the master and every worker of this process), with its bounds. The coded plan the
        report compares with (its load and genie bound) is made only when the report reads it,
        after the delivery; None where it cannot be made (a storage beyond
        :data:`~coded_shuffle.storage.STORAGE_MAX_K` workers)."""
        tic = time.perf_counter()
        units = self.exchange_plan(p_t, p_t1)[0]
        down, up = self.peer_bounds(p_t, p_t1, dataset)
        if dataset.lengths is None:
            uncoded_bytes = int(units.size) * dataset.record_bytes
        else:
            uncoded_bytes = int(dataset.lengths[units].sum())

        def compare() -> Planned | None:
            from ...storage import STORAGE_MAX_K

            if self.M > 1 and p_t.K > STORAGE_MAX_K:
                return None
            # its bounds (not read: the exchange's own are reported) from this exchange's senders
            self._coded._exchange = self._exchange  # type: ignore[attr-defined]
            return self._coded.plan(p_t, p_t1, dataset, strategy=strategy, exact_bound=exact_bound)

        return Compared(
            self.exchange_plan(p_t, p_t1), compare=compare, uncoded_symbols=int(units.size),
            uncoded_bytes=uncoded_bytes, seconds=time.perf_counter() - tic,
            download_bound_bytes=down, upload_bound_bytes=up,
        )  # fmt: skip

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        if isinstance(plan, tuple):  # its own plan: the units missing, all sent by the workers
            W = int(plan[0].size)
        else:  # another scheme's plan of the same shuffle (a job of several modes)
            W = int(plan.rates.uncoded) if isinstance(plan, DeliveryPlan) else int(plan.demand.shape[0])
        return Encoded(None, W, 0, W, 0, 0, 0, 0.0)

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]:
        return self._coded.check(dataset, held, placement_next)

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
        """Frame the units this worker sends and offer them to the link (nothing moves yet)."""
        units, wanter, holders, assigned = self.exchange_plan(*placements)
        demand = (units, wanter, holders, assigned.sender)
        sender = assigned.sender
        mine = sender == worker
        units, wanter = units[mine], wanter[mine]
        order = np.lexsort((units, wanter))  # by wanter, units increasing within each
        units, wanter = units[order], wanter[order]
        cut = np.searchsorted(wanter, np.arange(placements[0].K + 1)).tolist()
        frames: dict[int, list[np.ndarray]] = {}
        if getattr(link, "exchange_schedule", None) != "rounds":  # all at once: a pair's units together
            for j in range(placements[0].K):
                if cut[j + 1] > cut[j]:
                    units_j = units[cut[j] : cut[j + 1]]
                    frames[j] = encode_held(cache, units_j, epoch=epoch, max_frame_bytes=max_frame_bytes)
            link.offer(worker, frames)
            return self._given(cache, units, frames, demand)
        rounds = []  # this worker's (to, frames, from) each round; each pair's units in order
        for r in self.rounds(*placements):
            to, n = r.get(worker, (-1, 0))
            if n:
                part = encode_held(
                    cache, units[cut[to] : cut[to] + n], epoch=epoch, max_frame_bytes=max_frame_bytes
                )
                frames.setdefault(to, []).extend(part)
                cut[to] += n
            frm = next((i for i, (j, _) in r.items() if j == worker), -1)
            rounds.append((to, len(part) if n else 0, frm))
        link.offer(worker, frames, rounds=rounds)
        return self._given(cache, units, frames, demand)

    @staticmethod
    def _given(cache: Cache, units: np.ndarray, frames: dict[int, list[np.ndarray]], demand: Any) -> Given:
        """What a worker offered: the payload of ``units`` and the other bytes of ``frames``."""
        if cache.lengths is None:
            payload = int(units.size) * cache.width
        else:
            payload = int(cache.lengths[cache.rows(units)].sum())
        total = sum(int(f.shape[0]) for fs in frames.values() for f in fs)
        return Given(payload, total - payload, demand)

    def rounds(self, p_t: Any, p_t1: Any) -> list[dict[int, tuple[int, int]]]:
        """The exchange's rounds (:func:`~coded_shuffle.plan.exchange_rounds` of the units each
        sender sends each wanter), computed once for a pair of placements, the same on every worker."""
        last = self._rounds
        if last is None or last[0] is not p_t or last[1] is not p_t1:
            _, wanter, _, assigned = self.exchange_plan(p_t, p_t1)
            K = p_t.K
            D = np.bincount(assigned.sender * K + wanter, minlength=K * K).reshape(K, K)
            last = (p_t, p_t1, exchange_rounds(D))
            self._rounds = last
        return last[2]

    def resend(self, link: Transport, dataset: Dataset, ids: np.ndarray, *, epoch: int) -> None:
        """The master's repair frame; among peers (no master's records) the holders re-send."""
        if not self.peers:
            super().resend(link, dataset, ids, epoch=epoch)

    @property
    def peer_repairs(self) -> bool:  # type: ignore[override]
        """Among peers the holders re-send in a repair round."""
        return self.peers

    def reoffer(
        self, link: Transport, worker: int, cache: Cache, word: Any, given: Given, *, epoch: int
    ) -> None:
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
                    if _holder_after(holder_set(holders, r), int(sender[r]), word.round) == worker]  # fmt: skip # noqa: E501
            if mine:
                frames[int(j)] = encode_held(cache, np.asarray(mine, dtype=np.int64), epoch=epoch)
        link.offer(worker, frames)

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

    def prepare(self, cache: Cache, need: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        """The records a worker keeps, copied into its new rows before the delivery starts."""
        from ...codec import keep_rows

        rows = np.empty((need.size, cache.width), dtype=np.uint8) if out is None else out
        keep_rows(cache, need, rows)
        return rows

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
        """Decode the frames the exchange brings as they come: in rounds, each round's records
        stored into the new batch and checked against their checksums on a second thread while
        the next round travels (:class:`~coded_shuffle.codec.HeldDecoder`), so that only the last
        round's are left after the delivery; all at once, after the all-to-all. A frame that does
        not parse, or is not of records sent alone, is rejected (its records are repaired)."""
        from ...codec import HeldDecoder

        t0 = time.perf_counter()
        dec = HeldDecoder(
            cache, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out, kept=out is not None
        )
        raw = link.collect_each(worker) if tamper is None else iter(tamper(list(link.collect(worker))))
        seen = [0, 0, 0]  # frames rejected, payload bytes and all bytes
        last = [t0]  # when the last frame was in

        def arrived() -> Iterator[np.ndarray]:
            yield from raw
            last[0] = time.perf_counter()

        def add(buf: np.ndarray) -> None:  # on the second thread: parsed, stored, checked
            seen[2] += int(np.asarray(buf).nbytes)
            frame = _parsed_one(buf, epoch, cache, lambda f: (f.len_a is not None) == variable and _lone(f))
            if frame is None:
                seen[0] += 1
                return
            seen[1] += frame.payload_bytes
            dec.add(frame)

        behind(arrived(), add)
        res = dec.finish()
        rejected, payload, total = seen
        return Taken(res, rejected, last[0] - t0, time.perf_counter() - last[0], payload, total - payload)


def _lone(frame: Any) -> bool:
    """Whether every entry of ``frame`` is a record sent alone (all a peer sends in the exchange)."""
    return not bool(np.any(frame.b >= 0))
