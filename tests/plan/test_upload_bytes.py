"""The exchange's upload bound in bytes (``upload_bound(..., sizes=)``): against every subset of
workers, and against a linear program of the split uploads written here."""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.optimize import linprog

from coded_shuffle.plan import assign_senders, upload_bound


def brute_bytes_bound(holders, sizes, K) -> Fraction:
    """``max over S of b(S) / |S|``: the bytes of the units held inside ``S``, every subset."""
    best = Fraction(0)
    for r in range(1, K + 1):
        for S in itertools.combinations(range(K), r):
            mask = sum(1 << w for w in S)
            inside = sum(int(d) for h, d in zip(holders, sizes, strict=True) if int(h) & ~mask == 0)
            best = max(best, Fraction(inside, r))
    return best


def split_uploads_optimum(holders, sizes, K) -> float:
    """The least busiest upload when each unit's bytes may be split among its holders: minimise
    ``L`` with ``sum_w x[u, w] = 1`` over the holders ``w`` of unit ``u`` and
    ``sum_u d_u x[u, w] <= L`` for every worker (HiGHS)."""
    pairs = [(u, w) for u, h in enumerate(holders) for w in range(K) if (int(h) >> w) & 1]
    n = len(pairs) + 1  # the x's, then L
    c = np.zeros(n)
    c[-1] = 1
    A_eq = np.zeros((len(holders), n))
    for col, (u, _) in enumerate(pairs):
        A_eq[u, col] = 1
    A_ub = np.zeros((K, n))
    for col, (u, w) in enumerate(pairs):
        A_ub[w, col] = sizes[u]
    A_ub[:, -1] = -1
    res = linprog(c, A_ub=A_ub, b_ub=np.zeros(K), A_eq=A_eq, b_eq=np.ones(len(holders)), bounds=(0, None))
    assert res.status == 0
    return float(res.fun)


@pytest.mark.parametrize("K", [2, 3, 4, 5])
def test_upload_bound_in_bytes(K):
    rng = np.random.default_rng(300 + K)
    for _ in range(8):
        n = int(rng.integers(1, 20))
        holders = rng.integers(1, 1 << K, n).tolist()
        sizes = rng.integers(1, 3000, n).tolist()
        got = upload_bound(holders, K=K, sizes=sizes)
        assert got == brute_bytes_bound(holders, sizes, K)
        assert float(got) == pytest.approx(split_uploads_optimum(holders, sizes, K), rel=1e-9)
        # units of one byte: the bound in units
        assert upload_bound(holders, K=K, sizes=[1] * n) == upload_bound(holders, K=K)


def test_upload_bound_sizes_exceptions():
    with pytest.raises(ValueError, match="'sizes' must give the non-negative bytes of each of the 2 units"):
        upload_bound([1, 2], K=2, sizes=[5])
    with pytest.raises(ValueError, match="'sizes' must give the non-negative bytes"):
        upload_bound([1, 2], K=2, sizes=[5, -1])
    with pytest.raises(ValueError, match="'sizes' must hold integers"):
        upload_bound([1, 2], K=2, sizes=[0.5, 1])


@pytest.mark.parametrize("K", [2, 3, 4])
def test_senders_in_bytes(K):
    """With ``sizes`` the assignment balances bytes: each unit sent by one of its holders, the
    uploads and downloads in bytes, and no upload more than the least whole busiest upload
    ``ceil(upload_bound)`` plus, for each holder set it sends from, less than its largest unit."""
    rng = np.random.default_rng(400 + K)
    for _ in range(10):
        n = int(rng.integers(1, 9))
        holders = rng.integers(1, 1 << K, n)
        wanter = np.array(
            [
                int(
                    rng.choice(  # the wanter holds it not
                        [w for w in range(K) if not (h >> w) & 1] or [K]
                    )
                )
                for h in holders
            ]
        )
        keep = wanter < K  # a unit every worker holds is wanted by none
        holders, wanter = holders[keep], wanter[keep]
        sizes = rng.integers(1, 500, holders.size)
        a = assign_senders(wanter, holders.astype(np.uint64), K=K, sizes=sizes)
        assert all((int(h) >> int(s)) & 1 for h, s in zip(holders, a.sender, strict=True))
        assert a.uploads.tolist() == np.bincount(a.sender, weights=sizes, minlength=K).astype(int).tolist()
        assert a.downloads.tolist() == np.bincount(wanter, weights=sizes, minlength=K).astype(int).tolist()
        assert a.upload_bound == brute_bytes_bound(holders.tolist(), sizes.tolist(), K)
        for w in range(K):  # the runs cut at the flow's amounts: less than a unit over, each set
            sets = {int(h) for h, s in zip(holders, a.sender, strict=True) if s == w}
            slack = sum(int(sizes[holders == h].max()) - 1 for h in sets)
            assert a.uploads[w] <= math.ceil(a.upload_bound) + slack
