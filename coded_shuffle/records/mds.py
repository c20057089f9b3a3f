"""MosaicML MDS shards (``index.json`` and its ``shard.NNNNN.mds`` files): one record a sample.

The layout, as MosaicML Streaming's MDS writer lays it out (``streaming/base/format/mds/writer.py``
and ``encodings.py`` in github.com/mosaicml/streaming, version 2 of the index):

``index.json``
    ``{"version": 2, "shards": [...]}``; a shard's entry gives ``samples``, ``format`` (``"mds"``),
    ``column_names`` (sorted), ``column_encodings``, ``column_sizes`` (bytes of a fixed-size
    column, ``null`` for a variable one), ``compression`` (``null``, or ``"zstd"``, ``"gz:9"``...),
    ``raw_data`` (``basename``, ``bytes``, ``hashes`` of the shard as written) and ``zip_data``
    (the same of its compressed file, or ``null``).
a shard
    ``uint32 n``, ``uint32 offsets[n + 1]`` (from the start of the file), the writer's settings as
    JSON text, then the samples: sample ``j`` is bytes ``[offsets[j], offsets[j + 1])``.
a sample
    a ``uint32`` size for each variable-size column, in column order, then each column's bytes in
    column order. Every integer is little-endian.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from .spans import SpanRecords, map_file

__all__ = ["MDSRecords"]

# The numeric encodings: name -> numpy dtype (little-endian).
_SCALARS = {
    name: np.dtype(name).newbyteorder("<")
    for name in ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16",
                 "float32", "float64")
}  # fmt: skip
# The ``ndarray`` encoding's codes: of a value dtype, and of the dtype of its shape.
_NDARRAY_DTYPES = {8: "uint8", 9: "int8", 16: "uint16", 17: "int16", 18: "float16", 32: "uint32", 33: "int32",
                   34: "float32", 64: "uint64", 65: "int64", 66: "float64"}  # fmt: skip
_SHAPE_DTYPES = {0: "uint8", 1: "uint16", 2: "uint32", 3: "uint64"}


def _ndarray(encoding: str, data: np.ndarray) -> np.ndarray:
    """The ``ndarray[:dtype[:shape]]`` column ``data``, decoded: a read-only view of its bytes."""
    parts = encoding.split(":")[1:]
    at = 0
    if parts and parts[0]:
        dtype = np.dtype(parts[0]).newbyteorder("<")
    else:
        dtype = np.dtype(_NDARRAY_DTYPES[int(data[0])]).newbyteorder("<")
        at = 1
    if len(parts) > 1:
        shape = tuple(int(x) for x in parts[1].split(","))
    else:
        code = int(data[at])
        ndim, sdt = code >> 2, np.dtype(_SHAPE_DTYPES[code & 3]).newbyteorder("<")
        shape = tuple(int(x) for x in data[at + 1 : at + 1 + ndim * sdt.itemsize].view(sdt))
        at += 1 + ndim * sdt.itemsize
    return data[at:].view(dtype).reshape(shape)


def decode_column(encoding: str, data: np.ndarray) -> Any:
    """One column's bytes ``data`` (``uint8``) as the value its MDS ``encoding`` names.

    ``bytes`` gives ``bytes``; ``str`` a ``str``; ``int`` and the numeric scalars (``uint8`` ...
    ``float64``) a Python number; ``str_int``, ``str_float``, ``str_decimal`` a number; ``json``
    the parsed value; ``ndarray`` (with or without a dtype and shape) a read-only numpy array over
    the record's bytes (no copy). Other encodings (images, pickles, lists) give their raw bytes, as
    a read-only ``uint8`` view, for the caller to decode with the library that wrote them.

    Examples
    --------
    >>> import numpy as np
    >>> decode_column("int32", np.array([7, 0, 0, 0], dtype=np.uint8))
    7
    >>> decode_column("ndarray:uint16:2", np.array([1, 0, 2, 0], dtype=np.uint8)).tolist()
    [1, 2]
    """
    name = encoding.split(":")[0]
    if name == "bytes":
        return data.tobytes()
    if name == "str":
        return data.tobytes().decode("utf-8")
    if name == "int":
        return int(data.view("<i8")[0])
    if name in _SCALARS:
        return data.view(_SCALARS[name])[0].item()
    if name == "str_int":
        return int(data.tobytes().decode("utf-8"))
    if name == "str_float":
        return float(data.tobytes().decode("utf-8"))
    if name == "str_decimal":
        return Decimal(data.tobytes().decode("utf-8"))
    if name == "json":
        return json.loads(data.tobytes().decode("utf-8"))
    if name == "ndarray":
        return _ndarray(encoding, data)
    return data


def _decompress(family: str, blob: bytes, path: str) -> bytes:
    """``blob``, the shard ``path`` compressed with ``family``, decompressed."""
    if family == "gz":
        import gzip

        return gzip.decompress(blob)
    if family == "bz2":
        import bz2

        return bz2.decompress(blob)
    package = {"zstd": "zstandard", "br": "brotli", "snappy": "python-snappy"}.get(family)
    if package is None:
        raise ValueError(
            f"Argument 'path' must name MDS shards of a known compression, not {family!r}: {path}"
        )
    try:
        if family == "zstd":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(blob)
        if family == "br":
            import brotli

            return brotli.decompress(blob)
        import snappy

        return snappy.decompress(blob)
    except ImportError:
        raise ImportError(
            f"{path} is compressed with {family}: decompressing it needs the {package} package "
            f"(pip install {package})"
        ) from None


class MDSRecords(SpanRecords):
    """The samples of MosaicML MDS shards, one record a sample: its bytes as the shard holds them.

    Record ``i`` is sample ``i`` in shard order, all its columns as the writer laid them out (the
    sizes of its variable columns, then the columns' bytes): a slice of its shard's memory map, no
    copy. With fixed-size columns only every record has one size; one shard's records then lie end
    to end and the table is the map itself. :meth:`columns` decodes a record's columns (the common
    encodings; others as raw bytes). Shards are checked against the index when opened: a shard
    cut short, one whose count, size or offsets disagree with the index, or columns that differ
    between shards are refused, naming the file.

    Compressed shards (``zip_data`` in the index) are decompressed once, each into the cache
    directory under its raw name (the dataset's own directory unless ``cache_dir`` is given, as
    Streaming itself leaves them), and mapped from there; a later open finds them there and
    decompresses nothing. ``gz`` and ``bz2`` need only Python; ``zstd`` the ``zstandard``
    package (the ``mds`` extra), ``br`` ``brotli``, ``snappy`` ``python-snappy``. The index's
    hashes are not checked.

    Parameters
    ----------
    path : str or os.PathLike
        The dataset's directory (holding ``index.json``), or its ``index.json``.
    cache_dir : str or os.PathLike, optional
        Where to decompress compressed shards.

    Attributes
    ----------
    directory : str
        The dataset's directory.
    column_names, column_encodings : tuple of str
    column_sizes : tuple of int or None
        Each column's fixed size in bytes, or None for a variable-size column.
    shards : tuple of str
        The path of each shard as mapped (decompressed shards: in the cache directory).
    samples : tuple of int
        Samples of each shard.

    Raises
    ------
    ValueError
        Naming the file: no index or not an MDS index, a shard missing, not MDS, cut short, or
        disagreeing with the index, columns that differ between shards, no samples, an empty sample.

    Examples
    --------
    >>> import json, os, tempfile
    >>> import numpy as np
    >>> d = tempfile.mkdtemp()
    >>> samples = [np.uint32(4).tobytes() + np.int64(1).tobytes() + b"abcd",   # sizes, id, text
    ...            np.uint32(2).tobytes() + np.int64(2).tobytes() + b"xy"]
    >>> offsets = 4 + 4 * 3 + np.cumsum([0, 16, 14])
    >>> shard = np.uint32(2).tobytes() + offsets.astype(np.uint32).tobytes() + b"".join(samples)
    >>> _ = open(os.path.join(d, "shard.00000.mds"), "wb").write(shard)
    >>> entry = {"format": "mds", "samples": 2, "column_names": ["id", "text"],
    ...          "column_encodings": ["int", "bytes"], "column_sizes": [8, None], "compression": None,
    ...          "raw_data": {"basename": "shard.00000.mds", "bytes": len(shard)}, "zip_data": None}
    >>> json.dump({"version": 2, "shards": [entry]}, open(os.path.join(d, "index.json"), "w"))
    >>> src = MDSRecords(d)
    >>> len(src), src.sizes.tolist(), src.columns(1)
    (2, [16, 14], {'id': 2, 'text': b'xy'})
    """

    def __init__(
        self, path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"Argument 'path' must be a str or os.PathLike, not {type(path).__name__}.")
        p = os.fspath(path)
        index = os.path.join(p, "index.json") if os.path.isdir(p) else p
        directory = os.path.dirname(index)
        cache = directory if cache_dir is None else os.fspath(cache_dir)
        shards = _read_index(index)
        columns = None
        maps, starts, sizes, where, names, counts = [], [], [], [], [], []
        for k, entry in enumerate(shards):
            try:
                fmt = entry["format"]
                cols = (tuple(entry["column_names"]), tuple(entry["column_encodings"]),
                        tuple(None if s is None else int(s) for s in entry["column_sizes"]))  # fmt: skip
                raw = entry["raw_data"]
                zipped = entry.get("zip_data")
                n_index = int(entry["samples"])
                raw_name, raw_bytes = str(raw["basename"]), int(raw["bytes"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(
                    f"Argument 'path' must name an MDS dataset: shard {k} of {index} lacks "
                    "format, samples, columns or raw_data"
                ) from None
            if fmt != "mds":
                raise ValueError(f"Argument 'path' must name MDS shards: shard {k} of {index} is {fmt!r}")
            if columns is None:
                columns = cols
            elif cols != columns:
                got, first = list(zip(*cols, strict=True)), list(zip(*columns, strict=True))
                raise ValueError(
                    f"Argument 'path' must name shards of one set of columns: {raw_name} has {got}, "
                    f"the first shard {first} ({index})"
                )
            shard = os.path.join(directory, raw_name)
            if not os.path.exists(shard) and zipped:
                shard = self._decompressed(entry, directory, cache, raw_name, raw_bytes)
            if not os.path.isfile(shard):
                raise ValueError(f"Argument 'path' must name an MDS dataset whose shards exist: no {shard}")
            m = map_file(shard)
            st, sz = self._index_shard(m, shard, n_index, raw_bytes, cols[2])
            maps.append(m)
            starts.append(st)
            sizes.append(sz)
            where.append(np.full(st.shape[0], k, dtype=np.int32))
            names.append(shard)
            counts.append(int(st.shape[0]))
        assert columns is not None
        if sum(counts) == 0:
            raise ValueError(
                f"Argument 'path' must name an MDS dataset of at least 1 sample: {index} holds 0"
            )
        self._init_spans(maps, np.concatenate(starts), np.concatenate(sizes), np.concatenate(where), "path")
        self.directory = directory
        self.column_names, self.column_encodings, self.column_sizes = columns
        self.shards = tuple(names)
        self.samples = tuple(counts)

    @staticmethod
    def _decompressed(entry: dict, directory: str, cache: str, raw_name: str, raw_bytes: int) -> str:
        """The shard of ``entry`` decompressed into ``cache`` (once: a later call finds it there)."""
        target = os.path.join(cache, raw_name)
        if os.path.isfile(target) and os.path.getsize(target) == raw_bytes:
            return target
        zname = str(entry["zip_data"]["basename"])
        zpath = os.path.join(directory, zname)
        family = str(entry.get("compression") or zname.rsplit(".", 1)[-1]).split(":")[0]
        try:
            with open(zpath, "rb") as f:
                blob = f.read()
        except OSError as exc:
            raise ValueError(
                f"Argument 'path' must name an MDS dataset whose shards exist: {zpath}: {exc.strerror}"
            ) from None
        try:
            data = _decompress(family, blob, zpath)
        except (OSError, EOFError, ValueError) as exc:
            if isinstance(exc, ValueError) and str(exc).startswith("Argument"):
                raise
            raise ValueError(
                f"Argument 'path' must name readable MDS shards: {zpath} is not valid {family} data"
            ) from None
        except Exception as exc:  # the optional decompressors' own errors (zstandard.ZstdError ...)
            raise ValueError(f"Argument 'path' must name readable MDS shards: {zpath}: {exc}") from None
        if len(data) != raw_bytes:
            raise ValueError(
                f"Argument 'path' must name shards that agree with the index: {zpath} holds "
                f"{len(data)} bytes decompressed, the index says {raw_bytes}"
            )
        os.makedirs(cache, exist_ok=True)
        tmp = f"{target}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, target)
        return target

    @staticmethod
    def _index_shard(
        m: np.ndarray, shard: str, n_index: int, raw_bytes: int, column_sizes: tuple[int | None, ...]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each sample's start and size in the shard map ``m``, checked against the index."""
        size = int(m.shape[0])
        if size != raw_bytes:
            what = "cut short" if size < raw_bytes else "longer than the index says"
            raise ValueError(
                f"Argument 'path' must name shards that agree with the index: {shard} is {what}: "
                f"{size} bytes, the index says {raw_bytes}"
            )
        if size < 8:
            raise ValueError(f"Argument 'path' must name MDS shards: {shard} holds {size} bytes, no header")
        n = int(m[:4].view("<u4")[0])
        if n != n_index:
            raise ValueError(
                f"Argument 'path' must name shards that agree with the index: {shard} holds {n} "
                f"samples, the index says {n_index}"
            )
        head = 4 + 4 * (n + 1)
        if size < head:
            raise ValueError(f"Argument 'path' must name MDS shards: {shard} is cut short in its offsets")
        offsets = m[4:head].view("<u4").astype(np.int64)
        sizes = np.diff(offsets)
        if int(offsets[0]) < head or (sizes < 0).any() or int(offsets[-1]) != size:
            raise ValueError(
                f"Argument 'path' must name MDS shards: {shard}'s offsets run from {int(offsets[0])} to "
                f"{int(offsets[-1])}, not from past its header ({head}) to its end ({size}), in order"
            )
        if n and int(sizes.min()) < 1:
            j = int(np.argmin(sizes))
            raise ValueError(
                f"Argument 'path' must name MDS samples of at least 1 byte: sample {j} of {shard} is empty"
            )
        var = sum(1 for s in column_sizes if s is None)
        fixed = sum(s for s in column_sizes if s is not None)
        starts = offsets[:-1]
        if n and (sizes < 4 * var).any():
            j = int(np.argmax(sizes < 4 * var))
            raise ValueError(
                f"Argument 'path' must name MDS shards: sample {j} of {shard} is shorter than its sizes"
            )
        if n:
            body = np.full(n, 4 * var + fixed, dtype=np.int64)
            if var:
                heads = m[starts[:, None] + np.arange(4 * var)].view("<u4").astype(np.int64)
                body += heads.sum(axis=1)
            if not np.array_equal(body, sizes):
                j = int(np.argmax(body != sizes))
                raise ValueError(
                    f"Argument 'path' must name shards that agree with their columns: sample {j} of "
                    f"{shard} holds {int(sizes[j])} bytes, its columns' sizes say {int(body[j])}"
                )
        return starts, sizes

    def __repr__(self) -> str:
        return f"MDSRecords({self.directory!r}: N={len(self)}, columns={list(self.column_names)})"

    def column_views(self, i: int) -> dict[str, np.ndarray]:
        """Record ``i``'s columns, each its bytes: read-only ``uint8`` views of the map, by name."""
        return _split(self.view(i), self.column_names, self.column_sizes)

    def columns(self, i: int) -> dict[str, Any]:
        """Record ``i``'s columns decoded, by name (:func:`decode_column`: ``bytes``, ``str``, numbers,
        ``json``, ``ndarray`` as views; other encodings as raw bytes)."""
        return self.decoder()(self.view(i))

    def decoder(self) -> MDSColumns:
        """A record's bytes to its columns decoded, as :meth:`columns` (a loader's ``decode``)."""
        return MDSColumns(self.column_names, self.column_encodings, self.column_sizes)


