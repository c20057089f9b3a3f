"""Quality figures of an epoch order: mixing, uniformity of the head, locality, order left over.

Notation
--------
=============  ==============================================================
``order``      epoch order; position ``p`` holds the sample read ``p``-th
``N``          number of samples (``len(order)``)
``b``          batch size; batch ``i`` is positions ``[i b, (i + 1) b)``
``split``      samples ``0 .. split - 1`` are of kind A, the others of kind B
``Z_j``        size of shard ``j``; shard ``j`` holds consecutive sample ids
=============  ==============================================================

The mixture experiment is the one of a study of StreamingDataset shuffle quality (docs/algorithms.md): ``M``
shards of ``Z`` samples, the first half of the shards of kind A (say Japanese text), the rest of
kind B (English). A well mixed order gives every batch about half A; the deviation of a batch is
``100 |a / n - split / N|`` percent for ``a`` samples of kind A among its ``n``. For a uniform
order the mean deviation approaches the binomial floor ``100 sqrt(f (1 - f) / b) sqrt(2 / pi)``
(``0.892%`` for ``f = 1/2``, ``b = 2000``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .._checks import check_choice, check_int, check_int_array
from .shards import SHUFFLE_ALGORITHMS, _node_bounds

__all__ = [
    "batch_shard_counts",
    "binomial_floor_pct",
    "decile_chi_square",
    "in_order_steps",
    "longest_in_order_run",
    "mixture_deviation",
    "node_working_sets",
    "order_quality",
    "quality_report",
    "QUALITY_STEPS",
    "REPORT_STEPS",
]


def _order(order: Any) -> np.ndarray:
    return check_int_array(order, "order", ndim=1)


def _shard_ids(order: np.ndarray, shard_sizes: Any) -> tuple[np.ndarray, int]:
    """Shard of each position's sample (int32 when it fits), and the number of shards."""
    sizes = check_int_array(shard_sizes, "shard_sizes", ndim=1)
    if sizes.size == 0 or int(sizes.min()) < 1:
        raise ValueError("Argument 'shard_sizes' must hold at least 1 shard, each of at least 1 sample.")
    total = int(sizes.sum())
    if total != order.size:
        raise ValueError(f"Argument 'shard_sizes' must sum to len(order) = {order.size}, not {total}.")
    ends = np.cumsum(sizes)
    dtype = np.int32 if sizes.size < 1 << 31 else np.int64
    shard = np.empty(order.size, dtype=dtype)
    step = 1 << 22
    equal = bool((sizes == sizes[0]).all())
    for a in range(0, order.size, step):
        if equal:
            np.floor_divide(order[a : a + step], int(sizes[0]), out=shard[a : a + step], casting="unsafe")
        else:
            shard[a : a + step] = np.searchsorted(ends, order[a : a + step], side="right")
    return shard, int(sizes.size)


def binomial_floor_pct(batch_size: int, *, fraction: float = 0.5) -> float:
    """Return the expected mean deviation (percent) of a uniform order: ``E|X/b - f|``, normal limit.

    Examples
    --------
    >>> round(binomial_floor_pct(2000), 3)
    0.892
    """
    b = check_int(batch_size, "batch_size", minimum=1)
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"Argument 'fraction' must be in [0, 1], not {fraction}.")
    return 100.0 * math.sqrt(fraction * (1.0 - fraction) / b) * math.sqrt(2.0 / math.pi)


