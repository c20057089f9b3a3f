"""Known-answer tests: orders, checksums and the frame of Example 1 against tests/kat/vectors.json.

The vectors are frozen: this module reads them and never writes them. A failure here means a
release would change an order, a checksum or a frame; read tests/kat/make_kat.py before
rewriting the file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.codec import (
    FRAME_HEADER_BYTES,
    PAIRS_VERSION,
    checksum_reference,
    decode_worker,
    encode_plan,
    load_dataset,
    parse_frame,
    record_checksums,
)
from coded_shuffle.orders import (
    OrderSpec,
    epoch_order,
    epoch_permutation,
    epoch_placement,
    feistel_permutation,
)
from coded_shuffle.plan import plan_from_matrix
from tests.cases import EXAMPLE_1, EXAMPLE_1_RECEIVER_RUNS
from tests.oracles import (
    checksum_from_spec,
    feistel_from_spec,
    feistel_keys_from_spec,
    frame_reference,
    permutation_from_spec,
    read_frame_reference,
    xor_reference,
)

VECTORS = json.loads((Path(__file__).resolve().parent / "kat" / "vectors.json").read_text())


def test_the_vectors_are_all_there():
    # a rewrite that dropped a vector would pass the tests below: the file's shape is fixed too
    names = ["about", "checksums", "permutations", "feistel", "frame_example_1", "frame_storage"]
    names += ["frame_storage_sized", "frame_storage_packed", "frame_storage_sized_packed"]
    assert list(VECTORS) == names
    assert len(VECTORS["checksums"]) == 7
    assert [(p["seed"], p["epoch"], len(p["order"])) for p in VECTORS["permutations"]] == [
        (seed, epoch, 20) for seed in (0, 1, 20161001) for epoch in (0, 1)
    ]
    assert [(f["N"], len(f["keys"]), len(f["forward"])) for f in VECTORS["feistel"]] == [
        (37, 8, 37),
        (37, 8, 37),
        (10**9, 8, 16),
    ]
    frame = VECTORS["frame_example_1"]
    assert frame["S"] == [list(row) for row in EXAMPLE_1] and len(frame["records"]) == 15


def test_record_checksums():
    records = [bytes.fromhex(v["record"]) for v in VECTORS["checksums"]]
    want = [int(v["checksum"], 16) for v in VECTORS["checksums"]]
    assert [int(h) for h in record_checksums(records)] == want
    assert [checksum_reference(r) for r in records] == want
    assert [checksum_from_spec(r) for r in records] == want  # the vectors are the formula's


@pytest.mark.parametrize(
    "vector", VECTORS["permutations"], ids=lambda v: f"seed{v['seed']}-epoch{v['epoch']}"
)
def test_epoch_permutations(vector):
    N, seed, epoch, want = vector["N"], vector["seed"], vector["epoch"], vector["order"]
    assert epoch_permutation(N, seed=seed, epoch=epoch).tolist() == want
    assert epoch_order(N, seed=seed, epoch=epoch).tolist() == want
    assert permutation_from_spec(N, seed=seed, epoch=epoch) == want  # numpy's stream, directly
    # the placement is the order cut into batches: worker k holds positions 5 k .. 5 k + 4
    owner = epoch_placement(N, 4, seed=seed, epoch=epoch).owner
    assert owner[want].tolist() == np.repeat(np.arange(4), N // 4).tolist()


@pytest.mark.parametrize("vector", VECTORS["feistel"], ids=lambda v: f"N{v['N']}-seed{v['seed']}")
def test_feistel_orders(vector):
    N, seed, epoch, want = vector["N"], vector["seed"], vector["epoch"], vector["forward"]
    keys = [int(k, 16) for k in vector["keys"]]
    p = feistel_permutation(N, seed=seed, epoch=epoch)
    assert list(p.keys) == keys == feistel_keys_from_spec(seed=seed, epoch=epoch)
    assert p.forward(np.arange(len(want))).tolist() == want
    assert p.inverse(want).tolist() == list(range(len(want)))
    assert feistel_from_spec(N, keys, range(len(want))) == want  # the network on Python ints
    if len(want) == N:
        assert epoch_order(N, seed=seed, epoch=epoch, spec=OrderSpec("feistel")).tolist() == want
    else:  # enough indices for the compiled loop: the same values
        assert p.forward(np.arange(1 << 12))[: len(want)].tolist() == want


def test_frame_of_example_1():
    vec = VECTORS["frame_example_1"]
    raw = bytes.fromhex("".join(vec["frame"]))
    records = [bytes.fromhex(r) for r in vec["records"]]
    data = np.frombuffer(b"".join(records), dtype=np.uint8).reshape(len(records), -1)
    dataset = load_dataset(data)
    assert [int(h) for h in dataset.checksums] == [int(h, 16) for h in vec["checksums"]]
    assert [checksum_from_spec(r) for r in records] == [int(h, 16) for h in vec["checksums"]]
    # the library writes the frozen frame, byte for byte
    assert (PAIRS_VERSION, FRAME_HEADER_BYTES) == (vec["wire_version"], 40)
    plan = plan_from_matrix(vec["S"], strategy=vec["strategy"])
    frames = encode_plan(plan, dataset, epoch=vec["epoch"])
    assert len(frames) == 1 and frames[0].tobytes() == raw
    # read without the library: header, entries, receiver index (by hand), CRC, payloads
    parts = read_frame_reference(raw)
    assert parts["crc_ok"]
    assert dict(parts["header"], magic=parts["header"]["magic"].decode("ascii")) == vec["header"]
    assert [list(e) for e in parts["entries"]] == vec["entries"]
    assert [list(r) for r in parts["runs"]] == vec["runs"] == [list(r) for r in EXAMPLE_1_RECEIVER_RUNS]
    for (_, a, b), payload in zip(parts["entries"], parts["payload"], strict=True):
        assert payload == bytes(x ^ y for x, y in zip(records[a], records[b], strict=True))
    s, a, b = zip(*parts["entries"], strict=True)
    assert frame_reference(dataset, a, b, epoch=vec["epoch"], symbol=s, runs=EXAMPLE_1_RECEIVER_RUNS) == raw
    # and the library reads it back: every worker decodes its new batch from the frozen bytes
    frame = parse_frame(np.frombuffer(raw, dtype=np.uint8), epoch=vec["epoch"], record_bytes=data.shape[1])
    assert frame.runs.tolist() == vec["runs"]
    for k in range(plan.K):
        cache = dataset.cache(plan.placement_t.batch(k))
        need = plan.placement_t1.batch(k)
        res = decode_worker(
            cache, [raw], need=need, worker=k, epoch=vec["epoch"], checksums=dataset.checksums
        )
        assert res.ok and np.array_equal(res.cache.data, data[need])


def test_frame_of_many_term_symbols():
    from coded_shuffle.codec import TERMS_VERSION, decode_terms, encode_terms
    from coded_shuffle.orders import placement_from_owner
    from coded_shuffle.storage import piece_placement, plan_storage, update_storage
    from tests.oracles import read_terms_frame_reference, terms_frame_reference

    vec = VECTORS["frame_storage"]
    raw = bytes.fromhex("".join(vec["frame"]))
    rows = [bytes.fromhex(r) for r in vec["pieces"]]
    pieces = load_dataset(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), -1))
    K, M = vec["K"], vec["storage"]
    p0, p1 = placement_from_owner(vec["owner_t"], K), placement_from_owner(vec["owner_t1"], K)
    pp = piece_placement(p0, M=M)
    plan = plan_storage(pp, p1)
    # a frame of version 3, written before version 5: the library still reads it, the same symbols
    # as in the frame it writes today
    assert TERMS_VERSION == vec["wire_version"] == 3
    wanter = np.asarray(p1.owner)[plan.terms // pp.pieces]
    (frame,) = encode_terms(pieces, plan.offsets, plan.terms, epoch=vec["epoch"], wanter=wanter, K=K)
    old, new = parse_frame(raw, epoch=vec["epoch"]), parse_frame(frame, epoch=vec["epoch"])
    assert old.terms.tolist() == new.terms.tolist() and old.runs.tolist() == new.runs.tolist()
    assert np.array_equal(old.payload, new.payload) and old.symbol.tolist() == [0]
    # read without the library (struct and zlib), and every payload the XOR of its pieces
    parts = read_terms_frame_reference(raw)
    assert parts["crc_ok"] and parts["terms"] == vec["terms"]
    assert [list(r) for r in parts["runs"]] == vec["runs"]
    for t, payload in zip(parts["terms"], parts["payload"], strict=True):
        want = bytearray(len(rows[0]))
        for x in t:
            want = bytearray(a ^ b for a, b in zip(want, rows[x], strict=True))
        assert payload == bytes(want)
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in parts["terms"]])]).tolist()
    flat = [x for t in parts["terms"] for x in t]
    symbol = [s for s, _ in parts["entries"]]
    epoch = vec["epoch"]
    rebuilt = terms_frame_reference(rows, offsets, flat, epoch=epoch, symbol=symbol, runs=parts["runs"])
    assert rebuilt == raw
    # and every worker decodes its share of the next epoch from the frozen bytes
    nxt = update_storage(pp, p1)
    for k in range(K):
        res = decode_terms(
            pieces.cache(pp.held_by(k)), [raw], need=nxt.held_by(k), worker=k, checksums=pieces.checksums
        )
        assert res.ok and np.array_equal(res.cache.data, pieces.data[nxt.held_by(k)])


def test_frame_of_many_term_symbols_of_many_sizes():
    from coded_shuffle.codec import VARIABLE_TERMS_VERSION, decode_terms, encode_terms
    from coded_shuffle.engine.state import records_of_pieces, storage_dataset
    from coded_shuffle.orders import placement_from_owner
    from coded_shuffle.storage import piece_placement, plan_storage, update_storage
    from tests.kat.make_kat import sized_pieces_reference
    from tests.oracles import read_terms_frame_reference, terms_frame_reference

    vec = VECTORS["frame_storage_sized"]
    raw = bytes.fromhex("".join(vec["frame"]))
    records = [bytes.fromhex(r) for r in vec["records"]]
    rows = sized_pieces_reference(records, 2)
    assert [r.hex() for r in rows] == vec["pieces"]  # each record cut by its own length
    K, M = vec["K"], vec["storage"]
    p0, p1 = placement_from_owner(vec["owner_t"], K), placement_from_owner(vec["owner_t1"], K)
    pp = piece_placement(p0, M=M)
    pieces = storage_dataset(load_dataset(records), K, M, pieces=pp.pieces)
    assert [pieces.record(i) for i in range(pieces.N)] == rows
    plan = plan_storage(pp, p1, sizes=pieces.lengths)
    # a frame of version 4, written before version 5: the library still reads it
    assert VARIABLE_TERMS_VERSION == vec["wire_version"] == 4
    wanter = np.asarray(p1.owner)[plan.terms // pp.pieces]
    (frame,) = encode_terms(pieces, plan.offsets, plan.terms, epoch=vec["epoch"], wanter=wanter, K=K)
    old, new = parse_frame(raw, lengths=pieces.lengths), parse_frame(frame, lengths=pieces.lengths)
    assert old.terms.tolist() == new.terms.tolist() and bytes(old.packed) == bytes(new.packed)
    # read without the library: every payload the XOR of its rows zero-padded to the longest
    lengths = [len(r) for r in rows]
    parts = read_terms_frame_reference(raw, lengths=lengths)
    assert parts["crc_ok"] and parts["terms"] == vec["terms"]
    for t, payload in zip(parts["terms"], parts["payload"], strict=True):
        assert payload == xor_reference(rows, t, max(lengths[x] for x in t))
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in parts["terms"]])]).tolist()
    flat = [x for t in parts["terms"] for x in t]
    symbol = [s for s, _ in parts["entries"]]
    rebuilt = terms_frame_reference(
        rows, offsets, flat, epoch=vec["epoch"], symbol=symbol, runs=parts["runs"], sized=True
    )
    assert rebuilt == raw
    # every worker decodes its share of the next epoch from the frozen bytes, and its records whole
    nxt = update_storage(pp, p1)
    for k in range(K):
        res = decode_terms(
            pieces.cache(pp.held_by(k)), [raw], need=nxt.held_by(k), worker=k, checksums=pieces.checksums,
            lengths=pieces.lengths,
        )  # fmt: skip
        assert res.ok and [res.cache.record(int(i)) for i in res.cache.ids] == [
            rows[i] for i in nxt.held_by(k)
        ]
        (mine,) = p1.batch(k)
        whole = records_of_pieces(res.cache, np.array([mine]), 2, 13)[0]
        assert bytes(whole[: len(records[mine])]) == records[mine]


@pytest.mark.parametrize("name", ["frame_storage_packed", "frame_storage_sized_packed"])
def test_frame_of_many_term_symbols_of_version_5(name):
    from coded_shuffle.codec import PACKED_TERMS_VERSION, decode_terms, encode_terms
    from coded_shuffle.engine.state import storage_dataset
    from coded_shuffle.orders import placement_from_owner
    from coded_shuffle.storage import piece_placement, plan_storage, update_storage
    from tests.oracles import packed_terms_frame_reference, read_packed_terms_frame_reference

    vec = VECTORS[name]
    sized = "records" in vec
    raw = bytes.fromhex("".join(vec["frame"]))
    rows = [bytes.fromhex(r) for r in vec["pieces"]]
    K, M = vec["K"], vec["storage"]
    p0, p1 = placement_from_owner(vec["owner_t"], K), placement_from_owner(vec["owner_t1"], K)
    pp = piece_placement(p0, M=M)
    if sized:
        records = [bytes.fromhex(r) for r in vec["records"]]
        pieces = storage_dataset(load_dataset(records), K, M, pieces=pp.pieces)
    else:
        pieces = load_dataset(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(len(rows), -1))
    assert [pieces.record(i) for i in range(pieces.N)] == rows
    plan = plan_storage(pp, p1, sizes=pieces.lengths if sized else None)
    # the library writes the frozen frame, byte for byte
    assert PACKED_TERMS_VERSION == vec["wire_version"] == 5
    wanter = np.asarray(p1.owner)[plan.terms // pp.pieces]
    (frame,) = encode_terms(pieces, plan.offsets, plan.terms, epoch=vec["epoch"], wanter=wanter, K=K)
    assert frame.tobytes() == raw
    # read without the library (struct, zlib and Python ints): the table packed at the fewest
    # bits, every payload the XOR of its rows zero-padded to the longest
    lengths = [len(r) for r in rows]
    parts = read_packed_terms_frame_reference(raw, lengths=lengths if sized else None)
    assert parts["crc_ok"] and parts["terms"] == vec["terms"]
    assert [list(r) for r in parts["runs"]] == vec["runs"]
    assert parts["table"] == (3, 2, 3)  # 3 terms, counts less one of 2 bits, ids 5, 1, 2 of 3 bits
    for t, payload in zip(parts["terms"], parts["payload"], strict=True):
        assert payload == xor_reference(rows, t, max(lengths[x] for x in t))
    offsets = np.concatenate([[0], np.cumsum([len(t) for t in parts["terms"]])]).tolist()
    flat = [x for t in parts["terms"] for x in t]
    rebuilt = packed_terms_frame_reference(
        rows, offsets, flat, epoch=vec["epoch"], runs=parts["runs"], sized=sized
    )  # fmt: skip
    assert rebuilt == raw
    # every worker decodes its share of the next epoch from the frozen bytes
    nxt = update_storage(pp, p1)
    for k in range(K):
        res = decode_terms(
            pieces.cache(pp.held_by(k)), [raw], need=nxt.held_by(k), worker=k, checksums=pieces.checksums,
            lengths=pieces.lengths if sized else None,
        )  # fmt: skip
        got = [res.cache.record(int(i)) for i in res.cache.ids]
        assert res.ok and got == [rows[i] for i in nxt.held_by(k)]
