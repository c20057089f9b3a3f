"""The loader of a job of peers: every rank trains, and only the workers' exchange moves data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..engine import MasterOptions
from ..engine.schedule import Epoch, EpochSchedule
from ..engine.schemes import Scheme
from ..engine.session import Session
from ..network import Network
from ..orders import OrderSpec
from ..transport import ControlLink, default_link
from ._common import _store, among_peers, batch_sizes_of, check_scheme, open_rows
from .mpi import MPILoader

__all__ = ["PeerLoader", "peer_link"]


def peer_link(*, join_timeout: float | None = None) -> ControlLink:
    """The link of a job of peers (:func:`~coded_shuffle.transport.default_link`)."""
    return default_link(peers=True, join_timeout=join_timeout)


class PeerLoader(MPILoader):
    """The epochs of a job of ``K`` peers: every rank a worker that iterates its batches.

    Run under ``mpiexec -n K`` or ``torchrun --nproc-per-node K``: there is no master rank.
    Every rank gives the same ``source`` (an array, or the path of a ``.npy`` file that every
    rank can read; it is memory-mapped and each rank reads only the rows it holds) and the same
    options. At the first epoch each rank reads its own batch (its share of the pieces, with
    ``storage > 1``); every later epoch comes from the workers' exchange
    (:class:`~coded_shuffle.engine.schemes.ExchangeScheme` among peers: each worker receives
    exactly what it misses, from the holder that keeps the busiest upload least), decoded and
    checked unit by unit, repaired from another holder, and the holdings of every worker checked
    against the table of checksums gathered from what the ranks read. Rank 0 leads the protocol's
    control rounds beside its own training, and keeps the transitions' reports (:attr:`reports`,
    the bytes the workers sent each other each epoch; empty on the other ranks). Stopping early
    works as in :class:`MPILoader`.

    Parameters are those of :class:`MPILoader`, but ``source`` is read on every rank (records of
    one size or of variable sizes; of variable sizes, every rank reads the table of their sizes,
    and with ``storage`` above 1 cuts each record into pieces by its own length, as every other
    rank) and there is no ``strategy`` (nothing is coded); ``transport`` is a link of peers
    (``MPITransport(peers=True)`` or ``TorchTransport(peers=True)``; by default the one of the
    job, :func:`peer_link`); ``scheme`` is ``exchange`` (default) or a scheme of one's own that
    runs among peers (``peers`` true); ``network`` with racks of the ``K`` peers: the exchange
    chooses its senders on the racks' links and places a storage's pieces across them, as the
    engine's on that network.

    Examples
    --------
    >>> loader = PeerLoader("data.npy", epochs=5, seed=0)  # doctest: +SKIP
    >>> for batch in loader:  # doctest: +SKIP
    ...     train_on(batch.records)
    """

    def __init__(
        self,
        source: object,
        *,
        epochs: int,
        start_epoch: int = 0,
        seed: int = 0,
        order: str | OrderSpec = "auto",
        transport: ControlLink | None = None,
        max_repair_rounds: int = 3,
        timeout: float | None = None,
        writable: bool = False,
        storage: int = 1,
        scheme: str | Scheme = "exchange",
        decode: Callable[[np.ndarray], Any] | None = None,
        balance: str = "count",
        network: Network | None = None,
    ) -> None:
        if not among_peers(check_scheme(scheme, auto=False)):
            raise ValueError(f"Argument 'scheme' must be a scheme that runs among peers, not {scheme!r}.")
        link = peer_link() if transport is None else transport
        if not isinstance(link, ControlLink) or not link.peers:
            raise TypeError(
                "Argument 'transport' must be a link of peers (peers=True): a job without a master."
            )
        super().__init__(
            None, epochs=epochs, start_epoch=start_epoch, seed=seed, order=order, transport=link,
            max_repair_rounds=max_repair_rounds, timeout=timeout, writable=writable, storage=storage,
            scheme=scheme, decode=decode, balance=balance, network=network,
        )  # fmt: skip
        self._records, self.layout = open_rows(source)
        self.N = len(self._records)
        if self.K > self.N:
            raise ValueError(f"Argument 'transport' must have at most N = {self.N} workers, not {self.K}.")
        B, variable = self.layout.record_bytes, self.layout.variable
        lengths = np.asarray(self._records.sizes, dtype=np.int64) if variable else None
        self.scheme: Scheme = _store(storage, B, self.K, mode=scheme, peers=True, variable=variable,
                                     sizes=lengths, network=self.network)  # fmt: skip
        self._sizes = batch_sizes_of(self.N, B, lengths, self.balance)

    def serve(self) -> list[Any]:
        """There is no master among peers: every rank iterates the loader."""
        raise RuntimeError("A job of peers has no master: every rank iterates the loader.")

    def _open(self) -> tuple[Session, EpochSchedule, Epoch]:
        """Every peer, before its first batch: its own units read from the records, and the table
        of every unit's checksum gathered from what the ranks read (the session's start)."""
        scheme, layout = self.scheme, self.layout
        assert layout is not None and self.N is not None
        N, B = self.N, layout.record_bytes
        schedule = self._schedule(N, scheme)
        now = schedule.epoch(self.start_epoch)
        opts = MasterOptions(max_repair_rounds=self.max_repair_rounds, seed=self.seed, records=(N, B))
        session = Session(self.transport, self._watchdog(N, B), (scheme,), opts=opts)
        session.gather(self._records, now.held, N * scheme.pieces, scheme.piece_bytes(B))
        return session, schedule, now
