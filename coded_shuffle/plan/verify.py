"""Checks of a delivery plan: :func:`verify_plan`, and each worker's decoding steps."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidPlanError
from .delivery import DeliveryPlan


def _flaw(message: str, where: np.ndarray) -> InvalidPlanError:
    idx = np.flatnonzero(where)
    shown = ", ".join(str(int(i)) for i in idx[:5])
    more = "" if idx.size <= 5 else f" and {idx.size - 5} more"
    return InvalidPlanError(f"{message}: at {shown}{more}.")


def verify_plan(plan: DeliveryPlan) -> None:
    """Check that ``plan`` delivers every moved point exactly once, and that every symbol decodes.

    Checks, vectorized over all transmissions:

    - every point of an order-2 symbol is held by one of its two workers and needed by the other;
    - along each cycle, ``m_k`` is held by ``w_k`` and needed by ``w_{k+1}``, so that each symbol
      ``m_k + m_{k+1}`` is decoded by ``w_{k+1}`` in one step and the chain by ``w_1`` by peeling;
    - every uncoded point goes from its holder to the worker that needs it;
    - the points delivered are exactly the moved points, each once;
    - the number of symbols equals the coded load of ``plan.rates``.

    With sub-packets the same checks run on the pieces (every piece of a moved point delivered
    once, by symbols that decode), the symbols are counted in pieces against ``subpackets``
    times the coded load, and the plan and its rates must agree on ``subpackets``.

    Raises
    ------
    InvalidPlanError
        Naming the first flaw found and where it is.

    Examples
    --------
    >>> from coded_shuffle.plan import plan_from_matrix
    >>> verify_plan(plan_from_matrix([[0, 2], [2, 0]]))
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    a, b, point_arrays = _checked_arrays(plan)
    _check_symbols(plan, a, b)
    _check_delivered(plan, a, b, point_arrays)


def _checked_arrays(plan: DeliveryPlan) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """The plan's arrays checked for type, range and length: the old and new owner of every
    unit, and the arrays of units by name."""
    q = plan.subpackets
    if isinstance(q, bool) or not isinstance(q, int) or q < 1 or plan.rates.subpackets != q:
        raise InvalidPlanError(
            f"plan has subpackets = {q!r}, its rates {plan.rates.subpackets!r}: "
            "both must be the same int >= 1."
        )
    for name in ("pair_x", "pair_y", "pair_i", "pair_j", "cycle_ptr", "cycle_points", "cycle_workers",
                 "uncoded_points", "uncoded_from", "uncoded_to"):  # fmt: skip
        arr = getattr(plan, name)
        if not isinstance(arr, np.ndarray) or arr.ndim != 1 or arr.dtype.kind not in "iu":
            what = f"{arr.dtype} array" if isinstance(arr, np.ndarray) else type(arr).__name__
            raise InvalidPlanError(f"{name} must be a 1-D array of integer ids, not a {what}.")
    a, b = plan.piece_owners()
    N = int(a.shape[0])
    point_arrays = {
        "pair_x": plan.pair_x,
        "pair_y": plan.pair_y,
        "cycle_points": plan.cycle_points,
        "uncoded_points": plan.uncoded_points,
    }
    for name, arr in point_arrays.items():
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= N):
            raise _flaw(f"{name} names points outside [0, {N})", (arr < 0) | (arr >= N))
    if not plan.pair_x.shape == plan.pair_y.shape == plan.pair_i.shape == plan.pair_j.shape:
        raise InvalidPlanError("pair arrays differ in length.")
    if not plan.uncoded_points.shape == plan.uncoded_from.shape == plan.uncoded_to.shape:
        raise InvalidPlanError("uncoded arrays differ in length.")
    if plan.cycle_points.shape != plan.cycle_workers.shape:
        raise InvalidPlanError("cycle_points and cycle_workers differ in length.")
    return a, b, point_arrays


