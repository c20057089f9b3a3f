"""The split delivery: the master's coded multicast of a share of the moved records, and the workers'
exchange of the rest, at once."""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any

import numpy as np

from ...bounds import lower_bound
from ...codec import DEFAULT_MAX_FRAME_BYTES, Cache, Dataset
from ...matrix import shuffle_matrix
from ...network import Network, split_share
from ...orders import Placement, placement_from_owner
from ...plan import DeliveryPlan, plan_delivery
from ...transport import Transport
from ..holding import Batches, Holding
from ._base import Encoded, Given, SchemeBase, Taken, Tamper, receive_decode
from .coded import CodedScheme
from .exchange import ExchangeScheme, _collected


def split_placements(p_t: Placement, p_t1: Placement, share: float) -> tuple[Placement, Placement]:
    """The two halves of the shuffle ``p_t -> p_t1`` whose master codes ``share`` of the moved records.

    Of the records that move from worker ``i`` to worker ``j`` (``S[i][j]`` of them), the first
    ``floor(share S[i][j] + 1/2)`` in id order are the coded half's, the rest the exchange's. Each
    half is a placement that moves its records to their new holder and leaves every other record
    where it was, so that the two deliveries together bring every worker its batch of ``p_t1``.

    Examples
    --------
    >>> p0 = placement_from_owner([0, 0, 0, 0, 1, 1, 1, 1], 2)
    >>> p1 = placement_from_owner([1, 1, 1, 0, 0, 0, 0, 1], 2)
    >>> coded, exchanged = split_placements(p0, p1, 0.5)
    >>> coded.owner.tolist(), exchanged.owner.tolist()
    ([1, 1, 0, 0, 0, 0, 1, 1], [0, 0, 1, 0, 1, 1, 0, 1])
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"Argument 'share' must be from 0 to 1, not {share!r}.")
    if p_t.K != p_t1.K or p_t.N != p_t1.N:
        raise ValueError("Arguments 'p_t' and 'p_t1' must place the same records on the same workers.")
    K = p_t.K
    old, new = np.asarray(p_t.owner, np.int64), np.asarray(p_t1.owner, np.int64)
    moved = np.flatnonzero(old != new)  # increasing ids
    group = old[moved] * K + new[moved]
    order = np.argsort(group, kind="stable")  # by group, ids increasing within each
    counts = np.bincount(group, minlength=K * K)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    rank = np.empty(moved.size, np.int64)
    rank[order] = np.arange(moved.size) - np.repeat(starts, counts)
    coded = rank < np.floor(share * counts[group] + 0.5).astype(np.int64)
    first, second = old.copy(), old.copy()
    first[moved[coded]] = new[moved[coded]]
    second[moved[~coded]] = new[moved[~coded]]
    return placement_from_owner(first, K), placement_from_owner(second, K)


class SplitScheme(SchemeBase):
    """The master codes a share ``a`` of every group of moved records and multicasts it, while the
    workers exchange the rest directly: the two use different uplinks (the master's, the
    workers') and share the downlinks, so on a network where the master multicasts and the
    workers' uplinks are slow the two together finish sooner than either alone
    (:func:`~coded_shuffle.network.split_time`).

    ``a`` is :func:`~coded_shuffle.network.split_share` of the transition's shuffle matrix on
    ``network``, which every rank computes alike; :func:`split_placements` cuts the shuffle into
    a coded half (planned and encoded as :class:`CodedScheme` plans any shuffle) and an exchanged
    half (:class:`ExchangeScheme`'s units and senders). A worker takes the exchange first, then
    the master's frames, which a multicast receiver gathers on its own thread meanwhile; it
    decodes both at once. Repairs come from the master. The plan and the bound the report gives
    are those of the coded scheme of the whole shuffle, for comparison, and beside them the
    split's own bound on its busiest uplink (``split_uplink_bound``: its coded half's genie
    lower bound, or its exchanged half's least busiest upload, the larger). One batch a worker only.

    Examples
    --------
    >>> SplitScheme(Network.parse("master=1000,up=100,down=1000,multicast")).name
    'split'
    """

    name = "split"

    def __init__(self, network: Network, holding: Holding | None = None) -> None:
        if not isinstance(network, Network) or not network.multicast:
            raise ValueError(
                "Argument 'network' must be a Network that multicasts for mode 'split': the master's "
                f"datagrams and the workers' exchange run at once only there, not {network!r}."
            )
        super().__init__(holding)
        if not isinstance(self.holding, Batches) or self.holding.pieces != 1:
            raise ValueError(
                f"Argument 'holding' must be one batch of whole records for a split, not {holding!r}."
            )
        self.network = network
        self._coded = CodedScheme(self.holding)
        self._peers = ExchangeScheme(self.holding)
        self._halves: tuple[Any, Any, tuple[Placement, Placement]] | None = None

    def __repr__(self) -> str:
        return f"SplitScheme({str(self.network)!r})"

    def halves(self, p_t: Placement, p_t1: Placement) -> tuple[Placement, Placement]:
        """The coded and the exchanged half of ``p_t -> p_t1`` (:func:`split_placements`), computed
        once for a pair of placements."""
        last = self._halves
        if last is None or last[0] is not p_t or last[1] is not p_t1:
            share = split_share(shuffle_matrix(p_t, p_t1), network=self.network)
            last = (p_t, p_t1, split_placements(p_t, p_t1, share))
            self._halves = last
        return last[2]

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        """The coded half's symbols, planned here from the whole shuffle's ``plan``."""
        assert isinstance(plan, DeliveryPlan)
        tic = time.perf_counter()
        coded, exchanged = self.halves(plan.placement_t, plan.placement_t1)
        part = plan_delivery(plan.placement_t, coded, strategy=plan.rates.strategy, sizes=dataset.lengths)
        encoded = self._coded.encode(part, dataset, epoch=epoch, max_frame_bytes=max_frame_bytes)
        seconds = time.perf_counter() - tic
        # The split's own bound, for the report (before the delivery's clock starts): neither half
        # can send less on its uplinks than its own bound.
        halves_bound = max(
            int(lower_bound(part.S).value),
            math.ceil(self._peers.exchange_plan(plan.placement_t, exchanged)[3].upload_bound),
        )
        return dataclasses.replace(encoded, encode_seconds=seconds, split_uplink_bound=halves_bound)

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
        """Offer the link the exchanged half's units this worker sends."""
        half = (placements[0], self.halves(*placements)[1])
        return self._peers.give(link, worker, cache, half, epoch=epoch, max_frame_bytes=max_frame_bytes)

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
        return _collected(  # the exchange, then the master's frames, gathered meanwhile
            link, worker, lambda raw: receive_decode(
                link, worker, cache, need, epoch=epoch, checksums=checksums, variable=variable, out=out,
                out_lengths=out_lengths, tamper=tamper, raw=raw,
            ), master=True,
        )  # fmt: skip
