"""coded_shuffle.torch: each training rank yields exactly its batch, under mpiexec and torchrun.

The oracle never goes through the codec or the dataset: it reads the ``.npy`` files with numpy
and cuts each epoch's global order (:func:`coded_shuffle.orders.epoch_permutation`, the ``auto``
order at these sizes) with ``np.array_split``, which is how the batches are defined; the padding
and dropping rule (``DistributedSampler``'s) is applied to that by hand.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.orders import epoch_permutation

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(
    not HAVE_TORCH, reason="needs PyTorch (pip install 'torch==2.13.0+cpu'); the package works without it"
)
ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "torch_dataset_prog.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs mpiexec beside the interpreter and mpi4py")

N, SEED, MINI = 23, 5, 4  # the program's seed and DataLoader batch size
ROW = np.dtype([("x", "<f4", (3,)), ("y", "<i2")])


def write_data(d: Path, rng: np.random.Generator) -> dict[str, np.ndarray]:
    rows = np.zeros(N, dtype=ROW)
    rows["x"] = rng.standard_normal((N, 3))
    rows["y"] = rng.integers(-1000, 1000, N)
    x = rng.standard_normal((N, 5)).astype(np.float32)
    y = rng.integers(0, 10, N)
    np.save(d / "rows.npy", rows)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)
    return {"struct": rows, "x": x, "y": y}


WIDE = np.dtype([("x", "<f4", (640,)), ("y", "<i2")])  # 2562 bytes: 2 pieces of 1281 at K = 3, M = 2


def launch(
    how: str, K: int, *args: object, peers: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    ranks = K if peers else K + 1  # a job of peers has no master rank
    if how == "mpiexec":
        cmd = [str(MPIEXEC), "-n", str(ranks), sys.executable, "-m", "mpi4py", str(PROGRAM)]
    else:  # torchrun, on loopback
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
        cmd += ["--monitor-interval=0.5", str(PROGRAM)]
    return subprocess.run(
        [*cmd, *map(str, args)], capture_output=True, text=True, timeout=180, cwd=ROOT, check=False, env=env
    )


def write_wide(d: Path, rng: np.random.Generator) -> np.ndarray:
    wide = np.zeros(N, dtype=WIDE)
    wide["x"] = rng.standard_normal((N, 640))
    wide["y"] = rng.integers(-1000, 1000, N)
    np.save(d / "wide.npy", wide)
    return wide


def write_varfiles(
    d: Path, rng: np.random.Generator, name: str = "var", sizes: tuple[int, int] = (10, 301)
) -> np.ndarray:
    """``N`` files of ``sizes[0]`` to ``sizes[1] - 1`` (default 10 to 300) random bytes in
    ``d/name``, named in record order; their bytes."""
    (d / name).mkdir()
    files = np.empty(N, dtype=object)
    for i in range(N):
        files[i] = rng.integers(0, 256, int(rng.integers(*sizes)), dtype=np.uint8).tobytes()
        (d / name / f"{i:03d}.bin").write_bytes(files[i])
    return files


def write_recut(d: Path, wide: np.ndarray) -> None:
    """What a job of ``K = 3`` storing 2 batches of ``wide`` leaves when one host is lost: its
    files of epoch 0 in ``d/rcache`` (:func:`~coded_shuffle.engine.recover.save_storage`, the
    files the dataset writes), worker 2's removed, a copy in ``d/rcache-before``, and its state
    4 samples into epoch 1 (each worker's first 4) in ``d/rstate.json``."""
    import shutil

    from coded_shuffle.engine.recover import save_storage

    save_storage(d / "rcache", load_dataset(wide), K=3, M=2, seed=SEED, epoch=0)
    (d / "rcache" / "worker-2.cache").unlink()
    shutil.copytree(d / "rcache", d / "rcache-before")
    state = {"epoch": 1, "samples": 4, "seed": SEED, "K": 3, "N": N, "segments": []}
    (d / "rstate.json").write_text(json.dumps(state))


#: Jobs of several runs (the program's ``+``: one after the other in the same processes, each run
#: with its own dataset and output folder), each run read by its own test: a launch (PyTorch
#: imported by every rank and by torchrun, about 8 s of CPU) paid once for them. Only runs that
#: end with every rank's status 0 and whose tests read files; the job's standard error is read
#: only for the last run's (``close``: the runs before it write nothing there).
SHARED = {  # name: launcher, K (the ranks, K + 1), the runs' arguments after DATA and OUT
    "torchrun-3": ("torchrun", 3, {"files": ("files", 3, 2, 0, 1, "persistent"),
                                   "wide": ("wide", 3, 0, 0, 1),
                                   "varfiles": ("varfiles", 3, 2, 0, 1),
                                   "varbig": ("varbig", 3, 0, 0, 1),
                                   "save": ("wide", 3, 0, 0, 1, "save"),
                                   "stored": ("wide", 3, 0, 0, 1, "resume_s"),
                                   "varsave": ("varfiles", 3, 0, 0, 1, "save"),
                                   "varstored": ("varfiles", 3, 0, 0, 1, "resume_s"),
                                   "varbigsave": ("varbig", 3, 0, 0, 1, "save"),
                                   "varbigstored": ("varbig", 3, 0, 0, 1, "resume_s"),
                                   "example": ("example", 0, 0, 0, 0)}),
    "torchrun-2": ("torchrun", 2, {"resume": ("struct", 3, 0, 0, 1, "resume"),
                                   "exchange": ("struct", 3, 2, 0, 1, "exchange"),
                                   "save": ("struct", 3, 0, 0, 1, "save"),
                                   "recut": ("wide", 4, 0, 0, 1, "resume_r"),
                                   "close": ("struct", 4, 0, 0, 1, "close")}),
    "mpiexec-2": ("mpiexec", 2, {"files": ("files", 3, 0, 1, 0), "bad": ("struct", 3, 0, 0, 1, "bad"),
                                 "close": ("struct", 4, 0, 0, 1, "close")}),
}  # fmt: skip


Job = tuple[subprocess.CompletedProcess[str], dict[str, np.ndarray]]
Run = tuple[subprocess.CompletedProcess[str], dict[str, np.ndarray], Path]


class SharedJobs:
    """The jobs of :data:`SHARED`, each launched once, when a test first asks for one of its runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, Job] = {}

    def run(self, job: str, name: str) -> Run:
        """The job's process, its data (by layout) and the output folder of its run ``name``."""
        how, K, runs = SHARED[job]
        d = self.root / job
        if job not in self.done:
            d.mkdir()
            rng = np.random.default_rng(20161001)
            data = write_data(d, rng)
            data["wide"] = write_wide(d, rng)
            data["varfiles"] = write_varfiles(d, rng)
            data["varbig"] = write_varfiles(d, rng, "bigvar", (2048, 6145))
            args: list[object] = []
            for run, (layout, *rest) in runs.items():
                (d / run).mkdir()
                if rest[-1:] == ["resume_r"]:
                    write_recut(d, data["wide"])
                args += ["+"] * bool(args) + [layout, d, d / run, *rest]
            self.done[job] = (launch(how, K, *args), data)
        proc, data = self.done[job]
        return proc, data, d / name


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> SharedJobs:
    return SharedJobs(tmp_path_factory.mktemp("shared"))


def expected(K: int, t: int, *, drop_last: bool) -> list[np.ndarray]:
    """Each rank's samples of epoch ``t``, in order: its batch, cut or padded to ``L``."""
    batches = np.array_split(np.asarray(epoch_permutation(N, seed=SEED, epoch=t), dtype=np.int64), K)
    L = N // K if drop_last else math.ceil(N / K)
    return [np.array([b[i % b.size] for i in range(L)]) for b in batches]


def steps(L: int, num_workers: int) -> int:
    """DataLoader steps of ``L`` samples split in contiguous shares, batched by ``MINI`` each."""
    return sum(math.ceil(s.size / MINI) for s in np.array_split(np.arange(L), max(num_workers, 1)))


def check_run(out: Path, data: dict[str, np.ndarray], layout: str, K: int, epochs: range, *, drop_last: bool,
              num_workers: int, skip: int = 0) -> None:  # fmt: skip
    for t in epochs:
        want = expected(K, t, drop_last=drop_last)
        union = []
        for k in range(K):
            got = np.load(out / f"w{k}_e{t}.npz")
            mine = want[k][skip if t == epochs[0] else 0 :]
            ids = got["ids"]
            if num_workers == 0:
                assert ids.tolist() == mine.tolist()  # in the epoch's order
            else:  # the DataLoader interleaves its workers' batches
                assert sorted(ids.tolist()) == sorted(mine.tolist())
            assert int(got["length"]) == want[k].size and bool(got["writable"])
            assert int(got["steps"]) == steps(mine.size, num_workers)  # the same on every rank
            if layout in ("struct", "wide"):
                assert np.array_equal(got["field0"], data[layout]["x"][ids])
                assert np.array_equal(got["field1"], data[layout]["y"][ids])
            else:
                assert np.array_equal(got["field0"], data["x"][ids])
                assert np.array_equal(got["field1"], data["y"][ids])
            union += ids.tolist()
        if skip == 0 or t != epochs[0]:  # every record exactly once, besides the padding
            counts = np.bincount(union, minlength=N)
            padded = (
                [] if drop_last else [int(want[k][0]) for k in range(K) if want[k].size > len(set(want[k]))]
            )
            cut = np.array_split(epoch_permutation(N, seed=SEED, epoch=t), K)
            dropped = {int(b[-1]) for b in cut if b.size > N // K} if drop_last else set()
            for i in range(N):
                assert counts[i] == (0 if i in dropped else 1 + padded.count(i))


def check_reports(out: Path, K: int, epochs: range, data: dict[str, np.ndarray], layout: str) -> None:
    reports = json.loads((out / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == list(epochs)[1:]
    packed = data["struct"] if layout == "struct" else None
    if packed is None:
        from coded_shuffle.torch import pack_arrays

        packed = pack_arrays([data["x"], data["y"]])
    engine = run(load_dataset(packed), K=K, epochs=epochs[-1], seed=SEED)
    for r in reports:  # the bytes the master sent, counted as the engine counts them in-process
        ref = engine.transitions[r["epoch"] - 1]
        assert r["verified"] and r["records_checked"] == N
        assert r["coded_bytes"] == ref.coded_bytes and r["wire_bytes"] == ref.wire_bytes
        assert r["coded_bytes"] < r["uncoded_bytes"]


CASES = [  # launcher, layout, K, num_workers, drop_last, prefetch
    pytest.param("mpiexec", "struct", 3, 2, False, True, marks=needs_mpi, id="mpiexec-struct-2workers-pad"),
    # the first run of the shared job "mpiexec-2"
    pytest.param("mpiexec", "files", 2, 0, True, False, marks=needs_mpi, id="mpiexec-files-drop-noprefetch"),
    # the first run of the shared job "torchrun-3", whose DataLoader is made again after the
    # refusal of a persistent one (test_persistent_workers_are_refused_before_the_first_epoch)
    pytest.param("torchrun", "files", 3, 2, False, True, id="torchrun-files-2workers-pad"),
]


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize(("how", "layout", "K", "num_workers", "drop_last", "prefetch"), CASES)
def test_each_rank_yields_exactly_its_batch(
    tmp_path, rng, shared, how, layout, K, num_workers, drop_last, prefetch
):
    epochs = 3
    if (job := f"{how}-{K}") in SHARED:
        proc, data, out = shared.run(job, layout)
        assert SHARED[job][2][layout][1:5] == (epochs, num_workers, int(drop_last), int(prefetch))
    else:
        data = write_data(tmp_path, rng)
        out = tmp_path / "out"
        out.mkdir()
        proc = launch(how, K, layout, tmp_path, out, epochs, num_workers, int(drop_last), int(prefetch))
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_run(out, data, layout, K, range(epochs), drop_last=drop_last, num_workers=num_workers)
    check_reports(out, K, range(epochs), data, layout)


@needs_torch
@pytest.mark.mpi
def test_a_storage_of_two_batches_under_torchrun(shared):
    proc, data, out = shared.run("torchrun-3", "wide")  # the job's second run: K = 3, no DataLoader workers
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_run(out, data, "wide", 3, range(3), drop_last=False, num_workers=0)
    reports = json.loads((out / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == [1, 2]
    assert all(r["verified"] and r["storage"] == 2 and r["records_checked"] == N for r in reports)


@needs_torch
@pytest.mark.mpi
def test_a_storage_of_two_batches_restored_from_the_peers_mid_epoch(shared):
    """Storing 2 batches in a cache_dir, checkpointed a step (4 samples) into epoch 1, the last
    worker's file then removed (its host lost); resumed at the same K = 3: the storage of epoch 1
    comes back from the files and the peers, nothing from the source (every piece is stored by two
    workers), the lost worker's pieces all from its peers; every sample of epoch 1 exactly once
    across the two jobs; the transition to epoch 2 that of a job that never stopped."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.orders import OrderSpec

    proc, data, out = shared.run("torchrun-3", "stored")
    assert proc.returncode == 0, proc.stderr[-3000:]
    K, save = 3, out.parent / "save"
    want = expected(K, 1, drop_last=False)
    for k in range(K):  # the first job's 4 samples of epoch 1, then the rest in the resumed job
        assert np.load(save / f"w{k}_e1.npz")["ids"].tolist() == want[k][:4].tolist()
    check_run(out, data, "wide", K, range(1, 3), drop_last=False, num_workers=0, skip=4)
    scheme = scheme_for("coded", K=K, storage=2, record_bytes=WIDE.itemsize)
    *_, now = EpochSchedule(N=N, K=K, seed=SEED, spec=OrderSpec(), scheme=scheme).epochs(start=0, count=2)
    lost = int(scheme.held(now.held, K - 1).size)  # the last worker's pieces of epoch 1's storage
    held = json.loads((out / "held.json").read_text())
    width = scheme.piece_bytes(WIDE.itemsize)
    assert (held["source_pieces"], held["source_bytes"]) == (0, 0) and held["transition"] is None
    assert (held["peer_pieces"], held["peer_bytes"]) == (lost, lost * width) and lost > 0
    assert held["kept_pieces"] == 2 * N * scheme.pieces - lost
    (report,) = json.loads((out / "reports.json").read_text())
    straight = run(load_dataset(data["wide"]), K=K, epochs=2, seed=SEED, storage=2).transitions[1]
    assert report["epoch"] == 2 and report["verified"]
    assert (report["coded_symbols"], report["wire_bytes"]) == (straight.coded_symbols, straight.wire_bytes)


@needs_torch
@pytest.mark.mpi
def test_a_storage_of_two_batches_relaunched_on_fewer_ranks(shared):
    """A job of K = 3 storing 2 batches in a cache_dir, checkpointed 4 samples into epoch 1, one
    host lost (worker 2's file gone), relaunched on K' = 2 (a torchrun of 3 ranks): the rest of
    epoch 1 dealt to the two workers from the source (every sample of epoch 1 once across the
    change), then the storage of epoch 2 at K' = 2 cut again from the two files
    (engine.recut_serve), its bytes kept, from peers and from the source those of the in-process
    re-cut of the same files (recut_restart); epochs 2 and 3 every sample once at K' = 2; the
    transition to epoch 3 verified."""
    from coded_shuffle.engine.recover import recut_restart

    proc, data, out = shared.run("torchrun-2", "recut")
    assert proc.returncode == 0, proc.stderr[-3000:]
    read = np.concatenate([b[:4] for b in np.array_split(epoch_permutation(N, seed=SEED, epoch=1), 3)])
    rest = [np.load(out / f"w{k}_e1.npz")["ids"] for k in range(2)]
    assert sorted([*read.tolist(), *np.unique(np.concatenate(rest)).tolist()]) == list(range(N))
    check_run(out, data, "wide", 2, range(2, 4), drop_last=False, num_workers=0)
    got = json.loads((out / "held.json").read_text())
    held, resumed = got["held"], got["resumed"]
    assert resumed["source_records"] == N - read.size and resumed["kept_records"] == 0
    ref, _, _ = recut_restart(load_dataset(data["wide"]), out.parent / "rcache-before", K=3, K_next=2, M=2,
                              seed=SEED, epoch=1)  # fmt: skip
    assert {k: v for k, v in held.items() if k != "seconds"} == {
        k: v for k, v in ref.to_dict().items() if k != "seconds"
    }
    assert held["verified"] and (held["K"], held["K_next"]) == (3, 2)
    assert (held["pieces"], held["pieces_next"]) == (2, 1)  # records of 2562 bytes: 2 pieces at K = 3
    assert held["source_bytes"] == 0 and held["peer_bytes"] == held["download_bound"] > 0
    (report,) = json.loads((out / "reports.json").read_text())
    assert report["epoch"] == 3 and report["verified"] and report["records_checked"] == N


@needs_torch
@pytest.mark.mpi
def test_records_of_variable_sizes_under_torchrun(shared):
    """Files of 10 to 300 bytes, batches of equal bytes, 2 DataLoader workers, padded to one length
    a batch by the collate of docs/torch.md: each epoch every rank's samples are a contiguous run
    of the epoch's order (the runs in worker order, of bytes within the largest file of equal),
    padded as DistributedSampler pads to the longest run; each file's bytes exactly as on disk."""
    proc, data, out = shared.run("torchrun-3", "varfiles")  # K = 3, 2 DataLoader workers, pad
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_varfiles(out, data["varfiles"], 3, num_workers=2)


@needs_torch
@pytest.mark.mpi
def test_records_of_variable_sizes_resumed_mid_epoch_from_their_cache_files(shared):
    """Files of 10 to 300 bytes, batches of equal bytes, kept in a cache_dir; checkpointed a step
    (4 samples a rank) into epoch 1, the last worker's file then removed (its host lost);
    resumed at the same K = 3: every record of epoch 1 exactly once across the two jobs (the rest
    of each byte-cut batch, besides its padding), the two surviving workers' rests read back from
    their files, the lost one's from the source (its bytes, the files' own); epoch 2 then planned
    from what the rests hold, every record of the files' bytes."""
    proc, data, out = shared.run("torchrun-3", "varstored")
    assert proc.returncode == 0, proc.stderr[-3000:]
    K, files, save = 3, data["varfiles"], out.parent / "varsave"
    size = np.array([len(f) for f in files])
    perm = np.asarray(epoch_permutation(N, seed=SEED, epoch=1), dtype=np.int64)
    batches = byte_batches(perm, size, K)
    states = [json.loads((save / f"state_{k}.json").read_text()) for k in range(K)]
    assert states[0] == states[1] == states[2] and (states[0]["epoch"], states[0]["samples"]) == (1, 4)
    before = [np.load(save / f"w{k}_e1.npz")["ids"] for k in range(K)]
    assert [b.tolist() for b in before] == [b[:4].tolist() for b in batches]
    rest = [b[4:] for b in batches]
    # What is left dealt by count (docs/torch.md): each worker keeps the head of its own rest up to
    # its share, the excess goes, in order, to the workers below theirs.
    total = sum(r.size for r in rest)
    share = [total // K + (k < total % K) for k in range(K)]
    pool = iter(np.concatenate([r[s:] for r, s in zip(rest, share, strict=True)]).tolist())
    shares = [
        [*r[:s].tolist(), *(next(pool) for _ in range(s - min(s, r.size)))]
        for r, s in zip(rest, share, strict=True)
    ]
    for k in range(K):
        g = np.load(out / f"w{k}_e1.npz")
        assert sorted(set(g["ids"].tolist())) == sorted(shares[k])
        assert g["field0"].tobytes() == b"".join(files[i] for i in g["ids"])  # the files' bytes
    read, left = set(np.concatenate(before).tolist()), sum(shares, [])
    assert not read & set(left) and sorted([*read, *left]) == list(range(N))  # each once across the change
    got = json.loads((out / "held.json").read_text())
    kept = [i for k in (0, 1) for i in shares[k] if i in set(batches[k].tolist())]  # worker 2's file is gone
    sent = sorted(set(left) - set(kept))
    assert got["resumed"] == {"K": K, "kept_records": len(kept), "source_records": len(sent),
                              "source_bytes": int(size[sent].sum())}  # fmt: skip
    held = got["held"]  # epoch 2 from the rests the workers hold: the other records from the source
    assert (held["held_records"], held["source_records"]) == (total, N - total) and held["joined"] == []
    assert held["source_bytes"] == int(size.sum() - size[left].sum())
    check_varfiles(out, files, K, num_workers=0, epochs=range(2, 3))
    (report,) = json.loads((out / "reports.json").read_text())
    assert report["epoch"] == 2 and report["verified"] and report["records_checked"] == N


@needs_torch
@pytest.mark.mpi
def test_a_storage_of_records_of_many_sizes_restored_from_the_peers_mid_epoch(shared):
    """Files of 2 to 6 KiB, batches of equal bytes, every worker storing 2 batches (each record
    cut by its own length) in a cache_dir; checkpointed a step (4 samples) into epoch 1, the last
    worker's file then removed (its host lost); resumed at the same K = 3: its pieces of epoch 1's
    storage all from its peers, at their own lengths, none from the source; each worker yields its
    batch of epoch 1 after its first 4 samples, then epoch 2, each file's bytes."""
    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.orders import OrderSpec

    proc, data, out = shared.run("torchrun-3", "varbigstored")
    assert proc.returncode == 0, proc.stderr[-3000:]
    K, files, save = 3, data["varbig"], out.parent / "varbigsave"
    size = np.array([len(f) for f in files])
    batches = byte_batches(np.asarray(epoch_permutation(N, seed=SEED, epoch=1), dtype=np.int64), size, K)
    L = max(b.size for b in batches)
    for k, b in enumerate(batches):
        assert np.load(save / f"w{k}_e1.npz")["ids"].tolist() == b[:4].tolist()
        got = np.load(out / f"w{k}_e1.npz")
        assert got["ids"].tolist() == [int(b[i % b.size]) for i in range(4, L)]
        assert got["field0"].tobytes() == b"".join(files[i] for i in got["ids"])
    scheme = scheme_for("coded", K=K, storage=2, sizes=size)
    schedule = EpochSchedule(
        N=N, K=K, seed=SEED, spec=OrderSpec(), scheme=scheme, sizes=size, balance="bytes"
    )
    *_, now = schedule.epochs(start=0, count=2)
    lost = scheme.held(now.held, K - 1)  # the last worker's pieces of epoch 1's storage
    held = json.loads((out / "held.json").read_text())
    assert (held["source_pieces"], held["source_bytes"], held["peer_pieces"]) == (0, 0, lost.size)
    assert held["peer_bytes"] == int(scheme.holding.unit_lengths[lost].sum()) and scheme.pieces == 2
    check_varfiles(out, files, K, num_workers=0, epochs=range(2, 3))
    (report,) = json.loads((out / "reports.json").read_text())
    assert report["epoch"] == 2 and report["verified"] and report["storage"] == 2


def byte_batches(perm: np.ndarray, size: np.ndarray, K: int) -> list[np.ndarray]:
    """An epoch's batches cut by bytes, by brute force: cut ``k`` at the position of ``perm`` whose
    bytes before it are nearest ``k / K`` of the total, the lower one on a tie."""
    P = [0, *np.cumsum(size[perm]).tolist()]
    inner = [min(range(len(P)), key=lambda p: abs(K * P[p] - k * P[-1])) for k in range(1, K)]
    cuts = [0, *inner, len(perm)]
    return [perm[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


@needs_torch
@pytest.mark.mpi
def test_records_of_variable_sizes_stored_under_torchrun(shared):
    """Files of 2 to 6 KiB, every worker storing 2 batches (each record cut into 2 pieces by its
    own length, every rank computing the pieces' lengths from the record sizes): the samples as
    without a storage, each file's bytes exactly as on disk; every transition verified, in
    pieces, coded under the uncoded bytes."""
    proc, data, out = shared.run("torchrun-3", "varbig")  # K = 3, no DataLoader workers
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_varfiles(out, data["varbig"], 3, num_workers=0)
    reports = json.loads((out / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == [1, 2]
    for r in reports:
        assert r["verified"] and r["records_checked"] == N and (r["storage"], r["subpackets"]) == (2, 2)
        assert r["coded_bytes"] < r["uncoded_bytes"]


def check_varfiles(
    out: Path, files: np.ndarray, K: int, *, num_workers: int, epochs: range = range(3)
) -> None:
    """Each epoch every rank's samples are a contiguous run of the epoch's order (the runs in
    worker order, of bytes within the largest file of equal), padded as DistributedSampler pads
    to the longest run; each file's bytes exactly as on disk."""
    size = np.array([len(f) for f in files])
    for t in epochs:
        perm = np.asarray(epoch_permutation(N, seed=SEED, epoch=t), dtype=np.int64)
        where = np.argsort(perm)  # each record's position in the epoch's order
        got = [np.load(out / f"w{k}_e{t}.npz") for k in range(K)]
        runs = [np.sort(where[np.unique(g["ids"])]) for g in got]
        assert np.array_equal(np.concatenate(runs), np.arange(N))  # contiguous runs, in worker order
        run_bytes = [int(size[perm[r]].sum()) for r in runs]
        assert max(run_bytes) - min(run_bytes) <= size.max()
        L = max(r.size for r in runs)
        for g, r in zip(got, runs, strict=True):
            assert int(g["length"]) == L and g["ids"].size == L
            want = [int(perm[r[i % r.size]]) for i in range(L)]  # padded: the first records again
            assert sorted(g["ids"].tolist()) == sorted(want)
            assert g["field1"].tolist() == size[g["ids"]].tolist()
            assert g["field0"].tobytes() == b"".join(files[i] for i in g["ids"])
            assert int(g["steps"]) == steps(L, num_workers)


@needs_torch
@pytest.mark.mpi
def test_resume_mid_epoch_under_torchrun(shared):
    """From {"epoch": 1, "samples": 3}: epoch 1 read from the file, its first 3 samples skipped."""
    proc, data, out = shared.run("torchrun-2", "resume")  # the job's first run: K = 2, no DataLoader workers
    K = 2
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (out / "w0_e0.npz").exists()
    check_run(out, data, "struct", K, range(1, 3), drop_last=False, num_workers=0, skip=3)
    check_reports(out, K, range(1, 3), data, "struct")


@needs_torch
@pytest.mark.mpi
def test_a_job_checkpointed_at_two_workers_resumes_mid_epoch_at_three(shared):
    """Checkpointed two steps (8 samples) into epoch 1 at K = 2, with a cache_dir; resumed at K = 3
    (a launch of 4 ranks) from the state of worker 0: every record of epoch 1 exactly once across
    the two jobs, besides the padding of the rest; worker 2's cache file, damaged, said in one line
    and not used; epoch 2 each rank's batch at K = 3."""
    proc, data, save = shared.run("torchrun-2", "save")
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = [json.loads((save / f"state_{k}.json").read_text()) for k in range(2)]
    assert states[0] == states[1]  # the job's state, the same on every worker
    assert {k: states[0][k] for k in ("epoch", "samples", "seed", "K", "N", "segments")} == {
        "epoch": 1, "samples": 8, "seed": SEED, "K": 2, "N": N, "segments": []
    }  # fmt: skip
    before = [np.load(save / f"w{k}_e1.npz")["ids"] for k in range(2)]
    batches = np.array_split(np.asarray(epoch_permutation(N, seed=SEED, epoch=1), dtype=np.int64), 2)
    assert [b.tolist() for b in before] == [b[:8].tolist() for b in batches]  # the first 8 of each batch
    d = save.parent
    (d / "cache" / "worker-2.cache").write_bytes(b"not a cache file" * 8)  # no such worker at K = 2
    out = d / "resumed_k3"
    out.mkdir()
    proc = launch("torchrun", 3, "struct", d, out, 3, 0, 0, 1, "resume_k")
    assert proc.returncode == 0, proc.stderr[-3000:]
    after = [np.load(out / f"w{k}_e1.npz")["ids"] for k in range(3)]
    # The 7 samples left (12 - 8 and 11 - 8) dealt 3, 2, 2: every rank yields 3, the two shorter
    # shares repeat their first.
    assert [a.size for a in after] == [3, 3, 3] and [len(set(a.tolist())) for a in after] == [3, 2, 2]
    union = np.concatenate([*before, *[np.unique(a) for a in after]])
    assert sorted(union.tolist()) == list(range(N))  # exactly once across the change
    for k, a in enumerate(after):
        assert np.array_equal(np.load(out / f"w{k}_e1.npz")["field1"], data["struct"]["y"][a])
    said = [line for line in proc.stderr.splitlines() if "worker-2.cache" in line]
    assert len(said) == 1 and said[0].startswith("coded_shuffle.torch: rank 3 (worker 2): Cache file ")
    assert said[0].endswith("Treated as absent."), said
    # Workers 0 and 1 keep the heads of their own rests (3 and 2, read back from their files),
    # worker 2 gets the other 2 from the master.
    resumed = json.loads((out / "resumed.json").read_text())["resumed"]
    assert resumed == {"K": 3, "kept_records": 5, "source_records": 2, "source_bytes": 2 * ROW.itemsize}
    check_run(out, data, "struct", 3, range(2, 3), drop_last=False, num_workers=0)
    # A checkpoint of the resumed job before its first step says the segment read before it.
    state = json.loads((out / "state_2.json").read_text())
    assert (state["epoch"], state["samples"], state["K"], state["segments"]) == (1, 0, 3, [[2, 8]])


@needs_torch
@needs_mpi
@pytest.mark.mpi
def test_torch_dataset_exceptions(shared):
    """Bad input, on the worker ranks: one line naming the argument; then every worker stops early."""
    proc, _, out = shared.run("mpiexec-2", "bad")  # the job's last run: K = 2
    assert proc.returncode == 0, proc.stderr[-3000:]
    for k in range(2):
        bad = json.loads((out / f"bad_{k}.json").read_text())
        assert all("\n" not in msg for msg in bad.values()), bad
        assert bad["epoch_high"] == "ValueError: Argument 'epoch' must be in 0..2, not 3."
        assert bad["epoch_negative"].startswith("ValueError: Argument 'epoch' must be at least 0")
        assert bad["sampler"].startswith("ValueError:") and "sampler" in bad["sampler"]
        assert bad["shuffle"].startswith("ValueError:") and "shuffle" in bad["shuffle"]
        assert (
            bad["rank"]
            == f"ValueError: Argument 'rank' must be this process's rank {k + 1} of the job's 3, not 5."
        )
        assert bad["rank_world"] == "ValueError: Argument 'rank' must be a rank of the job, 0 to 2, not 9."
        assert bad["world_size"] == "ValueError: Argument 'world_size' must be the job's 3 ranks, not 9."
    # Both workers stop early; the one the master heard first is named (either may be first).
    assert json.loads((out / "stopped.json").read_text())["stopped_by"] in (0, 1)
    # The prefetch thread may have made epoch 1 before the workers stopped: then it was verified.
    reports = json.loads((out / "reports.json").read_text())
    assert [r["epoch"] for r in reports] in ([], [1]) and all(r["verified"] for r in reports)


@needs_torch
def test_pack_arrays_exceptions(tmp_path):
    from coded_shuffle.torch import pack_arrays

    with pytest.raises(
        ValueError, match=r"^Argument 'source' must hold arrays of one length N = 4, not 5 rows"
    ):
        pack_arrays([np.zeros(4), np.zeros(5)])
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold numbers or bools"):
        pack_arrays(np.array(["a", "b"]))
    with pytest.raises(ValueError, match=r"^Argument 'source' must name a readable .npy file"):
        pack_arrays([tmp_path / "missing.npy"])
    with pytest.raises(TypeError, match=r"^Argument 'source' must be an array"):
        pack_arrays(3)
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold at least one array"):
        pack_arrays([])


@needs_torch
def test_pack_arrays_fields_are_the_arrays(rng):
    from coded_shuffle.torch import _columns, pack_arrays

    x = rng.standard_normal((7, 2, 3)).astype(">f8")  # big-endian: made native
    y = rng.integers(0, 5, 7).astype(np.int8)
    rec = pack_arrays({"x": x, "y": y})
    assert rec.dtype.names == ("x", "y")
    tx, ty = _columns(rec)
    assert tx.shape == (7, 2, 3) and np.array_equal(tx.numpy(), x) and np.array_equal(ty.numpy(), y)
    assert np.shares_memory(tx.numpy(), rec) and np.shares_memory(ty.numpy(), rec)  # views, no copy


def test_package_imports_without_torch():
    """With torch unimportable, the package (and its transport) imports and says it is absent."""
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import coded_shuffle, coded_shuffle.transport as t, coded_shuffle.loader\n"
        "assert t.torch_world() is None\n"
        "try:\n    import coded_shuffle.torch\nexcept ImportError:\n    print('no torch')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "no torch"


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize("how", ["torchrun", pytest.param("mpiexec", marks=needs_mpi)])
def test_ddp_example(how):
    """examples/torch_ddp.py: DDP over 2 workers; its asserts (exact batches, equal steps, loss) pass."""
    example = ROOT / "examples" / "torch_ddp.py"
    if how == "mpiexec":
        cmd = [str(MPIEXEC), "-n", "3", sys.executable, "-m", "mpi4py", str(example)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node=3",
            str(example),
        ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "every worker saw exactly its batch every epoch" in proc.stdout
    assert "3 coded deliveries verified" in proc.stdout


@needs_torch
@pytest.mark.mpi
def test_the_token_documents_example_trains_under_torchrun(shared):
    """examples/torch_token_documents.py, run in the processes of the shared job (K = 3): every
    document once an epoch in padded minibatches, equal steps, the loss near the chain's, every
    delivery verified and under the uncoded bytes (its asserts); what it prints."""
    proc, _, _ = shared.run("torchrun-3", "example")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert re.search(r"master: 3 coded deliveries verified, \d+ bytes against \d+ uncoded", proc.stdout)
    assert re.search(r"loss \d\.\d+ -> \d\.\d+; the generating chain's \d\.\d+", proc.stdout)


@needs_torch
@pytest.mark.mpi
def test_frozen_rank_ends_the_torchrun_job_with_one_line(tmp_path, rng):
    """Worker 1 stops answering after epoch 0: the master names it within the 3 s bound, ends its
    process, and torchrun ends the others (the subprocess timeout only guards the suite)."""
    write_data(tmp_path, rng)
    out = tmp_path / "out"
    out.mkdir()
    proc = launch("torchrun", 2, "struct", tmp_path, out, 3, 0, 0, 0, "freeze")
    assert proc.returncode != 0
    named = [line for line in proc.stderr.splitlines() if "coded_shuffle.loader: error:" in line]
    assert named and "rank 0: no answer from worker 1 (rank 2) within 3 s, at the 'ready' round" in named[0]
    assert not (out / "reports.json").exists() and not (out / "w0_e1.npz").exists()


@needs_torch
def test_prefetch_runs_at_most_one_epoch_ahead():
    """The thread makes epoch j only once epoch j - 1 was handed out; it closes the iterator on stop."""
    from coded_shuffle.loader.prefetch import Prefetch

    taken = [0]
    made: list[int] = []
    closed: list[int] = []

    def epochs():
        try:
            for j in range(6):
                assert taken[0] >= j - 1, (j, taken[0])  # epoch j - 1 handed out (counted after take)
                made.append(j)
                yield j
        finally:
            closed.append(len(made))

    feed = Prefetch(epochs())
    for e in range(3):
        assert feed.take() == e
        taken[0] += 1
        assert len(made) <= e + 2
    feed.close()  # stops before the last epochs: the iterator is closed, from the thread
    assert closed == [len(made)] and len(made) <= 4
    assert feed.take() is None  # ended


@needs_torch
def test_prefetch_hands_an_error_to_the_training_loop():
    from coded_shuffle.loader.prefetch import Prefetch

    def epochs():
        yield 0
        raise KeyError("bad epoch")

    feed = Prefetch(epochs())
    assert feed.take() == 0
    with pytest.raises(KeyError, match="bad epoch"):
        feed.take()


@needs_torch
@pytest.mark.mpi
def test_torchrun_without_a_process_group_says_what_to_call(tmp_path, rng):
    """Under torchrun without init_process_group, every rank ends on one line naming the call."""
    write_data(tmp_path, rng)
    out = tmp_path / "out"
    out.mkdir()
    # the ranks share one stderr: unbuffered (PYTHONUNBUFFERED), a traceback's last line goes out
    # in several writes that another rank's can split; line-buffered (the default), in one
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = launch("torchrun", 2, "struct", tmp_path, out, 3, 0, 0, 1, "uninit", env=env)
    assert proc.returncode != 0
    assert "at least 2 ranks" not in proc.stderr  # no fall-back to one-rank MPI worlds
    lines = proc.stderr.splitlines()
    for rank in range(3):
        line = (
            f"coded_shuffle.errors.TransportError: rank {rank} of 3 was started by torchrun, but "
            'torch.distributed is not initialized: call torch.distributed.init_process_group("gloo") first.'
        )
        assert lines.count(line) == 1, "\n".join(x for x in lines if "Error" in x or "rank" in x)[-4000:]


def snippet(doc: Path, after: str) -> str:
    """The first ``python`` block of ``doc`` after the line ``after``."""
    text = doc.read_text()
    start = text.index("```python\n", text.index(after)) + len("```python\n")
    return text[start : text.index("```", start)]


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("doc", "after"), [("README.md", "## Training with PyTorch"), ("docs/torch.md", "## The job")]
)
def test_the_documented_snippet_runs_under_torchrun(tmp_path, rng, doc, after):
    """The torchrun snippet of the README and of docs/torch.md, run as shown: every rank ends with 0."""
    code = snippet(ROOT / doc, after)
    assert "init_process_group" in code
    np.save(tmp_path / "train.npy", rng.standard_normal((200, 4)).astype(np.float32))
    (tmp_path / "snippet.py").write_text(code)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", "snippet.py"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


@needs_torch
@pytest.mark.mpi
def test_persistent_workers_are_refused_before_the_first_epoch(shared):
    """A reused DataLoader with persistent_workers: set_epoch(0) refuses it in the training process,
    in one line, before the loader iterates (the workers then train with a plain one)."""
    # the first run of the job, K = 3 workers with 2 DataLoader workers each
    proc, data, out = shared.run("torchrun-3", "files")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for k in range(3):
        assert (out / f"persistent_{k}.txt").read_text() == (
            "ValueError: Argument 'persistent_workers' must be False for a DataLoader over a "
            "CodedIterableDataset (a persistent DataLoader worker would keep an old epoch), not True."
        )
    # Refused before any sample: the workers went on with a plain DataLoader, every epoch exact.
    check_run(out, data, "files", 3, range(3), drop_last=False, num_workers=2)


@needs_torch
def test_a_persistent_loader_is_found_only_over_its_dataset():
    from torch.utils.data import DataLoader, IterableDataset

    from coded_shuffle.torch import _persistent_loader

    class Rows(IterableDataset):  # type: ignore[type-arg]
        def __iter__(self):
            return iter(range(3))

    ours, other = Rows(), Rows()
    assert not _persistent_loader(ours)
    plain = DataLoader(ours, num_workers=2)
    assert not _persistent_loader(ours)
    kept = DataLoader(other, num_workers=2, persistent_workers=True)
    assert not _persistent_loader(ours) and _persistent_loader(other)
    vars(plain)  # a loader whose __dict__ is materialized is found through it
    again = DataLoader(ours, num_workers=1, persistent_workers=True)
    vars(again)
    assert _persistent_loader(ours)
    del again
    assert not _persistent_loader(ours)
    del kept


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("how", "state"),
    [("torchrun", "close"), pytest.param("mpiexec", "close", marks=needs_mpi)],
)
def test_a_worker_that_stops_early_ends_the_job_with_status_0(shared, how, state):
    """Worker 0 (rank 1) stops after epoch 0 by close(): every rank ends with 0, stopped_by
    names it everywhere, the other's later epochs are empty."""
    proc, data, out = shared.run(f"{how}-2", state)  # the last run of the job: K = 2, 4 epochs
    epochs = 4
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "stopped.json").read_text())["stopped_by"] == 0
    check_run(out, data, "struct", 2, range(1), drop_last=False, num_workers=0)
    # Worker 1 got the epochs the master had delivered before the stop (prefetch: 1 or 2), then none.
    done = [t for t in range(epochs) if (out / f"w1_e{t}.npz").exists()]
    empty = [t for t in range(epochs) if (out / f"empty_w1_e{t}.json").exists()]
    assert done in ([0], [0, 1]) and empty == list(range(len(done), epochs)), (done, empty)
    assert all(json.loads((out / f"empty_w1_e{t}.json").read_text())["stopped_by"] == 0 for t in empty)
    said = [line for line in proc.stderr.splitlines() if "stopped early" in line]
    assert len(said) == 1 and said[0].endswith(
        f"coded_shuffle.torch: rank 2 (worker 1): the job ended after epoch {done[-1]}: "
        "rank 1 (worker 0) stopped early; later epochs yield no samples."
    ), said


@needs_torch
@pytest.mark.mpi
def test_a_worker_that_breaks_out_and_destroys_the_process_group_ends_the_job_with_status_0(tmp_path, rng):
    """Worker 0 (rank 1) breaks out of epoch 0, calls destroy_process_group() and returns, without
    close(), while its prefetch thread is midway through the next transition (4 MiB of records:
    its decoding takes two threads, which the interpreter's exit shuts down): the transition
    ends, close() at exit tells the master, and every rank ends with 0."""
    big = rng.integers(0, 256, (4096, 1024), dtype=np.uint8)
    np.save(tmp_path / "big.npy", big)
    out = tmp_path / "out"
    out.mkdir()
    epochs = 4
    proc = launch("torchrun", 2, "big", tmp_path, out, epochs, 0, 0, 1, "destroy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / "stopped.json").read_text())["stopped_by"] == 0
    done = [t for t in range(epochs) if (out / f"w1_e{t}.npz").exists()]
    empty = [t for t in range(epochs) if (out / f"empty_w1_e{t}.json").exists()]
    assert done in ([0], [0, 1]) and empty == list(range(len(done), epochs)), (done, empty)
    for t in done:  # worker 1's records, as the master holds them
        got = np.load(out / f"w1_e{t}.npz")
        assert np.array_equal(got["field0"], big[got["ids"]])


def root_cause(stderr: str) -> tuple[int, str]:
    """The rank torchrun names as the job's first failure, and its exit code line."""
    section = stderr[stderr.index("Root Cause (first observed failure)") :]
    rank = int(section.split("rank      : ", 1)[1].split()[0])
    return rank, section.split("exitcode  : ", 1)[1].splitlines()[0]


@needs_torch
@pytest.mark.mpi
@pytest.mark.parametrize(
    ("state", "culprit", "exitcode", "num_workers"),
    [("crash", 1, "1 ", 0), ("kill", 2, "-9 ", 2), ("master_error", 0, "1 ", 0)],
)
def test_a_failing_rank_is_named_not_a_stop_nor_a_peer(tmp_path, rng, state, culprit, exitcode, num_workers):
    """A worker that raises, a worker killed with SIGKILL (with DataLoader workers), the master
    raising: torchrun names that rank as the first failure; no rank reports a deliberate stop, and
    a rank that lost it names it in one line."""
    write_data(tmp_path, rng)
    out = tmp_path / "out"
    out.mkdir()
    proc = launch("torchrun", 2, "struct", tmp_path, out, 4, num_workers, 0, 1, state)
    assert proc.returncode != 0
    rank, code = root_cause(proc.stderr)
    assert (rank, code.startswith(exitcode)) == (culprit, True), proc.stderr[-3000:]
    assert "stopped early" not in proc.stderr and "stopped by" not in proc.stderr
    lost = [line for line in proc.stderr.splitlines() if "coded_shuffle.transport: error:" in line]
    gone = "the master (rank 0)" if culprit == 0 else f"rank {culprit} (worker {culprit - 1})"
    # A rank waiting on the culprit names it; one in a collective (a broadcast) says "a peer"; a
    # worker may also see the master go first, when torchrun stops it.
    seen = (gone, "a peer", "the master (rank 0)")
    assert all(any(f": lost {g}: its connection closed" in line for g in seen) for line in lost), lost
    if state == "master_error":
        assert len(lost) == 2  # both workers wait on the master at the setup


@needs_torch
def test_every_rank_trains_under_torchrun_with_the_exchange(shared):
    """scheme="exchange": K ranks, all workers, DataLoader workers and prefetch, and DDP over the
    default group on every batch (no new_group: there is no master rank to leave out)."""
    K = 3
    # the second run of a job of 3 processes, after a coded run (K = 2 and a master) in them
    proc, data, out = shared.run("torchrun-2", "exchange")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for t in range(3):
        want = expected(K, t, drop_last=False)
        for k in range(K):
            got = np.load(out / f"w{k}_e{t}.npz")
            assert np.array_equal(got["ids"], want[k]) and int(got["steps"]) == steps(len(want[k]), 2)
            assert np.array_equal(got["field0"], data["struct"]["x"][want[k]])
            assert np.array_equal(got["field1"], data["struct"]["y"][want[k]])
    # no master: rank 0's dataset reports each epoch's exchange, its bytes counted record by record
    B = data["struct"].dtype.itemsize
    reports = json.loads((out / "reports.json").read_text())
    assert [r["epoch"] for r in reports] == [1, 2] and all(r["mode"] == "exchange" for r in reports)
    for r in reports:
        e = r["epoch"]
        old, new = (np.array_split(epoch_permutation(N, seed=SEED, epoch=t), K) for t in (e - 1, e))
        owner = {int(i): j for j, b in enumerate(old) for i in b}
        moved = sum(owner[int(i)] != j for j, b in enumerate(new) for i in b)
        assert r["verified"] and r["exchange_bytes"] == moved * B and r["wire_bytes"] == 0
        assert r["sent_bytes"] == r["exchange_bytes"] + r["exchange_header_bytes"]


@needs_torch
def test_the_dataset_chooses_auto_only_on_a_network_and_with_the_records():
    """``scheme="auto"`` is refused, naming the argument, before any link is made."""
    from coded_shuffle.network import Network
    from coded_shuffle.torch import CodedIterableDataset

    X = np.zeros((100, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="'scheme' can be 'auto' only with a 'network'"):
        CodedIterableDataset(X, epochs=2, scheme="auto")
    with pytest.raises(TypeError, match="'source' must be given on every rank with scheme 'auto'"):
        CodedIterableDataset(None, epochs=2, scheme="auto", network=Network.parse("down=100,up=100"))
    with pytest.raises(ValueError, match="'scheme' must be 'coded' or 'exchange'"):
        CodedIterableDataset(X, epochs=2, scheme="uncoded")


@needs_torch
def test_a_checkpoint_of_another_job_is_refused_naming_what_differs():
    """The checks of load_state_dict (every rank; the fingerprint on a worker once the master's is known)."""
    from coded_shuffle._torch_base import check_dataset_of, parse_state

    good = {
        "epoch": 2,
        "samples": 3,
        "seed": 5,
        "K": 2,
        "N": 23,
        "fingerprint": "ab" * 16,
        "segments": [[4, 1]],
    }
    assert parse_state(good, seed=5, start=0, end=4, K=3, peers=False) == (2, 2, 3, [(4, 1)], (23, "ab" * 16))
    bad = {
        "seed": ({**good, "seed": 6}, "must come from a job of seed 5, not seed 6."),
        "late": ({**good, "epoch": 4}, "must resume before epoch 4, not at epoch 4."),
        "segments": ({**good, "segments": [[0, 1]]}, "state['segments']\" must be at least 1, not 0."),
        "peers": (good, "to resume mid-epoch with a job of peers, not K = 2: resume at an epoch boundary."),
    }
    for name, (state, message) in bad.items():
        with pytest.raises(ValueError) as info:
            parse_state(state, seed=5, start=0, end=4, K=3, peers=name == "peers")
        assert str(info.value).startswith(("Argument 'state'", 'Argument "state[')) and str(
            info.value
        ).endswith(message), name
    with pytest.raises(TypeError, match="'state' must be a mapping from state_dict"):
        parse_state({"epoch": 1}, seed=5, start=0, end=4, K=3, peers=False)
    from types import SimpleNamespace

    from coded_shuffle._torch_base import stored_resume

    resumed: list[tuple[int, int]] = []  # the storage of epoch 1 restored, or cut again from the files
    stored_resume(SimpleNamespace(resume=lambda *a: resumed.append(a)), epoch=1, end=3)
    assert resumed == [(1, 2)]
    check_dataset_of(23, "ab" * 16, N=23, fingerprint="ab" * 16)
    check_dataset_of(None, None, N=23, fingerprint="ab" * 16)  # a state of an older version: unknown
    with pytest.raises(
        ValueError, match=r"^Argument 'state' must come from a dataset of N = 24 records, not N = 23\.$"
    ):
        check_dataset_of(23, "ab" * 16, N=24, fingerprint="ab" * 16)
    with pytest.raises(
        ValueError, match="must come from this dataset .fingerprint cdcdcdcd.*their checksums differ"
    ):
        check_dataset_of(23, "ab" * 16, N=23, fingerprint="cd" * 16)
