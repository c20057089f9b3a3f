"""The ``greedy`` cycle packing: shortest cycles first."""

from __future__ import annotations

import numpy as np

from .packing import CyclePacking

#: Leftover points from which ``progress=True`` shows the greedy packing on standard error.
PROGRESS_MIN_LEFTOVERS = 1_000_000


def _greedy(omega: np.ndarray, progress: bool = False) -> tuple[list[tuple[int, ...]], list[int]]:
    """Shortest cycles first (:func:`coded_shuffle._kernels.greedy_cycle_packing`).

    No cycle comes twice: a cycle taken leaves one of its edges used up.
    """
    from .._kernels import greedy_cycle_packing

    W = np.array(omega, dtype=np.int64)
    total = int(W.sum())
    if progress and total >= PROGRESS_MIN_LEFTOVERS:
        from .._progress import Progress

        K = W.shape[0]
        with Progress(f"packing leftover cycles, K = {K}", total=total, unit="leftovers") as bar:
            nodes, lengths, counts = greedy_cycle_packing(W, bar.advance)
    else:
        nodes, lengths, counts = greedy_cycle_packing(W)
    # Cycles come in order of length: one block of equal lengths at a time, a column a worker.
    cycles: list[tuple[int, ...]] = []
    first = 0
    for L, n in zip(*np.unique(lengths, return_counts=True), strict=True):
        block = nodes[first : first + L * n].reshape(n, L)
        cycles.extend(zip(*(block[:, k].tolist() for k in range(L)), strict=True))
        first += L * n
    return cycles, counts.tolist()


def _pack_greedy(omega: np.ndarray, progress: bool = False) -> CyclePacking:
    cycles, counts = _greedy(omega, progress)
    return CyclePacking(omega, tuple(cycles), tuple(counts), "greedy", "greedy", optimal=not omega.any())
