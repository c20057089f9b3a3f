"""The coded delivery of a storage of ``M > 1`` batches a worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from ..._threads import behind
from ...codec import (
    Cache,
    Dataset,
)  # fmt: skip
from ...transport import Transport
from ..holding import Holding, PieceStorage
from ._base import Encoded, Planned, Scheme, SchemeBase, Taken, Tamper, _encoded, _parsed_one
from .coded import CodedScheme

#: The largest payload of a frame of a storage's delivery: a worker solves each frame while the
#: next is on its way, so that little is left after the last one. At K = 8 on namespaced hosts
#: (256 MiB) the decoding after the last frame took 0.058-0.069 s with 4 MiB, 0.058-0.059 s with
#: 8 MiB and 0.079 s with 16 MiB; in process, where every frame is there at once, each frame
#: costs about 0.3 ms a worker.
STREAMED_FRAME_BYTES = 8 << 20


class StorageScheme(SchemeBase):
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
        from ...codec import symbol_lengths
        from ...storage import plan_storage

        tic = time.perf_counter()
        lengths = dataset.lengths  # pieces of many sizes: grouped by size, each symbol as its longest
        plan = plan_storage(p_t, p_t1.placement, packing=strategy, sizes=lengths)
        lb = plan.lower_bound(exact=exact_bound)
        width = dataset.record_bytes
        n, W = plan.n_symbols, int(plan.demand.shape[0])
        coded, uncoded = n * width, W * width
        if lengths is not None:
            coded = int(symbol_lengths(plan.offsets, plan.terms, lengths).sum())
            uncoded = int(np.asarray(lengths)[plan.demand[:, 0]].sum())
        down, up = self.peer_bounds(p_t, p_t1, dataset)
        return Planned(
            plan,
            n,
            W,
            int(lb.pieces),
            bool(lb.exact),
            coded,
            uncoded,
            time.perf_counter() - tic,
            down,
            up,
        )

    def encode(self, plan: Any, dataset: Dataset, *, epoch: int, max_frame_bytes: int) -> Encoded:
        from ...codec import encode_terms

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
            max_frame_bytes=min(max_frame_bytes, STREAMED_FRAME_BYTES),
        )
        return _encoded(frames, plan.n_symbols, int((counts > 1).sum()), tic)

    def prepare(self, cache: Cache, need: np.ndarray, out: np.ndarray | None) -> np.ndarray | None:
        """The pieces a worker keeps, copied into its new rows before the delivery starts."""
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
        from ...codec import TermsDecoder

        t0 = time.perf_counter()
        lengths = getattr(self.holding, "unit_lengths", None) if variable else None  # of the job's sizes
        if variable and lengths is None:
            raise ValueError(
                f"Argument 'mode': the storage of M = {self.M} batches was built without the record "
                "sizes, which a worker needs for pieces of many sizes (scheme_for(..., sizes=...))."
            )
        dec = TermsDecoder(
            cache, need=need, worker=worker, epoch=epoch, checksums=checksums, out=out, kept=out is not None,
            lengths=lengths,
        )  # fmt: skip
        # each frame is solved on a second thread while the next comes (tampering takes them all)
        raw = link.receive_each(worker) if tamper is None else iter(tamper(list(link.receive(worker))))
        seen = [0, 0, 0]  # frames rejected, payload bytes and all bytes
        last = [t0]  # when the last frame was in

        def parsed() -> Iterator[Any]:
            for buf in raw:
                seen[2] += int(np.asarray(buf).nbytes)
                frame = _parsed_one(buf, epoch, cache, lambda f: f.terms is not None)
                if frame is None:
                    seen[0] += 1
                    continue
                seen[1] += frame.payload_bytes
                yield frame
            last[0] = time.perf_counter()

        behind(parsed(), dec.add)
        res = dec.finish()
        rejected, payload, total = seen
        return Taken(res, rejected, last[0] - t0, time.perf_counter() - last[0], payload, total - payload)

    def check(self, dataset: Dataset, held: list[Any], placement_next: Any) -> tuple[int, bool]:
        """Every worker holds exactly its pieces of ``placement_next``, each with its checksum.

        Returns the records checked: those whose every piece the new owner holds and matched.
        """
        from ...errors import InvalidPlanError
        from ...storage import check_piece_placement

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


def coded_scheme(holding: Holding) -> Scheme:
    """The coded delivery of ``holding``: the storage's above one batch, the plan's broadcast else."""
    return StorageScheme(holding) if isinstance(holding, PieceStorage) else CodedScheme(holding)
