"""Tests of coded_shuffle.certificates: GF(2) rank certificates of decodability."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.certificates import certify_plan, gf2_certificate, gf2_system
from coded_shuffle.codec import decode_worker, encode_plan, load_dataset
from coded_shuffle.orders import epoch_placement, placement_from_owner
from coded_shuffle.plan import plan_delivery, plan_from_matrix
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES


def _gf2_rank_oracle(M: np.ndarray) -> int:
    """Rank over GF(2) by plain Gaussian elimination on Python ints (independent of galois)."""
    rows = [int("".join(map(str, r)), 2) for r in M.astype(int)] if M.size else []
    rank = 0
    while rows:
        pivot = max(rows)
        rows.remove(pivot)
        if pivot == 0:
            break
        rank += 1
        top = pivot.bit_length() - 1
        rows = [r ^ pivot if r >> top & 1 else r for r in rows]
    return rank


def test_example_1_certificates_against_oracle():
    plan = plan_from_matrix(EXAMPLE_1)
    for k, cert in enumerate(certify_plan(plan)):
        G, E, _ = gf2_system(plan, k)
        assert cert.decodable
        assert cert.rank == _gf2_rank_oracle(G)
        assert cert.rank_with_needs == _gf2_rank_oracle(np.vstack([G, E]))
    assert [c.needed for c in certify_plan(plan)] == list(EXAMPLE_1_VALUES["needed"])


def test_broken_plan_is_not_certified():
    # Drop the last cycle symbol: worker 0 (first of the cycle) can no longer peel to m_l.
    plan = plan_from_matrix(EXAMPLE_1)
    assert plan.n_cycles == 1
    lo, hi = int(plan.cycle_ptr[0]), int(plan.cycle_ptr[1])
    first = int(plan.cycle_workers[lo])
    broken = dataclasses.replace(
        plan,
        cycle_points=plan.cycle_points[: hi - 1],
        cycle_workers=plan.cycle_workers[: hi - 1],
        cycle_ptr=np.array([0, hi - 1 - lo]),
        uncoded_points=plan.uncoded_points,
    )
    assert not gf2_certificate(broken, first).decodable


def _random_plan(data) -> object:
    K = data.draw(st.integers(1, 5))
    N = K + data.draw(st.integers(0, 25))
    seed = data.draw(st.integers(0, 2**16))
    strategy = data.draw(st.sampled_from(["greedy", "exact"]))
    if data.draw(st.booleans()):  # equal-size batches from the epoch orders
        p0 = epoch_placement(N, K, seed=seed, epoch=0)
        p1 = epoch_placement(N, K, seed=seed, epoch=1)
    else:  # arbitrary placements: batch sizes may differ, leftovers go uncoded
        rng = np.random.default_rng(seed)
        p0 = placement_from_owner(rng.integers(0, K, N), K)
        p1 = placement_from_owner(rng.integers(0, K, N), K)
    return plan_delivery(p0, p1, strategy=strategy), seed


@settings(max_examples=30, deadline=None, derandomize=True)
@given(data=st.data())
def test_every_plan_is_decodable_by_rank_and_by_bytes(data):
    plan, seed = _random_plan(data)
    assert all(c.decodable for c in certify_plan(plan))
    ds = load_dataset(np.random.default_rng(seed).integers(0, 256, size=(plan.N, 9), dtype=np.uint8))
    frames = encode_plan(plan, ds, epoch=1)
    for k in range(plan.K):
        res = decode_worker(
            ds.cache(plan.placement_t.batch(k)),
            frames,
            need=plan.placement_t1.batch(k),
            worker=k,
            checksums=ds.checksums,
            strict=True,
        )
        assert np.array_equal(res.cache.data, np.asarray(ds.data)[plan.placement_t1.batch(k)])


def test_gf2_certificate_exceptions():
    plan = plan_from_matrix(EXAMPLE_1)
    with pytest.raises(TypeError, match="'plan'"):
        gf2_certificate(EXAMPLE_1, 0)
    with pytest.raises(ValueError, match="'worker'"):
        gf2_certificate(plan, 3)
    with pytest.raises(TypeError, match="'worker'"):
        gf2_certificate(plan, 0.0)
    big = plan_delivery(
        epoch_placement(20000, 2, seed=0, epoch=0), epoch_placement(20000, 2, seed=0, epoch=1)
    )
    with pytest.raises(ValueError, match="'plan' must involve at most"):
        gf2_certificate(big, 0)


def test_certify_plan_exceptions():
    with pytest.raises(TypeError, match="'plan'"):
        certify_plan(None)


def test_gf2_system_exceptions():
    with pytest.raises(TypeError, match="'plan'"):
        gf2_system("plan", 0)
    with pytest.raises(ValueError, match="'worker'"):
        gf2_system(plan_from_matrix(EXAMPLE_1), -1)


def test_certificates_without_galois_name_the_extra():
    # Without galois, one line that names the extra and the package, not a bare import error.
    code = (
        "import sys; sys.modules['galois'] = None\n"
        "from coded_shuffle.certificates import certify_plan\n"
        "from coded_shuffle.plan import plan_from_matrix\n"
        "try:\n"
        "    certify_plan(plan_from_matrix([[2, 1, 2], [2, 1, 2], [1, 3, 1]]))\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc)\n"
    )
    cmd = [sys.executable, "-c", code]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == (
        "GF(2) certificates need galois, which the extra [certificates] installs: pip install 'galois>=0.4'"
    )
