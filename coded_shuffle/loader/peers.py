"""The loader of a job of peers: every rank trains, and only the workers' exchange moves data."""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import numpy as np

from ..engine import MasterOptions
from ..engine.mpi import Rounds, attend, lead, setup_step
from ..engine.peers_job import catalog, checksum_table, own_units, peer_transition
from ..engine.protocol import Stopped, master_transition, worker_stop
from ..engine.schedule import EpochSchedule
from ..engine.schemes import Scheme
from ..errors import IntegrityError
from ..orders import OrderSpec
from ..transport import ControlLink, default_link
from ._common import _batch, _crashing, _order_spec, _storage, _store, among_peers, check_scheme, open_rows
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

    Parameters are those of :class:`MPILoader`, but ``source`` is read on every rank and there
    is no ``strategy`` (nothing is coded); ``transport`` is a link of peers
    (``MPITransport(peers=True)`` or ``TorchTransport(peers=True)``; by default the one of the
    job, :func:`peer_link`); ``scheme`` is ``exchange`` (default) or a scheme of one's own that
    runs among peers (``peers`` true).

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
            scheme=scheme,
        )  # fmt: skip
        self._records, self.layout = open_rows(source)
        self.N = len(self._records)
        if self.K > self.N:
            raise ValueError(f"Argument 'transport' must have at most N = {self.N} workers, not {self.K}.")
        _storage(storage, self.layout.record_bytes, self.K)
        self.scheme: Scheme = _store(storage, self.layout.record_bytes, self.K, mode=scheme, peers=True)

    def serve(self) -> list[Any]:
        """There is no master among peers: every rank iterates the loader."""
        raise RuntimeError("A job of peers has no master: every rank iterates the loader.")

    def _worker_epochs(self) -> Generator[Any, None, None]:
        link, scheme, layout = self.transport, self.scheme, self.layout
        k = link.worker
        assert k is not None and layout is not None and self.N is not None
        N, K, B = self.N, self.K, layout.record_bytes
        spec = _order_spec(self._order, N)
        first = self.start_epoch
        schedule = EpochSchedule(N=N, K=K, seed=self.seed, spec=spec, scheme=scheme)
        now = schedule.epoch(first)
        held = now.held
        cache = own_units(scheme, self._records, held, k)
        n_units = N * scheme.pieces
        dog = self._watchdog(N, B)
        with setup_step(link, dog, "checksums"):  # bounded, as the transitions (engine.mpi.setup_step)
            table = checksum_table(link, cache, n_units)
        units = catalog(n_units, scheme.piece_bytes(B), table)
        opts = MasterOptions(max_repair_rounds=self.max_repair_rounds, seed=self.seed, records=(N, B))
        spare = np.zeros_like(cache.data)
        t, ended, closed = first, False, False
        try:
            yield _batch(
                first, k, now.batch(k), cache, layout, decoded=0, scheme=scheme,
                writable=self.writable,
            )  # fmt: skip
            for t in range(first + 1, first + self.epochs):
                upcoming = schedule.epoch(t, now)
                nxt = upcoming.held
                rep, res = peer_transition(
                    link, scheme, units, cache, (held, nxt), epoch=t, dog=dog, opts=opts, spare=spare
                )
                if res is None:  # a worker stopped: the job ends here
                    ended = True
                    self.stopped_by = link.share(rep.workers[0] if isinstance(rep, Stopped) else None)
                    return
                if not res.verified:
                    raise IntegrityError(f"Epoch {t}: the workers' records did not match the checksums.")
                if rep is not None:  # the leader's: counts in units, sizes in records
                    self.reports.append(rep)
                spare, cache, held, now = cache.data, res.cache, nxt, upcoming
                yield _batch(
                    t, k, now.batch(k), cache, layout, decoded=res.decoded, scheme=scheme,
                    writable=self.writable,
                )  # fmt: skip
            ended = True
            link.share(None)
        except GeneratorExit:  # closed where it yielded an epoch: this worker stops early
            closed = True
            raise
        finally:  # a transition that failed midway is no stop: its error is raised
            if closed and not ended and os.getpid() == self._pid and not _crashing():
                stopped = None
                if t < first + self.epochs - 1:  # it says so where its next transition would start
                    stopped = self._stop(held, schedule.epoch(t + 1, now).held, units, t + 1, opts, dog)
                self.stopped_by = link.share(stopped)
            dog.close()

    def _stop(self, held: Any, nxt: Any, units: Any, epoch: int, opts: MasterOptions, dog: Any) -> int | None:
        """This worker's stop, posted where its next transition would start; the leader ends the job."""
        link = self.transport
        if not link.is_leader:
            attend(link, worker_stop(), watchdog=dog)
            return None
        master = master_transition(Rounds(link), self.scheme, units, held, nxt, epoch=epoch, opts=opts)
        rep, _ = lead(link, master, worker_stop(), watchdog=dog)
        return rep.workers[0] if isinstance(rep, Stopped) else None
