"""Files as records: one buffer read once, or a map a file; and the refusals of bad listings."""

from __future__ import annotations

import os

import numpy as np
import pytest

from coded_shuffle.records import FileRecords


def test_files_read_once_into_one_buffer_or_mapped_one_by_one(tmp_path, rng):
    blobs = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(1, 100, 12)]
    paths = [tmp_path / f"{i}.jpg" for i in range(12)]
    for p, b in zip(paths, blobs, strict=True):
        p.write_bytes(b)
    read = FileRecords(paths)
    assert len(read.maps) == 1 and read.maps[0].nbytes == sum(map(len, blobs))  # one buffer, no padding
    assert all(np.shares_memory(read.view(i), read.maps[0]) for i in range(12))
    assert read.paths == tuple(map(os.fspath, paths))
    mapped = FileRecords(paths, map=True)
    for i in range(12):
        m = mapped.maps[i]
        assert isinstance(m, np.memmap) and os.path.samefile(m.filename, paths[i])
        assert np.shares_memory(mapped.view(i), m) and mapped.view(i).tobytes() == blobs[i]


def test_files_of_one_size_make_a_table_without_a_copy(tmp_path):
    for i in range(5):
        (tmp_path / f"{i}").write_bytes(bytes([i]) * 4)
    src = FileRecords(tmp_path)
    assert src.record_bytes == 4 and np.shares_memory(src.table(), src.maps[0])
    assert src.table()[:, 0].tolist() == [0, 1, 2, 3, 4]


def test_file_records_exceptions(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "empty").mkdir()
    (tmp_path / "d" / "a").write_bytes(b"abc")
    (tmp_path / "d" / "z").write_bytes(b"")
    with pytest.raises(ValueError, match=r"^Argument 'source' .* at least 1 byte: .*z is empty$"):
        FileRecords(tmp_path / "d")
    with pytest.raises(ValueError, match=r"^Argument 'source' must hold at least 1 file, not 0: .*empty$"):
        FileRecords(tmp_path / "empty")
    with pytest.raises(ValueError, match=r"^Argument 'source' must name a directory .*: no such directory: "):
        FileRecords(tmp_path / "nope")
    with pytest.raises(ValueError, match=r"^Argument 'source' must list readable files: .*missing: "):
        FileRecords([tmp_path / "d" / "a", tmp_path / "missing"])
    with pytest.raises(ValueError, match=r"^Argument 'source' must list regular files, not .*d$"):
        FileRecords([tmp_path / "d"])
    with pytest.raises(ValueError, match=r"^Argument 'source' must list at least 1 file, not 0\.$"):
        FileRecords([])
    with pytest.raises(TypeError, match=r"^Argument 'source' must list paths, not int\.$"):
        FileRecords([3])
    with pytest.raises(TypeError, match=r"^Argument 'map' must be a bool, not str\.$"):
        FileRecords([tmp_path / "d" / "a"], map="yes")  # type: ignore[arg-type]
