"""WebDataset ``.tar`` shards: a sample is the members sharing a key, indexed once, read as map slices."""

from __future__ import annotations

import os
import tarfile

import numpy as np

from .base import check_index
from .spans import SpanRecords, map_file, shard_paths

__all__ = ["WebDatasetRecords"]

BLOCK = 512  # tar's block: a header, and the unit its members' data are padded to


def split_key(name: str) -> tuple[str, str] | None:
    """A member's (key, extension): its path up to the first dot of its base name, and the rest;
    None for a name without a dot in its base name (not part of a sample).

    Examples
    --------
    >>> split_key("train/000123.seg.png"), split_key("README")
    (('train/000123', 'seg.png'), None)
    """
    head, _, base = name.rpartition("/")
    stem, dot, ext = base.partition(".")
    if not dot:
        return None
    return (f"{head}/{stem}" if head else stem), ext


class WebDatasetRecords(SpanRecords):
    """The samples of WebDataset ``.tar`` shards: one record a sample (the members sharing a key).

    Each tar is indexed once with :mod:`tarfile` (each member's header and data offsets) and then
    memory-mapped; a record is a slice of the map (no copy). A sample is a run of consecutive
    members whose names share a key: the path up to the first dot of the base name
    (``train/0001.jpg`` and ``train/0001.cls`` make sample ``train/0001``, extensions ``jpg``
    and ``cls``), as WebDataset groups them; members without a dot in their base name and
    non-files (directories, links) are skipped.

    What a record holds:

    ``member="jpg"`` (an extension)
        that member's bytes alone, e.g. the encoded image: the leanest record, for the common
        case of one payload a sample; every sample must have it. The other members stay reachable
        through :meth:`sample`.
    ``member=None`` (default)
        the sample as the tar holds it: its members' headers, data and padding, from the first
        header to the end of the last member's padding. Its framing is tar's own, so the record
        is still a slice of the map (concatenating the members with a framing of our own would
        copy each) and any tar reader reads it (``tarfile.open(fileobj=io.BytesIO(record))``);
        it costs 512 bytes of header a member and the padding of each to 512 bytes.

    Parameters
    ----------
    paths : str, os.PathLike, or a sequence of them
        A ``.tar`` file, a directory (its ``*.tar`` files, sorted by name), or the shards in order.
        Uncompressed tars only: a compressed one cannot be a memory map.
    member : str, optional
        The extension whose bytes are a record, or None for the whole sample.

    Attributes
    ----------
    paths : tuple of str
    keys : tuple of str
        Each sample's key.
    member : str or None

    Raises
    ------
    ValueError
        Naming the file: not an (uncompressed) tar, cut short, holding no samples, a key in two
        places, a sample without ``member``, an empty record.

    Examples
    --------
    >>> import io, os, tarfile, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "shard-000.tar")
    >>> with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
    ...     for name, data in [("a.jpg", b"JPEG1"), ("a.cls", b"3"), ("b.jpg", b"JPEG22"), ("b.cls", b"7")]:
    ...         info = tarfile.TarInfo(name)
    ...         info.size = len(data)
    ...         tar.addfile(info, io.BytesIO(data))
    >>> src = WebDatasetRecords(path, member="jpg")
    >>> src.keys, src.sizes.tolist(), src.view(1).tobytes()
    (('a', 'b'), [5, 6], b'JPEG22')
    >>> {ext: v.tobytes() for ext, v in src.sample(0).items()}
    {'jpg': b'JPEG1', 'cls': b'3'}
    >>> WebDatasetRecords(path).sizes.tolist()   # whole samples: 2 headers and 2 padded blocks each
    [2048, 2048]
    """

    def __init__(self, paths: object, *, member: str | None = None) -> None:
        if member is not None and not isinstance(member, str):
            raise TypeError(f"Argument 'member' must be a str or None, not {type(member).__name__}.")
        tars = shard_paths(paths, suffix=".tar", files=".tar shards", one=".tar shard")
        maps: list[np.ndarray] = []
        starts: list[int] = []
        sizes: list[int] = []
        where: list[int] = []
        keys: list[str] = []
        m_first: list[int] = []  # each sample's first member in the flat member lists
        m_ext: list[str] = []
        m_start: list[int] = []
        m_size: list[int] = []
        for t, path in enumerate(tars):
            members = self._members(path)
            seen: set[str] = set()
            n0 = len(keys)
            last = None
            for info, key, ext in members:
                if key != last:
                    if key in seen:
                        raise ValueError(
                            f"Argument 'paths' must hold each sample's members together: key {key!r} "
                            f"appears in two places in {path}"
                        )
                    seen.add(key)
                    keys.append(key)
                    m_first.append(len(m_ext))
                    where.append(t)
                    starts.append(info.offset)
                    sizes.append(0)
                    last = key
                m_ext.append(ext)
                m_start.append(info.offset_data)
                m_size.append(info.size)
                end = info.offset_data + -(-info.size // BLOCK) * BLOCK
                sizes[-1] = end - starts[-1]
            if len(keys) == n0:
                raise ValueError(f"Argument 'paths' must name .tar shards of samples: {path} holds none")
            maps.append(map_file(path))
        m_first.append(len(m_ext))
        if member is not None:
            names = [tars[t] for t in where]
            spans = _member_spans(member, keys, names, m_first, m_ext, m_start, m_size)
            starts, sizes = [a for a, _ in spans], [b for _, b in spans]
        self._init_spans(maps, starts, sizes, where, "paths")
        self.paths = tuple(tars)
        self.keys = tuple(keys)
        self.member = member
        self._m_first = np.asarray(m_first, dtype=np.int64)
        self._m_ext = m_ext
        self._m_start = np.asarray(m_start, dtype=np.int64)
        self._m_size = np.asarray(m_size, dtype=np.int64)

    @staticmethod
    def _members(path: str) -> list[tuple[tarfile.TarInfo, str, str]]:
        """The file members of the tar ``path`` that belong to samples, with their keys and
        extensions, checked to lie inside the file."""
        if not os.path.isfile(path):
            raise ValueError(f"Argument 'paths' must name .tar shards: no such file: {path}")
        size = os.path.getsize(path)
        try:
            with tarfile.open(path, mode="r:") as tar:
                infos = tar.getmembers()
        except tarfile.ReadError as exc:
            if "end of data" in str(exc):
                raise ValueError(
                    f"Argument 'paths' must name whole .tar shards: {path} is cut short ({exc})"
                ) from None
            raise ValueError(
                f"Argument 'paths' must name uncompressed .tar shards: {path} is not one ({exc})"
            ) from None
        except (EOFError, OSError) as exc:
            raise ValueError(
                f"Argument 'paths' must name whole .tar shards: {path} is cut short ({exc})"
            ) from None
        last = max((i.offset_data + -(-i.size // BLOCK) * BLOCK for i in infos), default=0)
        with open(path, "rb") as f:  # tarfile ends at a short or zero block alike: the end must be zeros
            f.seek(last)
            tail = f.read()
        if len(tail) < BLOCK or tail.count(0) != len(tail):
            raise ValueError(
                f"Argument 'paths' must name whole .tar shards: {path} is cut short after byte {last} "
                "(no end-of-archive block)"
            )
        out = []
        for info in infos:
            if info.offset_data + info.size > size:
                raise ValueError(
                    f"Argument 'paths' must name whole .tar shards: {path} is cut short in {info.name} "
                    f"(its data end at byte {info.offset_data + info.size}, the file at {size})"
                )
            kx = split_key(info.name) if info.isfile() else None
            if kx is not None:
                out.append((info, kx[0], kx[1]))
        return out

    def __repr__(self) -> str:
        return f"WebDatasetRecords(N={len(self)}, member={self.member!r}, shards={len(self.paths)})"

    def sample(self, i: int) -> dict[str, np.ndarray]:
        """Sample ``i``'s members by extension, each its data as a read-only ``uint8`` view of the map."""
        i = check_index(i, len(self))
        buf = self._bufs[int(self._where[i])]
        lo, hi = int(self._m_first[i]), int(self._m_first[i + 1])
        return {
            self._m_ext[j]: buf[int(self._m_start[j]) : int(self._m_start[j] + self._m_size[j])]
            for j in range(lo, hi)
        }


def _member_spans(
    member: str, keys: list[str], tars: list[str], first: list[int], ext: list[str], start: list[int],
    size: list[int],
) -> list[tuple[int, int]]:  # fmt: skip
    """Each sample's ``member`` as ``(start, size)`` in its tar (sample ``s``'s members are
    ``first[s]`` to ``first[s + 1]`` of the flat lists ``ext``, ``start``, ``size``; ``tars[s]`` its
    tar), refused naming the sample where it has none or an empty one."""
    out = []
    for s, key in enumerate(keys):
        exts = ext[first[s] : first[s + 1]]
        if member not in exts:
            raise ValueError(
                f"Argument 'paths' must hold a {member!r} member in every sample: sample {key!r} "
                f"of {tars[s]} has {exts}"
            )
        j = first[s] + exts.index(member)
        if size[j] == 0:
            raise ValueError(
                f"Argument 'paths' must hold records of at least 1 byte: {key}.{member} in {tars[s]} is empty"
            )
        out.append((start[j], size[j]))
    return out
