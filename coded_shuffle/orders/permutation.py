"""Epoch permutations reproducible from ``(seed, epoch)``.

Each epoch draws from its own stream: the bit generator is numpy's PCG64DXSM seeded with
``SeedSequence(seed, spawn_key=(epoch,))``, the same stream ``SeedSequence(seed).spawn(...)``
would hand to child ``epoch``, derived directly so that epoch ``t`` costs nothing for epochs
before it. ``Generator.permutation`` draws its bounded integers without modulo bias (Lemire's
method), unlike the generator behind older ``torch.randperm`` releases (whose decile bias at
billions of points a published study of StreamingDataset shuffles reproduced; docs/algorithms.md).
"""

from __future__ import annotations

import numpy as np

from .._checks import check_int

__all__ = ["epoch_rng", "epoch_permutation"]


#: Most points of a materialized permutation (8 TiB of int64); the Feistel order streams instead.
PERMUTATION_MAX_POINTS = 1 << 40


def epoch_rng(seed: int, epoch: int) -> np.random.Generator:
    """Return the random generator of ``epoch`` under ``seed``.

    Parameters
    ----------
    seed : int
        Non-negative seed of the whole run.
    epoch : int
        Non-negative epoch number ``t``.

    Examples
    --------
    >>> a = epoch_rng(7, 3).integers(1 << 30)
    >>> b = epoch_rng(7, 3).integers(1 << 30)
    >>> bool(a == b)
    True
    """
    seed = check_int(seed, "seed", minimum=0)
    epoch = check_int(epoch, "epoch", minimum=0)
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(seed, spawn_key=(epoch,))))


def epoch_permutation(N: int, *, seed: int, epoch: int) -> np.ndarray:
    """Return the permutation ``pi_t`` of the points ``0..N-1`` for ``epoch`` under ``seed``.

    The result is a read-only int64 array; position ``p`` holds the point placed there.

    Examples
    --------
    >>> p = epoch_permutation(10, seed=0, epoch=1)
    >>> sorted(p.tolist()) == list(range(10))
    True
    >>> bool((p == epoch_permutation(10, seed=0, epoch=1)).all())
    True
    """
    N = check_int(N, "N", minimum=0)
    if N > PERMUTATION_MAX_POINTS:
        raise ValueError(
            f"Argument 'N' must be at most 2**40 = {PERMUTATION_MAX_POINTS} for a permutation, which is "
            f"held in memory (8 bytes a point), not {N}; the feistel order has no such limit."
        )
    perm = epoch_rng(seed, epoch).permutation(N)
    perm.flags.writeable = False
    return perm
