"""Transports: how frames go from the master to the workers, behind one small interface.

A transport models the shared link of the setting: the master **broadcasts** each frame
(:doc:`docs/wire-format.md`) to every worker, and it counts what leaves the master, which is the
honest cost of a shared link. The interface, :class:`Transport`, is six members:

``K``
    number of workers.
``send(frames)``
    master side: broadcast a sequence of frames (``uint8`` buffers) to all workers.
``send_to(frames)``
    master side: send worker ``k`` only the frames ``frames[k]`` (unicast, the uncoded scheme).
``receive(worker)``
    worker side: return, in order, every frame sent since that worker's last ``receive``.
``sync()``
    every party waits for the others (a barrier; nothing to do in one process).
``stats``
    a :class:`LinkStats` of frames, symbols and bytes that left the master so far.

Frames are opaque bytes to a transport: it reads only ``n_symbols`` from the header to count
symbols, and it must deliver every frame whole and in order (a frame it cannot deliver raises
:class:`~coded_shuffle.errors.TransportError`). Corruption is the codec's business: a worker
rejects a bad frame or record and the engine repairs it.

:class:`InProcessTransport` runs everything in one process with zero copies: every worker
receives the very buffer the master sent (read-only). A ``fault`` hook can corrupt or drop what
a given worker receives, to test the repair path.

:class:`MPITransport` carries the same frames between processes: rank 0 is the master, rank
``k + 1`` is worker ``k``. :meth:`MPITransport.send` broadcasts (``MPI_Bcast``), and
:meth:`MPITransport.send_to` sends each worker its own frames point to point (the uncoded
baseline); both count what leaves the master. :meth:`MPITransport.exchange` is the alternative a
user would reach for without coding: the workers send each other the records that move, directly
(``MPI_Alltoallv``), the master taking no part. It is the only place in the package that imports
``mpi4py``, lazily (:func:`mpi_world`), so this module imports without it. Besides frames it
carries the transition protocol's control messages (:meth:`MPITransport.gather_posts`,
:meth:`MPITransport.announce`, :meth:`MPITransport.post`), each wait bounded by a timeout, and
the setup of a job (:meth:`MPITransport.share`, :meth:`MPITransport.send_rows`).

:class:`TokenBucket` paces a link to a known speed: a transport given one waits, before each
piece of a frame leaves the master, until the bucket holds that many bytes, so that the wall time
of a delivery follows the bytes the master emits even when all processes share one machine.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, runtime_checkable

import numpy as np

from ._checks import check_int
from .codec import FRAME_HEADER_BYTES
from .codec._common import _aligned_empty
from .errors import RankTimeout, TransportError

__all__ = [
    "LinkStats",
    "Transport",
    "TokenBucket",
    "InProcessTransport",
    "MPITransport",
    "TorchTransport",
    "torch_world",
    "frame_symbols",
    "mpi_world",
    "mpi_exit",
    "mpi_refuse",
    "mpi_abort",
]

#: ``fault(worker, frame_number, frame)`` returns what ``worker`` receives instead, or None to drop it.
Fault = Callable[[int, int, np.ndarray], "np.ndarray | None"]


@dataclass(frozen=True)
class LinkStats:
    """What left the master on a link.

    Attributes
    ----------
    frames : int
        Frames broadcast.
    symbols : int
        Symbols in those frames (from their headers).
    bytes : int
        Bytes broadcast (each frame counted once, however many workers receive it).

    Examples
    --------
    >>> LinkStats(1, 3, 100).bytes
    100
    """

    frames: int = 0
    symbols: int = 0
    bytes: int = 0

    def __sub__(self, other: LinkStats) -> LinkStats:
        return LinkStats(self.frames - other.frames, self.symbols - other.symbols, self.bytes - other.bytes)


@runtime_checkable
class Transport(Protocol):
    """The interface every transport provides (see the module docstring)."""

    K: int

    def send(self, frames: Sequence[np.ndarray]) -> None:
        """Broadcast ``frames`` from the master to every worker."""

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Send worker ``k`` only the frames ``frames[k]`` (the uncoded scheme's unicast)."""

    def receive(self, worker: int) -> list[np.ndarray]:
        """Return the frames sent to ``worker`` since its last call, in order."""

    def sync(self) -> None:
        """Wait until master and workers are all at this point (before a delivery is timed)."""

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far."""


def frame_symbols(frame: np.ndarray) -> int:
    """Return the ``n_symbols`` field of a frame header (0 if the frame is too short).

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> frame_symbols(encode_plan_arrays(load_dataset(np.eye(3, dtype=np.uint8)), [0, 1], [2, -1], epoch=0))
    2
    """
    if frame.shape[0] < FRAME_HEADER_BYTES:
        return 0
    return int.from_bytes(frame[16:20].tobytes(), "little")


def _as_frame(frame: object, q: int) -> np.ndarray:
    if isinstance(frame, np.ndarray):
        if frame.dtype != np.uint8 or frame.ndim != 1:
            raise TypeError(
                f"Argument 'frames' must hold 1-D uint8 arrays, not {frame.dtype} of {frame.ndim}-D at {q}."
            )
        arr = frame
    elif isinstance(frame, (bytes, bytearray, memoryview)):
        arr = np.frombuffer(frame, dtype=np.uint8)
    else:
        raise TypeError(f"Argument 'frames' must hold byte buffers, not {type(frame).__name__} at {q}.")
    out = arr.view()
    out.flags.writeable = False
    return out


def _unicast(frames: object, K: int) -> list[tuple[int, np.ndarray]]:
    """``(worker, frame)`` pairs of a ``send_to`` argument, in worker order, each frame checked."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"Argument 'frames' must map workers to frames, not {type(frames).__name__}.")
    out: list[tuple[int, np.ndarray]] = []
    for k, fs in sorted(frames.items()):
        k = check_int(k, "worker", minimum=0)
        if k >= K:
            raise ValueError(f"Argument 'frames' names worker {k}, but K = {K}.")
        out += [(k, _as_frame(f, q)) for q, f in enumerate(fs)]
    return out


