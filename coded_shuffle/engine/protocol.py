"""The transition protocol: one master role and one worker role, step by step, for every driver.

One transition ``t -> t + 1`` is a fixed exchange of small control messages between the master
and the ``K`` workers, around the frames that the scheme (:mod:`coded_shuffle.engine.schemes`)
puts on the transport:

==========  ======================================  ===========================================
round       each worker posts                       then the master announces
==========  ======================================  ===========================================
ready       ``READY``, or ``STOP`` (it stops)       ``GO`` (then sends the frames), or ``END``
decode      a :class:`Status` (ids that failed)     a :class:`Repair` (then the scheme re-sends
                                                    them), ``DONE``,
                                                    or ``ABANDON`` (repair rounds used up)
offered     among peers, in a repair round: ``OFFERED``  ``COLLECT`` (then they exchange the units)
repair      a :class:`Status`, after each repair    as after ``decode``
holdings    its :class:`Holdings` (ids, checksums)  the verdict: ``True`` when all matched
==========  ======================================  ===========================================

The roles are generators (sans-I/O): :func:`master_transition` yields :class:`Gather` (wait for
every worker's post; the posts are sent back in, in worker order) and :class:`Announce`;
:func:`worker_transition` yields :class:`Post` and is sent back the master's next word. Frames
go over the transport inside the roles, control messages only at the yields. A driver carries
the yields: :func:`coded_shuffle.engine.inprocess.drive` steps all roles in one process,
:mod:`coded_shuffle.engine.mpi` carries them between ranks with a deadline on every wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codec import DEFAULT_MAX_FRAME_BYTES, Cache, Dataset
from ..errors import IntegrityError
from ..orders import Placement
from ..transport import LinkStats, Transport
from .report import TransitionReport
from .schemes import Encoded, Given, Planned, Scheme, Taken, Tamper, send
from .state import _spare_rows, digest

__all__ = [
    "READY", "STOP", "GO", "END", "DONE", "ABANDON", "OFFERED", "COLLECT",
    "Gather", "Announce", "Post", "Status", "Holdings", "MasterOptions", "Repair", "Stopped", "WorkerResult",
    "master_transition", "worker_transition", "worker_stop", "step",
]  # fmt: skip

READY, STOP, GO, END, DONE, ABANDON = "ready", "stop", "go", "end", "done", "abandon"
#: Among peers, a repair round's two steps: every worker has offered what it re-sends; collect it.
OFFERED, COLLECT = "offered", "collect"


@dataclass(frozen=True)
class Gather:
    """Master: wait for one post from every worker (``stage`` names the round, for messages)."""

    stage: str


@dataclass(frozen=True)
class Announce:
    """Master: tell every worker ``word``."""

    word: Any


@dataclass(frozen=True)
class Post:
    """Worker: send ``value`` to the master, then wait for its next word."""

    value: Any


@dataclass(frozen=True)
class Status:
    """A worker's post after decoding or repairing: what still failed, and what it cost."""

    failed: np.ndarray
    rejected: int
    decoded: int
    deliver_seconds: float
    decode_seconds: float
    sent_bytes: int = 0
    sent_header_bytes: int = 0
    received_bytes: int = 0
    received_header_bytes: int = 0


@dataclass(frozen=True)
class Holdings:
    """A worker's post before the verdict: the ids it holds and their checksums, from its bytes."""

    ids: np.ndarray
    checksums: np.ndarray
    lengths: np.ndarray | None
    digest: str | None
    links: tuple[int, int] | None = None


@dataclass(frozen=True)
class MasterOptions:
    """What the master's role needs besides the shuffle: how to plan, send and report."""

    strategy: str = "greedy"
    exact_bound: bool | None = None
    max_repair_rounds: int = 3
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    seed: int | None = None
    link_mbps: float | None = None


@dataclass(frozen=True)
class Repair:
    """The master's word of a repair round: the ids each worker still lacks (by worker), and the
    round's number from 1 (the scheme re-sends them, from the master or from other holders)."""

    pending: dict[int, np.ndarray]
    round: int


