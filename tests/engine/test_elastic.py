"""Tests of coded_shuffle.engine.elastic: transitions from K to K' workers and from any holdings."""

from __future__ import annotations

import re

import numpy as np
import pytest

from coded_shuffle.codec import Cache, load_dataset
from coded_shuffle.engine import initial_caches, synthetic_dataset
from coded_shuffle.engine.elastic import (
    batches_of,
    elastic_run,
    elastic_transition,
    held_placement,
    remainder_batches,
    resume_epoch,
)
from coded_shuffle.orders import epoch_order, epoch_placement, placement_from_owner
from coded_shuffle.plan import plan_delivery
from tests.oracles import brute_bound

N, B = 240, 16


@pytest.fixture(scope="module")
def ds():
    return synthetic_dataset(N, B, seed=4)


def _holds_exactly(ds, caches, placement):
    """Independent check: worker k holds the dataset's bytes of its batch, nothing else."""
    for k, c in enumerate(caches):
        assert np.array_equal(c.ids, np.flatnonzero(np.asarray(placement.owner) == k))
        assert np.array_equal(np.asarray(c.data), ds.data[c.ids])


@pytest.mark.parametrize("K, K2", [(8, 6), (6, 8), (3, 5), (5, 3), (4, 4)])
@pytest.mark.parametrize("mode", ["coded", "uncoded", "exchange"])
def test_K_to_K_prime_is_verified_and_meets_the_rectangular_bound(ds, K, K2, mode):
    p0, p1 = epoch_placement(N, K, seed=2, epoch=0), epoch_placement(N, K2, seed=2, epoch=1)
    caches = initial_caches(ds, p0)
    holdings = [caches[k] if k < K else None for k in range(K2)]  # leavers gone, joiners empty
    rep, new = elastic_transition(ds, holdings, p1, epoch=1, mode=mode)
    assert rep.verified and rep.transition.repairs == 0
    _holds_exactly(ds, new, p1)
    a, b = np.asarray(p0.owner), np.asarray(p1.owner)
    left = int(np.sum(a >= K2))  # the leaving workers' records: no worker holds them any more
    assert rep.source_records == left and rep.source_bytes == left * B
    assert rep.joined == tuple(range(K, K2))
    assert rep.kept_records == int(np.sum(a == b)) and rep.held_records == N - left
    # The bound of the rectangular K x K' shuffle, by its definition over every ordering of the
    # max(K, K') workers (a joining worker's row and a leaving worker's column are zero).
    S = np.zeros((max(K, K2),) * 2, dtype=np.int64)
    np.add.at(S, (a, b), 1)
    assert rep.bound == brute_bound(S)
    assert rep.bound_bytes == rep.bound * B
    moved = int(np.sum(a != b))
    assert rep.transition.uncoded_symbols == moved
    # Merging the leavers into one source slot costs nothing: the coded load is the elastic
    # planner's on the K x K' placements themselves.
    assert rep.transition.coded_symbols == plan_delivery(p0, p1).n_symbols
    assert rep.bound <= rep.transition.coded_symbols <= moved
    if mode == "exchange":
        assert rep.peer_bytes == (moved - left) * B
        assert rep.transition.wire_bytes == 0  # the master sends nothing
    else:
        assert rep.peer_bytes == 0
        assert rep.symbols == (rep.transition.coded_symbols if mode == "coded" else moved)


