"""The transport interface, its counters, and the token bucket that paces a link."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, Protocol, runtime_checkable

import numpy as np

from .._checks import check_int
from ..codec import frame_sizes

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
        Bytes broadcast (each frame counted once, however many workers receive it), and those of
        ``resent``.
    resent : int
        Bytes of multicast datagrams lost on their way that the master sent again, each to the
        worker that lacked them, over the reliable link (counted in ``bytes`` too).

    Examples
    --------
    >>> LinkStats(1, 3, 100).bytes
    100
    """

    frames: int = 0
    symbols: int = 0
    bytes: int = 0
    resent: int = 0

    def __sub__(self, other: LinkStats) -> LinkStats:
        return LinkStats(
            self.frames - other.frames, self.symbols - other.symbols, self.bytes - other.bytes,
            self.resent - other.resent,
        )  # fmt: skip


@runtime_checkable
class Transport(Protocol):
    """The interface every transport provides (see the module docstring)."""

    K: int

    @property
    def control_bytes(self) -> int:
        """Bytes of the protocol's control plane this link carried so far (0 in process)."""

    @property
    def pace(self) -> TokenBucket | None:
        """The bucket pacing the master's sends, if any (its ``waited`` is reported)."""

    def send(self, frames: Sequence[np.ndarray], *, repair: bool = False) -> None:
        """Broadcast ``frames`` from the master to every worker; ``repair``: they re-send what
        workers lacked (a link that broadcasts on a path of its own sends them on its reliable one)."""

    def send_to(self, frames: Mapping[int, Sequence[np.ndarray]]) -> None:
        """Send worker ``k`` only the frames ``frames[k]`` (the uncoded scheme's unicast)."""

    def receive(self, worker: int) -> list[np.ndarray]:
        """Return the frames sent to ``worker`` since its last call, in order."""

    def receive_each(self, worker: int) -> Iterator[np.ndarray]:
        """:meth:`receive`, each frame given as it arrives (run to the end: it is one receive)."""

    def sync(self) -> None:
        """Wait until master and workers are all at this point (before a delivery is timed)."""

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far."""

    def offer(
        self,
        worker: int,
        frames: Mapping[int, Sequence[np.ndarray]],
        *,
        rounds: Sequence[tuple[int, int, int]] | None = None,
    ) -> None:
        """Worker ``worker``: keep ``frames[j]`` for worker ``j`` until the next :meth:`collect`,
        which sends them in ``rounds`` (``(to, n, frm)`` a round, :meth:`FramedLink.offer`) if given
        and the link has a network (in process, they only check)."""

    def collect(self, worker: int) -> list[np.ndarray]:
        """Worker ``worker``, with every other: the frames the others offered it, in worker order."""

    def collect_each(self, worker: int) -> Iterator[np.ndarray]:
        """:meth:`collect`, each frame given as it arrives (in rounds, a round's frames before the
        next round starts; each sender's in order); run it to the end: it is one collect."""


@runtime_checkable
class ControlLink(Transport, Protocol):
    """A link between processes: the data plane of :class:`Transport` and the protocol's control
    plane (small values point to point, with deadlines), as the process drivers
    (:mod:`coded_shuffle.engine.mpi`) carry the roles over it."""

    rank: int
    #: The rank that leads the control rounds (the master, or a peer).
    root: int
    worker: int | None
    is_master: bool
    #: A job of peers: every rank a worker, one of them leading the control rounds.
    peers: bool

    @property
    def is_leader(self) -> bool:
        """Whether this rank leads the control rounds (the master, or rank ``root`` among peers)."""

    def rank_of(self, worker: int) -> int:
        """The rank of ``worker``."""

    def abort(self, status: int) -> NoReturn:
        """End the whole job now, from any thread, with exit status ``status``."""

    def share_array(self, arr: np.ndarray) -> np.ndarray:
        """Collective: the master's array (``arr`` on it, a buffer of its shape elsewhere), on every rank."""

    def send_rows(self, worker: int, rows: np.ndarray) -> None:
        """The master: send ``worker`` its first batch, ``rows``."""

    def receive_rows(self, out: np.ndarray) -> np.ndarray:
        """A worker: receive its first batch into ``out``."""

    def gather_posts(self, *, timeout: float, stage: str) -> list[Any]:
        """The leader: one post from every worker, in worker order (its own slot None among peers)."""

    def announce(self, word: Any) -> None:
        """The leader: send ``word`` to every worker that posts."""

    def post(self, value: Any, *, timeout: float, stage: str) -> Any:
        """A worker: send ``value`` to the leader; return its next word."""

    def share(self, value: Any = None) -> Any:
        """Collective: the leader's small value, on every rank."""

    def allgather(self, value: Any) -> list[Any]:
        """Worker, collective among the workers: every worker's value, in worker order."""

    def reserve(self, nbytes: int) -> None:
        """A worker: make its receive buffer hold at least ``nbytes`` now."""

    def baseline_broadcast(self, nbytes: int) -> float | None:
        """Collective: one plain broadcast of ``nbytes`` bytes; on the leader the slowest worker's seconds."""

    def probe_phases(self, nbytes: int) -> dict[str, float] | None:
        """Collective: four transfers of ``nbytes`` bytes timed; on the leader their seconds by name."""


class Counted:
    """What every link keeps alike: the bucket that paces its master, and what left the master."""

    _pace: TokenBucket | None
    _stats: LinkStats

    @property
    def pace(self) -> TokenBucket | None:
        """The bucket pacing the master's sends, if any."""
        return self._pace

    @property
    def stats(self) -> LinkStats:
        """Frames, symbols and bytes that left the master so far (zero on a worker's rank)."""
        return self._stats


def frame_symbols(frame: np.ndarray) -> int:
    """Return the ``n_symbols`` field of a frame header (0 if the frame is too short).

    Examples
    --------
    >>> import numpy as np
    >>> from coded_shuffle.codec import encode_plan_arrays, load_dataset
    >>> frame_symbols(encode_plan_arrays(load_dataset(np.eye(3, dtype=np.uint8)), [0, 1], [2, -1], epoch=0))
    2
    """
    return frame_sizes(frame).n_symbols


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


def _offers(frames: object, K: int, worker: int) -> dict[int, list[np.ndarray]]:
    """A worker's frames for its peers, checked: a mapping of worker ``j != worker`` to frames."""
    if not isinstance(frames, Mapping):
        raise TypeError(f"Argument 'frames' must map workers to frames, not {type(frames).__name__}.")
    out: dict[int, list[np.ndarray]] = {}
    for j, fs in frames.items():
        if isinstance(j, bool) or not isinstance(j, (int, np.integer)) or not 0 <= int(j) < K or j == worker:
            raise ValueError(
                f"Argument 'frames' must map other workers (0 to {K - 1}, not {worker}), not {j!r}."
            )
        out[int(j)] = [np.ascontiguousarray(_as_frame(f, q)) for q, f in enumerate(fs)]
    return out


def _rounds(
    rounds: object, offered: Mapping[int, Sequence[np.ndarray]], K: int, worker: int
) -> list[tuple[int, int, int]]:
    """A worker's rounds of an offer, checked: ``(to, n, frm)`` each, the ``n`` adding up to the
    frames offered to each ``to``."""
    if isinstance(rounds, (str, bytes)) or not isinstance(rounds, Sequence):
        raise TypeError(f"Argument 'rounds' must be a sequence of (to, n, frm), not {type(rounds).__name__}.")
    out, sent = [], dict.fromkeys(offered, 0)
    for r in rounds:
        if not (isinstance(r, tuple) and len(r) == 3 and all(isinstance(v, (int, np.integer)) for v in r)):
            raise TypeError(f"Argument 'rounds' must hold (to, n, frm) of ints, not {r!r}.")
        to, n, frm = (int(v) for v in r)
        if not (-1 <= to < K and -1 <= frm < K and worker not in (to, frm) and n >= (to >= 0)):
            raise ValueError(
                f"Argument 'rounds' must name other workers (or -1) and n >= 1 frames, not {r!r}."
            )
        if to >= 0:
            if to not in sent:
                raise ValueError(f"Argument 'rounds' sends worker {to} frames that were not offered.")
            sent[to] += n
        out.append((to, n if to >= 0 else 0, frm))
    if any(sent[j] != len(fs) for j, fs in offered.items()):
        raise ValueError("Argument 'rounds' must send every frame offered, each once.")
    return out


def _counted(stats: LinkStats, frames: Sequence[np.ndarray]) -> LinkStats:
    """``stats`` with ``frames`` added (their symbols read from the headers)."""
    return LinkStats(
        stats.frames + len(frames),
        stats.symbols + sum(frame_symbols(f) for f in frames),
        stats.bytes + sum(int(f.shape[0]) for f in frames),
        stats.resent,
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
