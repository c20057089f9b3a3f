"""Epoch orders: permutations of the points, shard-aware shuffles, placements, quality metrics."""

from .epochs import (
    AUTO_FEISTEL_POINTS,
    EPOCH_ORDERS,
    OrderSpec,
    auto_order,
    epoch_order,
    ignored_shard_options,
    order_placement,
    positions_to_owners,
)
from .feistel import FeistelPermutation, feistel_permutation
from .permutation import epoch_permutation, epoch_rng
from .placement import (
    Placement,
    batch_sizes,
    epoch_placement,
    owner_dtype,
    placement_from_owner,
    placement_from_permutation,
)
from .quality import (
    batch_shard_counts,
    binomial_floor_pct,
    decile_chi_square,
    in_order_steps,
    longest_in_order_run,
    mixture_deviation,
    node_working_sets,
    order_quality,
    quality_report,
)
from .shards import SHUFFLE_ALGORITHMS, node_bounds, shard_order

__all__ = [
    "AUTO_FEISTEL_POINTS",
    "EPOCH_ORDERS",
    "auto_order",
    "ignored_shard_options",
    "OrderSpec",
    "epoch_order",
    "order_placement",
    "positions_to_owners",
    "FeistelPermutation",
    "Placement",
    "SHUFFLE_ALGORITHMS",
    "batch_shard_counts",
    "batch_sizes",
    "binomial_floor_pct",
    "decile_chi_square",
    "epoch_permutation",
    "epoch_placement",
    "epoch_rng",
    "feistel_permutation",
    "in_order_steps",
    "longest_in_order_run",
    "mixture_deviation",
    "node_bounds",
    "node_working_sets",
    "order_quality",
    "owner_dtype",
    "placement_from_owner",
    "placement_from_permutation",
    "quality_report",
    "shard_order",
]