def _counted(stats: LinkStats, frames: Sequence[np.ndarray]) -> LinkStats:
    """``stats`` with ``frames`` added (their symbols read from the headers)."""
    return LinkStats(
        stats.frames + len(frames),
        stats.symbols + sum(frame_symbols(f) for f in frames),
        stats.bytes + sum(int(f.shape[0]) for f in frames),
    )


class TokenBucket:
    """Pace a link at ``rate`` bytes a second, allowing bursts of ``burst`` bytes.

    The bucket fills at ``rate`` bytes a second up to ``burst`` bytes (it starts full).
    :meth:`consume` ``(n)`` takes ``n`` bytes out, first waiting as long as it takes to refill what
    is missing, so that over a long run no more than ``burst + rate * elapsed`` bytes go out. A
    request larger than ``burst`` is allowed: it waits for all its bytes. Any link can use it: the
    sender calls :meth:`consume` before each piece leaves.

    Parameters
    ----------
    rate : float
        Bytes a second (``mbps * 1e6 / 8`` for a link of ``mbps`` megabits a second).
    burst : int, optional
        Depth of the bucket in bytes (default: 10 ms at ``rate``, at least 64 KiB).
    clock, sleep : callable, optional
        Time source and wait, for tests (default :func:`time.perf_counter` and :func:`time.sleep`).

    Examples
    --------
    >>> now = [0.0]
    >>> bucket = TokenBucket(1000, burst=100, clock=lambda: now[0], sleep=lambda s: None)
    >>> bucket.consume(100), bucket.consume(500)
    (0.0, 0.5)
    """

    def __init__(
        self,
        rate: float,
        *,
        burst: int | None = None,
        clock: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError(f"Argument 'rate' must be a number, not {type(rate).__name__}.")
        if not rate > 0 or rate == float("inf"):
            raise ValueError(f"Argument 'rate' must be a positive finite number of bytes/s, not {rate}.")
        self.rate = float(rate)
        if burst is None:
            burst = max(1 << 16, int(self.rate / 100))
        self.burst = check_int(burst, "burst", minimum=1)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(self.burst)
        self._last = clock()
        self.waited = 0.0

    @classmethod
    def from_mbps(cls, mbps: float, **kwargs: Any) -> TokenBucket:
        """Return a bucket for a link of ``mbps`` megabits (``10**6`` bits) a second.

        Examples
        --------
        >>> TokenBucket.from_mbps(200).rate
        25000000.0
        """
        if isinstance(mbps, bool) or not isinstance(mbps, (int, float)) or not mbps > 0:
            raise ValueError(f"Argument 'mbps' must be a positive number, not {mbps!r}.")
        return cls(float(mbps) * 1e6 / 8, **kwargs)

    def consume(self, n: int) -> float:
        """Wait until ``n`` bytes may leave, take them, and return the seconds waited."""
        n = check_int(n, "n", minimum=0)
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate)
        self._last = now
        self._tokens -= n
        if self._tokens >= 0:
            return 0.0
        wait = -self._tokens / self.rate
        self._sleep(wait)
        # The bytes leave at now + wait; a late wake-up is credited to the next request.
        self._tokens = 0.0
        self._last = now + wait
        self.waited += wait
        return wait


