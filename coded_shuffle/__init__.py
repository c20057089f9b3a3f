"""coded_shuffle: coded data shuffling for distributed training.

The layers, imported in dependency order (a module imports only those above it here):

- ``errors``: the exceptions;
- ``orders``: epoch orders (permutations, shard-aware shuffles, Feistel) and placements;
- ``matrix``: the shuffle matrix ``S`` and the leftover matrix;
- ``plan``, ``bounds`` and ``storage``: delivery plans (order-2 pairs, leftover cycles), lower
  bounds, and both with a storage of several batches a worker (none imports another);
- ``loads``: the one place that takes a ``storage`` and calls the scheme it names;
- ``network``: network models, each delivery's predicted time and a bound no delivery beats;
- ``records``: record sources, the one way records are read (``.npy`` rows, memory-mapped);
- ``codec`` and ``certificates``: records as bytes, XOR symbols, the wire format; GF(2) ranks;
- ``transport``: the shared link from the master to the workers;
- ``engine``: one epoch transition end to end, and runs of many;
- ``loader``: the worker side for a training loop, each epoch's batch as numpy rows;
  ``torch`` (optional, never imported here): the same as a PyTorch ``IterableDataset``;
- ``cli``: the ``coded-shuffle`` command.
"""
# ruff: noqa: I001  (the imports follow the layers, not the alphabet)

# The module's own imports go by private names, so that ``dir(coded_shuffle)`` and the names of the
# package are the public ones alone (no ``from __future__ import annotations``: the few annotations
# here are evaluated, and need no import).
import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:  # the names below are loaded on first use (PEP 562): importing the package is cheap
    from .errors import CodedShuffleError, DecodeError, IntegrityError, InvalidPlanError, TransportError
    from .orders import Placement, batch_sizes, epoch_permutation, epoch_placement
    from .matrix import leftover_matrix, shuffle_matrix
    from .plan import DeliveryPlan, Rates, pack_cycles, plan_delivery, plan_from_matrix, rates, verify_plan
    from .bounds import LowerBound, lower_bound, worst_case
    from .records import FileRecords, MDSRecords, NpyRecords, RecordSource, SpanRecords, TokenWindows
    from .records import ArrowRecords, WebDatasetRecords
    from .codec import Cache, Dataset, decode_worker, encode_plan, load_dataset, parse_frame, record_checksums
    from .certificates import certify_plan, gf2_certificate
    from .transport import InProcessTransport, Transport
    from .engine import RunReport, TransitionReport, run, simulate, transition
    from .loader import EpochBatch, InProcessLoader, LoadedEpoch, MPILoader

#: Where each public name lives; ``coded_shuffle.NAME`` imports its module on first use, so that
#: ``import coded_shuffle`` (and the command line's ``--help``) loads no numba, scipy or kernels.
_EXPORTS: dict[str, str] = {
    "CodedShuffleError": "errors",
    "DecodeError": "errors",
    "IntegrityError": "errors",
    "InvalidPlanError": "errors",
    "TransportError": "errors",
    "Placement": "orders",
    "batch_sizes": "orders",
    "epoch_permutation": "orders",
    "epoch_placement": "orders",
    "leftover_matrix": "matrix",
    "shuffle_matrix": "matrix",
    "DeliveryPlan": "plan",
    "Rates": "plan",
    "pack_cycles": "plan",
    "plan_delivery": "plan",
    "plan_from_matrix": "plan",
    "rates": "plan",
    "verify_plan": "plan",
    "LowerBound": "bounds",
    "lower_bound": "bounds",
    "worst_case": "bounds",
    "FileRecords": "records",
    "MDSRecords": "records",
    "NpyRecords": "records",
    "ArrowRecords": "records",
    "RecordSource": "records",
    "SpanRecords": "records",
    "TokenWindows": "records",
    "WebDatasetRecords": "records",
    "Cache": "codec",
    "Dataset": "codec",
    "decode_worker": "codec",
    "encode_plan": "codec",
    "load_dataset": "codec",
    "parse_frame": "codec",
    "record_checksums": "codec",
    "certify_plan": "certificates",
    "gf2_certificate": "certificates",
    "InProcessTransport": "transport",
    "Transport": "transport",
    "RunReport": "engine",
    "TransitionReport": "engine",
    "run": "engine",
    "simulate": "engine",
    "transition": "engine",
    "EpochBatch": "loader",
    "InProcessLoader": "loader",
    "LoadedEpoch": "loader",
    "MPILoader": "loader",
}

#: The subpackages and modules reachable as attributes, as after ``import coded_shuffle.NAME``.
_SUBMODULES = frozenset(
    {"bounds", "certificates", "cli", "codec", "engine", "errors", "loader", "matrix", "orders", "plan",
     "plots", "records", "storage", "tradeoff", "transport", "warmup", "loads", "network"}
)  # fmt: skip


def __getattr__(name: str) -> _typing.Any:
    """Import the module of a public name (or a submodule) on first use."""
    if name in _EXPORTS:
        value = getattr(_importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``), the submodules, and the module's dunders (PEP 562): not the
    private names, nor the private modules a submodule's import has bound here (``_kernels``)."""
    own = {name for name in globals() if not name.startswith("_") or name.startswith("__")}
    return sorted(own | set(__all__) | _SUBMODULES)


__version__ = "0.1.0"

__all__ = [
    "ArrowRecords",
    "Cache",
    "CodedShuffleError",
    "Dataset",
    "DecodeError",
    "DeliveryPlan",
    "EpochBatch",
    "FileRecords",
    "InProcessLoader",
    "InProcessTransport",
    "IntegrityError",
    "InvalidPlanError",
    "LoadedEpoch",
    "LowerBound",
    "MDSRecords",
    "MPILoader",
    "NpyRecords",
    "Placement",
    "Rates",
    "RecordSource",
    "RunReport",
    "SpanRecords",
    "TokenWindows",
    "Transport",
    "TransportError",
    "TransitionReport",
    "WebDatasetRecords",
    "batch_sizes",
    "certify_plan",
    "decode_worker",
    "encode_plan",
    "epoch_permutation",
    "epoch_placement",
    "gf2_certificate",
    "leftover_matrix",
    "load_dataset",
    "lower_bound",
    "pack_cycles",
    "parse_frame",
    "plan_delivery",
    "plan_from_matrix",
    "rates",
    "record_checksums",
    "run",
    "shuffle_matrix",
    "simulate",
    "transition",
    "verify_plan",
    "worst_case",
]
