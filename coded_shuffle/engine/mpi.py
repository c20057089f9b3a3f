"""The MPI driver: the protocol's roles carried between ranks, with a bound on every wait.

Rank ``root`` runs the master's role (:func:`serve`), every other rank a worker's
(:func:`attend`), over an :class:`~coded_shuffle.transport.MPITransport`; in a job of peers
(no master: the workers' exchange) rank ``root`` carries both the master's role, for its
control rounds alone, and its own worker's (:func:`lead`). After the word ``GO`` the master's
driver meets the workers at a barrier (each worker's role does), so that the delivery's times
are comparable. A role's
:class:`~coded_shuffle.engine.protocol.Gather` becomes
:meth:`~coded_shuffle.transport.MPITransport.gather_posts`, its ``Announce``
:meth:`~coded_shuffle.transport.MPITransport.announce`, a worker's ``Post``
:meth:`~coded_shuffle.transport.MPITransport.post`.

Nothing waits forever:

- every control wait has a bound: the master waits ``timeout`` seconds for the workers' posts,
  and a rank that does not answer in time (stopped, frozen, cut off) ends the job with one line
  that names it (:class:`~coded_shuffle.errors.RankTimeout`). A worker waits twice as long for
  the master's word, which may come after one bounded step of the master and one bounded wait
  for the other workers: so a silent worker is named by the master, not the master by the
  workers that wait with it; and only the first worker names a silent master, the others
  waiting one timeout more (:func:`patience`);
- a :class:`Watchdog` thread bounds each step between two control messages (frames going out
  or coming in, planning, decoding) by the same ``timeout``, and ends the job if the process
  that launched it (``coded-shuffle run``, named by the environment variable
  :data:`LAUNCHER_ENV`) is gone, so that no rank outlives its launcher by more than a second or two;
- a job's start-up is bounded the same way: each of its steps (the sizes, the checksums, the
  first batches, the warm-up's setup) is a :func:`setup_step`, a control round that every rank
  must reach within the timeout (the leader names the ranks that do not; a rank waits twice as
  long for the leader's word, as in a transition), then the step's own collectives under the
  watchdog.

A job ends with ``MPI_Abort`` after that line, so that every rank stops within seconds.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

from .._progress import say
from ..errors import RankTimeout
from ..transport import ControlLink, mpi_abort
from .protocol import GO, Announce, Gather, step

__all__ = [
    "LAUNCHER_ENV", "Watchdog", "default_timeout", "serve", "attend", "lead", "end_job",
    "setup_step", "patience",
]  # fmt: skip

#: The environment variable that names the pid of the process that launched the job.
LAUNCHER_ENV = "CODED_SHUFFLE_LAUNCHER_PID"


def default_timeout(N: int, record_bytes: int) -> float:
    """The default bound on one wait: a minute, plus a second for every 20 MB of records.

    Examples
    --------
    >>> default_timeout(6000, 1024)
    60.0
    >>> default_timeout(10**7, 1000)
    560.0
    """
    return 60.0 + float(N * record_bytes // 20_000_000)


def end_job(prog: str, rank: int, message: str, abort: Callable[[int], Any] = mpi_abort) -> NoReturn:
    """Print ``prog: error: rank R: message`` on standard error, then abort the whole job.

    ``abort`` ends the job: ``MPI_Abort`` by default; a transport over ``torch.distributed``
    ends this process (its launcher, ``torchrun``, then stops the others).
    """
    say(f"{prog}: error: rank {rank}: {message}")
    # The line sits in the pipe to MPICH's proxy, which forwards it to mpiexec; an abort at once can
    # kill the proxy before it has read it (then the job ends saying nothing). A moment lets it read.
    time.sleep(_FORWARD_SECONDS)
    abort(1)
    os._exit(1)  # pragma: no cover - abort does not return


#: Seconds a rank that ends the job waits between its line and the abort (see :func:`end_job`).
_FORWARD_SECONDS = 0.25


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - someone else's process of that pid
        return True
    return True


class Watchdog:
    """A thread that ends the job when a step outlives its deadline, or the launcher is gone.

    :meth:`arm` starts a step that must end within ``timeout`` seconds, :meth:`disarm` ends it;
    :func:`serve` and :func:`attend` bound their control waits by the same ``timeout``, and end
    the job with a line that starts with ``prog``.
    The thread wakes every ``period`` seconds; it never calls MPI unless it ends the job.
    """

    @classmethod
    def for_job(
        cls,
        timeout: float | None,
        N: int,
        record_bytes: int,
        *,
        rank: int,
        prog: str,
        abort: Callable[[int], Any] = mpi_abort,
    ) -> Watchdog:
        """The watchdog of a job of ``N`` records: ``timeout``, or :func:`default_timeout` if None
        (:meth:`for_records` sets it again once the records are known)."""
        chosen = default_timeout(N, record_bytes) if timeout is None else float(timeout)
        return cls(timeout=chosen, rank=rank, prog=prog, abort=abort, fixed=timeout is not None)

    def for_records(self, N: int, record_bytes: int) -> None:
        """The job's records are ``N`` of ``record_bytes`` bytes: without a timeout given, the
        bound is now :func:`default_timeout` of them (a job's first steps run before every rank
        knows its records)."""
        if not self.fixed:
            self.timeout = default_timeout(N, record_bytes)

    def __init__(
        self,
        *,
        timeout: float,
        rank: int,
        prog: str,
        period: float = 0.5,
        abort: Callable[[int], Any] = mpi_abort,
        fixed: bool = True,
    ) -> None:
        self.timeout = float(timeout)
        #: Whether the timeout was given (:meth:`for_records` then leaves it).
        self.fixed: bool = fixed
        self.rank = rank
        self.prog = prog
        self.period = period
        #: How the job ends: ``MPI_Abort``, or the transport's own ``abort``.
        self.abort = abort
        self._stage: str | None = None
        self._deadline = float("inf")
        self._stop = threading.Event()
        pid = os.environ.get(LAUNCHER_ENV, "")
        self._launcher = int(pid) if pid.isdigit() else None
        self._thread = threading.Thread(target=self._watch, name="coded_shuffle-watchdog", daemon=True)
        self._thread.start()

    def arm(self, stage: str) -> None:
        """Start a step named ``stage`` that must end within the timeout."""
        self._stage = stage
        self._deadline = time.monotonic() + self.timeout

    def disarm(self) -> None:
        """The step has ended."""
        self._stage = None
        self._deadline = float("inf")

    @contextlib.contextmanager
    def step(self, stage: str) -> Iterator[None]:
        """The block is a step named ``stage`` that must end within the timeout."""
        self.arm(stage)
        try:
            yield
        finally:
            self.disarm()

    def close(self) -> None:
        """Stop watching (the thread ends at its next wake-up)."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.period):
            if self._launcher is not None and not _alive(self._launcher):
                gone = f"the launcher (pid {self._launcher}) is gone; ending the job"
                end_job(self.prog, self.rank, gone, self.abort)
            stage = self._stage
            if stage is not None and time.monotonic() > self._deadline:
                late = f"no progress within {self.timeout:g} s while {stage}"
                end_job(self.prog, self.rank, late, self.abort)