class InProcessTransport:
    """A broadcast link between a master and ``K`` workers in one process.

    Parameters
    ----------
    K : int
        Number of workers.
    fault : callable, optional
        ``fault(worker, frame_number, frame) -> frame or None``: what ``worker`` receives in place
        of frame number ``frame_number`` (counted from 0 over the link's life); ``None`` drops it.
        Meant for tests of the repair path; it must not modify ``frame`` in place.
    pace : TokenBucket, optional
        Pace the link: :meth:`send` waits until the bucket lets every byte of the frames leave.

    Examples
    --------
    >>> import numpy as np
    >>> link = InProcessTransport(2)
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> frame = encode_plan_arrays(load_dataset(np.eye(2, dtype=np.uint8)), [0], [1], epoch=1)
    >>> link.send([frame])
    >>> [len(link.receive(k)) for k in range(2)], link.receive(0)
    ([1, 1], [])
    >>> link.stats
    LinkStats(frames=1, symbols=1, bytes=58)
    """

    def __init__(self, K: int, *, fault: Fault | None = None, pace: TokenBucket | None = None) -> None:
        self.K = check_int(K, "K", minimum=1)
        if fault is not None and not callable(fault):
            raise TypeError(f"Argument 'fault' must be callable or None, not {type(fault).__name__}.")
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        self._fault = fault
        self._pace = pace
        self._log: list[np.ndarray] = []
        self._dest: list[int] = []  # -1: every worker, else the one worker a frame is for
        self._next = [0] * self.K
        self._stats = LinkStats()

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far."""
        return self._stats

    def send(self, frames: Sequence[np.ndarray]) -> None:
        """Broadcast ``frames`` (a sequence of ``uint8`` buffers) to every worker."""
        if isinstance(frames, (np.ndarray, bytes, bytearray, memoryview)) or not isinstance(frames, Sequence):
            raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
        checked = [_as_frame(f, q) for q, f in enumerate(frames)]
        self._append(checked, [-1] * len(checked))

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Send worker ``k`` only the frames ``frames[k]`` (unicast); each byte is counted once."""
        order = _unicast(frames, self.K)
        self._append([f for _, f in order], [k for k, _ in order])

    def _append(self, checked: list[np.ndarray], dest: list[int]) -> None:
        if self._pace is not None:
            for f in checked:
                self._pace.consume(int(f.shape[0]))
        self._log.extend(checked)
        self._dest.extend(dest)
        self._stats = _counted(self._stats, checked)
        self._trim()

    def sync(self) -> None:
        """Every party at the same point: nothing to wait for in one process."""

    def receive(self, worker: int) -> list[np.ndarray]:
        """Return every frame sent since ``worker``'s last ``receive``, in order."""
        worker = check_int(worker, "worker", minimum=0)
        if worker >= self.K:
            raise ValueError(f"Argument 'worker' must be less than K = {self.K}, not {worker}.")
        first = self._next[worker]
        base = self._stats.frames - len(self._log)
        if first < base:
            raise TransportError(f"Worker {worker}: frames {first}..{base - 1} were lost by the link.")
        out: list[np.ndarray] = []
        for q in range(first, self._stats.frames):
            if self._dest[q - base] not in (-1, worker):
                continue
            frame = self._log[q - base]
            if self._fault is not None:
                got = self._fault(worker, q, frame)
                if got is None:
                    continue
                frame = _as_frame(got, q)
            out.append(frame)
        self._next[worker] = self._stats.frames
        self._trim()
        return out

    def _trim(self) -> None:
        """Forget the frames every worker has received."""
        base = self._stats.frames - len(self._log)
        drop = min(self._next) - base
        if drop > 0:
            del self._log[:drop]
            del self._dest[:drop]


# --------------------------------------------------------------------------- MPI

#: Control message kinds sent ahead of the frames of one :meth:`MPITransport.send` or ``send_to``.
_BCAST, _UNICAST = 1, 2
#: Tag of point-to-point frame pieces, and of the rows of each worker's first batch.
_TAG, _INIT_TAG = 7, 11
#: Tags of the protocol's control messages: a worker's post, the master's word.
_POST, _WORD = 21, 22
#: Words of the fixed control message; the sizes of up to ``_INLINE_FRAMES`` frames travel in it.
_CONTROL_WORDS = 64
_INLINE_FRAMES = (_CONTROL_WORDS - 3) // 2


def mpi_world() -> Any:
    """Return ``MPI.COMM_WORLD``, initializing MPI on the first call.

    The package's only import of ``mpi4py``: programs call it once their environment (MPICH's
    settings) is in place, since importing ``mpi4py.MPI`` initializes MPI.
    """
    from mpi4py import MPI

    return MPI.COMM_WORLD


def mpi_exit(status: int, *, status_file: str | None = None) -> NoReturn:
    """End this rank with ``status``: flush, finalize MPI, exit.

    For an end every rank reaches with the same status (bad input, a failed check), where an
    exception or a non-zero ``sys.exit`` under ``python -m mpi4py`` aborts the job
    (``MPI_Abort``) and MPICH reports the abort. When ranks exit with a non-zero status, hydra
    (MPICH's ``mpiexec``) ends those still running, and its own status is then 9 at times instead
    of theirs. With ``status_file``, rank 0 writes ``status`` there and every rank exits with 0,
    so the launcher (``coded-shuffle run``) reads the job's status without that race.
    """
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    if status_file is not None and MPI.COMM_WORLD.Get_rank() == 0:
        with open(status_file, "w", encoding="ascii") as f:
            f.write(f"{status}\n")
    MPI.Finalize()
    os._exit(0 if status_file is not None else status)


def mpi_refuse(message: str, *, status_file: str | None = None) -> NoReturn:
    """End every rank for bad input: rank 0 prints ``message``, then all exit with status 2.

    Every rank reaches this with the same arguments; the others wait (``MPI_Barrier``) until rank
    0 has printed, or one rank's exit could abort the job before the message is out.
    """
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        print(message, file=sys.stderr, flush=True)
    MPI.COMM_WORLD.Barrier()
    mpi_exit(2, status_file=status_file)


def mpi_abort(status: int) -> NoReturn:
    """End the whole job now, from any rank and any thread: ``MPI_Abort`` on ``COMM_WORLD``."""
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(status)
    os._exit(status)  # pragma: no cover - Abort does not return


def _poll(ready: Callable[[], bool], deadline: float) -> bool:
    """Call ``ready()`` until it is true (True) or ``deadline`` passes (False), sleeping between calls.

    The sleeps grow from 50 to 250 microseconds, so that a waiting rank leaves its core to the
    ranks that compute, and a quick answer is still seen at once.
    """
    pause = 5e-5
    while not ready():
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(2.5e-4, pause * 2)
    return True


