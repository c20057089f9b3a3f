"""Two threads for the compiled loops that release the GIL (lowest layer, imports nothing of ours).

The codec's byte loops and the count of ``S`` over the Feistel order run the pieces of a range on
the caller's thread and one more, which take them in turn, so that a thread the scheduler holds
back leaves its share to the other. The second thread is made on first use; a forked child
inherits the executor but not its thread, so the child starts with none and makes its own
(``os.register_at_fork``), instead of waiting forever on the parent's.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

#: The second thread, made on first use (emptied in a forked child).
_POOL: list[ThreadPoolExecutor] = []
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.clear)


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def run_pieces(
    work: Callable[[int, int, int], None],
    cuts: Sequence[tuple[int, int]],
    *,
    threads: bool,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Run ``work(slot, lo, hi)`` for every piece ``(lo, hi)`` of ``cuts``.

    With ``threads`` (and two pieces or more), two threads (slots 0 and 1, slot 0 the caller's)
    take the pieces in turn; ``work`` must release the GIL and keep what it makes per slot.
    Otherwise slot 0 takes them all, in order. ``progress``, if given, is called after each piece
    (from either thread, one call at a time) with the number of positions done so far. An
    exception in either thread stops both at their next piece and is raised here.

    Examples
    --------
    >>> done = []
    >>> run_pieces(lambda slot, lo, hi: done.append((lo, hi)), [(0, 2), (2, 5)], threads=False)
    >>> done
    [(0, 2), (2, 5)]
    """
    if not threads or len(cuts) < 2:
        for lo, hi in cuts:
            work(0, lo, hi)
            if progress is not None:
                progress(hi)
        return
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="coded_shuffle"))
    pieces = iter(list(cuts))  # next() on it is atomic
    lock = threading.Lock()
    done = [0]
    stop = threading.Event()

    def run(slot: int) -> None:
        try:
            for lo, hi in pieces:
                if stop.is_set():
                    return
                work(slot, lo, hi)
                if progress is not None:
                    with lock:
                        if stop.is_set():
                            return
                        done[0] += hi - lo
                        try:
                            progress(done[0])
                        except BaseException:
                            stop.set()  # before the other thread can report again
                            raise
        except BaseException:
            stop.set()
            raise

    try:
        other = _POOL[0].submit(run, 1)
    except RuntimeError:  # the interpreter shuts its executors down (a prefetch thread at exit)
        run(0)  # every piece on this thread
        return
    try:
        run(0)
    except BaseException:
        stop.set()
        raise
    finally:
        other.result()


def behind(items: Iterable[T], work: Callable[[T], None]) -> None:
    """Run ``work(item)`` for every item of ``items``, in order, on a thread of its own while the
    caller takes the next item (``work`` should release the GIL for most of its time).

    ``items`` is always run to its end, even after ``work`` has raised (its items may be a
    collective receive that the other ranks are in); the first exception of ``work`` is then
    raised here, as is one of ``items``, after the thread has stopped.

    Examples
    --------
    >>> done = []
    >>> behind(range(3), done.append)
    >>> done
    [0, 1, 2]
    """
    todo: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    failed: list[BaseException] = []

    def run() -> None:
        while True:
            more, item = todo.get()
            if not more:
                return
            if not failed:
                try:
                    work(item)
                except BaseException as exc:  # raised by the caller's thread
                    failed.append(exc)

    thread = threading.Thread(target=run, name="coded_shuffle-behind", daemon=True)
    thread.start()
    try:
        for item in items:
            todo.put((True, item))
    finally:
        todo.put((False, None))
        thread.join()
    if failed:
        raise failed[0]