def _check_symbols(plan: DeliveryPlan, a: np.ndarray, b: np.ndarray) -> None:
    """Each symbol joins units held and needed where it says (pairs, cycles, lone units)."""
    x, y, i, j = plan.pair_x, plan.pair_y, plan.pair_i, plan.pair_j
    for message, bad in (
        ("order-2 symbol pairs a worker with itself", i == j),
        ("order-2 symbol: pair_x not held by pair_i", a[x] != i),
        ("order-2 symbol: pair_x not needed by pair_j", b[x] != j),
        ("order-2 symbol: pair_y not held by pair_j", a[y] != j),
        ("order-2 symbol: pair_y not needed by pair_i", b[y] != i),
    ):
        if bad.any():
            raise _flaw(message, bad)

    ptr = plan.cycle_ptr
    if ptr.size == 0 or ptr[0] != 0 or ptr[-1] != plan.cycle_points.size or np.any(np.diff(ptr) < 2):
        raise InvalidPlanError("cycle_ptr must rise from 0 to len(cycle_points) in steps of at least 2.")
    if plan.cycle_points.size:
        m, w = plan.cycle_points, plan.cycle_workers
        nxt = np.arange(1, m.size + 1)
        nxt[ptr[1:] - 1] = ptr[:-1]  # w_l hands on to w_1
        if (bad := a[m] != w).any():
            raise _flaw("cycle point not held by its worker (symbol undecodable)", bad)
        if (bad := b[m] != w[nxt]).any():
            raise _flaw("cycle point not needed by the next worker of its cycle", bad)

    u, uf, ut = plan.uncoded_points, plan.uncoded_from, plan.uncoded_to
    for message, bad in (
        ("uncoded point not held by uncoded_from", a[u] != uf),
        ("uncoded point not needed by uncoded_to", b[u] != ut),
        ("uncoded point does not move", uf == ut),
    ):
        if bad.any():
            raise _flaw(message, bad)


def _check_delivered(
    plan: DeliveryPlan, a: np.ndarray, b: np.ndarray, point_arrays: dict[str, np.ndarray]
) -> None:
    """Every moved unit delivered once, nothing else, in as many symbols as the rates say."""
    N, q = int(a.shape[0]), plan.subpackets
    delivered = np.zeros(N, dtype=np.int64)
    for arr in point_arrays.values():
        delivered += np.bincount(arr, minlength=N)
    moved = a != b
    if (bad := moved & (delivered == 0)).any():
        raise _flaw("moved points never delivered", bad)
    if (bad := delivered > 1).any():
        raise _flaw("points delivered more than once", bad)
    if (bad := ~moved & (delivered > 0)).any():
        raise _flaw("points delivered that do not move", bad)
    if plan.n_symbols != q * plan.rates.coded:
        raise InvalidPlanError(
            f"plan sends {plan.n_symbols} symbols of 1/{q} record, its rates say {plan.rates.coded} records."
        )


def decoding_steps(plan: DeliveryPlan, worker: int) -> list[tuple[int, int, int]]:
    """Return how ``worker`` decodes its new points, step by step, in order.

    Each step is ``(symbol, known, recovered)``: XOR symbol number ``symbol`` (numbering of
    :meth:`DeliveryPlan.transmissions`) with point ``known`` (in the cache or recovered by an
    earlier step) to obtain point ``recovered``. Uncoded points appear as ``(symbol, -1, point)``.
    With sub-packets the steps name pieces (``p * q + k``).

    Examples
    --------
    Example 1 of Attia and Tandon (2016): the first worker of the cycle peels two symbols.

    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
    >>> [s for s in decoding_steps(plan, 0) if s[0] >= 4]
    [(4, 4, 13), (5, 13, 6)]
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    from .._checks import check_int

    worker = check_int(worker, "worker", minimum=0)
    if worker >= plan.K:
        raise ValueError(f"Argument 'worker' must be less than K = {plan.K}, not {worker}.")
    steps: list[tuple[int, int, int]] = []
    for s in np.flatnonzero(plan.pair_i == worker):
        steps.append((int(s), int(plan.pair_x[s]), int(plan.pair_y[s])))
    for s in np.flatnonzero(plan.pair_j == worker):
        steps.append((int(s), int(plan.pair_y[s]), int(plan.pair_x[s])))
    steps.sort()
    P = int(plan.pair_x.shape[0])
    ptr, m, w = plan.cycle_ptr, plan.cycle_points, plan.cycle_workers
    for c in range(plan.n_cycles):
        lo, hi = int(ptr[c]), int(ptr[c + 1])
        first_symbol = P + lo - c  # cycle c's symbols follow those of the c cycles before it
        for k in range(lo, hi):
            if w[k] != worker:
                continue
            if k > lo:  # holds m_k, reads m_{k-1} off symbol m_{k-1} + m_k
                steps.append((first_symbol + k - 1 - lo, int(m[k]), int(m[k - 1])))
            else:  # w_1 peels the chain m_1 -> m_2 -> ... -> m_l
                for q in range(lo, hi - 1):
                    steps.append((first_symbol + q - lo, int(m[q]), int(m[q + 1])))
    first_uncoded = P + m.shape[0] - plan.n_cycles
    for u in np.flatnonzero(plan.uncoded_to == worker).tolist():
        steps.append((first_uncoded + u, -1, int(plan.uncoded_points[u])))
    return steps
