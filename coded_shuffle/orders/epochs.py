"""Epoch orders by name: the one place where an epoch's global sample order is chosen.

=================  =========================================================================
``permutation``    a uniform permutation from PCG64DXSM, one stream per epoch (the default)
``feistel``        a uniform-looking keyed bijection evaluated on demand, O(1) memory, for
                   ``N`` too large to hold a permutation (see :mod:`.feistel`)
``naive`` ...      MosaicML streaming's shard-aware algorithms ``naive``, ``py1s``, ``py2s``,
                   ``py1b``, ``py1br``, ``py1e`` (see :mod:`.shards`), on shards of
                   ``shard_size`` samples (the last one shorter if it does not divide ``N``)
=================  =========================================================================

Every order depends on ``(seed, epoch)`` alone, never on the number of workers: the batches of
any ``K`` are cut from the same global order (contiguous runs of positions, sizes differing by
at most one), so a run keeps one sample order when ``K`` changes, in the spirit of Levanter's
reader-count-invariant order ("Reproducible batch order even when number of workers changes").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._checks import check_choice, check_int
from .feistel import feistel_permutation
from .permutation import epoch_permutation
from .placement import BALANCES, Placement, check_record_sizes, epoch_batch_sizes, owner_dtype
from .shards import SHUFFLE_ALGORITHMS, shard_order

__all__ = [
    "AUTO_FEISTEL_POINTS",
    "EPOCH_ORDERS",
    "OrderSpec",
    "auto_order",
    "ignored_shard_options",
    "epoch_order",
    "order_placement",
    "positions_to_owners",
]

#: Names of the epoch orders.
EPOCH_ORDERS: tuple[str, ...] = ("permutation", "feistel", *SHUFFLE_ALGORITHMS)

#: Above this many points ``auto`` means ``feistel`` (a permutation of N points takes 8N bytes).
AUTO_FEISTEL_POINTS = 1 << 27


def auto_order(name: str, N: int) -> str:
    """Return ``name``, or for ``"auto"`` the order it stands for at ``N`` points.

    Examples
    --------
    >>> auto_order("auto", 1000), auto_order("auto", 10**9), auto_order("py1e", 10**9)
    ('permutation', 'feistel', 'py1e')
    """
    if name != "auto":
        return name
    return "feistel" if check_int(N, "N", minimum=0) > AUTO_FEISTEL_POINTS else "permutation"


def ignored_shard_options(order: str, given: list[str]) -> str | None:
    """Why the shard options ``given`` (as typed, e.g. ``["--shard-size"]``) cannot go with the
    epoch order named ``order`` (``auto`` included), or None when they can: only the shard-aware
    orders read them, any other would ignore them.

    Examples
    --------
    >>> ignored_shard_options("py1br", ["--shard-size"]) is None
    True
    >>> ignored_shard_options("feistel", ["--block-size"])  # doctest: +ELLIPSIS
    '--block-size applies only to the shard-aware orders (naive, ...), not to --order feistel'
    """
    if not given or order in SHUFFLE_ALGORITHMS:
        return None
    return (
        f"{' and '.join(given)} {'applies' if len(given) == 1 else 'apply'} only to the shard-aware orders "
        f"({', '.join(SHUFFLE_ALGORITHMS)}), "
        f"not to --order {order}"
    )


@dataclass(frozen=True)
class OrderSpec:
    """An epoch order by name with its options (shard-aware orders only use the options).

    Attributes
    ----------
    name : str
        One of :data:`EPOCH_ORDERS`.
    shard_size : int
        Samples per shard for the shard-aware orders.
    canonical_nodes : int
        Canonical nodes for the shard-aware orders.
    block_size : int
        Shuffle block size in samples for ``py1b``, ``py1br``, ``py1e``.

    Examples
    --------
    >>> OrderSpec("py1e", shard_size=100).name
    'py1e'
    """

    name: str = "permutation"
    shard_size: int = 10_000
    canonical_nodes: int = 1
    block_size: int = 1 << 18

    def __post_init__(self) -> None:
        check_choice(self.name, "order", EPOCH_ORDERS)
        check_int(self.shard_size, "shard_size", minimum=1)
        check_int(self.canonical_nodes, "canonical_nodes", minimum=1)
        check_int(self.block_size, "block_size", minimum=1)


def _shard_sizes(N: int, shard_size: int) -> np.ndarray:
    sizes = np.full(-(-N // shard_size), shard_size, dtype=np.int64)
    if N % shard_size:
        sizes[-1] = N % shard_size
    return sizes


def epoch_order(N: int, *, seed: int, epoch: int, spec: OrderSpec | None = None) -> np.ndarray:
    """Return the global sample order of ``epoch``: position ``p`` holds sample ``order[p]``.

    Examples
    --------
    >>> o = epoch_order(20, seed=1, epoch=0, spec=OrderSpec("py1s", shard_size=5))
    >>> sorted(o.tolist()) == list(range(20))
    True
    >>> bool((epoch_order(9, seed=1, epoch=0) == epoch_permutation(9, seed=1, epoch=0)).all())
    True
    """
    N = check_int(N, "N", minimum=0)
    spec = OrderSpec() if spec is None else spec
    if not isinstance(spec, OrderSpec):
        raise TypeError(f"Argument 'spec' must be an OrderSpec, not {type(spec).__name__}.")
    if spec.name == "permutation":
        return epoch_permutation(N, seed=seed, epoch=epoch)
    if spec.name == "feistel":
        return feistel_permutation(N, seed=seed, epoch=epoch).forward(np.arange(N, dtype=np.int64))
    if spec.canonical_nodes > N:
        raise ValueError(f"Argument 'canonical_nodes' must be at most N = {N}, not {spec.canonical_nodes}.")
    return shard_order(
        spec.name,
        _shard_sizes(N, spec.shard_size),
        canonical_nodes=spec.canonical_nodes,
        seed=seed,
        epoch=epoch,
        block_size=spec.block_size,
    )


def positions_to_owners(positions: np.ndarray, N: int, K: int) -> np.ndarray:
    """Return the worker holding each position of an order cut into ``K`` batches.

    The first ``r = N mod K`` workers hold ``q + 1`` positions, the others ``q = N // K``.
    Brute-force equivalent: ``np.repeat(np.arange(K), batch_sizes(N, K))[positions]``.

    Examples
    --------
    >>> positions_to_owners(np.arange(10), 10, 3).tolist()
    [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    """
    N = check_int(N, "N", minimum=1)
    K = check_int(K, "K", minimum=1)
    q, r = divmod(N, K)
    pos = np.asarray(positions, dtype=np.int64)
    edge = r * (q + 1)
    big = pos < edge
    out = np.where(big, pos // (q + 1), r + (pos - edge) // max(q, 1))
    return out.astype(owner_dtype(K))


def order_placement(
    N: int,
    K: int,
    *,
    seed: int,
    epoch: int,
    spec: OrderSpec | None = None,
    sizes: object = None,
    balance: str = "count",
) -> Placement:
    """Return the placement of ``epoch``: :func:`epoch_order` cut into ``K`` batches.

    The batches are contiguous runs of the order of equal counts (``balance="count"``), or, with
    ``sizes`` the bytes of each record, of equal bytes within one record (``balance="bytes"``,
    :func:`~coded_shuffle.orders.placement.epoch_batch_sizes`), under every order.

    Examples
    --------
    >>> spec = OrderSpec("py1b", shard_size=4, block_size=6)
    >>> order_placement(12, 3, seed=0, epoch=2, spec=spec).sizes().tolist()
    [4, 4, 4]
    >>> sizes = [100] * 6 + [1] * 6
    >>> p = order_placement(12, 2, seed=0, epoch=0, sizes=sizes, balance="bytes")
    >>> p.sizes().tolist(), p.batch_bytes(sizes).tolist()
    ([7, 5], [304, 302])
    >>> order_placement(12, 2, seed=0, epoch=0).batch_bytes(sizes).tolist()  # by count
    [204, 402]
    """
    N = check_int(N, "N", minimum=1)
    K = check_int(K, "K", minimum=1)
    if N < K:
        raise ValueError(f"Argument 'N' must be at least K = {K}, not {N}.")
    check_choice(balance, "balance", BALANCES)
    if sizes is not None:
        check_record_sizes(sizes, N)  # before the order is made
    order = epoch_order(N, seed=seed, epoch=epoch, spec=spec)
    counts = epoch_batch_sizes(order, K, sizes=sizes, balance=balance)
    owner = np.empty(N, dtype=owner_dtype(K))
    owner[order] = np.repeat(np.arange(K, dtype=owner.dtype), counts)
    owner.flags.writeable = False
    return Placement(K=K, owner=owner)
