"""Train a bigram language model on K workers whose documents, of many lengths, arrive coded.

Source: C. E. Shannon, "A Mathematical Theory of Communication", Bell System Technical Journal
27 (1948), section 3: text as a Markov chain of symbols, the "digram" (bigram) approximation,
whose entropy rate is the least mean loss a model of the next symbol given the one before can
reach. The setting of the loader is that of M. A. Attia and R. Tandon, arXiv:1609.09823 (a
master, K workers that each train on their batch of a fresh shuffle every epoch).

The data is made here: ``N`` documents of tokens drawn from a known Markov chain over a
vocabulary of ``V`` tokens, each document's length drawn from a lognormal law (most short, a few
long, 8 to 400 tokens), stored as ``uint16`` tokens, one record a document: records of many
sizes. The loader (``coded_shuffle.loader.InProcessLoader``) is given the documents' bytes, cuts
each epoch's order into batches of equal bytes (``balance="bytes"``) and decodes every record
back into its tokens (``decode``): each sample is a document of its own length, never padded.
At every step each of the ``K`` workers takes its next few documents; their gradients are
summed (what an allreduce does) and one step of SGD is taken on the softmax model
``P(next | previous) = softmax(W[previous])``.

It prints the loss and each epoch's coded and uncoded bytes, and ends with asserts:

- every epoch each document reached exactly one worker, its tokens those that were made;
- the batches' bytes are equal within the largest document (the cut by bytes);
- every epoch after the first was verified, and its coded delivery sent fewer bytes than the
  uncoded one;
- the loss falls from ``ln V`` (that of ``W = 0``) to within 0.03 nats of the loss of the
  generating chain on the same documents (the chain is one candidate model, so the best fit's
  loss is at most that).

Run: ``python examples/variable_tokens.py`` (a few seconds).
"""

from __future__ import annotations

import math
from itertools import zip_longest

import numpy as np

from coded_shuffle.loader import InProcessLoader

N, V, K, EPOCHS, SEED = 600, 12, 4, 6, 0
DOCS = 4  # documents a worker takes per step
LEARNING_RATE = 12.0  # at epoch 0, times DECAY each epoch after
DECAY = 0.7
TOLERANCE = 0.03  # nats above the generating chain's loss on the same documents


def make_documents(seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``N`` documents from a Markov chain of ``V`` tokens, lengths lognormal(4, 0.8) clamped to
    8..400; return them and the chain's transition matrix."""
    rng = np.random.default_rng(seed)
    P = rng.dirichlet(np.full(V, 0.3), size=V)  # peaked rows: a chain with something to learn
    C = np.cumsum(P, axis=1)
    lengths = np.clip(rng.lognormal(4.0, 0.8, N).astype(int), 8, 400)
    docs = []
    for n in lengths.tolist():
        doc = [int(rng.integers(V))]
        for u in rng.random(n - 1).tolist():  # the next token from the row of the one before
            doc.append(min(int(np.searchsorted(C[doc[-1]], u)), V - 1))
        docs.append(np.array(doc, dtype=np.uint16))
    return docs, P


def pairs(docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every (previous, next) pair of tokens within the documents."""
    prev = np.concatenate([d[:-1] for d in docs]).astype(np.int64)
    nxt = np.concatenate([d[1:] for d in docs]).astype(np.int64)
    return prev, nxt


def loss_and_gradient(W: np.ndarray, prev: np.ndarray, nxt: np.ndarray) -> tuple[float, np.ndarray]:
    """The summed loss (nats) of ``softmax(W[prev])`` on ``nxt``, and its gradient in ``W``."""
    z = W[prev]
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    total = -float(np.log(p[np.arange(nxt.size), nxt]).sum())
    p[np.arange(nxt.size), nxt] -= 1.0
    grad = np.zeros_like(W)
    np.add.at(grad, prev, p)
    return total, grad


def main() -> None:
    docs, P = make_documents(SEED)
    records = [d.tobytes() for d in docs]
    sizes = np.array([len(r) for r in records])
    prev_all, next_all = pairs(docs)
    chain_loss = -float(np.log(P[prev_all, next_all]).mean())
    W = np.zeros((V, V))
    first = loss_and_gradient(W, prev_all, next_all)[0] / prev_all.size
    print(f"{N} documents of {sizes.min() // 2} to {sizes.max() // 2} tokens, {sizes.sum()} bytes; K = {K}")
    print(f"loss at W = 0: {first:.4f} (ln V = {math.log(V):.4f}); the generating chain's: {chain_loss:.4f}")
    loader = InProcessLoader(records, K=K, epochs=EPOCHS, seed=SEED, balance="bytes",
                             decode=lambda record: record.view(np.uint16))  # fmt: skip
    print("epoch      loss   coded B  uncoded B   batch bytes")
    for epoch in loader:
        seen = []
        for batch in epoch.batches:
            for i, tokens in batch:  # each document its own tokens, of its own length
                assert np.array_equal(tokens, docs[i])
                seen.append(i)
        assert sorted(seen) == list(range(N))  # every document once an epoch
        got = [b.nbytes for b in epoch.batches]
        assert max(got) - min(got) <= sizes.max()  # equal bytes within the largest document
        if epoch.report is not None:
            assert epoch.report.verified and epoch.coded_bytes < epoch.uncoded_bytes
        runs = [b.minibatches(DOCS) for b in epoch.batches]
        for step in zip_longest(*runs):  # the workers' next documents, summed as an allreduce would
            grad, count = np.zeros_like(W), 0
            for run in step:
                if run is not None:
                    prev, nxt = pairs([r.view(np.uint16) for r in run[1]])
                    grad += loss_and_gradient(W, prev, nxt)[1]
                    count += prev.size
            W -= LEARNING_RATE * DECAY**epoch.epoch * grad / count
        now = loss_and_gradient(W, prev_all, next_all)[0] / prev_all.size
        print(f"{epoch.epoch:5d}  {now:8.4f}  {epoch.coded_bytes:8d}  {epoch.uncoded_bytes:9d}   {got}")
    print(f"final loss {now:.4f}, generating chain {chain_loss:.4f}")
    assert now < first and now <= chain_loss + TOLERANCE


if __name__ == "__main__":
    main()
