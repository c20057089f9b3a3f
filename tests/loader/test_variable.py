"""Records of variable sizes through the in-process loader: each epoch, each worker's samples are
its records' own bytes (never padded), every record once, from every record source that has them.

The oracles never go through the codec: the records are the bytes the test wrote (or pyarrow's
own reading of an Arrow file), and the batches are the epoch's order
(:func:`~coded_shuffle.orders.epoch_permutation`, the ``auto`` order at these sizes) cut by
``np.array_split`` (by count) or by the brute force of a cut by bytes
(:func:`tests.loader.variable_records.byte_cuts`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset
from coded_shuffle.engine import run
from coded_shuffle.engine.schemes import scheme_for
from coded_shuffle.loader import EpochBatch, InProcessLoader
from coded_shuffle.network import Network
from coded_shuffle.orders import epoch_permutation
from coded_shuffle.records import ArrowRecords, FileRecords, MDSRecords
from tests.loader.variable_records import byte_cuts, write_files
from tests.records.writers import write_mds

N, K, SEED, EPOCHS = 40, 3, 5, 3
HAVE_ARROW = importlib.util.find_spec("pyarrow") is not None


def token_documents(rng: np.random.Generator) -> list[np.ndarray]:
    """``N`` documents of 1 to 200 ``uint16`` tokens."""
    return [rng.integers(0, 50_000, int(n), dtype=np.uint16) for n in rng.integers(1, 201, N)]


def make_source(
    kind: str, tmp_path: Path, rng: np.random.Generator
) -> tuple[Any, list[bytes], Any, list[Any]]:
    """``(source, each record's bytes, decode, each record's sample)`` of a source of ``kind``."""
    if kind == "bytes":
        records = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 301, N)]
        return records, records, None, [np.frombuffer(r, np.uint8) for r in records]
    if kind == "files":
        records = write_files(tmp_path / "files", N, rng)
        return FileRecords(tmp_path / "files"), records, None, [np.frombuffer(r, np.uint8) for r in records]
    docs = token_documents(rng)
    if kind == "tokens":  # token documents as bytes, decoded back into their tokens
        records = [d.tobytes() for d in docs]
        return records, records, lambda r: r.view(np.uint16), docs
    if kind == "mds":  # a variable ndarray column beside a fixed label
        samples = [{"tokens": d, "label": i} for i, d in enumerate(docs)]
        records = write_mds(tmp_path / "mds", {"tokens": "ndarray:uint16", "label": "int"}, samples)
        src = MDSRecords(tmp_path / "mds")
        want = [{"tokens": d, "label": i} for i, d in enumerate(docs)]
        return src, records, src.decoder(), want
    assert kind == "arrow"
    import pyarrow as pa

    path = tmp_path / "tokens.arrow"
    table = pa.table({"input_ids": pa.array([d.tolist() for d in docs], type=pa.list_(pa.uint16()))})
    with pa.OSFile(str(path), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table)
    rows = pa.ipc.open_stream(str(path)).read_all().column("input_ids").to_pylist()  # pyarrow's reading
    src = ArrowRecords(path, column="input_ids")
    return src, [np.array(r, "<u2").tobytes() for r in rows], src.decoder(), [np.array(r) for r in rows]


def same(sample: Any, want: Any) -> bool:
    if isinstance(want, dict):
        return sample.keys() == want.keys() and all(np.array_equal(sample[c], want[c]) for c in want)
    return bool(np.array_equal(sample, want))


def oracle(t: int, sizes: np.ndarray, balance: str) -> list[np.ndarray]:
    order = np.asarray(epoch_permutation(N, seed=SEED, epoch=t), dtype=np.int64)
    return np.array_split(order, K) if balance == "count" else byte_cuts(order, sizes, K)


KINDS = [
    "bytes", "files", "tokens", "mds",
    pytest.param("arrow", marks=pytest.mark.skipif(not HAVE_ARROW, reason="needs pyarrow (the arrow extra)")),
]  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("scheme", "balance"), [("coded", "count"), ("exchange", "bytes")])
def test_every_sample_is_its_records_own_bytes_once_an_epoch(tmp_path, rng, kind, scheme, balance):
    source, records, decode, want = make_source(kind, tmp_path, rng)
    sizes = np.array([len(r) for r in records])
    assert sizes.min() < sizes.max()  # the sizes vary
    loader = InProcessLoader(
        source, K=K, epochs=EPOCHS, seed=SEED, scheme=scheme, balance=balance, decode=decode
    )
    before: list[np.ndarray] = []
    for loaded in loader:
        t = loaded.epoch
        batches = oracle(t, sizes, balance)
        for k, batch in enumerate(loaded.batches):
            assert batch.variable and np.array_equal(batch.ids, batches[k])
            assert batch.lengths.tolist() == sizes[batches[k]].tolist()
            assert batch.nbytes == int(sizes[batches[k]].sum())
            # each record its own bytes, never padded, read-only
            assert [r.tobytes() for r in batch.records] == [records[i] for i in batches[k]]
            assert all(r.dtype == np.uint8 and r.ndim == 1 and not r.flags.writeable for r in batch.records)
            samples = list(batch)  # (id, sample): the record's bytes, or decode(record)
            assert [i for i, _ in samples] == batches[k].tolist()
            assert all(same(s, want[i]) for i, s in samples)
            assert batch.decoded == (np.setdiff1d(batches[k], before[k]).size if before else 0)
        every = np.concatenate([b.ids for b in loaded.batches])
        assert np.array_equal(np.sort(every), np.arange(N))  # each record once an epoch
        if loaded.report is not None:
            assert loaded.report.verified and loaded.report.mode == scheme
            moved = np.concatenate([np.setdiff1d(batches[k], before[k]) for k in range(K)])
            assert loaded.uncoded_bytes == int(sizes[moved].sum())  # the moved records' own bytes
        before = batches


@pytest.mark.parametrize("scheme", ["coded", "exchange"])
def test_a_storage_of_two_batches_yields_each_records_own_bytes(rng, scheme):
    """``storage=2``: each record cut into 2 pieces by its own length (records of 2 to 6 KiB), and
    every worker's batch of each epoch still the records' own bytes, every record once."""
    records = [rng.bytes(int(n)) for n in rng.integers(2048, 6145, N)]
    sizes = np.array([len(r) for r in records])
    for loaded in InProcessLoader(records, K=K, epochs=EPOCHS, seed=SEED, scheme=scheme, storage=2):
        batches = oracle(loaded.epoch, sizes, "count")
        for k, batch in enumerate(loaded.batches):
            assert np.array_equal(batch.ids, batches[k])
            assert batch.lengths.tolist() == sizes[batches[k]].tolist()
            assert [r.tobytes() for r in batch.records] == [records[i] for i in batches[k]]
        if loaded.report is not None:
            r = loaded.report
            assert r.verified and r.mode == scheme and (r.units.storage, r.units.subpackets) == (2, 2)


def test_bytes_balance_cuts_equal_bytes_within_a_record(rng):
    records = [bytes(int(n)) for n in rng.integers(1, 1000, 200)]
    sizes = np.array([len(r) for r in records])
    for loaded in InProcessLoader(records, K=4, epochs=2, seed=1, balance="bytes"):
        got = [b.nbytes for b in loaded.batches]
        assert max(got) - min(got) <= 2 * sizes.max()  # each cut within half a record of its share
        by_count = [
            int(sizes[b].sum()) for b in np.array_split(epoch_permutation(200, seed=1, epoch=loaded.epoch), 4)
        ]
        assert max(got) - min(got) < max(by_count) - min(by_count)


def test_coded_bytes_equal_the_engines_on_variable_records(rng):
    records = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 500, 120)]
    loader = InProcessLoader(records, K=4, epochs=3, seed=2)
    reports = [ep.report for ep in loader if ep.report is not None]
    engine = run(load_dataset(records), K=4, epochs=2, seed=2)
    assert [(r.coded_bytes, r.uncoded_bytes, r.wire_bytes) for r in reports] == [
        (r.coded_bytes, r.uncoded_bytes, r.wire_bytes) for r in engine.transitions
    ]
    assert all(r.coded_bytes < r.uncoded_bytes for r in reports)


def test_auto_chooses_on_the_bytes_of_variable_records(rng):
    """``scheme="auto"`` on a network chooses between the coded broadcast and the exchange on the
    first transition's times in bytes, counted here: the exchange's busiest link from the records'
    sizes and the placements, the coded broadcast's symbols (the coded loader's report) through
    the relays' uplinks."""
    from coded_shuffle.orders import epoch_placement

    sizes = rng.integers(1, 500, 120)
    records = [bytes(int(n)) for n in sizes]
    p0, p1 = (epoch_placement(sizes.size, 4, seed=2, epoch=t) for t in (0, 1))
    S_B = np.zeros((4, 4), dtype=np.int64)
    np.add.at(S_B, (p0.owner, p1.owner), sizes)
    off = S_B - np.diag(np.diag(S_B))
    coded = [ep.report for ep in InProcessLoader(records, K=4, epochs=2, seed=2)][1]  # epoch 0 -> 1
    for spec, expect in (("up=1000", "exchange"), ("up=1,multicast", "coded")):  # Mbit/s of the uplinks
        net = Network.parse(f"master=1000,down=1000,{spec}")
        up = 125e6 if spec == "up=1000" else 125e3
        exchange = max(off.sum(axis=0).max() / 125e6, off.sum(axis=1).max() / up)
        # the coded symbols through the master and every downlink, and, without multicast, the relays
        broadcast = coded.coded_bytes / (125e6 if net.multicast else min(up, 125e6))
        assert (expect == "exchange") == (exchange < broadcast)
        loader = InProcessLoader(records, K=4, epochs=2, seed=2, scheme="auto", network=net)
        assert loader.scheme.name == expect