def mixture_deviation(
    order: Any, *, split: int, batch_size: int, batches: int | None = None
) -> dict[str, Any]:
    """Return the mean and max deviation (percent) of the kind-A fraction of each batch.

    Samples ``< split`` are of kind A. Batch ``i`` holds positions ``[i b, (i + 1) b)``; the last
    batch may be shorter. Only the first ``batches`` batches count (all when ``None``). Brute
    force equivalent: ``[abs(sum(x < split for x in order[i*b:(i+1)*b]) / len(...) - split/N)``
    ``* 100 for i in range(batches)]``, then mean and max.

    Examples
    --------
    >>> mixture_deviation([0, 1, 2, 3], split=2, batch_size=2)
    {'mean_deviation_pct': 50.0, 'max_deviation_pct': 50.0, 'batches': 2}
    >>> mixture_deviation([0, 2, 1, 3], split=2, batch_size=2)['mean_deviation_pct']
    0.0
    """
    arr = _order(order)
    N = arr.size
    split = check_int(split, "split", minimum=0)
    if split > N:
        raise ValueError(f"Argument 'split' must be at most len(order) = {N}, not {split}.")
    b = check_int(batch_size, "batch_size", minimum=1)
    total = -(-N // b)
    if batches is not None:
        total = min(total, check_int(batches, "batches", minimum=1))
    if N == 0 or total == 0:
        return {"mean_deviation_pct": 0.0, "max_deviation_pct": 0.0, "batches": 0}
    end = min(N, total * b)
    starts = np.arange(0, end, b, dtype=np.int64)
    counts = np.add.reduceat((arr[:end] < split).astype(np.int64), starts)
    lengths = np.minimum(starts + b, end) - starts
    dev = np.abs(counts / lengths - split / N) * 100.0
    return {
        "mean_deviation_pct": float(dev.mean()),
        "max_deviation_pct": float(dev.max()),
        "batches": int(total),
    }


def decile_chi_square(head: Any, N: int, *, bins: int = 10) -> dict[str, Any]:
    """Chi-square test that ``head`` (distinct values of ``[0, N)``) falls evenly into deciles.

    Value ``x`` is in bin ``bins * x // N`` (the decile test of that study, exact for any ``N``);
    expected counts are proportional to the bin widths. A biased permutation (old
    ``torch.randperm`` on ``3e9`` points) gives a vanishing p-value.

    Examples
    --------
    >>> r = decile_chi_square(list(range(0, 1000, 7)), 1000)
    >>> r["counts"], r["pvalue"] > 0.99
    ([15, 14, 14, 15, 14, 14, 14, 15, 14, 14], True)
    """
    arr = _order(head)
    N = check_int(N, "N", minimum=1)
    k = check_int(bins, "bins", minimum=2)
    if arr.size == 0:
        raise ValueError("Argument 'head' must hold at least 1 value, not 0.")
    if int(arr.min()) < 0 or int(arr.max()) >= N:
        raise ValueError(f"Argument 'head' must hold values in [0, {N}), not [{arr.min()}, {arr.max()}].")
    from scipy import stats

    if N > ((1 << 63) - 1) // k:
        raise ValueError(f"Argument 'N' must be at most {((1 << 63) - 1) // k}, not {N}.")
    which = (arr.astype(np.int64) * k) // N
    counts = np.bincount(which, minlength=k)
    edges = [-((-N * d) // k) for d in range(k + 1)]  # ceil(N d / k): first value of bin d
    width = np.diff(np.array(edges, dtype=np.float64))
    expected = width / N * arr.size
    used = width > 0  # with N < bins some bins hold no value at all
    if int(used.sum()) < 2:
        statistic, pvalue = 0.0, 1.0
    else:
        res = stats.chisquare(counts[used], expected[used])
        statistic, pvalue = float(res.statistic), float(res.pvalue)
    return {
        "statistic": statistic,
        "pvalue": pvalue,
        "counts": [int(c) for c in counts],
        "n": int(arr.size),
    }


def batch_shard_counts(order: Any, *, shard_sizes: Any, batch_size: int) -> dict[str, Any]:
    """Return the mean and max number of distinct shards read by one batch.

    Examples
    --------
    >>> batch_shard_counts([0, 2, 4, 5, 1, 3], shard_sizes=[2, 2, 2], batch_size=2)
    {'mean_shards_per_batch': 1.6666666666666667, 'max_shards_per_batch': 2, 'batches': 3}
    """
    arr = _order(order)
    shard, _ = _shard_ids(arr, shard_sizes)
    b = check_int(batch_size, "batch_size", minimum=1)
    N = arr.size
    full = N // b
    counts = []
    rows = max(1, (1 << 22) // b)
    for r in range(0, full, rows):
        block = np.sort(shard[r * b : min(full, r + rows) * b].reshape(-1, b), axis=1)
        counts.append(1 + np.count_nonzero(np.diff(block, axis=1), axis=1))
    if full * b < N:
        counts.append(np.array([np.unique(shard[full * b :]).size]))
    c = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    return {
        "mean_shards_per_batch": float(c.mean()) if c.size else 0.0,
        "max_shards_per_batch": int(c.max()) if c.size else 0,
        "batches": int(c.size),
    }


def node_working_sets(order: Any, *, shard_sizes: Any, canonical_nodes: int) -> dict[str, Any]:
    """Return the shards each canonical node reads over the epoch and its peak of open shards.

    Node ``c`` reads positions ``[N c // C, N (c + 1) // C)``. A shard is open for a node from the
    first to the last position at which the node reads it: the peak number of open shards is
    the cache a node needs to download each shard once per epoch.

    Returns
    -------
    dict
        ``shards_per_node`` (list), ``max_open_shards`` (list, per node), and their means/maxima.

    Examples
    --------
    >>> r = node_working_sets([0, 2, 1, 3, 4, 5], shard_sizes=[2, 2, 2], canonical_nodes=2)
    >>> r["shards_per_node"], r["max_open_shards"]
    ([2, 2], [2, 1])
    """
    arr = _order(order)
    shard, S = _shard_ids(arr, shard_sizes)
    C = check_int(canonical_nodes, "canonical_nodes", minimum=1)
    N = arr.size
    if C > N:
        raise ValueError(f"Argument 'canonical_nodes' must be at most len(order) = {N}, not {C}.")
    bounds = _node_bounds(N, C)
    distinct, peaks = [], []
    for c in range(C):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        s = shard[lo:hi]
        pos = np.arange(hi - lo, dtype=np.int64)
        first = np.full(S, hi - lo, dtype=np.int64)
        last = np.full(S, -1, dtype=np.int64)
        np.minimum.at(first, s, pos)
        np.maximum.at(last, s, pos)
        used = last >= 0
        distinct.append(int(used.sum()))
        delta = np.bincount(first[used], minlength=hi - lo + 1) - np.bincount(
            last[used] + 1, minlength=hi - lo + 1
        )
        peaks.append(int(np.cumsum(delta).max()))
    return {
        "shards_per_node": distinct,
        "max_open_shards": peaks,
        "mean_shards_per_node": float(np.mean(distinct)),
        "max_shards_per_node": int(max(distinct)),
        "max_open_shards_per_node": int(max(peaks)),
    }


def in_order_steps(order: Any, *, shard_sizes: Any) -> np.ndarray:
    """Return a boolean array: step ``p`` is in shard order when ``order[p + 1] == order[p] + 1``
    and both samples are of the same shard (length ``N - 1``).

    Examples
    --------
    >>> in_order_steps([0, 1, 2, 3], shard_sizes=[2, 2]).tolist()
    [True, False, True]
    """
    arr = _order(order)
    sizes = check_int_array(shard_sizes, "shard_sizes", ndim=1)
    if int(sizes.sum()) != arr.size:
        raise ValueError(
            f"Argument 'shard_sizes' must sum to len(order) = {arr.size}, not {int(sizes.sum())}."
        )
    if arr.size < 2:
        return np.zeros(0, dtype=bool)
    starts = np.zeros(arr.size + 1, dtype=bool)  # starts[x]: sample x begins a shard
    starts[(np.cumsum(sizes) - sizes)] = True
    starts[arr.size] = True
    nxt = arr[:-1] + 1
    return (arr[1:] == nxt) & ~starts[np.clip(nxt, 0, arr.size)]


def longest_in_order_run(order: Any, *, shard_sizes: Any) -> int:
    """Return the longest stretch of samples left in shard order (1 when none is).

    A stretch is a run of consecutive positions holding ``x, x + 1, x + 2, ...`` of one shard.
    Brute force equivalent: the longest run of ``True`` in :func:`in_order_steps`, plus one.

    Examples
    --------
    >>> longest_in_order_run([5, 0, 1, 2, 3, 4], shard_sizes=[3, 3])
    3
    """
    steps = in_order_steps(order, shard_sizes=shard_sizes)
    if steps.size == 0 or not steps.any():
        return 1
    padded = np.concatenate(([0], steps.view(np.int8), [0]))
    change = np.flatnonzero(np.diff(padded))
    return int((change[1::2] - change[0::2]).max()) + 1


#: Steps of :func:`order_quality`, each reported to its ``progress`` callback.
QUALITY_STEPS = 6


def order_quality(
    order: Any,
    *,
    shard_sizes: Any,
    canonical_nodes: int,
    split: int,
    batches: int,
    batch_size: int,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Return the quality figures of a given ``order`` (the figures of :func:`quality_report`).

    Used to compare orders made elsewhere (streaming's) on the same footing. The figures take
    :data:`QUALITY_STEPS` passes over the order; ``progress``, if given, is called after each
    with the number of steps done.

    Examples
    --------
    >>> done = []
    >>> r = order_quality([0, 2, 1, 3], shard_sizes=[2, 2], canonical_nodes=1, split=2,
    ...                   batches=2, batch_size=2, progress=done.append)
    >>> r["mean_deviation_pct"], r["longest_in_order_run"], done
    (0.0, 1, [1, 2, 3, 4, 5, 6])
    """
    arr = _order(order)
    sizes = check_int_array(shard_sizes, "shard_sizes", ndim=1)
    nb = check_int(batches, "batches", minimum=1)
    b = check_int(batch_size, "batch_size", minimum=1)
    N = arr.size
    done = progress if progress is not None else (lambda _: None)
    head = mixture_deviation(arr, split=split, batch_size=b, batches=nb)
    whole = mixture_deviation(arr, split=split, batch_size=b)
    done(1)
    chi = decile_chi_square(arr[: min(N, nb * b)], N)
    done(2)
    loc = batch_shard_counts(arr, shard_sizes=sizes, batch_size=b)
    done(3)
    work = node_working_sets(arr, shard_sizes=sizes, canonical_nodes=canonical_nodes)
    done(4)
    steps = in_order_steps(arr, shard_sizes=sizes)
    done(5)
    longest = longest_in_order_run(arr, shard_sizes=sizes)
    done(6)
    return {
        "mean_deviation_pct": head["mean_deviation_pct"],
        "max_deviation_pct": head["max_deviation_pct"],
        "epoch_mean_deviation_pct": whole["mean_deviation_pct"],
        "epoch_max_deviation_pct": whole["max_deviation_pct"],
        "binomial_floor_pct": binomial_floor_pct(b, fraction=split / N),
        "head_chi2_pvalue": chi["pvalue"],
        "mean_shards_per_batch": loc["mean_shards_per_batch"],
        "max_shards_per_batch": loc["max_shards_per_batch"],
        "mean_shards_per_node": work["mean_shards_per_node"],
        "max_shards_per_node": work["max_shards_per_node"],
        "max_open_shards_per_node": work["max_open_shards_per_node"],
        "longest_in_order_run": longest,
        "in_order_fraction": float(steps.mean()) if steps.size else 0.0,
    }


#: Steps of :func:`quality_report`: the order's generation and :data:`QUALITY_STEPS`.
REPORT_STEPS = 1 + QUALITY_STEPS


def quality_report(
    algo: str,
    *,
    shards: int,
    shard_size: int,
    canonical_nodes: int = 1,
    block_size: int = 1 << 18,
    batches: int = 100,
    batch_size: int = 2000,
    seed: int = 1,
    epoch: int = 1,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Generate ``algo``'s order on the mixture setup and return its quality figures.

    ``shards`` shards of ``shard_size`` samples; the first ``shards // 2`` shards are of kind A.
    ``progress``, if given, is called with the steps done out of :data:`REPORT_STEPS`: the
    order's generation, then each step of :func:`order_quality`.

    Returns
    -------
    dict
        Plain, JSON-serializable values: the inputs; ``samples``; ``seconds`` (generation time);
        ``mean_deviation_pct`` / ``max_deviation_pct`` over the first ``batches`` batches;
        ``epoch_mean_deviation_pct`` / ``epoch_max_deviation_pct`` over all batches;
        ``binomial_floor_pct``; ``head_chi2_pvalue`` (decile test of the first batches);
        ``mean_shards_per_batch`` / ``max_shards_per_batch``; ``mean_shards_per_node`` /
        ``max_shards_per_node`` / ``max_open_shards_per_node``; ``longest_in_order_run`` and
        ``in_order_fraction`` (fraction of steps left in shard order).

    Examples
    --------
    >>> r = quality_report("naive", shards=10, shard_size=100, batches=5, batch_size=50)
    >>> r["samples"], r["longest_in_order_run"] < 10, r["mean_deviation_pct"] < 20
    (1000, True, True)
    """
    algo = check_choice(algo, "algo", SHUFFLE_ALGORITHMS)
    M = check_int(shards, "shards", minimum=2)
    Z = check_int(shard_size, "shard_size", minimum=1)
    C = check_int(canonical_nodes, "canonical_nodes", minimum=1)
    B = check_int(block_size, "block_size", minimum=1)
    nb = check_int(batches, "batches", minimum=1)
    b = check_int(batch_size, "batch_size", minimum=1)
    seed = check_int(seed, "seed", minimum=0)
    epoch = check_int(epoch, "epoch", minimum=0)
    N = M * Z
    sizes = np.full(M, Z, dtype=np.int64)
    t0 = time.perf_counter()
    order = SHUFFLE_ALGORITHMS[algo](sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B)
    seconds = time.perf_counter() - t0
    if progress is not None:
        progress(1)
    figures = order_quality(
        order,
        shard_sizes=sizes,
        canonical_nodes=C,
        split=(M // 2) * Z,
        batches=nb,
        batch_size=b,
        progress=None if progress is None else (lambda k: progress(1 + k)),
    )
    return {
        "algo": algo,
        "shards": M,
        "shard_size": Z,
        "samples": N,
        "canonical_nodes": C,
        "block_size": B,
        "batches": nb,
        "batch_size": b,
        "seed": seed,
        "epoch": epoch,
        "seconds": round(seconds, 4),
        **figures,
    }
