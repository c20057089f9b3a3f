"""The loads of one transition for any storage: the one place that chooses between the scheme of
one batch a worker (:mod:`coded_shuffle.plan`, :mod:`coded_shuffle.bounds`) and that of ``M``
batches a worker (:mod:`coded_shuffle.storage`).

Each function of those layers returns one type; the command line, the order trade-off and the
plots take a ``storage`` and come here, so that neither layer imports the other.

=========  ================================================================================
``M``      batches each worker stores, ``1 <= M <= K`` (``storage``); ``t = M - 1``
``d_r``    bytes of record ``r`` (``sizes``)
``S_B``    the shuffle matrix in bytes: ``S_B[i][j]``, the bytes of the records ``i`` holds and
           ``j`` needs (:func:`coded_shuffle.matrix.shuffle_matrix` with ``sizes``)
=========  ================================================================================

Bytes, not counts (:func:`byte_loads`): where the records' sizes differ, every load and bound of
a transition is also given in bytes, beside the counts. A byte of a record is a point of its own
in ``S_B``: the loads of ``S_B`` are those of the records cut into pieces of one byte (no
padding, no framing), and its genie bound, the bound weighted by size, holds for every scheme
(``proofs/claim_14_byte_bound.py``); it is not ``d`` times the bound in records for any one
``d``. The download bound is the bytes of the busiest worker's next batch that it does not
hold. A plan of whole records blind to the sizes pads each symbol to its longest record: its
bytes are ``padded_bytes``, for comparison. The engine's plan pairs records of similar size; its
bytes on every link, and each mode's predicted time, are
:func:`coded_shuffle.network.predict_bytes`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._checks import check_int
from ._predictions import symbol_bytes
from .bounds import LowerBound, lower_bound, worst_case
from .matrix import shuffle_matrix
from .orders import Placement, check_record_sizes
from .plan import PLAN_MAX_POINTS, DeliveryPlan, Rates, plan_delivery, rates
from .storage import (
    StorageBound,
    StoragePlan,
    StorageRates,
    piece_placement,
    plan_storage,
    storage_lower_bound,
    storage_rates,
    storage_worst_case,
)

__all__ = [
    "ByteLoads",
    "bound_with_storage",
    "byte_loads",
    "padded_bytes",
    "plan_with_storage",
    "rates_with_storage",
    "worst_case_with_storage",
]


def _storage(storage: object) -> int:
    return check_int(storage, "storage", minimum=1)


def rates_with_storage(S: object, *, storage: int = 1, strategy: str = "greedy") -> Rates | StorageRates:
    """The loads of ``S``: :func:`~coded_shuffle.plan.rates` with one batch a worker, else
    :func:`~coded_shuffle.storage.storage_rates` (``strategy`` its cycle packing at ``t = 0``).

    Examples
    --------
    The 3-cycle when every worker stores two batches: each record has two pieces, one of them
    already at its new owner.

    >>> rates_with_storage([[0, 1, 0], [0, 0, 1], [1, 0, 0]], storage=2).coded
    Fraction(1, 2)
    >>> rates_with_storage([[0, 1, 0], [0, 0, 1], [1, 0, 0]]).coded
    2
    """
    M = _storage(storage)
    return rates(S, strategy=strategy) if M == 1 else storage_rates(S, M=M, packing=strategy)


def bound_with_storage(
    S: object, *, storage: int = 1, exact: bool | None = None
) -> LowerBound | StorageBound:
    """The lower bound of ``S``: :func:`~coded_shuffle.bounds.lower_bound` with one batch a worker,
    else the bound on pieces, :func:`~coded_shuffle.storage.storage_lower_bound`.

    Examples
    --------
    With two batches stored, the cyclic shift of 4 workers needs ``R(1) = 1`` record a batch:

    >>> from coded_shuffle.bounds import cyclic_shift_matrix
    >>> bound_with_storage(cyclic_shift_matrix(8, 4), storage=2).value
    Fraction(2, 1)
    """
    M = _storage(storage)
    return lower_bound(S, exact=exact) if M == 1 else storage_lower_bound(S, M=M, exact=exact)


def worst_case_with_storage(N: int, K: int, *, storage: int = 1) -> Fraction:
    """``N (K - 1) / K`` with one batch a worker, else ``R(t) = (N / K)(K - 1 - t) / (t + 1)``.

    >>> worst_case_with_storage(15, 3), worst_case_with_storage(15, 3, storage=2)
    (Fraction(10, 1), Fraction(5, 2))
    """
    M = _storage(storage)
    return worst_case(N, K) if M == 1 else storage_worst_case(N, K, M)


def plan_with_storage(
    placement_t: Placement, placement_t1: Placement, *, storage: int = 1, strategy: str = "greedy"
) -> DeliveryPlan | StoragePlan:
    """The plan of one transition: :func:`~coded_shuffle.plan.plan_delivery` with one batch a
    worker, else :func:`~coded_shuffle.storage.plan_storage` from the pieces that
    :func:`~coded_shuffle.storage.piece_placement` places on ``placement_t`` (over several
    epochs, plan from the placement :func:`~coded_shuffle.storage.update_storage` keeps).

    >>> from coded_shuffle.orders import epoch_placement
    >>> a, b = (epoch_placement(1000, 4, seed=0, epoch=e) for e in (0, 1))
    >>> plan_with_storage(a, b, storage=2).n_symbols  # pieces of a third of a record: 170 records
    511
    """
    M = _storage(storage)
    if M == 1:
        return plan_delivery(placement_t, placement_t1, strategy=strategy)
    if not isinstance(placement_t, Placement):
        raise TypeError(f"Argument 'placement_t' must be a Placement, not {type(placement_t).__name__}.")
    return plan_storage(piece_placement(placement_t, M=M), placement_t1, packing=strategy)


# --------------------------------------------------------------------------- bytes


@dataclass(frozen=True, eq=False)
class ByteLoads:
    """The loads and bounds of one transition in bytes, with the counts beside them.

    Attributes
    ----------
    sizes : numpy.ndarray
        Bytes of each record (the input).
    storage : int
        Batches each worker stores, ``M``.
    rates, bound
        In records: :func:`rates_with_storage` and :func:`bound_with_storage` of ``S``.
    rates_bytes, bound_bytes
        The same of ``S_B``, in bytes: the loads of the records cut into pieces of one byte, and
        the genie bound weighted by size (a bound for every scheme).
    batch_bytes : numpy.ndarray
        Bytes of each worker's next batch (the ``K_{t+1}`` workers of the next epoch).
    missing_bytes : numpy.ndarray
        Bytes of the records of each worker's next batch that it did not hold (with ``M > 1`` it
        already holds the share ``t / (K - 1)`` of each: :attr:`download_bound_bytes`).
    padded_bytes : int or None
        A plan of whole records blind to the sizes (:func:`~coded_shuffle.plan.plan_delivery`
        without ``sizes``), each symbol as long as its longest record, for comparison: the
        engine pairs records of similar size (its bytes:
        :func:`~coded_shuffle.network.predict_bytes`); None with ``M > 1`` or when not asked for.
    """

    sizes: np.ndarray
    storage: int
    rates: Rates | StorageRates
    bound: LowerBound | StorageBound
    rates_bytes: Rates | StorageRates
    bound_bytes: LowerBound | StorageBound
    batch_bytes: np.ndarray
    missing_bytes: np.ndarray
    padded_bytes: int | None

    @property
    def S(self) -> np.ndarray:
        """The shuffle matrix in records."""
        return self.rates.S

    @property
    def S_bytes(self) -> np.ndarray:
        """The shuffle matrix in bytes, ``S_B``."""
        return self.rates_bytes.S

    @property
    def uncoded_bytes(self) -> int | Fraction:
        """Every moved record (with ``M > 1``, every missing piece) sent alone, in bytes."""
        return self.rates_bytes.uncoded

    @property
    def coded_bytes(self) -> int | Fraction:
        """The coded load of ``S_B``: the scheme on pieces of one byte, no padding."""
        return self.rates_bytes.coded

    @property
    def lower_bound_bytes(self) -> int | Fraction:
        """The genie bound weighted by size, in bytes."""
        return self.bound_bytes.value

    @property
    def download_bound_bytes(self) -> int | Fraction:
        """What the busiest worker must receive, whatever the scheme: its missing bytes, times
        ``(K - 1 - t) / (K - 1)`` with a storage of ``M = 1 + t`` batches."""
        most = int(self.missing_bytes.max(initial=0))
        if self.storage == 1:
            return most
        K = int(self.S.shape[0])
        return Fraction(most * (K - self.storage), K - 1)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready: each load in bytes beside it in records; fractions as floats."""

        def plain(v: int | Fraction | None) -> int | float | None:
            return v if v is None or isinstance(v, int) else (int(v) if v.denominator == 1 else float(v))

        return {
            "storage": self.storage,
            "bytes": int(self.sizes.sum()),
            "uncoded": plain(self.rates.uncoded), "uncoded_bytes": plain(self.uncoded_bytes),
            "coded": plain(self.rates.coded), "coded_bytes": plain(self.coded_bytes),
            "padded_bytes": self.padded_bytes,
            "lower_bound": plain(self.bound.value), "lower_bound_bytes": plain(self.lower_bound_bytes),
            "download_bound_bytes": plain(self.download_bound_bytes),
            "batch_bytes": [int(v) for v in self.batch_bytes],
        }  # fmt: skip


