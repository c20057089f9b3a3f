"""The worker side for a training loop: each epoch, exactly the rows of the file the order assigns.

The oracle never goes through the codec: it opens the ``.npy`` file with numpy and indexes it
with the epoch's global order cut by ``np.array_split`` (first ``N mod K`` batches one longer),
which is how the batches of any ``K`` are defined (contiguous runs of the epoch order).
"""

from __future__ import annotations

import importlib.util
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset, parse_frame
from coded_shuffle.engine import run
from coded_shuffle.errors import IntegrityError
from coded_shuffle.loader import EpochBatch, InProcessLoader, MPILoader, load_rows
from coded_shuffle.orders import OrderSpec, epoch_order, epoch_permutation
from coded_shuffle.records import NpyRecords
from coded_shuffle.transport import InProcessTransport
from tests.loader.variable_records import byte_cuts, check_variable_batch, write_files

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "tests" / "loader" / "mpi_loader_prog.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpiexec beside the interpreter and mpi4py")

ROW = np.dtype([("x", "<f4", (3,)), ("y", "<i2")])


def write_rows(path: Path, N: int, rng: np.random.Generator) -> np.ndarray:
    """A structured ``.npy`` file of ``N`` rows: features ``x`` and a label ``y``."""
    X = np.zeros(N, dtype=ROW)
    X["x"] = rng.standard_normal((N, 3))
    X["y"] = rng.integers(-1000, 1000, N)
    np.save(path, X)
    return X


def oracle_batches(
    N: int, K: int, *, seed: int, epoch: int, spec: OrderSpec | None = None
) -> list[np.ndarray]:
    order = (
        epoch_permutation(N, seed=seed, epoch=epoch)
        if spec is None
        else epoch_order(N, seed=seed, epoch=epoch, spec=spec)
    )
    return np.array_split(np.asarray(order, dtype=np.int64), K)


def assert_rows(batch: EpochBatch, ids: np.ndarray, X: np.ndarray) -> None:
    assert np.array_equal(batch.ids, ids)
    assert batch.records.dtype == X.dtype and batch.records.shape == (ids.size, *X.shape[1:])
    assert batch.records.tobytes() == X[ids].tobytes()  # bit for bit, in the epoch's order


@pytest.mark.parametrize(("N", "K"), [(50, 1), (50, 2), (61, 3), (97, 5)])
def test_each_worker_gets_the_rows_of_its_batch_in_epoch_order(tmp_path, rng, N, K):
    path = tmp_path / "rows.npy"
    write_rows(path, N, rng)
    X = np.load(path)  # the oracle reads the file on its own
    seed, epochs = 3, 4
    loader = InProcessLoader(path, K=K, epochs=epochs, seed=seed)
    seen = []
    for loaded in loader:
        t = loaded.epoch
        seen.append(t)
        want = oracle_batches(N, K, seed=seed, epoch=t)
        assert len(loaded.batches) == K
        for k, batch in enumerate(loaded.batches):
            assert (batch.epoch, batch.worker) == (t, k)
            assert_rows(batch, want[k], X)
            assert [i for i, _ in batch] == want[k].tolist()
            assert all(row.tobytes() == X[i].tobytes() for i, row in batch)
            with pytest.raises(ValueError):
                batch.records[0] = batch.records[1]  # read-only
        if t == 0:
            assert loaded.report is None and all(b.decoded == 0 for b in loaded.batches)
            continue
        rep = loaded.report
        assert rep is not None and rep.verified and rep.records_checked == N and rep.repairs == 0
        before = oracle_batches(N, K, seed=seed, epoch=t - 1)
        for k, batch in enumerate(loaded.batches):  # what moved to worker k came coded
            assert batch.decoded == np.setdiff1d(want[k], before[k]).size
    assert seen == list(range(epochs)) and len(loader.reports) == epochs - 1


def test_start_epoch_resumes_with_the_same_batches_and_bytes(rng):
    X = rng.standard_normal((45, 3))
    full = list(InProcessLoader(X, K=3, epochs=5, seed=8))
    resumed = list(InProcessLoader(X, K=3, epochs=2, start_epoch=3, seed=8))
    assert [e.epoch for e in resumed] == [3, 4] and resumed[0].report is None
    for k in range(3):
        assert_rows(resumed[0].batches[k], oracle_batches(45, 3, seed=8, epoch=3)[k], X)
        assert resumed[0].batches[k].decoded == 0  # read from the dataset
        assert np.array_equal(resumed[1].batches[k].records, full[4].batches[k].records)
    assert resumed[1].report is not None and full[4].report is not None
    assert resumed[1].report.coded_bytes == full[4].report.coded_bytes


def test_row_shape_and_dtype_kept(rng):
    X = rng.standard_normal((40, 2, 3)).astype(np.float16)
    for loaded in InProcessLoader(X, K=4, epochs=2, seed=0):
        for k, batch in enumerate(loaded.batches):
            assert_rows(batch, oracle_batches(40, 4, seed=0, epoch=loaded.epoch)[k], X)


def test_non_contiguous_and_big_endian_sources(rng):
    X = np.asfortranarray(rng.standard_normal((30, 4)).astype(">f8"))
    for source in (X, X[:, ::2], X.T.copy().T):
        for loaded in InProcessLoader(source, K=3, epochs=2, seed=4):
            for k, batch in enumerate(loaded.batches):
                assert_rows(
                    batch, oracle_batches(30, 3, seed=4, epoch=loaded.epoch)[k], np.ascontiguousarray(source)
                )


def test_column_files_reach_the_loader_as_one_record_source(tmp_path, rng):
    """Features and labels in two .npy files: each batch's rows hold both, as the files do."""
    x, y = rng.standard_normal((30, 3)).astype(np.float32), rng.integers(0, 9, 30)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    source = NpyRecords([tmp_path / "x.npy", tmp_path / "y.npy"])
    for loaded in InProcessLoader(source, K=3, epochs=2, seed=1):
        for k, batch in enumerate(loaded.batches):
            ids = oracle_batches(30, 3, seed=1, epoch=loaded.epoch)[k]
            assert batch.ids.tolist() == list(ids)
            assert np.array_equal(batch.records["f0"], x[ids]) and np.array_equal(batch.records["f1"], y[ids])


