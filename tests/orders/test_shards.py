"""Tests of coded_shuffle.orders.shards: each algorithm's semantics, checked by brute force.

The reference semantics are those of MosaicML streaming's ``streaming/base/shuffle`` modules
(naive, py1s, py2s, py1b, py1br, py1e) and of streaming's "Expanded range shuffle" pull request (py1e).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coded_shuffle.orders import shards
from coded_shuffle.orders.permutation import epoch_rng
from coded_shuffle.orders.shards import (
    SHUFFLE_ALGORITHMS,
    naive,
    node_bounds,
    py1b,
    py1br,
    py1e,
    py1s,
    py2s,
    shard_order,
)

ALGOS = sorted(SHUFFLE_ALGORITHMS)
NODE_ALGOS = [a for a in ALGOS if a != "naive"]


# ------------------------------------------------------------------------------------------
# brute-force oracles (plain Python)
# ------------------------------------------------------------------------------------------


def shard_of_sample(sizes):
    out = []
    for j, z in enumerate(sizes):
        out += [j] * z
    return out


def bounds_of(N, C):
    return [N * c // C for c in range(C + 1)]


def layout_pieces(layout, sizes, C):
    """Maximal runs x, x+1, ... of one shard inside one node span of the layout."""
    shard = shard_of_sample(sizes)
    cuts = set(bounds_of(len(layout), C))
    pieces, start = [], 0
    for p in range(1, len(layout) + 1):
        if (
            p == len(layout)
            or p in cuts
            or layout[p] != layout[p - 1] + 1
            or shard[layout[p]] != shard[layout[p - 1]]
        ):
            pieces.append((start, p))
            start = p
    return pieces


def closed_points(out, layout):
    """Positions p with set(out[:p]) == set(layout[:p])."""
    where = {x: i for i, x in enumerate(layout)}
    points, reach = [0], -1
    for p, x in enumerate(out):
        reach = max(reach, where[x])
        if reach == p:
            points.append(p + 1)
    return points


def node_sets(order, C):
    b = bounds_of(len(order), C)
    return [sorted(order[b[c] : b[c + 1]]) for c in range(C)]


def call(algo, sizes, C=1, seed=0, epoch=0, B=8):
    out = shard_order(algo, sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B)
    return out.tolist()


cases = st.tuples(
    st.lists(st.integers(1, 30), min_size=1, max_size=12),
    st.integers(1, 4),
    st.integers(1, 64),
    st.integers(0, 2**32),
    st.integers(0, 5),
)


# ------------------------------------------------------------------------------------------
# every algorithm
# ------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=cases)
def test_every_algorithm_returns_a_permutation(case):
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    for algo in ALGOS:
        out = shard_order(algo, sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B)
        assert out.dtype == np.int64
        assert not out.flags.writeable
        assert sorted(out.tolist()) == list(range(sum(sizes)))


@pytest.mark.parametrize("algo", ALGOS)
def test_deterministic_per_seed_and_epoch(algo):
    sizes = [40] * 10 + [7]
    a = call(algo, sizes, C=3, seed=5, epoch=2, B=32)
    assert a == call(algo, sizes, C=3, seed=5, epoch=2, B=32)
    assert a != call(algo, sizes, C=3, seed=5, epoch=3, B=32)
    assert a != call(algo, sizes, C=3, seed=6, epoch=2, B=32)


@pytest.mark.parametrize("algo", ALGOS)
def test_shard_order_dispatches_by_name(algo):
    direct = SHUFFLE_ALGORITHMS[algo]([9, 9, 9], canonical_nodes=2, seed=1, epoch=1, block_size=4)
    assert direct.tolist() == call(algo, [9, 9, 9], C=2, seed=1, epoch=1, B=4)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
@pytest.mark.parametrize("algo", NODE_ALGOS)
def test_nodes_hold_the_same_samples_every_epoch(algo, case):
    # streaming: "the assignment of shards to nodes is fixed across epochs"
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    first = node_sets(call(algo, sizes, C, seed, epoch, B), C)
    assert first == node_sets(call(algo, sizes, C, seed, epoch + 1, B), C)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_layout_is_shards_in_run_order_cut_at_node_spans(case):
    # py1b with block_size=1 leaves the shared piece layout untouched.
    sizes, C, _, seed, epoch = case
    C = min(C, sum(sizes))
    layout = call("py1b", sizes, C, seed, epoch, 1)
    pieces = layout_pieces(layout, sizes, C)
    shard = shard_of_sample(sizes)
    begin = np.cumsum([0] + sizes).tolist()
    # every piece is a run of one shard; a shard lies in one node unless cut at a span boundary
    per_shard = {}
    for a, b in pieces:
        per_shard.setdefault(shard[layout[a]], []).append((layout[a], layout[b - 1] + 1))
    assert sorted(per_shard) == list(range(len(sizes)))
    for j, parts in per_shard.items():
        covered = sorted(parts)
        assert covered[0][0] == begin[j] and covered[-1][1] == begin[j + 1]
        assert all(covered[i][1] == covered[i + 1][0] for i in range(len(covered) - 1))
    assert len(pieces) <= len(sizes) + C - 1


# ------------------------------------------------------------------------------------------
# per algorithm
# ------------------------------------------------------------------------------------------


def test_naive_is_a_plain_permutation():
    out = naive([5, 6, 7], canonical_nodes=2, seed=3, epoch=4, block_size=2)
    assert out.tolist() == epoch_rng(3, 4).permutation(18).tolist()


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_py1s_shuffles_only_inside_pieces(case):
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    layout = call("py1b", sizes, C, seed, epoch, 1)
    out = py1s(sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B).tolist()
    for a, b in layout_pieces(layout, sizes, C):
        assert sorted(out[a:b]) == layout[a:b]


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_py2s_reads_each_shard_in_one_stretch_per_node(case):
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    out = py2s(sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B).tolist()
    shard = shard_of_sample(sizes)
    b = bounds_of(len(out), C)
    for c in range(C):
        seq = [shard[x] for x in out[b[c] : b[c + 1]]]
        changes = sum(seq[i] != seq[i + 1] for i in range(len(seq) - 1))
        assert changes == len(set(seq)) - 1


def test_py2s_splits_shards_at_random_samples_py1s_at_a_prefix():
    # py1s "assigns samples non-randomly when splitting shards at node boundaries"; py2s does not.
    sizes, C = [10, 10, 10], 2  # 30 samples: the span boundary at 15 cuts a shard in two
    py1s_sets, py2s_sets = set(), set()
    for seed in range(30):
        for algo, seen in (("py1s", py1s_sets), ("py2s", py2s_sets)):
            node0 = node_sets(call(algo, sizes, C, seed, 0), C)[0]
            split = [x for x in node0 if sum(1 for y in node0 if y // 10 == x // 10) < 10]
            seen.add(split[-1] - split[0] + 1 == len(split))
    assert py1s_sets == {True}
    assert False in py2s_sets


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_py1b_keeps_each_sample_in_its_block(case):
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    layout = call("py1b", sizes, C, seed, epoch, 1)
    out = py1b(sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B).tolist()
    b = bounds_of(len(out), C)
    for c in range(C):
        for s in range(b[c], b[c + 1], B):
            e = min(s + B, b[c + 1])
            assert sorted(out[s:e]) == sorted(layout[s:e])


def py1br_limits(B):
    low = max(1, 3 * B // 4)
    high = max(low + 1, 5 * B // 4)  # exclusive
    smallest = max(1, low // 2)
    return low, high, smallest


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_py1br_keeps_each_sample_in_a_block_of_bounded_size(case):
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    layout = call("py1b", sizes, C, seed, epoch, 1)
    out = py1br(sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B).tolist()
    low, high, smallest = py1br_limits(B)
    points = closed_points(out, layout)
    assert set(bounds_of(len(out), C)) <= set(points)
    assert max(q - p for p, q in zip(points, points[1:], strict=False)) <= (high - 1) + (smallest - 1)


def test_py1br_shuffles_the_tail_of_every_node():
    # streaming's py1br can leave up to 0.75 B samples at a node's end in shard order; here the
    # last block of each node is at least half the smallest block size and is shuffled.
    sizes, C, B = [50] * 40, 4, 64
    _, _, smallest = py1br_limits(B)
    shard = shard_of_sample(sizes)
    for seed in range(60):
        out = py1br(sizes, canonical_nodes=C, seed=seed, epoch=1, block_size=B).tolist()
        for end in bounds_of(len(out), C)[1:]:
            tail = out[end - smallest : end]
            steps = sum(
                tail[i + 1] == tail[i] + 1 and shard[tail[i]] == shard[tail[i + 1]]
                for i in range(len(tail) - 1)
            )
            assert steps < smallest // 2, (seed, end, steps)


def streaming_cursor_tail(m, B, stagger, sizes_drawn):
    """Samples left outside every block by streaming's py1br cursor rule (brute force)."""
    ranges, end, k = [], 0, 0
    while end < m:
        r = sizes_drawn[k]
        k += 1
        start = max(end - stagger, 0)
        stop = min(end + r - stagger, m)
        ranges.append((start, stop))
        end += stop - start
    covered = set()
    for a, b in ranges:
        covered.update(range(a, b))
    return m - len(covered)


