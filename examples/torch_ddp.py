"""DDP training of a small torch model whose batches arrive coded, under torchrun or mpiexec.

Source: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for Distributed
Data Shuffling", Allerton 2016, arXiv:1609.09823: a master and K workers that each train on
their batch of a fresh shuffle every epoch, the batches delivered by XOR-coded symbols from what
the workers cache. The training is PyTorch's own: ``DistributedDataParallel`` over the K worker
ranks, a ``DataLoader`` over :class:`coded_shuffle.torch.CodedIterableDataset`.

Rank 0 writes two real ``.npy`` files, features ``x`` (float32) and labels ``y`` (0 or 1 from a
known logistic model), then serves the epochs; ranks 1..K train a two-layer network with SGD,
their gradients averaged by DDP over a process group of the workers alone. It ends with asserts:

- every epoch, each worker's samples are exactly the records of its batch (the ``k``-th run of
  the epoch's permutation, :func:`coded_shuffle.orders.epoch_permutation`, cut by
  ``np.array_split``), padded as ``DistributedSampler`` pads, and its tensors the file's rows;
- every worker took the same number of steps (DDP's allreduce never waited for a missing one);
- the loss over the whole file fell from that of the untrained network by at least a third;
- the master verified every epoch after the first, record by record.

Run:  ``torchrun --standalone --nproc-per-node 5 examples/torch_ddp.py``
or:   ``mpiexec -n 5 python -m mpi4py examples/torch_ddp.py`` (the delivery over MPI then)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader

from coded_shuffle.orders import epoch_permutation
from coded_shuffle.torch import CodedIterableDataset

N, D, EPOCHS, SEED, MINIBATCH = 3000, 8, 4, 0, 50


def write_files(d: Path) -> None:
    rng = np.random.default_rng(SEED)
    w = rng.normal(size=D) * 2
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = (rng.random(N) < 1 / (1 + np.exp(-(x @ w)))).astype(np.int64)
    np.save(d / "x.npy", x)
    np.save(d / "y.npy", y)


def start() -> tuple[int, int, object | None, str | None]:
    """Initialize torch.distributed (gloo): from torchrun's environment, or from MPI's ranks."""
    if "LOCAL_RANK" in os.environ:  # torchrun
        dist.init_process_group("gloo")
        return dist.get_rank(), dist.get_world_size(), None, None
    from coded_shuffle.transport import MPITransport, mpi_world

    comm = mpi_world()
    rank, size = comm.Get_rank(), comm.Get_size()
    if size < 2:
        raise SystemExit("run under torchrun --nproc-per-node K+1, or mpiexec -n K+1 (K >= 1 workers)")
    rendezvous = comm.bcast(tempfile.mktemp(prefix="torch_ddp_") if rank == 0 else None, root=0)
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=size)
    return rank, size, MPITransport(), rendezvous


def full_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    with torch.no_grad():
        return float(nn.functional.cross_entropy(model(x), y))


def main() -> None:
    rank, size, transport, rendezvous = start()
    K = size - 1
    shared = [tempfile.mkdtemp(prefix="torch_ddp_data_") if rank == 0 else None]
    dist.broadcast_object_list(shared, src=0)
    d = Path(str(shared[0]))
    if rank == 0:
        write_files(d)
    dist.barrier()  # the files are written
    workers = dist.new_group(ranks=list(range(1, size)))  # DDP's group: the workers alone
    source = [d / "x.npy", d / "y.npy"] if rank == 0 else None
    ds = CodedIterableDataset(source, epochs=EPOCHS, seed=SEED, with_ids=True, transport=transport)  # type: ignore[arg-type]
    if ds.is_master:
        reports = ds.serve()
        assert [r.epoch for r in reports] == list(range(1, EPOCHS)), reports
        assert all(r.verified and r.records_checked == N for r in reports)
        saved = sum(r.uncoded_bytes - r.coded_bytes for r in reports)
        print(f"master: {len(reports)} coded deliveries verified; {saved} bytes fewer than uncoded")
    else:
        train(ds, K, d, workers)
    dist.barrier()
    if rank == 0:
        shutil.rmtree(d)
        if rendezvous is not None and os.path.exists(rendezvous):
            os.remove(rendezvous)
    dist.destroy_process_group()


def train(ds: CodedIterableDataset, K: int, d: Path, workers: object) -> None:
    k = ds.worker
    assert k is not None
    torch.manual_seed(SEED)  # the same initial weights on every worker (DDP broadcasts them too)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, 2)), process_group=workers
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    X, Y = torch.from_numpy(np.load(d / "x.npy")), torch.from_numpy(np.load(d / "y.npy"))
    before = full_loss(model, X, Y)
    loader = DataLoader(ds, batch_size=MINIBATCH, num_workers=2)
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        seen, steps = [], 0
        for ids, x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            seen.append(ids)
            steps += 1
            assert torch.equal(x, X[ids]) and torch.equal(y, Y[ids])  # the file's rows
        # The oracle: this worker's batch, cut from the epoch's permutation, padded to len(ds).
        batch = np.array_split(epoch_permutation(N, seed=SEED, epoch=epoch), K)[k]
        want = [int(batch[i % batch.size]) for i in range(len(ds))]
        assert sorted(torch.cat(seen).tolist()) == sorted(want), (k, epoch)
        counts = torch.tensor([steps])
        dist.all_reduce(counts, op=dist.ReduceOp.MAX, group=workers)
        assert int(counts) == steps  # every worker took the same number of steps
        if k == 0:
            print(f"epoch {epoch}: {steps} steps a worker, loss {full_loss(model, X, Y):.4f}")
    after = full_loss(model, X, Y)
    assert after < 2 / 3 * before, (before, after)
    if k == 0:
        print(f"loss {before:.4f} -> {after:.4f}; every worker saw exactly its batch every epoch")


if __name__ == "__main__":
    main()
