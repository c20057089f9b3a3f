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

With PyTorch installed, :func:`torch_iterable` wraps one worker's iterator as a
``torch.utils.data.IterableDataset``; it is optional and not needed here.

Run: ``python examples/train_loop.py``
"""

from __future__ import annotations

import importlib.util
import math
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from coded_shuffle.loader import EpochBatch, InProcessLoader
from coded_shuffle.orders import epoch_permutation

N, D, K, EPOCHS, SEED = 4000, 10, 4, 8, 0
MINIBATCH = 25  # rows a worker uses per step: K * 25 = 100 rows a step
LEARNING_RATE = 0.5
TOLERANCE = 0.02  # nats above the generating model's loss on the same rows (see above)


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


def loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """Mean logistic loss (nats) of weights ``w`` on rows ``x`` with labels ``y`` in {0, 1}."""
    z = x.astype(np.float64) @ w
    return float(np.mean(np.logaddexp(0.0, z) - y * z))


def gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of :func:`loss` at ``w``."""
    x = x.astype(np.float64)
    return x.T @ (1.0 / (1.0 + np.exp(-(x @ w))) - y) / x.shape[0]


def torch_iterable(batches: Callable[[], Iterable[EpochBatch]]) -> Any:
    """Wrap one worker's epochs as a ``torch.utils.data.IterableDataset`` of ``(x, y)`` tensors.

    ``batches`` makes the worker's iterator (for instance ``lambda: loader.worker(k)``, or an
    ``MPILoader`` on a worker rank); PyTorch is imported only here, when this is called.
    """
    import torch
    from torch.utils.data import IterableDataset

    class CodedShuffleRows(IterableDataset):  # type: ignore[misc]
        def __iter__(self) -> Iterator[tuple[Any, Any]]:
            for batch in batches():
                x, y = np.array(batch.records["x"]), np.array(batch.records["y"])
                for r in range(len(batch)):
                    yield torch.from_numpy(x[r]), torch.tensor(y[r])

    return CodedShuffleRows()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.npy"
        w_true = write_dataset(path, seed=SEED)
        X = np.load(path)  # the oracle: the file's rows, read with numpy alone
        best = loss(w_true, X["x"], X["y"])

        loader = InProcessLoader(path, K=K, epochs=EPOCHS, seed=SEED)
        workers = [loader.worker(k) for k in range(K)]
        w = np.zeros(D)
        start = loss(w, X["x"], X["y"])
        print(f"N = {N} rows of {X.dtype.itemsize} B, K = {K} workers, minibatch {MINIBATCH} a worker")
        print(f"loss of w = 0: {start:.4f} (ln 2); of the generating model: {best:.4f}")
        print(f"{'epoch':>5} {'loss':>8} {'coded B':>9} {'uncoded B':>10} {'ratio':>6} {'verified':>9}")
        losses = []
        for t, batches in enumerate(zip(*workers, strict=True)):
            # The oracle: worker k's rows are the file's rows of its run of the epoch's order.
            runs = np.array_split(epoch_permutation(N, seed=SEED, epoch=t), K)
            for k, batch in enumerate(batches):
                assert (batch.epoch, batch.worker) == (t, k)
                assert np.array_equal(batch.ids, runs[k])
                assert batch.records.dtype == X.dtype and batch.records.tobytes() == X[runs[k]].tobytes()
            # Training: every step, each worker's next minibatch, gradients averaged.
            for step in zip(*(b.minibatches(MINIBATCH) for b in batches), strict=True):
                grads = [gradient(w, rows["x"], rows["y"]) for _, rows in step]
                w -= LEARNING_RATE * np.mean(grads, axis=0)
            losses.append(loss(w, X["x"], X["y"]))
            report = loader.reports[t - 1] if t else None
            if report is None:
                print(f"{t:>5} {losses[-1]:>8.4f} {'-':>9} {'-':>10} {'-':>6} {'file':>9}")
            else:
                assert report.epoch == t and report.verified and report.records_checked == N
                ratio = report.coded_bytes / report.uncoded_bytes
                print(
                    f"{t:>5} {losses[-1]:>8.4f} {report.coded_bytes:>9} {report.uncoded_bytes:>10} "
                    f"{ratio:>6.3f} {'yes':>9}"
                )

        if importlib.util.find_spec("torch") is not None:  # optional: never needed for the asserts
            again = InProcessLoader(path, K=1, epochs=1, seed=SEED)
            first = next(iter(torch_iterable(lambda: again.worker(0))))
            assert first[0].numpy().tobytes() == X["x"][epoch_permutation(N, seed=SEED, epoch=0)[0]].tobytes()
            print("torch IterableDataset adapter: first row matches")

    assert math.isclose(start, math.log(2))
    assert len(losses) == EPOCHS and len(loader.reports) == EPOCHS - 1
    assert losses[-1] < start and losses[-1] <= best + TOLERANCE, (losses[-1], best)
    assert all(r.coded_bytes < r.uncoded_bytes for r in loader.reports)
    print(f"final loss {losses[-1]:.4f} <= {best:.4f} + {TOLERANCE}; every epoch verified")


if __name__ == "__main__":
    main()
