"""Records of different sizes on the command line: each transition's bound weighted by size, and
``coded-shuffle run``'s table in bytes.

Where the records of ``--data`` differ in size, a count of records says little of what a link
carries: ``simulate`` and ``run`` count payload bytes, with the counts beside them, and their
bound is the genie bound of the shuffle matrix in bytes, ``S_B[i][j]`` the bytes of the records
``i`` holds and ``j`` needs (:func:`coded_shuffle.matrix.shuffle_matrix` with ``sizes``; a bound
for every scheme, ``proofs/claim_14_byte_bound.py``; :func:`coded_shuffle.loads.byte_loads` gives
it beside the other loads in bytes). On a ``--network``, each transition's time bound and each
mode's predicted time count every link's bytes (:func:`coded_shuffle.network.predict_bytes`), and
``--mode auto`` chooses on them (:func:`coded_shuffle.engine.schedule.predicted_times` with ``sizes``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..bounds import lower_bound
from ..engine.schedule import Epoch, EpochSchedule
from ..engine.table import sent_cells, time_lines
from ..matrix import shuffle_matrix
from ..orders import Placement
from .data import sizes_text

__all__ = [
    "ByteBound", "StorageByteBound", "SIZED_COLUMNS", "sized_cells", "sized_legend", "sized_time_lines",
]  # fmt: skip


class ByteBound:
    """The genie lower bound weighted by size of each transition of ``schedule`` (one batch a
    worker), in payload bytes: ``bound(t)`` is that of ``t - 1 -> t``, with whether it is exact.

    The placements of the last two epochs asked are kept, so a run's transitions in order cost
    one new placement each. ``first``: ``(t, placement)`` of a job that started from what its
    workers held (``--cache-dir``): its transition to epoch ``t`` is from ``placement``, theirs.

    Examples
    --------
    >>> from coded_shuffle.engine import scheme_for
    >>> from coded_shuffle.orders import OrderSpec
    >>> s = EpochSchedule(N=4, K=2, seed=0, spec=OrderSpec(), scheme=scheme_for("coded", K=2))
    >>> bound = ByteBound(s, np.array([10, 1, 1, 1]))
    >>> b, exact = bound(1)
    >>> exact, 0 <= b <= 13
    (True, True)
    """

    def __init__(
        self, schedule: EpochSchedule, sizes: np.ndarray, *, first: tuple[int, Placement] | None = None
    ) -> None:
        self.schedule, self.sizes = schedule, np.asarray(sizes, dtype=np.int64)
        self._kept: dict[int, Placement] = {}
        self._first = first

    def _placement(self, t: int) -> Placement:
        if t not in self._kept:
            self._kept = {k: v for k, v in self._kept.items() if k == t - 1 or k == t + 1}
            self._kept[t] = self.schedule.epoch(t).placement
        return self._kept[t]

    def __call__(self, epoch: int) -> tuple[int, bool]:
        before = self._first[1] if self._first is not None and self._first[0] == epoch else None
        S_B = shuffle_matrix(before or self._placement(epoch - 1), self._placement(epoch), sizes=self.sizes)
        lb = lower_bound(S_B)
        return int(math.ceil(lb.value)), bool(lb.exact)


def sized_time_lines(rows: list[dict[str, Any]], sizes: np.ndarray) -> list[str]:
    """The lines on the network after the table (:func:`~coded_shuffle.engine.table.time_lines`),
    the records' sizes said in the first."""
    lines = time_lines(rows)
    width = f"records of {rows[0]['record_bytes']} B"
    lines[0] = lines[0].replace(width, f"records of {sizes_text(sizes)}", 1)
    return lines


class StorageByteBound:
    """:class:`ByteBound` with a storage of ``M > 1`` batches (``schedule``'s scheme, built with
    the records' sizes): the genie bound of each transition's demand of pieces weighted by their
    bytes (:func:`~coded_shuffle.storage.demand_lower_bound`), the pieces each record is cut into
    by its own length. Transitions are asked in order; each epoch's holdings follow the last,
    from ``start`` (the job's first epoch; default epoch 0).
    """

    def __init__(self, schedule: EpochSchedule, *, start: Epoch | None = None) -> None:
        self.schedule = schedule
        self._start = schedule.epoch(0) if start is None else start
        self._now = self._start

    @property
    def sizes(self) -> np.ndarray:
        """The records' sizes, which the pieces are cut from (the schedule's scheme's).

        >>> from coded_shuffle.engine import scheme_for
        >>> from coded_shuffle.orders import OrderSpec
        >>> scheme = scheme_for("coded", K=2, storage=2, sizes=[3000, 1101, 2048])
        >>> StorageByteBound(EpochSchedule(N=3, K=2, seed=0, spec=OrderSpec(), scheme=scheme)).sizes.tolist()
        [3000, 1101, 2048]
        """
        return np.asarray(self.schedule.scheme.holding.sizes)  # type: ignore[attr-defined]

    def __call__(self, epoch: int) -> tuple[int, bool]:
        from ..storage import demand_lower_bound, piece_demand

        if epoch <= self._now.t:
            self._now = self._start
        while self._now.t < epoch - 1:
            self._now = self.schedule.epoch(self._now.t + 1, self._now)
        nxt = self.schedule.epoch(epoch, self._now)
        lens = self.schedule.scheme.holding.unit_lengths  # type: ignore[attr-defined]
        demand = piece_demand(self._now.held, nxt.placement)
        value, _, exact = demand_lower_bound(demand, self.schedule.K, weights=lens[demand[:, 0]])
        self._now = nxt
        return int(value), bool(exact)