@dataclass(frozen=True)
class Stopped:
    """What the master's role ends with when workers stopped early: those workers."""

    workers: tuple[int, ...]


@dataclass(frozen=True)
class WorkerResult:
    """What a worker's role ends with: its new cache, what it decoded, and the verdict."""

    cache: Cache
    decoded: int
    verified: bool


def step(role: Generator[Any, Any, Any], value: Any) -> tuple[bool, Any]:
    """Send ``value`` into a role: ``(True, what it yields next)``, or ``(False, what it returned)``."""
    try:
        return True, role.send(value)
    except StopIteration as stop:
        return False, stop.value


def _pending(posts: list[Status]) -> dict[int, np.ndarray]:
    return {k: s.failed for k, s in enumerate(posts) if s.failed.size}


def _repair_rounds(
    link: Transport, scheme: Scheme, dataset: Dataset, posts: list[Status], *, epoch: int, opts: MasterOptions
) -> Generator[Gather | Announce, Any, tuple[int, int, int]]:
    """The master's repair rounds after the delivery whose workers posted ``posts``: each round
    re-sends what some worker still lacks, until none does; returns the frames rejected, the units
    re-sent and the rounds. Raises :class:`~coded_shuffle.errors.IntegrityError` (after telling
    the workers) when ``opts.max_repair_rounds`` run out."""
    rejected = sum(s.rejected for s in posts)
    pending, repairs, rounds = _pending(posts), 0, 0
    while pending:
        if rounds == opts.max_repair_rounds:
            yield Announce(ABANDON)
            k = min(pending)
            raise IntegrityError(
                f"Worker {k}: {pending[k].size} record(s) still unverified after {rounds} repair round(s), "
                f"first point {int(pending[k][0])}."
            )
        rounds += 1
        yield Announce(Repair(pending, rounds))
        ids = np.unique(np.concatenate(list(pending.values())))
        repairs += int(ids.size)
        scheme.resend(link, dataset, ids, epoch=epoch)
        if scheme.peer_repairs:  # the workers re-send: every one offers before any collects
            yield Gather("offered")
            yield Announce(COLLECT)
        posts = yield Gather("repair")
        rejected += sum(s.rejected for s in posts)
        pending = _pending(posts)
    return rejected, repairs, rounds


def master_transition(
    link: Transport,
    scheme: Scheme,
    dataset: Dataset,
    p_t: Placement,
    p_t1: Placement,
    *,
    epoch: int,
    opts: MasterOptions,
    planned: Planned | None = None,
    links: Callable[[], tuple[int, int] | None] | None = None,
) -> Generator[Gather | Announce, Any, TransitionReport | Stopped]:
    """The master's role in one transition; returns its report, or :class:`Stopped`.

    ``p_t`` and ``p_t1`` are what the scheme plans from: two placements, or two piece placements
    (:class:`~coded_shuffle.storage.PiecePlacement`) for a
    :class:`~coded_shuffle.engine.schemes.StorageScheme`. ``planned`` is
    the scheme's plan of this shuffle when the caller has it already (several schemes delivering
    the same shuffle). ``links()``, if given, returns the bytes this rank's
    network interfaces sent and received during the transition (``run --count-links``). Raises
    :class:`~coded_shuffle.errors.IntegrityError` (after telling the workers) when repairs run out.
    """
    if planned is None:
        planned = scheme.plan(p_t, p_t1, dataset, strategy=opts.strategy, exact_bound=opts.exact_bound)
        plan_s = planned.seconds
    else:
        plan_s = 0.0
    encoded = scheme.encode(planned.plan, dataset, epoch=epoch, max_frame_bytes=opts.max_frame_bytes)
    ready = yield Gather("ready")
    if STOP in ready:
        yield Announce(END)
        return Stopped(tuple(k for k, post in enumerate(ready) if post == STOP))
    yield Announce(GO)
    link.sync()  # every rank starts the delivery together, so that its times are comparable
    t_start = time.perf_counter()
    pace = link.pace
    waited = pace.waited if pace is not None else 0.0
    control = link.control_bytes
    before = link.stats
    send_s = send(link, encoded)
    posts: list[Status] = yield Gather("decode")
    first = posts
    coded = link.stats - before
    tic = time.perf_counter()
    rejected, repairs, rounds = yield from _repair_rounds(
        link, scheme, dataset, posts, epoch=epoch, opts=opts
    )
    yield Announce(DONE)
    seconds = time.perf_counter() - t_start  # delivery, decoding and repairs; the check is timed apart
    repair_s = time.perf_counter() - tic
    total = link.stats - before
    tic = time.perf_counter()
    held: list[Holdings] = yield Gather("holdings")
    checked, ok = scheme.check(dataset, held, p_t1)
    check_s = time.perf_counter() - tic
    yield Announce(bool(ok))
    counts = [links(), *(h.links for h in held)] if links is not None else []
    return _report(
        planned, p_t.K, dataset, scheme, encoded, first, held,
        epoch=epoch, opts=opts, coded=coded, total=total, rejected=rejected, repairs=repairs,
        rounds=rounds, checked=checked, verified=bool(ok), seconds=seconds,
        control=link.control_bytes - control, counts=counts,
        timings={
            "plan": plan_s, "encode": encoded.encode_seconds, "send": send_s,
            "deliver": max(s.deliver_seconds for s in first), "decode": max(s.decode_seconds for s in first),
            "repair": repair_s, "check": check_s,
            "paced_wait": (pace.waited - waited) if pace is not None else 0.0,
        },
    )  # fmt: skip


