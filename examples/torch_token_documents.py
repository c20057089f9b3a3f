"""DDP training of a small next-token model on token documents of many lengths, under torchrun.

Source: C. E. Shannon, "A Mathematical Theory of Communication", Bell System Technical Journal
27 (1948), section 3: text as a Markov chain of symbols, the "digram" (bigram) approximation,
whose entropy rate is the least mean loss a model of the next symbol given the one before can
reach. The delivery is that of M. A. Attia and R. Tandon, arXiv:1609.09823: a master and K
workers that each train on their batch of a fresh shuffle every epoch, the batches delivered by
XOR-coded symbols from what the workers cache.

Every rank makes the same ``N`` documents from a known Markov chain over ``V`` tokens (the seed
is shared), each of a length drawn from a lognormal law (most short, a few long, 8 to 300
tokens), stored as ``uint16`` tokens, one record a document: records of many sizes. Rank 0
serves them (:class:`coded_shuffle.torch.CodedIterableDataset` over the documents' bytes, each
epoch's batches cut to equal bytes, ``balance="bytes"``); ranks 1..K train a neural bigram model
(an embedding of the previous token, a linear layer to the next token's logits) with
``DistributedDataParallel`` over a process group of the workers alone. A ``DataLoader`` with two
worker processes decodes each record into its tokens (``decode``) and collates each minibatch by
padding its documents to the longest of that minibatch (``collate``), the padding left out of
the loss (``ignore_index``). It ends with asserts:

- every epoch each document reached exactly one worker, its tokens those that were made, and
  each padded minibatch holds its documents' tokens, then the padding token alone;
- every worker took the same number of steps (DDP's allreduce never waited for a missing one);
- the loss over every document falls from that of the untrained model to within 0.05 nats of
  the generating chain's (the chain is one candidate model, so the best fit's loss is at most
  that);
- the master verified every epoch after the first, record by record, and each coded delivery
  sent fewer bytes than the uncoded one.

Run:  ``torchrun --standalone --nproc-per-node 3 examples/torch_token_documents.py``
"""

from __future__ import annotations

import os

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from coded_shuffle.torch import CodedIterableDataset

N, V, EPOCHS, SEED, MINIBATCH = 400, 12, 4, 0, 8
PAD = V  # the padding token: an index of its own, never a target
TOLERANCE = 0.05  # nats above the generating chain's loss on the same documents


def make_documents(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``N`` documents from a Markov chain of ``V`` tokens, lengths lognormal(3.8, 0.8) clamped to
    8..300; return them and the chain's transition matrix."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(V, 0.3), size=V)  # peaked rows: a chain with something to learn
    C = np.cumsum(P, axis=1)
    docs = []
    for n in np.clip(rng.lognormal(3.8, 0.8, N).astype(int), 8, 300).tolist():
        doc = [int(rng.integers(V))]
        for u in rng.random(n - 1).tolist():  # the next token from the row of the one before
            doc.append(min(int(np.searchsorted(C[doc[-1]], u)), V - 1))
        docs.append(np.array(doc, dtype=np.uint16))
    return docs, P


def tokens(record: np.ndarray) -> torch.Tensor:
    """A record's bytes (read-only ``uint8``) as its tokens: run in the DataLoader's workers."""
    return torch.from_numpy(record.view(np.uint16).astype(np.int64))


def collate(samples: list[tuple[int, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(ids, tokens, lengths)`` of a minibatch: its documents padded with ``PAD`` to its longest."""
    ids, docs = zip(*samples, strict=True)
    lengths = torch.tensor([d.numel() for d in docs])
    return torch.tensor(ids), pad_sequence(list(docs), batch_first=True, padding_value=PAD), lengths


def next_token_loss(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean loss (nats) of predicting each token from the one before; a pair ending in ``PAD`` is
    left out."""
    logits = model(batch[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1), ignore_index=PAD)


def main() -> None:
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit("run under torchrun: torchrun --standalone --nproc-per-node K+1 " + __file__)
    dist.init_process_group("gloo")
    run()
    dist.destroy_process_group()


def run() -> None:
    """The job on every rank, ``torch.distributed`` initialized: rank 0 serves, the others train."""
    rank, size = dist.get_rank(), dist.get_world_size()
    if size < 2:
        raise SystemExit("run with --nproc-per-node K+1, K >= 1 workers")
    docs, P = make_documents(SEED)  # every rank makes the same documents: the oracle of the checks
    workers = dist.new_group(ranks=list(range(1, size)))  # DDP's group: the workers alone
    source = [d.tobytes() for d in docs] if rank == 0 else None
    ds = CodedIterableDataset(source, epochs=EPOCHS, seed=SEED, with_ids=True, balance="bytes", decode=tokens)
    if ds.is_master:
        reports = ds.serve()
        assert [r.epoch for r in reports] == list(range(1, EPOCHS)), reports
        assert all(r.verified and r.records_checked == N for r in reports)
        assert all(r.coded_bytes < r.uncoded_bytes for r in reports)
        coded, uncoded = sum(r.coded_bytes for r in reports), sum(r.uncoded_bytes for r in reports)
        print(f"master: {len(reports)} coded deliveries verified, {coded} bytes against {uncoded} uncoded")
    else:
        train(ds, docs, P, workers)
    dist.barrier()


def train(ds: CodedIterableDataset, docs: list[np.ndarray], P: np.ndarray, workers: object) -> None:
    k = ds.worker
    assert k is not None
    torch.manual_seed(SEED)  # the same initial weights on every worker (DDP broadcasts them too)
    net = nn.Sequential(nn.Embedding(V + 1, 16, padding_idx=PAD), nn.Linear(16, V))
    model = DistributedDataParallel(net, process_group=workers)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    every = collate([(i, torch.from_numpy(d.astype(np.int64))) for i, d in enumerate(docs)])[1]
    prev = np.concatenate([d[:-1] for d in docs]).astype(np.int64)
    chain = -float(np.log(P[prev, np.concatenate([d[1:] for d in docs])]).mean())
    with torch.no_grad():
        before = float(next_token_loss(net, every))
    loader = DataLoader(ds, batch_size=MINIBATCH, num_workers=2, collate_fn=collate)
    for epoch in range(EPOCHS):
        ds.set_epoch(epoch)
        seen, steps = set(), 0
        for ids, batch, lengths in loader:
            for i, row, n in zip(ids.tolist(), batch, lengths.tolist(), strict=True):  # its tokens, then PAD
                assert n == docs[i].size and np.array_equal(row[:n].numpy(), docs[i])
                assert (row[n:] == PAD).all()
            opt.zero_grad()
            next_token_loss(model, batch).backward()
            opt.step()
            seen.update(ids.tolist())
            steps += 1
        everyone: list[set[int] | None] = [None] * (dist.get_world_size(workers))
        dist.all_gather_object(everyone, seen, group=workers)
        assert sorted(i for s in everyone if s is not None for i in s) == list(range(len(docs))), epoch
        counts = torch.tensor([steps])
        dist.all_reduce(counts, op=dist.ReduceOp.MAX, group=workers)
        assert int(counts) == steps  # every worker took the same number of steps
        with torch.no_grad():
            now = float(next_token_loss(net, every))
        if k == 0:
            print(f"epoch {epoch}: {len(ds)} documents, {steps} steps a worker, loss {now:.4f}")
    if k == 0:
        print(f"loss {before:.4f} -> {now:.4f}; the generating chain's {chain:.4f}")
    assert now < before and now <= chain + TOLERANCE, (before, now, chain)


if __name__ == "__main__":
    main()
