"""Train a logistic regression on K workers whose batches arrive coded, epoch after epoch.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823: the setting (a master, K workers that each
train on their batch of a fresh shuffle every epoch, the batches delivered by XOR-coded symbols
from what the workers cache). The model is plain logistic regression by minibatch SGD.

The dataset is a real ``.npy`` file written first: rows of a structured array with features
``x`` (float32) and a label ``y`` drawn from a known logistic model ``w_true``. The K workers of
an in-process loader (``coded_shuffle.loader.InProcessLoader``) take, at every step, the next
minibatch of their batch in the epoch's order; their gradients are averaged (what an allreduce
does) and one SGD step is taken. Epoch 0 is read from the file; every later epoch is decoded by
each worker from its cache and the master's coded symbols, and verified, before it is used.

It prints the loss and the coded and uncoded bytes of each epoch, and ends with asserts:

- the training loss falls from ``ln 2`` (the loss of ``w = 0``, whatever the data) to within
  0.02 of the loss of the generating model ``w_true`` on the same rows: the best fit has a
  training loss at most that of ``w_true`` (``w_true`` is one candidate), so an SGD run that ends
  close to it has fitted the data; 0.02 nats is about 5 % of it here;
- every epoch after the first was verified by the master, record by record (``N`` checked);
- each worker's rows are, bit for bit, the rows of the ``.npy`` file of its batch, in the
  epoch's order (read from the file with numpy, batches cut from the epoch's permutation).

For PyTorch jobs (a ``DataLoader``, ``set_epoch``, DDP under ``torchrun``), see
:mod:`coded_shuffle.torch` and ``examples/torch_ddp.py``.

Run: ``python examples/train_loop.py``; across processes, rank 0 the master and every other rank
a worker whose gradients are averaged with ``MPI_Allreduce``:
``mpiexec -n 5 python -m mpi4py examples/train_loop.py --mpi``
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from coded_shuffle.engine import TransitionReport
from coded_shuffle.loader import EpochBatch, InProcessLoader
from coded_shuffle.orders import epoch_permutation

N, D, K, EPOCHS, SEED = 4000, 10, 4, 8, 0
MINIBATCH = 25  # rows a worker uses per step: K * 25 = 100 rows a step
LEARNING_RATE = 0.5
TOLERANCE = 0.02  # nats above the generating model's loss on the same rows (see above)
ROW_BYTES = 4 * D + 4


def write_dataset(path: Path, *, seed: int) -> np.ndarray:
    """Write ``N`` rows ``(x, y)`` with ``P(y = 1 | x) = sigmoid(x . w_true)``; return ``w_true``."""
    rng = np.random.default_rng(seed)
    w_true = rng.normal(0.0, 1.0, D)
    w_true *= 3.0 / np.linalg.norm(w_true)
    rows = np.zeros(N, dtype=[("x", "<f4", (D,)), ("y", "<f4")])
    rows["x"] = rng.standard_normal((N, D))
    p = 1.0 / (1.0 + np.exp(-(rows["x"].astype(np.float64) @ w_true)))
    rows["y"] = rng.random(N) < p
    np.save(path, rows)
    return w_true


def loss_sum(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Summed logistic loss (nats) of weights ``w`` on rows ``x`` with labels ``y`` in {0, 1}."""
    z = x.astype(np.float64) @ w
    return float(np.sum(np.logaddexp(0.0, z) - y * z))


def loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Mean logistic loss of ``w`` on the rows ``x``, ``y``."""
    return loss_sum(w, x, y) / x.shape[0]


def gradient_sum(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of :func:`loss_sum` at ``w``: the workers add theirs, and divide by the rows."""
    x = x.astype(np.float64)
    return x.T @ (1.0 / (1.0 + np.exp(-(x @ w))) - y)


def check_rows(batch: EpochBatch, X: np.ndarray, K: int) -> None:
    """The oracle: worker k's rows are the file's rows of its run of the epoch's permutation."""
    run = np.array_split(epoch_permutation(N, seed=SEED, epoch=batch.epoch), K)[batch.worker]
    assert np.array_equal(batch.ids, run)
    assert batch.records.dtype == X.dtype and batch.records.tobytes() == X[run].tobytes()


def print_header(K: int, start: float, best: float) -> None:
    print(f"N = {N} rows of {ROW_BYTES} B, K = {K} workers, minibatch {MINIBATCH} a worker")
    print(f"loss of w = 0: {start:.4f} (ln 2); of the generating model: {best:.4f}")
    print(f"{'epoch':>5} {'loss':>8} {'coded B':>9} {'uncoded B':>10} {'ratio':>6} {'verified':>9}")


