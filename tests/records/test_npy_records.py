"""The ``.npy`` record source: zero copy over the map, and its refusals of bad files."""

from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from coded_shuffle.records import NpyRecords, fixed_record_bytes, npy_problem


def chain(arr: np.ndarray) -> list[object]:
    """``arr``, its base, its base's base, ... (what the memory of a view belongs to)."""
    out: list[object] = [arr]
    while isinstance(out[-1], np.ndarray) and out[-1].base is not None:
        out.append(out[-1].base)
    return out


def test_a_record_of_a_file_is_a_slice_of_its_map(tmp_path, rng):
    x = rng.integers(0, 256, (50, 8, 4), dtype=np.uint8)
    path = tmp_path / "x.npy"
    np.save(path, x)
    src = NpyRecords(path)
    table, v = src.table(), src.view(17)
    maps = [b for b in chain(table) if isinstance(b, np.memmap)]
    assert maps and os.path.samefile(maps[0].filename, path)  # the table is the file's map
    assert isinstance(chain(table)[-1], mmap.mmap)
    assert np.shares_memory(v, table) and np.shares_memory(v, maps[0])  # the record: no copy
    assert isinstance(chain(v)[-1], mmap.mmap)
    assert v.tobytes() == x[17].tobytes()
    assert not np.shares_memory(src.gather([17]), maps[0])  # a gather copies


def test_an_array_in_memory_is_not_copied(rng):
    x = rng.standard_normal((10, 3))
    src = NpyRecords(x)
    assert np.shares_memory(src.table(), x) and np.shares_memory(src.view(2), x)
    assert x.flags.writeable and not src.view(2).flags.writeable  # read-only views, the array untouched
    f = np.asfortranarray(x)  # not C-contiguous: one copy, of the same bytes a row
    assert NpyRecords(f).view(4).tobytes() == x[4].tobytes()


def test_several_columns_keep_their_values_and_layout(tmp_path, rng):
    x = rng.standard_normal((6, 2)).astype(">f8")  # big-endian: made native
    y = np.arange(6, dtype=np.int16)
    np.save(tmp_path / "y.npy", y)
    src = NpyRecords({"x": x, "y": tmp_path / "y.npy"})
    rows = src.rows()
    assert src.names == ("x", "y") and src.paths == (None, str(tmp_path / "y.npy"))
    assert src.dtype.isalignedstruct and src.record_bytes == src.dtype.itemsize == 24  # 16 + 2, aligned to 8
    assert np.array_equal(rows["x"], x) and rows["y"].tolist() == list(range(6))
    assert not src.table()[:, 18:].any()  # the padding is zero


def bad_files(tmp_path):
    (tmp_path / "text.npy").write_text("not numpy\n")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object))
    np.save(tmp_path / "empty.npy", np.zeros((0, 4), dtype=np.uint8))
    np.save(tmp_path / "zero-width.npy", np.zeros((100, 0), dtype=np.uint8))
    np.save(tmp_path / "short.npy", np.zeros((100, 16), dtype=np.uint8))
    os.truncate(tmp_path / "short.npy", 300)  # a sound header, its rows not all there
    return [
        (tmp_path / "missing.npy", "no such file"),
        (tmp_path, "not a file"),
        (tmp_path / "text.npy", r"not a \.npy file"),
        (tmp_path / "objects.npy", "holds Python objects"),
        (tmp_path / "empty.npy", "holds no records"),
        (tmp_path / "zero-width.npy", "holds records of 0 bytes"),
        (tmp_path / "short.npy", "is cut short: its header promises 1728 bytes, the file holds 300"),
    ]


def test_npy_records_exceptions(tmp_path):
    for path, what in bad_files(tmp_path):
        pattern = rf"^Argument 'source' must name a readable \.npy file of records: .*{what}"
        with pytest.raises(ValueError, match=pattern) as exc:
            NpyRecords(path)
        assert str(path) in str(exc.value) and "pickle" not in str(exc.value)  # names the file
        with pytest.raises(ValueError, match=str(path)):  # in a column, too
            NpyRecords({"x": np.zeros(100), "y": path})
    np.save(tmp_path / "x.npy", np.zeros((4, 2)))
    np.save(tmp_path / "y.npy", np.zeros(5))
    np.save(tmp_path / "s.npy", np.zeros(4, dtype=[("a", "<i4")]))
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold arrays of one length N = 4, "
                                         rf"not 5 rows at 'f1' \({tmp_path / 'y.npy'}\)\.$"):  # fmt: skip
        NpyRecords([tmp_path / "x.npy", tmp_path / "y.npy"])
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold plain arrays when it holds several, "
                                         rf"not .* at 'f1' \({tmp_path / 's.npy'}\)\.$"):  # fmt: skip
        NpyRecords([tmp_path / "x.npy", tmp_path / "s.npy"])
    with pytest.raises(ValueError, match=r"^Argument 'data' must hold at least 1 record, not 0\.$"):
        NpyRecords(np.zeros((0, 3)), name="data")
    with pytest.raises(ValueError, match=r"^Argument 'source' must have at least 1 dimension"):
        NpyRecords(np.array(1.0))
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold plain values, not object values\.$"):
        NpyRecords(np.array([None, 1], dtype=object))
    with pytest.raises(ValueError, match=r"^Argument 'source' must have records of at least 1 byte"):
        NpyRecords(np.zeros((3, 0)))
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold at least one array, not none\.$"):
        NpyRecords([])
    with pytest.raises(TypeError, match=r"^Argument 'source' must be an array, a \.npy path, or a sequence"):
        NpyRecords(3)
    with pytest.raises(
        TypeError, match=r"^Argument 'source' must hold arrays or \.npy paths, not int at 'x'"
    ):
        NpyRecords({"x": 3})


def test_npy_problem_reads_the_header_and_the_size_only(tmp_path):
    for path, what in bad_files(tmp_path):
        assert what.replace("\\", "") in npy_problem(path) and str(path) in npy_problem(path)
    np.save(tmp_path / "whole.npy", np.zeros((100, 16), dtype=np.uint8))
    assert npy_problem(tmp_path / "whole.npy") is None


class _Sizes:
    """A stand-in source of records of two sizes (only what ``fixed_record_bytes`` reads)."""

    record_bytes = None
    sizes = np.array([3, 9, 5])


def test_a_fixed_width_is_asked_of_the_source():
    assert fixed_record_bytes(NpyRecords(np.zeros((2, 3), np.int32))) == 12
    with pytest.raises(ValueError, match=r"^Argument 'data' must hold records of one size here, "
                                         r"not sizes from 3 to 9 bytes\.$"):  # fmt: skip
        fixed_record_bytes(_Sizes(), "data")  # type: ignore[arg-type]
