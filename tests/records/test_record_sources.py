"""The record-source contract, for every source: one body per case, run over every implementation.

The oracle of a record's bytes is read independently of the source: ``numpy.load`` of the file
into memory (no map) and the row's ``tobytes()``; for several columns, each field's bytes at the
offset its aligned structured dtype gives, the padding zero. A file format's form writes its
files itself and gives each record's bytes as it wrote them.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from coded_shuffle.records import (
    ArrowRecords,
    FileRecords,
    MDSRecords,
    NpyRecords,
    RecordSource,
    SpanRecords,
    TokenWindows,
    WebDatasetRecords,
    open_records,
)
from tests.records.writers import write_mds, write_tar

N = 23


def _one_file(tmp_path, rng):
    x = rng.integers(0, 2**16, (N, 3, 2), dtype=np.uint16)
    np.save(tmp_path / "x.npy", x)
    return NpyRecords(tmp_path / "x.npy"), [x]


def _in_memory(tmp_path, rng):
    x = rng.standard_normal((N, 5)).astype(">f4")  # big-endian: the bytes as they lie
    return NpyRecords(x), [x]


def _columns(tmp_path, rng):
    x = rng.standard_normal((N, 3))
    y = rng.integers(0, 100, N, dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return NpyRecords([str(tmp_path / "x.npy"), tmp_path / "y.npy"]), [x, y]


def _mapping(tmp_path, rng):
    a = rng.integers(0, 2**31, N, dtype=np.int32).astype(">i4")
    b = rng.integers(0, 256, (N, 7), dtype=np.uint8)
    return NpyRecords({"a": a, "b": b}), [a, b]


def _token_windows(tmp_path, rng):
    tokens = rng.integers(0, 2**16, N * 5 + 3, dtype=np.uint16)  # 3 tokens past the last window
    tokens.tofile(tmp_path / "train.bin")
    src = TokenWindows(tmp_path / "train.bin", block_size=5)
    return src, [tokens[i * 5 : i * 5 + 5].tobytes() for i in range(N)]


def _token_windows_u32(tmp_path, rng):
    tokens = rng.integers(0, 2**32, N * 3, dtype=np.uint32)
    (tmp_path / "t.bin").write_bytes(b"HEAD" * 4 + tokens.astype("<u4").tobytes())
    src = TokenWindows(tmp_path / "t.bin", block_size=3, dtype="uint32", offset=16)
    return src, [tokens[i * 3 : i * 3 + 3].astype("<u4").tobytes() for i in range(N)]


def _spans(tmp_path, rng):
    bufs = [rng.integers(0, 256, 300, dtype=np.uint8), rng.integers(0, 256, 200, dtype=np.uint8)]
    where = rng.integers(0, 2, N)
    sizes = rng.integers(1, 9, N)
    starts = rng.integers(0, 190, N)  # spans may overlap: an index over buffers, not a layout
    src = SpanRecords(bufs, starts=starts, sizes=sizes, where=where)
    return src, [bufs[w][s : s + n].tobytes() for w, s, n in zip(where, starts, sizes, strict=True)]


def _files(tmp_path, rng, *, map=False):
    blobs = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 40, N)]
    (tmp_path / "d" / "sub").mkdir(parents=True)
    names = [f"{i:03d}.bin" if i < 20 else f"sub/{i:03d}.bin" for i in range(N)]  # sub/ sorts last
    for name, blob in zip(names, blobs, strict=True):
        (tmp_path / "d" / name).write_bytes(blob)
    (tmp_path / "d" / ".hidden").write_bytes(b"left out")
    return FileRecords(tmp_path / "d", map=map), blobs


def _files_mapped(tmp_path, rng):
    return _files(tmp_path, rng, map=True)


def _files_one_size(tmp_path, rng):
    blobs = [rng.integers(0, 256, 6, dtype=np.uint8).tobytes() for _ in range(N)]
    paths = [tmp_path / f"f{N - i}" for i in range(N)]  # in the order given, not sorted
    for p, blob in zip(paths, blobs, strict=True):
        p.write_bytes(blob)
    return FileRecords(paths), blobs


MDS_COLUMNS = {"id": "int", "text": "str", "label": "uint8", "tokens": "ndarray:uint16"}


def _mds_samples(rng):
    return [
        {"id": i, "text": "x" * int(rng.integers(0, 9)), "label": i % 7,
         "tokens": rng.integers(0, 2**16, int(rng.integers(1, 6)), dtype=np.uint16)}
        for i in range(N)
    ]  # fmt: skip


def _mds(tmp_path, rng):
    made = write_mds(tmp_path / "mds", MDS_COLUMNS, _mds_samples(rng), per_shard=10)
    return MDSRecords(tmp_path / "mds"), made


def _mds_fixed(tmp_path, rng):
    columns = {"x": "ndarray:float32:3", "y": "int16"}
    samples = [{"x": rng.standard_normal(3).astype(np.float32), "y": i} for i in range(N)]
    made = write_mds(tmp_path / "mds", columns, samples, per_shard=N)  # one shard: the table is its map
    return MDSRecords(tmp_path / "mds" / "index.json"), made


def _mds_gz(tmp_path, rng):
    made = write_mds(tmp_path / "mds", MDS_COLUMNS, _mds_samples(rng), per_shard=7, compression="gz")
    return MDSRecords(tmp_path / "mds", cache_dir=tmp_path / "cache"), made


def _wds_members(rng, shard):
    out = []
    for i in range(shard * 12, min(N, shard * 12 + 12)):
        key = f"s{shard}/{i:04d}" if i % 5 else f"s{shard}/" + "long" * 30 + f"{i:04d}"  # past 100 chars
        out.append((f"{key}.bin", rng.integers(0, 256, int(rng.integers(1, 700)), dtype=np.uint8).tobytes()))
        out.append((f"{key}.cls", str(i % 10).encode()))
    return out


def _wds_member(tmp_path, rng):
    expect = []
    for shard in range(2):
        members = _wds_members(rng, shard)
        write_tar(tmp_path / f"shard-{shard}.tar", members)
        expect += [data for name, data in members if name.endswith(".bin")]
    return WebDatasetRecords(tmp_path, member="bin"), expect


def _wds_whole(tmp_path, rng):
    expect = []
    paths = []
    for shard in range(2):
        members = _wds_members(rng, shard)
        paths.append(tmp_path / f"shard-{shard}.tar")
        spans = write_tar(paths[-1], members)
        expect += [spans[j] + spans[j + 1] for j in range(0, len(spans), 2)]  # a sample: its two members
    return WebDatasetRecords(paths), expect


def _arrow_table(rng, n, kind):
    pa = pytest.importorskip("pyarrow", reason="Arrow files need pyarrow (the arrow extra)")
    if kind == "tokens":
        docs = [rng.integers(0, 2**31, int(rng.integers(1, 30)), dtype=np.int32) for _ in range(n)]
        col = pa.array([d.tolist() for d in docs], pa.list_(pa.int32()))
        expect = [d.astype("<i4").tobytes() for d in docs]
    elif kind == "text":
        texts = ["é" * int(rng.integers(1, 9)) + str(i) for i in range(n)]
        col, expect = pa.array(texts, pa.large_string()), [t.encode() for t in texts]
    else:
        x = rng.standard_normal(n * 3)
        col = pa.FixedSizeListArray.from_arrays(pa.array(x), 3)
        expect = [x[3 * i : 3 * i + 3].tobytes() for i in range(n)]
    return pa.table({"x": col, "id": pa.array(np.arange(n))}), expect


def _arrow(tmp_path, rng, kind="tokens"):
    pa = pytest.importorskip("pyarrow", reason="Arrow files need pyarrow (the arrow extra)")
    expect = []
    for k, n in enumerate((9, 14)):  # two files, the second written in two record batches
        table, made = _arrow_table(rng, n, kind)
        with pa.ipc.new_stream(str(tmp_path / f"data-{k:05d}-of-00002.arrow"), table.schema) as w:
            for batch in table.to_batches(max_chunksize=8):
                w.write_batch(batch)
        expect += made
    return ArrowRecords(tmp_path, column="x"), expect


def _arrow_text(tmp_path, rng):
    return _arrow(tmp_path, rng, "text")


def _arrow_fixed(tmp_path, rng):
    pa = pytest.importorskip("pyarrow", reason="Arrow files need pyarrow (the arrow extra)")
    table, expect = _arrow_table(rng, N + 4, "fixed")
    with pa.ipc.new_file(str(tmp_path / "x.arrow"), table.schema) as w:  # the IPC file format
        w.write_table(table.slice(4))  # a slice of a table
    return ArrowRecords([tmp_path / "x.arrow"], column="x"), expect[4:]


#: Every implementation of the interface, in each of its forms.
SOURCES = [
    pytest.param(_one_file, id="npy-file"),
    pytest.param(_in_memory, id="npy-array"),
    pytest.param(_columns, id="npy-column-files"),
    pytest.param(_mapping, id="npy-column-arrays"),
    pytest.param(_spans, id="spans"),
    pytest.param(_token_windows, id="token-windows"),
    pytest.param(_files, id="files-read"),
    pytest.param(_files_mapped, id="files-mapped"),
    pytest.param(_files_one_size, id="files-one-size"),
    pytest.param(_mds, id="mds"),
    pytest.param(_mds_fixed, id="mds-fixed"),
    pytest.param(_mds_gz, id="mds-gz"),
    pytest.param(_wds_member, id="webdataset-member"),
    pytest.param(_wds_whole, id="webdataset-sample"),
    pytest.param(_arrow, id="arrow-list-int32"),
    pytest.param(_arrow_text, id="arrow-large-string"),
    pytest.param(_arrow_fixed, id="arrow-fixed-size-list"),
    pytest.param(_token_windows_u32, id="token-windows-u32"),
]


def oracle(arrays: list[np.ndarray], dtype: np.dtype, i: int) -> bytes:
    """Record ``i``'s bytes, from the arrays themselves."""
    if len(arrays) == 1:
        return arrays[0][i].tobytes()
    out = bytearray(dtype.itemsize)
    for name, a in zip(dtype.names, arrays, strict=True):
        off = dtype.fields[name][1]
        raw = a[i].astype(a.dtype.newbyteorder("=")).tobytes()
        out[off : off + len(raw)] = raw
    return bytes(out)


