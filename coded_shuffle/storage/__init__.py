"""Coded shuffling when every worker stores ``M = 1 + t`` batches (docs/storage.md; Attia and
Tandon, arXiv:1801.01875).

Notation
--------
==============  ===================================================================
``K, N, S``     workers, records, shuffle matrix (:mod:`coded_shuffle.matrix`)
``M = 1 + t``   storage of a worker, in whole batches; every piece has ``t + 1`` holders
``r_T``         piece of record ``r`` (owner ``o``) for a ``t``-subset ``T`` of the others,
                held by ``{o} u T``; ``C(K - 1, t)`` pieces a record, or ``P`` fewer
``R(t)``        worst-case load ``(N / K) (K - 1 - t) / (t + 1)`` records
==============  ===================================================================

Pure mathematics on ids and counts, no bytes. Loads are in records, exact fractions. At
``M = 1`` every function is today's scheme: :func:`coded_shuffle.plan.rates` and
:func:`coded_shuffle.bounds.lower_bound`.

Sources: Elmahdy and Mohajer, "On the Fundamental Limits of Coded Data Shuffling for Distributed
Learning Systems", IEEE Trans. Inf. Theory 2020, arXiv:1807.04255; Attia and Tandon, "Near Optimal
Coded Data Shuffling for Distributed Learning", IEEE Trans. Inf. Theory 2019, arXiv:1801.01875.

Layout
------
:mod:`.placement` (pieces, demand, update), :mod:`.bound` (genie bound, ``R(t)``),
:mod:`.planner` (loads and strategies; :mod:`.rounds` the ``rounds`` strategy's), :mod:`.plan`
(piece-level plans and their checker).
"""

from __future__ import annotations

from ._common import STORAGE_MAX_K, check_storage, pieces_per_record
from .bound import (
    StorageBound,
    demand_lower_bound,
    storage_lower_bound,
    storage_ordering_bound,
    storage_worst_case,
)
from .placement import (
    PiecePlacement,
    check_piece_placement,
    piece_demand,
    piece_placement,
    storage_excess,
    storage_share,
    update_storage,
)
from .plan import StoragePlan, plan_storage, verify_storage_plan
from .planner import (
    RANK_MAX_CELLS,
    STORAGE_STRATEGIES,
    StorageRates,
    boundary_rank,
    demand_counts,
    group_counts,
    storage_rates,
)

__all__ = [
    "STORAGE_MAX_K",
    "STORAGE_STRATEGIES",
    "RANK_MAX_CELLS",
    "check_storage",
    "pieces_per_record",
    "PiecePlacement",
    "piece_placement",
    "check_piece_placement",
    "storage_share",
    "storage_excess",
    "piece_demand",
    "update_storage",
    "StorageBound",
    "storage_ordering_bound",
    "storage_lower_bound",
    "demand_lower_bound",
    "storage_worst_case",
    "StorageRates",
    "storage_rates",
    "group_counts",
    "demand_counts",
    "boundary_rank",
    "StoragePlan",
    "plan_storage",
    "verify_storage_plan",
]