def print_epoch(t: int, epoch_loss: float, report: TransitionReport | None) -> None:
    if report is None:
        print(f"{t:>5} {epoch_loss:>8.4f} {'-':>9} {'-':>10} {'-':>6} {'file':>9}")
        return
    assert report.epoch == t and report.verified and report.records_checked == N
    ratio = report.coded_bytes / report.uncoded_bytes
    print(
        f"{t:>5} {epoch_loss:>8.4f} {report.coded_bytes:>9} {report.uncoded_bytes:>10} "
        f"{ratio:>6.3f} {'yes':>9}"
    )


def final_checks(start: float, best: float, losses: list[float], reports: list[TransitionReport]) -> None:
    assert math.isclose(start, math.log(2))
    assert len(losses) == EPOCHS and len(reports) == EPOCHS - 1
    assert [r.epoch for r in reports] == list(range(1, EPOCHS))
    assert all(r.verified and r.records_checked == N for r in reports)
    assert losses[-1] < start and losses[-1] <= best + TOLERANCE, (losses[-1], best)
    assert all(r.coded_bytes < r.uncoded_bytes for r in reports)
    print(f"final loss {losses[-1]:.4f} <= {best:.4f} + {TOLERANCE}; every epoch verified")


def run_in_process() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.npy"
        w_true = write_dataset(path, seed=SEED)
        X = np.load(path)  # the oracle: the file's rows, read with numpy alone
        best, start = loss(w_true, X["x"], X["y"]), loss(np.zeros(D), X["x"], X["y"])
        print_header(K, start, best)

        loader = InProcessLoader(path, K=K, epochs=EPOCHS, seed=SEED)
        workers = [loader.worker(k) for k in range(K)]
        w = np.zeros(D)
        losses = []
        for t, batches in enumerate(zip(*workers, strict=True)):
            for batch in batches:
                assert batch.epoch == t
                check_rows(batch, X, K)
            # Training: every step, each worker's next minibatch; their gradients averaged.
            for step in zip(*(b.minibatches(MINIBATCH) for b in batches), strict=True):
                grad = sum(gradient_sum(w, rows["x"], rows["y"]) for _, rows in step)
                w -= LEARNING_RATE * grad / sum(ids.size for ids, _ in step)
            losses.append(loss(w, X["x"], X["y"]))
            print_epoch(t, losses[-1], loader.reports[t - 1] if t else None)
    final_checks(start, best, losses, loader.reports)


def run_mpi() -> None:
    """Under ``mpiexec -n K+1``: rank 0 serves the epochs, ranks 1..K train and allreduce."""
    from mpi4py import MPI

    from coded_shuffle.loader import MPILoader

    comm = MPI.COMM_WORLD
    rank, K = comm.Get_rank(), comm.Get_size() - 1
    tmp = tempfile.mkdtemp() if rank == 0 else None
    path = comm.bcast(None if tmp is None else str(Path(tmp) / "train.npy"), root=0)
    w_true = write_dataset(Path(path), seed=SEED) if rank == 0 else None
    comm.Barrier()  # the file is written
    workers = comm.Split(MPI.UNDEFINED if rank == 0 else 0, rank)
    loader = MPILoader(path, epochs=EPOCHS, seed=SEED)  # the workers never read `path` ...
    if loader.is_master:
        try:
            reports = loader.serve()
            losses = comm.recv(source=1)
            X = np.load(path)
            assert w_true is not None
            best, start = loss(w_true, X["x"], X["y"]), loss(np.zeros(D), X["x"], X["y"])
            print_header(K, start, best)
            for t, epoch_loss in enumerate(losses):
                print_epoch(t, epoch_loss, reports[t - 1] if t else None)
            final_checks(start, best, losses, reports)
        finally:
            comm.Barrier()  # the workers are done with the file
            shutil.rmtree(str(tmp))
        return
    X = np.load(path, mmap_mode="r")  # ... except here, for the oracle's check of their rows
    steps = math.ceil(math.ceil(N / K) / MINIBATCH)  # minibatches of the largest batch
    w = np.zeros(D)
    losses = []
    for batch in loader:
        check_rows(batch, X, K)
        parts = list(batch.minibatches(MINIBATCH))
        for s in range(steps):  # every worker takes part in every step's allreduce
            buf = np.zeros(D + 1)
            if s < len(parts):
                ids, rows = parts[s]
                buf[:D], buf[D] = gradient_sum(w, rows["x"], rows["y"]), ids.size
            workers.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
            w -= LEARNING_RATE * buf[:D] / buf[D]
        # The workers' batches partition the rows: their summed losses are the dataset's.
        total = np.array([loss_sum(w, batch.records["x"], batch.records["y"])])
        workers.Allreduce(MPI.IN_PLACE, total, op=MPI.SUM)
        losses.append(float(total[0]) / N)
    if workers.Get_rank() == 0:
        comm.send(losses, dest=0)
    comm.Barrier()


def main(argv: list[str]) -> None:
    if argv not in ([], ["--mpi"]):
        raise SystemExit("usage: python examples/train_loop.py [--mpi]")
    run_mpi() if argv else run_in_process()


if __name__ == "__main__":
    main(sys.argv[1:])
