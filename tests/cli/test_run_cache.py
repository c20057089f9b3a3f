"""``coded-shuffle run --cache-dir``: a job run again starts from what its workers' cache files hold."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle import cli
from coded_shuffle.engine import run, scheme_for, synthetic_dataset
from coded_shuffle.engine.cache_dir import cache_path, load_cache
from coded_shuffle.engine.recover import recut_restart, save_storage
from coded_shuffle.engine.rest import save_worker_cache
from coded_shuffle.engine.schedule import EpochSchedule
from coded_shuffle.orders import OrderSpec

ROOT = Path(__file__).resolve().parents[2]
MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpiexec beside the interpreter and mpi4py")

N, K, B = 60, 3, 16


def _run(*argv: str, workers: int = K) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", str(workers), "-N", str(N), "-B", str(B)]
    cmd += argv
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc


def _lines(proc: subprocess.CompletedProcess[str]) -> tuple[dict, list[dict]]:
    """The job's ``held_start`` and its transitions' rows."""
    first, *rows = (json.loads(line) for line in proc.stdout.splitlines())
    return first["held_start"], rows


def _files_hold(folder: Path, epoch: int, M: int) -> None:
    """Each worker's file holds its units of ``epoch`` (read back by the library, every row
    checked): the batches (or the storage, followed from epoch 0) of the job's schedule."""
    scheme = scheme_for("coded", K=K, storage=M, record_bytes=B)
    work = scheme.dataset(synthetic_dataset(N, B, seed=0))
    schedule = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(), scheme=scheme)
    *_, now = schedule.epochs(start=0, count=epoch + 1)  # a storage follows from epoch 0
    for k in range(K):
        got = load_cache(cache_path(folder, k), work, seed=0)
        ids = np.sort(scheme.held(now.held, k))
        assert (got.epoch, got.worker, got.dropped) == (epoch, k, 0) and np.array_equal(got.cache.ids, ids)
        assert np.asarray(got.cache.data).tobytes() == work.data[ids].tobytes()


