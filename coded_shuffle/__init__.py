"""coded_shuffle: coded data shuffling for distributed training.

The layers, imported in dependency order (a module imports only those above it here):

- ``errors``: the exceptions;
- ``orders``: epoch orders (permutations, shard-aware shuffles, Feistel) and placements;
- ``matrix``: the shuffle matrix ``S`` and the leftover matrix;
- ``plan``, ``bounds`` and ``storage``: delivery plans (order-2 pairs, leftover cycles), lower
  bounds, and both with a storage of several batches a worker;
- ``codec`` and ``certificates``: records as bytes, XOR symbols, the wire format; GF(2) ranks;
- ``transport``: the shared link from the master to the workers;
- ``engine``: one epoch transition end to end, and runs of many;
- ``loader``: the worker side for a training loop, each epoch's batch as numpy rows;
  ``torch`` (optional, never imported here): the same as a PyTorch ``IterableDataset``;
- ``cli``: the ``coded-shuffle`` command.
"""
# ruff: noqa: I001  (the imports follow the layers, not the alphabet)

from .errors import CodedShuffleError, DecodeError, IntegrityError, InvalidPlanError, TransportError
from .orders import Placement, batch_sizes, epoch_permutation, epoch_placement
from .matrix import leftover_matrix, shuffle_matrix
from .plan import DeliveryPlan, Rates, pack_cycles, plan_delivery, plan_from_matrix, rates, verify_plan
from .bounds import LowerBound, lower_bound, worst_case
from .codec import Cache, Dataset, decode_worker, encode_plan, load_dataset, parse_frame, record_checksums
from .certificates import certify_plan, gf2_certificate
from .transport import InProcessTransport, Transport
from .engine import RunReport, TransitionReport, run, simulate, transition
from .loader import EpochBatch, InProcessLoader, LoadedEpoch, MPILoader

__version__ = "0.1.0"

__all__ = [
    "Cache",
    "CodedShuffleError",
    "Dataset",
    "DecodeError",
    "DeliveryPlan",
    "EpochBatch",
    "InProcessLoader",
    "InProcessTransport",
    "IntegrityError",
    "InvalidPlanError",
    "LoadedEpoch",
    "LowerBound",
    "MPILoader",
    "Placement",
    "Rates",
    "RunReport",
    "Transport",
    "TransportError",
    "TransitionReport",
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
