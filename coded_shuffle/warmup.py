"""The compiled kernels: whether they are cached on disk, and compiling them ahead of the work.

The loops over points are compiled by numba on their first call, with ``cache=True``: the
machine code is kept beside the modules (``__pycache__``) and loaded by later runs, so only the
first run after an install (or an upgrade) pays the compilation, several seconds. numba 0.68
and later key that cache by each module's content, so that a reinstall of the same sources
keeps it (editable or not); earlier releases key it by the files' times and compile again after
a reinstall that rewrites them. The command line asks :func:`uncompiled` first and, when
something must compile, announces it before :func:`warm_up` compiles it, rather than leaving
the user before a silent command; the loaders (:mod:`coded_shuffle.loader`,
:mod:`coded_shuffle.torch`) do the same through :func:`compile_once`, which says so on standard
error. A job that must not pause at its first epoch calls :func:`warm_up` ahead (at install
time, say, or in a container's build).

=================  ===================================================================
group              kernels, and what compiles them here
=================  ===================================================================
``packing``        greedy cycle packing (:func:`coded_shuffle.plan.rates`)
``planning``       the counting sort of a point-level plan (:func:`~coded_shuffle.plan.plan_from_matrix`)
``ordering``       the worker ordering of the lower bound beyond its exact range (``lower_bound``)
``decoding``       the byte path: encoding, checksums, the parse of frames of pairs, the worker's
                   peel (a tiny ``simulate``), the encoding and decoding of records of varying
                   lengths, a record source's gather of spans
``feistel``        the compiled Feistel walk (4096 indices, forward and inverse) and the count
                   of a Feistel shuffle matrix (:func:`~coded_shuffle.matrix.feistel_shuffle_matrix`)
``storage``        a storage of several batches: the planner's cells, groups and chains, the
                   pieces' update, a worker's solve of many-term symbols (a tiny ``simulate``
                   with ``storage=2``, records of two pieces, and a tiny ``storage_rates``)
=================  ===================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._progress import say

__all__ = ["KERNEL_GROUPS", "uncompiled", "warm_up", "compile_once"]

#: The groups of kernels, in the order :func:`warm_up` compiles them.
KERNEL_GROUPS = ("packing", "planning", "ordering", "decoding", "feistel", "storage")


def _rack_update() -> None:
    """One update of whole records placed on two racks (the drops of ``storage._rack_drops``)."""
    from .orders import placement_from_owner
    from .storage import piece_placement, update_storage

    pp = piece_placement(placement_from_owner([0, 1, 2, 3], 4), M=2, pieces=1, racks=(2, 2))
    update_storage(pp, placement_from_owner([1, 2, 3, 0], 4))


def _dispatchers(group: str) -> list[Any]:
    from . import _codec_kernels as codec
    from . import _kernels
    from .orders import _feistel_kernels as feistel
    from .storage import _kernels as storage
    from .storage import _rack_drops

    kernels: dict[str, list[Any]] = {
        "packing": [_kernels.support_bits, _kernels.greedy_round, _kernels.girth],
        "planning": [
            _kernels.count_cells,
            _kernels.sort_moved,
            _kernels.gather_runs,
            _kernels.deal_cycles,
        ],
        "ordering": [_kernels.eades_ordering, _kernels.improve_ordering, _kernels.ordering_value],
        "decoding": [
            codec.encode_rows,
            codec.encode_packed,
            codec.take_spans,
            codec.take_rows,
            codec.spans_max,
            codec.checksum_rows,
            codec.checksum_spans,
            codec.peel_ops,
            codec.apply_ops,
            codec.apply_ops_at,
            codec.packed_rows,
            codec.packed_layout,
            codec.row_table,
            codec.apply_table,
            codec.parse_pairs,
        ],
        "feistel": [feistel.walk_compiled, feistel.count_transitions],
        "storage": [
            storage.cells,
            storage.group_symbols,
            storage.holder_counts,
            storage.rebalance,
            _rack_drops.rack_drops,
            storage.chain_pairs,
            storage.chain_triples,
            codec.direct_pick,
            codec.direct_rows,
            codec.move_rows,
            codec.copy_spans,
            codec.xor_terms,
        ],
    }
    return kernels[group]


def _cached(dispatcher: Any) -> bool:
    """Whether numba's on-disk cache holds a current entry of ``dispatcher`` for this machine."""
    try:
        index = dispatcher._cache._cache_file._load_index()  # {} when missing or stale
        magic = dispatcher.targetctx.codegen().magic_tuple()
    except Exception:  # another numba: say nothing rather than announce a compile wrongly
        return True
    return any(key[1] == magic for key in index)


def _check_groups(groups: Sequence[str] | None) -> list[str]:
    names = list(KERNEL_GROUPS) if groups is None else list(groups)
    for g in names:
        if g not in KERNEL_GROUPS:
            raise ValueError(
                f"Argument 'groups' must name groups among {', '.join(KERNEL_GROUPS)}, not {g!r}."
            )
    return names


