"""Who reads each byte of a frame (``coded_shuffle.codec.frame_scopes``), against a byte-by-byte
brute force from the frame's parsed entries and receiver index."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.codec import (
    EVERY_WORKER,
    encode_plan,
    encode_plan_arrays,
    encode_terms,
    frame_scopes,
    load_dataset,
    parse_frame,
)
from coded_shuffle.orders import epoch_placement
from coded_shuffle.plan import plan_delivery


def _readers_by_brute_force(raw: np.ndarray) -> np.ndarray:
    """Each byte's readers as a bit mask (-1: every worker), one symbol at a time."""
    f = parse_frame(raw)
    out = np.full(raw.shape[0], EVERY_WORKER, dtype=np.int64)
    at = f.wire_bytes - f.payload_bytes
    for s in range(f.n_symbols):
        mask = 0
        for w, first, count in f.runs.tolist():
            if first <= s < first + count:
                mask |= 1 << w
        width = f.record_bytes if f.len_a is None else max(int(f.len_a[s]), int(f.len_b[s]))
        out[at : at + width] = mask if mask else EVERY_WORKER
        at += width
    return out


def _expanded(bounds: np.ndarray, receivers: np.ndarray) -> np.ndarray:
    return np.repeat(receivers, np.diff(bounds))


@pytest.mark.parametrize(
    ("K", "variable", "per"), [(2, False, 7), (4, False, 50), (5, True, 13), (6, False, 10_000)]
)
def test_each_byte_is_read_by_the_workers_its_symbol_is_addressed_to(rng, K, variable, per):
    N, B = 60 * K, 24
    if variable:
        lengths = rng.integers(1, B, N)
        ds = load_dataset([bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in lengths])
    else:
        ds = load_dataset(rng.integers(0, 256, (N, B), dtype=np.uint8))
    plan = plan_delivery(epoch_placement(N, K, seed=3, epoch=0), epoch_placement(N, K, seed=3, epoch=1))
    frames = encode_plan(plan, ds, epoch=1, max_frame_bytes=per * ds.record_bytes)
    masks = set()
    for raw in frames:
        bounds, receivers = frame_scopes(raw)
        assert bounds[0] == 0 and bounds[-1] == raw.shape[0] and np.all(np.diff(bounds) > 0)
        assert np.all(receivers[1:] != receivers[:-1])  # neighbours of one mask are joined
        np.testing.assert_array_equal(_expanded(bounds, receivers), _readers_by_brute_force(raw))
        masks |= set(receivers.tolist())
    pairs = {m for m in masks if m > 0 and bin(m).count("1") == 2}
    assert len(pairs) == K * (K - 1) // 2  # every pair of workers has its order-2 symbols


def test_a_frame_without_an_index_or_of_many_terms_is_every_workers(rng):
    ds = load_dataset(rng.integers(0, 256, (6, 16), dtype=np.uint8))
    for raw in (
        encode_plan_arrays(ds, [0, 1], [2, -1], epoch=0),
        *encode_terms(ds, [0, 2, 3], [0, 1, 2], epoch=0),
    ):
        bounds, receivers = frame_scopes(raw)
        assert bounds.tolist() == [0, raw.shape[0]] and receivers.tolist() == [EVERY_WORKER]


@pytest.mark.parametrize("K", [2, 3, 5, 8])
def test_every_scoped_group_is_named_by_its_members_and_back(K):
    from coded_shuffle.transport.multicast import _group_index, _group_members, _worker_groups

    members = _group_members(K)
    assert len(members) == 1 + K * (K - 1) // 2 + K and members[0] == list(range(K))
    seen = {0}
    for i in range(K):  # every pair and every worker alone, by brute force
        for j in range(i, K):
            g = _group_index((1 << i) | (1 << j), K)
            assert members[g] == sorted({i, j}) and g not in seen
            seen.add(g)
        assert sorted(g for g in range(len(members)) if i in members[g]) == sorted(_worker_groups(i, K))
    assert seen == set(range(len(members)))
