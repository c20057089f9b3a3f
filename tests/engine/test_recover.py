"""Tests of coded_shuffle.engine.recover: a restart that restores every worker's storage of
``M`` batches from its file, its peers or the source, then goes on as a job that never stopped."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.engine import run, synthetic_dataset
from coded_shuffle.engine.cache_dir import cache_path
from coded_shuffle.engine.recover import recut_restart, save_storage, storage_restart
from coded_shuffle.orders import epoch_placement

N, B, K = 48, 3072, 4  # M = 2: C(3, 1) = 3 pieces of 1024 bytes a record


@pytest.fixture(scope="module")
def ds():
    return synthetic_dataset(N, B, seed=8)


@pytest.fixture(scope="module")
def straight(ds):
    """The job that never stopped: epochs 0 -> 3, storage of 2 batches."""
    return run(ds, K=K, epochs=3, seed=5, storage=2)


def test_a_lost_host_comes_back_from_its_peers_with_m_2(ds, straight, tmp_path):
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=2)
    cache_path(tmp_path, 1).unlink()  # worker 1's host is lost
    rep, caches = storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=2)
    assert rep.verified and rep.source_pieces == 0 and rep.source_bytes == 0
    # Worker 1 stores 2 batches' worth: its own batch whole (3 pieces a record) and one piece
    # of each of the others' records, 3 N / K + (N - N / K) pieces.
    assert rep.peer_pieces == 3 * (N // K) + (N - N // K) and rep.peer_bytes == rep.peer_pieces * 1024
    assert rep.kept_pieces == 3 * rep.peer_pieces
    # The transition is that of the job that never stopped.
    same = straight.transitions[2]
    assert rep.transition.epoch == same.epoch == 3
    assert (rep.transition.coded_symbols, rep.transition.wire_bytes) == (same.coded_symbols, same.wire_bytes)
    # Every worker holds its own next batch whole, rebuilt from its pieces.
    p3 = epoch_placement(N, K, seed=5, epoch=3)
    for k, c in enumerate(caches):
        mine = np.flatnonzero(np.asarray(p3.owner) == k)
        got = np.asarray(c.data)[c.rows(np.repeat(mine * 3, 3) + np.tile(np.arange(3), mine.size))]
        assert np.array_equal(got.reshape(mine.size, B), ds.data[mine])


def test_two_lost_hosts_fetch_from_the_source_only_what_they_alone_held(ds, tmp_path):
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=1)
    for k in (0, 1):
        cache_path(tmp_path, k).unlink()
    rep, _ = storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=1)
    # A piece is held by its record's owner and one other worker (its label): the pieces held by
    # 0 and 1 alone are, for each record owned by 0 or 1, the one labelled by the other. Each is
    # read from the source once; the second of the two workers has it from the first.
    p1 = np.asarray(epoch_placement(N, K, seed=5, epoch=1).owner)
    alone = int(np.sum(p1 <= 1))
    assert rep.verified and rep.source_pieces == alone
    assert rep.peer_pieces + rep.source_pieces == 2 * (3 * (N // K) + (N - N // K))


def test_with_one_batch_a_lost_host_comes_from_the_source(ds, tmp_path):
    save_storage(tmp_path, ds, K=K, M=1, seed=5, epoch=2)
    raw = cache_path(tmp_path, 3).read_bytes()
    cache_path(tmp_path, 3).write_bytes(raw[:-1])  # cut short: absent
    rep, _ = storage_restart(ds, tmp_path, K=K, M=1, seed=5, epoch=2, mode="exchange")
    p2 = np.asarray(epoch_placement(N, K, seed=5, epoch=2).owner)
    assert rep.verified and rep.peer_pieces == 0 and rep.source_pieces == int(np.sum(p2 == 3))
    assert len(rep.notes) == 1 and "worker-3.cache" in rep.notes[0]


def test_storage_restart_exceptions(ds, tmp_path):
    with pytest.raises(ValueError, match="'mode' must be one of 'coded', 'exchange', not 'uncoded'"):
        storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=1, mode="uncoded")
    with pytest.raises(ValueError, match="'epoch' must be"):
        storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=-1)
    # Files of a storage at K = 4 are not pieces of one at K = 3: refused, naming the file.
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=1)
    with pytest.raises(ValueError, match=r"worker-0\.cache: a dataset of N = 144 records, not N = 96"):
        storage_restart(ds, tmp_path, K=3, M=2, seed=5, epoch=1)


def test_save_storage_exceptions(ds, tmp_path):
    with pytest.raises(TypeError, match="'dataset' must be a Dataset, not str"):
        save_storage(tmp_path, "data", K=K, M=2, seed=5, epoch=1)
    with pytest.raises(ValueError, match="'K' must be at least 1, not 0"):
        save_storage(tmp_path, ds, K=0, M=1, seed=5, epoch=1)
    with pytest.raises(ValueError, match="'epoch' must be at least 0, not -1"):
        save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=-1)
    with pytest.raises(ValueError, match="'seed' must be at least 0"):
        save_storage(tmp_path, ds, K=K, M=2, seed=-5, epoch=1)
    assert not list(tmp_path.iterdir())


def test_files_of_another_epoch_are_said_and_used_where_still_wanted(ds, straight, tmp_path):
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=1)  # the files of epoch 1, told epoch 2
    rep, caches = storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=2)
    assert rep.verified and len(rep.notes) == K and all("of epoch 1, not 2" in n for n in rep.notes)
    same = straight.transitions[2]  # the job that never stopped
    assert (rep.transition.coded_symbols, rep.transition.wire_bytes) == (same.coded_symbols, same.wire_bytes)


def test_a_lost_host_relaunched_on_the_survivors_recuts_their_storage(ds, tmp_path):
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=2)
    cache_path(tmp_path, 1).unlink()  # worker 1's host is lost; the job goes on with 3
    rep, caches, notes = recut_restart(ds, tmp_path, K=K, K_next=3, M=2, seed=5, epoch=2)
    # With M = 2 every piece is on two workers: the survivors hold every byte.
    assert rep.verified and notes == [] and (rep.K, rep.K_next, rep.joined) == (4, 3, ())
    assert rep.source_bytes == rep.source_bound == 0 and rep.peer_bytes == rep.download_bound > 0
    # The new storage is that of epoch 3 at K' = 3: each worker holds its batch whole, in
    # C(2, 1) = 2 pieces of 1536 bytes, and one piece of every other record.
    p3 = epoch_placement(N, 3, seed=5, epoch=3)
    assert rep.storage_bytes == 2 * N * B  # M = 2 batches of N / 3 records, each of 3 workers
    for k, c in enumerate(caches):
        mine = np.flatnonzero(np.asarray(p3.owner) == k)
        got = np.asarray(c.data)[c.rows(np.repeat(mine * 2, 2) + np.tile(np.arange(2), mine.size))]
        assert np.array_equal(got.reshape(mine.size, B), ds.data[mine])
    # Hosts 0 and 1 lost, a host joins empty: the bytes only 0 and 1 held come from the source once.
    cache_path(tmp_path, 0).unlink()
    two, _, _ = recut_restart(ds, tmp_path, K=K, K_next=3, M=2, seed=5, epoch=2, workers=[2, 3, None])
    assert two.verified and two.joined == (2,) and two.source_bytes == two.source_bound > 0


def test_recut_restart_exceptions(ds, tmp_path):
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=2)
    with pytest.raises(ValueError, match="'workers' must name a worker of the K = 4 .* each of the 3"):
        recut_restart(ds, tmp_path, K=K, K_next=3, M=2, seed=5, epoch=2, workers=[0, 1])
    with pytest.raises(ValueError, match="'workers' must name workers below K = 4, not 4"):
        recut_restart(ds, tmp_path, K=K, K_next=3, M=2, seed=5, epoch=2, workers=[0, 1, 4])
    with pytest.raises(ValueError, match="'K_next' must be at least 1, not 0"):
        recut_restart(ds, tmp_path, K=K, K_next=0, M=2, seed=5, epoch=2)


def test_a_restart_on_racks_restores_their_placement_from_the_lost_hosts_rack(ds, tmp_path):
    """The exchange's storage on racks comes back as the job placed it (across the racks), and a
    lost host's pieces from a holder in its own rack wherever one has them."""
    from coded_shuffle.engine.restore import restore_plan
    from coded_shuffle.network import Network

    net = Network.parse("up=100,down=100,racks=2x2,rack-up=50")
    straight = run(ds, K=K, epochs=3, seed=5, storage=2, mode="exchange", network=net)
    save_storage(tmp_path, ds, K=K, M=2, seed=5, epoch=2, mode="exchange", network=net)
    cache_path(tmp_path, 1).unlink()  # worker 1's host is lost; worker 0 shares its rack
    rep, _ = storage_restart(ds, tmp_path, K=K, M=2, seed=5, epoch=2, mode="exchange", network=net)
    same = straight.transitions[2]
    assert rep.verified and rep.source_pieces == 0 and rep.transition.verified
    assert rep.transition.exchange.exchange_bytes == same.exchange.exchange_bytes
    # the plan, on holdings written here: pieces 0..5 wanted by worker 1, held by 0 (its rack) or 2
    holders = np.array([0b101, 0b101, 0b100, 0b001, 0b101, 0b100], dtype=np.uint64)
    have = [np.array([0, 1, 3, 4]), np.empty(0, np.int64), np.array([0, 1, 2, 4, 5]), np.empty(0, np.int64)]
    expected = [have[0], np.arange(6), have[2], have[3]]
    plan = restore_plan(have, expected, holders, 4, (2, 2))
    assert plan.peers[1].tolist() == [0, 1, 2, 3, 4, 5]
    assert plan.senders[1].tolist() == [0, 0, 2, 0, 0, 2]  # worker 0 wherever it holds the piece
    blind = restore_plan(have, expected, holders, 4)
    assert blind.senders[1].tolist() != plan.senders[1].tolist()  # without racks the holders take turns


