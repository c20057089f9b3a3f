"""A cycle packing of a leftover matrix (:class:`CyclePacking`) and its checker."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..matrix import check_shuffle_matrix


def _readonly(arr: np.ndarray) -> np.ndarray:
    arr.flags.writeable = False
    return arr


# --------------------------------------------------------------------------- cycle packing


@dataclass(frozen=True, eq=False)
class CyclePacking:
    """Cycles chosen in a leftover matrix, each with how many times it is used.

    Attributes
    ----------
    omega : numpy.ndarray
        The leftover matrix packed.
    cycles : tuple of tuple of int
        Each cycle as its workers ``(w_1, ..., w_l)``; the edges are ``w_k -> w_{k+1}`` and
        ``w_l -> w_1``.
    counts : tuple of int
        How many times each cycle is used.
    strategy : str
        The strategy asked for.
    method : str
        The strategy that produced the packing (``greedy`` after a fallback of ``exact``).
    optimal : bool
        Whether the packing is proven to use the most cycles possible.
    note : str or None
        Why ``exact`` did not prove its packing optimal, if it did not (with its bound).
    upper_bound : int or None
        The most cycles any packing of ``omega`` can have, as ``exact`` proved it (equal to
        :attr:`cycles_used` when ``optimal``); None from ``greedy``.
    """

    omega: np.ndarray
    cycles: tuple[tuple[int, ...], ...]
    counts: tuple[int, ...]
    strategy: str
    method: str
    optimal: bool
    note: str | None = None
    upper_bound: int | None = None

    @property
    def cycles_used(self) -> int:
        """Number of cycles used, counted with multiplicity: the symbols saved."""
        return int(sum(self.counts))

    @property
    def covered(self) -> int:
        """Number of leftover points carried by the cycles."""
        lengths = np.fromiter(map(len, self.cycles), dtype=np.int64, count=len(self.cycles))
        return int(lengths @ np.asarray(self.counts, dtype=np.int64))

    @property
    def remainder(self) -> int:
        """Number of leftover points no cycle carries: they are sent uncoded."""
        return int(self.omega.sum()) - self.covered


def is_cycle_packing(omega: object, cycles: Iterable[Sequence[int]], counts: Iterable[int]) -> bool:
    """Return whether ``cycles`` used ``counts`` times fit inside the leftover matrix ``omega``.

    Every cycle must have at least two distinct workers, no repeated worker, only edges of
    positive weight, and the uses of each edge must not exceed its weight.

    Examples
    --------
    >>> omega = [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    >>> is_cycle_packing(omega, [(0, 2, 1)], [1])
    True
    >>> is_cycle_packing(omega, [(0, 1, 2)], [1])
    False
    """
    om = check_shuffle_matrix(omega, "omega")
    K = om.shape[0]
    used = np.zeros_like(om)
    cycle_list, count_list = list(cycles), list(counts)
    if len(cycle_list) != len(count_list):
        return False
    for cyc, c in zip(cycle_list, count_list, strict=True):
        if len(cyc) < 2 or len(set(cyc)) != len(cyc) or int(c) < 0:
            return False
        if any(not 0 <= w < K for w in cyc):
            return False
        for k, w in enumerate(cyc):
            used[w, cyc[(k + 1) % len(cyc)]] += int(c)
    return bool(np.all(used <= om))