def patience(link: ControlLink, timeout: float) -> float:
    """Seconds a rank waits for the leader's word: twice ``timeout`` (the word may come after one
    bounded step of the leader and one bounded wait for the others) on the first rank that posts,
    three times on the others, so that a silent leader is named by one rank, in one line.

    Examples
    --------
    >>> from types import SimpleNamespace as L
    >>> [patience(L(peers=False, root=0, rank=r), 3.0) for r in (1, 2)]
    [6.0, 9.0]
    >>> [patience(L(peers=True, root=0, rank=r), 3.0) for r in (1, 2)]
    [6.0, 9.0]
    """
    first = 1 if link.root == 0 else 0
    return (2.0 if link.rank == first else 3.0) * timeout


@contextlib.contextmanager
def setup_step(link: ControlLink, watchdog: Watchdog, stage: str) -> Iterator[None]:
    """Collective: the block is one step of a job's start-up, named ``stage``, with a bound on every wait.

    Every rank first meets the leader in a control round: the leader waits ``timeout`` seconds
    for every other rank's post, and a rank that does not post in time (frozen, stopped, cut
    off) ends the job with one line that names it
    (``rank 0: no answer from worker 1 (rank 2) within 3 s, at the 'checksums' round``); the
    others wait twice as long for the leader's word (:func:`patience`), so a silent rank is named
    by the leader, and a silent leader by the first of the others. The block (the step's
    collectives, which start once every rank is known to be there) then runs under ``watchdog``,
    bounded by the same timeout.
    """
    timeout, prog = watchdog.timeout, watchdog.prog
    try:
        if link.is_leader:
            link.gather_posts(timeout=timeout, stage=stage)
            link.announce(stage)
        else:
            link.post(stage, timeout=patience(link, timeout), stage=stage)
    except RankTimeout as exc:
        end_job(prog, link.rank, str(exc), watchdog.abort)
    with watchdog.step(stage):
        yield


