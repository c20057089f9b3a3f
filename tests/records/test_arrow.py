"""Arrow files: a row as a slice of the file's map, the rows of Hugging Face-style files, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from coded_shuffle.records import ArrowRecords

pa = pytest.importorskip("pyarrow", reason="Arrow files need pyarrow (the arrow extra)")


def write_stream(path, table, *, chunk=None):
    with pa.ipc.new_stream(str(path), table.schema) as w:
        for batch in table.to_batches(max_chunksize=chunk):
            w.write_batch(batch)


def test_a_row_is_a_slice_of_the_file_s_map(tmp_path, rng):
    docs = [rng.integers(0, 50257, int(n), dtype=np.int64) for n in rng.integers(1, 200, 30)]
    table = pa.table({"input_ids": pa.array([d.tolist() for d in docs], pa.list_(pa.int64())),
                      "text": [f"doc {i}" for i in range(30)]})  # fmt: skip
    path = tmp_path / "data-00000-of-00001.arrow"
    write_stream(path, table, chunk=7)
    src = ArrowRecords(path, column="input_ids")
    (m,) = src.maps
    assert m.nbytes == path.stat().st_size and m.tobytes() == path.read_bytes()  # the file, mapped
    assert isinstance(m.base, pa.Buffer)  # pyarrow's memory map, not a copy numpy owns
    for i in (0, 7, 29):
        assert np.shares_memory(src.view(i), m) and np.array_equal(src.values(i), docs[i])
    assert src.value_dtype == np.int64 and src.row(8) == {"input_ids": docs[8].tolist(), "text": "doc 8"}
    text = ArrowRecords(path, column="text")
    assert text.view(12).tobytes() == b"doc 12" and np.shares_memory(text.view(12), text.maps[0])


def test_arrow_records_exceptions(tmp_path):
    ok = pa.table({"x": pa.array([b"ab", b"c"]), "y": [1, 2]})
    write_stream(tmp_path / "ok.arrow", ok)
    raw = (tmp_path / "ok.arrow").read_bytes()
    (tmp_path / "text.arrow").write_text("not arrow at all\n" * 20)
    (tmp_path / "short.arrow").write_bytes(raw[: len(raw) - 40])
    (tmp_path / "noeos.arrow").write_bytes(raw[:-8])
    write_stream(tmp_path / "other.arrow", pa.table({"x": pa.array(["ab"]), "y": [1]}))
    write_stream(tmp_path / "bools.arrow", pa.table({"x": [True, False]}))
    write_stream(tmp_path / "nulls.arrow", pa.table({"x": pa.array([b"a", None, b"b"])}))
    write_stream(tmp_path / "inner.arrow", pa.table({"x": pa.array([[1, None]], pa.list_(pa.int32()))}))
    write_stream(tmp_path / "empty.arrow", pa.table({"x": pa.array([b"a", b""])}))
    write_stream(tmp_path / "norows.arrow", pa.table({"x": pa.array([], pa.binary())}))
    ok_path = tmp_path / "ok.arrow"
    cases = [
        (
            tmp_path / "text.arrow",
            {},
            r"paths.* Arrow files: .*text\.arrow is not an Arrow IPC stream or file$",
        ),
        (tmp_path / "short.arrow", {}, r"paths.* whole Arrow files: .*short\.arrow is cut short"),
        (
            tmp_path / "noeos.arrow",
            {},
            r"paths.* whole Arrow files: .*noeos\.arrow is cut short \(no end-of-stream",
        ),
        (tmp_path / "nope.arrow", {}, r"paths.* Arrow files: no such file: .*nope\.arrow$"),
        (
            [ok_path, tmp_path / "other.arrow"],
            {"column": "x"},
            r"paths.* has one type: .*other\.arrow has string, ",
        ),
        (ok_path, {"column": "z"}, r"column.* a column of .*ok\.arrow: 'z' is not in \['x', 'y'\]$"),
        (ok_path, {}, r"column.* the column of records: .*ok\.arrow has \['x', 'y'\]$"),
        (
            tmp_path / "bools.arrow",
            {},
            r"column.* number or list-of-numbers column: 'x' of .*bools\.arrow is bool$",
        ),
        (tmp_path / "nulls.arrow", {}, r"paths.* no nulls: row 1 of 'x' in .*nulls\.arrow is null$"),
        (
            tmp_path / "inner.arrow",
            {},
            r"paths.* no nulls: column 'x' of .*inner\.arrow holds null values inside",
        ),
        (tmp_path / "empty.arrow", {}, r"paths.* at least 1 byte: row 1 of 'x' in .*empty\.arrow is empty$"),
        (tmp_path / "norows.arrow", {}, r"paths.* at least 1 row, not 0"),
        ([], {}, r"paths.* at least 1 Arrow file, not 0\.$"),
    ]
    for path, kw, message in cases:
        with pytest.raises(ValueError, match=r"^Argument '" + message):
            ArrowRecords(path, **kw)
    with pytest.raises(TypeError, match=r"^Argument 'column' must be a str or None, not int\.$"):
        ArrowRecords(ok_path, column=3)  # type: ignore[arg-type]


def test_a_loader_decodes_each_arrow_record_into_its_values(tmp_path, rng):
    import pickle

    from coded_shuffle import InProcessLoader

    docs = rng.integers(-(2**31), 2**31, (30, 16), dtype=np.int64).astype(np.int32)  # windows of one size
    table = pa.table({"input_ids": pa.array(docs.tolist(), pa.list_(pa.int32()))})
    path = tmp_path / "data.arrow"
    write_stream(path, table, chunk=11)
    src = ArrowRecords(path)
    decode = pickle.loads(pickle.dumps(src.decoder()))  # as spawned DataLoader workers get it
    want = table.column("input_ids").to_pylist()  # pyarrow's own reading of the file
    for ep in InProcessLoader(src, K=3, epochs=2, seed=4, decode=decode):
        seen = []
        for b in ep.batches:
            for i, values in b:
                assert values.dtype == np.int32 and values.tolist() == want[i]
                seen.append(i)
        assert sorted(seen) == list(range(30))
