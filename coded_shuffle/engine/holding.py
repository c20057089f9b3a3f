"""What a worker holds, epoch after epoch: the placement model a scheme owns.

A transition delivers *units*: whole records, the ``q`` sub-packets of every record, or the
pieces of a storage of ``M`` batches (:mod:`coded_shuffle.storage`). A placement model says, for
the units of one job:

``dataset(dataset)``
    the dataset of the units (the records themselves, or their pieces with their checksums);
``start(placement)``
    what the workers hold at the first epoch, as the placement a scheme plans from;
``following(held, placement_next)``
    what they hold after the delivery of ``placement_next``'s batches;
``held(held, worker)``
    the unit ids ``worker`` holds (increasing);
``owners(held)``
    the record owners of ``held`` (the batches);
``demand(held, held_next)``
    the units each worker misses for ``held_next``, with their holders under ``held``
    (:func:`~coded_shuffle.plan.assign_senders`' input);
``records(cache, ids, record_bytes)``
    the rows of records ``ids``, whole, from a worker's cache (KeyError if not held);
``report_units(record_bytes, checked)``
    what a transition report's counts are in (:class:`~.report.Units`) for records of
    ``record_bytes``, and the records among ``checked`` units checked.

:class:`Batches` holds whole records or their sub-packets, one batch a worker;
:class:`PieceStorage` the pieces of ``M > 1`` batches. A scheme
(:mod:`coded_shuffle.engine.schemes`) is built with one, by :func:`~.schemes.scheme_for`;
nothing else branches on ``M``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..codec import Cache, Dataset
from ..orders import Placement
from .report import Units
from .state import (
    piece_lengths,
    pieces_dataset,
    pieces_placement,
    records_of_pieces,
    sized_pieces,
    storage_dataset,
    storage_pieces,
)

__all__ = ["Holding", "Batches", "PieceStorage", "holding_for"]


@runtime_checkable
class Holding(Protocol):
    """The interface of a placement model (the module docstring says what each member gives)."""

    @property
    def M(self) -> int:
        """Batches a worker stores."""

    @property
    def pieces(self) -> int:
        """Units a record."""

    def piece_bytes(self, record_bytes: int) -> int: ...

    def dataset(self, dataset: Dataset) -> Dataset: ...

    def start(self, placement: Placement) -> Any: ...

    def following(self, held: Any, placement_next: Placement) -> Any: ...

    def held(self, held: Any, worker: int) -> np.ndarray: ...

    def owners(self, held: Any) -> np.ndarray: ...

    def demand(self, held: Any, held_next: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...

    def records(self, cache: Cache, ids: np.ndarray, record_bytes: int) -> np.ndarray: ...

    def note(self, record_bytes: int) -> str: ...

    def report_units(self, record_bytes: int, checked: int) -> tuple[Units, int]: ...


@dataclass(frozen=True)
class Batches:
    """One batch a worker, delivered as whole records (``q = 1``) or as ``q`` sub-packets a record.

    Piece ``k`` of record ``n`` is unit ``n q + k`` and goes where its record goes
    (:func:`~coded_shuffle.engine.state.pieces_placement`).

    Examples
    --------
    >>> from coded_shuffle.orders import placement_from_owner
    >>> h = Batches(q=2)
    >>> h.held(h.start(placement_from_owner([1, 0], 2)), 0).tolist(), h.piece_bytes(8)
    ([2, 3], 4)
    """

    q: int = 1
    M: int = 1

    @property
    def pieces(self) -> int:
        """Units a record."""
        return self.q

    def piece_bytes(self, record_bytes: int) -> int:
        """Bytes of one unit."""
        return record_bytes // self.q

    def dataset(self, dataset: Dataset) -> Dataset:
        return dataset if self.q == 1 else pieces_dataset(dataset, self.q)

    def start(self, placement: Placement) -> Placement:
        return pieces_placement(placement, self.q)

    def following(self, held: Any, placement_next: Placement) -> Placement:
        return pieces_placement(placement_next, self.q)

    def held(self, held: Placement, worker: int) -> np.ndarray:
        return held.batch(worker)

    def owners(self, held: Placement) -> np.ndarray:
        return np.asarray(held.owner)[:: self.q]

    def demand(self, held: Placement, held_next: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(units, wanters, holder sets)`` of the units that change worker: one holder each
        (:func:`~coded_shuffle.plan.lone_holders`: bitmasks, rows of words beyond 64 workers)."""
        from ..plan import lone_holders

        old, new = np.asarray(held.owner, dtype=np.int64), np.asarray(held_next.owner, dtype=np.int64)
        units = np.flatnonzero(old != new)
        return units, new[units], lone_holders(old[units], K=held.K)

    def records(self, cache: Cache, ids: np.ndarray, record_bytes: int) -> np.ndarray:
        if self.q != 1:
            return records_of_pieces(cache, ids, self.q, record_bytes)
        rows = cache.rows(ids)
        if rows.size and int(rows.min()) < 0:
            raise KeyError(f"record {int(ids[int(np.argmin(rows))])} is not held")
        return cache.take(rows)

    def note(self, record_bytes: int) -> str:
        """What a job's header says of this storage: nothing for one batch."""
        return ""

    def report_units(self, record_bytes: int, checked: int) -> tuple[Units, int]:
        """Whole records or ``q`` sub-packets; the pieces of a record are checked together."""
        return Units(subpackets=self.q), checked // self.q