def test_coded_bytes_equal_the_engines(tmp_path, rng):
    N, K, seed, epochs = 90, 3, 11, 4
    path = tmp_path / "rows.npy"
    write_rows(path, N, rng)
    engine = run(load_dataset(np.load(path)), K=K, epochs=epochs - 1, seed=seed)
    loaded = list(InProcessLoader(path, K=K, epochs=epochs, seed=seed))
    for t in range(1, epochs):
        rep, ref = loaded[t].report, engine.transitions[t - 1]
        assert rep is not None
        assert loaded[t].coded_bytes == rep.coded_bytes == ref.coded_bytes == rep.coded_symbols * ROW.itemsize
        assert rep.coded_symbols == ref.coded_symbols
        # The uncoded load, by brute force: every row that changes worker, sent alone.
        a, b = oracle_batches(N, K, seed=seed, epoch=t - 1), oracle_batches(N, K, seed=seed, epoch=t)
        moved = sum(np.setdiff1d(b[k], a[k]).size for k in range(K))
        assert loaded[t].uncoded_bytes == moved * ROW.itemsize
        assert rep.coded_bytes < rep.uncoded_bytes
    assert loaded[0].coded_bytes == loaded[0].uncoded_bytes == 0


def test_shard_aware_order(rng):
    X = rng.integers(0, 1 << 30, size=(120, 2), dtype=np.int64)
    spec = OrderSpec("py1e", shard_size=10, block_size=30)
    for loaded in InProcessLoader(X, K=4, epochs=3, seed=2, order=spec, strategy="exact"):
        for k, batch in enumerate(loaded.batches):
            assert_rows(batch, oracle_batches(120, 4, seed=2, epoch=loaded.epoch, spec=spec)[k], X)


def test_worker_iterators_in_lockstep(rng):
    X = rng.standard_normal((30, 4))
    loader = InProcessLoader(X, K=3, epochs=3, seed=5)
    its = [loader.worker(k) for k in range(3)]
    for t, step in enumerate(zip(*its, strict=True)):
        for k, batch in enumerate(step):
            assert_rows(batch, oracle_batches(30, 3, seed=5, epoch=t)[k], X)
    loader = InProcessLoader(X, K=3, epochs=3, seed=5)
    w0, w1 = loader.worker(0), loader.worker(1)
    next(w0)
    next(w0)  # worker 0 asks for epoch 1 before worker 1 took epoch 0: still fine (epoch 1 made)
    with pytest.raises(RuntimeError, match="lockstep"):
        next(w1)  # worker 1 asks for epoch 0, already replaced


def test_corrupted_frames_are_repaired_before_the_rows_are_yielded(rng):
    X = rng.standard_normal((80, 8))

    def fault(worker, q, frame):
        if worker != 1 or q != 0:
            return frame
        bad = frame.copy()
        f = parse_frame(frame)
        bad[frame.size - f.payload_bytes :] ^= 0x5A  # every payload byte of the first frame
        return bad

    loader = InProcessLoader(X, K=4, epochs=3, seed=1, transport=InProcessTransport(4, fault=fault))
    for loaded in loader:
        for k, batch in enumerate(loaded.batches):
            assert_rows(batch, oracle_batches(80, 4, seed=1, epoch=loaded.epoch)[k], X)
    assert loader.reports[0].repairs > 0 and loader.reports[1].repairs == 0


def test_unrepairable_epoch_is_never_yielded(rng):
    X = rng.standard_normal((60, 4))

    def fault(worker, q, frame):
        return None if worker == 2 else frame  # worker 2 never receives anything

    loader = InProcessLoader(X, K=3, epochs=2, seed=0, transport=InProcessTransport(3, fault=fault))
    it = iter(loader)
    assert next(it).epoch == 0
    with pytest.raises(IntegrityError, match="Worker 2"):
        next(it)