def _split(v: np.ndarray, names: tuple[str, ...], sizes: tuple[int | None, ...]) -> dict[str, np.ndarray]:
    """The columns of a record's bytes ``v``, each a view of them, by name."""
    var = [s is None for s in sizes]
    heads = v[: 4 * sum(var)].view("<u4").tolist() if any(var) else []
    at, h, out = 4 * len(heads), 0, {}
    for name, s in zip(names, sizes, strict=True):
        if s is None:
            s = heads[h]
            h += 1
        out[name] = v[at : at + s]
        at += s
    return out


@dataclass(frozen=True)
class MDSColumns:
    """An MDS record's bytes to its columns decoded, by name (:func:`decode_column`): the sample a
    loader's or the PyTorch dataset's ``decode`` makes of a record (:meth:`MDSRecords.decoder`).

    Examples
    --------
    >>> import numpy as np
    >>> cols = MDSColumns(("id", "text"), ("int", "str"), (8, None))
    >>> cols(np.frombuffer(b"\\x02\\x00\\x00\\x00" + (7).to_bytes(8, "little") + b"hi", np.uint8))
    {'id': 7, 'text': 'hi'}
    """

    names: tuple[str, ...]
    encodings: tuple[str, ...]
    sizes: tuple[int | None, ...]

    def __call__(self, record: np.ndarray) -> dict[str, Any]:
        views = _split(np.asarray(record, dtype=np.uint8), self.names, self.sizes)
        return {
            name: decode_column(enc, views[name])
            for name, enc in zip(self.names, self.encodings, strict=True)
        }


def _read_index(index: str) -> list[dict]:
    """The shards that the MDS ``index.json`` at ``index`` lists (version 2, at least one), or a
    ValueError naming the file and what is wrong."""
    try:
        with open(index, encoding="utf-8") as f:
            obj = json.load(f)
    except OSError as exc:
        raise ValueError(
            f"Argument 'path' must name an MDS dataset: cannot read {index}: {exc.strerror}"
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"Argument 'path' must name an MDS dataset: {index} is not JSON") from None
    shards = obj.get("shards") if isinstance(obj, dict) else None
    if not isinstance(shards, list):
        raise ValueError(f"Argument 'path' must name an MDS dataset: {index} lists no shards")
    if obj.get("version") != 2:
        raise ValueError(
            f"Argument 'path' must name an MDS dataset of index version 2: {index} is of version "
            f"{obj.get('version')!r}"
        )
    if not shards:
        raise ValueError(
            f"Argument 'path' must name an MDS dataset of at least 1 sample: {index} lists 0 shards"
        )
    return shards