@dataclass(frozen=True)
class PieceStorage:
    """``M > 1`` batches a worker: the pieces of :mod:`coded_shuffle.storage`, ``P`` a record.

    ``P = C(K - 1, M - 1)`` (a piece for every label) unless ``record_bytes`` is given and its
    records are too small for that (:func:`~coded_shuffle.engine.state.storage_pieces`). Records
    of many sizes: ``sizes``, each record's length (part of the job, as known to every rank), sets
    ``P`` from their mean (:func:`~coded_shuffle.engine.state.sized_pieces`) and the length of
    every piece (:attr:`unit_lengths`: each record cut by its own length). The
    placements are piece placements (:class:`~coded_shuffle.storage.PiecePlacement`), followed
    from epoch to epoch with no traffic (:func:`~coded_shuffle.storage.update_storage`); a worker
    holds its share of them and hands out whole records.

    Examples
    --------
    >>> PieceStorage(K=8, M=2).pieces, PieceStorage(K=8, M=2).piece_bytes(2048)
    (7, 293)
    >>> PieceStorage(K=16, M=2, record_bytes=4096).pieces
    4
    """

    K: int
    M: int
    record_bytes: int | None = None
    sizes: np.ndarray | None = field(default=None, repr=False, compare=False)
    #: Hosts a rack, in the order of the workers: the pieces' labels are placed across them where
    #: the scheme leaves them free (:func:`~coded_shuffle.storage.piece_placement`); None: one switch.
    racks: tuple[int, ...] | None = field(default=None, repr=False)

    @cached_property
    def pieces(self) -> int:
        from ..storage import pieces_per_record

        if self.sizes is not None:
            return sized_pieces(self.sizes, self.K, self.M)
        if self.record_bytes is None:
            return pieces_per_record(self.K, self.M - 1)
        return storage_pieces(self.record_bytes, self.K, self.M)[0]

    @cached_property
    def unit_lengths(self) -> np.ndarray | None:
        """The length of every piece (by id) of records of many sizes, None for records of one size."""
        if self.sizes is None:
            return None
        lens = piece_lengths(self.sizes, self.pieces)
        lens.flags.writeable = False
        return lens

    def piece_bytes(self, record_bytes: int) -> int:
        """Bytes of one piece of records of ``record_bytes``."""
        return -(-record_bytes // self.pieces)

    def dataset(self, dataset: Dataset) -> Dataset:
        lengths, sizes = dataset.lengths, self.sizes
        if (lengths is None) != (sizes is None) or (
            lengths is not None and sizes is not None and not np.array_equal(sizes, lengths)
        ):
            raise ValueError(
                f"Argument 'dataset' must have the record sizes of the storage of M = {self.M} batches "
                "(sizes given exactly for records of many sizes, and equal to their lengths)."
            )
        return storage_dataset(dataset, self.K, self.M, pieces=self.pieces)

    def start(self, placement: Placement) -> Any:
        from ..storage import piece_placement

        return piece_placement(placement, M=self.M, pieces=self.pieces, racks=self.racks)

    def following(self, held: Any, placement_next: Placement) -> Any:
        from ..storage import update_storage

        return update_storage(held, placement_next)

    def held(self, held: Any, worker: int) -> np.ndarray:
        return held.held_by(worker)

    def owners(self, held: Any) -> np.ndarray:
        return np.asarray(held.placement.owner)

    def demand(self, held: Any, held_next: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(pieces, wanters, holder bitmasks)`` of :func:`~coded_shuffle.storage.piece_demand`."""
        from ..storage import piece_demand

        d = piece_demand(held, held_next.placement)
        if d.shape[1] == 3:  # one word a holder set
            return d[:, 0], d[:, 1], d[:, 2].astype(np.uint64)
        return d[:, 0], d[:, 1], np.ascontiguousarray(d[:, 2:]).view(np.uint64)

    def records(self, cache: Cache, ids: np.ndarray, record_bytes: int) -> np.ndarray:
        return records_of_pieces(cache, ids, self.pieces, record_bytes)

    def note(self, record_bytes: int) -> str:
        """What a job's header says of this storage."""
        C, width = self.pieces, self.piece_bytes(record_bytes)
        if C == 1:
            return f", storage = {self.M} batches (whole records, each on {self.M} workers)"
        if self.sizes is not None:  # records of many sizes, each cut by its own length
            return (f", storage = {self.M} batches (each record cut by its own length into {C} pieces of "
                    f"at most {width} B; the table counts pieces)")  # fmt: skip
        return f", storage = {self.M} batches ({C} pieces of {width} B a record; the table counts pieces)"

    def report_units(self, record_bytes: int, checked: int) -> tuple[Units, int]:
        """The pieces of a storage of ``M`` batches (the check counts records)."""
        units = Units(subpackets=self.pieces, storage=self.M, piece_bytes=self.piece_bytes(record_bytes))
        return units, checked


def holding_for(
    *, K: int, storage: int = 1, subpackets: int = 1, record_bytes: int | None = None, sizes: object = None
) -> Holding:
    """The placement model of ``storage`` batches a worker (``M``), or of ``subpackets`` a record.

    ``record_bytes``: the size of the records, which sets the pieces of a storage (a piece for
    every label, fewer for small records: :func:`~coded_shuffle.engine.state.storage_pieces`).
    ``sizes``: each record's length, for records of many sizes with a storage above one batch
    (:class:`PieceStorage`); ignored at one batch.

    Raises, naming the argument: a storage out of ``1 <= M <= K`` or not an int, sub-packets
    below 1, and both above 1 at once (the storage cuts its own pieces).

    Examples
    --------
    >>> holding_for(K=4, storage=2, record_bytes=600)
    PieceStorage(K=4, M=2, record_bytes=600)
    >>> holding_for(K=4, subpackets=3)
    Batches(q=3, M=1)
    """
    from .._checks import check_int
    from ..storage import check_storage

    check_storage(storage, K)  # an int: True or 2.0 never pass for 1 or 2
    q = check_int(subpackets, "subpackets", minimum=1)
    if storage != 1 and q != 1:
        raise ValueError(
            f"Argument 'subpackets' must be 1 with storage M = {storage} (the storage cuts the pieces)."
        )
    if storage == 1:
        return Batches(q=q)
    if record_bytes is not None:
        storage_pieces(record_bytes, K, storage)  # named checks
    if sizes is not None:
        from .._checks import check_int_array

        lens = check_int_array(sizes, "sizes", ndim=1).astype(np.int64)
        if lens.size < 1 or int(lens.min()) < 0:
            raise ValueError("Argument 'sizes' must hold at least one record size, none negative.")
        lens.flags.writeable = False
        return PieceStorage(K=K, M=int(storage), record_bytes=record_bytes, sizes=lens)
    return PieceStorage(K=K, M=int(storage), record_bytes=record_bytes)