def _report(
    planned: Planned,
    K: int,
    dataset: Dataset,
    scheme: Scheme,
    sent: Encoded,
    first: list[Status],
    held: list[Holdings],
    *,
    epoch: int,
    opts: MasterOptions,
    coded: LinkStats,
    total: LinkStats,
    rejected: int,
    repairs: int,
    rounds: int,
    checked: int,
    verified: bool,
    seconds: float,
    control: int,
    counts: list[Any],
    timings: dict[str, float],
) -> TransitionReport:
    """The :class:`TransitionReport` of one transition, from what the master sent and gathered."""
    digests = [h.digest for h in held]
    return TransitionReport(
        epoch=epoch,
        mode=scheme.name,
        K=K,
        N=dataset.N,
        record_bytes=dataset.record_bytes,
        strategy=opts.strategy,
        coded_symbols=planned.coded_symbols,
        uncoded_symbols=planned.uncoded_symbols,
        lower_bound=planned.lower_bound,
        lower_bound_exact=planned.lower_bound_exact,
        optimal=planned.coded_symbols == planned.lower_bound,
        planned_symbols=sent.planned_symbols,
        xor_symbols=sent.xor_symbols,
        lone_symbols=sent.lone_symbols,
        wire_symbols=int(total.symbols),
        wire_bytes=int(total.bytes),
        payload_bytes=int(sent.payload_bytes),
        header_bytes=int(sent.header_bytes),
        framing_overhead=float(sent.header_bytes / sent.payload_bytes) if sent.payload_bytes else 0.0,
        coded_bytes=planned.coded_bytes,
        uncoded_bytes=planned.uncoded_bytes,
        frames=int(sent.n_frames),
        frames_rejected=int(rejected),
        repairs=repairs,
        repair_bytes=int(total.bytes - coded.bytes + coded.resent),  # lost datagrams' bytes sent again too
        repair_rounds=rounds,
        records_checked=checked,
        verified=verified,
        seconds=seconds,
        timings=timings,
        seed=opts.seed,
        link_mbps=opts.link_mbps,
        control_bytes=int(control),
        exchange_bytes=sum(int(s.sent_bytes) for s in first),
        exchange_header_bytes=sum(int(s.sent_header_bytes) for s in first),
        max_sent_bytes=max((int(s.sent_bytes) for s in first), default=0),
        max_received_bytes=max((int(s.received_bytes) for s in first), default=0),
        download_bound_bytes=planned.download_bound_bytes,
        upload_bound_bytes=planned.upload_bound_bytes,
        split_uplink_bound=sent.split_uplink_bound,
        digests=None if any(d is None for d in digests) else [str(d) for d in digests],
        link_tx_bytes=[int(c[0]) for c in counts] if counts and None not in counts else None,
        link_rx_bytes=[int(c[1]) for c in counts] if counts and None not in counts else None,
    )


