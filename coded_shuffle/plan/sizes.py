"""The order of records by size: longest first, ties in increasing id.

It is the one order of records of many sizes. :func:`coded_shuffle.plan.plan_delivery` takes the
points of each group in it, so that its ``k``-th pair joins the ``k``-th longest records of two
groups; a worker's packed cache lays its records out in it (:class:`coded_shuffle.codec.Cache`),
so that a group's records lie in the cache of the worker that holds them, and in the new batch
of the worker that decodes them, in the order of their pairs: a worker reads its payloads and its
cache and writes its new batch each in one direction.
"""

from __future__ import annotations

import numpy as np

#: Steps an octave of the key of sizes of 64 KiB and more (:func:`size_key`).
SIZE_STEPS = 2048


def size_key(sizes: np.ndarray, top: int) -> np.ndarray:
    """The ``uint16`` key of each of ``sizes`` (non-negative ``int64``, none above ``top``),
    increasing as the size decreases: a stable sort by it is the order longest first.

    With ``top`` under 64 KiB the key is exact (``0xFFFF - size``); otherwise it is
    ``0xFFFF - round(2048 log2(size + 1))``, a step of 0.034 %, so that the key keeps 16 bits
    and its stable sort is a radix sort (4 times faster than a stable sort of 64-bit sizes at
    ``N = 10^7``); sizes within a step may keep their id order.

    Examples
    --------
    >>> size_key(np.array([3, 0, 7]), 7).tolist()
    [65532, 65535, 65528]
    """
    if top < 1 << 16:
        return (0xFFFF - sizes).astype(np.uint16)
    steps = np.rint(np.log2(sizes.astype(np.float64) + 1.0) * SIZE_STEPS)
    return (0xFFFF - np.minimum(steps, 0xFFFF)).astype(np.uint16)


def longest_first(sizes: object, N: int) -> np.ndarray:
    """The ``N`` point ids by decreasing ``sizes`` (:func:`size_key`), ties in increasing id; or
    raise naming ``sizes``.

    Examples
    --------
    >>> longest_first([3, 0, 7, 3], 4).tolist()
    [2, 0, 3, 1]
    """
    from .._checks import check_int_array

    arr = check_int_array(sizes, "sizes", ndim=1).astype(np.int64)
    if arr.shape[0] != N:
        raise ValueError(
            f"Argument 'sizes' must hold one size for each of the N = {N} points, not {arr.shape[0]}."
        )
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"Argument 'sizes' must hold non-negative sizes, not {int(arr.min())}.")
    return np.argsort(size_key(arr, int(arr.max(initial=0))), kind="stable")  # a radix sort: linear in N
