"""The worker's epochs made one ahead of the training loop, in a thread of their own."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from ._common import EpochBatch

__all__ = ["Prefetch"]


class Prefetch:
    """A thread that runs the worker's epochs at most one ahead of the training loop.

    The thread alone steps the loader's iterator (and so alone uses the transport). It takes
    the next epoch only when :meth:`take` has handed out the previous one: with the batch being
    trained on and the one made ahead, a worker holds at most two epochs' rows besides its cache.
    """

    def __init__(self, epochs: Iterator[EpochBatch]) -> None:
        self._epochs = epochs
        self._out: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=1)
        self._go = threading.Semaphore(1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coded_shuffle-prefetch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                self._go.acquire()
                if self._stop.is_set():
                    close = getattr(self._epochs, "close", None)
                    if close is not None:
                        close()  # a worker stopping early tells the master, from this thread
                    self._out.put(("end", None))
                    return
                try:
                    batch = next(self._epochs)
                except StopIteration:
                    self._out.put(("end", None))
                    return
                self._out.put(("batch", batch))
        except BaseException as exc:  # handed to the training loop, raised there
            self._out.put(("error", exc))

    def take(self) -> EpochBatch | None:
        """The next epoch's batch (waiting for it), or None when the epochs have ended."""
        while True:
            try:
                kind, value = self._out.get(timeout=1.0)
                break
            except queue.Empty:
                if not self._thread.is_alive():
                    return None
        if kind == "error":
            raise value
        if kind == "end":
            return None
        self._go.release()  # the thread may make the next epoch now
        return value

    def close(self) -> None:
        """Stop: the thread closes the iterator (the master learns at the next transition)."""
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._go.release()
        while self._thread.is_alive():
            try:  # let the thread finish the epoch it may be making
                self._out.get(timeout=0.1)
            except queue.Empty:
                pass
        self._thread.join()
