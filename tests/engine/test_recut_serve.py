"""Tests of coded_shuffle.engine.recut_serve: what a job relaunched on ``K'`` workers reads of the
files of a storage written at ``K`` (the protocol itself runs under mpiexec in
tests/loader/test_loader.py, ``check_recut_job``, against the in-process re-cut)."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from coded_shuffle.engine import scheme_for, synthetic_dataset
from coded_shuffle.engine.cache_dir import CacheFileError, cache_header, cache_ids, cache_path
from coded_shuffle.engine.recover import save_storage
from coded_shuffle.engine.recut_serve import _pack, _unpack, choose_files, fits, seen_files, stored_workers
from coded_shuffle.engine.schedule import EpochSchedule
from coded_shuffle.orders import OrderSpec

N, B = 24, 8192


@pytest.mark.parametrize("M", [2, 3])
def test_stored_workers_inverts_the_cut_of_the_storage(M):
    # docs/storage.md: a record is cut into C(K - 1, M - 1) pieces of ceil(B / P) bytes (while
    # pieces keep at least 1 KiB); each K gives another count here, so the header names its K.
    for K in range(M, 9):
        P = min(comb(K - 1, M - 1), B // 1024)
        if P == comb(K - 1, M - 1):
            assert stored_workers(N * P, -(-B // P), N=N, B=B, M=M) == K
    assert stored_workers(N * 3 + 1, 2731, N=N, B=B, M=2) is None  # not a multiple of N
    assert stored_workers(N * 3, 2000, N=N, B=B, M=2) is None  # pieces of another width


def test_the_files_of_a_lost_host_go_to_the_survivors_in_order():
    shared = [(0, 4), (2, 4), (3, 4)]  # worker 1's file of 4 gone, a folder every worker sees
    assert choose_files([shared] * 3, 3) == (4, [0, 2, 3])
    assert choose_files([shared] * 4, 4) == (4, [0, 2, 3, -1])  # one more host: it starts empty
    # each host sees its own file only: each reads it, whatever its number
    assert choose_files([[(2, 4)], [(0, 4)], []], 3) == (4, [2, 0, -1])
    # files of two cuts: the K of the lowest-numbered, the others not read
    assert choose_files([[(0, 3), (1, 4)], [(1, 4), (2, 3)]], 2) == (3, [0, 2])
    assert choose_files([[], []], 2) is None


def test_seen_files_keeps_this_jobs_files_and_says_why_not_the_others(tmp_path):
    ds = synthetic_dataset(N, B, seed=1)
    save_storage(tmp_path, ds, K=4, M=2, seed=5, epoch=1)
    h = cache_header(cache_path(tmp_path, 2))
    assert (h.worker, h.N, h.record_bytes, h.epoch, h.seed) == (2, N * 3, -(-B // 3), 1, 5)
    seen, notes = seen_files(tmp_path, N=N, B=B, M=2, seed=5, worker=0)
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)] and notes == []
    _, notes = seen_files(tmp_path, N=N, B=B, M=2, seed=6, worker=1)  # another seed
    assert len(notes) == 1 and "worker-1.cache: seed 5, not 6. Treated as absent." in notes[0]
    # M = 3 cuts a record into C(3, 2) = 3 pieces at K = 4 too: the same bytes, read as such
    assert seen_files(tmp_path, N=N, B=B, M=3, seed=5, worker=3) == (seen, [])
    seen, notes = seen_files(tmp_path, N=N + 1, B=B, M=2, seed=5, worker=3)  # other records: no K cuts so
    assert seen == [] and "not a storage of M = 2 batches of N = 25 records of 8192 bytes" in notes[0]
    seen = [(0, 4), (1, 4), (2, 4), (3, 4)]
    cache_path(tmp_path, 1).write_bytes(cache_path(tmp_path, 1).read_bytes()[:50])  # cut short
    cache_path(tmp_path, 3).rename(tmp_path / "worker-7.cache")  # moved: another worker wrote it
    seen, notes = seen_files(tmp_path, N=N, B=B, M=2, seed=5, worker=1)
    assert seen == [(0, 4), (2, 4)] and "cut short" in notes[0]
    _, notes = seen_files(tmp_path, N=N, B=B, M=2, seed=5, worker=7)
    assert "written by worker 3, not 7" in notes[0]
    assert seen_files(tmp_path / "none", N=N, B=B, M=2, seed=5, worker=0) == ([], [])


def test_pack_and_unpack_move_the_spans_as_a_loop_byte_by_byte(rng):
    src = rng.integers(0, 256, (7, 40), dtype=np.uint8)
    n = rng.integers(1, 9, 30)
    srow, sat = rng.integers(0, 7, 30), rng.integers(0, 32, 30)
    drow = np.arange(30) // 3
    dat = (np.arange(30) % 3) * 10  # three spans a row, apart
    flat = _pack(src, srow, sat, n)
    assert flat.tolist() == [int(src[srow[i], sat[i] + b]) for i in range(30) for b in range(int(n[i]))]
    dst = np.zeros((10, 40), dtype=np.uint8)
    _unpack(dst, drow, dat, n, flat)
    want = np.zeros_like(dst)
    for i in range(30):
        for b in range(int(n[i])):
            want[drow[i], dat[i] + b] = src[srow[i], sat[i] + b]
    assert np.array_equal(dst, want)
    # a read-only source (a file's memory map) reads alike
    src.flags.writeable = False
    assert np.array_equal(_pack(src, srow, sat, n), flat)


def storage_at(K: int, B: int):
    """The scheme storing 2 batches at ``K`` and its storage of epoch 1, followed from epoch 0."""
    scheme = scheme_for("coded", K=K, storage=2, record_bytes=B)
    *_, now = EpochSchedule(N=N, K=K, seed=5, spec=OrderSpec(), scheme=scheme).epochs(start=0, count=2)
    return scheme, now.held


def test_a_file_fits_the_storage_a_restore_plans_from_only_at_its_own_K(tmp_path):
    # records of 1 KiB are stored whole at any K with M = 2: the header cannot tell K = 4 from
    # K = 3, the pieces each worker holds can
    ds = synthetic_dataset(N, 1024, seed=2)
    save_storage(tmp_path, ds, K=4, M=2, seed=5, epoch=1)
    scheme, held = storage_at(4, 1024)
    assert cache_ids(cache_path(tmp_path, 1)).tolist() == scheme.held(held, 1).tolist()
    for K, fit in ((4, True), (3, False)):
        scheme, held = storage_at(K, 1024)
        assert [fits(tmp_path, k, scheme.held(held, k)) for k in range(K)] == [fit] * K
    raw = bytearray(cache_path(tmp_path, 2).read_bytes())
    raw[112 + 3] ^= 1  # an id altered: the tables fail their digest
    cache_path(tmp_path, 2).write_bytes(bytes(raw))
    with pytest.raises(CacheFileError, match="tables of ids and checksums fail their digest"):
        cache_ids(cache_path(tmp_path, 2))
    # a damaged file, or none, is no obstacle to a restore (it treats it as absent)
    assert fits(tmp_path, 2, np.empty(0, np.int64)) and fits(tmp_path, 9, np.empty(0, np.int64))


def test_a_file_of_another_dataset_or_damaged_is_read_as_absent_in_one_line(tmp_path):
    from coded_shuffle.engine.recut import _storage
    from coded_shuffle.engine.recut_serve import _read

    ds = synthetic_dataset(N, B, seed=1)
    save_storage(tmp_path, ds, K=4, M=2, seed=5, epoch=1)
    old = _storage(ds, 4, 2).dataset(ds)
    width = int(old.data.shape[1])
    got, dropped, note = _read(cache_path(tmp_path, 0), old.checksums, width, 5)
    assert got is not None and dropped == 0 and note is None
    other = _storage(synthetic_dataset(N, B, seed=2), 4, 2).dataset(synthetic_dataset(N, B, seed=2))
    got, _, note = _read(cache_path(tmp_path, 0), other.checksums, width, 5)
    assert got is None and note.endswith(
        "another dataset (its records' checksums differ). Treated as absent."
    )
    raw = bytearray(cache_path(tmp_path, 1).read_bytes())
    raw[-1] ^= 1  # the last piece altered: dropped, the others kept
    cache_path(tmp_path, 1).write_bytes(bytes(raw))
    got, dropped, note = _read(cache_path(tmp_path, 1), old.checksums, width, 5)
    assert dropped == 1 and len(got) == cache_ids(cache_path(tmp_path, 1)).size - 1
    assert note.endswith("1 piece(s) fail their checksum; delivered again.")
    assert _read(None, old.checksums, width, 5) == (None, 0, None)


def test_a_storage_of_records_of_many_sizes_is_read_at_its_k(tmp_path):
    """Files of a storage of records of many sizes (each cut by its own length into the pieces of
    a record of their mean size): their ``K`` read from the headers with the sizes, and the files
    round chooses them for a re-cut at another ``K`` as it does files of records of one size."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine.recut_serve import files_round

    rng = np.random.default_rng(2)
    vds = load_dataset([rng.bytes(int(n)) for n in rng.integers(1024, 9000, 30)])
    save_storage(tmp_path, vds, K=4, M=2, seed=5, epoch=1)
    h = cache_header(cache_path(tmp_path, 0))
    assert (
        h.variable
        and stored_workers(h.N, h.record_bytes, N=30, B=vds.record_bytes, M=2, sizes=vds.lengths) == 4
    )
    seen, _ = seen_files(tmp_path, N=30, B=vds.record_bytes, M=2, seed=5, worker=0, sizes=vds.lengths)
    assert seen == [(0, 4), (1, 4), (2, 4), (3, 4)]

    @contextmanager
    def step(stage):
        yield

    dog = SimpleNamespace(timeout=5.0, prog="test", abort=None, step=step)
    worker = SimpleNamespace(is_leader=False, peers=False, root=0, rank=1, K=3, post=lambda *a, **k: None,
                             share=lambda *a: (4, [0, 1, 2]))  # fmt: skip
    assert files_round(worker, dog, (seen, True), B=vds.record_bytes, M=2) == (4, [0, 1, 2])  # one size
    got = files_round(worker, dog, (seen, True), B=vds.record_bytes, M=2, sizes=vds.lengths)
    assert got == (4, [0, 1, 2])
