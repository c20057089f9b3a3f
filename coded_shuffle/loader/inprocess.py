"""The in-process loader: the master and every worker in one process."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._checks import check_int
from ..engine import MasterOptions, TransitionReport
from ..engine.schedule import Epoch, EpochSchedule
from ..engine.schemes import Scheme
from ..engine.session import Session, Turn
from ..errors import IntegrityError
from ..network import Network
from ..orders import (
    OrderSpec,
)
from ..transport import InProcessTransport
from ..warmup import compile_once
from ._common import (
    _PROG,
    EpochBatch,
    LoadedEpoch,
    _batch,
    _check_common,
    _order_spec,
    _scheme_on,
    _store,
    batch_sizes_of,
    check_balance,
    check_decode,
    check_scheme,
    load_rows,
)

# --------------------------------------------------------------------------- in-process


class InProcessLoader:
    """The master and ``K`` workers in one process: each epoch, every worker's batch as rows.

    Iterating the loader yields one :class:`LoadedEpoch` per epoch, ``start_epoch`` to
    ``start_epoch + epochs - 1``;
    :meth:`worker` yields worker ``k``'s :class:`EpochBatch` objects alone. The loader is one run:
    the epochs are made once, in lockstep, and every consumer sees the same ones.

    Memory: besides the dataset (a memmap stays on disk), the workers' caches (``N`` records),
    the buffers of the previous caches (reused for the next epoch's records), and the rows of
    the current epoch handed out (copies, so that they stay valid after the next transition).

    Parameters
    ----------
    source : RecordSource, numpy.ndarray, str, os.PathLike, or a sequence or mapping of them
        The records: an array of shape ``(N, ...)`` or the path of a ``.npy`` file (read as a
        memmap); row ``X[i]`` is record ``i``, returned with its dtype and shape. Several are
        joined row by row, and a record source is read as it is (:mod:`coded_shuffle.records`),
        its records of one size or of variable sizes (files, a sequence of ``bytes``, token
        documents, MDS or Arrow variable columns): each is then yielded as its own bytes, never
        padded (:attr:`EpochBatch.records`); above one batch, in the ``coded`` scheme or the
        ``exchange``, each record cut by its own length (docs/storage.md).
    K : int
        Workers, at most ``N``.
    epochs : int
        Epochs to yield (``epochs - 1`` coded transitions).
    start_epoch : int
        The first epoch, read from the dataset (default 0; a resumed job passes its epoch).
    seed : int
        Seed of the epoch orders.
    order : str or OrderSpec
        The epoch order: ``"auto"`` (default), a name of :data:`coded_shuffle.orders.EPOCH_ORDERS`,
        or an :class:`~coded_shuffle.orders.OrderSpec` with shard options.
    strategy : str
        Cycle packing strategy of the plans (:data:`coded_shuffle.plan.STRATEGIES`).
    transport : InProcessTransport, optional
        The shared link (default: a fresh one); a ``fault`` hook on it exercises the repairs.
    max_repair_rounds : int
        See :func:`coded_shuffle.engine.transition`.
    storage : int
        Batches each worker stores, ``1 <= M <= K`` (:mod:`coded_shuffle.storage`): above 1 a
        worker keeps its share of every record's pieces from epoch to epoch and receives only
        the coded pieces it lacks; it still yields its batch, whole records. Small records get
        fewer pieces (:func:`~coded_shuffle.engine.state.storage_pieces`), whole below 2048 bytes.
    scheme : str or Scheme
        ``coded`` (default): the master's coded broadcast; ``exchange``: the workers send each
        other what each misses (the in-process link buffers the exchange), for every storage;
        ``auto``, with a ``network``: the one of the two of least predicted time of the first
        transition on it (:func:`coded_shuffle.engine.schedule.predicted_times`, in bytes where
        the records' sizes differ, of the batches ``balance`` cuts, of the pieces of a
        ``storage`` above 1); or a scheme of
        one's own, an object satisfying :class:`~coded_shuffle.engine.schemes.Scheme`, used as is
        (``storage`` then 1 or its own).
    network : Network, optional
        The network ``scheme="auto"`` chooses on (:class:`coded_shuffle.network.Network`; with a
        ``storage`` above 1, on the times of its pieces). With racks the ``exchange`` chooses its
        senders on their links and places a storage's pieces across them, as the engine's
        (:class:`~coded_shuffle.engine.schemes.ExchangeScheme` on ``network``).
    decode : callable, optional
        A record's bytes (a read-only ``uint8`` array, a view) to the user's sample: iterating an
        :class:`EpochBatch` then yields ``(id, decode(record))``. Default: the rows, as
        :attr:`EpochBatch.records` holds them (a ``.npy`` source's typed rows, a token file's
        windows of its token type, else a record's bytes).
    balance : str
        ``"count"`` (default): the batches are runs of the epoch's order of equal counts;
        ``"bytes"``: of equal bytes, within one record (for records of variable sizes:
        :func:`~coded_shuffle.orders.epoch_batch_sizes`), under every order.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(20, dtype=np.float64).reshape(10, 2)
    >>> loader = InProcessLoader(X, K=2, epochs=3, seed=0)
    >>> for ep in loader:
    ...     b = ep.batches[1]
    ...     assert np.array_equal(b.records, X[b.ids])
    ...     print(ep.epoch, len(b), b.records.dtype, ep.report is None or ep.report.verified)
    0 5 float64 True
    1 5 float64 True
    2 5 float64 True
    """

    def __init__(
        self,
        source: object,
        *,
        K: int,
        epochs: int,
        start_epoch: int = 0,
        seed: int = 0,
        order: str | OrderSpec = "auto",
        strategy: str = "greedy",
        transport: InProcessTransport | None = None,
        max_repair_rounds: int = 3,
        storage: int = 1,
        scheme: str | Scheme = "coded",
        network: Network | None = None,
        decode: Callable[[np.ndarray], Any] | None = None,
        balance: str = "count",
    ) -> None:
        self.decode = check_decode(decode)
        self.balance = check_balance(balance)
        self.dataset, self.layout = load_rows(source)
        N = self.dataset.N
        self.K = check_int(K, "K", minimum=1)
        if self.K > N:
            raise ValueError(f"Argument 'K' must be at most N = {N}, not {self.K}.")
        self.epochs, self.start_epoch, self.seed, self.strategy, self.max_repair_rounds = _check_common(
            epochs, start_epoch, seed, strategy, max_repair_rounds
        )
        scheme = check_scheme(scheme)
        self.order = _order_spec(order, N)
        if scheme == "auto" or network is not None:
            scheme = _scheme_on(network, scheme, self.dataset, self.K, self.seed, self.order, storage,
                                epoch=self.start_epoch, strategy=self.strategy,
                                balance=self.balance)  # fmt: skip
        variable = self.layout.variable
        self.scheme = _store(storage, self.dataset.record_bytes, self.K, mode=scheme, variable=variable,
                             sizes=self.dataset.lengths, network=network)  # fmt: skip
        self._work = self.scheme.dataset(self.dataset)
        compile_once(prog=_PROG)
        if transport is None:
            transport = InProcessTransport(self.K)
        elif not isinstance(transport, InProcessTransport) or transport.K != self.K:
            raise TypeError(f"Argument 'transport' must be an InProcessTransport for K = {self.K} workers.")
        self.transport = transport
        self._current: LoadedEpoch | None = None
        self._session: Session | None = None
        self._turns: Iterator[Turn] = iter(())
        self._now: Epoch | None = None
        #: The reports of the transitions made so far, in order.
        self.reports: list[TransitionReport] = []

    @property
    def N(self) -> int:
        """Number of records."""
        return self.dataset.N

    def _epoch(self, t: int) -> LoadedEpoch:
        """Epoch ``t``: the current one, or the next one (made now); others are an error."""
        cur = self.start_epoch - 1 if self._current is None else self._current.epoch
        if t == cur and self._current is not None:
            return self._current
        if t != cur + 1:
            raise RuntimeError(
                f"Epoch {t} was asked for while the loader is at epoch {cur}: an in-process loader "
                "is one run, and its workers go through the epochs in lockstep."
            )
        K, scheme = self.K, self.scheme
        report: TransitionReport | None = None
        if self._session is None:
            ds = self.dataset
            sizes = batch_sizes_of(ds.N, ds.record_bytes, ds.lengths, self.balance)
            schedule = EpochSchedule(N=self.N, K=K, seed=self.seed, spec=self.order, scheme=scheme,
                                     sizes=sizes, balance=self.balance)  # fmt: skip
            now = schedule.epoch(t)
            opts = MasterOptions(
                strategy=self.strategy, max_repair_rounds=self.max_repair_rounds, seed=self.seed,
                records=(self.dataset.N, self.dataset.record_bytes),
            )  # fmt: skip
            caches = [self._work.cache(scheme.held(now.held, k), packed=scheme.packs) for k in range(K)]
            self._session = Session.local(self.transport, (scheme,), self._work, caches, opts=opts)
            self._turns = self._session.epochs(schedule, now, self.start_epoch + self.epochs - 1)
            decoded = [0] * K
        else:
            before = self._now
            turn = next(self._turns)
            assert turn.epoch is not None and before is not None
            (report,) = turn.reports
            if not report.verified:
                raise IntegrityError(f"Epoch {t}: the workers' records did not match the master's checksums.")
            now = turn.epoch
            moved = scheme.owners(before.held) != now.placement.owner
            decoded = np.bincount(now.placement.owner[moved], minlength=K).tolist()
            self.reports.append(report)
        self._now = now
        held = self._session.caches
        assert held is not None
        batches = tuple(
            _batch(
                t,
                k,
                now.batch(k),
                held[k],
                self.layout,
                decoded=decoded[k],
                scheme=scheme,
                decode=self.decode,
            )
            for k in range(K)
        )
        self._current = LoadedEpoch(epoch=t, batches=batches, report=report)
        return self._current

    def __iter__(self) -> Iterator[LoadedEpoch]:
        for t in range(self.start_epoch, self.start_epoch + self.epochs):
            yield self._epoch(t)

    def worker(self, k: int) -> Iterator[EpochBatch]:
        """Worker ``k``'s iterator: its :class:`EpochBatch` of each epoch, in order.

        The workers' iterators advance together: the next epoch is made when the first of them
        asks for it, and a worker that has fallen a full epoch behind gets a ``RuntimeError``.

        Examples
        --------
        >>> import numpy as np
        >>> loader = InProcessLoader(np.arange(12).reshape(6, 2), K=3, epochs=2, seed=1)
        >>> w = [loader.worker(k) for k in range(3)]
        >>> for step in zip(*w):
        ...     print([len(b) for b in step], sorted(i for b in step for i in b.ids.tolist()))
        [2, 2, 2] [0, 1, 2, 3, 4, 5]
        [2, 2, 2] [0, 1, 2, 3, 4, 5]
        """
        k = check_int(k, "k", minimum=0)
        if k >= self.K:
            raise ValueError(f"Argument 'k' must be less than K = {self.K}, not {k}.")
        return (self._epoch(t).batches[k] for t in range(self.start_epoch, self.start_epoch + self.epochs))
