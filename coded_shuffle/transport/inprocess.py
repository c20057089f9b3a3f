"""The in-process transport: every worker receives the very buffer the master sent."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from .._checks import check_int
from ..errors import TransportError
from .base import Counted, Fault, LinkStats, TokenBucket, _as_frame, _counted, _offers, _rounds, _unicast


class InProcessTransport(Counted):
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
    LinkStats(frames=1, symbols=1, bytes=58, resent=0)
    """

    #: No control plane crosses a process here.
    control_bytes: int = 0

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
        self._offered: list[dict[int, list[np.ndarray]]] = [{} for _ in range(self.K)]
        #: Bytes the workers sent each other (:meth:`collect`).
        self.exchanged_bytes = 0

    def send(self, frames: Sequence[np.ndarray], *, repair: bool = False) -> None:
        """Broadcast ``frames`` (a sequence of ``uint8`` buffers) to every worker (``repair`` or not:
        in one process there is one path)."""
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

    def offer(
        self,
        worker: int,
        frames: Mapping[int, Sequence[np.ndarray]],
        *,
        rounds: Sequence[tuple[int, int, int]] | None = None,
    ) -> None:
        """Worker ``worker``: leave ``frames[j]`` for worker ``j`` (buffered until it collects).

        An offer replaces the worker's previous one. A driver that steps the workers one after
        the other lets every worker offer before any collects, so that the exchange completes.
        ``rounds`` (:meth:`~coded_shuffle.transport.frames.FramedLink.offer`) are checked: in one
        process nothing travels, and the frames come as without them.
        """
        worker = self._worker(worker)
        self._offered[worker] = _offers(frames, self.K, worker)
        if rounds is not None:
            _rounds(rounds, self._offered[worker], self.K, worker)

    def collect(self, worker: int) -> list[np.ndarray]:
        """Worker ``worker``: the frames the others offered it, in worker order (taken once)."""
        worker = self._worker(worker)
        out: list[np.ndarray] = []
        for sender in range(self.K):
            frames = self._offered[sender].pop(worker, [])
            self.exchanged_bytes += sum(int(f.shape[0]) for f in frames)
            out.extend(frames)
        return out

    def collect_each(self, worker: int) -> Iterator[np.ndarray]:
        """:meth:`collect`: in process every frame is there at once."""
        return iter(self.collect(worker))

    def _worker(self, worker: int) -> int:
        worker = check_int(worker, "worker", minimum=0)
        if worker >= self.K:
            raise ValueError(f"Argument 'worker' must be less than K = {self.K}, not {worker}.")
        return worker

    def receive_each(self, worker: int) -> Iterator[np.ndarray]:
        """:meth:`receive`: in process every frame is there at once."""
        return iter(self.receive(worker))

    def receive(self, worker: int) -> list[np.ndarray]:
        """Return every frame sent since ``worker``'s last ``receive``, in order."""
        worker = self._worker(worker)
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
