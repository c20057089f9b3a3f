"""The PyTorch dataset's samples: a user's ``decode`` run in the DataLoader's workers, token windows
as tensors of their token type, records of variable sizes as tensors of their own lengths, and the
checks of ``decode``.

No job is launched: a rank's dataset is given a real epoch batch (from the in-process loader over
the same records) as its loader would hand it over, which is the state DataLoader workers get.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from types import SimpleNamespace

import numpy as np
import pytest

from coded_shuffle.loader import InProcessLoader
from coded_shuffle.records import TokenWindows

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

N, K, BLOCK = 48, 3, 8


def token_file(tmp_path, rng) -> tuple[str, np.ndarray]:
    """A nanoGPT-style token file of ``N`` whole windows and a few tokens more, and numpy's reading of it."""
    path = str(tmp_path / "train.bin")
    rng.integers(0, 2**16, N * BLOCK + 5, dtype=np.uint16).tofile(path)
    return path, np.fromfile(path, dtype="<u2")


def rank_dataset(batch, *, decode=None, with_ids=True, sizes=None, seed=0):
    """Worker ``batch.worker``'s dataset holding ``batch`` as its current epoch, as after set_epoch
    (``sizes``: each record's bytes, batches of equal bytes; None: of equal counts; ``seed``: the job's)."""
    from coded_shuffle.torch import CodedIterableDataset

    # writable rows, as a rank's loader makes them
    batch = dataclasses.replace(batch, records=batch.records.copy())
    ds = CodedIterableDataset.__new__(CodedIterableDataset)
    ds.__dict__.update(
        decode=decode, drop_last=False, with_ids=with_ids, prefetch=False, is_master=False, K=K,
        worker=batch.worker, epochs=2, start_epoch=0, seed=seed, _N=N if sizes is None else sizes.size,
        _batch=None, _skip=0, _yielded=0, balance="count" if sizes is None else "bytes", _epoch_len=None,
        _order="auto",
        _tensors=(), _bytes=np.empty((0, 0), np.uint8), _ids=np.empty(0, np.int64),
        _pos=np.empty(0, np.int64), _pid=os.getpid(), _iterated=(os.getpid(), 0), _ended=False,
        _feed=iter([batch]), _loader=SimpleNamespace(N=None, stopped_by=None, _sizes=sizes), transport=None,
        _records=None,
        cache_dir=None, _segments=[], _rest=None, _rest_len=None, _table=None, _fingerprint=None,
    )  # fmt: skip
    ds._advance()
    return ds


def where(record: np.ndarray) -> dict:
    """A decode that says where it ran: the process and the DataLoader worker, with the record."""
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    return {"pid": os.getpid(), "worker": None if info is None else info.id, "data": bytes(record),
            "writable": record.flags.writeable}  # fmt: skip


def test_decode_runs_in_the_dataloader_workers_each_sample_once(tmp_path, rng):
    from torch.utils.data import DataLoader

    path, tokens = token_file(tmp_path, rng)
    windows = tokens[: N * BLOCK].reshape(N, BLOCK)
    (epoch,) = InProcessLoader(TokenWindows(path, block_size=BLOCK), K=K, epochs=1, seed=3)
    seen = []
    for batch in epoch.batches:
        ds = rank_dataset(batch, decode=where)
        got = list(DataLoader(ds, batch_size=None, num_workers=2))
        assert sorted(i for i, _ in got) == sorted(batch.ids.tolist())  # the rank's batch, once
        assert {s["worker"] for _, s in got} == {0, 1}
        assert os.getpid() not in {s["pid"] for _, s in got} and len({s["pid"] for _, s in got}) == 2
        for i, s in got:
            assert s["data"] == windows[i].tobytes() and not s["writable"]
        seen += [i for i, _ in got]
    assert sorted(seen) == list(range(N))  # each record once an epoch


