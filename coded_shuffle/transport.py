"""Transports: how frames go from the master to the workers, behind one small interface.

A transport models the shared link of the setting: the master **broadcasts** each frame
(:doc:`docs/wire-format.md`) to every worker, and it counts what leaves the master, which is the
honest cost of a shared link. The interface, :class:`Transport`, is four members:

``K``
    number of workers.
``send(frames)``
    master side: broadcast a sequence of frames (``uint8`` buffers) to all workers.
``receive(worker)``
    worker side: return, in order, every frame sent since that worker's last ``receive``.
``stats``
    a :class:`LinkStats` of frames, symbols and bytes that left the master so far.

Frames are opaque bytes to a transport: it reads only ``n_symbols`` from the header to count
symbols, and it must deliver every frame whole and in order (a frame it cannot deliver raises
:class:`~coded_shuffle.errors.TransportError`). Corruption is the codec's business: a worker
rejects a bad frame or record and the engine repairs it.

:class:`InProcessTransport` runs everything in one process with zero copies: every worker
receives the very buffer the master sent (read-only). A ``fault`` hook can corrupt or drop what
a given worker receives, to test the repair path. An MPI transport lives beside it in this
module and is the only place that imports ``mpi4py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from ._checks import check_int
from .codec import FRAME_HEADER_BYTES
from .errors import TransportError

__all__ = ["LinkStats", "Transport", "InProcessTransport", "frame_symbols"]

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

    def receive(self, worker: int) -> list[np.ndarray]:
        """Return the frames sent to ``worker`` since its last call, in order."""

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

    def __init__(self, K: int, *, fault: Fault | None = None) -> None:
        self.K = check_int(K, "K", minimum=1)
        if fault is not None and not callable(fault):
            raise TypeError(f"Argument 'fault' must be callable or None, not {type(fault).__name__}.")
        self._fault = fault
        self._log: list[np.ndarray] = []
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
        s = self._stats
        self._log.extend(checked)
        self._stats = LinkStats(
            s.frames + len(checked),
            s.symbols + sum(frame_symbols(f) for f in checked),
            s.bytes + sum(int(f.shape[0]) for f in checked),
        )
        self._trim()

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