@needs_mpi
@pytest.mark.mpi
def test_a_job_run_again_starts_from_its_cache_files(tmp_path):
    """Epochs 0..2 with ``--cache-dir``, then worker 1's file cut short, then epochs 2..4 from the
    files: the cut file is named and treated as absent, and only worker 1's batch of epoch 2 (its
    N / K records) comes from the source; the batches of epoch 2 then need no transition, and every
    transition is that of the job run in one process without a stop (``engine.run``)."""
    folder = tmp_path / "cache"
    job = ["--cache-dir", str(folder), "--json", "-"]
    start, rows = _lines(_run("--transitions", "2", *job))
    _files_hold(folder, 2, 1)
    cache = cache_path(folder, 1)
    cache.write_bytes(cache.read_bytes()[:-5])
    again = _run("--transitions", "2", "--start-epoch", "2", *job)
    (line,) = again.stderr.splitlines()
    assert line.startswith("coded-shuffle run: rank 2 (worker 1): Cache file ") and str(cache) in line
    assert line.endswith("Treated as absent.")
    _files_hold(folder, 4, 1)
    restart, later = _lines(again)
    # a cold start, from an empty folder: every record from the source; then worker 1's batch alone
    assert (start["source_records"], start["source_bytes"], start["joined"]) == (N, N * B, [0, 1, 2])
    assert (restart["source_records"], restart["source_bytes"]) == (N // K, N // K * B)
    assert (restart["held_records"], restart["dropped_records"], restart["joined"]) == (N - N // K, 0, [1])
    assert [r["epoch"] for r in rows] == [0, 1, 2] and [r["epoch"] for r in later] == [2, 3, 4]
    assert rows[0]["coded_symbols"] == later[0]["coded_symbols"] == 0  # every record where it goes
    straight = run(synthetic_dataset(N, B, seed=0), K=K, epochs=4, seed=0).transitions
    for r, ref in zip(rows[1:] + later[1:], straight, strict=True):
        assert r["verified"] and r["coded_symbols"] == ref.coded_symbols and r["wire_bytes"] == ref.wire_bytes


@needs_mpi
@pytest.mark.mpi
def test_a_storage_restarts_from_files_the_library_wrote(tmp_path):
    """``--storage 2``: the files of epoch 2 of workers 0 and 2 written by the library
    (``engine.rest.save_worker_cache``, as ``MPILoader(cache_dir=)`` writes them), worker 1's host
    lost: its storage of 2 N / K records comes from its peers, since every record is stored by two
    workers, none from the source; the transitions are those of a job that never stopped, and
    each worker's file then holds its storage of epoch 4."""
    M, folder = 2, tmp_path / "cache"
    scheme = scheme_for("coded", K=K, storage=M, record_bytes=B)
    work = scheme.dataset(synthetic_dataset(N, B, seed=0))
    *_, now = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(), scheme=scheme).epochs(start=0, count=3)
    for k in (0, 2):
        ids = scheme.held(now.held, k)
        save_worker_cache(folder, k, ids, work.data[ids], work, epoch=2, seed=0)
    proc = _run("--storage=2", "--transitions=2", "--start-epoch=2", "--cache-dir", str(folder), "--json")
    assert proc.stderr == ""
    restart, rows = _lines(proc)
    assert (restart["source_pieces"], restart["source_bytes"]) == (0, 0)
    assert (restart["peer_pieces"], restart["peer_bytes"]) == (M * N // K, M * N // K * B)
    assert restart["kept_pieces"] == M * N - M * N // K
    straight = run(synthetic_dataset(N, B, seed=0), K=K, epochs=4, seed=0, storage=M).transitions
    assert [r["epoch"] for r in rows] == [3, 4]
    for r, ref in zip(rows, straight[2:], strict=True):
        assert r["verified"] and r["coded_symbols"] == ref.coded_symbols and r["wire_bytes"] == ref.wire_bytes
    _files_hold(folder, 4, M)
    # the same files relaunched on K + 1 workers (a new host): the storage of epoch 5 at K + 1,
    # cut again from them, is that of the re-cut in one process of a copy of the files
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    proc = _run("--storage=2", "--transitions=1", "--start-epoch=5", "--cache-dir", str(folder), "--json",
                workers=K + 1)  # fmt: skip
    assert proc.stderr == ""
    recut, rows = _lines(proc)
    ds = synthetic_dataset(N, B, seed=0)
    ref, _, _ = recut_restart(ds, copy, K=K, K_next=K + 1, M=M, seed=0, epoch=4)
    assert recut["recut"] and recut["verified"] and (recut["K"], recut["K_next"]) == (K, K + 1)
    same = ("kept_bytes", "peer_bytes", "source_bytes", "download_bound", "source_bound")
    assert {f: recut[f] for f in same} == {f: getattr(ref, f) for f in same} and recut["source_bytes"] == 0
    assert [(r["epoch"], r["verified"]) for r in rows] == [(6, True)]
    work = scheme_for("coded", K=K + 1, storage=M, record_bytes=B).dataset(ds)
    assert [load_cache(cache_path(folder, k), work, seed=0).epoch for k in range(K + 1)] == [6] * (K + 1)


@needs_mpi
@pytest.mark.mpi
def test_records_of_many_sizes_restart_from_their_cache_files(tmp_path):
    """``--data`` a folder of files of 1 to 300 bytes: the files of epoch 2 written by the library
    (``save_worker_cache``, as ``MPILoader(cache_dir=)`` writes them: rows zero-padded, each
    record's length), worker 0's with its first record altered and worker 2's removed; the job
    started at epoch 2 from them: the altered file said in one line, only those records from the
    source (their own bytes), no record moving to epoch 2, the transition to epoch 3 verified and
    that of the job run in one process, and each worker's file then its records of epoch 3, each
    read back at its length."""
    import struct

    from coded_shuffle.codec import load_dataset

    rng = np.random.default_rng(3)
    data, folder = tmp_path / "files", tmp_path / "cache"
    data.mkdir()
    records = [rng.bytes(int(n)) for n in rng.integers(1, 301, N)]
    for i, r in enumerate(records):
        (data / f"{i:03d}.bin").write_bytes(r)
    ds = load_dataset(records)
    scheme = scheme_for("coded", K=K, storage=1, record_bytes=ds.record_bytes)
    schedule = EpochSchedule(N=N, K=K, seed=0, spec=OrderSpec(), scheme=scheme)
    two, three = schedule.epoch(2), schedule.epoch(3)
    for k in range(K - 1):
        ids = two.held.batch(k)
        save_worker_cache(folder, k, ids, ds.data[ids], ds, epoch=2, seed=0)
    first = min(two.held.batch(0).tolist(), key=lambda i: (-len(records[i]), i))  # laid first: longest
    path = cache_path(folder, 0)
    raw = bytearray(path.read_bytes())
    raw[struct.unpack_from("<Q", raw, 88)[0]] ^= 1
    path.write_bytes(bytes(raw))
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", str(K), "--data", str(data), "--start-epoch=2",
           "--transitions=1", "--cache-dir", str(folder), "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stderr.splitlines()
    said = f"Cache file {path}: 1 record(s) fail their checksum; delivered again."
    assert line == f"coded-shuffle run: rank 1 (worker 0): {said}"
    start, rows = _lines(proc)
    lost = [first, *two.held.batch(K - 1).tolist()]
    sizes = np.array([len(r) for r in records])
    assert (start["source_records"], start["source_bytes"]) == (len(lost), int(sizes[lost].sum()))
    assert (start["held_records"], start["joined"]) == (N - len(lost), [K - 1])
    straight = run(ds, K=K, epochs=3, seed=0).transitions[2]
    assert [r["epoch"] for r in rows] == [2, 3] and all(r["verified"] for r in rows)
    # every record where epoch 2 wants it once the source sent the lost ones: nothing moves, and the
    # bound in bytes is that of the holdings, not of epoch 1 -> 2
    assert (rows[0]["coded_bytes"], rows[0]["lower_bound_bytes"]) == (0, 0)
    assert (rows[1]["coded_symbols"], rows[1]["coded_bytes"]) == (
        straight.coded_symbols,
        straight.coded_bytes,
    )
    for k in range(K):
        got = load_cache(cache_path(folder, k), ds, seed=0)
        ids = np.sort(three.held.batch(k))
        assert (got.epoch, got.dropped) == (3, 0) and np.array_equal(got.cache.ids, ids)
        assert [got.cache.record(int(i)) for i in ids] == [records[int(i)] for i in ids]
    # a storage of them written at K + 1 (the library's save_storage) is cut again at K (records of
    # 1 to 300 B, stored whole at both K, which their headers cannot tell apart): as the library's
    # re-cut of the same files, and each worker's file then its records of epoch 3 at their lengths
    stored, copy = tmp_path / "stored", tmp_path / "stored-before"
    save_storage(stored, ds, K=K + 1, M=2, seed=0, epoch=1)
    shutil.copytree(stored, copy)
    cmd[cmd.index("--cache-dir") + 1] = str(stored)
    proc = subprocess.run([*cmd, "--storage", "2"], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=env, check=False)  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    recut, rows = _lines(proc)
    ref, caches, _ = recut_restart(ds, copy, K=K + 1, K_next=K, M=2, seed=0, epoch=1)
    # (the headers of whole records tell no K: the report's is the files read, worker K - 1's the last)
    assert recut["recut"] and recut["verified"] and (recut["K"], recut["K_next"]) == (K, K)
    same = ("kept_bytes", "peer_bytes", "source_bytes", "download_bound", "source_bound")
    assert {f: recut[f] for f in same} == {f: getattr(ref, f) for f in same}
    assert [(r["epoch"], r["verified"]) for r in rows] == [(3, True)]
    work = scheme_for("coded", K=K, storage=2, sizes=sizes).dataset(ds)
    for k in range(K):
        got = load_cache(cache_path(stored, k), work, seed=0)
        assert got.epoch == 3 and got.dropped == 0
        assert [got.cache.record(int(i)) for i in got.cache.ids] == [records[int(i)] for i in got.cache.ids]


def test_run_cache_dir_exceptions(tmp_path, capsys, no_launch):
    """What ``--cache-dir`` is refused with, in one line before any process starts; a folder that
    does not exist yet is passed on, and the check leaves nothing behind."""
    a_file = tmp_path / "file"
    a_file.write_text("")
    files = tmp_path / "files"  # records of several sizes, taken
    files.mkdir()
    for i, size in enumerate((3, 9, 4)):
        (files / f"{i}.bin").write_bytes(bytes(size))
    new = tmp_path / "new" / "cache"
    job = ["-K", "2", "--points", "40", "--cache-dir"]
    below = a_file / "below"
    refused = [
        ([*job, str(a_file)], f"--cache-dir {a_file}: is a file, not a folder"),
        ([*job, str(below)], f"--cache-dir {below}: cannot be made: {a_file} is a file, not a folder"),
        ([*job, str(new), "--mode", "exchange"], "needs a job with a master, not --mode exchange"),
        ([*job, str(new), "-K", "3,2", "--transitions", "1"], "the same workers at every epoch, not 3,2"),
    ]
    for argv, message in refused:
        assert cli.main(["run", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("coded-shuffle: error: ") and message in err and len(err.splitlines()) == 1, err
    assert no_launch == []
    assert cli.main(["run", *job, str(new)]) == 0
    # records of several sizes too, a storage of them as well (restored at its K, or cut again)
    assert cli.main(["run", "-K", "2", "--data", str(files), "--cache-dir", str(new), "--storage", "2"]) == 0
    cmd, var = no_launch
    assert cmd[cmd.index("--cache-dir") + 1] == str(new) and var[var.index("--data") + 1] == str(files)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "files"]  # nothing made by the check
