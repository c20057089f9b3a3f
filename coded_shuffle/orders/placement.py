"""Placements: the batches ``A_1^t .. A_K^t`` of an epoch, stored as one owner per point.

Notation
--------
=========  ==========================================================
``N``      number of data points
``K``      number of workers
``pi_t``   permutation of epoch ``t``; position ``p`` holds point ``pi_t[p]``
``A_k^t``  batch of worker ``k``: a contiguous run of positions of ``pi_t``
=========  ==========================================================

Batch sizes: with ``N = qK + r`` the first ``r`` workers hold ``q + 1`` points and the others
``q``, so sizes differ by at most one. A placement is stored as ``owner[n]``, the worker that
holds point ``n``: ``N`` small integers, never an ``N x K`` structure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_int_array
from .permutation import epoch_permutation

__all__ = [
    "Placement",
    "batch_sizes",
    "owner_dtype",
    "placement_from_permutation",
    "placement_from_owner",
    "epoch_placement",
]


def owner_dtype(K: int) -> np.dtype:
    """Return the smallest unsigned dtype (at least 16 bits) that numbers ``K`` workers."""
    return np.dtype(np.uint16) if K <= 1 << 16 else np.dtype(np.uint32)


def batch_sizes(N: int, K: int) -> np.ndarray:
    """Return the batch size of each of ``K`` workers for ``N`` points.

    Examples
    --------
    >>> batch_sizes(10, 3).tolist()
    [4, 3, 3]
    """
    N = check_int(N, "N", minimum=0)
    K = check_int(K, "K", minimum=1)
    q, r = divmod(N, K)
    sizes = np.full(K, q, dtype=np.int64)
    sizes[:r] += 1
    return sizes


@dataclass(frozen=True, eq=False)
class Placement:
    """The batches of one epoch: ``owner[n]`` is the worker holding point ``n``.

    Attributes
    ----------
    K : int
        Number of workers.
    owner : numpy.ndarray
        Read-only array of ``N`` worker indices in ``[0, K)``.
    """

    K: int
    owner: np.ndarray

    @property
    def N(self) -> int:
        """Number of points."""
        return int(self.owner.shape[0])

    def sizes(self) -> np.ndarray:
        """Return ``|A_k|`` for each worker ``k``."""
        return np.bincount(self.owner, minlength=self.K).astype(np.int64)

    def batch(self, k: int) -> np.ndarray:
        """Return the points of worker ``k``'s batch, in increasing order."""
        k = check_int(k, "k", minimum=0)
        if k >= self.K:
            raise ValueError(f"Argument 'k' must be less than K = {self.K}, not {k}.")
        return np.flatnonzero(self.owner == k)


def placement_from_owner(owner: object, K: int) -> Placement:
    """Return the placement whose point ``n`` is held by worker ``owner[n]``.

    Examples
    --------
    >>> placement_from_owner([0, 1, 1, 0], 2).sizes().tolist()
    [2, 2]
    """
    K = check_int(K, "K", minimum=1)
    arr = check_int_array(owner, "owner", ndim=1)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= K):
        raise ValueError(
            f"Argument 'owner' must hold workers in [0, {K}), not values in [{arr.min()}, {arr.max()}]."
        )
    out = arr.astype(owner_dtype(K), copy=True)
    out.flags.writeable = False
    return Placement(K=K, owner=out)


def placement_from_permutation(perm: object, K: int) -> Placement:
    """Cut the permutation ``perm`` into ``K`` batches of sizes :func:`batch_sizes`.

    Worker ``k`` holds the points at positions ``[b_k, b_{k+1})`` of ``perm``.

    Examples
    --------
    >>> placement_from_permutation([3, 0, 2, 1], 2).owner.tolist()
    [0, 1, 1, 0]
    """
    K = check_int(K, "K", minimum=1)
    arr = check_int_array(perm, "perm", ndim=1)
    N = arr.shape[0]
    if N < K:
        raise ValueError(f"Argument 'perm' must have at least K = {K} points, not {N}.")
    owner = np.empty(N, dtype=owner_dtype(K))
    owner[arr] = np.repeat(np.arange(K, dtype=owner.dtype), batch_sizes(N, K))
    if N and np.bincount(arr, minlength=N).max(initial=0) != 1:
        raise ValueError("Argument 'perm' must be a permutation of 0..N-1.")
    owner.flags.writeable = False
    return Placement(K=K, owner=owner)


def epoch_placement(N: int, K: int, *, seed: int, epoch: int) -> Placement:
    """Return the placement of epoch ``epoch``: :func:`epoch_permutation` cut into ``K`` batches.

    Examples
    --------
    >>> epoch_placement(6, 3, seed=1, epoch=0).sizes().tolist()
    [2, 2, 2]
    """
    N = check_int(N, "N", minimum=1)
    K = check_int(K, "K", minimum=1)
    if N < K:
        raise ValueError(f"Argument 'N' must be at least K = {K}, not {N}.")
    perm = epoch_permutation(N, seed=seed, epoch=epoch)
    owner = np.empty(N, dtype=owner_dtype(K))
    owner[perm] = np.repeat(np.arange(K, dtype=owner.dtype), batch_sizes(N, K))
    owner.flags.writeable = False
    return Placement(K=K, owner=owner)