@pytest.mark.parametrize("K, K2", [(4, 3), (3, 4)])
def test_the_bound_in_bytes_of_records_of_different_sizes(K, K2):
    """With sizes, the bound weighs every record by its bytes: by its definition over every
    ordering, each byte a point (an empty record counts for nothing)."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, size=60)
    ds = load_dataset([rng.bytes(int(n)) for n in lengths])
    p0, p1 = epoch_placement(60, K, seed=3, epoch=0), epoch_placement(60, K2, seed=3, epoch=1)
    caches = initial_caches(ds, p0)
    rep, _ = elastic_transition(ds, [caches[k] if k < K else None for k in range(K2)], p1, epoch=1)
    S = np.zeros((max(K, K2),) * 2, dtype=np.int64)
    np.add.at(S, (np.asarray(p0.owner), np.asarray(p1.owner)), lengths)
    assert rep.verified and rep.bound_bytes == brute_bound(S) > 0


def test_a_damaged_or_doubled_record_is_absent_and_delivered_again(ds):
    p0, p1 = epoch_placement(N, 4, seed=1, epoch=0), epoch_placement(N, 4, seed=1, epoch=1)
    caches = initial_caches(ds, p0)
    bad = caches[2].data.copy()
    bad[5, 3] ^= 0x40  # one bit of one record
    caches[2] = Cache(ids=caches[2].ids, data=bad, lengths=None)
    # Worker 0 also holds a copy of a record of worker 1's batch that worker 0 needs next: that
    # copy is kept where it goes, worker 1's dropped.
    extra = int(np.intersect1d(caches[1].ids, p1.batch(0))[0])
    both = np.union1d(caches[0].ids, [extra])
    caches[0] = ds.cache(both)
    rep, new = elastic_transition(ds, caches, p1, epoch=1, mode="coded")
    assert rep.verified and rep.dropped_records == 2
    assert rep.source_records == 1  # the damaged record: no worker holds it whole
    _holds_exactly(ds, new, p1)
    held, rows, dropped = held_placement(ds, caches, p1)
    assert dropped == 2 and int(held.owner[int(caches[2].ids[5])]) == 4  # the source slot
    assert int(held.owner[extra]) == 0 and extra not in caches[1].ids[rows[1]]


def test_a_cache_out_of_order_or_with_a_record_twice(ds):
    """A cache is whatever a worker brings: ids out of order are taken in order, and a record held
    twice by one worker is one record held and one copy dropped (it was once delivered wrong,
    unverified, and once not counted)."""
    p1 = epoch_placement(N, 4, seed=1, epoch=1)
    mine = p1.batch(0)[:6]
    ids = np.concatenate([mine[::-1], mine[:2]])  # decreasing, then two of them again
    brought = Cache(ids=ids, data=ds.data[ids].copy(), lengths=None)
    rep, new = elastic_transition(ds, [brought, None, None, None], p1, epoch=1)
    assert rep.verified and rep.dropped_records == 2 and rep.held_records == 6 and rep.kept_records == 6
    _holds_exactly(ds, new, p1)


def test_a_restart_with_nothing_delivers_everything_from_the_source(ds):
    p1 = epoch_placement(N, 4, seed=3, epoch=5)
    rep, new = elastic_transition(ds, [None] * 4, p1, epoch=5, mode="exchange")
    assert rep.verified and rep.source_records == N and rep.peer_bytes == 0 and rep.joined == (0, 1, 2, 3)
    assert rep.bound == N  # every record is wanted and held by no worker
    _holds_exactly(ds, new, p1)


def test_elastic_run_follows_the_worker_counts(ds):
    reps = elastic_run(ds, workers=[8, 6, 8], seed=2, mode="coded")
    assert [r.K for r in reps] == [6, 8] and all(r.verified for r in reps)
    first = np.asarray(epoch_placement(N, 8, seed=2, epoch=0).owner)
    assert reps[0].source_records == int(np.sum(first >= 6))
    assert reps[1].source_records == 0 and reps[1].joined == (6, 7)
    assert set(reps[0].to_dict()) >= {"K", "bound", "source_bytes", "peer_bytes", "verified", "transition"}


def test_elastic_exceptions(ds):
    p1 = epoch_placement(N, 4, seed=0, epoch=1)
    with pytest.raises(ValueError, match="'holdings' must be a sequence of K' = 4"):
        elastic_transition(ds, [None] * 3, p1, epoch=1)
    with pytest.raises(TypeError, match="'holdings' must hold Cache objects or None, not int at 1"):
        elastic_transition(ds, [None, 3, None, None], p1, epoch=1)
    wide = synthetic_dataset(N, B + 1, seed=0).cache([0])
    with pytest.raises(ValueError, match="records of 16 bytes, not 17"):
        elastic_transition(ds, [wide, None, None, None], p1, epoch=1)
    with pytest.raises(ValueError, match="'mode' must be one of"):
        elastic_transition(ds, [None] * 4, p1, epoch=1, mode="split")
    with pytest.raises(ValueError, match="'placement_next' must be a Placement of the dataset's N = 240"):
        elastic_transition(ds, [None] * 2, placement_from_owner([0, 1], 2), epoch=1)
    with pytest.raises(ValueError, match="'workers' must be at most N = 240"):
        elastic_run(ds, workers=[4, 241], seed=0)
    with pytest.raises(ValueError, match="'workers' must be a sequence"):
        elastic_run(ds, workers=[], seed=0)
    # Checked before any epoch runs, even with one worker count (no transition at all).
    with pytest.raises(ValueError, match="'mode' must be one of"):
        elastic_run(ds, workers=[4], seed=0, mode="split")
    with pytest.raises(TypeError, match="'dataset' must be a Dataset, not ndarray"):
        elastic_run(ds.data, workers=[4], seed=0)


def test_resume_exceptions(ds):
    resume = {"K": 4, "seed": 1, "epoch": 0, "consumed": [0] * 4}
    with pytest.raises(TypeError, match="'holdings' must hold Cache objects or None, not str at 0"):
        resume_epoch(ds, ["cache", None], **resume)
    narrow = synthetic_dataset(N, B - 1, seed=0).cache([0])
    with pytest.raises(ValueError, match="'holdings' must hold records of 16 bytes, not 15 \\(worker 1\\)"):
        resume_epoch(ds, [None, narrow], **resume)
    with pytest.raises(ValueError, match="'holdings' must be a sequence of at least one"):
        resume_epoch(ds, [], **resume)
    from coded_shuffle.codec import load_dataset

    var = load_dataset([b"ab", b"cde", b"f", b"ghij"] * 3)
    with pytest.raises(ValueError, match="'dataset' must hold fixed-size records"):
        resume_epoch(var, [None, None], K=2, seed=1, epoch=0, consumed=[0, 0])


@pytest.mark.parametrize("K, K2", [(4, 3), (3, 5), (6, 6), (8, 2), (1, 4)])
def test_the_rest_of_an_epoch_at_another_world_size_is_read_exactly_once(K, K2):
    rng = np.random.default_rng(K * 10 + K2)
    n = 50
    order = np.asarray(epoch_order(n, seed=3, epoch=2))
    runs = np.array_split(order, K)  # the batches at K, first ones one longer
    consumed = [int(rng.integers(0, r.size + 1)) for r in runs]
    out = remainder_batches(n, K=K, K_next=K2, seed=3, epoch=2, consumed=consumed)
    rest = np.concatenate([r[c:] for r, c in zip(runs, consumed, strict=True)])
    got = np.concatenate(out)
    assert len(out) == K2 and np.array_equal(np.sort(got), np.sort(rest))  # each left sample once
    sizes = [b.size for b in out]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)
    for j in range(min(K, K2)):  # a worker that stays reads first what it holds, up to its share
        own = runs[j][consumed[j] :][: sizes[j]]
        assert np.array_equal(out[j][: own.size], own)
        assert not np.isin(out[j][own.size :], runs[j]).any() or own.size == sizes[j]


def test_remainder_exceptions():
    with pytest.raises(ValueError, match="'consumed' must give one count for each of the K = 3"):
        remainder_batches(12, K=3, K_next=2, seed=0, epoch=0, consumed=[1, 1])
    with pytest.raises(ValueError, match="'consumed' must be at most worker 1's 4 samples, not 5"):
        remainder_batches(12, K=3, K_next=2, seed=0, epoch=0, consumed=[1, 5, 0])


@pytest.mark.parametrize("K, K2", [(4, 3), (3, 5)])
def test_a_job_resumed_mid_epoch_at_another_world_size(ds, K, K2):
    """Checkpointed at K workers part-way through epoch 2, resumed at K': the rest of the epoch is
    read exactly once, each worker holding the bytes of what it reads; epoch 3 is then planned from
    the caches that survived (the leavers' records, read or not, are the only ones from the source)."""
    at_K = batches_of(N, K, seed=5, epoch=2)
    consumed = [b.size // 3 + k for k, b in enumerate(at_K)]
    holdings = [ds.cache(at_K[k]) if k < K else None for k in range(K2)]
    rep, caches, rest = resume_epoch(ds, holdings, K=K, seed=5, epoch=2, consumed=consumed)
    left = np.concatenate([b[c:] for b, c in zip(at_K, consumed, strict=True)])
    assert np.array_equal(np.sort(np.concatenate(rest)), np.sort(left))
    for c, r in zip(caches, rest, strict=True):
        assert np.isin(r, c.ids).all() and np.array_equal(np.asarray(c.data), ds.data[c.ids])
    gone = np.concatenate([np.empty(0, np.int64), *at_K[K2:]])  # what the leavers held
    assert rep.source_records == int(np.isin(left, gone).sum()) and rep.source_bytes == rep.source_records * B
    assert rep.kept_records + rep.peer_records + rep.source_records == left.size
    nxt = epoch_placement(N, K2, seed=5, epoch=3)
    after, new = elastic_transition(ds, caches, nxt, epoch=3, mode="exchange")
    # A record held by no worker now: one a leaver held and that no one fetched for the rest.
    assert after.verified and after.source_records == int(gone.size) - rep.source_records
    _holds_exactly(ds, new, nxt)


def test_the_library_page_prints_what_it_says(capsys):
    """docs/library.md's block on workers that come and go, run as written: its four lines are
    the four quoted after it."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "library.md").read_text(encoding="utf-8")
    section = text[text.index("## Workers that come and go") :]
    block, after = re.search(r"```python\n(.*?)```\n\n(prints .*?)\n\n", section, re.S).groups()
    exec(compile(block, "library.md", "exec"), {"__name__": "library"})
    assert capsys.readouterr().out.strip().splitlines() == re.findall(r"`([^`]*)`", after)


def test_elastic_schedule_exceptions():
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.elastic_epochs import ElasticSchedule, check_worker_counts
    from coded_shuffle.orders import OrderSpec

    for bad, message in [
        ("3,2", "a sequence of at least one worker count"),
        ([], "a sequence of at least one worker count"),
        ([3, 0], "'workers' must be at least 1"),
        ([3, 11], "at most N = 10 each, not 11"),
        ([3, 2], "must give 3 worker counts (one an epoch), not 2"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            check_worker_counts(bad, N=10, transitions=2)
    with pytest.raises(TypeError, match="'workers'"):
        check_worker_counts([3, 2.5], N=10)
    spec = OrderSpec()
    with pytest.raises(ValueError, match=re.escape("must have K = 4 as its largest count, not 3")):
        ElasticSchedule(N=12, K=4, seed=0, spec=spec, scheme=scheme_for("coded", K=4), workers=(3, 2))
    with pytest.raises(ValueError, match="one batch a worker"):
        ElasticSchedule(
            N=12, K=3, seed=0, spec=spec, scheme=scheme_for("coded", K=3, storage=2), workers=(3, 2)
        )