@pytest.fixture(params=SOURCES)
def case(request, tmp_path, rng):
    src, made = request.param(tmp_path, rng)
    if all(isinstance(m, bytes) for m in made):  # the records' bytes, written by the form itself
        expect = made
    else:
        expect = [oracle(made, src.dtype, i) for i in range(N)]
    return src, expect


def test_a_source_is_a_record_source_with_the_declared_signatures(case):
    src, _ = case
    assert isinstance(src, RecordSource) and open_records(src) is src
    for name in ("view", "gather", "table", "__len__"):
        declared = inspect.signature(getattr(RecordSource, name))
        got = inspect.signature(getattr(type(src), name))
        assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
            (p.name, p.kind, p.default) for p in declared.parameters.values()
        ], name
    for name in ("record_bytes", "width", "sizes"):
        assert isinstance(inspect.getattr_static(type(src), name), property), name


def test_sizes_say_each_record_s_bytes(case):
    src, expect = case
    assert len(src) == N
    lengths = [len(e) for e in expect]
    assert src.sizes.dtype == np.int64 and src.sizes.tolist() == lengths and not src.sizes.flags.writeable
    assert src.width == max(lengths)
    assert src.record_bytes == (lengths[0] if len(set(lengths)) == 1 else None)


def test_a_view_is_the_record_read_only(case):
    src, expect = case
    for i in range(N):
        v = src.view(i)
        assert v.dtype == np.uint8 and v.ndim == 1 and v.tobytes() == expect[i]
        assert not v.flags.writeable
    where = [src.table(), *getattr(src, "maps", ())]  # the table, or the maps a padded table is copied from
    assert any(np.shares_memory(src.view(4), m) for m in where)  # a view, not a copy


