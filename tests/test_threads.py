"""``_threads.behind``: work on a thread of its own while the caller takes the next item."""

import threading

import pytest

from coded_shuffle._threads import behind


def test_every_item_is_worked_in_order_on_another_thread():
    seen, threads = [], set()

    def work(x):
        seen.append(x)
        threads.add(threading.get_ident())

    behind(iter(range(50)), work)
    assert seen == list(range(50)) and threads and threading.get_ident() not in threads


def test_a_failing_work_still_lets_the_items_run_to_their_end_and_is_raised():
    taken = []

    def items():
        for x in range(10):
            taken.append(x)
            yield x

    def work(x):
        if x == 2:
            raise RuntimeError("item 2")

    with pytest.raises(RuntimeError, match="item 2"):
        behind(items(), work)
    assert taken == list(range(10))  # a collective receive is never left half done


def test_a_failing_source_stops_the_thread_and_is_raised():
    done = []

    def items():
        yield 1
        raise OSError("link lost")

    with pytest.raises(OSError, match="link lost"):
        behind(items(), done.append)
    assert done == [1] and not [t for t in threading.enumerate() if t.name == "coded_shuffle-behind"]


def test_run_pieces_at_interpreter_exit_runs_every_piece_on_the_callers_thread(monkeypatch):
    """At exit the interpreter shuts its executors down before the atexit handlers (a prefetch
    thread may be decoding then): the pieces all run on the caller's thread instead."""
    from concurrent.futures import ThreadPoolExecutor

    import coded_shuffle._threads as threads

    pool = ThreadPoolExecutor(1)
    pool.shutdown()  # submit() now raises RuntimeError, as after the interpreter's shutdown of executors
    monkeypatch.setattr(threads, "_POOL", [pool])
    slots: list[int] = []
    done: list[tuple[int, int]] = []
    pieces = [(0, 2), (2, 5), (5, 6)]
    threads.run_pieces(lambda slot, lo, hi: (slots.append(slot), done.append((lo, hi))), pieces, threads=True)
    assert done == pieces and set(slots) == {0}