def test_streaming_cursor_rule_leaves_a_tail_which_ours_does_not(rng):
    # The defect our py1br avoids, reproduced from streaming's block loop.
    B, m = 64, 1000
    low, high, _ = py1br_limits(B)
    tails = []
    for _ in range(200):
        stagger = int(rng.integers(0, 3 * B // 4))
        drawn = rng.integers(low, high, size=100).tolist()
        tails.append(streaming_cursor_tail(m, B, stagger, drawn))
        cuts = shards._py1br_cuts(np.random.default_rng(len(tails)), m, B, stagger)
        assert cuts[0] == 0 and cuts[-1] == m and np.all(np.diff(cuts) > 0)
    assert max(tails) > 0
    assert max(tails) < 3 * B // 4


@settings(max_examples=40, deadline=None, derandomize=True)
@given(case=cases)
def test_py1e_moves_samples_within_the_expanded_range_of_their_piece(case):
    # The py1e pull request: each shard's samples spread over a window of at most about one
    # shuffle block, never across a canonical node boundary.
    sizes, C, B, seed, epoch = case
    C = min(C, sum(sizes))
    layout = call("py1b", sizes, C, seed, epoch, 1)
    out = py1e(sizes, canonical_nodes=C, seed=seed, epoch=epoch, block_size=B).tolist()
    where = {x: p for p, x in enumerate(out)}
    reach = 5 * B // 4
    b = bounds_of(len(out), C)
    for a, e in layout_pieces(layout, sizes, C):
        c = max(i for i in range(C) if b[i] <= a)
        for x in layout[a:e]:
            assert max(a - reach, b[c]) <= where[x] < min(e + reach, b[c + 1])


def test_py1e_spreads_a_shard_over_about_a_block():
    # The py1e pull request's example: 10 shards of 100 samples, block 500. The first shard's window is cut at
    # the node start; a middle shard's samples spread beyond its own 100 positions.
    sizes, B = [100] * 10, 500
    layout = call("py1b", sizes, 1, 7, 0, 1)
    out = py1e(sizes, canonical_nodes=1, seed=7, epoch=0, block_size=B).tolist()
    where = {x: p for p, x in enumerate(out)}
    middle = layout[400:500]
    spread = max(where[x] for x in middle) - min(where[x] for x in middle)
    assert 150 < spread < 5 * B // 4 + 100


@pytest.mark.parametrize("algo", ALGOS)
def test_chunked_paths_keep_the_semantics(algo, monkeypatch):
    # Small chunks exercise segment gathering, in-place big segments and the py1e sweep.
    monkeypatch.setattr(shards, "_CHUNK", 16)
    sizes, C, B = [37, 5, 60, 60, 60, 13, 90], 2, 24
    out = call(algo, sizes, C, 3, 1, B)
    assert sorted(out) == list(range(sum(sizes)))
    if algo != "naive":
        assert node_sets(out, C) == node_sets(call(algo, sizes, C, 3, 2, B), C)
    if algo == "py1b":
        layout = call("py1b", sizes, C, 3, 1, 1)
        b = bounds_of(len(out), C)
        for c in range(C):
            for s in range(b[c], b[c + 1], B):
                e = min(s + B, b[c + 1])
                assert sorted(out[s:e]) == sorted(layout[s:e])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(0, 5000), spread=st.floats(0.0, 1e4), offset=st.floats(-1e9, 1e9))
def test_packed_key_sort_sorts(n, spread, offset):
    keys = offset + np.arange(n) + np.random.default_rng(n).uniform(-spread, spread, size=n)
    order = shards._argsort_keys(keys)
    assert sorted(order.tolist()) == list(range(n))
    assert (np.diff(keys[order]) >= 0).all()


def test_node_bounds_matches_streaming_division():
    # streaming divide_spans: part_end = num_samples * (part + 1) // num_parts
    for N in (1, 7, 100, 10**12 + 3):
        for C in (1, 3, 7):
            if C <= N:
                assert node_bounds(N, C) == bounds_of(N, C)


# ------------------------------------------------------------------------------------------
# bad inputs
# ------------------------------------------------------------------------------------------

GOOD = {"canonical_nodes": 2, "seed": 0, "epoch": 0, "block_size": 4}


@pytest.mark.parametrize(
    "algo, sizes, changes, error, match",
    [
        (3, [4, 4], {}, TypeError, "'algo' must be a str"),
        ("py3x", [4, 4], {}, ValueError, "'algo' must be one of"),
        ("py1b", [], {}, ValueError, "'shard_sizes' must hold at least 1 shard"),
        ("py1b", [[4, 4]], {}, ValueError, "'shard_sizes' must have 1 dimension"),
        ("py1b", [4, 0], {}, ValueError, "'shard_sizes' must hold sizes of at least 1, not 0"),
        ("py1b", [4, -1], {}, ValueError, "'shard_sizes' must hold sizes of at least 1, not -1"),
        ("py1b", [4.5, 4], {}, ValueError, "'shard_sizes' must hold integers"),
        ("py1b", ["a"], {}, ValueError, "'shard_sizes' must hold integers"),
        ("py1b", [True, True], {}, ValueError, "'shard_sizes' must hold integers"),
        ("py1b", [4, 4], {"canonical_nodes": 0}, ValueError, "'canonical_nodes' must be at least 1, not 0"),
        ("py1b", [1, 1], {"canonical_nodes": 3}, ValueError, "'canonical_nodes' must be at most"),
        ("py1b", [4, 4], {"canonical_nodes": 1.0}, TypeError, "'canonical_nodes' must be an int"),
        ("py1e", [4, 4], {"seed": -1}, ValueError, "'seed' must be at least 0, not -1"),
        ("py1e", [4, 4], {"epoch": -2}, ValueError, "'epoch' must be at least 0, not -2"),
        ("py1br", [4, 4], {"block_size": 0}, ValueError, "'block_size' must be at least 1, not 0"),
        ("py1br", [4, 4], {"block_size": "8"}, TypeError, "'block_size' must be an int"),
        ("naive", [4, 4], {"seed": None}, TypeError, "'seed' must be an int"),
    ],
)
def test_shard_order_exceptions(algo, sizes, changes, error, match):
    with pytest.raises(error, match=match):
        shard_order(algo, sizes, **{**GOOD, **changes})


@pytest.mark.parametrize("algo", ALGOS)
def test_each_algorithm_exceptions(algo):
    f = SHUFFLE_ALGORITHMS[algo]
    with pytest.raises(ValueError, match="'shard_sizes'"):
        f([0], **GOOD)
    with pytest.raises(ValueError, match="'canonical_nodes'"):
        f([3], **{**GOOD, "canonical_nodes": 4})
    with pytest.raises(TypeError):
        f([3], 1, 0, 0)  # options are keyword-only


def test_node_bounds_exceptions():
    with pytest.raises(ValueError, match="'N' must be at least 1, not 0"):
        node_bounds(0, 1)
    with pytest.raises(ValueError, match="'canonical_nodes' must be at most N = 2, not 3"):
        node_bounds(2, 3)