def posts_round(link: ControlLink, watchdog: Watchdog, mine: object, stage: str) -> list[Any]:
    """Collective: every worker posts ``mine`` to the leader in a control round named ``stage``,
    bounded as a start-up step (:func:`setup_step`: a rank that does not post in time ends the job
    with one line that names it); returns the leader's list of the posts (empty elsewhere)."""
    try:
        if link.is_leader:
            got = link.gather_posts(timeout=watchdog.timeout, stage=stage)
            link.announce(stage)
            return list(got)
        link.post(mine, timeout=patience(link, watchdog.timeout), stage=stage)
        return []
    except RankTimeout as exc:
        end_job(watchdog.prog, link.rank, str(exc), watchdog.abort)


def _step(role: Generator[Any, Any, Any], value: Any, watchdog: Watchdog, stage: str) -> tuple[bool, Any]:
    """:func:`~coded_shuffle.engine.protocol.step`, bounded by ``watchdog``."""
    watchdog.arm(stage)
    try:
        return step(role, value)
    finally:
        watchdog.disarm()


def serve(link: ControlLink, role: Generator[Any, Any, Any], *, watchdog: Watchdog) -> Any:
    """Master: carry ``role`` (a master role of the protocol) to its end; return its value."""
    timeout, prog = watchdog.timeout, watchdog.prog
    running, msg = _step(role, None, watchdog, "planning and sending")
    while running:
        if isinstance(msg, Gather):
            try:
                posts = link.gather_posts(timeout=timeout, stage=msg.stage)
            except RankTimeout as exc:
                end_job(prog, link.rank, str(exc), watchdog.abort)
            running, msg = _step(role, posts, watchdog, f"sending after the {msg.stage!r} round")
        else:
            assert isinstance(msg, Announce)
            link.announce(msg.word)
            if msg.word == GO:  # every rank starts the delivery together (the workers' roles meet it)
                link.sync()
            running, msg = _step(role, None, watchdog, "sending")
    return msg


def attend(link: ControlLink, role: Generator[Any, Any, Any], *, watchdog: Watchdog) -> Any:
    """Worker: carry ``role`` (a worker role of the protocol) to its end; return its value."""
    timeout, prog = watchdog.timeout, watchdog.prog
    running, msg = _step(role, None, watchdog, "starting the transition")
    while running:
        try:
            stage = msg.value if isinstance(msg.value, str) else type(msg.value).__name__.lower()
            word = link.post(msg.value, timeout=patience(link, timeout), stage=stage)
        except RankTimeout as exc:
            end_job(prog, link.rank, str(exc), watchdog.abort)
        running, msg = _step(role, word, watchdog, f"receiving and decoding after the word {word!r}")
    return msg


def lead(
    link: ControlLink,
    master: Generator[Any, Any, Any],
    worker: Generator[Any, Any, Any],
    *,
    watchdog: Watchdog,
) -> tuple[Any, Any]:
    """Peers' leader: carry the master's role (its control rounds: among peers it sends no frame)
    and this rank's worker's role, over the same link.

    The master's :class:`~coded_shuffle.engine.protocol.Gather` takes the other workers' posts
    from the link and this rank's from its worker role; each word goes to the others, then to
    this rank's worker role (which meets the others at the barrier after ``GO``). Returns both
    roles' values.
    """
    timeout, prog = watchdog.timeout, watchdog.prog
    running, msg = _step(master, None, watchdog, "planning")
    alive, mine = _step(worker, None, watchdog, "starting the transition")
    while running:
        if isinstance(msg, Gather):
            try:
                posts = link.gather_posts(timeout=timeout, stage=msg.stage)
            except RankTimeout as exc:
                end_job(prog, link.rank, str(exc), watchdog.abort)
            if not alive:  # pragma: no cover - a worker role posts until the last word
                raise RankTimeout(f"the leader's own worker ended before the {msg.stage!r} round")
            assert link.worker is not None
            posts[link.worker] = mine.value
            running, msg = _step(master, posts, watchdog, f"after the {msg.stage!r} round")
        else:
            assert isinstance(msg, Announce)
            word = msg.word
            link.announce(word)
            running, msg = _step(master, None, watchdog, "announcing")
            alive, mine = _step(worker, word, watchdog, f"receiving and decoding after the word {word!r}")
    return msg, mine
