"""Gaussian elimination over GF(2) on rows held as Python integers (bit ``u`` is unknown ``u``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["solve_gf2"]


def solve_gf2(rows: Sequence[int]) -> dict[int, int]:
    """Return ``{u: c}`` for every unknown ``u`` the equations determine.

    Equation ``i`` says that the XOR of the unknowns of bitmask ``rows[i]`` is a known value
    ``v_i``; ``c`` is a bitmask over the equations: ``u`` is the XOR of the ``v_i`` with bit
    ``i`` of ``c`` set. An unknown is determined exactly when its row of the reduced row echelon
    form keeps no free unknown; the others are left out.

    Examples
    --------
    ``x0 + x1 = v0``, ``x1 = v1``, ``x2 + x3 = v2``: ``x1 = v1``, ``x0 = v0 + v1``, and ``x2``,
    ``x3`` stay undetermined.

    >>> sorted(solve_gf2([0b0011, 0b0010, 0b1100]).items())
    [(0, 3), (1, 2)]
    """
    pivots: dict[int, tuple[int, int]] = {}
    for i, m in enumerate(rows):
        c = 1 << i
        while m:
            top = m.bit_length() - 1
            if top not in pivots:
                pivots[top] = (m, c)
                break
            pm, pc = pivots[top]
            m, c = m ^ pm, c ^ pc
    # back substitution, low pivots first: each reduced row keeps only free unknowns
    reduced: dict[int, tuple[int, int]] = {}
    solved: dict[int, int] = {}
    for top in sorted(pivots):
        m, c = pivots[top]
        rest = m ^ (1 << top)
        scan = rest
        while scan:
            low = scan & -scan
            scan ^= low
            hit = reduced.get(low.bit_length() - 1)
            if hit is not None:
                rest ^= low ^ hit[0]
                c ^= hit[1]
        reduced[top] = (rest, c)
        if not rest:
            solved[top] = c
    return solved
