"""The master's deliveries of one batch a worker: coded (one broadcast) and uncoded (unicast)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ...codec import (
    Cache,
    Dataset,
    encode_plan,
    encode_plan_arrays,
)  # fmt: skip
from ...codec._common import _frame_cuts
from ...orders import Placement
from ...plan import DeliveryPlan
from ...transport import Transport
from ._base import Encoded, SchemeBase, Taken, Tamper, _encoded, receive_decode


class CodedScheme(SchemeBase):
    """The coded delivery: the plan's symbols in frames broadcast once to every worker.

    Examples
    --------
    >>> CodedScheme().name
    'coded'
    """

    name = "coded"
    packs = True

    def encode(self, plan: DeliveryPlan, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        tic = time.perf_counter()
        frames = encode_plan(plan, dataset, epoch=epoch, max_frame_bytes=max_frame_bytes)
        _, b, _ = plan.transmissions()
        return _encoded(frames, plan.n_symbols, int((b >= 0).sum()), tic)

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
        return receive_decode(
            link, worker, cache, need, epoch=epoch, checksums=checksums, variable=variable, out=out,
            out_lengths=out_lengths, tamper=tamper,
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
    out: dict[int, list[np.ndarray]] = {}
    for j in range(p_t1.K):
        ids = np.flatnonzero(moved & (p_t1.owner == j))
        payload = None if dataset.lengths is None else dataset.lengths[ids]
        out[j] = [
            encode_plan_arrays(dataset, ids[lo:hi], np.full(hi - lo, -1), epoch=epoch)
            for lo, hi in _frame_cuts(ids.size, dataset.record_bytes, max_frame_bytes, payload)
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
