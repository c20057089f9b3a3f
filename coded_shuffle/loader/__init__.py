"""The worker side for a training loop: each epoch, a worker's batch as numpy rows, in epoch order.

Notation
--------
=========  ==========================================================================
``K``      number of workers
``N``      number of records: the rows ``X[0] .. X[N-1]`` of one array (or ``.npy`` file), or
           the records of a record source
``t``      epoch; epoch ``t``'s global order is cut into ``K`` contiguous batches
=========  ==========================================================================

A training job reads its data as rows ``X[i]`` of one array, with their dtype and shape. Every
epoch has a global order of the ``N`` rows (:func:`coded_shuffle.orders.epoch_order`, from
``(seed, t)`` alone); worker ``k``'s batch is the ``k``-th contiguous run of it. A worker holds
its current batch (its cache). The first epoch is loaded directly from the dataset; every later epoch's
batch is decoded from the master's coded delivery and the worker's cache
(:func:`coded_shuffle.engine.transition` in-process, the same codec over MPI), each decoded
record checked against the checksum fixed when the dataset was loaded, and the holdings of all
workers checked against the master's ground truth, **before** the batch is yielded. A batch that
cannot be verified is never yielded: :class:`~coded_shuffle.errors.IntegrityError` is raised.

What a worker gets, per epoch, is an :class:`EpochBatch`: the ids of its batch in the epoch's
order, and ``records``, the rows ``X[ids]`` (same dtype, same row shape as ``X``). Iterating it
yields ``(id, row)`` pairs, or ``(id, decode(record))`` with the loader's ``decode``.

Records may have variable sizes (files, a sequence of ``bytes``, token documents, the variable
columns of MDS or Arrow records): a record is then its own bytes, a ``uint8`` array of its
length, never padded (``records`` an ``object`` array of them, ``lengths`` their sizes), delivered
whole, one batch a worker (``storage = 1``), by the coded scheme or the exchange. With
``balance="bytes"`` the batches are runs of the epoch's order of equal bytes (within one record)
instead of equal counts.

Three drivers, one worker view:

- :class:`InProcessLoader` runs the master and the ``K`` workers in one process on a shared
  :class:`~coded_shuffle.transport.InProcessTransport`. Iterating it yields one
  :class:`LoadedEpoch` per epoch (all ``K`` batches and the transition's report);
  :meth:`InProcessLoader.worker` gives worker ``k``'s own iterator of :class:`EpochBatch`.
- :class:`MPILoader` runs under ``mpiexec -n K+1``: rank 0 is the master and calls
  :meth:`MPILoader.serve`; the other ranks iterate it and get their :class:`EpochBatch` each
  epoch. MPI is reached only through :class:`~coded_shuffle.transport.MPITransport` (its
  link and its communicator).
- :class:`PeerLoader` runs a job of peers under ``mpiexec -n K`` or ``torchrun``: no master,
  every rank iterates and trains, and only the workers' exchange moves data.

``epochs`` counts the epochs a worker trains on, ``start_epoch .. start_epoch + epochs - 1``
(``start_epoch = 0`` by default; a job resumed from a checkpoint passes the epoch it resumes at,
whose batches are then read from the dataset), so a loader makes ``epochs - 1`` transitions;
:func:`coded_shuffle.engine.run`'s ``epochs`` counts transitions.
"""

from __future__ import annotations

from ._common import EpochBatch, LoadedEpoch, RowLayout, load_rows
from .inprocess import InProcessLoader
from .mpi import MPILoader
from .peers import PeerLoader

__all__ = [
    "EpochBatch",
    "LoadedEpoch",
    "InProcessLoader",
    "MPILoader",
    "PeerLoader",
    "RowLayout",
    "load_rows",
]