#: The columns of ``run``'s table on records of different sizes (:func:`sized_cells`).
SIZED_COLUMNS = (
    "epoch", "mode", "sent", "planned", "payload MB", "busiest d/u MB", "bound d/u MB", "sent MB", "framing",
    "seconds", "MB/s", "repairs", "verified",
)  # fmt: skip

#: Widths of :data:`SIZED_COLUMNS` (the link counters' last).
SIZED_WIDTHS = (6, 10, 8, 9, 12, 16, 16, 9, 9, 9, 8, 8, 9, 9, 9)


def _mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:.4f}"


def sized_cells(r: dict[str, Any]) -> list[str]:
    """One row of ``run``'s table on records of different sizes for a report
    (:meth:`~coded_shuffle.engine.report.TransitionReport.to_dict` with ``lower_bound_bytes``, the
    bound weighted by size): the counts of the delivery, then its figures in bytes.

    Examples
    --------
    >>> r = {"epoch": 1, "mode": "coded", "wire_symbols": 14, "planned_symbols": 14, "payload_bytes": 1919,
    ...      "exchange_bytes": 0, "exchange_header_bytes": 0, "header_bytes": 400, "wire_bytes": 2319,
    ...      "max_received_bytes": 1919, "max_sent_bytes": 0, "download_bound_bytes": 1140,
    ...      "lower_bound_bytes": 1700, "lower_bound_exact": True, "uncoded_bytes": 3258,
    ...      "upload_bound_bytes": 1247, "uncoded_symbols": 26, "seconds": 0.01, "repairs": 0,
    ...      "verified": True}
    >>> sized_cells(r)[:7]
    ['1', 'coded', '14', '14', '0.0019', '0.0019/0.0019', '0.0011/0.0017']
    """
    mode = r["mode"]
    payload = int(r["payload_bytes"]) + int(r["exchange_bytes"])
    up = {  # the least the sending uplink carries in this mode, in bytes
        "coded": r.get("lower_bound_bytes"),
        "uncoded": r["uncoded_bytes"],
        "exchange": r["upload_bound_bytes"],
    }.get(mode)
    star = "" if mode != "coded" or r.get("lower_bound_exact", True) else "*"
    busiest_up = max(int(r["payload_bytes"]), int(r["max_sent_bytes"]))
    planned = r["planned_symbols"] if mode == "coded" else r["uncoded_symbols"]
    return [
        str(r["epoch"]),
        mode,
        str(int(r["wire_symbols"]) if mode != "exchange" else r["uncoded_symbols"]),
        str(planned),
        _mb(payload),
        f"{_mb(r['max_received_bytes'])}/{_mb(busiest_up)}",
        f"{_mb(r['download_bound_bytes'])}/{'-' if up is None else _mb(up) + star}",
        *sent_cells(r),
    ]


def sized_legend(rows: list[dict[str, Any]]) -> list[str]:
    """What the columns of ``run``'s table on records of different sizes mean: the lines under it."""
    if not rows:
        return []
    modes = {r["mode"] for r in rows}
    out = [
        "records of different sizes: sent and planned count symbols (coded: an XOR of two records, as",
        "long as the longer, or one alone) or records; every other figure is in payload bytes (MB).",
        "payload MB: the payload the master and the workers sent (repairs apart);",
        "busiest d/u: the most one worker received / the most one link sent (the master's, or a worker's).",
        "bound d/u: the bytes the busiest worker misses, under which no delivery puts its downlink /",
        "the least the sending uplink carries in this mode:",
    ]
    ups = {
        "coded": "  coded: the genie lower bound weighted by size (* where not proven exact);",
        "uncoded": "  uncoded: the bytes of every record that changes worker, each sent alone;",
        "exchange": "  exchange: the least busiest upload of any exchange between the workers.",
    }
    out += [line for m, line in ups.items() if m in modes]
    out += [
        "sent MB: payload and framing bytes the master and the workers sent; MB/s: sent MB / seconds;",
        "framing: frame headers, symbol entries with both lengths, receiver indexes and padding.",
    ]
    return out
