"""Tests of coded_shuffle.orders.quality: every figure checked against plain-Python loops."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.orders.quality import (
    batch_shard_counts,
    binomial_floor_pct,
    decile_chi_square,
    in_order_steps,
    longest_in_order_run,
    mixture_deviation,
    node_working_sets,
    quality_report,
)
from coded_shuffle.orders.shards import SHUFFLE_ALGORITHMS, shard_order


def shard_list(sizes):
    out = []
    for j, z in enumerate(sizes):
        out += [j] * z
    return out


# an order mixing runs in shard order and shuffled stretches, with its shard sizes
orders = st.lists(st.integers(1, 9), min_size=1, max_size=8).flatmap(
    lambda sizes: st.tuples(
        st.just(sizes),
        st.permutations(list(range(sum(sizes)))),
        st.lists(st.tuples(st.integers(0, sum(sizes)), st.integers(0, 12)), max_size=3),
    )
)


def with_sorted_runs(perm, runs):
    perm = list(perm)
    for a, k in runs:
        perm[a : a + k] = sorted(perm[a : a + k])
    return perm


# ------------------------------------------------------------------------------------------
# brute force
# ------------------------------------------------------------------------------------------


def brute_deviation(order, split, b, batches=None):
    N = len(order)
    devs = []
    for i in range(0, N, b):
        batch = order[i : i + b]
        a = sum(1 for x in batch if x < split)
        devs.append(abs(a / len(batch) - split / N) * 100)
    if batches is not None:
        devs = devs[:batches]
    return sum(devs) / len(devs), max(devs), len(devs)


def brute_steps(order, sizes):
    shard = shard_list(sizes)
    return [
        order[p + 1] == order[p] + 1 and shard[order[p]] == shard[order[p + 1]] for p in range(len(order) - 1)
    ]


def brute_longest(order, sizes):
    best = run = 1
    for ok in brute_steps(order, sizes):
        run = run + 1 if ok else 1
        best = max(best, run)
    return best


def brute_working_sets(order, sizes, C):
    shard = shard_list(sizes)
    N = len(order)
    distinct, peaks = [], []
    for c in range(C):
        seq = [shard[x] for x in order[N * c // C : N * (c + 1) // C]]
        distinct.append(len(set(seq)))
        peak = 0
        for p in range(len(seq)):
            opened = sum(1 for s in set(seq) if seq.index(s) <= p <= len(seq) - 1 - seq[::-1].index(s))
            peak = max(peak, opened)
        peaks.append(peak)
    return distinct, peaks


# ------------------------------------------------------------------------------------------
# figures against brute force
# ------------------------------------------------------------------------------------------


@settings(max_examples=80, deadline=None, derandomize=True)
@given(case=orders, b=st.integers(1, 10), batches=st.one_of(st.none(), st.integers(1, 5)))
def test_mixture_deviation_matches_brute_force(case, b, batches):
    sizes, perm, runs = case
    order = with_sorted_runs(perm, runs)
    split = sum(sizes) // 2
    got = mixture_deviation(order, split=split, batch_size=b, batches=batches)
    mean, top, count = brute_deviation(order, split, b, batches)
    assert got["mean_deviation_pct"] == pytest.approx(mean)
    assert got["max_deviation_pct"] == pytest.approx(top)
    assert got["batches"] == count


def test_mixture_deviation_reproduces_the_study_statistic():
    # The StreamingDataset shuffle study: deviation = (max(ja, en) / total - 0.5) * 100 per
    # batch, ja = first half of shards
    order = [0, 1, 2, 5, 3, 4, 6, 7]  # 4 shards of 2: ja = ids 0..3
    per_batch = []
    for i in range(0, 8, 4):
        ja = sum(1 for x in order[i : i + 4] if x < 4)
        per_batch.append((max(ja, 4 - ja) / 4 - 0.5) * 100)
    got = mixture_deviation(order, split=4, batch_size=4)
    assert got["mean_deviation_pct"] == pytest.approx(sum(per_batch) / 2) == pytest.approx(25.0)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(N=st.integers(10, 5000), data=st.data())
def test_decile_chi_square_matches_hand_computation(N, data):
    head = data.draw(st.lists(st.integers(0, N - 1), min_size=1, max_size=200, unique=True))
    got = decile_chi_square(head, N)
    counts = [0] * 10
    for x in head:
        counts[int(10 * x // N)] += 1
    widths = [sum(1 for x in range(N) if 10 * x // N == d) for d in range(10)]
    expected = [w * len(head) / N for w in widths]
    stat = sum((o - e) ** 2 / e for o, e in zip(counts, expected, strict=True))
    assert got["counts"] == counts
    assert got["statistic"] == pytest.approx(stat)
    assert got["n"] == len(head)


def test_decile_chi_square_flags_a_biased_head_and_passes_a_uniform_one(rng):
    N = 10**6
    assert decile_chi_square(rng.permutation(N)[:10_000], N)["pvalue"] > 1e-4
    biased = np.concatenate([rng.permutation(N // 2)[:6000], N // 2 + rng.permutation(N // 2)[:4000]])
    assert decile_chi_square(biased, N)["pvalue"] < 1e-6


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=orders, b=st.integers(1, 10))
def test_batch_shard_counts_matches_brute_force(case, b):
    sizes, perm, runs = case
    order = with_sorted_runs(perm, runs)
    shard = shard_list(sizes)
    counts = [len({shard[x] for x in order[i : i + b]}) for i in range(0, len(order), b)]
    got = batch_shard_counts(order, shard_sizes=sizes, batch_size=b)
    assert got["mean_shards_per_batch"] == pytest.approx(sum(counts) / len(counts))
    assert got["max_shards_per_batch"] == max(counts)
    assert got["batches"] == len(counts)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=orders, C=st.integers(1, 3))
def test_node_working_sets_matches_brute_force(case, C):
    sizes, perm, runs = case
    order = with_sorted_runs(perm, runs)
    C = min(C, len(order))
    distinct, peaks = brute_working_sets(order, sizes, C)
    got = node_working_sets(order, shard_sizes=sizes, canonical_nodes=C)
    assert got["shards_per_node"] == distinct
    assert got["max_open_shards"] == peaks
    assert got["max_open_shards_per_node"] == max(peaks)
    assert got["mean_shards_per_node"] == pytest.approx(sum(distinct) / C)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(S=st.integers(1, 6), Z=st.integers(1, 6), b=st.integers(1, 7), data=st.data())
def test_locality_with_equal_shards_matches_brute_force(S, Z, b, data):
    sizes = [Z] * S
    order = data.draw(st.permutations(list(range(S * Z))))
    shard = shard_list(sizes)
    counts = [len({shard[x] for x in order[i : i + b]}) for i in range(0, len(order), b)]
    got = batch_shard_counts(order, shard_sizes=sizes, batch_size=b)
    assert got["max_shards_per_batch"] == max(counts)
    assert got["mean_shards_per_batch"] == pytest.approx(sum(counts) / len(counts))
    distinct, peaks = brute_working_sets(order, sizes, 1)
    assert node_working_sets(order, shard_sizes=sizes, canonical_nodes=1)["max_open_shards"] == peaks


@settings(max_examples=80, deadline=None, derandomize=True)
@given(case=orders)
def test_in_order_figures_match_brute_force(case):
    sizes, perm, runs = case
    order = with_sorted_runs(perm, runs)
    assert in_order_steps(order, shard_sizes=sizes).tolist() == brute_steps(order, sizes)
    assert longest_in_order_run(order, shard_sizes=sizes) == brute_longest(order, sizes)


def test_longest_in_order_run_breaks_at_shard_boundaries():
    # 0..5 in order, but shards are [0, 1, 2] and [3, 4, 5]
    assert longest_in_order_run(list(range(6)), shard_sizes=[3, 3]) == 3
    assert longest_in_order_run(list(range(6)), shard_sizes=[6]) == 6
    assert longest_in_order_run([1, 0], shard_sizes=[2]) == 1


def test_binomial_floor_matches_exact_binomial_mean():
    # E|X/b - 1/2| for X ~ Bin(b, 1/2), summed exactly; FACTS: binomial floor 0.892% at b = 2000.
    b = 2000
    from fractions import Fraction

    total = sum(math.comb(b, x) * abs(Fraction(x, b) - Fraction(1, 2)) for x in range(b + 1))
    exact = float(total / 2**b) * 100
    assert binomial_floor_pct(b) == pytest.approx(exact, abs=2e-3)
    assert round(binomial_floor_pct(b), 3) == 0.892


# ------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------

REPORT = {"shards": 40, "shard_size": 50, "block_size": 256, "batches": 5, "batch_size": 40, "seed": 2}


@pytest.mark.parametrize("algo", sorted(SHUFFLE_ALGORITHMS))
def test_quality_report_is_plain_json_and_consistent(algo):
    r = quality_report(algo, **REPORT, canonical_nodes=2, epoch=3)
    assert json.loads(json.dumps(r)) == r
    for key in (
        "algo",
        "mean_deviation_pct",
        "max_deviation_pct",
        "seconds",
        "epoch_mean_deviation_pct",
        "epoch_max_deviation_pct",
        "mean_shards_per_batch",
        "max_open_shards_per_node",
        "longest_in_order_run",
    ):
        assert key in r
    assert all(type(v) in (str, int, float) for v in r.values())
    order = shard_order(algo, [50] * 40, canonical_nodes=2, seed=2, epoch=3, block_size=256).tolist()
    mean, top, _ = brute_deviation(order, 20 * 50, 40, 5)
    assert r["mean_deviation_pct"] == pytest.approx(mean)
    assert r["max_deviation_pct"] == pytest.approx(top)
    assert r["longest_in_order_run"] == brute_longest(order, [50] * 40)


def test_quality_report_ranks_naive_above_intra_shard_shuffles():
    # Compared on the whole-epoch deviation averaged over seeds: the head of one seed is noise.
    def mean_over_seeds(algo, key):
        return np.mean(
            [
                quality_report(
                    algo, shards=100, shard_size=100, batches=20, batch_size=200, block_size=2000, seed=s
                )[key]
                for s in range(1, 6)
            ]
        )

    dev = {a: mean_over_seeds(a, "epoch_mean_deviation_pct") for a in ("naive", "py1s", "py1br")}
    assert dev["naive"] < dev["py1br"] < dev["py1s"]
    assert mean_over_seeds("py1s", "max_open_shards_per_node") == 1
    assert mean_over_seeds("naive", "max_open_shards_per_node") == 100


# ------------------------------------------------------------------------------------------
# bad inputs
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: mixture_deviation([0, 1], split=3, batch_size=1), ValueError, "'split' must be at most"),
        (
            lambda: mixture_deviation([0, 1], split=1, batch_size=0),
            ValueError,
            "'batch_size' must be at least 1",
        ),
        (lambda: mixture_deviation([0, 1], split=1, batch_size=1, batches=0), ValueError, "'batches'"),
        (lambda: mixture_deviation([[0, 1]], split=1, batch_size=1), ValueError, "'order' must have 1 dim"),
        (lambda: decile_chi_square([], 10), ValueError, "'head' must hold at least 1 value"),
        (lambda: decile_chi_square([10], 10), ValueError, r"'head' must hold values in \[0, 10\)"),
        (lambda: decile_chi_square([1], 0), ValueError, "'N' must be at least 1"),
        (lambda: decile_chi_square([1], 10, bins=1), ValueError, "'bins' must be at least 2"),
        (lambda: batch_shard_counts([0, 1], shard_sizes=[3], batch_size=1), ValueError, "must sum to len"),
        (lambda: batch_shard_counts([0, 1], shard_sizes=[2, 0], batch_size=1), ValueError, "'shard_sizes'"),
        (
            lambda: node_working_sets([0, 1], shard_sizes=[2], canonical_nodes=3),
            ValueError,
            "'canonical_nodes'",
        ),
        (lambda: in_order_steps([0, 1], shard_sizes=[1]), ValueError, "must sum to len"),
        (lambda: binomial_floor_pct(0), ValueError, "'batch_size' must be at least 1"),
        (lambda: binomial_floor_pct(10, fraction=2.0), ValueError, "'fraction' must be in"),
        (lambda: quality_report("py9", shards=2, shard_size=2), ValueError, "'algo' must be one of"),
        (lambda: quality_report("py1b", shards=1, shard_size=2), ValueError, "'shards' must be at least 2"),
        (
            lambda: quality_report("py1b", shards=2, shard_size=0),
            ValueError,
            "'shard_size' must be at least 1",
        ),
        (lambda: quality_report("py1b", shards=2, shard_size=2, seed=-1), ValueError, "'seed'"),
        (lambda: quality_report("py1b", shards=2, shard_size=2, batch_size=1.5), TypeError, "'batch_size'"),
    ],
)
def test_quality_exceptions(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_quality_report_progress():
    from coded_shuffle.orders.quality import REPORT_STEPS, quality_report

    done: list[int] = []
    r = quality_report("py1s", shards=6, shard_size=20, batches=2, batch_size=10, progress=done.append)
    assert done == list(range(1, REPORT_STEPS + 1))
    del r["seconds"]
    plain = quality_report("py1s", shards=6, shard_size=20, batches=2, batch_size=10)
    del plain["seconds"]
    assert r == plain