def padded_bytes(plan: DeliveryPlan, sizes: object) -> int:
    """The bytes of ``plan``'s symbols when each is as long as its longest record (the XOR of two
    records pads the shorter with zeros), ``sizes`` the bytes of each record; a plan of whole
    records (``subpackets=1``), with or without ``sizes`` (of the engine's plan, which pairs
    records of similar size, the coded bytes of :func:`~coded_shuffle.network.predict_bytes`).

    Examples
    --------
    The 3-cycle of records of 5, 1 and 3 bytes: two symbols, ``m_1 + m_2`` and ``m_2 + m_3``.

    >>> from coded_shuffle.plan import plan_from_matrix
    >>> plan = plan_from_matrix([[0, 1, 0], [0, 0, 1], [1, 0, 0]])
    >>> a, b, _ = plan.transmissions()
    >>> sizes = [5, 1, 3]
    >>> padded_bytes(plan, sizes) == sum(max(sizes[x], sizes[y]) for x, y in zip(a, b))
    True
    """
    if not isinstance(plan, DeliveryPlan):
        raise TypeError(f"Argument 'plan' must be a DeliveryPlan, not {type(plan).__name__}.")
    if plan.subpackets != 1:
        raise ValueError(
            f"Argument 'plan' must be a plan of whole records (subpackets 1), not {plan.subpackets}."
        )
    return symbol_bytes(plan, check_record_sizes(sizes, plan.N))[0]


