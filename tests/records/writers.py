"""Writers of test datasets in the file formats, each from the format's documented layout.

Written independently of the readers under test. MDS: the layout of MosaicML Streaming's MDS
writer, version 2 (github.com/mosaicml/streaming, ``streaming/base/format/mds/writer.py``:
``MDSWriter.encode_sample`` and ``encode_joint_shard``; ``streaming/base/format/base/writer.py``:
``get_config``, ``flush_shard``, ``_write_index``; ``streaming/base/format/mds/encodings.py``: the
encodings and ``NDArray``'s header). A shard is ``uint32 n``, ``uint32 offsets[n + 1]`` counted
from the start of the file, the writer's settings as JSON text, then the samples; a sample is a
``uint32`` size per variable column, then the columns' bytes, columns sorted by name.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

# Streaming's fixed sizes of the fixed-size encodings (encodings.py: ``Int.size``, ``Scalar.size``).
FIXED = {"int": 8, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "int8": 1, "int16": 2, "int32": 4,
         "int64": 8, "float16": 2, "float32": 4, "float64": 8}  # fmt: skip
# NDArray's codes of a value dtype and of a shape dtype (encodings.py: ``_int2value_dtype`` and
# ``_int2shape_dtype``).
VALUE_CODE = {"uint8": 8, "int8": 9, "uint16": 16, "int16": 17, "float16": 18, "uint32": 32, "int32": 33,
              "float32": 34, "uint64": 64, "int64": 65, "float64": 66}  # fmt: skip
SHAPE_CODE = {"uint8": 0, "uint16": 1, "uint32": 2, "uint64": 3}


def mds_size(encoding: str) -> int | None:
    """The fixed size of a column of ``encoding``, or None for a variable one."""
    if encoding in FIXED:
        return FIXED[encoding]
    parts = encoding.split(":")
    if parts[0] == "ndarray" and len(parts) == 3:
        return int(np.prod([int(x) for x in parts[2].split(",")])) * np.dtype(parts[1]).itemsize
    return None


def mds_encode(encoding: str, value: Any) -> bytes:
    """``value`` as a column of ``encoding``."""
    name, *parts = encoding.split(":")
    if name == "bytes":
        return bytes(value)
    if name in ("str", "str_int"):  # str_int: the decimal digits (encodings.py: ``StrInt``)
        return str(value).encode("utf-8")
    if name == "int":
        return np.int64(value).tobytes()
    if name in FIXED:
        return np.array(value, dtype=np.dtype(name).newbyteorder("<")).tobytes()
    if name == "json":
        return json.dumps(value, sort_keys=True).encode("utf-8")
    if name == "ndarray":
        head = b""
        if not parts or not parts[0]:
            head += bytes([VALUE_CODE[value.dtype.name]])
        if len(parts) < 2:
            shape = np.array(value.shape, dtype=np.int64)
            sdt = next(
                d for d, lim in (("uint8", 8), ("uint16", 16), ("uint32", 32)) if shape.max() < 1 << lim
            )
            head += bytes([len(value.shape) << 2 | SHAPE_CODE[sdt]]) + shape.astype(sdt).tobytes()
        return head + value.astype(value.dtype.newbyteorder("<")).tobytes()
    raise ValueError(encoding)


def mds_sample(columns: dict[str, str], sample: dict[str, Any]) -> bytes:
    """One sample's bytes: the sizes of its variable columns, then every column, sorted by name."""
    sizes, data = [], []
    for name in sorted(columns):
        datum = mds_encode(columns[name], sample[name])
        if mds_size(columns[name]) is None:
            sizes.append(len(datum))
        else:
            assert len(datum) == mds_size(columns[name])
        data.append(datum)
    return np.array(sizes, dtype="<u4").tobytes() + b"".join(data)


def write_mds(
    out: str | os.PathLike[str],
    columns: dict[str, str],
    samples: list[dict[str, Any]],
    *,
    per_shard: int = 10,
    compression: str | None = None,
) -> list[bytes]:
    """Write ``samples`` as an MDS dataset in ``out`` (``per_shard`` samples a shard); return each
    sample's bytes. ``compression`` (``"gz"``, ``"bz2"``, ``"zstd"``) writes only the compressed shards."""
    os.makedirs(out, exist_ok=True)
    names = sorted(columns)
    config = {"version": 2, "format": "mds", "compression": compression, "hashes": [], "size_limit": None,
              "column_names": names, "column_encodings": [columns[k] for k in names],
              "column_sizes": [mds_size(columns[k]) for k in names]}  # fmt: skip
    text = json.dumps(config, sort_keys=True).encode("utf-8")
    encoded = [mds_sample(columns, s) for s in samples]
    shards = []
    for k, lo in enumerate(range(0, len(encoded), per_shard)):
        part = encoded[lo : lo + per_shard]
        offsets = np.cumsum([0] + [len(s) for s in part]) + 4 + 4 * (len(part) + 1) + len(text)
        raw = np.uint32(len(part)).tobytes() + offsets.astype("<u4").tobytes() + text + b"".join(part)
        raw_name = f"shard.{k:05}.mds"
        zip_info = None
        if compression is None:
            with open(os.path.join(out, raw_name), "wb") as f:
                f.write(raw)
        else:
            family = compression.split(":")[0]
            if family == "gz":
                import gzip

                blob = gzip.compress(raw)
            elif family == "bz2":
                import bz2

                blob = bz2.compress(raw)
            else:
                import zstandard

                blob = zstandard.ZstdCompressor().compress(raw)
            zip_name = f"{raw_name}.{family}"
            with open(os.path.join(out, zip_name), "wb") as f:
                f.write(blob)
            zip_info = {"basename": zip_name, "bytes": len(blob), "hashes": {}}
        raw_info = {"basename": raw_name, "bytes": len(raw), "hashes": {}}
        shards.append({"samples": len(part), "raw_data": raw_info, "zip_data": zip_info, **config})
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump({"version": 2, "shards": shards}, f, sort_keys=True)
    return encoded


def write_tar(path: str | os.PathLike[str], members: list[tuple[str, bytes]], *, fmt: int = 2) -> list[bytes]:
    """Write ``members`` (name, data) to the tar ``path`` with :mod:`tarfile`; return the bytes each
    member takes in it (its headers, data and padding), as a tar written of it alone holds them."""
    import io
    import tarfile

    spans = []
    with tarfile.open(path, "w", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            tar.addfile(info, io.BytesIO(data))
            alone = io.BytesIO()
            with tarfile.open(fileobj=alone, mode="w", format=fmt) as one:
                one.addfile(info, io.BytesIO(data))
                end = one.offset  # before the end-of-archive blocks
            spans.append(alone.getvalue()[:end])
    return spans