def test_a_storage_of_records_of_many_sizes_comes_back_from_the_peers(tmp_path):
    """Records of 2 to 6 KiB, each cut by its own length: the files hold the pieces at their
    lengths (version 2), a lost host's pieces come back from its peers at their own bytes (the
    pieces of ``[p L // P, (p + 1) L // P)`` of each record of ``L`` bytes, summed by hand here),
    nothing from the source, and the transition is that of the job that never stopped."""
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.cache_dir import load_cache

    rng = np.random.default_rng(4)
    records = [rng.bytes(int(n)) for n in rng.integers(2048, 6145, 36)]
    vds = load_dataset(records)
    save_storage(tmp_path, vds, K=3, M=2, seed=5, epoch=1)
    scheme = scheme_for("coded", K=3, storage=2, sizes=vds.lengths)
    P = scheme.pieces
    lost = load_cache(cache_path(tmp_path, 2), scheme.dataset(vds), seed=5).cache.ids
    cache_path(tmp_path, 2).unlink()
    rep, caches = storage_restart(vds, tmp_path, K=3, M=2, seed=5, epoch=1)
    own = [(p + 1) * len(records[u // P]) // P - p * len(records[u // P]) // P for u in lost for p in [u % P]]
    assert rep.verified and (rep.source_pieces, rep.source_bytes) == (0, 0)
    assert (rep.peer_pieces, rep.peer_bytes) == (lost.size, sum(own)) and P > 1
    straight = run(vds, K=3, epochs=2, seed=5, storage=2).transitions[1]
    assert (rep.transition.coded_symbols, rep.transition.wire_bytes) == (
        straight.coded_symbols,
        straight.wire_bytes,
    )
    for c in caches:  # each piece its record's bytes
        for u, L in zip(c.ids.tolist(), c.lengths.tolist(), strict=True):
            r, p = records[u // P], u % P
            assert (
                bytes(np.asarray(c.data)[c.rows(np.array([u]))[0], :L])
                == r[p * len(r) // P : (p + 1) * len(r) // P]
            )


def _byte_masks(records, ids, P):
    """Brute force: for each record, which of its bytes the pieces ``ids`` (cut into ``P`` by its
    own length, ``[p L // P, (p + 1) L // P)``) cover."""
    masks = [np.zeros(len(r), dtype=bool) for r in records]
    for u in np.asarray(ids).tolist():
        L = len(records[u // P])
        masks[u // P][(u % P) * L // P : (u % P + 1) * L // P] = True
    return masks


def test_a_storage_of_records_of_many_sizes_is_cut_again_from_the_files_at_another_k(tmp_path):
    """Records of 4 to 12 KiB, a storage of two batches at K = 4 (3 pieces a record, each cut by
    its own length) relaunched on K' = 3 (2 pieces): every new piece is its record's bytes cut by
    its own length at K' (sliced here), and the bytes from the source, from peers and the
    download bound are those counted byte by byte from what the surviving files hold."""
    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine.cache_dir import cache_ids

    rng = np.random.default_rng(6)
    records = [rng.bytes(int(n)) for n in rng.integers(4096, 12289, 40)]
    vds = load_dataset(records)
    save_storage(tmp_path, vds, K=4, M=2, seed=5, epoch=1)
    files = {k: cache_ids(cache_path(tmp_path, k)) for k in range(4)}
    for lost, workers in (((1,), None), ((0, 1), [2, 3, None])):
        for k in lost:
            cache_path(tmp_path, k).unlink(missing_ok=True)
        rep, caches, notes = recut_restart(vds, tmp_path, K=4, K_next=3, M=2, seed=5, epoch=1,
                                           workers=workers)  # fmt: skip
        P, Q = rep.pieces, rep.pieces_next
        assert rep.verified and notes == [] and (P, Q) == (3, 2)
        picked = [k for k in range(4) if k not in lost] if workers is None else workers
        p2 = epoch_placement(len(records), 3, seed=5, epoch=2)
        for j, c in enumerate(caches):
            for u, L in zip(c.ids.tolist(), c.lengths.tolist(), strict=True):
                r = records[u // Q]
                got = bytes(np.asarray(c.data)[c.rows(np.array([u]))[0], :L])
                assert got == r[(u % Q) * len(r) // Q : (u % Q + 1) * len(r) // Q]
            mine = np.flatnonzero(np.asarray(p2.owner) == j)  # its batch of epoch 2 whole
            assert set((mine[:, None] * Q + np.arange(Q)).reshape(-1).tolist()) <= set(c.ids.tolist())
        alive = [_byte_masks(records, files[k], P) for k in range(4) if k not in lost]
        nowhere = sum(int((~np.logical_or.reduce([m[i] for m in alive])).sum()) for i in range(len(records)))
        lacks = 0
        for j, c in enumerate(caches):
            want = _byte_masks(records, c.ids, Q)
            k = picked[j] if j < len(picked) else None
            have = _byte_masks(records, files[k], P) if k is not None else [np.zeros_like(w) for w in want]
            lacks += sum(int((w & ~h).sum()) for w, h in zip(want, have, strict=True))
        assert rep.source_bytes == rep.source_bound == nowhere and (nowhere > 0) == (len(lost) == 2)
        assert rep.peer_bytes + rep.source_bytes == rep.download_bound == lacks
