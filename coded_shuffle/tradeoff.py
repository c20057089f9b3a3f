"""How random, at what link cost: each epoch order's quality next to its coded and uncoded load.

For one setup (``shards`` shards of ``shard_size`` samples, the first half of kind A as in the
mixture experiment of the StreamingDataset shuffle study of docs/algorithms.md, cut into batches
for ``K`` workers), every order is generated for epochs ``epoch`` and ``epoch + 1``; its quality
figures come from :func:`coded_shuffle.orders.order_quality` on epoch ``epoch + 1`` and its loads
from the shuffle matrix of the two placements. A shard-aware order that keeps samples near their shard moves
fewer of them between workers, so it is cheap on the link and poorly mixed; a full shuffle is
well mixed and costs about ``N (K - 1) / K`` uncoded, about half of that coded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._checks import check_choice, check_int
from .loads import bound_with_storage, byte_loads, rates_with_storage
from .matrix import shuffle_matrix
from .orders import BALANCES, EPOCH_ORDERS, OrderSpec, epoch_order, order_quality, placement_from_permutation
from .orders.quality import QUALITY_STEPS
from .plan import STRATEGIES

__all__ = ["LINK_COST_STEPS", "order_link_cost", "order_tradeoff"]

#: Steps of :func:`order_link_cost`: the orders, the loads, and the quality figures.
LINK_COST_STEPS = 2 + QUALITY_STEPS


def order_link_cost(
    order: str,
    *,
    K: int,
    shards: int,
    shard_size: int,
    canonical_nodes: int = 1,
    block_size: int = 1 << 18,
    seed: int = 0,
    epoch: int = 0,
    batches: int = 100,
    batch_size: int = 2000,
    strategy: str = "greedy",
    progress: Callable[[int], None] | None = None,
    storage: int = 1,
    sizes: object = None,
    balance: object = "count",
) -> dict[str, Any]:
    """Return one order's generation time, quality figures and loads between two epochs.

    With ``storage = M > 1`` every worker stores ``M`` batches and the loads are those of
    :mod:`coded_shuffle.storage`, in records (an int when whole, else a float of the exact
    fraction; ``paired`` is then the group symbols alone). With ``sizes`` (the bytes of each
    sample) the row also has ``uncoded_bytes``, ``coded_bytes``, ``lower_bound_bytes`` and
    ``download_bound_bytes`` (:func:`coded_shuffle.loads.byte_loads`), and the batches are cut by
    ``balance`` (``"count"`` or ``"bytes"``, :func:`coded_shuffle.orders.epoch_batch_sizes`).

    ``progress``, if given, is called with the steps done out of :data:`LINK_COST_STEPS`: the
    two epochs' orders, their loads, then each step of the quality figures.

    Returns
    -------
    dict
        Plain values: the inputs; ``seconds`` (generation time of one epoch's order); the quality
        figures of :func:`coded_shuffle.orders.order_quality` (``mean_deviation_pct``,
        ``epoch_mean_deviation_pct``, ``mean_shards_per_batch``, ...); and ``uncoded``,
        ``paired``, ``coded``, ``lower_bound``, ``lower_bound_exact`` for the transition
        ``epoch -> epoch + 1``.

    Examples
    --------
    >>> row = order_link_cost("py1s", K=4, shards=8, shard_size=50, batches=4, batch_size=20)
    >>> row["uncoded"] >= row["coded"] >= row["lower_bound"]
    True
    """
    order = check_choice(order, "order", EPOCH_ORDERS)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    K = check_int(K, "K", minimum=1)
    M = check_int(shards, "shards", minimum=2)
    Z = check_int(shard_size, "shard_size", minimum=1)
    N = M * Z
    if N < K:
        raise ValueError(f"Argument 'shards' x 'shard_size' must be at least K = {K}, not {N}.")
    spec = OrderSpec(order, shard_size=Z, canonical_nodes=canonical_nodes, block_size=block_size)
    t0 = time.perf_counter()
    nxt = epoch_order(N, seed=seed, epoch=epoch + 1, spec=spec)
    seconds = time.perf_counter() - t0
    done = progress if progress is not None else (lambda _: None)
    prev = epoch_order(N, seed=seed, epoch=epoch, spec=spec)
    done(1)
    loads = _loads(prev, nxt, K, strategy=strategy, storage=storage, sizes=sizes,
                   balance=check_choice(balance, "balance", BALANCES))  # fmt: skip
    done(2)
    quality = order_quality(
        nxt,
        shard_sizes=np.full(M, Z),
        canonical_nodes=canonical_nodes,
        split=(M // 2) * Z,
        batches=batches,
        batch_size=batch_size,
        progress=lambda k: done(2 + k),
    )
    return {
        "order": order,
        "K": K,
        "N": N,
        "shards": M,
        "shard_size": Z,
        "canonical_nodes": canonical_nodes,
        "block_size": block_size,
        "seed": seed,
        "epoch": epoch + 1,
        "strategy": strategy,
        "seconds": round(seconds, 4),
        **quality,
        "storage": storage,
        **loads,
    }


def _loads(
    prev: np.ndarray, nxt: np.ndarray, K: int, *, strategy: str, storage: int, sizes: object, balance: str
) -> dict[str, Any]:
    """The loads of :func:`order_link_cost` between the orders ``prev`` and ``nxt``: in records, and
    in bytes beside them with ``sizes``."""
    a, b = (placement_from_permutation(o, K, sizes=sizes, balance=balance) for o in (prev, nxt))
    if sizes is not None:
        x = byte_loads(a, b, sizes=sizes, storage=storage, strategy=strategy, padded=False)
        r, lb = x.rates, x.bound
    else:
        S = shuffle_matrix(a, b)
        r = rates_with_storage(S, strategy=strategy, storage=storage)
        lb = bound_with_storage(S, storage=storage)
    out: dict[str, Any] = {
        "uncoded": _plain(r.uncoded),
        "paired": _plain(r.paired),
        "coded": _plain(r.coded),
        "lower_bound": _plain(lb.value),
        "lower_bound_exact": lb.exact,
    }
    if sizes is not None:
        out.update(balance=balance, uncoded_bytes=_plain(x.uncoded_bytes), coded_bytes=_plain(x.coded_bytes),
                   lower_bound_bytes=_plain(x.lower_bound_bytes),
                   download_bound_bytes=_plain(x.download_bound_bytes))  # fmt: skip
    return out


def _plain(x: Any) -> int | float:
    """A load as a JSON number: an int when whole, else the float of the exact fraction."""
    return int(x) if x == int(x) else float(x)


def order_tradeoff(
    orders: Sequence[str] | None = None,
    *,
    progress: Callable[[int], None] | None = None,
    **options: Any,
) -> list[dict[str, Any]]:
    """Return :func:`order_link_cost` for each order (all of them by default), same options.

    ``progress``, if given, is called with the steps done out of ``LINK_COST_STEPS`` times the
    number of orders.

    Examples
    --------
    >>> done = []
    >>> rows = order_tradeoff(["naive", "py1s"], K=2, shards=4, shard_size=10, batches=2, batch_size=5,
    ...                       progress=done.append)
    >>> [r["order"] for r in rows], done[-1] == 2 * LINK_COST_STEPS
    (['naive', 'py1s'], True)
    """
    names = list(EPOCH_ORDERS) if orders is None else list(orders)
    if not names:
        raise ValueError("Argument 'orders' must name at least one order.")
    rows = []
    for i, name in enumerate(names):
        step = None if progress is None else (lambda k, base=i * LINK_COST_STEPS: progress(base + k))
        rows.append(order_link_cost(name, progress=step, **options))
    return rows
