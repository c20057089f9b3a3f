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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for mark in MODULE_MARKS.get(item.path.stem, ()):
            item.add_marker(mark)


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: tests never draw unseeded randomness."""
    return np.random.default_rng(20161001)


@pytest.fixture(scope="session", autouse=True)
def kernels_compiled() -> None:
    """Compile (or load) the kernels once before any test, so that the one-time announcement of
    the compile never lands on the standard error of whichever test happens to run first."""
    from coded_shuffle.warmup import warm_up

    warm_up()


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
