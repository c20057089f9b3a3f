import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    """A seeded generator: tests never draw unseeded randomness."""
    return np.random.default_rng(20161001)
