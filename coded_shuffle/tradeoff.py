"""How random, at what link cost: each epoch order's quality next to its coded and uncoded load.

For one setup (``shards`` shards of ``shard_size`` samples, the first half of kind A as in the
mixture experiment of the StreamingDataset shuffle study cited in the README, cut into batches
for ``K`` workers), every order is generated for epochs ``epoch`` and ``epoch + 1``; its quality
figures come from :func:`coded_shuffle.orders.order_quality` on epoch ``epoch + 1`` and its loads
from the shuffle matrix of the two placements. A shard-aware order that keeps samples near their shard moves
fewer of them between workers, so it is cheap on the link and poorly mixed; a full shuffle is
well mixed and costs about ``N (K - 1) / K`` uncoded, about half of that coded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._checks import check_choice, check_int
from .bounds import lower_bound
from .matrix import shuffle_matrix
from .orders import EPOCH_ORDERS, OrderSpec, epoch_order, order_quality, placement_from_permutation
from .plan import STRATEGIES, rates

__all__ = ["order_link_cost", "order_tradeoff"]


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
) -> dict[str, Any]:
    """Return one order's generation time, quality figures and loads between two epochs.

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
    prev = epoch_order(N, seed=seed, epoch=epoch, spec=spec)
    S = shuffle_matrix(placement_from_permutation(prev, K), placement_from_permutation(nxt, K))
    r = rates(S, strategy=strategy)
    lb = lower_bound(S)
    quality = order_quality(
        nxt,
        shard_sizes=np.full(M, Z),
        canonical_nodes=canonical_nodes,
        split=(M // 2) * Z,
        batches=batches,
        batch_size=batch_size,
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
        "uncoded": r.uncoded,
        "paired": r.paired,
        "coded": r.coded,
        "lower_bound": lb.value,
        "lower_bound_exact": lb.exact,
    }


def order_tradeoff(orders: Sequence[str] | None = None, **options: Any) -> list[dict[str, Any]]:
    """Return :func:`order_link_cost` for each order (all of them by default), same options.

    Examples
    --------
    >>> rows = order_tradeoff(["naive", "py1s"], K=2, shards=4, shard_size=10, batches=2, batch_size=5)
    >>> [r["order"] for r in rows]
    ['naive', 'py1s']
    """
    names = list(EPOCH_ORDERS) if orders is None else list(orders)
    if not names:
        raise ValueError("Argument 'orders' must name at least one order.")
    return [order_link_cost(name, **options) for name in names]
