"""The codec's position lookup, both ways (a table of every id, a binary search), against a dict."""

import numpy as np
import pytest

from coded_shuffle.codec._common import _lookup


@pytest.mark.parametrize(("held", "top", "asked"), [(50, 60, 5000), (3000, 10**6, 4000), (2000, 2100, 10)])
def test_lookup_finds_the_position_of_every_id_held_and_minus_one_else(held, top, asked):
    rng = np.random.default_rng(held)
    ids = np.sort(rng.choice(top, size=held, replace=False)).astype(np.int64)
    q = rng.integers(-3, top + 3, size=asked).astype(np.int64)
    where = {int(x): n for n, x in enumerate(ids)}
    assert _lookup(ids, q).tolist() == [where.get(int(x), -1) for x in q]
    assert _lookup(np.empty(0, np.int64), q).tolist() == [-1] * asked
