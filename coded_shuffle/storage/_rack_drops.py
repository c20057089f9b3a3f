"""The compiled drops of an update on racks (numba), imported lazily by :mod:`.placement`.

The kernel states the rule it follows; the tests check its result against a plain Python loop.
"""

from __future__ import annotations

import numba
import numpy as np

from ._kernels import drop_piece


@numba.njit(cache=True, nogil=True)
def rack_drops(out, H, old, new, rack_bits, rack, excess, step, slack):  # pragma: no cover - compiled
    """The drops of an update that keep each piece's holders across racks: ``out`` holds the holder
    sets after the update that makes the old owner drop each delivered piece; ``excess[k]`` is
    worker ``k``'s storage after it, over its share, times ``step``; ``rack_bits[a]`` the words of
    rack ``a``'s workers, ``rack[k]`` worker ``k``'s rack. Holder sets are ``(N, P, W)`` words.

    In record order, a delivered piece (its new owner ``j`` not among its holders ``H``) is dropped
    by a holder ``d`` in ``j``'s rack if it has one (of those, the one of largest excess), so that
    its holders keep the racks they span; else by its holder of the largest excess when that
    exceeds the old owner ``o``'s by more than ``step`` (the rule of ``_kernels.rebalance``). A
    choice ``d != o`` is made only where the record's labels stay distinct:
    ``out[r, p] = H[r, p] & ~(1 << d) | 1 << j``. Returns the pieces moved so.
    """
    N, P, W = H.shape
    one = np.uint64(1)
    moved = 0
    for r in range(N):
        o, j = old[r], new[r]
        jw, jb = j // 64, one << np.uint64(j % 64)
        home = rack[j]
        for p in range(P):
            if H[r, p, jw] & jb:
                continue  # held by the new owner: not delivered
            best, top, near = -1, 0, False
            for w in range(W):
                x, d = H[r, p, w] & rack_bits[home, w], w * 64
                while x:
                    if x & one and (best < 0 or excess[d] > top):
                        best, top, near = d, excess[d], True
                    x >>= one
                    d += 1
            if near and best != o and excess[o] > top + slack:
                near, best, top = False, -1, 0  # the old owner much the fuller: the rule below
            if not near:
                for w in range(W):
                    x, d = H[r, p, w], w * 64
                    while x:
                        if x & one and d != o and (best < 0 or excess[d] > top):
                            best, top = d, excess[d]
                        x >>= one
                        d += 1
                if best < 0 or top <= excess[o] + step:
                    continue
            if best == o:
                continue  # the old owner, as the update made it
            if not drop_piece(out, H, r, p, best, j):
                continue
            excess[best] -= step
            excess[o] += step
            moved += 1
    return moved
