import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator

import numpy as np
import pytest

#: Modules whose every test is of one kind, marked here so that ``-m "not mpi and not torch and
#: not netns"`` keeps the quick in-process tests (README, "Tests"); other modules mark the tests
#: that launch ``mpiexec`` one by one.
MODULE_MARKS = {
    "test_mpi": ("mpi",),
    "test_faults": ("mpi",),
    "test_torch": ("torch",),
    "test_netns_cluster": ("netns", "mpi"),
    "torch": ("torch",),  # the doctests of coded_shuffle/torch.py
}


#: The kinds of test that launch jobs of processes (``mpiexec``, ``torchrun``, network
#: namespaces). They run one at a time, whatever runs the suite: their ranks take both cores of a
#: 2-core machine, some of them time a rank's silence, and some check what a job leaves in
#: ``/dev/shm``. Under pytest-xdist (the README's ``-n 2``) they all go to one worker, one after
#: the other, while the in-process tests share the other workers (``LaunchingApart``).
LAUNCHING = ("mpi", "torch", "netns")
#: Where the workers of a pytest-xdist run leave the ids of the launching tests for the
#: scheduler (set by the controller of a ``--dist load`` run, inherited by its workers).
LAUNCHING_IDS = "CODED_SHUFFLE_TESTS_LAUNCHING"


def _launching(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(kind) for kind in LAUNCHING)


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", None) == "load" and not hasattr(config, "workerinput"):
        folder = tempfile.mkdtemp(prefix="coded-shuffle-tests-")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ[LAUNCHING_IDS] = os.path.join(folder, "launching.json")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for mark in MODULE_MARKS.get(item.path.stem, ()):
            item.add_marker(mark)
    path = os.environ.get(LAUNCHING_IDS)
    if path and hasattr(config, "workerinput"):  # each worker writes the same list, whole (a rename)
        part = f"{path}.{os.getpid()}"
        with open(part, "w", encoding="utf-8") as f:
            json.dump([item.nodeid for item in items if _launching(item)], f)
        os.replace(part, path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """The launching tests as one unit of work, given to one worker; every other test a unit of
    its own (pytest-xdist's ``loadgroup``, grouped by marks rather than by ``xdist_group``)."""
    path = os.environ.get(LAUNCHING_IDS)
    if not path:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LaunchingApart(LoadScopeScheduling):
        launching: set[str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.launching is None:  # read once every worker has collected
                with open(path, encoding="utf-8") as f:
                    self.launching = set(json.load(f))
            return "launching" if nodeid in self.launching else nodeid

    return LaunchingApart(config, log)  # type: ignore[arg-type]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """A launching test holds a lock on this file from its setup to its teardown, so that no two
    run at once, in one run of the suite (any distribution) or in two runs of this checkout."""
    if not _launching(item):
        if not _RAN_LAUNCHING and os.environ.get(LAUNCHING_IDS) and hasattr(item.config, "workerinput"):
            _yield_to_launching()
        return (yield)
    _RAN_LAUNCHING.append(item.nodeid)
    with _held(__file__, "another launching test"):
        return (yield)


@contextlib.contextmanager
def _held(path: str, holder: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (waiting at most :data:`LOCK_WAIT`; past it the
    run ends, saying that ``holder`` held it)."""
    with open(path, "rb") as lock:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.exit(f"{holder} held {path} locked for {LOCK_WAIT} s", 2)
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


#: Longest wait for the lock of the launching tests (the longest test takes about 30 s).
LOCK_WAIT = 600
#: The launching tests this process has run.
_RAN_LAUNCHING: list[str] = []
#: Niceness a worker of in-process tests takes (``LaunchingApart``'s other workers).
IN_PROCESS_NICE = 10


def _yield_to_launching() -> None:
    """Lower this worker's priority, once: under ``LaunchingApart`` a worker whose first test
    is in-process never gets a launching one, and the launching tests' ranks, using about 1.4
    cores on average, leave it the rest (the suite takes about as long as they take alone)."""
    if os.getpriority(os.PRIO_PROCESS, 0) < IN_PROCESS_NICE:
        os.setpriority(os.PRIO_PROCESS, 0, IN_PROCESS_NICE)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: tests never draw unseeded randomness."""
    return np.random.default_rng(20161001)


@pytest.fixture(scope="session", autouse=True)
def kernels_compiled() -> None:
    """Compile (or load) the kernels once before any test, so that the one-time announcement of
    the compile never lands on the standard error of whichever test happens to run first.

    Each group of kernels under a lock of its own (a file in the temporary folder, named by the
    group and this checkout), taken by the workers of pytest-xdist from opposite ends of the
    list: a group is compiled by one worker and loaded from numba's cache by the other, where
    both compiled every group at once (on a fresh checkout, ``-n 2`` on one quick module: 29 s
    against 41 s, 45 s of CPU against 74 s)."""
    import hashlib

    from coded_shuffle import warmup

    groups = list(warmup.KERNEL_GROUPS)
    if os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0":
        groups.reverse()
    tag = hashlib.blake2b(os.path.dirname(warmup.__file__).encode(), digest_size=6).hexdigest()
    for group in groups:
        path = os.path.join(tempfile.gettempdir(), f"coded-shuffle-warm-up-{tag}-{group}.lock")
        open(path, "ab").close()
        with _held(path, f"the warm-up of the kernels of {group!r}"):
            warmup.warm_up([group])


def _receivers(plan) -> list[set[int]]:
    """The workers each symbol of ``plan`` is addressed to, in plain Python (docs/wire-format.md):
    both workers of an order-2 symbol, every worker of the cycle of a cycle symbol, the receiver
    of a point sent alone."""
    out = [{i, j} for i, j in zip(plan.pair_i.tolist(), plan.pair_j.tolist(), strict=True)]
    ptr, workers = plan.cycle_ptr.tolist(), plan.cycle_workers.tolist()
    for u in range(len(ptr) - 1):
        out += [set(workers[ptr[u] : ptr[u + 1]])] * (ptr[u + 1] - ptr[u] - 1)
    out += [{j} for j in plan.uncoded_to.tolist()]
    return out


def receiver_runs(plan, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """The receiver index of the frame carrying symbols ``[lo, hi)`` of ``plan``, by brute force:
    for each worker in turn, the maximal runs of consecutive entries addressed to it, as
    ``(worker, first entry, count)``."""
    recv = _receivers(plan)[lo:hi]
    rows = []
    for w in sorted(set().union(*recv)):
        mine = [s for s, r in enumerate(recv) if w in r]
        first = mine[0]
        for prev, s in zip(mine, mine[1:] + [None], strict=True):
            if s is None or s != prev + 1:
                rows.append((w, first, prev - first + 1))
                first = s
    return rows


@pytest.fixture
def receiver_runs_reference():
    """:func:`receiver_runs`, the brute-force receiver index, for tests in other modules."""
    return receiver_runs


@pytest.fixture(scope="session", autouse=True)
def shared_memory_cleared():
    """Tests abort MPI jobs on purpose, many under ``mpiexec`` alone (not ``coded-shuffle run``,
    which clears what they leave): MPICH's segments left in ``/dev/shm`` since the session began,
    held by no process, are removed at its end (:func:`coded_shuffle.cli.run.clear_segments`)."""
    import time

    from coded_shuffle.cli.run import clear_segments

    since = time.time() - 1.0
    yield
    clear_segments(since)
