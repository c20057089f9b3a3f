"""The engine: orders -> matrix -> plan -> encode -> deliver -> decode -> verify, epoch after epoch.

One transition (:mod:`.protocol`, the same for every driver):

1. the master plans the delivery (:func:`coded_shuffle.plan.plan_delivery`), and its scheme
   (:mod:`.schemes`: coded, uncoded, or the workers' direct exchange) puts it on the transport;
2. every worker receives the frames, rejects malformed ones, decodes its new batch from its
   cache (:func:`coded_shuffle.codec.decode_worker`) and checks every record it decoded against
   the checksum fixed at load;
3. the points a worker could not decode or that failed their check are re-sent alone in
   ``REPAIR`` frames, for up to ``max_repair_rounds`` rounds;
4. every worker's holdings (ids and checksums of its bytes) are checked against the master's
   ground truth, with global conservation: all workers together hold each of the ``N`` records
   exactly once; the master's verdict ends the transition, with one :class:`TransitionReport`.

Epochs: one :class:`~.session.Session` runs the epochs of a job over one link for every driver
(its start-up steps, its transition loop, a worker's early stop). Drivers: :mod:`.inprocess`
(:func:`transition`, :func:`run`, :func:`simulate`, and the in-process loader) steps every role in
one process; :mod:`.mpi` carries the same roles between MPI ranks (the program behind
``coded-shuffle run`` and the MPI loader), with a deadline on every wait.
"""
# ruff: noqa: I001  (the imports follow the layers of the subpackage)

from .report import RunReport, TransitionReport
from .state import check_caches, check_holdings, digest, initial_caches, synthetic_dataset
from .schemes import REGISTRY, SCHEMES, CodedScheme, ExchangeScheme, Registered, UncodedScheme, scheme_for
from .protocol import MasterOptions, master_transition, worker_transition
from .inprocess import drive, run, simulate, transition

__all__ = [
    "TransitionReport",
    "RunReport",
    "SCHEMES",
    "REGISTRY",
    "Registered",
    "CodedScheme",
    "UncodedScheme",
    "ExchangeScheme",
    "scheme_for",
    "MasterOptions",
    "master_transition",
    "worker_transition",
    "initial_caches",
    "check_caches",
    "check_holdings",
    "digest",
    "drive",
    "transition",
    "run",
    "simulate",
    "synthetic_dataset",
]