def byte_loads(
    placement_t: Placement,
    placement_t1: Placement,
    *,
    sizes: object,
    storage: int = 1,
    strategy: str = "greedy",
    exact: bool | None = None,
    padded: bool = True,
) -> ByteLoads:
    """The loads and bounds of the transition ``placement_t -> placement_t1`` in bytes and records.

    Parameters
    ----------
    placement_t, placement_t1 : Placement
        Placements of the same ``N`` records (their ``K`` may differ with ``storage=1``).
    sizes : array_like of int
        Bytes of each record, each at least 1 (:func:`coded_shuffle.orders.check_record_sizes`).
    storage : int
        Batches each worker stores, ``M``.
    strategy : str
        The cycle packing (:func:`rates_with_storage`).
    exact : bool, optional
        Passed to the bounds (:func:`bound_with_storage`).
    padded : bool
        Plan the records (``M = 1``, at most :data:`~coded_shuffle.plan.PLAN_MAX_POINTS`) and give
        :attr:`ByteLoads.padded_bytes`.

    Examples
    --------
    Three workers, each record moving one step round; the large record makes the bound in bytes
    more than the bound in records times the mean size:

    >>> from coded_shuffle.orders import placement_from_owner
    >>> a, b = placement_from_owner([0, 1, 2], 3), placement_from_owner([1, 2, 0], 3)
    >>> x = byte_loads(a, b, sizes=[10, 1, 1])
    >>> x.rates.coded, x.bound.value, x.coded_bytes, x.lower_bound_bytes, x.padded_bytes
    (2, 2, 11, 11, 11)
    >>> x.download_bound_bytes, x.batch_bytes.tolist()
    (10, [1, 10, 1])
    """
    M = _storage(storage)
    d = check_record_sizes(sizes, placement_t.N if isinstance(placement_t, Placement) else None)
    S = shuffle_matrix(placement_t, placement_t1)
    S_B = shuffle_matrix(placement_t, placement_t1, sizes=d)
    r = rates_with_storage(S, storage=M, strategy=strategy)
    r_B = rates_with_storage(S_B, storage=M, strategy=strategy)
    lb = bound_with_storage(S, storage=M, exact=exact)
    lb_B = bound_with_storage(S_B, storage=M, exact=exact)
    moved = r_B.S.copy()
    np.fill_diagonal(moved, 0)
    missing = moved.sum(axis=0)
    pad = None
    if padded and M == 1 and placement_t.N <= PLAN_MAX_POINTS:
        pad = padded_bytes(plan_delivery(placement_t, placement_t1, strategy=strategy), d)
    batch = placement_t1.batch_bytes(d)
    for arr in (batch, missing):
        arr.flags.writeable = False
    return ByteLoads(
        sizes=d, storage=M, rates=r, bound=lb, rates_bytes=r_B, bound_bytes=lb_B, batch_bytes=batch,
        missing_bytes=missing, padded_bytes=pad,
    )  # fmt: skip