def test_loader_exceptions(tmp_path):
    X = np.zeros((10, 2))
    with pytest.raises(TypeError, match="'source'"):
        InProcessLoader([[1, 2]], K=1, epochs=1)
    with pytest.raises(ValueError, match="'source'"):
        InProcessLoader(tmp_path / "missing.npy", K=1, epochs=1)
    with pytest.raises(ValueError, match="'source'"):
        InProcessLoader(np.array(1.0), K=1, epochs=1)
    with pytest.raises(ValueError, match="'source'"):
        InProcessLoader(np.zeros((0, 3)), K=1, epochs=1)
    with pytest.raises(ValueError, match="'source'"):
        InProcessLoader(np.array([None, 1], dtype=object), K=1, epochs=1)
    with pytest.raises(ValueError, match="'K' must be at least 1"):
        InProcessLoader(X, K=0, epochs=1)
    with pytest.raises(ValueError, match="'K' must be at most N = 10, not 11"):
        InProcessLoader(X, K=11, epochs=1)
    with pytest.raises(TypeError, match="'K'"):
        InProcessLoader(X, K=2.0, epochs=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'epochs' must be at least 1, not 0"):
        InProcessLoader(X, K=2, epochs=0)
    with pytest.raises(ValueError, match="'seed'"):
        InProcessLoader(X, K=2, epochs=1, seed=-1)
    with pytest.raises(ValueError, match="'start_epoch'"):
        InProcessLoader(X, K=2, epochs=1, start_epoch=-1)
    with pytest.raises(ValueError, match="'order'"):
        InProcessLoader(X, K=2, epochs=1, order="shuffled")
    with pytest.raises(TypeError, match="'order'"):
        InProcessLoader(X, K=2, epochs=1, order=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'strategy'"):
        InProcessLoader(X, K=2, epochs=1, strategy="best")
    with pytest.raises(ValueError, match="'max_repair_rounds'"):
        InProcessLoader(X, K=2, epochs=1, max_repair_rounds=-1)
    with pytest.raises(TypeError, match="'transport'"):
        InProcessLoader(X, K=2, epochs=1, transport=InProcessTransport(3))
    loader = InProcessLoader(X, K=2, epochs=1)
    with pytest.raises(ValueError, match="'k' must be less than K = 2, not 2"):
        loader.worker(2)
    with pytest.raises(ValueError, match="'size'"):
        next(next(iter(loader)).batches[0].minibatches(0))
    # The MPI loader checks its arguments before touching MPI.
    with pytest.raises(TypeError, match="'transport'"):
        MPILoader(X, epochs=2, transport=InProcessTransport(2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'epochs'"):
        MPILoader(X, epochs=0)
    with pytest.raises(ValueError, match="'order'"):
        MPILoader(X, epochs=2, order="shuffled")
    with pytest.raises(TypeError, match="'cache_dir' must be a folder's path, not int"):
        MPILoader(X, epochs=2, cache_dir=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'network' must be a Network or None, not str"):
        MPILoader(X, epochs=2, network="down=1")  # type: ignore[arg-type]
    from coded_shuffle.network import Network

    with pytest.raises(ValueError, match="'network' must have racks of K = 2 hosts in all, not 4"):
        InProcessLoader(X, K=2, epochs=1, network=Network.parse("up=1,down=1,racks=2x2,rack-up=1"))
    with pytest.raises(TypeError, match="'source'"):
        load_rows({"x": 1})


def test_minibatches_cover_the_batch_in_order(rng):
    X = rng.standard_normal((23, 2))
    batch = next(iter(InProcessLoader(X, K=2, epochs=1, seed=0))).batches[0]
    parts = list(batch.minibatches(5))
    assert [p[0].size for p in parts] == [5, 5, 2]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), batch.ids)
    assert np.array_equal(np.concatenate([p[1] for p in parts]), batch.records)


# --------------------------------------------------------------------------- under mpiexec


@needs_mpi
@pytest.mark.mpi
def run_program(K: int, *args: object) -> subprocess.CompletedProcess[str]:
    cmd = [str(MPIEXEC), "-n", str(K + 1), sys.executable, "-m", "mpi4py", str(PROGRAM), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize(("K", "start", "fault"), [(2, 0, "once"), (3, 2, "none")])
def test_mpi_workers_get_the_rows_of_their_batches(tmp_path, rng, K, start, fault):
    """Over MPI: the rows of the file, in epoch order; worker 0's first delivery corrupted for K = 2."""
    N, seed, epochs = 70, 4, 3
    path = tmp_path / "rows.npy"
    write_rows(path, N, rng)
    # with K = 3, the same launch first runs a job on files of variable sizes, cut by bytes, the
    # same on files of 2 to 6 KiB with a storage of 2 batches (each record cut into 2 pieces by
    # its own length), and two jobs with cache_dir, the second started from what the first left
    # (on the rows, then on the files of variable sizes)
    files = write_files(tmp_path / "files", 40, rng) if K == 3 else None
    big = write_files(tmp_path / "big", 30, rng, sizes=(2048, 6144)) if K == 3 else []
    more = [f"variable={tmp_path / 'files'}", f"vstorage={tmp_path / 'big'}", f"held={tmp_path / 'cache'}",
            f"recut={tmp_path / 'wide.npy'}"]  # fmt: skip
    if K == 3:  # records of 4 KiB: cut into 2 pieces at K = 3 and 1 at K = 2 with a storage of 2
        np.save(tmp_path / "wide.npy", rng.integers(0, 256, (18, 4096), dtype=np.uint8))
    proc = run_program(K, path, tmp_path, epochs, start, seed, "auto", fault, *(more if files else []))
    assert proc.returncode == 0, proc.stderr
    X = np.load(path)
    if files:
        check_variable_job(tmp_path, files, K, seed, range(start, start + epochs))
        check_variable_job(tmp_path, big, K, seed, range(start, start + epochs), storage=2)
        check_held_job(tmp_path, X, K, seed, start + 2)
        check_variable_held_job(tmp_path, files, K, seed, start + 2)
        check_variable_stored_job(tmp_path, big, K, seed, start + 2)
        check_storage_job(tmp_path, X, K, seed, start + 2)
        check_recut_job(tmp_path, K, seed, start)
        check_sized_recut_job(tmp_path, big, K, seed, start)
    before: list[np.ndarray] = []
    for t in range(start, start + epochs):
        want = oracle_batches(N, K, seed=seed, epoch=t)
        for k in range(K):
            got = np.load(tmp_path / f"w{k}_e{t}.npz")
            assert np.array_equal(got["ids"], want[k])
            assert got["records"].dtype == ROW and got["records"].tobytes() == X[want[k]].tobytes()
            assert int(got["decoded"]) == (np.setdiff1d(want[k], before[k]).size if before else 0)
            # the loader's decode (the program's: a record's bytes reversed) made each sample
            assert np.array_equal(got["sample_ids"], want[k])
            assert got["samples"].tobytes() == b"".join(X[i].tobytes()[::-1] for i in want[k])
        before = want
    assert sorted(p.name for p in tmp_path.glob("w*.npz")) == sorted(
        f"w{k}_e{t}.npz" for k in range(K) for t in range(start, start + epochs)
    )
    reports = json.loads((tmp_path / "reports.json").read_text())
    engine = run(load_dataset(X), K=K, epochs=start + epochs - 1, seed=seed)
    assert [r["epoch"] for r in reports] == list(range(start + 1, start + epochs))
    for i, (r, ref) in enumerate(zip(reports, engine.transitions[start:], strict=True)):
        assert r["verified"] and r["records_checked"] == N
        assert r["coded_bytes"] == ref.coded_bytes and r["uncoded_bytes"] == ref.uncoded_bytes
        assert r["coded_symbols"] == ref.coded_symbols and r["header_bytes"] == ref.wire.header_bytes
        if fault == "once" and i == 0:  # every record worker 0 decoded was re-sent alone
            assert (
                r["repairs"]
                == np.setdiff1d(
                    oracle_batches(N, K, seed=seed, epoch=start + 1)[0],
                    oracle_batches(N, K, seed=seed, epoch=start)[0],
                ).size
            )
            assert r["wire_bytes"] == ref.wire_bytes + r["repair_bytes"] and r["repair_bytes"] > 0
        else:
            assert r["repairs"] == 0 and r["wire_bytes"] == ref.wire_bytes


def check_held_job(out: Path, X: np.ndarray, K: int, seed: int, t: int) -> None:
    """The job started at epoch ``t`` from the cache files of the job of epochs ``t - 2, t - 1``,
    worker 0's file cut short and the last worker's removed: both start empty; every batch is
    the rows of the file; only their records of epoch ``t - 1`` came from the source; the first
    transition's bound is that of the same holdings in one process (:func:`elastic_transition`)."""
    from coded_shuffle.engine.elastic import elastic_transition
    from coded_shuffle.orders import placement_from_owner

    N, B = X.shape[0], X.itemsize
    want, was = oracle_batches(N, K, seed=seed, epoch=t), oracle_batches(N, K, seed=seed, epoch=t - 1)
    for k in range(K):
        got = np.load(out / f"h{k}.npz")
        assert int(got["epoch"]) == t and np.array_equal(got["ids"], want[k])
        assert got["records"].tobytes() == X[want[k]].tobytes()
    notes = [json.loads((out / f"h{k}.json").read_text()) for k in range(K)]
    assert len(notes[0]) == 1 and "Treated as absent" in notes[0][0] and not any(notes[1:])
    held = json.loads((out / "held.json").read_text())
    start, (rep,) = held["start"], held["reports"]
    lost = was[0].size + was[K - 1].size
    assert start["joined"] == [0, K - 1] and start["source_records"] == lost
    assert start["held_records"] == N - lost and start["source_bytes"] == lost * B
    assert rep["epoch"] == t and rep["verified"] and rep["records_checked"] == N
    ds = load_dataset(X)
    owner = np.zeros(N, dtype=np.int64)
    for k, b in enumerate(want):
        owner[b] = k
    holdings = [None, *(ds.cache(was[k]) for k in range(1, K - 1)), None]
    ref, _ = elastic_transition(ds, holdings, placement_from_owner(owner, K), epoch=t, seed=seed)
    assert start["bound"] == ref.bound and ref.source_records == lost
    assert start["bound_bytes"] == ref.bound_bytes == ref.bound * B
    assert rep["coded_symbols"] + lost >= start["bound"]


def check_variable_held_job(out: Path, files: list[bytes], K: int, seed: int, t: int) -> None:
    """The jobs on files of variable sizes (batches cut by bytes) with a ``cache_dir``: the first
    from no files (every record from the source, its bytes those of the files); the second, at
    epoch ``t``, from the files of epoch ``t - 1``, worker 0's with its first record altered and
    the last worker's removed: only those records come from the source (their own bytes), the
    first transition's bound is that of the same holdings in one process, each batch is the
    files' records, and each worker's file then holds its batch of ``t``, read back by the library."""
    from coded_shuffle.engine.cache_dir import cache_path, load_cache
    from coded_shuffle.engine.elastic import elastic_transition
    from coded_shuffle.orders import placement_from_owner

    N, sizes = len(files), np.array([len(f) for f in files])
    cut = [byte_cuts(np.asarray(epoch_permutation(N, seed=seed, epoch=e)), sizes, K) for e in (t - 1, t)]
    was, want = cut
    ds = load_dataset(files)
    for k in range(K):
        got = np.load(out / f"vh{k}.npz")
        check_variable_batch(got, want[k], files)
        back = load_cache(cache_path(out / "cache-var", k), ds, seed=seed)
        assert back.epoch == t and back.dropped == 0 and np.array_equal(back.cache.ids, np.sort(want[k]))
        assert [back.cache.record(int(i)) for i in back.cache.ids] == [files[int(i)] for i in back.cache.ids]
    notes = [json.loads((out / f"vh{k}.json").read_text()) for k in range(K)]
    assert len(notes[0]) == 1 and "1 record(s) fail their checksum" in notes[0][0] and not any(notes[1:])
    got = json.loads((out / "vh.json").read_text())
    (cold, start), (rep,) = got["starts"], got["reports"]
    assert (cold["source_records"], cold["joined"]) == (N, list(range(K)))
    assert cold["source_bytes"] == int(sizes.sum())
    first = min(was[0].tolist(), key=lambda i: (-int(sizes[i]), i))  # laid first in the file: longest
    lost = np.concatenate([[first], was[K - 1]])  # worker 0's first record, the last worker's all
    assert start["joined"] == [K - 1] and start["source_records"] == lost.size
    assert start["source_bytes"] == int(sizes[lost].sum()) and start["held_records"] == N - lost.size
    assert rep["epoch"] == t and rep["verified"] and rep["records_checked"] == N
    owner = np.zeros(N, dtype=np.int64)
    for k, b in enumerate(want):
        owner[b] = k
    holdings = [ds.cache(np.setdiff1d(was[0], lost)), *(ds.cache(was[k]) for k in range(1, K - 1)), None]
    ref, _ = elastic_transition(ds, holdings, placement_from_owner(owner, K), epoch=t, seed=seed)
    assert start["bound"] == ref.bound and ref.source_records == lost.size
    # the bound in bytes, that of the same holdings in one process (a bound of the byte matrix)
    assert start["bound_bytes"] == ref.bound_bytes and 0 < ref.bound_bytes < ref.bound * int(sizes.max())


def check_variable_stored_job(out: Path, files: list[bytes], K: int, seed: int, t: int) -> None:
    """The jobs on files of 2 to 6 KiB storing 2 batches (each record cut into pieces by its own
    length) with a ``cache_dir``: the first from no files, each piece once from the source (the
    records' bytes in all) and once from a peer; the second, at epoch ``t``, from the files of
    epoch ``t - 1`` without the last worker's (its host lost): its pieces all from its peers, at
    their own lengths, none from the source; each batch the files' records, and each worker's file
    then its pieces of epoch ``t``, read back by the library."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.cache_dir import cache_path, load_cache
    from coded_shuffle.engine.schedule import EpochSchedule

    N, sizes = len(files), np.array([len(f) for f in files])
    scheme = scheme_for("coded", K=K, storage=2, sizes=sizes)
    schedule = EpochSchedule(
        N=N, K=K, seed=seed, spec=OrderSpec(), scheme=scheme, sizes=sizes, balance="bytes"
    )
    *_, before, now = schedule.epochs(start=0, count=t + 1)
    want = byte_cuts(np.asarray(epoch_permutation(N, seed=seed, epoch=t)), sizes, K)
    work = scheme.dataset(load_dataset(files))
    for k in range(K):
        check_variable_batch(np.load(out / f"vsh{k}.npz"), want[k], files)
        back = load_cache(cache_path(out / "cache-vstorage", k), work, seed=seed)
        ids = np.sort(scheme.held(now.held, k))
        assert back.epoch == t and back.dropped == 0 and np.array_equal(back.cache.ids, ids)
        assert np.asarray(back.cache.data).tobytes() == work.data[ids].tobytes()
    assert not any(json.loads((out / f"vsh{k}.json").read_text()) for k in range(K))
    got = json.loads((out / "vsh.json").read_text())
    (cold, start), (rep,) = got["starts"], got["reports"]
    units = N * scheme.pieces
    assert (cold["source_pieces"], cold["peer_pieces"], cold["kept_pieces"]) == (units, units, 0)
    assert cold["source_bytes"] == int(sizes.sum())  # every piece once: every record's bytes
    lost = scheme.held(before.held, K - 1)
    lengths = scheme.holding.unit_lengths
    assert (start["source_pieces"], start["source_bytes"], start["peer_pieces"]) == (0, 0, lost.size)
    assert start["peer_bytes"] == int(lengths[lost].sum()) and start["kept_pieces"] == 2 * units - lost.size
    assert rep["epoch"] == t and rep["verified"] and rep["records_checked"] == N and rep["storage"] == 2


def check_storage_job(out: Path, X: np.ndarray, K: int, seed: int, t: int) -> None:
    """The job storing 2 batches restarted at epoch ``t`` from its files of epoch ``t - 1``, the
    last worker's removed (its host lost): that worker's storage all came from its peers, nothing
    from the source (every piece is stored by two workers); restarted again at ``t + 2`` with every
    file, all kept; at ``t + 3`` without two files; the batches are the rows of the file, and the
    transitions those of the job that never stopped."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule

    N = X.shape[0]
    for e in (t, t + 1, t + 2, t + 3):
        want = oracle_batches(N, K, seed=seed, epoch=e)
        for k in range(K):
            got = np.load(out / f"s{k}_e{e}.npz")
            assert np.array_equal(got["ids"], want[k]) and got["records"].tobytes() == X[want[k]].tobytes()
    got = json.loads((out / "stored.json").read_text())
    start, reports = got["start"], got["reports"]
    scheme = scheme_for("coded", K=K, storage=2, record_bytes=X.itemsize)
    schedule = EpochSchedule(N=N, K=K, seed=seed, spec=OrderSpec(), scheme=scheme)
    *_, before = schedule.epochs(start=0, count=t)  # the storage of epoch t - 1, followed from epoch 0
    lost = int(scheme.held(before.held, K - 1).size)  # the last worker's pieces
    width = scheme.piece_bytes(X.itemsize)
    assert (start["source_pieces"], start["source_bytes"]) == (0, 0)
    assert (start["peer_pieces"], start["peer_bytes"]) == (lost, lost * width)
    assert start["kept_pieces"] == 2 * N * scheme.pieces - lost
    # restarted again at t + 2 with every file: the storage is kept whole, nothing sent
    kept = json.loads((out / "kept.json").read_text())
    start = kept["start"]
    assert (start["kept_pieces"], start["peer_pieces"], start["source_pieces"]) == (
        2 * N * scheme.pieces,
        0,
        0,
    )
    # restarted at t + 3 without the files of workers 0 and 1: a piece only they stored comes from
    # the source once (to worker 0), then from worker 0 to worker 1; the rest from worker 2
    two = json.loads((out / "two.json").read_text())
    *_, before = schedule.epochs(start=0, count=t + 3)
    holders = np.asarray(before.held.holders).reshape(-1)
    alone = int(np.sum((holders & ~np.uint64(0b11)) == 0))
    lost = sum(int(scheme.held(before.held, k).size) for k in (0, 1))
    assert (two["start"]["source_pieces"], two["start"]["peer_pieces"]) == (alone, lost - alone) and alone > 0
    reports += kept["reports"] + two["reports"]
    straight = run(load_dataset(X), K=K, epochs=t + 3, seed=seed, storage=2)
    assert [r["epoch"] for r in reports] == [t, t + 1, t + 2, t + 3]
    for r, ref in zip(reports, straight.transitions[t - 1 :], strict=True):
        assert r["verified"] and r["coded_symbols"] == ref.coded_symbols and r["wire_bytes"] == ref.wire_bytes


def _file_pieces(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The ids and rows (zero-padded to ``B``) of a cache file, read by the layout of docs
    (engine/cache_dir.py's table: the version at byte 8, ``n`` at 32, the rows' offset at 88, the
    ids from 112; version 3, the lengths after the checksums and the records end to end, longest
    first, ties in row order), not by the module."""
    raw = path.read_bytes()
    version = struct.unpack_from("<I", raw, 8)[0]
    n, B = struct.unpack_from("<Q", raw, 32)[0], struct.unpack_from("<Q", raw, 24)[0]
    at = struct.unpack_from("<Q", raw, 88)[0]
    ids = np.frombuffer(raw, "<i8", n, 112)
    if version != 3:
        return ids, np.frombuffer(raw, np.uint8, n * B, at).reshape(n, B)
    rows = np.zeros((n, B), dtype=np.uint8)
    lengths = np.frombuffer(raw, "<i8", n, 112 + 16 * n).tolist()
    for r in sorted(range(n), key=lambda r: (-lengths[r], r)):
        rows[r, : lengths[r]] = np.frombuffer(raw, np.uint8, lengths[r], at)
        at += lengths[r]
    return ids, rows


def check_recut_job(out: Path, K: int, seed: int, start: int) -> None:
    """The jobs storing 2 batches relaunched on another number of workers (the program's
    :func:`recut_job`): ``K`` to ``K - 1`` with only the last worker's file left (worker 0 reads it;
    what no survivor holds comes from the source once), ``K - 1`` to ``K`` with every file (the new
    worker starts empty), and ``K`` to ``K - 1`` again on records of 14 bytes, stored whole at any
    ``K`` (the files' pieces do not fit the storage a restore would plan from). Each epoch's
    batches are the rows of the file; the report is that of the in-process re-cut of the same
    files (:func:`recut_restart`); every worker's storage after the re-cut is, byte for byte, the
    pieces cut from the rows here (piece ``q`` of record ``r``: bytes ``[q w, (q + 1) w)``), each
    piece held by 2 workers, every record of a worker's batch whole; the transitions after it are
    verified."""
    from coded_shuffle.engine.recover import recut_restart

    wide = np.load(out / "wide.npy")
    for name, X, was, now in (
        ("a", wide, K, K - 1),
        ("b", wide, K - 1, K),
        ("c", np.load(out / "rows.npy"), K, K - 1),
    ):
        rows_of = X.view(np.uint8).reshape(X.shape[0], -1)
        ds = load_dataset(X)
        for t in (start + 2, start + 3):
            want = oracle_batches(X.shape[0], now, seed=seed, epoch=t)
            for k in range(now):
                got = np.load(out / f"r{name}{k}_e{t}.npz")
                assert np.array_equal(got["ids"], want[k])
                assert got["records"].tobytes() == X[want[k]].tobytes()
        got = json.loads((out / f"recut-{name}.json").read_text())
        ref, caches, _ = recut_restart(ds, out / f"recut-{name}-before", K=was, K_next=now, M=2, seed=seed,
                                       epoch=start + 1)  # fmt: skip
        expect = ref.to_dict()
        assert {k: v for k, v in got["start"].items() if k != "seconds"} == {
            k: v for k, v in expect.items() if k != "seconds"
        }
        start_ = got["start"]
        moved = start_["peer_bytes"] + start_["source_bytes"]
        assert start_["verified"] and start_["kept_bytes"] + moved == start_["storage_bytes"]
        assert start_["peer_bytes"] + start_["source_bytes"] == start_["download_bound"]
        assert start_["source_bytes"] == start_["source_bound"]
        assert (start_["source_bytes"] > 0) == (now < was) and start_["joined"] == [now - 1]
        P = 1 if now == 2 or name == "c" else 2  # pieces a record at K' (storage 2)
        w = rows_of.shape[1] // P
        counts = np.zeros(X.shape[0] * P, dtype=np.int64)
        want = oracle_batches(X.shape[0], now, seed=seed, epoch=start + 2)
        for k in range(now):
            ids, rows = _file_pieces(out / f"recut-{name}-cut" / f"worker-{k}.cache")
            assert np.array_equal(ids, caches[k].ids)
            cut = rows_of.reshape(X.shape[0], P, w)[ids // P, ids % P]
            assert rows.tobytes() == cut.tobytes()
            counts[ids] += 1
            assert np.isin(np.add.outer(want[k] * P, np.arange(P)).reshape(-1), ids).all()
        assert (counts == 2).all()
        assert [r["epoch"] for r in got["reports"]] == [start + 3] and got["reports"][0]["verified"]
        notes = [json.loads((out / f"r{name}{k}.json").read_text()) for k in range(now)]
        assert notes == [[]] * now


def check_sized_recut_job(out: Path, files: list[bytes], K: int, seed: int, start: int) -> None:
    """The jobs of :func:`check_recut_job`'s ``a`` and ``b`` on files of 2 to 6 KiB (records of
    many sizes, each cut by its own length into the pieces of a record of their mean size):
    ``K`` to ``K - 1`` with only the last worker's file left, ``K - 1`` to ``K`` with every file.
    Each batch is the files' records; the report is that of the in-process re-cut of the same files
    (:func:`recut_restart`); every worker's file after the re-cut holds, piece by piece, the bytes
    ``[q L // P', (q + 1) L // P')`` of its record of ``L`` bytes (sliced here), each piece on 2
    workers, every record of a worker's batch whole; the transitions after it are verified."""
    from coded_shuffle.engine.recover import recut_restart

    N, ds = len(files), load_dataset(files)
    for name, was, now in (("d", K, K - 1), ("e", K - 1, K)):
        for t in (start + 2, start + 3):
            want = oracle_batches(N, now, seed=seed, epoch=t)
            for k in range(now):
                got = np.load(out / f"r{name}{k}_e{t}.npz")
                assert np.array_equal(got["ids"], want[k])
                assert got["records"].tobytes() == b"".join(files[i] for i in want[k])
        got = json.loads((out / f"recut-{name}.json").read_text())
        ref, caches, _ = recut_restart(ds, out / f"recut-{name}-before", K=was, K_next=now, M=2, seed=seed,
                                       epoch=start + 1)  # fmt: skip
        assert {k: v for k, v in got["start"].items() if k != "seconds"} == {
            k: v for k, v in ref.to_dict().items() if k != "seconds"
        }
        rep = got["start"]
        assert rep["verified"] and rep["peer_bytes"] + rep["source_bytes"] == rep["download_bound"]
        assert rep["source_bytes"] == rep["source_bound"] and (rep["source_bytes"] > 0) == (now < was)
        # pieces a record at K and K' (storage 2): C(K - 1, 1), fewer where a record of the mean
        # size would be cut under 1 KiB (docs/storage.md), each record then cut by its own length
        mean = -(-sum(len(f) for f in files) // N)
        P, Q = (max(1, min(k - 1, mean // 1024)) for k in (was, now))
        assert (rep["pieces"], rep["pieces_next"]) == (P, Q)
        counts = np.zeros(N * Q, dtype=np.int64)
        want = oracle_batches(N, now, seed=seed, epoch=start + 2)
        for k in range(now):
            ids, rows = _file_pieces(out / f"recut-{name}-cut" / f"worker-{k}.cache")
            assert np.array_equal(ids, caches[k].ids)
            for u, row in zip(ids.tolist(), rows, strict=True):
                r, q = files[u // Q], u % Q
                piece = r[q * len(r) // Q : (q + 1) * len(r) // Q]
                assert row.tobytes() == piece + bytes(row.size - len(piece))
            counts[ids] += 1
            assert np.isin(np.add.outer(want[k] * Q, np.arange(Q)).reshape(-1), ids).all()
        assert (counts == 2).all()
        assert [r["epoch"] for r in got["reports"]] == [start + 3] and got["reports"][0]["verified"]
        assert [json.loads((out / f"r{name}{k}.json").read_text()) for k in range(now)] == [[]] * now


def check_variable_job(
    out: Path, files: list[bytes], K: int, seed: int, epochs: range, storage: int = 1
) -> None:
    """The MPI job on files of variable sizes: each worker's batch of each epoch is the run of
    the epoch's order the byte cut gives it, each record its file's bytes, never padded (with a
    ``storage`` of 2 batches: records cut into pieces by their own lengths, each whole again)."""
    N, sizes = len(files), np.array([len(f) for f in files])
    before: list[np.ndarray] = []
    for t in epochs:
        want = byte_cuts(np.asarray(epoch_permutation(N, seed=seed, epoch=t)), sizes, K)
        for k in range(K):
            got = np.load(out / f"{'v' if storage == 1 else 'vs'}{k}_e{t}.npz")
            check_variable_batch(got, want[k], files)
            if storage == 1:  # records the transition decoded (a storage decodes pieces)
                assert int(got["decoded"]) == (np.setdiff1d(want[k], before[k]).size if before else 0)
        before = want
    reports = json.loads((out / ("variable.json" if storage == 1 else "vstorage.json")).read_text())
    assert [r["epoch"] for r in reports] == list(epochs)[1:]
    assert all(r["verified"] and r["records_checked"] == N and r["mode"] == "coded" for r in reports)
    assert all(r["storage"] == storage for r in reports)
    if storage > 1:  # every record in 2 pieces of its own bytes (the mean size is over 2 KiB)
        assert all(r["subpackets"] == 2 and r["coded_bytes"] < r["uncoded_bytes"] for r in reports)


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("how", ["break", "close", "with", "exit", "raise"])
def test_mpi_worker_that_stops_early_ends_the_job(tmp_path, rng, how):
    """Worker 1 stops after epoch 1 of 0..4: the master ends the job at the next transition, the
    other workers' iterators end after the same epoch, every rank exits with status 0."""
    N, K, seed, epochs = 60, 3, 2, 5
    path = tmp_path / "rows.npy"
    write_rows(path, N, rng)
    proc = run_program(K, path, tmp_path, epochs, 0, seed, "auto", how)
    assert proc.returncode == 0, proc.stderr
    stopped = json.loads((tmp_path / "stopped.json").read_text())
    assert stopped["stopped_by"] == 1
    assert [r["epoch"] for r in stopped["reports"]] == [1] and stopped["reports"][0]["verified"]
    # Every worker got epochs 0 and 1, none got epoch 2; every rank ended its program.
    assert sorted(p.name for p in tmp_path.glob("w*.npz")) == sorted(
        f"w{k}_e{t}.npz" for k in range(K) for t in (0, 1)
    )
    assert sorted(p.name for p in tmp_path.glob("end_*")) == [f"end_{r}" for r in range(K + 1)]
    for r in (1, 3):  # the other workers (ranks 1 and 3) learn who stopped
        assert json.loads((tmp_path / f"end_{r}").read_text())["stopped_by"] == 1


@needs_mpi
@pytest.mark.mpi
def test_mpi_unrepairable_delivery_fails_the_job(tmp_path, rng):
    """Worker 0 never gets a good frame: the job stops with the error, no rank hangs or yields."""
    path = tmp_path / "rows.npy"
    write_rows(path, 40, rng)
    proc = run_program(2, path, tmp_path, 2, 0, 0, "auto", "always")
    assert proc.returncode != 0
    assert "still unverified" in proc.stderr
    assert not (tmp_path / "w0_e1.npz").exists() and not (tmp_path / "reports.json").exists()


@needs_mpi
@pytest.mark.mpi
def test_mpi_training_example():
    """examples/train_loop.py --mpi: two worker ranks train with MPI_Allreduce; its asserts pass."""
    example = ROOT / "examples" / "train_loop.py"
    cmd = [str(MPIEXEC), "-n", "3", sys.executable, "-m", "mpi4py", str(example), "--mpi"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "K = 2 workers" in proc.stdout and "every epoch verified" in proc.stdout
    rows = [line.split() for line in proc.stdout.splitlines() if line.split()[:1] == ["7"]]
    assert len(rows) == 1 and rows[0][-1] == "yes"  # the last epoch, coded and verified


def test_in_process_loader_auto_runs_the_scheme_of_least_predicted_time():
    from coded_shuffle.network import Network

    X = np.random.default_rng(4).integers(0, 256, (600, 64), dtype=np.uint8)
    chosen = {}
    for spec in ("master=1000,up=1000,down=1000", "master=1000,up=100,down=1000,multicast"):
        loader = InProcessLoader(X, K=4, epochs=2, seed=1, scheme="auto", network=Network.parse(spec))
        for ep in loader:
            for b in ep.batches:
                assert np.array_equal(b.records, X[b.ids])
        chosen[spec] = loader.reports[0].mode
    assert chosen == {
        "master=1000,up=1000,down=1000": "exchange",
        "master=1000,up=100,down=1000,multicast": "coded",
    }
    with pytest.raises(ValueError, match="'scheme' can be 'auto' only with a 'network'"):
        InProcessLoader(X, K=4, epochs=2, scheme="auto")
    with pytest.raises(TypeError, match="'network' must be a Network or None, not str"):
        InProcessLoader(X, K=4, epochs=2, scheme="auto", network="down=100")


def test_choose_scheme_weighs_the_coded_job_against_the_peers_of_the_same_ranks():
    from coded_shuffle.loader._common import choose_scheme
    from coded_shuffle.network import Network

    kw = {"seed": 0, "order": "auto", "start_epoch": 0}
    switch, edge = (
        Network.parse("master=1000,up=1000,down=1000"),
        Network.parse("master=1000,up=100,down=1000,multicast"),
    )
    assert choose_scheme(8000, 1024, 9, network=switch, **kw)[0] == "exchange"
    scheme, why = choose_scheme(8000, 1024, 9, network=edge, **kw)
    assert (
        scheme == "coded"
        and why.startswith("scheme auto chose coded: predicted ")
        and "against exchange" in why
    )
    # no master to send (no master=R): only the peers can deliver
    assert choose_scheme(8000, 1024, 9, network=Network.parse("up=100,down=1000"), **kw)[0] == "exchange"
    with pytest.raises(ValueError, match="no mode can deliver on it: give master=R or up=R"):
        choose_scheme(8000, 1024, 9, network=Network.parse("down=1000"), **kw)
    with pytest.raises(ValueError, match="'scheme' can be 'auto' only with a 'network'"):
        choose_scheme(8000, 1024, 9, network=None, **kw)
    # a storage of 2 batches: the times of its pieces (the master's 4 workers against the 5 peers;
    # tests/loader/test_variable.py counts them), which turn this network's choice to the broadcast
    from coded_shuffle.engine.schedule import predicted_times
    from coded_shuffle.orders import OrderSpec

    fast_up = Network.parse("master=1000,up=600,down=1000,multicast")
    sizes = np.random.default_rng(0).integers(2048, 6145, 600)
    cases = ((1, 4096, None, "exchange"), (2, 4096, None, "coded"), (2, 6144, sizes, "coded"))
    for M, B, lengths, want in cases:
        t = {
            m: predicted_times(600, k, seed=0, spec=OrderSpec(), epoch=0, record_bytes=B, network=fast_up,
                               sizes=lengths, storage=M).predicted_seconds[m]
            for m, k in (("coded", 4), ("exchange", 5))
        }  # fmt: skip
        got, why = choose_scheme(600, B, 5, network=fast_up, storage=M, sizes=lengths, **kw)
        assert got == want == min(t, key=t.get) and f"predicted {t[want]:.3g} s" in why
    # a storage of 5 batches: only the 5 peers can hold it
    assert choose_scheme(600, 4096, 5, network=fast_up, storage=5, **kw)[0] == "exchange"
    # racks hold the workers of one of the two jobs: the other cannot run on them
    five, four = (Network.parse(f"master=1,up=1,down=1,racks={r},rack-up=1") for r in ("1x5", "2x2"))
    why = choose_scheme(600, 4096, 5, network=five, storage=2, **kw)[1]
    assert why.endswith(f"against coded inf s, on {five}")
    assert choose_scheme(600, 4096, 5, network=four, storage=2, **kw)[0] == "coded"
    with pytest.raises(ValueError, match="'network' lets no scheme run on a job of 5 ranks with storage = 5"):
        choose_scheme(600, 4096, 5, network=four, storage=5, **kw)
    with pytest.raises(ValueError, match="'network' must have racks of K = 7 hosts in all, not 4"):
        choose_scheme(600, 4096, 7, network=four, storage=2, **kw)


def _rack_times(scheme, placements, net, *, width: int, coded_bytes: int) -> dict[str, float]:
    """Each mode's time on ``net`` (two racks) by hand: the exchange's loads counted from
    ``scheme``'s own senders of the transition ``placements`` (every link: a worker's downlink and
    uplink, a rack's uplink and downlink, each at its rate), the coded broadcast's ``coded_bytes``
    through the master, every downlink and every rack's downlink, and without multicast the relays'
    uplinks and every rack's uplink."""
    units, wanter, _, assigned = scheme.exchange_plan(*placements)
    rack = np.repeat(np.arange(len(net.racks)), net.racks)
    sender = np.asarray(assigned.sender)
    cross = rack[sender] != rack[wanter]
    rate = {k: getattr(net, k) * 125_000 for k in ("master", "up", "down", "rack_up", "rack_down")}
    loads = {
        "down": np.bincount(wanter, minlength=4), "up": np.bincount(sender, minlength=4),
        "rack_up": np.bincount(rack[sender][cross], minlength=2),
        "rack_down": np.bincount(rack[wanter][cross], minlength=2),
    }  # fmt: skip
    exchange = max(int(v.max()) * width / rate[k] for k, v in loads.items())
    heard = ("master", "down", "rack_down") if net.multicast else tuple(rate)  # multicast: no relays
    return {"exchange": exchange, "coded": coded_bytes / min(rate[k] for k in heard)}


def test_a_storage_on_racks_is_placed_and_sent_as_the_engine_does_and_auto_takes_the_fastest():
    """``M = 2`` at ``K = 4`` in two racks of two, records of 64 B (one piece a record, fewer than
    its 3 labels): the loader's exchange places the storage across the racks and chooses its
    senders on their links as the engine's exchange on that network, which
    :func:`~coded_shuffle.plan.assign_senders_racks` gives on the demand, with fewer pieces between
    racks than the choice blind to them; every record is delivered and checked; ``auto`` (loader
    and engine) runs the mode of least time counted here, each on its own placement."""
    from coded_shuffle.engine import scheme_for, simulate
    from coded_shuffle.engine.schedule import EpochSchedule, predicted_times
    from coded_shuffle.network import Network
    from coded_shuffle.plan import assign_senders, assign_senders_racks

    X = np.random.default_rng(0).integers(0, 256, (200, 64), dtype=np.uint8)
    net = Network.parse("master=1000,up=100,down=100,racks=2x2,rack-up=20,rack-down=20")
    kw = {"K": 4, "epochs": 3, "seed": 1, "order": "permutation", "storage": 2}
    loader = InProcessLoader(X, scheme="exchange", network=net, **kw)
    engine = scheme_for("exchange", K=4, storage=2, record_bytes=64, network=net)
    e0, e1, f0, f1 = (
        e for s in (loader.scheme, engine)
        for e in EpochSchedule(N=200, K=4, seed=1, spec=loader.order, scheme=s).epochs(start=0, count=2)
    )  # fmt: skip
    assert all(np.array_equal(a.held.holders, b.held.holders) for a, b in ((e0, f0), (e1, f1)))
    rack = np.array([0, 0, 1, 1])
    spans = [len({int(rack[w]) for w in range(4) if int(h) >> w & 1}) for h in e0.held.holders.ravel()]
    assert spans == [2] * 200  # each record's holders: its owner, and one worker of the other rack
    _, wanter, holders, chosen = loader.scheme.exchange_plan(e0.held, e1.held)
    assert chosen.sender.tolist() == engine.exchange_plan(f0.held, f1.held)[3].sender.tolist()
    want = assign_senders_racks(wanter, holders, K=4, rack=rack, up=100, rack_up=20, rack_down=20)
    assert chosen.sender.tolist() == want.sender.tolist()
    blind = assign_senders(wanter, holders, K=4).sender
    assert (rack[chosen.sender] != rack[wanter]).sum() < (rack[blind] != rack[wanter]).sum()
    for ep in loader:
        assert all(np.array_equal(b.records, X[b.ids]) for b in ep.batches)
    assert all(r.verified for r in loader.reports) and len(loader.reports) == 2
    assert loader.reports[0].exchange.max_sent_bytes == 64 * int(np.bincount(chosen.sender).max())
    # auto: the coded broadcast's bytes as its loader sent them, the exchange's loads as its senders give
    coded = InProcessLoader(X, scheme="coded", network=net, **kw)
    list(coded)
    assert all(r.verified for r in coded.reports)
    blind_placement = EpochSchedule(N=200, K=4, seed=1, spec=loader.order, scheme=coded.scheme).epoch(0)
    assert not np.array_equal(blind_placement.held.holders, e0.held.holders)
    chosen_modes = set()
    slow_up = "master=1000,up=10,down=1000,multicast,spine-multicast,racks=2x2,rack-up=1000,rack-down=1000"
    for spec in (str(net), slow_up):
        n = Network.parse(spec)
        times = _rack_times(loader.scheme, (e0.held, e1.held), n, width=64,
                            coded_bytes=coded.reports[0].wire.payload_bytes)  # fmt: skip
        predicted = predicted_times(200, 4, seed=1, spec=loader.order, epoch=0, record_bytes=64, network=n,
                                    storage=2).predicted_seconds  # fmt: skip
        assert {m: predicted[m] for m in times} == pytest.approx(times)
        best = min(times, key=times.get)
        assert InProcessLoader(X, scheme="auto", network=n, **kw).scheme.name == best
        rep = simulate(K=4, N=200, record_bytes=64, epochs=1, seed=1, storage=2, mode="auto", network=n,
                       order=loader.order)  # fmt: skip
        assert rep.verified and rep.transitions[0].mode == best
        chosen_modes.add(best)
    assert chosen_modes == {"coded", "exchange"}
