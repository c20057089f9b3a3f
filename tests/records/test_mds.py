"""MDS shards: samples as slices of the shards' maps, decoded columns, compressed shards, refusals.

The shards are written by ``tests/records/writers.py`` from the layout of MosaicML Streaming's MDS
writer (its source cited there); mosaicml-streaming itself does not install beside the CPU build
of torch (its vision module needs a matching torchvision), so no shard here is written by it.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from coded_shuffle.codec import load_dataset
from coded_shuffle.records import MDSRecords, fixed_record_bytes
from tests.records.writers import write_mds

COLUMNS = {"id": "int", "text": "str", "blob": "bytes", "score": "float32", "meta": "json",
           "img": "ndarray:uint8:2,3", "toks": "ndarray:uint16", "any": "ndarray",
           "n": "str_int"}  # fmt: skip


def samples(rng, n=12):
    return [
        {"id": i, "text": "é" * (i % 4), "blob": bytes(rng.integers(0, 256, i + 1, dtype=np.uint8)),
         "score": float(np.float32(i / 3)), "meta": {"i": i, "tags": ["a"] * (i % 2)},
         "img": rng.integers(0, 256, (2, 3), dtype=np.uint8),
         "toks": rng.integers(0, 2**16, (i % 3 + 1, 300), dtype=np.uint16),  # a shape of uint16 dims
         "any": rng.standard_normal(i + 1), "n": str(10**i)}
        for i in range(n)
    ]  # fmt: skip


def test_a_sample_is_a_slice_of_its_shard_s_map_and_its_columns_decode(tmp_path, rng):
    made = samples(rng)
    encoded = write_mds(tmp_path, COLUMNS, made, per_shard=5)
    src = MDSRecords(tmp_path)
    assert len(src) == 12 and src.samples == (5, 5, 2) and src.record_bytes is None
    assert src.column_names == tuple(sorted(COLUMNS)) and src.column_sizes[src.column_names.index("img")] == 6
    for i in (0, 6, 11):
        k = i // 5
        m = src.maps[k]
        assert isinstance(m, np.memmap) and os.path.samefile(m.filename, tmp_path / f"shard.{k:05}.mds")
        assert np.shares_memory(src.view(i), m) and src.view(i).tobytes() == encoded[i]
        cols = src.columns(i)
        for name in ("id", "text", "blob", "score", "meta", "n"):
            assert cols[name] == (int(made[i][name]) if name == "n" else made[i][name]), name
        for name in ("img", "toks", "any"):
            assert cols[name].dtype == made[i][name].dtype and np.array_equal(cols[name], made[i][name]), name
        assert np.shares_memory(cols["toks"], m) and not cols["toks"].flags.writeable  # no copy


def test_a_shard_of_fixed_columns_is_a_table_without_a_copy(tmp_path):
    write_mds(tmp_path, {"x": "uint32", "y": "ndarray:int8:2"}, [{"x": i, "y": np.array([i, -i], np.int8)}
                                                                for i in range(9)], per_shard=9)  # fmt: skip
    src = MDSRecords(tmp_path)
    assert src.record_bytes == 6 and np.shares_memory(src.table(), src.maps[0])
    assert src.table()[:, :4].copy().view("<u4").ravel().tolist() == list(range(9))
    data = load_dataset(src)  # records of one size: the codec's dataset is the shard's map
    assert data.record_bytes == 6 and np.shares_memory(data.data, src.maps[0])
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold records of one size here, not sizes"):
        fixed_record_bytes(MDSRecords(write_dir_variable(tmp_path / "v")))


def write_dir_variable(d):
    write_mds(d, {"a": "bytes"}, [{"a": b"x" * (i + 1)} for i in range(3)])
    return d


@pytest.mark.parametrize("compression", ["gz", "bz2", "zstd"])
def test_compressed_shards_are_decompressed_once_into_the_cache(tmp_path, rng, compression):
    if compression == "zstd":
        pytest.importorskip("zstandard", reason="zstd shards need the optional zstandard package")
    encoded = write_mds(tmp_path / "d", COLUMNS, samples(rng), per_shard=5, compression=compression)
    assert not (tmp_path / "d" / "shard.00000.mds").exists()
    src = MDSRecords(tmp_path / "d", cache_dir=tmp_path / "cache")
    assert [os.path.basename(s) for s in src.shards] == [f"shard.0000{k}.mds" for k in range(3)]
    assert all(os.path.dirname(s) == str(tmp_path / "cache") for s in src.shards)
    assert [src.view(i).tobytes() for i in range(12)] == encoded
    for k in range(3):  # the cache is used again: the compressed shards are not read a second time
        os.remove(tmp_path / "d" / f"shard.0000{k}.mds.{compression}")
    again = MDSRecords(tmp_path / "d", cache_dir=tmp_path / "cache")
    assert again.view(11).tobytes() == encoded[11]


def _entry(d, k=0):
    with open(d / "index.json") as f:
        return json.load(f)


def _edit(d, change):
    obj = _entry(d)
    change(obj)
    with open(d / "index.json", "w") as f:
        json.dump(obj, f)


def test_mds_records_exceptions(tmp_path, rng):
    def fresh(name, **kw):
        d = tmp_path / name
        write_mds(
            d,
            {"a": "bytes", "b": "int"},
            [{"a": b"x" * (i + 1), "b": i} for i in range(6)],
            per_shard=3,
            **kw,
        )
        return d

    cases = []
    d = fresh("notjson")
    (d / "index.json").write_text("{not json")
    cases.append((d, r"must name an MDS dataset: .*index\.json is not JSON$"))
    cases.append((tmp_path / "nowhere", r"must name an MDS dataset: cannot read .*nowhere: No such file"))
    d = fresh("version")
    _edit(d, lambda o: o.update(version=3))
    cases.append((d, r"of index version 2: .*index\.json is of version 3$"))
    d = fresh("noshards")
    _edit(d, lambda o: o.update(shards=[]))
    cases.append((d, r"at least 1 sample: .*index\.json lists 0 shards$"))
    d = fresh("notmds")
    _edit(d, lambda o: o["shards"][1].update(format="json"))
    cases.append((d, r"must name MDS shards: shard 1 of .*index\.json is 'json'$"))
    d = fresh("short")
    raw = (d / "shard.00001.mds").read_bytes()
    (d / "shard.00001.mds").write_bytes(raw[:-3])
    cases.append(
        (d, r"agree with the index: .*shard\.00001\.mds is cut short: \d+ bytes, the index says \d+$")
    )
    d = fresh("count")
    _edit(d, lambda o: o["shards"][0].update(samples=4))
    cases.append((d, r"agree with the index: .*shard\.00000\.mds holds 3 samples, the index says 4$"))
    d = fresh("columns")
    _edit(d, lambda o: o["shards"][1].update(column_encodings=["str", "int"]))
    cases.append(
        (d, r"one set of columns: shard\.00001\.mds has \[\('a', 'str', None\), \('b', 'int', 8\)\]")
    )
    d = fresh("sizes")  # the index says column b is 4 bytes: the samples' sizes then disagree
    _edit(d, lambda o: [s.update(column_sizes=[None, 4]) for s in o["shards"]])
    cases.append((d, r"agree with their columns: sample 0 of .*shard\.00000\.mds holds 13 bytes, .* say 9$"))
    d = fresh("missing")
    os.remove(d / "shard.00001.mds")
    cases.append((d, r"whose shards exist: no .*shard\.00001\.mds$"))
    d = fresh("text")
    text = b"not a shard at all, just some text" * 3
    (d / "shard.00000.mds").write_bytes(text)
    _edit(d, lambda o: o["shards"][0]["raw_data"].update(bytes=len(text)))
    cases.append((d, r"agree with the index: .*shard\.00000\.mds holds \d+ samples, the index says 3$"))
    d = fresh("offsets")
    raw = bytearray((d / "shard.00000.mds").read_bytes())
    raw[4:8] = np.uint32(2).tobytes()  # the first offset inside the header
    (d / "shard.00000.mds").write_bytes(bytes(raw))
    cases.append((d, r"must name MDS shards: .*shard\.00000\.mds's offsets run from 2 to \d+, not from past"))
    d = fresh("badzip", compression="gz")
    (d / "shard.00000.mds.gz").write_bytes(b"not gzip")
    cases.append((d, r"must name readable MDS shards: .*shard\.00000\.mds\.gz is not valid gz data$"))
    d = fresh("unknown", compression="gz")
    _edit(d, lambda o: [s.update(compression="lz9") for s in o["shards"]])
    cases.append((d, r"of a known compression, not 'lz9': .*shard\.00000\.mds\.gz$"))
    d = tmp_path / "empty"
    write_mds(d, {"a": "bytes"}, [{"a": b"x"}], per_shard=3)
    raw = bytearray((d / "shard.00000.mds").read_bytes())
    (d / "shard.00000.mds").write_bytes(bytes(raw[:4]) + np.array([12, 12], "<u4").tobytes())
    _edit(d, lambda o: o["shards"][0]["raw_data"].update(bytes=12))
    cases.append((d, r"MDS samples of at least 1 byte: sample 0 of .*shard\.00000\.mds is empty$"))
    for path, message in cases:
        with pytest.raises(ValueError, match=r"^Argument 'path' must (.* )?" + message.removeprefix("must ")):
            MDSRecords(path)
    with pytest.raises(TypeError, match=r"^Argument 'path' must be a str or os.PathLike, not int\.$"):
        MDSRecords(3)  # type: ignore[arg-type]


def test_a_loader_decodes_each_mds_record_into_its_columns(tmp_path, rng):
    import pickle

    from coded_shuffle import InProcessLoader

    made = [
        {"x": int(i), "img": rng.integers(0, 256, (2, 3), dtype=np.uint8), "s": "é" * 3} for i in range(24)
    ]
    write_mds(tmp_path, {"x": "uint32", "img": "ndarray:uint8:2,3", "s": "str"}, made, per_shard=10)
    src = MDSRecords(tmp_path)
    decode = pickle.loads(pickle.dumps(src.decoder()))  # as spawned DataLoader workers get it
    for ep in InProcessLoader(src, K=3, epochs=2, seed=4, decode=decode):
        seen = []
        for b in ep.batches:
            for i, cols in b:  # the written sample's columns, decoded from the record's bytes
                assert cols["x"] == made[i]["x"] and cols["s"] == made[i]["s"]
                assert np.array_equal(cols["img"], made[i]["img"]) and cols["img"].shape == (2, 3)
                seen.append(i)
        assert sorted(seen) == list(range(24))
