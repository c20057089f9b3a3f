"""The peers' exchange: which holder sends each missing unit, so that the busiest upload is least.

Every worker must download exactly the units (records, or pieces of a storage) of its next
batch that it does not hold; each such unit has a holder set ``H`` (the workers that hold it,
the wanter never among them), and any one holder may send it. The downloads are fixed; the
choice of senders sets the uploads. With ``n_g`` units of holder set ``H_g``, an assignment
whose largest upload is ``L`` exists if and only if, for every set ``S`` of workers,

    n(S) = sum of n_g over the holder sets inside S  <=  L |S|

(Hall's condition for the flow network source -> set g (capacity ``n_g``) -> its holders ->
sink (capacity ``L``); a maximum flow of value ``sum n_g`` is the assignment). The fractional
optimum, the least ``L`` when units may be split between holders, is therefore

    lambda* = max over S of n(S) / |S|,

a lower bound on the busiest upload of any exchange, and by the integrality of flows the least
integral ``L`` is ``ceil(lambda*)``: :func:`assign_senders` reaches it, so its assignment is
optimal. ``lambda*`` is found exactly (a fraction) by Dinkelbach's iteration on minimum cuts:
from ``lambda = n(all) / K``, the cut of the network with sink capacities ``lambda`` gives the
set ``S`` most in excess of ``lambda |S|``; ``lambda`` becomes ``n(S) / |S|`` until no set is
in excess. ``proofs/exchange_upload_bound.py`` checks both against every subset of workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from .._checks import check_int, check_int_array
from .rounds import ROUND_MERGE_FRACTION, exchange_rounds, is_round_schedule

#: The most workers whose holder sets are single masks of 64 bits (1-D ``uint64``); beyond, a
#: holder set is a row of ``ceil(K / 64)`` such words (:func:`holder_words`).
EXCHANGE_MAX_K = 64

__all__ = [
    "EXCHANGE_MAX_K",
    "ROUND_MERGE_FRACTION",
    "SenderAssignment",
    "assign_senders",
    "exchange_rounds",
    "holder_set",
    "holder_words",
    "is_round_schedule",
    "lone_holders",
    "upload_bound",
]


@dataclass(frozen=True)
class SenderAssignment:
    """Who sends each missing unit, and what it costs each worker.

    Attributes
    ----------
    sender : numpy.ndarray
        ``sender[i]``: the worker that sends unit ``i`` (one of its holders).
    uploads, downloads : numpy.ndarray
        Units each worker sends and receives (length ``K``).
    upload_bound : fractions.Fraction
        ``lambda*``, the fractional optimum of the busiest upload (module docstring).
    """

    sender: np.ndarray
    uploads: np.ndarray
    downloads: np.ndarray
    upload_bound: Fraction

    @property
    def max_upload(self) -> int:
        """The busiest upload of this assignment, ``ceil(upload_bound)``."""
        return int(self.uploads.max(initial=0))

    @property
    def max_download(self) -> int:
        """The busiest download: what no exchange can avoid."""
        return int(self.downloads.max(initial=0))


def _members(mask: int, K: int) -> list[int]:
    return [w for w in range(K) if (mask >> w) & 1]


#: The nodes of the flow network: the source, the sink, then the groups, then the workers. Integers
#: only: their hashes do not change from one process to the next (those of strings do), so every
#: worker that computes the assignment walks the network in the same order and gets the same one.
_SOURCE, _SINK = 0, 1


def _group(g: int) -> int:
    return 2 + g


def _worker(w: int, n_groups: int) -> int:
    return 2 + n_groups + w


def _network(groups: list[int], counts: list[int], K: int, scale: int, cap: int) -> object:
    """The flow network of the module docstring: counts scaled by ``scale``, sinks of ``cap``."""
    import networkx as nx

    G = nx.DiGraph()
    n = len(groups)
    for g, (mask, c) in enumerate(zip(groups, counts, strict=True)):
        G.add_edge(_SOURCE, _group(g), capacity=c * scale)
        for w in _members(mask, K):
            G.add_edge(_group(g), _worker(w, n))  # no capacity: unbounded
    for w in range(K):
        G.add_edge(_worker(w, n), _SINK, capacity=cap)
    return G


def _bound(groups: list[int], counts: list[int], K: int) -> Fraction:
    """``lambda*`` by Dinkelbach's iteration on minimum cuts (module docstring)."""
    import networkx as nx

    total = sum(counts)
    lam = Fraction(total, K)
    while True:
        G = _network(groups, counts, K, lam.denominator, lam.numerator)
        _, (side, _) = nx.minimum_cut(G, _SOURCE, _SINK)
        first = _worker(0, len(groups))
        S = {node - first for node in side if node >= first}
        inside = sum(n for mask, n in zip(groups, counts, strict=True) if set(_members(mask, K)) <= S)
        if not S or Fraction(inside, len(S)) <= lam:
            return lam
        lam = Fraction(inside, len(S))


