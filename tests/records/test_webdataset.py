"""WebDataset tars: a sample (or one member) as a slice of the tar's map, readable by tarfile; refusals."""

from __future__ import annotations

import gzip
import io
import os
import tarfile

import numpy as np
import pytest

from coded_shuffle.records import WebDatasetRecords
from tests.records.writers import write_tar


def test_a_record_is_a_slice_of_the_tar_s_map(tmp_path, rng):
    members = []
    for i in range(6):
        jpg = rng.integers(0, 256, 100 + i, dtype=np.uint8).tobytes()
        members += [
            (f"{i:03d}.jpg", jpg),
            (f"{i:03d}.json", b'{"label": %d}' % i),
            (f"{i:03d}.seg.png", bytes([i]) * 3),
        ]
    write_tar(tmp_path / "a.tar", members)
    jpg = WebDatasetRecords(tmp_path / "a.tar", member="jpg")
    m = jpg.maps[0]
    assert isinstance(m, np.memmap) and os.path.samefile(m.filename, tmp_path / "a.tar")
    assert jpg.keys == tuple(f"{i:03d}" for i in range(6))
    for i in range(6):
        assert np.shares_memory(jpg.view(i), m) and jpg.view(i).tobytes() == members[3 * i][1]
        sample = jpg.sample(i)
        assert list(sample) == ["jpg", "json", "seg.png"]
        assert [v.tobytes() for v in sample.values()] == [d for _, d in members[3 * i : 3 * i + 3]]
        assert all(np.shares_memory(v, m) and not v.flags.writeable for v in sample.values())
    whole = WebDatasetRecords(tmp_path / "a.tar")
    for i in (0, 5):
        assert np.shares_memory(whole.view(i), whole.maps[0])
        with tarfile.open(
            fileobj=io.BytesIO(whole.view(i).tobytes())
        ) as t:  # a record is a tar of its sample
            assert [(x.name, t.extractfile(x).read()) for x in t.getmembers()] == members[3 * i : 3 * i + 3]


def test_webdataset_records_exceptions(tmp_path):
    ok = [("a.jpg", b"1"), ("a.cls", b"2"), ("b.jpg", b"3")]
    write_tar(tmp_path / "ok.tar", ok)
    (tmp_path / "text.tar").write_text("not a tar\n" * 100)
    (tmp_path / "ok.tar.gz").write_bytes(gzip.compress((tmp_path / "ok.tar").read_bytes()))
    raw = (tmp_path / "ok.tar").read_bytes()
    (tmp_path / "short.tar").write_bytes(raw[: 512 * 2 + 100])  # cut inside the second member's header
    (tmp_path / "noend.tar").write_bytes(raw[: 512 * 6])  # every member whole, no end-of-archive block
    (tmp_path / "shorter.tar").write_bytes(raw[: 512 * 5])  # cut before the last member's data
    write_tar(tmp_path / "twice.tar", [("a.jpg", b"1"), ("b.jpg", b"2"), ("a.cls", b"3")])
    write_tar(tmp_path / "empty.tar", [("a.jpg", b""), ("a.cls", b"2")])
    write_tar(tmp_path / "none.tar", [("README", b"no dot, no sample")])
    (tmp_path / "notars").mkdir()
    cases = [
        (tmp_path / "text.tar", {}, r"must name uncompressed \.tar shards: .*text\.tar is not one"),
        (tmp_path / "ok.tar.gz", {}, r"must name uncompressed \.tar shards: .*ok\.tar\.gz is not one"),
        (tmp_path / "short.tar", {}, r"must name whole \.tar shards: .*short\.tar is cut short"),
        (tmp_path / "shorter.tar", {}, r"whole \.tar shards: .*shorter\.tar is cut short"),
        (
            tmp_path / "noend.tar",
            {},
            r"whole \.tar shards: .*noend\.tar is cut short after byte 3072 \(no end-of",
        ),
        (tmp_path / "twice.tar", {}, r"members together: key 'a' appears in two places in .*twice\.tar$"),
        (
            tmp_path / "ok.tar",
            {"member": "cls"},
            r"a 'cls' member in every sample: sample 'b' of .*ok\.tar has \['jpg'\]$",
        ),
        (
            tmp_path / "empty.tar",
            {"member": "jpg"},
            r"records of at least 1 byte: a\.jpg in .*empty\.tar is empty$",
        ),
        (tmp_path / "none.tar", {}, r"\.tar shards of samples: .*none\.tar holds none$"),
        (tmp_path / "nope.tar", {}, r"must name \.tar shards: no such file: .*nope\.tar$"),
        (tmp_path / "notars", {}, r"must name \.tar shards: .*notars holds none$"),
        ([], {}, r"must list at least 1 \.tar shard, not 0\.$"),
    ]
    for path, kw, message in cases:
        with pytest.raises(
            ValueError, match=r"^Argument 'paths' must (.* )?" + message.removeprefix("must ")
        ):
            WebDatasetRecords(path, **kw)
    with pytest.raises(TypeError, match=r"^Argument 'member' must be a str or None, not int\.$"):
        WebDatasetRecords(tmp_path / "ok.tar", member=1)  # type: ignore[arg-type]
