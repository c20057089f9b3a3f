"""The loads of one transition for any storage: the one place that chooses between the scheme of
one batch a worker (:mod:`coded_shuffle.plan`, :mod:`coded_shuffle.bounds`) and that of ``M``
batches a worker (:mod:`coded_shuffle.storage`).

Each function of those layers returns one type; the command line, the order trade-off and the
plots take a ``storage`` and come here, so that neither layer imports the other.

=========  ================================================================================
``M``      batches each worker stores, ``1 <= M <= K`` (``storage``); ``t = M - 1``
=========  ================================================================================
"""

from __future__ import annotations

from fractions import Fraction

from ._checks import check_int
from .bounds import LowerBound, lower_bound, worst_case
from .orders import Placement
from .plan import DeliveryPlan, Rates, plan_delivery, rates
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

__all__ = ["bound_with_storage", "plan_with_storage", "rates_with_storage", "worst_case_with_storage"]


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
