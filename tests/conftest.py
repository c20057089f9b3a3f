import numpy as np
import pytest


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
