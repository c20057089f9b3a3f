"""One session: the epochs of one job over one link, for the master, a worker and the peers' leader.

Every process driver (the MPI and torch.distributed loaders, with a master or among peers, the
MPI experiment runner, the warm-ups) is a thin client of a :class:`Session`, which holds the one
copy of each step of a job:

- the **setup handshake** (:meth:`Session.setup`): a start-up step is a control round that every
  rank must reach within the timeout, then the step's collectives under the watchdog
  (:func:`~coded_shuffle.engine.mpi.setup_step`); :meth:`Session.deal`, :meth:`Session.receive`
  and :meth:`Session.gather` are the start of the units and checksums in each role;
- the **transition loop** (:meth:`Session.epochs`): each transition ``t -> t + 1`` of the
  schedule, one run of the protocol (:mod:`coded_shuffle.engine.protocol`) in every scheme the
  job delivers with, carried by :func:`~coded_shuffle.engine.mpi.serve` (the master),
  :func:`~coded_shuffle.engine.mpi.attend` (a worker) or :func:`~coded_shuffle.engine.mpi.lead`
  (the peers' leader: the master's control rounds beside its own worker's role, over the same
  link: the master's role among peers sends no frame);
- the **early-stop handshake** (:meth:`Session.stop`): a worker that stops posts ``STOP`` where
  its next transition would start, and the job ends there;
- the closing share (:meth:`Session.end`).

In one process (:meth:`Session.local`: the in-process run and loader) the session holds every
worker's units and carries all roles at once (:func:`drive`), with the same transition loop.

Among peers no rank holds the records: the leader's view of them is a :class:`Catalogue` of the
units (their number, width and checksums), gathered from what the ranks read.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ..codec import Cache, Dataset
from ..errors import IntegrityError
from ..orders import epoch_placement
from ..transport import ControlLink, Transport
from .mpi import Watchdog, attend, lead, serve, setup_step
from .protocol import (
    GO,
    Announce,
    Gather,
    MasterOptions,
    Post,
    Stopped,
    WorkerResult,
    master_transition,
    step,
    worker_stop,
    worker_transition,
)
from .report import LinkCounts, TransitionReport
from .rest import HeldStart, receive_held, serve_held
from .restore import RecoveryReport, receive_storage, serve_storage
from .schedule import Epoch, EpochSchedule
from .schemes import Planned, Scheme, Tamper
from .state import synthetic_dataset, unit_lengths, units_of

__all__ = ["Catalogue", "Extras", "Turn", "Session", "drive", "warm_up", "WARM_RECORDS", "WARM_BYTES"]


@dataclass(frozen=True)
class Catalogue:
    """The peers' leader's view of the units: their number, width and checksums, no bytes.

    What the master's half of a scheme that runs among peers reads of the records: it plans,
    checks the workers' holdings and reports, and never sends one.

    Examples
    --------
    >>> import numpy as np
    >>> c = Catalogue(N=3, record_bytes=8, checksums=np.zeros(3, np.uint64))
    >>> c.N, c.record_bytes, c.variable
    (3, 8, False)
    """

    N: int
    record_bytes: int
    checksums: np.ndarray
    lengths: np.ndarray | None = None

    @property
    def variable(self) -> bool:
        """Whether the records have variable lengths."""
        return self.lengths is not None


@dataclass(frozen=True)
class Extras:
    """What a job adds to its transitions besides the protocol (the MPI experiment runner's figures).

    ``planned_by``: the scheme whose plan every scheme of the job is reported against, made once
    a transition; ``links``: a factory of counters of this rank's interface bytes
    (``run --count-links``), read beside the protocol, each transition, and gathered in a control
    round after it; ``baseline``: a plain broadcast of the coded delivery's bytes after
    it (``--bcast-baseline``); ``with_digest``: the workers post a digest of their bytes;
    ``tamper(cache, units, epoch)``: what damages worker's frames at ``epoch`` (tests), or None;
    ``before(epoch)``: called on every rank at the start of each transition (tests' hooks);
    ``report(report, lost_all, links)``: called on the leading rank with each report as it is made
    (``lost_all``: no worker received a byte of its multicast delivery; ``links``: the links'
    counts, :class:`~coded_shuffle.engine.report.LinkCounts`, or None without ``links``).
    """

    planned_by: Scheme | None = None
    links: Callable[[], Callable[[], tuple[int, int]]] | None = None
    baseline: bool = False
    with_digest: bool = False
    tamper: Callable[[Cache, np.ndarray, int], Tamper | None] | None = None
    before: Callable[[int], None] | None = None
    report: Callable[[TransitionReport, bool, LinkCounts | None], None] | None = None


@dataclass(frozen=True)
class Turn:
    """What one transition gave this rank.

    ``reports``: the master's or the leader's reports, one a scheme (empty elsewhere);
    ``lost_all``: for each, whether no worker received a byte of its multicast delivery;
    ``result``: this rank's worker's result (None on the master, or when the job ended);
    ``stopped``: the workers that stopped early, when the job ends at this transition.
    """

    epoch: Epoch | None
    reports: tuple[TransitionReport, ...] = ()
    lost_all: tuple[bool, ...] = ()
    result: WorkerResult | None = None
    stopped: tuple[int, ...] | None = None


def _gather_counts(own: tuple[int, int]) -> Generator[Gather | Announce, Any, list[tuple[int, int]]]:
    """The leading rank's round of the links' counts: ``own`` first, then each worker's."""
    posts = yield Gather("links")
    yield Announce(True)
    return [own, *posts]


def _post_counts(counts: tuple[int, int] | None) -> Generator[Post, Any, None]:
    """A worker's post of its links' counts in that round."""
    yield Post(counts)


def _after(counter: Callable[[], tuple[int, int]], into: list[tuple[int, int]], then: Any) -> Any:
    """``then`` (the baseline broadcast), once ``counter`` is read into ``into``."""

    def run(nbytes: int) -> Any:
        into.append(counter())
        return then(nbytes)

    return run


#: The start-up steps of the units a worker starts with: their checksums, then the units.
_START = ("checksums", "first batches")


class Session:
    """The epochs of one job over one link, on this rank: the master's, a worker's or the leader's.

    ``schemes`` are the deliveries of each transition, in order, from the same holdings (several
    only with a master; the first one's result is what the workers keep); ``opts`` the master's
    options (the master and the peers' leader); ``extras`` what the job adds
    (:class:`Extras`); ``at(stage)`` is called on every rank before each start-up step (tests'
    hooks). The role follows from the link: its master, one of its workers, or the leader of a
    job of peers (a worker that also leads the control rounds).
    """

    def __init__(
        self,
        link: ControlLink,
        watchdog: Watchdog | None,
        schemes: Sequence[Scheme],
        *,
        opts: MasterOptions | None = None,
        extras: Extras | None = None,
        at: Callable[[str], None] | None = None,
    ) -> None:
        self.link, self._dog, self.schemes = link, watchdog, tuple(schemes)
        self.opts = MasterOptions() if opts is None else opts
        self.extras = Extras() if extras is None else extras
        self._at = at
        #: The master's units (a dataset), or the peers' leader's view of them (a catalogue).
        self.units: Dataset | Catalogue | None = None
        #: This rank's worker's units, and the table of every unit's checksum.
        self.cache: Cache | None = None
        self.checksums: np.ndarray | None = None
        #: On a worker: every unit's length, where they vary and the master sent them (None else).
        self.lengths: np.ndarray | None = None
        self._spare: list[np.ndarray | Cache | None] = []
        #: In one process (:meth:`local`): every worker's units, and their buffers of the epoch before.
        self.caches: list[Cache] | None = None
        self._spares: list[np.ndarray | Cache] | None = None

    @classmethod
    def local(
        cls, link: Transport, schemes: Sequence[Scheme], work: Dataset, caches: list[Cache], *,
        opts: MasterOptions | None = None, extras: Extras | None = None,
    ) -> Session:  # fmt: skip
        """The session of a job in this process: the master (``work``, the units) and every worker
        (``caches``, each one's units), their roles carried together (:func:`drive`)."""
        session = cls(cast(ControlLink, link), None, schemes, opts=opts, extras=extras)
        session.units, session.caches = work, caches
        return session

    @property
    def dog(self) -> Watchdog:
        """The watchdog of a job across processes."""
        assert self._dog is not None, "a session in one process has no watchdog"
        return self._dog

    @property
    def setup_hook(self) -> Callable[[str], None] | None:
        """What is called on every rank before each start-up step (tests' hooks), or None."""
        return self._at

    @property
    def serves(self) -> bool:
        """Whether this rank is the master (it holds the records and sends them)."""
        return self.link.worker is None

    @property
    def leads(self) -> bool:
        """Whether this rank is the leader of a job of peers."""
        return bool(self.link.peers and self.link.is_leader)

    # ---- the setup handshake

    def setup(self, stage: str) -> contextlib.AbstractContextManager[None]:
        """Collective: the start-up step ``stage`` (:func:`~coded_shuffle.engine.mpi.setup_step`)."""
        if self._at is not None:
            self._at(stage)
        return setup_step(self.link, self.dog, stage)

    def _steps(
        self, stages: Sequence[str], first: Callable[[], Any], second: Callable[[], Any]
    ) -> tuple[Any, Any]:
        """``first()`` then ``second()``: in the start-up steps ``stages``, one each, or both in one."""
        if len(stages) == 1:
            with self.setup(stages[0]):
                return first(), second()
        with self.setup(stages[0]):
            a = first()
        with self.setup(stages[1]):
            return a, second()

    def deal(self, work: Dataset, held: Any, *, stages: Sequence[str] = _START) -> None:
        """Master: share the units' checksums (and their lengths, where they differ), then send
        each worker its units under ``held`` (not counted on the link)."""
        scheme, link = self.schemes[0], self.link
        known = unit_lengths(scheme) is not None  # pieces of many sizes, cut on every rank alike

        def sums() -> None:
            link.share_array(work.checksums)
            if work.lengths is not None and not known:
                link.share_array(np.ascontiguousarray(work.lengths, dtype=np.int64))

        def send() -> None:
            for k in range(link.K):  # each worker starts with its batch (its share) of the first epoch
                link.send_rows(k, work.data[scheme.held(held, k)])

        self._steps(stages, sums, send)
        self.units = work

    def receive(
        self, n_units: int, width: int, held: Any, *, stages: Sequence[str] = _START, variable: bool = False
    ) -> Cache:
        """Worker: the units' checksums (and, ``variable``, their lengths) and this worker's units
        under ``held``, from the master. The pieces of a storage of records of many sizes have
        their lengths from the scheme (its record sizes, cut on every rank alike,
        :attr:`~coded_shuffle.engine.holding.PieceStorage.unit_lengths`), not from the master."""
        k, link = self.link.worker, self.link
        assert k is not None
        ids = self.schemes[0].held(held, k)
        known = unit_lengths(self.schemes[0])

        def table() -> tuple[np.ndarray, np.ndarray | None]:
            got = link.share_array(np.empty(n_units, dtype=np.uint64))
            if known is not None:
                return got, known
            return got, link.share_array(np.empty(n_units, dtype=np.int64)) if variable else None

        (sums, lengths), data = self._steps(
            stages, table, lambda: link.receive_rows(np.empty((ids.size, width), dtype=np.uint8))
        )
        cache = Cache(ids=ids, data=data, lengths=None if lengths is None else lengths[ids])
        if self.schemes[0].packs:  # records of many sizes end to end, as the scheme decodes them
            cache = cache.pack()
        self.lengths = lengths
        self._hold(cache, sums)
        return cache

    def deal_held(
        self, work: Dataset, placement_next: Any, *, lengths: bool = True
    ) -> tuple[Any, HeldStart | RecoveryReport]:
        """Master, instead of :meth:`deal`: share the units' checksums (and, ``lengths``, their
        lengths where they differ, as :meth:`deal`), then plan from what the workers hold. One
        batch a worker (:func:`~coded_shuffle.engine.rest.serve_held`): what no worker holds is
        sent from the source to its holder under ``placement_next``; a storage of ``M > 1``
        batches (:func:`~coded_shuffle.engine.restore.serve_storage`): the storage
        ``placement_next`` comes back from the workers' pieces, their peers' and the source's.
        Returns what the workers hold then, the first transition's ``p_t``, and how it went."""
        with self.setup("checksums"):
            self.link.share_array(work.checksums)
            if lengths and work.lengths is not None and unit_lengths(self.schemes[0]) is None:
                self.link.share_array(np.ascontiguousarray(work.lengths, dtype=np.int64))
        self.units = work
        if self.schemes[0].M > 1:
            return placement_next, serve_storage(self.link, self.dog, work, self.schemes[0], placement_next)
        return serve_held(self.link, self.dog, work, placement_next)

    def receive_held(
        self, n_units: int, width: int, held: Callable[[np.ndarray, np.ndarray | None], Cache | None],
        storage: Any = None, *, lengths: np.ndarray | bool | None = None,
    ) -> Any:  # fmt: skip
        """Worker, with the master's :meth:`deal_held`: the checksums (``lengths`` True: the units'
        lengths too; an array: those; None: units of one size; a storage's pieces of many sizes
        have theirs from the scheme), then what it holds, ``held(checksums, lengths)`` (its units,
        checked against them; None: nothing), posted, and what it lacks received (a storage of
        ``M > 1``: the storage ``storage``, the master's ``placement_next``). Returns the placement
        of the holdings."""
        known = unit_lengths(self.schemes[0])
        with self.setup("checksums"):
            sums = self.link.share_array(np.empty(n_units, dtype=np.uint64))
            if known is None and lengths is True:
                lengths = self.link.share_array(np.empty(n_units, dtype=np.int64))
        lens = known if known is not None else (lengths if isinstance(lengths, np.ndarray) else None)
        self.lengths = lens
        if self.schemes[0].M > 1:
            own = held(sums, lens)
            mine = receive_storage(self.link, self.dog, self.schemes[0], own, sums, width, storage, lens)
            self._hold(mine, sums)
            return storage
        cache, placement = receive_held(self.link, self.dog, held(sums, lens), sums, width, lens)
        self._hold(cache, sums)
        return placement

    def gather(self, source: Any, held: Any, n_units: int, width: int, *, stage: str = "checksums") -> Cache:
        """Every peer: its units under ``held`` read from ``source``, and every unit's checksum
        gathered from what the ranks read (the leader's :class:`Catalogue`; records of variable
        lengths are whole units, their lengths ``source.sizes``, or with a storage of ``M > 1``
        pieces, each record cut by its own length on every rank alike)."""
        k = self.link.worker
        assert k is not None
        cache = units_of(self.schemes[0], source, held, k, width)
        with self.setup(stage):
            sums = cache.checksums() if len(cache) else np.empty(0, np.uint64)
            got = self.link.allgather((cache.ids, sums))
        table = np.zeros(n_units, dtype=np.uint64)
        for ids, sums in got:
            table[ids] = sums
        lengths = unit_lengths(self.schemes[0])  # of pieces of many sizes, else of whole records
        if lengths is None and cache.lengths is not None:
            lengths = np.asarray(source.sizes, dtype=np.int64)  # every rank's
        self.units = Catalogue(N=n_units, record_bytes=width, checksums=table, lengths=lengths)
        self._hold(cache, table)
        return cache

    def _hold(self, cache: Cache, checksums: np.ndarray) -> None:
        self.cache, self.checksums = cache, checksums
        # a buffer a scheme, for the records of the epoch after next (each alternates two)
        self._spare = [None if cache.is_packed else np.zeros_like(cache.data) for _ in self.schemes]

    # ---- the transition loop

    def epochs(self, schedule: EpochSchedule, now: Epoch, last: int) -> Iterator[Turn]:
        """The transitions from epoch ``now`` to ``last``, each yielded as it ends; the loop ends
        early, after a turn that says so, when a worker stopped."""
        while now.t < last:
            nxt = schedule.epoch(now.t + 1, now)
            if self.extras.before is not None:
                self.extras.before(nxt.t)
            turn = self.transition(now.held, nxt.held, epoch=nxt.t)
            if turn.stopped is not None:
                yield turn
                return
            yield Turn(nxt, turn.reports, turn.lost_all, turn.result)
            now = nxt

    def transition(self, p_t: Any, p_t1: Any, *, epoch: int) -> Turn:
        """One transition in every scheme of the session, in this rank's role."""
        if self.caches is not None:
            return self._local(p_t, p_t1, epoch)
        if self.serves:
            return self._serve(p_t, p_t1, epoch)
        k = self.link.worker
        assert k is not None and self.cache is not None and self.checksums is not None
        x, cache = self.extras, self.cache
        tamper = None if x.tamper is None else x.tamper(cache, self.schemes[0].held(p_t1, k), epoch)
        results, reports = [], []
        for scheme, out in zip(self.schemes, self._spare, strict=True):
            counter = None if x.links is None else x.links()
            role = worker_transition(
                self.link, scheme, k, cache, (p_t, p_t1), epoch=epoch, checksums=self.checksums, spare=out,
                sizes=getattr(self.units, "lengths", None),
                with_digest=x.with_digest, tamper=tamper,
            )  # fmt: skip
            if self.leads:
                master = master_transition(
                    self.link, scheme, self._catalogue(), p_t, p_t1, epoch=epoch, opts=self.opts
                )
                rep, res = lead(self.link, master, role, watchdog=self.dog)
                if isinstance(rep, Stopped):
                    return Turn(None, stopped=rep.workers)
            else:
                rep, res = None, attend(self.link, role, watchdog=self.dog)
            if res is None:  # a worker stopped: the job ends here
                return Turn(None, stopped=())
            mine = None if counter is None else counter()  # before the baseline, as the master's
            results.append(res)
            if x.baseline and scheme.name == "coded":
                self.link.baseline_broadcast(0)  # type: ignore[attr-defined]
            counts = None if counter is None else self._counted((0, 0), mine)  # the leader's are its worker's
            if rep is not None:
                self._made(rep, False, counts)
                reports.append(rep)
        self._spare = [cache, *(r.cache for r in results[1:])]
        self.cache = results[0].cache
        return Turn(None, tuple(reports), tuple(False for _ in reports), results[0])

    def _catalogue(self) -> Dataset:
        """The leader's catalogue, for the master's half of a scheme among peers, which reads of
        its records only what a catalogue holds (``N``, ``record_bytes``, ``lengths``, checksums)."""
        assert isinstance(self.units, Catalogue)
        return cast(Dataset, self.units)

    def _serve(self, p_t: Any, p_t1: Any, epoch: int) -> Turn:
        """The master's transition in every scheme (the plan made once if ``extras.planned_by``)."""
        assert isinstance(self.units, Dataset)
        x, link, work = self.extras, self.link, self.units
        planned: Planned | None = None
        if x.planned_by is not None:
            planned = x.planned_by.plan(p_t, p_t1, work, strategy=self.opts.strategy, exact_bound=None)
        reports, lost_all = [], []
        for scheme in self.schemes:
            lost = getattr(link, "multicast_lost_all", 0)
            timed = x.baseline and scheme.name == "coded"
            baseline = getattr(link, "baseline_broadcast", None) if timed else None
            counter = None if x.links is None else x.links()
            counted: list[tuple[int, int]] = []
            if counter is not None and baseline is not None:  # the links' bytes of the delivery alone
                baseline = _after(counter, counted, baseline)
            role = master_transition(
                link, scheme, work, p_t, p_t1, epoch=epoch, opts=self.opts, planned=planned, baseline=baseline
            )
            rep = serve(link, role, watchdog=self.dog)
            if isinstance(rep, Stopped):  # a worker stopped: the job ends here
                return Turn(None, stopped=rep.workers)
            counts = None if counter is None else self._counted(counted[0] if counted else counter(), None)
            reports.append(rep)
            lost_all.append(getattr(link, "multicast_lost_all", 0) > lost)
            self._made(rep, lost_all[-1], counts)
        return Turn(None, tuple(reports), tuple(lost_all))

    def _local(self, p_t: Any, p_t1: Any, epoch: int) -> Turn:
        """Every role in this process: the master's report, every worker's new units."""
        assert isinstance(self.units, Dataset) and self.caches is not None
        (scheme,) = self.schemes
        old = self.caches
        rep, self.caches = drive(
            self.link, scheme, self.units, old, (p_t, p_t1), epoch=epoch, opts=self.opts, spare=self._spares
        )
        self._spares = list(old)  # each worker alternates two buffers
        self._made(rep, False)
        return Turn(None, (rep,), (False,))

    def _counted(self, master: tuple[int, int] | None, mine: tuple[int, int] | None) -> LinkCounts | None:
        """The bytes each rank's links sent and received in a transition (``extras.links``), read
        beside the protocol and gathered after it in a control round of their own (bounded as the
        protocol's rounds), on the leading rank (``master``: its master's counts; ``mine``, its
        worker's); None elsewhere."""
        if not self.link.is_leader:
            attend(self.link, _post_counts(mine), watchdog=self.dog)
            return None
        assert master is not None
        gather = _gather_counts(master)
        counts = (
            lead(self.link, gather, _post_counts(mine), watchdog=self.dog)[0]
            if self.leads
            else serve(self.link, gather, watchdog=self.dog)
        )
        return LinkCounts(tuple(int(c[0]) for c in counts), tuple(int(c[1]) for c in counts))

    def _made(self, report: TransitionReport, lost_all: bool, links: LinkCounts | None = None) -> None:
        if self.extras.report is not None:
            self.extras.report(report, lost_all, links)

    # ---- the early-stop handshake, and the end

    def stop(self, schedule: EpochSchedule, now: Epoch) -> int | None:
        """A worker that stops early: it posts ``STOP`` where the transition after ``now`` would
        start; the leader of a job of peers then ends it and returns the first worker that stopped."""
        if not self.leads:
            attend(self.link, worker_stop(), watchdog=self.dog)
            return None
        nxt = schedule.epoch(now.t + 1, now)
        master = master_transition(
            self.link, self.schemes[0], self._catalogue(), now.held, nxt.held, epoch=nxt.t, opts=self.opts
        )
        rep, _ = lead(self.link, master, worker_stop(), watchdog=self.dog)
        return rep.workers[0] if isinstance(rep, Stopped) else None

    def end(self, value: Any = None) -> Any:
        """Collective, the job's last message: the leading rank's ``value``, on every rank."""
        return self.link.share(value)

    def close(self) -> None:
        """Stop the watchdog."""
        if self._dog is not None:
            self._dog.close()


def drive(
    link: Transport,
    scheme: Scheme,
    dataset: Dataset,
    caches: list[Cache],
    placements: tuple[Any, Any],
    *,
    epoch: int,
    opts: MasterOptions,
    spare: list[np.ndarray | Cache] | None = None,
) -> tuple[TransitionReport, list[Cache]]:
    """One transition of the protocol in this process; return the master's report and the new caches.

    The workers run only when the master waits for them, so that every frame the master sends
    before a :class:`~coded_shuffle.engine.protocol.Gather` is on the link when they receive.
    """
    K = placements[0].K
    master = master_transition(link, scheme, dataset, *placements, epoch=epoch, opts=opts)
    workers = [
        worker_transition(
            link, scheme, k, caches[k], placements, epoch=epoch, checksums=dataset.checksums,
            spare=spare[k] if spare is not None and k < len(spare) else None, sizes=dataset.lengths,
        )
        for k in range(K)
    ]  # fmt: skip
    running, msg = step(master, None)
    word: Any = None  # the master's last word: what every worker is sent next (None starts it)
    while running:
        if isinstance(msg, Gather):
            posts = []
            for k, w in enumerate(workers):
                alive, post = step(w, word)
                if not alive:  # pragma: no cover - a worker role posts until the last word
                    raise IntegrityError(f"Worker {k} ended before the master's {msg.stage!r} round.")
                posts.append(post.value)
            running, msg = step(master, posts)
        else:
            assert isinstance(msg, Announce)
            word = msg.word
            if word == GO:
                link.sync()
            running, msg = step(master, None)
    report = msg
    new: list[Cache] = []
    for k, w in enumerate(workers):
        alive, result = step(w, word)
        if alive or not isinstance(result, WorkerResult):  # pragma: no cover - protocol error
            raise IntegrityError(f"Worker {k} did not end with the master's verdict.")
        new.append(result.cache)
    return report, new


#: Records of the warm-up transition, per worker, and their size.
WARM_RECORDS, WARM_BYTES = 4, 8


def warm_up(
    link: ControlLink, watchdog: Watchdog, schemes: Sequence[Scheme], *, seed: int,
    at: Callable[[str], None] | None = None,
) -> float:  # fmt: skip
    """Collective: one transition ``0 -> 1`` of ``4 K`` records of 8 bytes in each of ``schemes``.

    Every rank loads the kernels of the codec and the planner and every link carries a first
    message, so that a job's first transition is timed as the others. Its setup is the start-up
    step ``"warm-up"``. Returns the seconds on the leading rank (0.0 on the others with a
    master); raises :class:`~coded_shuffle.errors.IntegrityError` if it is not verified.
    """
    from ..records import NpyRecords

    tic = time.perf_counter()
    K = link.K
    N = WARM_RECORDS * K
    p_t, p_t1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    session = Session(link, watchdog, schemes, at=at)
    if session.serves:
        session.deal(synthetic_dataset(N, WARM_BYTES, seed=seed), p_t, stages=("warm-up",))
    elif link.peers:
        session.gather(NpyRecords(synthetic_dataset(N, WARM_BYTES, seed=seed).data), p_t, N, WARM_BYTES,
                       stage="warm-up")  # fmt: skip
    else:
        session.receive(N, WARM_BYTES, p_t, stages=("warm-up",))
    turn = session.transition(p_t, p_t1, epoch=1)
    if not all(r.verified for r in turn.reports) or (turn.result is not None and not turn.result.verified):
        raise IntegrityError("The warm-up transition was not verified.")
    return time.perf_counter() - tic if link.is_leader else 0.0