class MPITransport:
    """The shared link over MPI: rank ``root`` is the master, the other ranks the ``K`` workers.

    Worker ``k`` is the ``k``-th rank other than ``root`` (rank ``k + 1`` when ``root = 0``).
    Every call on the master is matched by one :meth:`receive` on every worker, in order; they
    are collective over the communicator. Before the frames the master broadcasts a small control
    message (kind, number of frames, piece size, then each frame's size and destination), counted
    apart in :attr:`control_bytes` (512 bytes a delivery of up to 30 frames): :attr:`stats`
    counts frames only, each once, as on a shared link.

    Frames travel whole or in pieces of ``piece_bytes`` (``MPI_Bcast`` of slices of one buffer),
    never one message per record. With ``pace``, the master waits on the bucket before each piece,
    so pieces are kept small enough (50 ms of the link) for the pacing to be smooth.

    Parameters
    ----------
    comm : mpi4py.MPI.Comm, optional
        The communicator (default ``MPI.COMM_WORLD``); at least 2 ranks.
    root : int
        The master's rank.
    pace : TokenBucket, optional
        Pace what leaves the master (both broadcasts and point-to-point sends).
    piece_bytes : int, optional
        Largest piece of a frame per MPI call (default: whole frames up to 64 MiB unpaced).
    reuse_buffers : bool
        Workers receive into one buffer kept across deliveries (default); see :meth:`receive`.
    """

    def __init__(
        self,
        comm: Any = None,
        *,
        root: int = 0,
        pace: TokenBucket | None = None,
        piece_bytes: int | None = None,
        reuse_buffers: bool = True,
    ) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD if comm is None else comm
        size = self.comm.Get_size()
        if size < 2:
            raise ValueError(f"Argument 'comm' must have at least 2 ranks (master and a worker), not {size}.")
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        if pace is not None and not isinstance(pace, TokenBucket):
            raise TypeError(f"Argument 'pace' must be a TokenBucket or None, not {type(pace).__name__}.")
        self._pace = pace
        if piece_bytes is None:
            piece_bytes = 1 << 26 if pace is None else min(1 << 26, max(1 << 16, int(pace.rate / 20)))
        self.piece_bytes = check_int(piece_bytes, "piece_bytes", minimum=1)
        self.K = size - 1
        self.rank = self.comm.Get_rank()
        self.is_master = self.rank == self.root
        #: This rank's worker number, or None on the master.
        self.worker: int | None = None if self.is_master else self.rank - (self.rank > self.root)
        self.reuse_buffers = bool(reuse_buffers)
        self._buffer: np.ndarray | None = None
        # The workers' own communicator, for exchanges between them (collective: every rank splits).
        self._workers = self.comm.Split(1 if self.is_master else 0, self.rank)
        #: Bytes this worker sent to other workers in :meth:`exchange` calls.
        self.exchanged_bytes = 0
        self._stats = LinkStats()
        #: Bytes of control messages the master broadcast (frame sizes and destinations).
        self.control_bytes = 0

    @property
    def pace(self) -> TokenBucket | None:
        """The bucket pacing the master's sends, if any."""
        return self._pace

    def rank_of(self, worker: int) -> int:
        """Return the rank of ``worker``."""
        return worker + (worker >= self.root)

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far (zero on workers)."""
        return self._stats

    def _master_only(self, what: str) -> None:
        if not self.is_master:
            raise TransportError(
                f"Rank {self.rank} is a worker: only the master (rank {self.root}) can {what}."
            )

    def _control(self, kind: int, table: np.ndarray) -> None:
        head = np.zeros(_CONTROL_WORDS, dtype=np.int64)
        head[:3] = kind, table.shape[0], self.piece_bytes
        inline = table.shape[0] <= _INLINE_FRAMES
        if inline:
            head[3 : 3 + table.size] = table.ravel()
        self.comm.Bcast(head, root=self.root)
        if not inline:
            self.comm.Bcast(table, root=self.root)
        self.control_bytes += head.nbytes + (0 if inline else table.nbytes)

    def _count(self, frames: list[np.ndarray]) -> None:
        self._stats = _counted(self._stats, frames)

    def _pieces(self, size: int) -> list[tuple[int, int]]:
        step = self.piece_bytes
        return [(lo, min(size, lo + step)) for lo in range(0, size, step)]

    def send(self, frames: Sequence[np.ndarray]) -> None:
        """Master: broadcast ``frames`` to every worker (each byte leaves the master once)."""
        self._master_only("send")
        if isinstance(frames, (np.ndarray, bytes, bytearray, memoryview)) or not isinstance(frames, Sequence):
            raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
        checked = [np.ascontiguousarray(_as_frame(f, q)) for q, f in enumerate(frames)]
        table = np.array([[f.shape[0], -1] for f in checked], dtype=np.int64).reshape(-1, 2)
        self._control(_BCAST, table)
        for f in checked:
            for lo, hi in self._pieces(int(f.shape[0])):
                if self._pace is not None:
                    self._pace.consume(hi - lo)
                self.comm.Bcast(f[lo:hi], root=self.root)
        self._count(checked)

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Master: send worker ``k`` only the frames ``frames[k]``, point to point (unicast).

        Every byte still leaves the master once, on the same (paced) link.
        """
        self._master_only("send")
        order = [(k, np.ascontiguousarray(f)) for k, f in _unicast(frames, self.K)]
        table = np.array([[f.shape[0], k] for k, f in order], dtype=np.int64).reshape(-1, 2)
        self._control(_UNICAST, table)
        for k, f in order:
            dest = self.rank_of(k)
            for lo, hi in self._pieces(int(f.shape[0])):
                if self._pace is not None:
                    self._pace.consume(hi - lo)
                self.comm.Send(f[lo:hi], dest=dest, tag=_TAG)
        self._count([f for _, f in order])

    def receive(self, worker: int) -> list[np.ndarray]:
        """Worker: return the frames of the master's matching ``send`` or ``send_to``, in order.

        Frames are read-only views into a receive buffer the transport keeps and reuses (its
        pages are touched once, not at every delivery): they stay valid until the next
        ``receive`` on this rank; copy them to keep them longer (or pass ``reuse_buffers=False``).
        After a ``send_to``, only the frames addressed to this worker are returned.
        """
        worker = check_int(worker, "worker", minimum=0)
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank} is not worker {worker}: it cannot receive its frames.")
        head = np.empty(_CONTROL_WORDS, dtype=np.int64)
        self.comm.Bcast(head, root=self.root)
        kind, n, piece = (int(v) for v in head[:3])
        if kind not in (_BCAST, _UNICAST) or piece < 1 or n < 0:
            raise TransportError(
                f"Worker {worker}: unknown control message {head[:3].tolist()} from the master."
            )
        if n <= _INLINE_FRAMES:
            table = head[3 : 3 + 2 * n].reshape(n, 2)
        else:
            table = np.empty((n, 2), dtype=np.int64)
            self.comm.Bcast(table, root=self.root)
        self.piece_bytes = piece
        mine = table if kind == _BCAST else table[table[:, 1] == worker]
        sizes = mine[:, 0].tolist()
        offsets = [0]
        for size in sizes:  # each frame starts on a page
            offsets.append(offsets[-1] + size + (-size % 4096))
        arena = self._arena(offsets[-1])
        out = [arena[o : o + size] for o, size in zip(offsets, sizes, strict=False)]
        if kind == _BCAST:
            for buf in out:
                for lo, hi in self._pieces(int(buf.shape[0])):
                    self.comm.Bcast(buf[lo:hi], root=self.root)
        else:
            reqs = [
                self.comm.Irecv(buf[lo:hi], source=self.root, tag=_TAG)
                for buf in out
                for lo, hi in self._pieces(int(buf.shape[0]))
            ]
            from mpi4py import MPI

            MPI.Request.Waitall(reqs)
        for buf in out:
            buf.flags.writeable = False
        return out

    # ---- setup: what every rank learns before the first transition (not counted on the link)

    def share(self, value: Any = None) -> Any:
        """Collective: the master's ``value`` (a small Python object), returned on every rank."""
        return self.comm.bcast(value if self.is_master else None, root=self.root)

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the master's array copied into ``arr`` on every rank (same shape and dtype)."""
        self.comm.Bcast(np.ascontiguousarray(arr) if self.is_master else arr, root=self.root)
        return arr

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """Master: send ``worker`` its first batch of rows (setup, point to point)."""
        self._master_only("send rows")
        self.comm.Send(np.ascontiguousarray(rows), dest=self.rank_of(worker), tag=_INIT_TAG)

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """Worker: receive into ``out`` the rows the master sent it with :meth:`send_rows`."""
        self.comm.Recv(out, source=self.root, tag=_INIT_TAG)
        return out

    def baseline_broadcast(self, nbytes: int) -> float | None:
        """Collective: one plain ``MPI_Bcast`` of ``nbytes`` bytes, the yardstick of a delivery.

        Returns, on the master, the slowest worker's seconds to receive it (None elsewhere).
        """
        n = int(self.share(int(nbytes)))
        buf = np.ones(n, dtype=np.uint8)
        self.sync()
        t0 = time.perf_counter()
        self.comm.Bcast(buf, root=self.root)
        took = time.perf_counter() - t0
        got = self.comm.gather(None if self.is_master else took, root=self.root)
        return None if got is None else max(v for v in got if v is not None)

    def sync(self) -> None:
        """Collective: wait until every rank is here (``MPI_Barrier``), before a delivery is timed."""
        self.comm.Barrier()

    # ---- the protocol's control messages (small Python values, point to point, with deadlines)

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """Master: one post from every worker, in worker order, each within ``timeout`` seconds.

        Raises
        ------
        RankTimeout
            Naming the workers (and ranks) that did not post within ``timeout`` seconds.
        """
        self._master_only("gather the workers' posts")
        got: list[Any] = [None] * self.K
        missing = set(range(self.K))

        def ready() -> bool:
            for k in sorted(missing):
                msg = self.comm.improbe(source=self.rank_of(k), tag=_POST)
                if msg is not None:
                    got[k] = msg.recv()
                    missing.discard(k)
            return not missing

        if not _poll(ready, time.monotonic() + timeout):
            who = ", ".join(f"worker {k} (rank {self.rank_of(k)})" for k in sorted(missing))
            raise RankTimeout(f"no answer from {who} within {timeout:g} s, at the {stage!r} round")
        return got

    def announce(self, word: Any) -> None:
        """Master: send ``word`` to every worker."""
        self._master_only("announce")
        reqs = [self.comm.isend(word, dest=self.rank_of(k), tag=_WORD) for k in range(self.K)]
        from mpi4py import MPI

        MPI.Request.waitall(reqs)

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """Worker: send ``value`` to the master; return the master's next word, within ``timeout`` s.

        Raises
        ------
        RankTimeout
            When the master sends no word within ``timeout`` seconds.
        """
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers post.")
        req = self.comm.isend(value, dest=self.root, tag=_POST)
        word: list[Any] = []

        def ready() -> bool:
            msg = self.comm.improbe(source=self.root, tag=_WORD)
            if msg is not None:
                word.append(msg.recv())
            return bool(word)

        if not _poll(ready, time.monotonic() + timeout):
            raise RankTimeout(
                f"no word from the master (rank {self.root}) within {timeout:g} s, at the {stage!r} round"
            )
        req.wait()
        return word[0]

    def exchange(self, data: np.ndarray, counts: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Worker: send the next ``counts[j]`` rows of ``data`` to worker ``j``, directly.

        Collective over the workers (the master takes no part): ``data`` holds, in worker order,
        the rows for worker 0, then those for worker 1, and so on (``counts[self.worker]`` rows
        stay, usually 0). One ``MPI_Alltoallv`` of the rows' bytes, after one ``MPI_Alltoall`` of
        the counts.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray)
            The rows received, those of worker 0 first, and how many came from each worker.
        """
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers exchange rows.")
        data = np.ascontiguousarray(data)
        if data.ndim != 2 or data.dtype != np.uint8:
            raise TypeError(f"Argument 'data' must be a 2-D uint8 array, not {data.dtype} of {data.ndim}-D.")
        send = np.asarray(counts, dtype=np.int64)
        if send.shape != (self.K,) or np.any(send < 0) or int(send.sum()) != data.shape[0]:
            raise ValueError(
                f"Argument 'counts' must be {self.K} non-negative row counts summing to {data.shape[0]}, "
                f"not {send.tolist()}."
            )
        recv = np.empty(self.K, dtype=np.int64)
        self._workers.Alltoall(send, recv)
        B = int(data.shape[1])
        out = np.empty((int(recv.sum()), B), dtype=np.uint8)
        send_b, recv_b = send * B, recv * B
        send_d = np.concatenate(([0], np.cumsum(send_b)[:-1]))
        recv_d = np.concatenate(([0], np.cumsum(recv_b)[:-1]))
        self._workers.Alltoallv([data, (send_b, send_d)], [out, (recv_b, recv_d)])
        self.exchanged_bytes += int(send_b.sum() - send_b[self.worker])
        return out, recv

    def reserve(self, nbytes: int) -> None:
        """Worker: make the receive buffer hold at least ``nbytes`` now (its pages touched)."""
        nbytes = check_int(nbytes, "nbytes", minimum=0)
        if self.reuse_buffers and not self.is_master:
            self._arena(nbytes)

    def _arena(self, nbytes: int) -> np.ndarray:
        """A writeable buffer of at least ``nbytes``, reused (and grown) across receives."""
        if not self.reuse_buffers:
            return _aligned_empty(nbytes)
        if self._buffer is None or self._buffer.shape[0] < nbytes:
            self._buffer = None
            self._buffer = _aligned_empty(nbytes + (nbytes >> 3))
            self._buffer.fill(0)  # fault the pages in now, not inside the transfer
        return self._buffer


# --------------------------------------------------------------------------- torch.distributed

#: Tag of the rows of each worker's first batch, and of the frames sent point to point, on gloo.
_TORCH_INIT_TAG, _TORCH_TAG = 11, 7


def torch_world() -> tuple[int, int] | None:
    """``(rank, world size)`` of ``torch.distributed`` when it is initialized, else None.

    Imports ``torch`` only when it is installed and already imported by the program (a job
    that never imported it never initialized a process group).
    """
    if sys.modules.get("torch") is None:
        return None
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        return None
    return int(dist.get_rank()), int(dist.get_world_size())


class TorchTransport:
    """The shared link over ``torch.distributed`` (gloo): what :class:`MPITransport` offers, under torchrun.

    The same members as :class:`MPITransport` (frames broadcast and counted as there, the setup,
    the protocol's control messages with a deadline on every wait), over a process group of its
    own (gloo, over every rank of the job), so that the delivery never interleaves with the
    training job's own collectives (a DDP allreduce over the workers, say). Rank ``root`` is the
    master, worker ``k`` the ``k``-th other rank. ``torch.distributed`` must be initialized
    (``init_process_group``, as ``torchrun`` jobs do first); making the transport is collective.

    Parameters
    ----------
    root : int
        The master's rank.
    timeout : float
        Seconds a collective of the link's group may wait before it fails (a backstop: the loader's
        watchdog ends the job first).
    piece_bytes : int, optional
        Largest piece of a frame per broadcast (default 64 MiB).

    Examples
    --------
    >>> link = TorchTransport()  # doctest: +SKIP
    >>> link.K, link.is_master  # doctest: +SKIP
    (4, True)
    """

    def __init__(self, *, root: int = 0, timeout: float = 300.0, piece_bytes: int | None = None) -> None:
        world = torch_world()
        if world is None:
            raise TransportError(
                "torch.distributed is not initialized: call torch.distributed.init_process_group first "
                "(torchrun jobs do), or use MPITransport under mpiexec."
            )
        import datetime
        import warnings

        import torch
        import torch.distributed as dist

        # Frames leave the master read-only; the broadcast only reads them.
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable", module=__name__)
        self._torch: Any = torch
        self._dist: Any = dist
        rank, size = world
        if size < 2:
            raise ValueError(f"torch.distributed must have at least 2 ranks (master, worker), not {size}.")
        self.root = check_int(root, "root", minimum=0)
        if self.root >= size:
            raise ValueError(f"Argument 'root' must be less than the {size} ranks, not {root}.")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"Argument 'timeout' must be a positive number of seconds, not {timeout!r}.")
        self.group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=float(timeout)))
        piece_bytes = 1 << 26 if piece_bytes is None else piece_bytes
        self.piece_bytes = check_int(piece_bytes, "piece_bytes", minimum=1)
        self.K = size - 1
        self.rank = rank
        self.is_master = rank == self.root
        #: This rank's worker number, or None on the master.
        self.worker: int | None = None if self.is_master else rank - (rank > self.root)
        self.pace: TokenBucket | None = None
        self._stats = LinkStats()
        #: Bytes of control messages the master broadcast (frame sizes and destinations).
        self.control_bytes = 0
        self._buffer: np.ndarray | None = None

    def rank_of(self, worker: int) -> int:
        """Return the rank of ``worker``."""
        return worker + (worker >= self.root)

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far (zero on workers)."""
        return self._stats

    def abort(self, status: int) -> NoReturn:
        """End this process now (``torchrun`` then stops the other ranks)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)

    def _master_only(self, what: str) -> None:
        if not self.is_master:
            raise TransportError(
                f"Rank {self.rank} is a worker: only the master (rank {self.root}) can {what}."
            )

    def _tensor(self, arr: np.ndarray) -> Any:
        return self._torch.from_numpy(np.ascontiguousarray(arr))

    def _bcast(self, arr: np.ndarray) -> None:
        """Broadcast ``arr`` (C-contiguous, written in place on the workers) as bytes (gloo has no uint64)."""
        flat = arr.reshape(-1).view(np.uint8)
        if flat.size:
            self._dist.broadcast(self._torch.from_numpy(flat), src=self.root, group=self.group)

    # ---- frames

    def _control(self, kind: int, table: np.ndarray) -> None:
        head = np.zeros(_CONTROL_WORDS, dtype=np.int64)
        head[:3] = kind, table.shape[0], self.piece_bytes
        inline = table.shape[0] <= _INLINE_FRAMES
        if inline:
            head[3 : 3 + table.size] = table.ravel()
        self._bcast(head)
        if not inline:
            self._bcast(np.ascontiguousarray(table))
        self.control_bytes += head.nbytes + (0 if inline else table.nbytes)

    def _pieces(self, size: int) -> list[tuple[int, int]]:
        step = self.piece_bytes
        return [(lo, min(size, lo + step)) for lo in range(0, size, step)]

    def send(self, frames: Sequence[np.ndarray]) -> None:
        """Master: broadcast ``frames`` to every worker (each byte leaves the master once)."""
        self._master_only("send")
        if isinstance(frames, (np.ndarray, bytes, bytearray, memoryview)) or not isinstance(frames, Sequence):
            raise TypeError(f"Argument 'frames' must be a sequence of frames, not {type(frames).__name__}.")
        checked = [np.ascontiguousarray(_as_frame(f, q)) for q, f in enumerate(frames)]
        table = np.array([[f.shape[0], -1] for f in checked], dtype=np.int64).reshape(-1, 2)
        self._control(_BCAST, table)
        for f in checked:
            for lo, hi in self._pieces(int(f.shape[0])):
                self._bcast(f[lo:hi])
        self._stats = _counted(self._stats, checked)

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Master: send worker ``k`` only the frames ``frames[k]``, point to point (unicast)."""
        self._master_only("send")
        order = [(k, np.ascontiguousarray(f)) for k, f in _unicast(frames, self.K)]
        table = np.array([[f.shape[0], k] for k, f in order], dtype=np.int64).reshape(-1, 2)
        self._control(_UNICAST, table)
        for k, f in order:
            for lo, hi in self._pieces(int(f.shape[0])):
                self._dist.send(self._tensor(f[lo:hi]), self.rank_of(k), group=self.group, tag=_TORCH_TAG)
        self._stats = _counted(self._stats, [f for _, f in order])

    def receive(self, worker: int) -> list[np.ndarray]:
        """Worker: the frames of the master's matching ``send`` or ``send_to``, in order.

        As :meth:`MPITransport.receive`: read-only views into a buffer kept and reused, valid
        until the next ``receive`` on this rank.
        """
        worker = check_int(worker, "worker", minimum=0)
        if self.is_master or worker != self.worker:
            raise TransportError(f"Rank {self.rank} is not worker {worker}: it cannot receive its frames.")
        head = np.empty(_CONTROL_WORDS, dtype=np.int64)
        self._bcast(head)
        kind, n, piece = (int(v) for v in head[:3])
        if kind not in (_BCAST, _UNICAST) or piece < 1 or n < 0:
            raise TransportError(
                f"Worker {worker}: unknown control message {head[:3].tolist()} from the master."
            )
        if n <= _INLINE_FRAMES:
            table = head[3 : 3 + 2 * n].reshape(n, 2)
        else:
            table = np.empty((n, 2), dtype=np.int64)
            self._bcast(table)
        self.piece_bytes = piece
        mine = table if kind == _BCAST else table[table[:, 1] == worker]
        sizes = mine[:, 0].tolist()
        offsets = [0]
        for size in sizes:
            offsets.append(offsets[-1] + size + (-size % 4096))
        if self._buffer is None or self._buffer.shape[0] < offsets[-1]:
            self._buffer = None
            self._buffer = _aligned_empty(offsets[-1] + (offsets[-1] >> 3))
        arena = self._buffer
        out = [arena[o : o + size] for o, size in zip(offsets, sizes, strict=False)]
        for buf in out:
            for lo, hi in self._pieces(int(buf.shape[0])):
                if kind == _BCAST:
                    self._bcast(buf[lo:hi])
                else:
                    self._dist.recv(self._tensor(buf[lo:hi]), self.root, group=self.group, tag=_TORCH_TAG)
        for buf in out:
            buf.flags.writeable = False
        return out

    # ---- setup (not counted on the link)

    def share(self, value: Any = None) -> Any:
        """Collective: the master's ``value`` (a small Python object), returned on every rank."""
        box = [value if self.is_master else None]
        self._dist.broadcast_object_list(box, src=self.root, group=self.group)
        return box[0]

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the master's array copied into ``arr`` on every rank (same shape and dtype)."""
        if self.is_master:
            self._bcast(np.ascontiguousarray(arr))
            return arr
        got = np.ascontiguousarray(arr)
        self._bcast(got)
        arr[...] = got
        return arr

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """Master: send ``worker`` its first batch of rows (setup, point to point)."""
        self._master_only("send rows")
        flat = np.ascontiguousarray(rows).reshape(-1).view(np.uint8)
        if flat.size:
            self._dist.send(self._tensor(flat), self.rank_of(worker), group=self.group, tag=_TORCH_INIT_TAG)

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """Worker: receive into ``out`` (C-contiguous) the rows the master sent it with :meth:`send_rows`."""
        flat = out.reshape(-1).view(np.uint8)
        if flat.size:
            self._dist.recv(self._tensor(flat), self.root, group=self.group, tag=_TORCH_INIT_TAG)
        return out

    def sync(self) -> None:
        """Collective: wait until every rank is here (a barrier of the link's group)."""
        self._dist.barrier(group=self.group)

    # ---- the protocol's control messages (pickled values, point to point, with deadlines)

    def _isend_value(self, value: Any, dst: int, tag: int) -> list[Any]:
        import pickle

        data = np.frombuffer(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), dtype=np.uint8).copy()
        head = np.array([data.size], dtype=np.int64)
        works = [self._dist.isend(self._tensor(b), dst, group=self.group, tag=tag) for b in (head, data)]
        return [works, head, data]  # the buffers stay alive until the sends are waited on

    def _irecv_value(self, src: int, tag: int, deadline: float) -> tuple[bool, Any]:
        """Receive one value from ``src`` by ``deadline``: ``(True, value)`` or ``(False, None)``."""
        import datetime
        import pickle

        head = np.zeros(1, dtype=np.int64)
        parts: list[np.ndarray] = [head]
        work = self._dist.irecv(self._tensor(head), src, group=self.group, tag=tag)
        for step in range(2):
            left = deadline - time.monotonic()
            if left <= 0 and not work.is_completed():
                return False, None
            try:
                work.wait(datetime.timedelta(seconds=max(left, 1e-3)))
            except RuntimeError as exc:
                if "imeout" in str(exc) or "imed out" in str(exc):
                    return False, None
                raise TransportError(f"rank {src}: {exc}") from None
            if step == 0:
                data = np.empty(int(head[0]), dtype=np.uint8)
                parts.append(data)
                work = self._dist.irecv(self._tensor(data), src, group=self.group, tag=tag)
        return True, pickle.loads(parts[1].tobytes())

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """Master: one post from every worker, in worker order, each within ``timeout`` seconds.

        Raises
        ------
        RankTimeout
            Naming the workers (and ranks) that did not post within ``timeout`` seconds.
        """
        self._master_only("gather the workers' posts")
        deadline = time.monotonic() + timeout
        got: list[Any] = []
        for k in range(self.K):
            ok, value = self._irecv_value(self.rank_of(k), _POST, deadline)
            if not ok:
                raise RankTimeout(
                    f"no answer from worker {k} (rank {self.rank_of(k)}) within {timeout:g} s, "
                    f"at the {stage!r} round"
                )
            got.append(value)
        return got

    def announce(self, word: Any) -> None:
        """Master: send ``word`` to every worker."""
        self._master_only("announce")
        sent = [self._isend_value(word, self.rank_of(k), _WORD) for k in range(self.K)]
        for works, *_ in sent:
            for w in works:
                w.wait()

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """Worker: send ``value`` to the master; return the master's next word, within ``timeout`` s.

        Raises
        ------
        RankTimeout
            When the master sends no word within ``timeout`` seconds.
        """
        if self.is_master:
            raise TransportError(f"Rank {self.rank} is the master: only workers post.")
        works, *_keep = self._isend_value(value, self.root, _POST)
        ok, word = self._irecv_value(self.root, _WORD, time.monotonic() + timeout)
        if not ok:
            raise RankTimeout(
                f"no word from the master (rank {self.root}) within {timeout:g} s, at the {stage!r} round"
            )
        for w in works:
            w.wait()
        return word
