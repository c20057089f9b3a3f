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
``q``, so sizes differ by at most one (``balance="count"``, the default). Where the records'
sizes differ, ``balance="bytes"`` cuts the same order into ``K`` runs of about equal bytes
instead (:func:`byte_batch_sizes`): each cut is the position nearest its share ``k B / K`` of the
``B`` bytes, so every batch's bytes lie within one record of ``B / K``. A placement is stored as
``owner[n]``, the worker that holds point ``n``: ``N`` small integers, never an ``N x K``
structure.

=============  ==============================================================================
``sizes[n]``   bytes of record ``n`` (at least 1), ``B`` their sum
``balance``    ``"count"``: batches of equal counts; ``"bytes"``: of equal bytes (:data:`BALANCES`)
=============  ==============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import check_choice, check_int, check_int_array
from .permutation import epoch_permutation

#: How an epoch's order is cut into batches: equal counts, or equal bytes (within one record).
BALANCES: tuple[str, ...] = ("count", "bytes")

#: Most bytes the records may hold in all: prefix sums and byte-weighted matrices stay exact
#: integers (:data:`coded_shuffle.matrix.MAX_POINTS`).
MAX_TOTAL_BYTES = 1 << 53

__all__ = [
    "BALANCES",
    "Placement",
    "batch_sizes",
    "byte_batch_sizes",
    "check_record_sizes",
    "epoch_batch_sizes",
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


def check_record_sizes(sizes: object, N: int | None = None, name: str = "sizes") -> np.ndarray:
    """Return ``sizes`` as a read-only ``int64`` array of record sizes in bytes, or raise naming ``name``.

    One entry a record (``N`` of them when ``N`` is given), each at least 1 byte (an empty record
    is refused), at most :data:`MAX_TOTAL_BYTES` in all.

    Examples
    --------
    >>> check_record_sizes([3, 1, 2], 3).tolist()
    [3, 1, 2]
    >>> check_record_sizes([3, 0], 2)
    Traceback (most recent call last):
    ...
    ValueError: Argument 'sizes' must hold sizes of at least 1 byte, not 0 (record 1).
    """
    arr = check_int_array(sizes, name, ndim=1)
    if N is not None and arr.shape[0] != N:
        raise ValueError(
            f"Argument {name!r} must give the size of each of the N = {N} records, not {arr.shape[0]}."
        )
    if arr.size and int(arr.min()) < 1:
        at = int(np.argmin(arr))
        raise ValueError(
            f"Argument {name!r} must hold sizes of at least 1 byte, not {int(arr[at])} (record {at})."
        )
    if arr.size and int(arr.max()) > MAX_TOTAL_BYTES // arr.size:
        total = sum(int(v) for v in arr.flat)  # exactly, in Python ints
        if total > MAX_TOTAL_BYTES:
            raise ValueError(
                f"Argument {name!r} must sum to at most 2**53 = {MAX_TOTAL_BYTES} bytes, not {total}."
            )
    out = np.array(arr, dtype=np.int64)
    out.flags.writeable = False
    return out


def byte_batch_sizes(order_sizes: object, K: int) -> np.ndarray:
    """Return the records in each of ``K`` batches when a run of records is cut by bytes.

    ``order_sizes[p]`` is the size of the record at position ``p`` of an epoch's order
    (``sizes[order]``), ``B`` their sum, ``P[p]`` the bytes of the first ``p`` positions. Cut ``k``
    (``0 < k < K``) is the position ``p`` whose ``P[p]`` is nearest ``k B / K`` (the lower one on a
    tie), computed exactly in integers. Then each cut is at most half a record from its share, so
    batch ``k`` holds ``B / K`` bytes give or take half of each record it is cut at: within one
    record of equal. Every batch keeps at least one record (``N >= K``): where a record is larger
    than about ``B / K`` two cuts could meet, and the later ones move right (then clamped so that
    the last batches keep one record each). With equal sizes the counts differ by at most one, as
    with :func:`batch_sizes`, though not always on the same workers.

    Brute-force equivalent of cut ``k`` (before that clamping):
    ``min(range(N + 1), key=lambda p: abs(K * P[p] - k * B))``.

    Examples
    --------
    >>> byte_batch_sizes([6, 1, 1, 1, 1, 1, 1], 2).tolist()  # 6 bytes and 6 bytes
    [1, 6]
    >>> byte_batch_sizes([4] * 10, 3).tolist(), batch_sizes(10, 3).tolist()
    ([3, 4, 3], [4, 3, 3])
    """
    K = check_int(K, "K", minimum=1)
    s = check_record_sizes(order_sizes, name="order_sizes")
    N = s.shape[0]
    if N < K:
        raise ValueError(f"Argument 'order_sizes' must have at least K = {K} records, not {N}.")
    P = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(s, out=P[1:])
    B = int(P[-1])
    shares = [k * B for k in range(1, K)]  # K times the ideal cut, in Python ints: exact
    first = np.searchsorted(P, np.array([-(-v // K) for v in shares], dtype=np.int64), side="left")
    cuts = np.empty(K + 1, dtype=np.int64)
    cuts[0], cuts[K] = 0, N
    for k, (share, p1) in enumerate(zip(shares, first.tolist(), strict=True), start=1):
        p0 = p1 - 1  # P[p0] < share / K <= P[p1]
        below = share - K * int(P[p0]) if p0 >= 0 else None
        cuts[k] = p0 if below is not None and below <= K * int(P[p1]) - share else p1
    # every batch keeps a record: cuts[k] - k non-decreasing within [0, N - K]
    shift = np.arange(K + 1, dtype=np.int64)
    cuts = np.clip(np.maximum.accumulate(cuts - shift), 0, N - K) + shift
    return np.diff(cuts)


def epoch_batch_sizes(order: object, K: int, *, sizes: object = None, balance: str = "count") -> np.ndarray:
    """Return the records of each of ``K`` batches cut from ``order`` under ``balance``.

    ``"count"``: :func:`batch_sizes` (``sizes`` not needed). ``"bytes"``: :func:`byte_batch_sizes`
    of ``sizes[order]``, ``sizes`` the bytes of each record. Worker ``k``'s batch is the ``k``-th
    run of positions of ``order`` of these lengths.

    Examples
    --------
    >>> epoch_batch_sizes([0, 1, 2, 3], 2).tolist()
    [2, 2]
    >>> epoch_batch_sizes([0, 1, 2, 3], 2, sizes=[9, 1, 1, 1], balance="bytes").tolist()
    [1, 3]
    """
    K = check_int(K, "K", minimum=1)
    balance = check_choice(balance, "balance", BALANCES)
    arr = check_int_array(order, "order", ndim=1)
    N = arr.shape[0]
    if sizes is None:
        if balance == "bytes":
            raise ValueError(
                "Argument 'sizes' must be given (the bytes of each record) with balance='bytes'."
            )
        return batch_sizes(N, K)
    s = check_record_sizes(sizes, N)
    if balance == "count":
        return batch_sizes(N, K)
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= N):
        raise ValueError(
            f"Argument 'order' must hold positions in [0, {N}), not [{int(arr.min())}, {int(arr.max())}]."
        )
    return byte_batch_sizes(s[arr], K)


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

    def batch_bytes(self, sizes: object) -> np.ndarray:
        """Return the bytes of each worker's batch, ``sizes[n]`` the bytes of point ``n``.

        Examples
        --------
        >>> placement_from_owner([0, 1, 1, 0], 2).batch_bytes([5, 1, 2, 3]).tolist()
        [8, 3]
        """
        s = check_record_sizes(sizes, self.N)
        out = np.zeros(self.K, dtype=np.int64)
        np.add.at(out, self.owner, s)  # exact in int64 (a weighted bincount sums in floats)
        return out

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


def placement_from_permutation(
    perm: object, K: int, *, sizes: object = None, balance: str = "count"
) -> Placement:
    """Cut the permutation ``perm`` into ``K`` batches of sizes :func:`epoch_batch_sizes`.

    Worker ``k`` holds the points at positions ``[b_k, b_{k+1})`` of ``perm``: equal counts
    (``balance="count"``, :func:`batch_sizes`) or, with ``sizes`` the bytes of each point,
    ``balance="bytes"``: equal bytes within one record (:func:`byte_batch_sizes`).

    Examples
    --------
    >>> placement_from_permutation([3, 0, 2, 1], 2).owner.tolist()
    [0, 1, 1, 0]
    >>> placement_from_permutation([3, 0, 2, 1], 2, sizes=[1, 1, 1, 9], balance="bytes").owner.tolist()
    [1, 1, 1, 0]
    """
    K = check_int(K, "K", minimum=1)
    arr = check_int_array(perm, "perm", ndim=1)
    N = arr.shape[0]
    if N < K:
        raise ValueError(f"Argument 'perm' must have at least K = {K} points, not {N}.")
    if N and (int(arr.min()) < 0 or int(arr.max()) >= N or np.bincount(arr, minlength=N).max(initial=0) != 1):
        raise ValueError("Argument 'perm' must be a permutation of 0..N-1.")
    counts = epoch_batch_sizes(arr, K, sizes=sizes, balance=balance)
    owner = np.empty(N, dtype=owner_dtype(K))
    owner[arr] = np.repeat(np.arange(K, dtype=owner.dtype), counts)
    owner.flags.writeable = False
    return Placement(K=K, owner=owner)


def epoch_placement(
    N: int, K: int, *, seed: int, epoch: int, sizes: object = None, balance: str = "count"
) -> Placement:
    """Return the placement of epoch ``epoch``: :func:`epoch_permutation` cut into ``K`` batches
    (of equal counts, or with ``sizes`` and ``balance="bytes"`` of equal bytes:
    :func:`epoch_batch_sizes`).

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
    counts = epoch_batch_sizes(perm, K, sizes=sizes, balance=balance)
    owner = np.empty(N, dtype=owner_dtype(K))
    owner[perm] = np.repeat(np.arange(K, dtype=owner.dtype), counts)
    owner.flags.writeable = False
    return Placement(K=K, owner=owner)