def _status(t: Taken, failed: np.ndarray, given: Given) -> Status:
    return Status(
        failed, t.rejected, int(t.result.decoded.size), t.deliver_seconds, t.decode_seconds,
        given.bytes, given.header_bytes, t.received_bytes, t.received_header_bytes,
    )  # fmt: skip


def worker_transition(
    link: Transport,
    scheme: Scheme,
    worker: int,
    cache: Cache,
    placements: tuple[Any, Any],
    *,
    epoch: int,
    checksums: np.ndarray,
    spare: np.ndarray | None = None,
    with_digest: bool = False,
    tamper: Tamper | None = None,
    links: Callable[[], tuple[int, int] | None] | None = None,
) -> Generator[Post, Any, WorkerResult | None]:
    """Worker ``worker``'s role in one transition; returns its result, or None when the job ends.

    ``spare`` is a buffer no longer needed (the cache of epoch ``t - 1``): the new records are
    written over it when it fits; ``with_digest`` adds a digest of its bytes to its holdings;
    ``tamper`` changes the frames it received (tests); ``links()`` as for the master. Raises
    :class:`~coded_shuffle.errors.IntegrityError` when the master abandons the transition.
    """
    need = scheme.need(placements[1], worker)  # distinct ids, increasing
    # Everything a worker can make ready is made before the barrier that starts the delivery: a
    # worker late into the broadcast holds the master back (its large messages wait for them all).
    out = scheme.prepare(cache, need, _spare_rows(spare, cache, int(need.size), int(cache.data.shape[1])))
    given = scheme.give(link, worker, cache, placements, epoch=epoch)  # what it sends its peers, if any
    variable = cache.lengths is not None
    word = yield Post(READY)
    if word == END:
        return None
    link.sync()
    taken = scheme.take(
        link, worker, cache, need, placements=placements, epoch=epoch, checksums=checksums,
        variable=variable, out=out, tamper=tamper,
    )  # fmt: skip
    new, failed = taken.result.cache, taken.result.failed
    word = yield Post(_status(taken, failed, given))
    while isinstance(word, Repair):
        if scheme.peer_repairs:  # this worker re-sends what it holds of the others' lacks
            scheme.reoffer(link, worker, cache, word, given, epoch=epoch)
            yield Post(OFFERED)  # the master's answer is COLLECT
        fix = scheme.retake(
            link, worker, cache, failed, word, given, epoch=epoch, checksums=checksums, variable=variable
        )
        good = np.setdiff1d(fix.result.cache.ids, fix.result.failed)
        if good.size:
            rows = fix.result.cache.rows(good)
            lengths = fix.result.cache.lengths
            part = None if lengths is None else lengths[rows]
            new = new.patched(Cache(ids=good, data=fix.result.cache.data[rows], lengths=part))
        failed = fix.result.failed
        word = yield Post(_status(fix, failed, Given()))
    if word == ABANDON:
        raise IntegrityError(
            f"Worker {worker}: {failed.size} record(s) of epoch {epoch} unverified after the repairs."
            if failed.size
            else f"Worker {worker}: epoch {epoch} abandoned, another worker's records stayed unverified."
        )
    held = Holdings(
        new.ids,
        new.checksums(),
        new.lengths,
        digest(new) if with_digest else None,
        links() if links is not None else None,
    )
    verdict = yield Post(held)
    return WorkerResult(new, int(taken.result.decoded.size), bool(verdict))


def worker_stop() -> Generator[Post, Any, None]:
    """A worker that stops early: it posts ``STOP`` where its next transition would start."""
    word = yield Post(STOP)
    if word != END:  # pragma: no cover - the master always ends the job on a STOP
        raise IntegrityError(f"The master answered a worker's stop with {word!r}, not {END!r}.")
