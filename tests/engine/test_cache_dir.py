"""Tests of coded_shuffle.engine.cache_dir: caches in files that survive the process, and the
first transition of a restarted job planned from them."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.codec import Cache, load_dataset
from coded_shuffle.engine import initial_caches, synthetic_dataset
from coded_shuffle.engine.cache_dir import (
    CacheFileError,
    cache_path,
    dataset_fingerprint,
    load_cache,
    load_cache_dir,
    save_cache,
    save_cache_dir,
)
from coded_shuffle.engine.elastic import restart_transition
from coded_shuffle.orders import epoch_placement

N, B, K = 96, 24, 4
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ds():
    return synthetic_dataset(N, B, seed=6)


@pytest.fixture
def saved(ds, tmp_path):
    p3 = epoch_placement(N, K, seed=1, epoch=3)
    save_cache_dir(tmp_path, initial_caches(ds, p3), ds, epoch=3, seed=1)
    return tmp_path, p3


def test_a_cache_file_round_trips_as_a_memory_map(ds, saved):
    folder, p3 = saved
    got = load_cache(cache_path(folder, 2), ds, seed=1)
    assert got.epoch == 3 and got.worker == 2 and got.dropped == 0
    assert np.array_equal(got.cache.ids, p3.batch(2)) and np.array_equal(got.cache.data, ds.data[p3.batch(2)])
    assert isinstance(got.cache.data, np.memmap) and not got.cache.data.flags.writeable
    # The header as the docs lay it out, read with struct alone.
    raw = cache_path(folder, 2).read_bytes()
    magic, version, worker, n_records, width, n = struct.unpack_from("<8sIIQQQ", raw)
    assert (magic, version, worker, n_records, width, n) == (b"CSCACHE\x00", 1, 2, N, B, p3.batch(2).size)
    rows_at = struct.unpack_from("<Q", raw, 88)[0]
    assert rows_at % 64 == 0 and len(raw) == rows_at + n * B
    assert np.array_equal(np.frombuffer(raw, "<i8", n, 112), p3.batch(2))
    assert raw[rows_at : rows_at + B] == ds.data[p3.batch(2)[0]].tobytes()


@pytest.mark.parametrize("cut", [50, 112 + 8, -1])  # inside the header, the tables, the last row
def test_a_file_cut_short_is_refused_and_treated_as_absent(ds, saved, cut):
    folder, _ = saved
    path = cache_path(folder, 1)
    raw = path.read_bytes()
    path.write_bytes(raw[:cut])
    with pytest.raises(CacheFileError, match=f"Cache file {path}: "):
        load_cache(path, ds)
    holdings, notes = load_cache_dir(folder, ds, K=K)
    assert holdings[1] is None and all(h is not None for k, h in enumerate(holdings) if k != 1)
    assert len(notes) == 1 and str(path) in notes[0] and "Treated as absent" in notes[0]


@pytest.mark.parametrize("where, what", [(20, "header"), (112 + 3, "tables")])
def test_an_altered_header_or_table_is_refused(ds, saved, where, what):
    folder, _ = saved
    path = cache_path(folder, 0)
    raw = bytearray(path.read_bytes())
    raw[where] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(CacheFileError, match=what):
        load_cache(path, ds)


def test_an_altered_row_is_dropped_and_delivered_again(ds, saved):
    folder, p3 = saved
    path = cache_path(folder, 3)
    raw = bytearray(path.read_bytes())
    rows_at = struct.unpack_from("<Q", raw, 88)[0]
    raw[rows_at + 2 * B + 7] ^= 0x80  # the third record
    path.write_bytes(bytes(raw))
    got = load_cache(path, ds)
    assert got.dropped == 1 and int(p3.batch(3)[2]) not in got.cache.ids
    p4 = epoch_placement(N, K, seed=1, epoch=4)
    rep, new, notes = restart_transition(ds, folder, p4, epoch=4, seed=1)
    assert rep.verified and rep.source_records == 1 and rep.held_records == N - 1
    assert len(notes) == 1 and "1 record(s) fail their checksum" in notes[0]
    for k, c in enumerate(new):
        assert np.array_equal(c.ids, p4.batch(k)) and np.array_equal(c.data, ds.data[c.ids])


def test_a_file_of_another_job_is_refused_naming_what_differs(ds, saved):
    folder, _ = saved
    path = cache_path(folder, 0)
    with pytest.raises(ValueError, match=rf"Cache file {path}: seed 1, not 2\."):
        load_cache(path, ds, seed=2)
    other = synthetic_dataset(N, B, seed=7)
    with pytest.raises(ValueError, match="another dataset"):
        load_cache(path, other)
    with pytest.raises(ValueError, match="records of 24 bytes, not 25"):
        load_cache(path, synthetic_dataset(N, B + 1, seed=6))
    with pytest.raises(ValueError, match="N = 96 records, not N = 95"):
        load_cache(path, synthetic_dataset(N - 1, B, seed=6))
    with pytest.raises(ValueError, match="another dataset"):
        load_cache_dir(folder, other, K=K)  # a directory of another job is an error, not absent


def test_a_restart_plans_from_what_survives(ds, saved):
    """Worker 1's file is gone (its host lost), worker 2's cut short; the others' records are
    used where they are, and only the two lost batches come from the source. A cold start (an
    empty folder) fetches all N."""
    folder, p3 = saved
    cache_path(folder, 1).unlink()
    p2 = cache_path(folder, 2)
    p2.write_bytes(p2.read_bytes()[:-5])
    p4 = epoch_placement(N, K, seed=1, epoch=4)
    rep, _, notes = restart_transition(ds, folder, p4, epoch=4, seed=1, mode="exchange")
    lost = p3.batch(1).size + p3.batch(2).size
    assert rep.verified and rep.source_records == lost and rep.joined == (1, 2)
    assert len(notes) == 1 and str(p2) in notes[0]
    cold, _, _ = restart_transition(ds, folder / "empty", p4, epoch=4, seed=1, mode="exchange")
    assert cold.source_records == N and cold.verified
    # At three workers: the files of workers 0 to 2 are read (one whole), the fourth host is gone.
    p4_3 = epoch_placement(N, 3, seed=1, epoch=4)
    rep3, _, _ = restart_transition(ds, folder, p4_3, epoch=4, seed=1)
    assert rep3.verified and rep3.source_records == lost + p3.batch(3).size
    assert rep3.held_records == p3.batch(0).size


def test_save_exceptions(ds, tmp_path):
    with pytest.raises(TypeError, match="'cache' must be a Cache"):
        save_cache(tmp_path / "x", ds.data, ds, epoch=0, worker=0)
    var = load_dataset([b"ab", b"c"])
    with pytest.raises(ValueError, match="'cache' must hold its records' lengths"):
        save_cache(tmp_path / "x", Cache(ids=np.array([0]), data=var.data[:1], lengths=None),
                   var, epoch=0, worker=0)  # fmt: skip
    with pytest.raises(ValueError, match="'cache' must hold records of one size"):
        save_cache(tmp_path / "x", Cache(ids=np.array([0]), data=ds.data[:1],
                   lengths=np.array([B])), ds, epoch=0, worker=0)  # fmt: skip
    with pytest.raises(ValueError, match="at the dataset's lengths"):
        c = var.cache([0])
        save_cache(tmp_path / "x", Cache(ids=c.ids, data=c.data, lengths=np.array([1])), var, epoch=0,
                   worker=0)  # fmt: skip
    with pytest.raises(ValueError, match="'epoch' must be"):
        save_cache(tmp_path / "x", ds.cache([0]), ds, epoch=-1, worker=0)
    # The header's fields: a worker in 32 bits, an epoch and a seed in 64 (2**64 - 1: no seed).
    with pytest.raises(ValueError, match="'worker' must be at most 4294967295"):
        save_cache(tmp_path / "x", ds.cache([0]), ds, epoch=0, worker=1 << 32)
    with pytest.raises(ValueError, match="'epoch' must be at most"):
        save_cache(tmp_path / "x", ds.cache([0]), ds, epoch=1 << 64, worker=0)
    with pytest.raises(ValueError, match="'seed' must be at most"):
        save_cache(tmp_path / "x", ds.cache([0]), ds, epoch=0, worker=0, seed=(1 << 64) - 1)
    with pytest.raises(TypeError, match="'dataset' must be a Dataset, not ndarray"):
        save_cache(tmp_path / "x", ds.cache([0]), ds.data, epoch=0, worker=0)
    with pytest.raises(ValueError, match="'path' must name a file, not the folder"):
        save_cache(tmp_path, ds.cache([0]), ds, epoch=0, worker=0)
    assert not list(tmp_path.iterdir())
    afile = tmp_path / "afile"
    afile.write_bytes(b"")
    with pytest.raises(ValueError, match="'cache_dir' must be a folder, not the file"):
        save_cache_dir(afile, [ds.cache([0])], ds, epoch=0)
    with pytest.raises(ValueError, match="'cache_dir' must be a folder, not the file"):
        load_cache_dir(afile, ds, K=1)
    with pytest.raises(TypeError, match="'dataset' must be a Dataset, not ndarray"):
        load_cache_dir(tmp_path, ds.data, K=1)
    with pytest.raises(TypeError, match="'seed' must be an int, not str"):
        load_cache_dir(tmp_path, ds, K=1, seed="1")
    with pytest.raises(TypeError, match="'placement_next' must be a Placement, not int"):
        restart_transition(ds, tmp_path, 4, epoch=1)


def test_a_missing_folder_holds_nothing_and_says_so(ds, tmp_path):
    holdings, notes = load_cache_dir(tmp_path / "never-made", ds, K=2)
    assert holdings == [None, None] and len(notes) == 1 and "no such folder" in notes[0]


def test_a_file_moved_to_another_workers_name_is_absent(ds, saved):
    folder, _ = saved
    os.replace(cache_path(folder, 1), cache_path(folder, 3))  # worker 1's file as worker 3's
    holdings, notes = load_cache_dir(folder, ds, K=K, seed=1)
    assert holdings[1] is None and holdings[3] is None
    assert [n.split(": ", 1)[1] for n in notes] == ["written by worker 1, not 3. Treated as absent."]


def test_writers_of_one_file_at_once_leave_one_whole_file(ds, tmp_path):
    """Eight threads rewrite worker 0's file at once, each with other records: none fails (none
    removes another's temporary file), and the file left is exactly one of theirs, whole."""
    import threading

    path = cache_path(tmp_path, 0)
    mine = [np.arange(w, N, 8) for w in range(8)]
    errors: list[BaseException] = []

    def write(w: int) -> None:
        try:
            for _ in range(5):
                save_cache(path, ds.cache(mine[w]), ds, epoch=w, worker=0, seed=1)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == [] and sorted(p.name for p in tmp_path.iterdir()) == ["worker-0.cache"]
    got = load_cache(path, ds, seed=1)
    assert got.dropped == 0 and np.array_equal(got.cache.ids, mine[got.epoch])
    assert np.array_equal(np.asarray(got.cache.data), ds.data[mine[got.epoch]])


WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from coded_shuffle.engine import synthetic_dataset
    from coded_shuffle.engine import cache_dir

    ds = synthetic_dataset(4096, 1024, seed=6)
    cache_dir._CHUNK = 1 << 16  # many chunks; the writer is killed after the first

    def dies_after_one_chunk(f, buf):
        f.write(buf[: cache_dir._CHUNK])
        f.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    cache_dir._write_all = dies_after_one_chunk
    cache_dir.save_cache(sys.argv[1], ds.cache(range(0, 4096, 2)), ds, epoch=9, worker=0, seed=1)
    """
)


def test_a_writer_killed_mid_write_leaves_the_previous_file_whole(tmp_path):
    """A subprocess rewriting worker 0's file (epoch 9) is killed (SIGKILL) halfway through its
    rows: the file of epoch 8 is still there and whole, and the half-written one is under a
    temporary name that no reader takes."""
    ds = synthetic_dataset(4096, 1024, seed=6)
    path = cache_path(tmp_path, 0)
    save_cache(path, ds.cache(range(1, 4096, 2)), ds, epoch=8, worker=0, seed=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-c", WRITER, str(path)]
    proc = subprocess.run(args, env=env, timeout=300, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    left = sorted(p.name for p in tmp_path.iterdir())
    assert len(left) == 2 and left[1] == "worker-0.cache" and left[0].endswith(".tmp")
    got = load_cache(path, ds, seed=1)
    assert got.epoch == 8 and got.dropped == 0 and np.array_equal(got.cache.ids, np.arange(1, 4096, 2))
    holdings, notes = load_cache_dir(tmp_path, ds, K=1)
    assert np.array_equal(holdings[0].ids, np.arange(1, 4096, 2)) and notes == []
    # The half-written file, were it ever taken for a cache file, fails as cut short.
    half = tmp_path / left[0]
    with pytest.raises(CacheFileError, match="bytes, not the"):
        load_cache(half, ds, seed=1)
    # The next write of worker 0's file removes what the killed writer left.
    save_cache(path, ds.cache([0, 1]), ds, epoch=10, worker=0, seed=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker-0.cache"]
    assert load_cache(path, ds, seed=1).epoch == 10


def test_a_file_name_with_glob_characters_cleans_only_its_own_leftovers(ds, tmp_path):
    (tmp_path / ".w[1].cache.1.ab.tmp").write_bytes(b"x")  # its crashed writer's
    (tmp_path / ".w1.cache.1.ab.tmp").write_bytes(b"x")  # another file's, which "[1]" would match
    save_cache(tmp_path / "w[1].cache", ds.cache([1]), ds, epoch=0, worker=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".w1.cache.1.ab.tmp", "w[1].cache"]


# ---- records of many sizes (version 3: a table of lengths, the records end to end; version 2,
# still read: each row zero after its length)

VAR_N, VAR_K = 60, 3


@pytest.fixture(scope="module")
def var_records():
    rng = np.random.default_rng(11)
    return [rng.integers(1, 256, size=int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 41, VAR_N)]


@pytest.fixture
def var_saved(var_records, tmp_path):
    vds = load_dataset(var_records)
    p2 = epoch_placement(VAR_N, VAR_K, seed=1, epoch=2)
    save_cache_dir(tmp_path / "var", initial_caches(vds, p2), vds, epoch=2, seed=1)
    return vds, tmp_path / "var", p2


def test_records_of_many_sizes_round_trip_in_a_version_3_file(var_records, var_saved):
    vds, folder, p2 = var_saved
    ids = p2.batch(1)
    got = load_cache(cache_path(folder, 1), vds, seed=1)
    assert got.dropped == 0 and np.array_equal(got.cache.ids, ids)
    assert got.cache.is_packed and isinstance(got.cache.buffer, np.memmap)  # where they lie on disk
    assert [got.cache.record(int(i)) for i in ids] == [var_records[int(i)] for i in ids]
    # The layout of the module docstring, read with struct alone: version 3, the lengths after the
    # checksums, the records end to end from a 64-byte boundary, longest first (ties by id).
    raw = cache_path(folder, 1).read_bytes()
    width = max(len(r) for r in var_records)
    version, _, _, w, n = struct.unpack_from("<IIQQQ", raw, 8)
    assert (version, w, n) == (3, width, ids.size)
    lengths = np.frombuffer(raw, "<i8", n, 112 + 16 * n)
    assert lengths.tolist() == [len(var_records[int(i)]) for i in ids]
    rows_at = struct.unpack_from("<Q", raw, 88)[0]
    assert rows_at % 64 == 0 and rows_at >= 112 + 24 * n
    laid = sorted(ids.tolist(), key=lambda i: (-len(var_records[i]), i))
    assert raw[rows_at:] == b"".join(var_records[i] for i in laid)


def _version_2_file(path: Path, vds, ids: np.ndarray, records: list[bytes], *, epoch: int, seed: int) -> None:
    """A cache file of version 2, the layout the module docstring gives, written with struct alone
    (as the writer before version 3 wrote it): each row the record's bytes, zeros to the width."""
    import hashlib

    width, n = vds.record_bytes, ids.size
    lengths = np.array([len(records[int(i)]) for i in ids], dtype="<i8")
    tables = ids.astype("<i8").tobytes() + vds.checksums[ids].astype("<u8").tobytes() + lengths.tobytes()
    rows_at = -(-(112 + len(tables)) // 64) * 64
    digest = hashlib.blake2b(tables, digest_size=16).digest()
    head = struct.pack("<8sIIQQQQQ16s16sQ", b"CSCACHE\x00", 2, 0, vds.N, width, n, epoch, seed,
                       dataset_fingerprint(vds), digest, rows_at)  # fmt: skip
    head += hashlib.blake2b(head, digest_size=16).digest()
    rows = b"".join(records[int(i)].ljust(width, b"\x00") for i in ids)
    path.write_bytes(head + tables + b"\x00" * (rows_at - 112 - len(tables)) + rows)


def test_a_version_2_file_is_still_read_and_its_padding_checked(var_records, var_saved, tmp_path):
    """A file of version 2 (rows zero-padded to the width) reads back as its records; a byte of
    the zeros after one record (past the words its checksum reads) drops that record."""
    vds, _, p2 = var_saved
    ids = p2.batch(0)
    path = tmp_path / "v2.cache"
    _version_2_file(path, vds, ids, var_records, epoch=2, seed=1)
    got = load_cache(path, vds, seed=1)
    assert got.dropped == 0 and np.array_equal(got.cache.ids, ids) and not got.cache.is_packed
    assert [got.cache.record(int(i)) for i in ids] == [var_records[int(i)] for i in ids]
    width = vds.record_bytes
    short = [r for r, i in enumerate(ids) if -(-len(var_records[int(i)]) // 8) * 8 < width]
    raw = bytearray(path.read_bytes())
    rows_at = struct.unpack_from("<Q", raw, 88)[0]
    raw[rows_at + short[0] * width + width - 1] ^= 0x40  # a byte of padding
    path.write_bytes(bytes(raw))
    got = load_cache(path, vds, seed=1)
    assert got.dropped == 1 and int(ids[short[0]]) not in set(got.cache.ids.tolist())


def test_a_row_buffer_with_bytes_after_its_length_is_written_without_them(var_records, var_saved):
    vds, folder, _ = var_saved
    c = vds.cache([3, 7])
    dirty = np.full(c.data.shape, 0xAB, dtype=np.uint8)  # a reused buffer: bytes after each length
    for r in range(2):
        dirty[r, : c.lengths[r]] = c.data[r, : c.lengths[r]]
    path = save_cache(folder / "dirty.cache", Cache(ids=c.ids, data=dirty, lengths=c.lengths), vds, epoch=0,
                      worker=0)  # fmt: skip
    got = load_cache(path, vds)
    assert got.dropped == 0 and [got.cache.record(i) for i in (3, 7)] == [var_records[3], var_records[7]]
    assert np.array_equal(np.asarray(got.cache.data), c.data)


@pytest.mark.parametrize("cut", [112 + 16 * 8 + 3, -1])  # inside the table of lengths, the last row
def test_a_file_of_many_sizes_cut_short_is_absent(var_saved, cut):
    vds, folder, _ = var_saved
    path = cache_path(folder, 0)
    path.write_bytes(path.read_bytes()[:cut])
    with pytest.raises(CacheFileError, match=f"Cache file {path}: "):
        load_cache(path, vds)
    holdings, notes = load_cache_dir(folder, vds, K=VAR_K, seed=1)
    assert holdings[0] is None and holdings[1] is not None and "Treated as absent" in notes[0]


def test_an_altered_length_or_record_of_many_sizes_is_caught(var_records, var_saved):
    """A length altered fails the tables' digest (the file is absent); a byte of a record (its
    first, another's last) drops that record, which the restart then delivers again from the
    source."""
    vds, folder, p2 = var_saved
    path = cache_path(folder, 2)
    raw = bytearray(path.read_bytes())
    n = p2.batch(2).size
    at_len = 112 + 16 * n
    altered = bytearray(raw)
    altered[at_len] ^= 1
    path.write_bytes(bytes(altered))
    with pytest.raises(CacheFileError, match="tables"):
        load_cache(path, vds)
    rows_at = struct.unpack_from("<Q", raw, 88)[0]
    laid = sorted(p2.batch(2).tolist(), key=lambda i: (-len(var_records[i]), i))  # longest first
    ends = np.cumsum([len(var_records[i]) for i in laid])
    raw[rows_at] ^= 0x01  # the first record's first byte
    raw[rows_at + int(ends[5]) - 1] ^= 0x40  # the sixth record's last byte
    path.write_bytes(bytes(raw))
    got = load_cache(path, vds, seed=1)
    lost = {laid[0], laid[5]}
    assert got.dropped == 2 and not lost & set(got.cache.ids.tolist())
    p3 = epoch_placement(VAR_N, VAR_K, seed=1, epoch=3)
    rep, new, notes = restart_transition(vds, folder, p3, epoch=3, seed=1)
    assert rep.verified and rep.source_records == 2 and rep.held_records == VAR_N - 2
    assert len(notes) == 1 and "2 record(s) fail their checksum" in notes[0]
    for c in new:
        assert [c.record(int(i)) for i in c.ids] == [var_records[int(i)] for i in c.ids]


def test_files_of_one_kind_are_refused_for_a_dataset_of_the_other(ds, var_saved, saved):
    vds, folder, _ = var_saved
    path = cache_path(folder, 0)
    fixed = synthetic_dataset(VAR_N, vds.record_bytes, seed=6)
    with pytest.raises(ValueError, match=rf"Cache file {path}: records of many sizes, not of one size\."):
        load_cache(path, fixed)
    ffolder, _ = saved
    other = load_dataset([bytes(b) for b in range(N)])  # N records of many sizes
    with pytest.raises(ValueError, match="records of one size, not of many sizes"):
        load_cache(cache_path(ffolder, 0), other)


def test_a_file_of_an_unknown_version_is_damaged(ds, saved):
    """A whole header (its digest right) of a version this reader does not know: absent."""
    import hashlib

    folder, _ = saved
    path = cache_path(folder, 0)
    raw = bytearray(path.read_bytes())
    struct.pack_into("<I", raw, 8, 4)
    raw[96:112] = hashlib.blake2b(bytes(raw[:96]), digest_size=16).digest()
    path.write_bytes(bytes(raw))
    with pytest.raises(CacheFileError, match="version 4, not 1, 2 or 3"):
        load_cache(path, ds)
