"""Tests of coded_shuffle.engine.recut: a change of K with a storage of M > 1 batches, delivered as
the storage at K' cut again from the bytes the workers hold, checked byte by byte by brute force."""

from __future__ import annotations

from itertools import permutations
from math import comb

import numpy as np
import pytest

from coded_shuffle.codec import Cache, load_dataset
from coded_shuffle.engine import run, synthetic_dataset
from coded_shuffle.engine.holding import PieceStorage
from coded_shuffle.engine.recut import recut_run, recut_storage
from coded_shuffle.orders import epoch_placement
from coded_shuffle.storage import check_piece_placement, piece_placement, update_storage


def _P(B, K, M):
    """Pieces a record (docs/storage.md, Fewer pieces): one a label while they are 1 KiB or more."""
    return max(1, min(comb(K - 1, M - 1), B // 1024))


def _range(p, P, L, fixed):
    """Bytes [a, b) of piece p of a record of L bytes: widths ceil(B / P) for records of one size,
    p L // P for records of many sizes (docs/storage.md, Bytes and Records of many sizes)."""
    if fixed:
        w = -(-L // P)
        return min(p * w, L), min((p + 1) * w, L)
    return p * L // P, (p + 1) * L // P


def _storage_at(ds, K, M, epochs):
    """Every worker's storage of K workers, M batches, after ``epochs`` updates from epoch 0."""
    st = (
        PieceStorage(K=K, M=M, record_bytes=ds.record_bytes)
        if ds.lengths is None
        else PieceStorage(K=K, M=M, sizes=np.asarray(ds.lengths))
    )
    held = st.start(epoch_placement(ds.N, K, seed=3, epoch=0))
    for t in range(1, epochs + 1):
        held = update_storage(held, epoch_placement(ds.N, K, seed=3, epoch=t))
    work = st.dataset(ds)
    return [work.cache(held.held_by(k)) for k in range(K)]


def brute_recut(ds, holdings, K, M, placement_next, pp):
    """Independent re-cut: which bytes each holder holds (its pieces' rows that match the records),
    each worker's new pieces cut from the records, and the bytes it keeps, lacks and that no holder
    holds; every new piece rebuilt byte by byte from the holders' bytes (the source where none)."""
    N, fixed = ds.N, ds.lengths is None
    sizes = [ds.record_bytes] * N if fixed else [int(x) for x in ds.lengths]
    Bmax = ds.record_bytes
    mean = ds.record_bytes if fixed else -(-sum(sizes) // N)  # records of many sizes: by their mean
    Po, Pn = (_P(mean, k, M) for k in (K, placement_next.K))
    has = np.zeros((len(holdings), N, Bmax), dtype=bool)
    val = np.zeros((len(holdings), N, Bmax), dtype=np.uint8)
    for h, c in enumerate(holdings):
        for row, pid in enumerate([] if c is None else c.ids.tolist()):
            r, p = divmod(pid, Po)
            a, b = _range(p, Po, sizes[r], fixed)
            piece = np.asarray(c.data)[row, : b - a]
            if np.array_equal(piece, ds.data[r, a:b]):  # a damaged piece is not held
                has[h, r, a:b], val[h, r, a:b] = True, piece
    widths = [b - a for r in range(N) for a, b in [_range(q, Pn, sizes[r], fixed) for q in range(Pn)]]
    width = max(1, max(widths)) if not fixed else -(-ds.record_bytes // Pn)
    anyone = has.any(axis=0)
    wanted_any = np.zeros((N, Bmax), dtype=bool)
    out = {"kept": [], "missing": [], "pieces": []}
    for j in range(placement_next.K):
        kept = missing = 0
        rows = {}
        for pid in pp.held_by(j).tolist():
            r, q = divmod(pid, Pn)
            a, b = _range(q, Pn, sizes[r], fixed)
            mine = has[j, r, a:b]
            kept, missing = kept + int(mine.sum()), missing + int((~mine).sum())
            wanted_any[r, a:b] = True
            row = np.zeros(width, dtype=np.uint8)
            for x in range(a, b):  # byte by byte: own, else a holder's, else the source
                hs = np.flatnonzero(has[:, r, x])
                row[x - a] = val[j, r, x] if has[j, r, x] else val[hs[0], r, x] if hs.size else ds.data[r, x]
            assert np.array_equal(row[: b - a], ds.data[r, a:b])  # the pieces cut from the records
            rows[pid] = (row, b - a)
        out["kept"].append(kept)
        out["missing"].append(missing)
        out["pieces"].append(rows)
    out["alone"] = int((wanted_any & ~anyone).sum())
    return out


def _check(ds, rep, caches, holdings, K, M, nxt):
    """The report and storages against the brute force, the storage held a storage at K' with the
    labels of piece_placement's, each record's on slots that keep the most bytes (every order of
    them tried)."""
    default = piece_placement(nxt, M=M, pieces=rep.pieces_next)
    check_piece_placement(rep.held)
    assert np.array_equal(np.sort(rep.held.holders, axis=1), np.sort(default.holders, axis=1))
    brute = brute_recut(ds, holdings, K, M, nxt, rep.held)
    assert rep.verified
    for j, c in enumerate(caches):
        want = brute["pieces"][j]
        assert c.ids.tolist() == sorted(want)
        for i, pid in enumerate(c.ids.tolist()):
            assert np.array_equal(np.asarray(c.data)[i], want[pid][0])
            assert c.lengths is None or int(c.lengths[i]) == want[pid][1]
    assert list(rep.received) == brute["missing"]
    assert rep.kept_bytes == sum(brute["kept"])
    assert rep.download_bound == rep.peer_bytes + rep.source_bytes == sum(brute["missing"])
    assert rep.source_bytes == rep.source_bound == brute["alone"]
    assert rep.storage_bytes == sum(brute["kept"]) + sum(brute["missing"])
    assert sum(rep.sent) == rep.peer_bytes


@pytest.mark.parametrize(
    "K, K2, M, B, N",
    [
        (4, 3, 2, 3172, 12), (3, 4, 2, 3172, 12), (5, 3, 3, 4196, 12), (3, 5, 2, 4096, 12),
        (4, 4, 2, 3072, 12), (4, 6, 3, 900, 12), (4, 3, 2, 3172, 36),  # the last: spans by blocks
    ],
)  # fmt: skip
def test_a_change_of_K_with_storage_is_the_brute_force_recut(K, K2, M, B, N):
    ds = synthetic_dataset(N, B, seed=K * 10 + K2)
    old = _storage_at(ds, K, M, epochs=1)
    holdings = [old[k] if k < K else None for k in range(K2)]  # the last leave, new ones join empty
    nxt = epoch_placement(N, K2, seed=3, epoch=2)
    rep, caches = recut_storage(ds, holdings, nxt, K=K, M=M)
    _check(ds, rep, caches, holdings, K, M, nxt)
    assert rep.joined == tuple(range(K, K2)) and (rep.K, rep.K_next, rep.M) == (K, K2, M)
    if K2 >= K:  # nobody left: every byte is held by a survivor
        assert rep.source_bytes == 0


def test_records_of_many_sizes_and_damaged_pieces():
    rng = np.random.default_rng(5)
    sizes = rng.integers(0, 6000, 14)
    ds = load_dataset([bytes(rng.integers(0, 256, int(n), dtype=np.uint8)) for n in sizes])
    old = _storage_at(ds, 4, 2, epochs=0)
    bad = np.array(old[0].data)
    bad[3, 0] ^= 1  # a piece altered: absent, and delivered again
    holdings = [Cache(ids=old[0].ids, data=bad, lengths=old[0].lengths), old[1], old[2]]
    nxt = epoch_placement(14, 3, seed=3, epoch=1)
    rep, caches = recut_storage(ds, holdings, nxt, K=4, M=2)
    _check(ds, rep, caches, holdings, 4, 2, nxt)
    assert rep.dropped_pieces == 1


def test_leaving_workers_that_serve_leave_nothing_to_the_source(monkeypatch):
    ds = synthetic_dataset(16, 4096, seed=2)
    old = _storage_at(ds, 5, 2, epochs=1)
    nxt = epoch_placement(16, 3, seed=3, epoch=2)
    gone, caches = recut_storage(ds, old[:3], nxt, K=5, M=2)
    monkeypatch.setattr("coded_shuffle.engine.recut._ROWS", 7)  # the senders chosen 7 rows at a time
    again, same = recut_storage(ds, old[:3], nxt, K=5, M=2)
    assert again.sent == gone.sent
    assert all(np.array_equal(a.data, b.data) for a, b in zip(caches, same, strict=True))
    served, caches = recut_storage(ds, old[:3], nxt, K=5, M=2, leaving=old[3:])
    assert gone.source_bytes > 0 and served.source_bytes == served.source_bound == 0
    assert served.download_bound == gone.download_bound and len(served.sent) == 5 and served.verified


def test_recut_run_goes_on_as_a_job_of_K_prime_workers():
    ds = synthetic_dataset(48, 3072, seed=1)
    reps = recut_run(ds, workers=[4, 3, 3], M=2, seed=5)
    assert [type(r).__name__ for r in reps] == ["RecutReport", "TransitionReport"]
    # From the storage at K' = 3, the transition is that of a job of 3 workers started at epoch 1.
    same = run(ds, K=3, epochs=2, seed=5, storage=2).transitions
    assert reps[1].verified and reps[1].epoch == 2
    assert 0 < reps[1].coded_symbols <= reps[1].uncoded_symbols
    assert reps[0].verified and reps[0].storage_bytes == 3 * 2 * 48 * 3072 // 3 and same[0].verified


def test_recut_exceptions():
    ds = synthetic_dataset(12, 3072, seed=0)
    old = _storage_at(ds, 4, 2, epochs=0)
    nxt = epoch_placement(12, 3, seed=3, epoch=1)
    with pytest.raises(ValueError, match="'M' must be at least 2"):
        recut_storage(ds, old[:3], nxt, K=4, M=1)
    with pytest.raises(ValueError, match=r"'M' must be at most min\(K, K'\) = 3 batches, not 4"):
        recut_storage(ds, old[:3], nxt, K=4, M=4)
    with pytest.raises(ValueError, match="'holdings' must be a sequence of K' = 3 caches"):
        recut_storage(ds, old, nxt, K=4, M=2)
    with pytest.raises(TypeError, match="'leaving' must hold Cache objects or None, not int at 0"):
        recut_storage(ds, old[:3], nxt, K=4, M=2, leaving=[7])
    with pytest.raises(ValueError, match=r"'holdings' must hold pieces of 1024 bytes .* 3072 \(worker 1\)"):
        recut_storage(ds, [old[0], ds.cache([0]), None], nxt, K=4, M=2)
    with pytest.raises(ValueError, match="'placement_next' must be a Placement of the dataset's N = 12"):
        recut_storage(ds, old[:3], epoch_placement(10, 3, seed=3, epoch=1), K=4, M=2)
    with pytest.raises(ValueError, match="'labels' must be one of 'kept', 'placement', not 'any'"):
        recut_storage(ds, old[:3], nxt, K=4, M=2, labels="any")
    with pytest.raises(ValueError, match="'mode' must be one of 'coded', 'exchange', not 'uncoded'"):
        recut_run(ds, workers=[4, 3], M=2, seed=1, mode="uncoded")
    with pytest.raises(ValueError, match="'M' must be at most the fewest workers, 2, not 3"):
        recut_run(ds, workers=[4, 2], M=3, seed=1)
    # Records of many sizes, each cut by its own length: re-cut, then the scheme's transition.
    sized = load_dataset([b"abcd" * n for n in range(1, 13)])
    for mode in ("coded", "exchange"):
        reps = recut_run(sized, workers=[4, 3, 3, 4], M=2, seed=1, mode=mode)
        assert [type(r).__name__ for r in reps] == ["RecutReport", "TransitionReport", "RecutReport"]
        assert all(r.verified for r in reps)


def _kept(ds, holdings, K, M, holders, Pn, r):
    """Bytes of record r's new slots that the members of their labels (owner aside) hold."""
    fixed = ds.lengths is None
    L = ds.record_bytes if fixed else int(ds.lengths[r])
    Po = _P(ds.record_bytes, K, M)
    got = 0
    for q, h in enumerate(holders):
        a, b = _range(q, Pn, L, fixed)
        for w, c in enumerate(holdings):
            if c is None or not (int(h) >> w) & 1:
                continue
            held = np.zeros(L, dtype=bool)
            for pid in c.ids[(c.ids // Po) == r].tolist():
                x, y = _range(pid % Po, Po, L, fixed)
                held[x:y] = True
            got += int(held[a:b].sum())
    return got


def test_the_labels_go_to_the_slots_that_keep_the_most_bytes():
    ds = synthetic_dataset(10, 4096, seed=9)
    old = _storage_at(ds, 5, 2, epochs=1)
    nxt = epoch_placement(10, 4, seed=3, epoch=2)
    kept, _ = recut_storage(ds, old[:4], nxt, K=5, M=2)
    fixed, _ = recut_storage(ds, old[:4], nxt, K=5, M=2, labels="placement")
    assert fixed.held.holders.tolist() == piece_placement(nxt, M=2, pieces=3).holders.tolist()
    assert kept.verified and fixed.verified and kept.labels == "kept"
    assert kept.download_bound < fixed.download_bound and kept.kept_bytes > fixed.kept_bytes
    owner = np.asarray(nxt.owner)
    for r in range(10):  # every order of the record's labels on its slots: none keeps more
        labels = fixed.held.holders[r].tolist()
        best = max(_kept(ds, old[:4], 5, 2, perm, 3, r) for perm in permutations(labels))
        assert _kept(ds, old[:4], 5, 2, kept.held.holders[r].tolist(), 3, r) == best, (r, owner[r])