def upload_bound(holders: object, *, K: int, sizes: object = None) -> Fraction:
    """``lambda*`` of units with holder sets ``holders`` (bitmasks): the least busiest upload.

    With ``sizes`` (the bytes of each unit) it is in bytes: ``max over S of b(S) / |S|``, ``b(S)``
    the bytes of the units whose holders all lie in ``S``; those must leave through the uploads
    of ``S``, however the units are split between their holders, so no exchange uploads less
    from its busiest worker.

    ``holders`` as :func:`assign_senders` takes them.

    Examples
    --------
    Three units, two held by worker 0 alone and one by workers 0 and 1: worker 0 sends at least
    its own two, and ``{0}`` gives ``2 / 1``.

    >>> upload_bound([0b01, 0b01, 0b11], K=2)
    Fraction(2, 1)

    Four units, three held by workers 0 and 1 and one by workers 1 and 2: ``{0, 1}`` must send
    three between them.

    >>> upload_bound([0b011, 0b011, 0b011, 0b110], K=3)
    Fraction(3, 2)

    The same units of 10, 10, 10 and 100 bytes: ``{1, 2}`` must send the 100 between them.

    >>> upload_bound([0b011, 0b011, 0b011, 0b110], K=3, sizes=[10, 10, 10, 100])
    Fraction(50, 1)
    """
    K = check_int(K, "K", minimum=1)
    sets = _holder_array(holders, K)
    if sets.shape[0] == 0:
        return Fraction(0)
    groups, inverse, counts = _groups(sets)
    if sizes is None:
        return _bound(groups, [int(c) for c in counts], K)
    d = _unit_sizes(sizes, sets.shape[0])
    weights = [0] * len(groups)
    for g, v in zip(inverse.tolist(), d.tolist(), strict=True):
        weights[g] += int(v)  # exact, in Python ints
    return _bound(groups, weights, K)


