"""Shard-aware epoch orders with the semantics of MosaicML streaming's shuffle algorithms.

A dataset is stored as shards: shard ``j`` holds the ``Z_j`` consecutive sample ids
``b_j .. b_j + Z_j - 1``. An epoch order is a permutation of all ``N = sum Z_j`` sample ids;
position ``p`` of the order holds the sample read ``p``-th. The algorithms trade shuffle
quality against locality (how many shards a node must download to make progress).

Notation
--------
=====================  ==========================================================
``S``                  number of shards
``Z_j``                number of samples of shard ``j`` (``shard_sizes[j]``)
``N``                  number of samples, ``sum Z_j``
``C``                  number of canonical nodes (``canonical_nodes``)
``B``                  shuffle block size in samples (``block_size``)
run order              the shards in an order drawn once per run (from ``seed`` only)
node span              positions ``[N c // C, N (c + 1) // C)`` of canonical node ``c``
piece                  a shard, or the part of a shard cut at a node span boundary
=====================  ==========================================================

Common skeleton (all but ``naive``)
-----------------------------------
1. Run level, fixed for the whole run (stream ``SeedSequence(seed)``, the root whose children
   are the epoch streams of :func:`~coded_shuffle.orders.permutation.epoch_rng`): the shards
   are laid out in a random run order and the resulting sequence of ``N`` samples is cut into
   ``C`` node spans of sizes differing by at most one. A shard crossing a span boundary is
   split into pieces. Node ``c`` therefore holds the same samples in every epoch.
2. Epoch level (stream ``epoch_rng(seed, epoch)``): inside each node span the pieces are put
   in a random order. This first draw is identical for every algorithm, so for a given
   ``(seed, epoch)`` ``py1s``, ``py1b``, ``py1br`` and ``py1e`` share the piece layout.
3. The algorithm then mixes samples inside the node span:

``naive``  one uniform permutation of all ``N`` samples (nodes and blocks ignored).
``py1s``   shuffle inside each piece.
``py2s``   as ``py1s``, but each shard is also shuffled once per run before the split, so
           which samples of a split shard fall in which node is random.
``py1b``   shuffle inside fixed blocks of ``B`` positions counted from each node's start;
           the last block of a node is shorter.
``py1br``  shuffle inside blocks of random sizes in ``[3B/4, 5B/4)`` whose boundaries are
           staggered by a random offset per node. Every position belongs to exactly one block;
           an edge block shorter than half the smallest block is merged into its neighbour.
``py1e``   shuffle inside each piece, then move each sample by a random shift uniform in a
           window of ``~B`` positions around its piece (clipped at the node span), and sort by
           shifted position ("expanded range", streaming PR by snarayan21).

Difference from streaming's ``py1br``: streaming advances its block cursor by the unstaggered
block end, so on some seeds the loop ends while up to the stagger (``< 0.75 B``) samples at the
end of a node are left unshuffled, still in shard order. Here the block boundaries are the
cumulative sums of the random sizes minus the stagger, cut to the span, so the cover is exact
and the last block is shuffled like every other.

The functions match streaming's semantics, not its random bits: the same ``(seed, epoch)``
gives a different order than ``streaming.base.shuffle.get_shuffle``, drawn from the same
distribution (except for ``py1br``'s tail, above). Generation is vectorized: the Python loops
run once per node, per distinct segment length or per chunk of ``2^22`` samples, never per
sample, and temporary memory stays within a few chunks besides the order itself (``py2s`` also
keeps its run-level order, a second array of ``N``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

import numpy as np

from .._checks import check_choice, check_int, check_int_array
from .permutation import epoch_rng

__all__ = [
    "SHUFFLE_ALGORITHMS",
    "naive",
    "py1b",
    "py1br",
    "py1e",
    "py1s",
    "py2s",
    "shard_order",
    "node_bounds",
]

# Elements handled per vectorized step; bounds the temporary memory of every algorithm.
_CHUNK = 1 << 22
#: Independent random streams the in-segment shuffles are dealt to (one per core of a small machine).
_STREAMS = 2
#: Below this many elements the streams run one after the other (threads cost more than they save).
_THREADED_FROM = 1 << 20


# --------------------------------------------------------------------------------------------
# validation and shared pieces
# --------------------------------------------------------------------------------------------


def _validate(
    shard_sizes: Any, canonical_nodes: Any, seed: Any, epoch: Any, block_size: Any
) -> tuple[np.ndarray, int, int, int, int]:
    sizes = check_int_array(shard_sizes, "shard_sizes", ndim=1)
    if sizes.size == 0:
        raise ValueError("Argument 'shard_sizes' must hold at least 1 shard, not 0.")
    smallest = int(sizes.min())
    if smallest < 1:
        raise ValueError(f"Argument 'shard_sizes' must hold sizes of at least 1, not {smallest}.")
    sizes = sizes.astype(np.int64)
    N = int(sizes.sum(dtype=np.int64))
    C = check_int(canonical_nodes, "canonical_nodes", minimum=1)
    if C > N:
        raise ValueError(f"Argument 'canonical_nodes' must be at most the number of samples {N}, not {C}.")
    seed = check_int(seed, "seed", minimum=0)
    epoch = check_int(epoch, "epoch", minimum=0)
    B = check_int(block_size, "block_size", minimum=1)
    return sizes, C, seed, epoch, B


def _run_rng(seed: int) -> np.random.Generator:
    """Stream fixed over a run: the root ``SeedSequence(seed)``, parent of the epoch streams."""
    return np.random.Generator(np.random.PCG64DXSM(np.random.SeedSequence(seed)))


def _node_bounds(N: int, C: int) -> np.ndarray:
    q, r = divmod(N, C)
    c = np.arange(C + 1, dtype=np.int64)
    return q * c + (r * c) // C


def node_bounds(N: int, canonical_nodes: int) -> list[int]:
    """Return the ``C + 1`` boundaries of the canonical node spans of ``N`` samples.

    Node ``c`` holds positions ``[bounds[c], bounds[c + 1])`` of every shard-aware order
    except ``naive``; ``bounds[c] = N c // C``, as in streaming.

    Examples
    --------
    >>> node_bounds(10, 3)
    [0, 3, 6, 10]
    """
    N = check_int(N, "N", minimum=1)
    C = check_int(canonical_nodes, "canonical_nodes", minimum=1)
    if C > N:
        raise ValueError(f"Argument 'canonical_nodes' must be at most N = {N}, not {C}.")
    return [int(b) for b in _node_bounds(N, C)]


class _Run:
    """Run-level layout: shards in run order, cut into pieces at node span boundaries."""

    def __init__(self, sizes: np.ndarray, C: int, seed: int) -> None:
        self.rng = _run_rng(seed)
        self.N = int(sizes.sum())
        self.begin = np.cumsum(sizes) - sizes  # first sample id of each shard
        self.order = self.rng.permutation(sizes.size)  # run order of the shards
        self.run_sizes = sizes[self.order]
        run_ends = np.cumsum(self.run_sizes)
        self.run_starts = run_ends - self.run_sizes
        self.bounds = _node_bounds(self.N, C)
        cuts = np.union1d(self.run_starts, self.bounds)
        self.q = cuts[:-1]  # run position of each piece
        self.length = np.diff(cuts)
        self.run_index = np.searchsorted(run_ends, self.q, side="right")
        self.node = np.searchsorted(self.bounds, self.q, side="right") - 1

    def sample_starts(self) -> np.ndarray:
        """First sample id of each piece (pieces are consecutive ids of one shard)."""
        shard = self.order[self.run_index]
        return self.begin[shard] + (self.q - self.run_starts[self.run_index])


def _piece_order(rng: np.random.Generator, node: np.ndarray) -> np.ndarray:
    """Random order of the pieces inside each node; nodes stay in order."""
    perm = rng.permutation(node.size)
    return perm[np.argsort(node[perm], kind="stable")]


def _layout(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenate the ranges ``starts[k] .. starts[k] + lengths[k] - 1`` (int64).

    As a running sum: every step is ``+1`` except at a range's first position, where the step
    jumps to the range's start.
    """
    N = int(lengths.sum())
    ids = np.ones(N, dtype=np.int64)
    if N == 0:
        return ids
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    offsets = np.cumsum(lengths) - lengths
    ids[0] = starts[0]
    ids[offsets[1:]] = starts[1:] - (starts[:-1] + lengths[:-1] - 1)
    np.cumsum(ids, out=ids)
    return ids


