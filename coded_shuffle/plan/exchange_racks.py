"""The peers' exchange on racks: which holder sends each missing unit so that the busiest link of a
hierarchy, workers in racks under a spine, takes the least time.

Notation: ``K`` workers, ``rack[w]`` worker ``w``'s rack (``0 .. R - 1``), ``up`` each worker's
uplink rate, ``rack_up`` and ``rack_down`` each rack's uplink to the spine and downlink from it;
a group ``g`` the units of one holder set and one wanter's rack, ``f(g, w)`` what holder ``w``
sends of it, ``T`` the busiest link's time. Every figure is in units, or in bytes where the
units' ``sizes`` are given (:func:`assign_senders_racks`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._checks import check_int
from .exchange import (
    SenderAssignment,
    _check_units,
    _groups,
    _holder_array,
    _lone_holder,
    _members,
    _unit_sizes,
    assign_senders,
    upload_bound,
)  # fmt: skip

__all__ = ["assign_senders_racks", "rack_link_loads"]


def rack_link_loads(wanter: object, sender: object, *, rack: object, sizes: object = None) -> dict[str, Any]:
    """Units each link carries in an exchange of units sent by ``sender`` to ``wanter`` with the
    workers in racks (``rack[w]``: worker ``w``'s rack, ``0 .. R - 1``, joined by a spine):
    ``uploads`` and ``downloads`` a worker, ``rack_up`` and ``rack_down`` a rack (the units
    leaving it and entering it), ``cross``, the units between racks in all. With ``sizes`` (the
    bytes of each unit) the same loads in bytes beside them: ``uploads_bytes``,
    ``downloads_bytes``, ``rack_up_bytes``, ``rack_down_bytes`` and ``cross_bytes``.

    Examples
    --------
    >>> loads = rack_link_loads([2, 1, 0], [0, 0, 1], rack=[0, 0, 1])
    >>> loads["rack_up"].tolist(), loads["rack_down"].tolist(), loads["cross"]
    ([1, 0], [0, 1], 1)
    >>> loads = rack_link_loads([2, 1, 0], [0, 0, 1], rack=[0, 0, 1], sizes=[300, 20, 1])
    >>> loads["rack_up_bytes"].tolist(), loads["uploads_bytes"].tolist(), loads["cross_bytes"]
    ([300, 0], [320, 1, 0], 300)
    """
    want = np.asarray(wanter, dtype=np.int64).reshape(-1)
    send = np.asarray(sender, dtype=np.int64).reshape(-1)
    racks = np.asarray(rack, dtype=np.int64).reshape(-1)
    K, R = racks.size, int(racks.max(initial=-1)) + 1
    away = racks[send] != racks[want]
    out: dict[str, Any] = {}
    d = None if sizes is None else _unit_sizes(sizes, want.size)
    for suffix, w in (("", None), ("_bytes", d)):
        if suffix and w is None:
            break
        aw = None if w is None else w[away]
        out.update({
            f"uploads{suffix}": np.bincount(send, weights=w, minlength=K).astype(np.int64),
            f"downloads{suffix}": np.bincount(want, weights=w, minlength=K).astype(np.int64),
            f"rack_up{suffix}": np.bincount(racks[send[away]], weights=aw, minlength=R).astype(np.int64),
            f"rack_down{suffix}": np.bincount(racks[want[away]], weights=aw, minlength=R).astype(np.int64),
            f"cross{suffix}": int(away.sum()) if w is None else int(w[away].sum()),
        })  # fmt: skip
    return out


def assign_senders_racks(
    wanter: object, holders: object, *, K: int, rack: object, up: float, rack_up: float, rack_down: float,
    sizes: object = None,
) -> SenderAssignment:  # fmt: skip
    """Choose a sender among the holders of every missing unit so that the busiest link of a
    hierarchy, workers in racks under a spine, takes the least time; among those choices, the one
    that sends the fewest units (with ``sizes``, bytes) between racks.

    The links a choice loads are each worker's uplink (rate ``up``), each rack's uplink to the
    spine (``rack_up``: the units its workers send outside it) and downlink from it
    (``rack_down``: the units its workers receive from outside it); the downloads are fixed. A
    unit sent by a holder in its wanter's rack loads its uplink alone. Units are grouped by
    holder set and wanter's rack, ``f(g, w)`` of group ``g`` sent by holder ``w``; the least
    time ``T`` is the optimum of the integer program

        min T  s.t.  sum_w f(g, w) = n_g,  uploads(w) <= up T,  rack_up loads <= rack_up T,
                     rack_down loads <= rack_down T,  f integer >= 0

    solved exactly (HiGHS's branch and bound with a gap of 0, :func:`scipy.optimize.milp`), then
    the cross-rack units are minimized at that ``T``. The checker is a brute force over every
    choice on small cases (``tests/plan/test_exchange_racks.py``). Rates in any one unit.

    With ``sizes`` (the bytes of each unit, where they differ) every load is in bytes, as
    :func:`~coded_shuffle.plan.assign_senders` balances them: ``f(g, w)`` counts the units of a
    group whose units are all of one size ``c_g`` (its loads ``c_g f``, integer as above), and
    the bytes of any other group (a real ``f``, summing to its bytes ``b_g``); that group's
    units then go, in the order given, to the holder whose share holds their middle byte, so that
    each of its holders sends its share within one unit of the group. Its busiest link's time
    exceeds the least over every choice of a holder a unit by at most, on some link, the sum of
    the largest unit of each (group of several sizes, holder) whose units the link may carry,
    over its rate (the solver's reals within 1e-6 of their time): nothing where each group's
    units are of one size.

    Parameters
    ----------
    wanter, holders, K
        As :func:`~coded_shuffle.plan.assign_senders`.
    rack : array_like of int
        Each worker's rack, ``0 .. R - 1``.
    up, rack_up, rack_down : float
        The rates, positive.
    sizes : array_like of int, optional
        The bytes of each unit, where they differ.

    Returns
    -------
    SenderAssignment
        Its ``upload_bound`` is :func:`~coded_shuffle.plan.upload_bound`'s (the least busiest
        upload of any exchange, in bytes with ``sizes``: a bound the hierarchy may not reach), its
        uploads and downloads in units, or in bytes with ``sizes``. Units of one group go, in the
        order given, in consecutive runs to its holders in increasing order: every worker that
        computes the assignment from the same units gets the same one.

    Examples
    --------
    Worker 2 (rack 1) wants three units held by workers 0 (rack 0) and 3 (rack 1); on one switch
    the upload is balanced (1 and 2), under a slow rack uplink worker 3 sends all three.

    >>> a = assign_senders_racks([2, 2, 2], [0b1001] * 3, K=4, rack=[0, 0, 1, 1], up=1.0,
    ...                          rack_up=0.25, rack_down=1.0)
    >>> a.sender.tolist(), a.uploads.tolist()
    ([3, 3, 3], [0, 0, 0, 3])
    >>> assign_senders([2, 2, 2], [0b1001] * 3, K=4).uploads.tolist()
    [2, 0, 0, 1]

    The same units of 100, 100 and 400 bytes on links of one rate: worker 3 sends the 400 bytes
    in its rack, worker 0 the two of 100 across the racks.

    >>> b = assign_senders_racks([2, 2, 2], [0b1001] * 3, K=4, rack=[0, 0, 1, 1], up=1.0,
    ...                          rack_up=1.0, rack_down=1.0, sizes=[100, 100, 400])
    >>> b.sender.tolist(), b.uploads.tolist()
    ([0, 0, 3], [200, 0, 0, 400])
    """
    K = check_int(K, "K", minimum=1)
    want = np.asarray(wanter, dtype=np.int64).reshape(-1)
    sets = _holder_array(holders, K)
    racks, rates = _checked_racks(rack, K, {"up": up, "rack_up": rack_up, "rack_down": rack_down})
    _check_units(want, sets, K)  # refuses bad units, naming the argument
    d = None if sizes is None else _unit_sizes(sizes, want.size)
    if d is not None and d.size and int(d.min()) == int(d.max()):  # one size: the units' choice, scaled
        a = assign_senders_racks(want, sets, K=K, rack=racks, **rates)
        c = int(d[0])
        return SenderAssignment(a.sender, a.uploads * c, a.downloads * c, a.upload_bound * c)
    if _lone_holder(sets) is not None:
        return assign_senders(want, sets, K=K, sizes=d)  # one holder a unit: forced
    # a group: (holder set, wanter's rack), in increasing order of both; its units in the order given
    # one word: the masks are their own keys; several: the index of each set among the distinct ones
    sets_all: list[int] | None = None
    key = sets
    if sets.ndim == 2:
        sets_all, key, _ = _groups(sets)
    wr = racks[want]
    order = np.lexsort((np.arange(want.size), wr, key))
    m_s, r_s = key[order], wr[order]
    starts = np.flatnonzero(np.r_[True, (m_s[1:] != m_s[:-1]) | (r_s[1:] != r_s[:-1])])
    counts = np.diff(np.r_[starts, want.size])
    keys = m_s[starts].tolist()
    keys = keys if sets_all is None else [sets_all[g] for g in keys]
    groups = list(zip(keys, r_s[starts].tolist(), strict=True))
    bound = upload_bound(sets, K=K, sizes=d)
    if d is None:  # every choice's busiest upload is a whole number of units, at least ceil(bound):
        floor = math.ceil(bound) / rates["up"]  # a floor under T that spares the solver proving it
        unit = np.ones(len(groups))
    else:  # the bytes of a unit of each group of one size, else 0: the group's f is then in bytes
        sz = d[order]
        first_sz = sz[starts]
        same = np.minimum.reduceat(sz, starts) == np.maximum.reduceat(sz, starts)
        unit = np.where(same, first_sz, 0).astype(np.float64)
        counts = np.where(same, counts, np.add.reduceat(sz, starts))
        floor = float(bound) / rates["up"]
    scale = 1.0 if d is None else max(float(d.mean()), 1.0)
    flows = _rack_flows(groups, counts.tolist(), K, racks, rates, floor=floor, unit=unit, scale=scale)
    sender = np.empty(want.size, dtype=np.int64)
    ends = np.r_[starts[1:], want.size].tolist()
    for g, (start, end, flow) in enumerate(zip(starts.tolist(), ends, flows, strict=True)):
        units, ws = order[start:end], sorted(flow)
        if unit[g]:  # runs of f(g, w) units
            sender[units] = np.repeat(np.asarray(ws, dtype=np.int64), [int(flow[w]) for w in ws])
        else:  # f(g, w) bytes: each unit to the holder whose share holds its middle byte
            assert d is not None
            middle = np.cumsum(d[units]) - d[units] / 2
            runs = np.searchsorted(np.cumsum([flow[w] for w in ws]), middle, side="right")
            sender[units] = np.asarray(ws, dtype=np.int64)[np.minimum(runs, len(ws) - 1)]
    return SenderAssignment(
        sender=sender,
        uploads=np.bincount(sender, weights=d, minlength=K).astype(np.int64),
        downloads=np.bincount(want, weights=d, minlength=K).astype(np.int64),
        upload_bound=bound,
    )


def _checked_racks(rack: object, K: int, rates: dict[str, Any]) -> tuple[np.ndarray, dict[str, float]]:
    """Each worker's rack and the rates of :func:`assign_senders_racks`, checked, naming the argument."""
    racks = np.asarray(rack).reshape(-1)
    if racks.shape != (K,) or not np.issubdtype(racks.dtype, np.integer) or (K and int(racks.min()) < 0):
        raise ValueError(f"Argument 'rack' must give each of the K = {K} workers a rack (an int >= 0).")
    for name, value in rates.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"Argument {name!r} must be a positive finite number, not {value!r}.")
    return racks.astype(np.int64), {name: float(value) for name, value in rates.items()}


def _rack_flows(
    groups: list[tuple[int, int]], counts: list[int], K: int, racks: np.ndarray, rates: dict[str, float],
    *, floor: float = 0.0, unit: np.ndarray, scale: float = 1.0,
) -> list[dict[int, float]]:  # fmt: skip
    """The integer program of :func:`assign_senders_racks`: what each holder sends of each group,
    ``floor`` a lower bound on the least time ``T`` that every assignment meets. ``unit[g]``: the
    bytes of each of group ``g``'s ``counts[g]`` units (its ``f`` integers), or 0 where
    ``counts[g]`` is its bytes (its ``f`` real). The program runs in units of ``scale`` bytes."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import csr_matrix

    G, R = len(groups), int(racks.max()) + 1
    col_g = np.array([g for g, (mask, _) in enumerate(groups) for _ in _members(mask, K)], dtype=np.int64)
    col_w = np.array([w for mask, _ in groups for w in _members(mask, K)], dtype=np.int64)
    rho = np.array([q for _, q in groups], dtype=np.int64)[col_g]  # the wanters' rack
    away = racks[col_w] != rho
    n = col_g.size + 1  # the f(g, w), then T
    whole = unit > 0
    size = np.where(whole, unit / scale, 1.0)[col_g]  # a column's load by one f, in scaled bytes
    demand = np.where(whole, counts, np.asarray(counts, dtype=np.float64) / scale)
    # rows: the groups (= n_g), the uploads, the racks' uplinks, the racks' downlinks (<= rate T)
    link_rate = np.r_[np.full(K, rates["up"]), np.full(R, rates["rack_up"]), np.full(R, rates["rack_down"])]
    f_rows = [col_g, G + col_w, G + K + racks[col_w][away], G + K + R + rho[away]]
    f_cols = [np.arange(n - 1), np.arange(n - 1), np.flatnonzero(away), np.flatnonzero(away)]
    f_vals = [np.ones(n - 1), size, size[away], size[away]]
    rows = np.concatenate([*f_rows, G + np.arange(K + 2 * R)])
    cols = np.concatenate([*f_cols, np.full(K + 2 * R, n - 1)])
    vals = np.concatenate([*f_vals, -link_rate])
    A = csr_matrix((vals, (rows, cols)), shape=(G + K + 2 * R, n))
    counts_a = np.asarray(demand, dtype=np.float64)
    rows_ok = LinearConstraint(
        A, np.r_[counts_a, np.full(K + 2 * R, -np.inf)], np.r_[counts_a, np.zeros(K + 2 * R)]
    )
    integrality = np.r_[whole[col_g].astype(np.float64), 0]
    upper = np.r_[counts_a[col_g], np.inf]
    options = {"mip_rel_gap": 0.0}
    lower = np.r_[np.zeros(n - 1), floor / scale]
    first = milp(np.r_[np.zeros(n - 1), 1.0], constraints=rows_ok, integrality=integrality,
                 bounds=Bounds(lower, upper), options=options)  # fmt: skip
    if not first.success:  # pragma: no cover - every unit has a holder: always feasible
        raise AssertionError(f"no assignment of senders: {first.message}")
    f = _snapped(first.x[:-1], whole[col_g])

    def busiest(f: np.ndarray) -> float:  # from the loads (exact for integer f)
        load = f * size
        loads = np.r_[
            np.bincount(col_w, weights=load, minlength=K),
            np.bincount(racks[col_w][away], weights=load[away], minlength=R),
            np.bincount(rho[away], weights=load[away], minlength=R),
        ]
        return float((loads / link_rate).max())

    T = busiest(f)
    # then, at that time, the fewest units (bytes) between racks
    upper[-1] = T * (1 + 1e-9)
    lower[-1] = min(lower[-1], upper[-1])
    second = milp(np.r_[np.where(away, size, 0.0), 0.0], constraints=rows_ok, integrality=integrality,
                  bounds=Bounds(lower, upper), options=options)  # fmt: skip
    if second.success:  # its reals within the solver's tolerance of T (the cut's error is larger)
        g2 = _snapped(second.x[:-1], whole[col_g])
        if busiest(g2) <= T * (1 + (1e-9 if whole.all() else 1e-6)):
            f = g2
    f = np.where(whole[col_g], f, f * scale)  # the real f back in bytes
    flows: list[dict[int, float]] = [{} for _ in groups]
    for k in np.flatnonzero(f):
        flows[int(col_g[k])][int(col_w[k])] = float(f[k])
    for g, c in enumerate(counts):  # pragma: no cover - the solver's integers add up
        if whole[g] and sum(flows[g].values()) != c:
            raise AssertionError(f"group {g}: {sum(flows[g].values())} units sent of {c}")
    return flows


def _snapped(x: np.ndarray, whole: np.ndarray) -> np.ndarray:
    """The solver's ``f``: its integers rounded, its reals at least 0."""
    return np.where(whole, np.rint(x), np.maximum(x, 0.0))