def uncompiled(groups: Sequence[str] | None = None) -> list[str]:
    """Return the groups (of ``groups``, all by default) whose kernels are not cached yet.

    A group is cached when every kernel of it has an entry in numba's on-disk cache that is
    current (same source) and made for this machine's processor.

    Examples
    --------
    >>> warm_up(["packing"])
    >>> uncompiled(["packing"])
    []
    """
    return [g for g in _check_groups(groups) if not all(_cached(d) for d in _dispatchers(g))]


def warm_up(groups: Sequence[str] | None = None, *, progress: Callable[[int], None] | None = None) -> None:
    """Compile (or load from the cache) the kernels of ``groups``, all by default.

    Each group is compiled through the same calls as the real work, on a tiny input, so that
    the signatures cached are those the work uses. ``progress``, if given, is called after
    each group with the number of groups done.

    Examples
    --------
    >>> done = []
    >>> warm_up(["packing", "feistel"], progress=done.append)
    >>> done
    [1, 2]
    """
    names = _check_groups(groups)
    for k, group in enumerate(names, start=1):
        if group == "packing":
            from .plan import rates

            # one 5-cycle: lengths 2 to 4 find nothing, so the girth search runs too
            rates(np.roll(np.eye(5, dtype=np.int64), 1, axis=1))
        elif group == "planning":
            from .orders import placement_from_owner
            from .plan import plan_delivery, plan_from_matrix

            plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
            p0, p1 = placement_from_owner([0, 0, 1, 1], 2), placement_from_owner([1, 1, 0, 0], 2)
            plan_delivery(p0, p1, sizes=[1, 3, 2, 4])  # records of many sizes: pairs by size
        elif group == "ordering":
            from .bounds import EXACT_BOUND_MAX_K, lower_bound

            K = EXACT_BOUND_MAX_K + 1  # the ordering heuristic serves the bound beyond the exact range
            lower_bound(np.roll(np.eye(K, dtype=np.int64), 1, axis=1))
        elif group == "decoding":
            from .engine import simulate

            simulate(K=2, N=8, record_bytes=8, epochs=1, seed=0)
            from .codec import decode_worker, encode_plan, load_dataset
            from .plan import plan_from_matrix

            varying = load_dataset([bytes(n) for n in (3, 5, 2, 7, 1, 4, 6, 2, 3, 5, 1, 2, 4, 3, 6)])
            example = plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]])
            frames = encode_plan(example, varying, epoch=1)
            need = example.placement_t1.batch(0)
            decode_worker(varying.cache(example.placement_t.batch(0)), frames, need=need, worker=0)
            packed = varying.cache(example.placement_t.batch(0), packed=True)  # records end to end
            new = decode_worker(packed, frames, need=need, worker=0, checksums=varying.checksums).cache
            new.checksums(), new.data  # where they lie, and in rows
            from .records import SpanRecords

            spans = [np.frombuffer(bytes(8), dtype=np.uint8), np.frombuffer(bytes(8), dtype=np.uint8)]
            SpanRecords(spans, starts=[0, 3, 1], sizes=[2, 3, 4], where=[0, 0, 1]).gather([0, 1, 2])
            SpanRecords(spans[:1], starts=[0, 3], sizes=[2, 3]).gather([1, 0])  # one buffer
        elif group == "storage":
            from .engine import simulate
            from .storage import storage_rates

            # fewer pieces a record (2) than labels (3): the update rebalances the holders too
            simulate(K=4, N=16, record_bytes=2048, epochs=2, seed=0, storage=2)
            storage_rates((np.arange(16).reshape(4, 4) * 7) % 5, M=2, strategy="groups")  # the chains
            _rack_update()  # the update of a placement on racks
            from .engine.recut import _copy_spans

            # the re-cut's spans of a storage moved to another number of workers
            two = np.ones((2, 4), np.uint8)
            _copy_spans(np.zeros_like(two), np.array([1]), two, np.array([4]), np.array([3]))
        else:
            from .matrix import feistel_shuffle_matrix
            from .orders import feistel_permutation

            p = feistel_permutation(1 << 12, seed=0, epoch=0)
            p.inverse(p.forward(np.arange(1 << 12)))
            feistel_shuffle_matrix(1 << 12, 2, 3, seed=0, epoch=0)
        if progress is not None:
            progress(k)


def compile_once(*, prog: str = "coded_shuffle", announce: bool = True) -> list[str]:
    """Compile the kernels not cached yet, saying so first on standard error (with ``announce``).

    Returns the groups compiled (none once they are cached: nothing is said then). The loaders
    call it before their first epoch, so that the first use after an install does not stall for
    10 to 20 seconds without a word.

    Examples
    --------
    >>> compile_once()  # cached: nothing to say
    []
    """
    todo = uncompiled()
    if todo:
        if announce:
            say(
                f"{prog}: compiling kernels, once per install (10 to 20 s; "
                "coded_shuffle.warmup.warm_up() does it ahead)"
            )
        warm_up(todo)
    return todo