def test_a_gather_takes_the_records_in_the_order_asked(case, rng):
    src, expect = case
    ids = rng.integers(0, N, 40)  # repeats and any order
    got = src.gather(ids)
    assert got.shape == (40, src.width) and got.dtype == np.uint8 and got.flags.c_contiguous
    for r, i in enumerate(ids.tolist()):
        assert got[r, : len(expect[i])].tobytes() == expect[i] and not got[r, len(expect[i]) :].any()
    out = np.full((40, src.width), 0xFF, dtype=np.uint8)
    assert src.gather(ids, out) is out and np.array_equal(out, got)
    assert not np.shares_memory(got, src.table())
    assert src.gather([]).shape == (0, src.width)
    assert src.gather(ids.tolist()).tobytes() == got.tobytes()


def test_the_table_is_every_record(case):
    src, expect = case
    table = src.table()
    assert table.shape == (N, src.width) and not table.flags.writeable
    assert np.array_equal(table, src.gather(np.arange(N)))
    assert src.table() is table or np.shares_memory(src.table(), table)


def test_record_source_exceptions(case):
    src, _ = case
    with pytest.raises(ValueError, match=r"^Argument 'i' must be less than N = 23, not 23\.$"):
        src.view(N)
    with pytest.raises(ValueError, match=r"^Argument 'i' must be at least 0"):
        src.view(-1)
    with pytest.raises(ValueError, match=r"^Argument 'ids' must name records in \[0, 23\), not \[-1, 2\]\.$"):
        src.gather([2, -1])
    with pytest.raises(ValueError, match=r"^Argument 'ids' must name records in \[0, 23\)"):
        src.gather([N])
    with pytest.raises(ValueError, match=r"^Argument 'out' must be a writable C-contiguous uint8 array"):
        src.gather([0, 1], np.zeros((3, src.width), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"^Argument 'out' must be a writable C-contiguous uint8 array"):
        src.gather([0], np.zeros((1, src.width), dtype=np.uint8)[:, ::-1])
    with pytest.raises(TypeError, match=r"^Argument 'out' must be a numpy array, not list\.$"):
        src.gather([0], [[0] * src.width])
