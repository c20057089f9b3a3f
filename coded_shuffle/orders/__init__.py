"""Epoch orders: permutations of the points and the placements cut from them."""

from .permutation import epoch_permutation, epoch_rng
from .placement import (
    Placement,
    batch_sizes,
    epoch_placement,
    owner_dtype,
    placement_from_owner,
    placement_from_permutation,
)

__all__ = [
    "Placement",
    "batch_sizes",
    "epoch_permutation",
    "epoch_placement",
    "epoch_rng",
    "owner_dtype",
    "placement_from_owner",
    "placement_from_permutation",
]
