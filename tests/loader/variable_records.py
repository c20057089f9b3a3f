"""Records of variable sizes for the loaders' tests, and the batches an epoch cut by bytes gives.

The oracle of a cut by bytes is the brute force that :func:`~coded_shuffle.orders.byte_batch_sizes`
states, run on the epoch's order (:func:`~coded_shuffle.orders.epoch_permutation`, the ``auto``
order at these sizes).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def byte_cuts(order: np.ndarray, sizes: np.ndarray, K: int) -> list[np.ndarray]:
    """The batches of an epoch cut by bytes, by brute force: cut ``k`` is the position ``p`` of
    the order whose bytes before it, ``P[p]``, are nearest ``k / K`` of the total, the lower one on
    a tie (the definition :func:`~coded_shuffle.orders.byte_batch_sizes` states)."""
    P = [0, *np.cumsum(sizes[order]).tolist()]
    inner = [min(range(len(P)), key=lambda p: abs(K * P[p] - k * P[-1])) for k in range(1, K)]
    cuts = [0, *inner, len(order)]
    return [np.asarray(order[a:b], dtype=np.int64) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def write_files(
    root: Path, N: int, rng: np.random.Generator, *, sizes: tuple[int, int] = (1, 301)
) -> list[bytes]:
    """``N`` files of random bytes, one record each (names sort in record order), of ``sizes[0]``
    to ``sizes[1] - 1`` bytes (default 1 to 300)."""
    root.mkdir()
    records = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(*sizes, N)]
    for i, r in enumerate(records):
        (root / f"{i:04d}.bin").write_bytes(r)
    return records


def check_variable_batch(got: dict, want: np.ndarray, files: list[bytes]) -> None:
    """A worker's batch of an epoch as its loader program wrote it (``got``, the ``.npz``): the ids
    ``want`` in order, each record its file's bytes at its own length, never padded, and each
    sample the program's decode of it (the bytes reversed)."""
    assert np.array_equal(got["ids"], want) and np.array_equal(got["sample_ids"], want)
    assert got["lengths"].tolist() == [len(files[i]) for i in want]
    assert got["records"].tobytes() == b"".join(files[i] for i in want)
    assert got["samples"].tobytes() == b"".join(files[i][::-1] for i in want)