def _words(K: int) -> int:
    """Words of 64 bits a holder set of ``K`` workers takes: 0 while one mask (1-D) holds it."""
    return 0 if K <= EXCHANGE_MAX_K else -(-K // 64)


def holder_words(sets: object, *, K: int) -> np.ndarray:
    """Holder sets (Python int bitmasks of any width) in the form :func:`assign_senders` takes for
    ``K`` workers: a ``uint64`` mask each (1-D) while ``K <= 64``, else a row of ``W = ceil(K / 64)``
    words (worker ``w`` is bit ``w % 64`` of word ``w // 64``).

    Examples
    --------
    >>> holder_words([0b101, 1 << 70], K=80).tolist()
    [[5, 0], [0, 64]]
    >>> holder_words([0b101], K=4).tolist()
    [5]
    """
    W = _words(K)
    ints = [int(x) for x in np.asarray(sets, dtype=object).reshape(-1)]
    if any(x < 0 or x >> K for x in ints):
        raise ValueError(f"Argument 'sets' must be sets of the K = {K} workers (bitmasks).")
    if W == 0:
        return np.array(ints, dtype=np.uint64)
    top = (1 << 64) - 1
    return np.array([[(x >> (64 * i)) & top for i in range(W)] for x in ints], dtype=np.uint64).reshape(-1, W)


def lone_holders(worker: object, *, K: int) -> np.ndarray:
    """The holder sets ``{worker[i]}`` (one holder a unit) in the form of :func:`holder_words`.

    Examples
    --------
    >>> lone_holders([1, 70], K=80).tolist()
    [[2, 0], [0, 64]]
    >>> lone_holders([1, 3], K=4).tolist()
    [2, 8]
    """
    w = np.asarray(worker, dtype=np.int64).reshape(-1)
    if w.size and (int(w.min()) < 0 or int(w.max()) >= K):
        raise ValueError(f"Argument 'worker' must hold workers 0 to {K - 1}.")
    W = _words(K)
    if W == 0:
        return np.left_shift(np.uint64(1), w.astype(np.uint64))
    out = np.zeros((w.size, W), dtype=np.uint64)
    out[np.arange(w.size), w // 64] = np.left_shift(np.uint64(1), (w % 64).astype(np.uint64))
    return out


def holder_set(holders: np.ndarray, i: int) -> int:
    """Unit ``i``'s holder set, as a Python int bitmask, from holder sets of either form.

    >>> holder_set(holder_words([1 << 70], K=80), 0) == 1 << 70
    True
    """
    row = holders[i]
    if np.ndim(row) == 0:
        return int(row)
    return sum(int(w) << (64 * k) for k, w in enumerate(row.tolist()))


def _holder_array(holders: object, K: int) -> np.ndarray:
    """The holder sets checked: 1-D masks (``K <= 64``) or rows of words; Python ints of any width
    are accepted too (:func:`holder_words`)."""
    W = _words(K)
    arr = holders if isinstance(holders, np.ndarray) else np.asarray(holders, dtype=object)
    if arr.dtype == object or (W and arr.ndim == 1):
        arr = holder_words(arr, K=K) if arr.ndim == 1 else np.asarray(arr, dtype=np.uint64)
    if W == 0:
        masks = np.asarray(arr, dtype=np.uint64).reshape(-1)
        if masks.size and (int(masks.min()) == 0 or (K < 64 and int(masks.max()) >> K)):
            raise ValueError(f"Argument 'holders' must be non-empty sets of the K = {K} workers (bitmasks).")
        return masks
    if arr.ndim != 2 or arr.shape[1] != W:
        raise ValueError(
            f"Argument 'holders' must be rows of W = {W} words of 64 bits with K = {K} workers, "
            f"not an array of shape {arr.shape}."
        )
    arr = np.asarray(arr, dtype=np.uint64)
    top = K - 64 * (W - 1)  # the workers of the last word
    if arr.shape[0] and (not arr.any(axis=1).all() or (top < 64 and (arr[:, -1] >> np.uint64(top)).any())):
        raise ValueError(f"Argument 'holders' must be non-empty sets of the K = {K} workers (bitmasks).")
    return arr


def _contains(sets: np.ndarray, worker: np.ndarray) -> np.ndarray:
    """Whether each unit's holder set holds ``worker[i]``."""
    if sets.ndim == 1:
        return ((sets >> worker.astype(np.uint64)) & np.uint64(1)).astype(bool)
    word = sets[np.arange(worker.size), worker // 64]
    return ((word >> (worker % 64).astype(np.uint64)) & np.uint64(1)).astype(bool)


def _lone_holder(sets: np.ndarray) -> np.ndarray | None:
    """The holder of every unit when each has one alone, else None."""
    if sets.ndim == 1:
        if np.any(sets & (sets - np.uint64(1))):
            return None
        return np.frexp(sets.astype(np.float64))[1].astype(np.int64) - 1  # the bit's index
    if sets.shape[0] and np.any(np.bitwise_count(sets).sum(axis=1) != 1):
        return None
    word = np.argmax(sets != 0, axis=1)
    bits = np.frexp(sets[np.arange(word.size), word].astype(np.float64))[1].astype(np.int64) - 1
    return word.astype(np.int64) * 64 + bits


def _groups(sets: np.ndarray) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``(groups, inverse, counts)``: the distinct holder sets (Python ints, increasing), each
    unit's, and their units."""
    if sets.ndim == 1:
        groups, inverse, counts = np.unique(sets, return_inverse=True, return_counts=True)
        return [int(g) for g in groups], inverse.reshape(-1), counts
    rows, inverse, counts = np.unique(sets[:, ::-1], axis=0, return_inverse=True, return_counts=True)
    return [holder_set(rows[:, ::-1], g) for g in range(rows.shape[0])], inverse.reshape(-1), counts


def _check_units(want: np.ndarray, sets: np.ndarray, K: int) -> None:
    if want.shape[0] != sets.shape[0] or want.ndim != 1:
        raise ValueError(
            "Arguments 'wanter' and 'holders' must have one entry a unit, "
            f"not {want.size} and {sets.shape[0]}."
        )
    if want.size and (int(want.min()) < 0 or int(want.max()) >= K):
        raise ValueError(f"Argument 'wanter' must hold workers 0 to {K - 1}.")
    if want.size and np.any(_contains(sets, want)):
        raise ValueError("Argument 'holders' must not hold a unit's wanter: it has the unit already.")


def assign_senders(wanter: object, holders: object, *, K: int, sizes: object = None) -> SenderAssignment:
    """Choose a sender among the holders of every missing unit, with the least busiest upload.

    Parameters
    ----------
    wanter : array_like of int
        The worker that must receive each unit.
    holders : array_like
        Each unit's holder set (the wanter not in it): a ``uint64`` bitmask of workers while
        ``K <= 64``; beyond, a row of ``ceil(K / 64)`` words of 64 bits (worker ``w`` is bit
        ``w % 64`` of word ``w // 64``), or a Python int bitmask (:func:`holder_words`).
    K : int
        Workers.
    sizes : array_like of int, optional
        The bytes of each unit, where they differ: the uploads are then balanced in bytes.

    Returns
    -------
    SenderAssignment
        Its busiest upload is ``ceil(upload_bound)``, the optimum (module docstring). Units of one
        holder set go, in the order given, in consecutive runs to its holders in increasing
        order: every worker that computes the assignment from the same units gets the same one.
        With ``sizes`` every figure is in bytes: the flow of each holder set's bytes at the least
        whole busiest upload ``ceil(upload_bound)`` (:func:`upload_bound` with ``sizes``), then its
        units cut into runs at those amounts, each unit going to the holder whose share its first
        byte falls in, so that an upload exceeds ``ceil(upload_bound)`` by less than one unit of
        each holder set it sends from.

    Examples
    --------
    >>> a = assign_senders([2, 2, 2, 0], [0b011, 0b011, 0b011, 0b110], K=3)
    >>> a.sender.tolist(), a.uploads.tolist(), a.upload_bound
    ([0, 0, 1, 1], [2, 2, 0], Fraction(3, 2))
    >>> assign_senders([0, 0], [(1 << 99) | (1 << 70)] * 2, K=100).sender.tolist()
    [70, 99]
    >>> b = assign_senders([2, 2, 2], [0b011] * 3, K=3, sizes=[300, 100, 200])
    >>> b.sender.tolist(), b.uploads.tolist(), b.upload_bound
    ([0, 1, 1], [300, 300, 0], Fraction(300, 1))
    """
    K = check_int(K, "K", minimum=1)
    want = np.asarray(wanter, dtype=np.int64).reshape(-1)
    sets = _holder_array(holders, K)
    _check_units(want, sets, K)
    d = None if sizes is None else _unit_sizes(sizes, want.size)
    lone = _lone_holder(sets)
    if lone is not None:  # one holder a unit: no choice
        sender = lone
        uploads = np.bincount(sender, weights=d, minlength=K)
        bound = Fraction(int(uploads.max(initial=0)))
    else:
        sender = np.empty(want.size, dtype=np.int64)
        gl, inverse, counts = _groups(sets)
        order = np.argsort(inverse, kind="stable")  # the units of each group, in the order given
        starts = np.concatenate(([0], np.cumsum(counts)))
        if d is None:
            cl = [int(c) for c in counts]
        else:
            cl = [0] * len(gl)
            for g, v in zip(inverse.tolist(), d.tolist(), strict=True):
                cl[g] += int(v)  # exact, in Python ints
        bound = _bound(gl, cl, K)
        flows = _flows(gl, cl, K, -(-bound.numerator // bound.denominator))
        for g in range(len(gl)):
            units = order[starts[g] : starts[g + 1]]
            shares = [flows[g].get(w, 0) for w in _members(gl[g], K)]
            if d is None:
                runs = np.repeat(np.arange(len(shares)), shares)  # n units to each holder in turn
            else:  # the holder whose share holds each unit's first byte
                first = np.cumsum(d[units]) - d[units]
                runs = np.searchsorted(np.cumsum(shares), first, side="right")
            sender[units] = np.asarray(_members(gl[g], K), dtype=np.int64)[runs]
        uploads = np.bincount(sender, weights=d, minlength=K)
    return SenderAssignment(
        sender=sender,
        uploads=uploads.astype(np.int64),
        downloads=np.bincount(want, weights=d, minlength=K).astype(np.int64),
        upload_bound=bound,
    )


def _unit_sizes(sizes: object, n: int) -> np.ndarray:
    d = check_int_array(sizes, "sizes", ndim=1).astype(np.int64)
    if d.shape != (n,) or (d.size and int(d.min()) < 0):
        raise ValueError(f"Argument 'sizes' must give the non-negative bytes of each of the {n} units.")
    return d


def _flows(groups: list[int], counts: list[int], K: int, L: int) -> list[dict[int, int]]:
    """A maximum flow at sink capacity ``L``: units of each group sent by each of its holders."""
    import networkx as nx

    value, flow = nx.maximum_flow(_network(groups, counts, K, 1, L), _SOURCE, _SINK)
    if value != sum(counts):  # pragma: no cover - L = ceil(lambda*) always admits every unit
        raise AssertionError(f"no assignment with uploads of at most {L}")
    first = _worker(0, len(groups))
    return [{node - first: int(f) for node, f in flow[_group(g)].items()} for g in range(len(groups))]