@pytest.mark.parametrize("balance", ["count", "bytes"])
def test_auto_chooses_a_storage_on_the_bytes_of_its_pieces(rng, balance):
    """``scheme="auto"`` with ``storage=2`` (records of 2 to 6 KiB, each cut into 2 pieces by its
    own length, ``[p L // 2, (p + 1) L // 2)``): the scheme of least time of the first transition,
    counted here on each network. ``d_j``, the bytes of the pieces of worker ``j``'s next batch
    (the epoch's order cut by count or, by brute force, by bytes) that it does not hold (the
    holdings the placement model says), over the downlink; the exchange's busiest upload and the
    coded broadcast's symbols as the loaders of each scheme measured them, the symbols through the
    master, every downlink and, without multicast, the relays' uplinks."""
    from coded_shuffle.engine.schedule import EpochSchedule, predicted_times
    from coded_shuffle.orders import OrderSpec

    records = [rng.bytes(int(n)) for n in rng.integers(2048, 6145, N)]
    sizes = np.array([len(r) for r in records])
    piece = {(i, p): (p + 1) * L // 2 - p * L // 2 for i, L in enumerate(sizes) for p in (0, 1)}
    scheme = scheme_for("coded", K=K, storage=2, sizes=sizes)  # which worker holds each piece
    cut = None if balance == "count" else sizes  # epoch 0's batches as the loader cuts them
    now = EpochSchedule(N=N, K=K, seed=SEED, spec=OrderSpec(), scheme=scheme, sizes=cut, balance=balance)
    now = now.epoch(0)
    assert all(np.array_equal(now.batch(k), b) for k, b in enumerate(oracle(0, sizes, balance)))
    held = [{(int(u) // 2, int(u) % 2) for u in scheme.held(now.held, k)} for k in range(K)]
    d = max(sum(piece[i, p] for i in batch for p in (0, 1) if (i, p) not in held[j])
            for j, batch in enumerate(oracle(1, sizes, balance)))  # fmt: skip
    kw = {"K": K, "epochs": 2, "seed": SEED, "storage": 2, "balance": balance}
    sent = {m: InProcessLoader(records, scheme=m, **kw) for m in ("coded", "exchange")}
    for loader in sent.values():
        list(loader)
    coded = sent["coded"].reports[0].wire.payload_bytes
    upload = sent["exchange"].reports[0].exchange.max_sent_bytes
    chosen = set()
    for spec in ("master=100,up=50,down=100", "master=10,up=50,down=100", "master=100,down=100,multicast"):
        net = Network.parse(spec)
        rate = {k: (getattr(net, k) or 0) * 125_000 for k in ("master", "up", "down")}  # bytes a second
        times = {  # no worker uplinks (no up=R): no exchange
            "exchange": max(d / rate["down"], upload / rate["up"]) if rate["up"] else float("inf"),
            "coded": coded / min(rate["master"], rate["down"], *(() if net.multicast else (rate["up"],))),
        }
        predicted = predicted_times(N, K, seed=SEED, spec=OrderSpec(), epoch=0, record_bytes=int(sizes.max()),
                                    network=net, sizes=sizes, storage=2, balance=balance)  # fmt: skip
        assert {m: predicted.predicted_seconds[m] for m in times} == pytest.approx(times)
        loader = InProcessLoader(records, scheme="auto", network=net, **kw)
        assert loader.scheme.name == min(times, key=times.get) and loader.scheme.M == 2
        chosen.add(loader.scheme.name)
    assert chosen == {"coded", "exchange"}
    # one rack whose downlink from the spine is slower than the ports: it carries every coded symbol
    # (nothing crosses it in the exchange, whose upload is measured on the racks' senders)
    racks = Network.parse("master=100,up=50,down=100,racks=1x3,rack-up=100,rack-down=40")
    on_racks = InProcessLoader(records, scheme="exchange", network=racks, **kw)
    list(on_racks)
    assert all(r.verified for r in on_racks.reports)
    upload = on_racks.reports[0].exchange.max_sent_bytes
    times = {"exchange": max(d / 12.5e6, upload / 6.25e6), "coded": coded / 5e6}
    predicted = predicted_times(N, K, seed=SEED, spec=OrderSpec(), epoch=0, record_bytes=int(sizes.max()),
                                network=racks, sizes=sizes, storage=2, balance=balance)  # fmt: skip
    assert {m: predicted.predicted_seconds[m] for m in times} == pytest.approx(times)
    chose = InProcessLoader(records, scheme="auto", network=racks, **kw).scheme.name
    assert chose == min(times, key=times.get)


def test_minibatches_of_variable_records_are_their_own_bytes(rng):
    records = [bytes([i]) * (i + 1) for i in range(11)]
    (batch,) = next(iter(InProcessLoader(records, K=1, epochs=1, seed=0))).batches
    runs = list(batch.minibatches(4))
    assert [len(ids) for ids, _ in runs] == [4, 4, 3]
    for ids, recs in runs:
        assert recs.dtype == object and [r.tobytes() for r in recs] == [records[i] for i in ids]
    assert [r.tobytes() for _, s in runs for r in s] == [records[i] for i in batch.ids]
    assert [s for _, s in batch.samples(len)] == [len(records[i]) for i in batch.ids]


def test_variable_records_exceptions(rng):
    records = [bytes(int(n)) for n in rng.integers(1, 50, 12)]
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"storage": 2, "scheme": scheme_for("coded", K=3, storage=2)}, ValueError,
         "Argument .storage. must be 1 for records of variable sizes with a scheme of one's own"),
        ({"scheme": scheme_for("coded", K=3, storage=2)}, ValueError, "Argument 'scheme' must deliver whole"),
        ({"balance": "tokens"}, ValueError, "Argument 'balance'"),
    ]  # fmt: skip
    for kwargs, exc, text in cases:
        with pytest.raises(exc, match=text):
            InProcessLoader(records, K=3, epochs=2, **kwargs)
    bad: list[tuple[Any, type[Exception], str]] = [
        ([b"ab", "cd"], TypeError, "Argument 'source' must hold bytes only .*not str at index 1"),
        ([b"ab", b""], ValueError, "Argument 'source' must hold records of at least 1 byte.*index 1"),
        (
            [[1, 2], [3]],
            TypeError,
            "Argument 'source' must hold arrays, .npy paths or bytes, not list at index 0",
        ),
        ([np.zeros(3), np.zeros(2)], ValueError, "Argument 'source' must hold arrays of one length"),
    ]
    for source, exc, text in bad:
        with pytest.raises(exc, match=text):
            InProcessLoader(source, K=1, epochs=1)


def test_records_of_one_size_keep_their_rows(rng):
    """A sequence of bytes all of one size is records of one size: rows of bytes, as before."""
    records = [rng.bytes(6) for _ in range(9)]
    (batch,) = next(iter(InProcessLoader(records, K=1, epochs=1, seed=0))).batches
    assert not batch.variable and isinstance(batch, EpochBatch) and batch.records.shape == (9, 6)
    assert [batch.records[r].tobytes() for r in range(9)] == [records[i] for i in batch.ids]
