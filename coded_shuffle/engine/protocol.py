"""The transition protocol: one master role and one worker role, step by step, for every driver.

One transition ``t -> t + 1`` is a fixed exchange of small control messages between the master
and the ``K`` workers, around the frames that the scheme (:mod:`coded_shuffle.engine.schemes`)
puts on the transport:

==========  ======================================  ===========================================
round       each worker posts                       then the master announces
==========  ======================================  ===========================================
ready       ``READY``, or ``STOP`` (it stops)       ``GO`` (a barrier, the frames), or ``END``
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
the yields, and after the word ``GO`` meets the workers at the link's barrier (``sync``), which
each worker's role joins: :func:`coded_shuffle.engine.session.drive` steps all roles in one process,
:mod:`coded_shuffle.engine.mpi` carries them between ranks with a deadline on every wait.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..codec import DEFAULT_MAX_FRAME_BYTES, Cache, Dataset
from ..errors import IntegrityError
from ..matrix import shuffle_matrix
from ..network import Network, predict_bytes
from ..orders import Placement
from ..transport import Transport
from .report import Exchange, Job, OnNetwork, Split, TransitionReport, Units, Wire, network_times, on_network
from .schedule import exchange_rack_loads, storage_times
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


@dataclass(frozen=True)
class MasterOptions:
    """What the master's role needs besides the shuffle: how to plan, send and report.

    For the report: ``seed`` and ``link_mbps`` as given; ``records``, the ``(N, record_bytes)``
    of the records when the units delivered are pieces of them (None: the dataset delivered
    holds the records); ``network``, a network to give the transition's times on
    (:func:`~coded_shuffle.engine.report.on_network`), ``measured`` when the transition runs on
    it (``run``: the report then compares its seconds with the bound).
    """

    strategy: str = "greedy"
    exact_bound: bool | None = None
    max_repair_rounds: int = 3
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES
    seed: int | None = None
    link_mbps: float | None = None
    records: tuple[int, int] | None = None
    network: Network | None = None
    measured: bool = False


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
    baseline: Callable[[int], float | None] | None = None,
) -> Generator[Gather | Announce, Any, TransitionReport | Stopped]:
    """The master's role in one transition; returns its report, or :class:`Stopped`.

    ``p_t`` and ``p_t1`` are what the scheme plans from: two placements, or two piece placements
    (:class:`~coded_shuffle.storage.PiecePlacement`) for a
    :class:`~coded_shuffle.engine.schemes.StorageScheme`. ``planned`` is
    the scheme's plan of this shuffle when the caller has it already (several schemes delivering
    the same shuffle). ``baseline(n)``, if given, times one plain broadcast of ``n`` bytes after
    the verdict (the delivery's ``wire_bytes``; the workers take part: ``--bcast-baseline``). The
    report is made once, at the end, from what the role gathered and ``opts`` (the records'
    sizes, the network). Raises :class:`~coded_shuffle.errors.IntegrityError` (after telling the workers)
    when repairs run out.
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
    yield Announce(GO)  # then every rank meets at a barrier (the driver's), so that the times compare
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
    bcast = (int(total.bytes), baseline(int(total.bytes))) if baseline is not None else None
    paced_wait = (pace.waited - waited) if pace is not None else 0.0
    timings = _timings(encoded, first, plan=plan_s, send=send_s, repair=repair_s, check=check_s,
                       paced_wait=paced_wait)  # fmt: skip
    N, B = opts.records if opts.records is not None else (dataset.N, dataset.record_bytes)
    units, records_checked = scheme.holding.report_units(B, checked)
    resent = int(total.bytes - coded.bytes + coded.resent)  # lost datagrams' bytes sent again too
    wire = _wire(encoded, first, rejected=rejected, repair_bytes=resent,
                 control_bytes=int(link.control_bytes - control), link_mbps=opts.link_mbps)  # fmt: skip
    return TransitionReport(
        epoch=epoch, mode=scheme.name, K=p_t.K, N=N, record_bytes=B,
        strategy=opts.strategy, coded_symbols=planned.coded_symbols, uncoded_symbols=planned.uncoded_symbols,
        coded_bytes=planned.coded_bytes, uncoded_bytes=planned.uncoded_bytes,
        planned_symbols=encoded.planned_symbols, wire_symbols=int(total.symbols), wire_bytes=int(total.bytes),
        lower_bound=planned.lower_bound, lower_bound_exact=planned.lower_bound_exact,
        repairs=repairs, repair_rounds=rounds, records_checked=records_checked, verified=bool(ok),
        seconds=seconds, timings=timings, seed=opts.seed,
        download_bound_bytes=planned.download_bound_bytes, upload_bound_bytes=planned.upload_bound_bytes,
        wire=wire, units=units, exchange=_exchange(first),
        split=None if encoded.split_uplink_bound is None else Split(encoded.split_uplink_bound),
        on_network=_on_network(opts, planned, p_t, p_t1, record_bytes=B, seconds=seconds, units=units,
                               sizes=dataset.lengths, scheme=scheme, width=dataset.record_bytes),
        job=_job(held, bcast),
    )  # fmt: skip


def _timings(encoded: Encoded, first: list[Status], **seconds: float) -> dict[str, float]:
    """The seconds of each step of a transition, in the report's order: ``seconds`` (``plan``,
    ``send``, ``repair``, ``check``, ``paced_wait``) with the encoding's, and the slowest worker's
    delivery and decoding (their first posts ``first``)."""
    return {
        "plan": seconds["plan"], "encode": encoded.encode_seconds, "send": seconds["send"],
        "deliver": max(s.deliver_seconds for s in first), "decode": max(s.decode_seconds for s in first),
        "repair": seconds["repair"], "check": seconds["check"], "paced_wait": seconds["paced_wait"],
    }  # fmt: skip


def _wire(
    encoded: Encoded, first: list[Status], *, rejected: int, repair_bytes: int, control_bytes: int,
    link_mbps: float | None,
) -> Wire:  # fmt: skip
    """The frames on the wire of a transition: the delivery ``encoded``, the workers' first posts
    ``first`` (what each received), the frames rejected, the bytes re-sent and the control bytes."""
    return Wire(
        xor_symbols=encoded.xor_symbols, lone_symbols=encoded.lone_symbols,
        payload_bytes=int(encoded.payload_bytes), header_bytes=int(encoded.header_bytes),
        frames=int(encoded.n_frames), frames_rejected=int(rejected), repair_bytes=repair_bytes,
        max_received_bytes=max((int(s.received_bytes) for s in first), default=0),
        control_bytes=control_bytes, link_mbps=link_mbps,
    )  # fmt: skip


def _on_network(
    opts: MasterOptions, planned: Planned, p_t: Placement, p_t1: Placement, *, record_bytes: int,
    seconds: float, units: Units, sizes: np.ndarray | None, scheme: Scheme, width: int,
) -> OnNetwork | None:  # fmt: skip
    """The transition's times on ``opts.network``, if one is given: of one batch of whole records,
    every link's load in bytes where their ``sizes`` differ
    (:func:`~coded_shuffle.network.predict_bytes`), or of a storage's pieces (``width`` bytes, or
    the scheme's lengths, :func:`~.schedule.storage_times`, on racks too); none of sub-packets.
    The exchange on racks: what its senders put on each link beside
    (:func:`~.schedule.exchange_rack_loads`)."""
    net = opts.network
    if net is None or (units.storage == 1 and units.subpackets != 1):
        return None
    if units.storage > 1:
        times = storage_times(scheme, p_t, p_t1, network=net, width=width,
                              coded_bytes=planned.coded_bytes, strategy=opts.strategy)  # fmt: skip
        on = network_times(times, net, seconds=seconds, measured=opts.measured)
    elif sizes is not None:
        times = predict_bytes(p_t, p_t1, sizes=sizes, network=net, strategy=opts.strategy)
        on = network_times(times, net, seconds=seconds, measured=opts.measured)
    else:
        on = on_network(
            shuffle_matrix(p_t, p_t1), net, record_bytes=record_bytes, coded_bytes=planned.coded_bytes,
            lower_bound=planned.lower_bound, seconds=seconds, measured=opts.measured, units=units,
        )  # fmt: skip
    if net.racks is None or scheme.name != "exchange":
        return on
    loads = exchange_rack_loads(scheme, p_t, p_t1, network=net, width=width, sizes=sizes)
    return dataclasses.replace(on, rack_loads=loads)


def _exchange(first: list[Status]) -> Exchange | None:
    """What the workers sent each other in the delivery (their posts ``first``), if anything."""
    sent = [(int(s.sent_bytes), int(s.sent_header_bytes)) for s in first]
    if not any(b or h for b, h in sent):
        return None
    return Exchange(sum(b for b, _ in sent), sum(h for _, h in sent), max(b for b, _ in sent))


def _job(held: list[Holdings], bcast: tuple[int, float | None] | None) -> Job | None:
    """The MPI program's figures: the workers' digests, the baseline (the links' byte counts are
    read beside the protocol: :class:`~coded_shuffle.engine.session.Session`)."""
    digests = [h.digest for h in held]
    job = Job(
        digests=None if any(d is None for d in digests) else tuple(str(d) for d in digests),
        bcast_bytes=None if bcast is None else bcast[0],
        bcast_seconds=None if bcast is None else bcast[1],
    )
    return None if job == Job() else job


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
    spare: np.ndarray | Cache | None = None,
    sizes: np.ndarray | None = None,
    with_digest: bool = False,
    tamper: Tamper | None = None,
) -> Generator[Post, Any, WorkerResult | None]:
    """Worker ``worker``'s role in one transition; returns its result, or None when the job ends.

    ``spare`` is a buffer no longer needed (the cache of epoch ``t - 1``, or its rows): the new
    records are written over it when it fits (of records of many sizes, each row zeroed only up
    to the old record's length when ``spare`` is the cache; packed, when it holds the new
    records' bytes, counted from ``sizes``, every record's length); ``with_digest`` adds a digest of its
    bytes to its holdings; ``tamper`` changes the frames it received (tests). Raises
    :class:`~coded_shuffle.errors.IntegrityError` when the master abandons the transition.
    """
    need = scheme.need(placements[1], worker)  # distinct ids, increasing
    # Everything a worker can make ready is made before the barrier that starts the delivery: a
    # worker late into the broadcast holds the master back (its large messages wait for them all).
    rows, zeroed = _spare_rows(spare, cache, need, sizes=sizes, packs=scheme.packs)
    out = scheme.prepare(cache, need, rows)
    zeroed = zeroed if out is rows else None
    given = scheme.give(link, worker, cache, placements, epoch=epoch)  # what it sends its peers, if any
    variable = cache.lengths is not None
    word = yield Post(READY)
    if word == END:
        return None
    link.sync()
    taken = scheme.take(
        link, worker, cache, need, placements=placements, epoch=epoch, checksums=checksums,
        variable=variable, out=out, out_lengths=zeroed, tamper=tamper,
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
    held = Holdings(new.ids, new.checksums(), new.lengths, digest(new) if with_digest else None)
    verdict = yield Post(held)
    return WorkerResult(new, int(taken.result.decoded.size), bool(verdict))


def worker_stop() -> Generator[Post, Any, None]:
    """A worker that stops early: it posts ``STOP`` where its next transition would start."""
    word = yield Post(STOP)
    if word != END:  # pragma: no cover - the master always ends the job on a STOP
        raise IntegrityError(f"The master answered a worker's stop with {word!r}, not {END!r}.")