def test_token_windows_come_as_tensors_of_the_token_type(tmp_path, rng):
    import torch
    from torch.utils.data import DataLoader

    path, tokens = token_file(tmp_path, rng)
    windows = tokens[: N * BLOCK].reshape(N, BLOCK)
    (epoch,) = InProcessLoader(TokenWindows(path, block_size=BLOCK), K=K, epochs=1, seed=5)
    batch = epoch.batches[1]
    assert batch.records.dtype == np.dtype("<u2") and batch.records.shape == (N // K, BLOCK)
    got = list(DataLoader(rank_dataset(batch, with_ids=False), batch_size=4, num_workers=0))
    x = torch.cat(got)
    assert x.dtype == torch.uint16 and x.shape == (N // K, BLOCK)
    assert np.array_equal(x.numpy(), windows[batch.ids])


def test_state_dict_is_unchanged_by_decode(tmp_path, rng):
    path, _ = token_file(tmp_path, rng)
    (epoch,) = InProcessLoader(TokenWindows(path, block_size=BLOCK), K=K, epochs=1, seed=0)
    states = []
    for decode in (None, bytes):
        ds = rank_dataset(epoch.batches[0], decode=decode)
        it = iter(ds)
        for _ in range(5):
            next(it)
        states.append(ds.state_dict())
    want = {"epoch": 0, "samples": 5, "seed": 0, "K": K, "N": N, "fingerprint": None, "segments": []}
    assert states[0] == states[1] == want


def test_decode_must_be_callable():
    from coded_shuffle.torch import CodedIterableDataset

    X = np.zeros((12, 2), dtype=np.float32)
    with pytest.raises(TypeError, match="Argument 'decode' must be a callable .* not str"):
        CodedIterableDataset(X, epochs=1, decode="pil")
    with pytest.raises(TypeError, match="Argument 'decode' must be a callable .* not int"):
        InProcessLoader(X, K=2, epochs=1, decode=3)


def file_dir(tmp_path, rng, n: int = 30) -> list[bytes]:
    """``n`` files of 10 to 300 random bytes, named in record order; their bytes."""
    files = [rng.integers(0, 256, int(rng.integers(10, 301)), dtype=np.uint8).tobytes() for _ in range(n)]
    for i, data in enumerate(files):
        (tmp_path / f"{i:03d}.bin").write_bytes(data)
    return files


def test_records_of_variable_sizes_come_as_tensors_of_their_own_length(tmp_path, rng):
    """Files of 10 to 300 bytes: each epoch each file once, as a 1-D uint8 tensor of its bytes; a
    batch of them collated by padding (docs/torch.md); with decode, decode's result of the bytes."""
    import torch
    from torch.nn.utils.rnn import pad_sequence
    from torch.utils.data import DataLoader

    from coded_shuffle.records import FileRecords

    files = file_dir(tmp_path, rng)
    sizes = np.array([len(f) for f in files], dtype=np.int64)
    for epoch in InProcessLoader(FileRecords(tmp_path), K=K, epochs=2, seed=1, balance="bytes"):
        seen = []
        lengths = []
        for batch in epoch.batches:
            ds = rank_dataset(batch, sizes=sizes, seed=1)
            lengths.append(len(ds))
            got = list(DataLoader(ds, batch_size=None, num_workers=0))
            for i, x in got:
                assert x.dtype == torch.uint8 and x.ndim == 1 and x.numpy().tobytes() == files[i]
            ids = [i for i, _ in got]
            n = len(batch)
            assert ids == [int(batch.ids[j % n]) for j in range(len(ds))]  # padded with its first records
            seen += ids[:n]
            pad = lambda b: (pad_sequence(b, batch_first=True), [r.numel() for r in b])  # noqa: E731
            loader = DataLoader(
                rank_dataset(batch, sizes=sizes, with_ids=False, seed=1), batch_size=4, collate_fn=pad
            )
            for (x, n_), lo in zip(loader, range(0, len(ds), 4), strict=True):
                for row, m, j in zip(x, n_, range(lo, lo + 4), strict=False):
                    i = int(batch.ids[j % n])
                    assert m == sizes[i] and row[:m].numpy().tobytes() == files[i] and not row[m:].any()
            decoded = list(rank_dataset(batch, sizes=sizes, decode=where, seed=1))
            assert [(i, s["data"], s["writable"]) for i, s in decoded] == [(i, files[i], False) for i in ids]
        assert sorted(seen) == list(range(len(files)))  # each record once an epoch
        counts = [len(b) for b in epoch.batches]
        assert lengths == [max(counts)] * K and len(set(counts)) > 1  # byte-balanced: counts differ


def test_a_list_of_bytes_is_a_source_and_auto_chooses_on_its_bytes(monkeypatch):
    import coded_shuffle._torch_base as base
    from coded_shuffle._torch_base import tensor_source
    from coded_shuffle.loader._common import choose_scheme
    from coded_shuffle.network import Network
    from coded_shuffle.torch import CodedIterableDataset

    docs = [np.arange(n, dtype=np.uint16).tobytes() for n in (5, 300, 17)]
    src = tensor_source(docs)
    assert src.record_bytes is None and [src.view(i).tobytes() for i in range(3)] == docs
    # scheme="auto" on records of many sizes: the choice of the loaders' choose_scheme on their
    # bytes, the storage and the batches cut by bytes, for the launcher's world of 5 ranks
    monkeypatch.setattr(base, "torch_world", lambda: (0, 5))
    many = [bytes(int(n)) for n in np.random.default_rng(1).integers(100, 4000, 400)]
    kw = {"seed": 3, "order": "auto", "start_epoch": 0, "strategy": "greedy"}
    cases = (
        ("master=1000,up=1000,down=1000", 1, "exchange"),
        ("master=1000,up=600,down=1000,multicast", 2, "coded"),
    )
    for spec, storage, chosen in cases:
        net = Network.parse(spec)
        got = base._auto_scheme(many, None, net, storage=storage, balance="bytes", **kw)
        assert got[0] == chosen
        want = choose_scheme(400, max(map(len, many)), 5, network=net, sizes=np.array([len(d) for d in many]),
                             storage=storage, balance="bytes", **kw)  # fmt: skip
        assert got == want
    with pytest.raises(ValueError, match="'scheme' can be 'auto' only with a 'network'"):
        CodedIterableDataset(docs, epochs=2, scheme="auto")
    with pytest.raises(ValueError, match="'balance' must be"):
        CodedIterableDataset(docs, epochs=2, balance="tokens")