def _shuffle_segments(
    rng: np.random.Generator, values: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> None:
    """Shuffle ``values`` in place inside each segment ``[starts[k], starts[k] + lengths[k])``.

    Segments of equal length are shuffled together as rows of a matrix (``Generator.permuted``
    along axis 1), ``_CHUNK`` elements at a time; segments of ``_CHUNK`` or more elements are
    shuffled one by one in place. The Python loop runs once per distinct length and chunk.

    The work is cut into tasks in a fixed order and dealt to :data:`_STREAMS` streams, each with
    its own child generator of ``rng`` (``rng.spawn``), so that the streams run on separate
    cores while the result depends only on ``rng``, never on timing or on the number of cores.
    """
    keep = lengths > 1
    starts, lengths = starts[keep], lengths[keep]
    tasks: list[tuple[int, Any]] = []  # (elements, work(generator))
    big = lengths >= _CHUNK
    for s, L in zip(starts[big].tolist(), lengths[big].tolist(), strict=True):
        tasks.append((L, lambda g, s=s, L=L: g.shuffle(values[s : s + L])))
    starts, lengths = starts[~big], lengths[~big]
    if starts.size:
        uniq, inverse = np.unique(lengths, return_inverse=True)
        by_length = np.argsort(inverse, kind="stable")
        edges = np.searchsorted(inverse[by_length], np.arange(uniq.size + 1))
        for g, L in enumerate(uniq.tolist()):
            group = starts[by_length[edges[g] : edges[g + 1]]]
            rows = max(1, _CHUNK // L)
            for i in range(0, group.size, rows):
                tasks.append(
                    (L * min(rows, group.size - i), partial(_shuffle_rows, values, group[i : i + rows], L))
                )
    if not tasks:
        return
    # Deal the tasks, in order, to the stream with the least work so far (ties: lowest index).
    load = [0] * _STREAMS
    queues: list[list[Any]] = [[] for _ in range(_STREAMS)]
    for size, work in tasks:
        k = load.index(min(load))
        load[k] += size
        queues[k].append(work)
    children = rng.spawn(_STREAMS)

    def run(k: int) -> None:
        for work in queues[k]:
            work(children[k])

    if sum(load) < _THREADED_FROM:
        for k in range(_STREAMS):
            run(k)
    else:
        with ThreadPoolExecutor(_STREAMS) as pool:
            list(pool.map(run, range(_STREAMS)))


def _shuffle_rows(values: np.ndarray, s: np.ndarray, L: int, g: np.random.Generator) -> None:
    """Shuffle each segment ``[s[i], s[i] + L)`` of ``values`` in place with generator ``g``."""
    if s.size == 1 or bool(np.all(np.diff(s) == L)):
        first = int(s[0])
        view = values[first : first + s.size * L].reshape(s.size, L)
        g.permuted(view, axis=1, out=view)
    else:
        idx = s[:, None] + np.arange(L, dtype=np.int64)
        block = values[idx]
        g.permuted(block, axis=1, out=block)
        values[idx] = block


def _finish(ids: np.ndarray) -> np.ndarray:
    ids.flags.writeable = False
    return ids


def _pieces_in_epoch_order(run: _Run, starts: np.ndarray, rng: np.random.Generator):
    """Lay the pieces out in the epoch's order; return ids and the pieces' output segments."""
    k = _piece_order(rng, run.node)
    lengths = run.length[k]
    ids = _layout(starts[k], lengths)
    out_starts = np.cumsum(lengths) - lengths
    return ids, out_starts, lengths, k


# --------------------------------------------------------------------------------------------
# the algorithms
# --------------------------------------------------------------------------------------------


def naive(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return a uniform permutation of all samples, ignoring shards, nodes and blocks.

    The best mixing and the worst locality: every node reads from every shard from the start.

    Parameters
    ----------
    shard_sizes : array_like of int
        Number of samples ``Z_j >= 1`` of each shard, in storage order.
    canonical_nodes : int
        Number of canonical nodes ``C`` (checked, otherwise unused).
    seed, epoch : int
        The order is a function of ``(seed, epoch)``.
    block_size : int
        Shuffle block size ``B`` (checked, otherwise unused).

    Returns
    -------
    numpy.ndarray
        Read-only int64 array; position ``p`` holds the sample read ``p``-th.

    Examples
    --------
    >>> order = naive([3, 3], canonical_nodes=1, seed=0, epoch=0)
    >>> sorted(order.tolist())
    [0, 1, 2, 3, 4, 5]
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    return _finish(epoch_rng(seed, epoch).permutation(int(sizes.sum())).astype(np.int64, copy=False))


def py1s(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return the order that shuffles pieces inside each node and samples inside each piece.

    A node reads one shard at a time: the best locality and the weakest mixing. Parameters
    and result as in :func:`naive`; ``block_size`` is checked, otherwise unused.

    Examples
    --------
    >>> a = py1s([4, 4, 4, 4], canonical_nodes=2, seed=0, epoch=0)
    >>> b = py1s([4, 4, 4, 4], canonical_nodes=2, seed=0, epoch=5)
    >>> sorted(a[:8].tolist()) == sorted(b[:8].tolist())  # node 0 holds the same samples
    True
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    run = _Run(sizes, C, seed)
    rng = epoch_rng(seed, epoch)
    ids, out_starts, lengths, _ = _pieces_in_epoch_order(run, run.sample_starts(), rng)
    _shuffle_segments(rng, ids, out_starts, lengths)
    return _finish(ids)


def py2s(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return the ``py1s`` order with each shard also shuffled once per run before the split.

    Parameters and result as in :func:`naive`; ``block_size`` is checked, otherwise unused.

    Examples
    --------
    >>> order = py2s([5, 5, 5], canonical_nodes=2, seed=3, epoch=1)
    >>> sorted(order.tolist()) == list(range(15))
    True
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    run = _Run(sizes, C, seed)
    run_ids = _layout(run.begin[run.order], run.run_sizes)
    _shuffle_segments(run.rng, run_ids, run.run_starts, run.run_sizes)
    rng = epoch_rng(seed, epoch)
    pos, out_starts, lengths, _ = _pieces_in_epoch_order(run, run.q, rng)
    _shuffle_segments(rng, pos, out_starts, lengths)
    for a in range(0, pos.size, _CHUNK):
        pos[a : a + _CHUNK] = run_ids[pos[a : a + _CHUNK]]
    return _finish(pos)


def py1b(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return the order that shuffles inside fixed blocks of ``B`` positions of each node.

    Blocks start at each node span's first position; the last block of a node is shorter.
    With ``block_size=1`` the result is the epoch's piece layout, shared by ``py1s``,
    ``py1b``, ``py1br`` and ``py1e``. Parameters and result as in :func:`naive`.

    Examples
    --------
    >>> order = py1b([4, 4, 4, 4], canonical_nodes=1, seed=0, epoch=0, block_size=8)
    >>> layout = py1b([4, 4, 4, 4], canonical_nodes=1, seed=0, epoch=0, block_size=1)
    >>> sorted(order[:8].tolist()) == sorted(layout[:8].tolist())
    True
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    run = _Run(sizes, C, seed)
    rng = epoch_rng(seed, epoch)
    ids, _, _, _ = _pieces_in_epoch_order(run, run.sample_starts(), rng)
    if B > 1:
        lo, hi = run.bounds[:-1], run.bounds[1:]
        count = -(-(hi - lo) // B)
        first = np.cumsum(count) - count
        k = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(first, count)
        starts = np.repeat(lo, count) + k * B
        lengths = np.minimum(B, np.repeat(hi, count) - starts)
        _shuffle_segments(rng, ids, starts, lengths)
    return _finish(ids)


def _py1br_cuts(rng: np.random.Generator, m: int, B: int, stagger: int) -> np.ndarray:
    """Block boundaries ``0 = c_0 < ... < c_k = m`` of one node span of ``m`` positions."""
    low = max(1, (3 * B) // 4)
    high = max(low + 1, (5 * B) // 4)
    draws = -(-(m + stagger) // low) + 1
    ends = np.cumsum(rng.integers(low, high, size=draws)) - stagger
    inner = ends[(ends > 0) & (ends < m)]
    cuts = np.concatenate(([0], inner, [m])).astype(np.int64)
    smallest = max(1, low // 2)
    if cuts.size > 2 and cuts[1] - cuts[0] < smallest:
        cuts = np.delete(cuts, 1)
    if cuts.size > 2 and cuts[-1] - cuts[-2] < smallest:
        cuts = np.delete(cuts, -2)
    return cuts


def py1br(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return the order that shuffles inside staggered blocks of random sizes in each node.

    Block sizes are uniform in ``[3B/4, 5B/4)``; node ``c``'s boundaries are moved back by a
    stagger ``g_c`` uniform in ``[0, 3B/4)`` so that nodes do not cross block boundaries (and
    download bursts) at the same step. The blocks cover each node span exactly: boundaries are
    the cumulative block sizes minus ``g_c``, cut to the span, and a first or last block
    shorter than half the smallest block size is merged into its neighbour. Unlike streaming's
    ``py1br``, no tail of a node is left in shard order. Parameters and result as in
    :func:`naive`.

    Examples
    --------
    >>> order = py1br([100] * 20, canonical_nodes=2, seed=1, epoch=0, block_size=300)
    >>> sorted(order.tolist()) == list(range(2000))
    True
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    run = _Run(sizes, C, seed)
    rng = epoch_rng(seed, epoch)
    ids, _, _, _ = _pieces_in_epoch_order(run, run.sample_starts(), rng)
    stagger = rng.integers(0, max(1, (3 * B) // 4), size=C)
    starts, lengths = [], []
    for c in range(C):
        lo, hi = int(run.bounds[c]), int(run.bounds[c + 1])
        cuts = _py1br_cuts(rng, hi - lo, B, int(stagger[c]))
        starts.append(lo + cuts[:-1])
        lengths.append(np.diff(cuts))
    _shuffle_segments(rng, ids, np.concatenate(starts), np.concatenate(lengths))
    return _finish(ids)


def _argsort_keys(keys: np.ndarray) -> np.ndarray:
    """Return ``argsort(keys)``, by sorting packed 64-bit words when precision allows.

    Each key becomes ``(key - min) / span`` quantised to the high bits of a word whose low bits
    hold its index; numpy sorts such words several times faster than it argsorts floats. Keys
    closer than the quantum (``span / 2^(64 - index bits)``, at least 2^-20 of a position) keep
    their input order. Falls back to ``numpy.argsort`` when the quantum would be coarser.
    """
    n = keys.size
    if n < 64:
        return np.argsort(keys)
    index_bits = max(1, (n - 1).bit_length())
    origin = float(keys.min())
    span = float(keys.max()) - origin
    free = 64 - index_bits
    if span <= 0.0 or free - max(0, math.ceil(math.log2(span))) < 20:
        return np.argsort(keys)
    scale = math.ldexp(1.0, free) / span * (1.0 - 2.0**-40)
    packed = ((keys - origin) * scale).astype(np.uint64)
    packed <<= np.uint64(index_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    packed &= np.uint64((1 << index_bits) - 1)
    return packed.astype(np.intp)


def _expand_node(
    rng: np.random.Generator,
    ids: np.ndarray,
    piece_off: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> None:
    """Sort one node span in place by ``position + shift``, shift uniform in its piece's window.

    Sweep in windows of ``W`` positions: a sample at position ``>= b`` gets a key of at least
    ``b - reach``, so after reading positions ``< b`` every key below ``b - reach`` is final.
    Keys still undecided are carried to the next window. Memory stays ``O(W + reach)``.
    """
    m = ids.size
    reach = float(-lower.min()) if lower.size else 0.0
    width = max(_CHUNK // 4, 4 * int(np.ceil(reach + float(upper.max()))) + 1)
    carry_keys = np.empty(0, dtype=np.float64)
    carry_ids = np.empty(0, dtype=np.int64)
    written = 0
    for a in range(0, m, width):
        b = min(m, a + width)
        pos = np.arange(a, b, dtype=np.int64)
        piece = np.searchsorted(piece_off, pos, side="right") - 1
        keys = pos + rng.uniform(lower[piece], upper[piece])
        keys = np.concatenate((carry_keys, keys))
        vals = np.concatenate((carry_ids, ids[a:b]))
        order = _argsort_keys(keys)
        keys, vals = keys[order], vals[order]
        done = keys.size if b == m else int(np.searchsorted(keys, b - reach, side="left"))
        ids[written : written + done] = vals[:done]
        written += done
        carry_keys, carry_ids = keys[done:], vals[done:]


def py1e(
    shard_sizes: Any, *, canonical_nodes: int, seed: int, epoch: int, block_size: int = 1 << 18
) -> np.ndarray:
    """Return the expanded-range order: samples of each piece spread over a window of ``~B``.

    Samples are shuffled inside their piece; each piece of ``Z`` samples at offset ``o`` of
    its node span draws a range ``R`` uniform in ``[3B/4, 5B/4)`` and each of its samples is
    moved by a shift uniform in ``[-h, h]`` with ``h = max(0, (R - Z) / 2)``, clipped so that no
    sample leaves the node span; the node span is then read in order of shifted position.
    A piece larger than ``R`` is not spread (streaming warns in that case). A sample at layout
    position ``p`` ends within ``5B/4`` positions of its piece. Parameters and result as in
    :func:`naive`.

    Examples
    --------
    >>> order = py1e([100] * 10, canonical_nodes=1, seed=0, epoch=0, block_size=500)
    >>> sorted(order.tolist()) == list(range(1000))
    True
    """
    sizes, C, seed, epoch, B = _validate(shard_sizes, canonical_nodes, seed, epoch, block_size)
    run = _Run(sizes, C, seed)
    rng = epoch_rng(seed, epoch)
    ids, out_starts, lengths, k = _pieces_in_epoch_order(run, run.sample_starts(), rng)
    _shuffle_segments(rng, ids, out_starts, lengths)
    low = (3 * B) // 4
    high = max(low + 1, (5 * B) // 4)
    ranges = rng.integers(low, high, size=k.size)
    cutoff = np.maximum((ranges - lengths) / 2.0, 0.0)
    node = run.node[k]
    offset = out_starts - run.bounds[node]
    m = run.bounds[node + 1] - run.bounds[node]
    lower = np.maximum(-cutoff, -offset.astype(np.float64))
    upper = np.minimum(cutoff, (m - offset - lengths).astype(np.float64))
    first = np.searchsorted(node, np.arange(C + 1))
    for c in range(C):
        lo, hi = int(run.bounds[c]), int(run.bounds[c + 1])
        sl = slice(int(first[c]), int(first[c + 1]))
        _expand_node(rng, ids[lo:hi], offset[sl], lower[sl], upper[sl])
    return _finish(ids)


Algorithm = Callable[..., np.ndarray]

#: Shard-aware shuffle algorithms by name, as ``streaming``'s ``shuffle_algo`` names them.
SHUFFLE_ALGORITHMS: dict[str, Algorithm] = {
    "naive": naive,
    "py1b": py1b,
    "py1br": py1br,
    "py1e": py1e,
    "py1s": py1s,
    "py2s": py2s,
}


def shard_order(
    algo: str,
    shard_sizes: Any,
    *,
    canonical_nodes: int,
    seed: int,
    epoch: int,
    block_size: int = 1 << 18,
) -> np.ndarray:
    """Return the epoch order of algorithm ``algo`` (a key of :data:`SHUFFLE_ALGORITHMS`).

    Examples
    --------
    >>> a = shard_order("py1br", [10] * 6, canonical_nodes=2, seed=4, epoch=2, block_size=8)
    >>> b = py1br([10] * 6, canonical_nodes=2, seed=4, epoch=2, block_size=8)
    >>> bool((a == b).all())
    True
    """
    algo = check_choice(algo, "algo", SHUFFLE_ALGORITHMS)
    return SHUFFLE_ALGORITHMS[algo](
        shard_sizes, canonical_nodes=canonical_nodes, seed=seed, epoch=epoch, block_size=block_size
    )
