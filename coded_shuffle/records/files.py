"""Files as records: a directory or a list of files, one record a file."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .spans import SpanRecords, map_file

__all__ = ["FileRecords"]


def _listing(source: object) -> list[str]:
    """The files of ``source``: a directory's regular files (recursively, sorted by path, names
    starting with a dot left out), or a sequence of paths as given."""
    if isinstance(source, (str, os.PathLike)):
        root = os.fspath(source)
        if not os.path.isdir(root):
            raise ValueError(
                f"Argument 'source' must name a directory or list files: no such directory: {root}"
            )
        found = []
        for d, dirs, files in os.walk(root):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            found += [os.path.join(d, f) for f in files if not f.startswith(".")]
        found = [p for p in found if os.path.isfile(p)]
        if not found:
            raise ValueError(f"Argument 'source' must hold at least 1 file, not 0: {root}")
        return sorted(found, key=lambda p: os.path.relpath(p, root).split(os.sep))
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        paths = []
        for p in source:
            if not isinstance(p, (str, os.PathLike)):
                raise TypeError(f"Argument 'source' must list paths, not {type(p).__name__}.")
            paths.append(os.fspath(p))
        if not paths:
            raise ValueError("Argument 'source' must list at least 1 file, not 0.")
        return paths
    raise TypeError(
        f"Argument 'source' must be a directory or a sequence of paths, not {type(source).__name__}."
    )


class FileRecords(SpanRecords):
    """One record a file: a directory's files, or a list of paths, each file's bytes a record.

    Records have the files' sizes (``record_bytes`` is None unless every file has one size). By
    default every file is read once, at the start, into one buffer in memory, with an index of
    where each begins: records are then slices of that buffer, and many small files (images,
    documents) cost one read each and one buffer, not a file descriptor and a map each. With
    ``map=True`` each file is memory-mapped instead and a record is a slice of its file's map
    (zero copy, nothing read until used): for a few large files; each map holds a file descriptor
    open.

    Parameters
    ----------
    source : str, os.PathLike, or a sequence of them
        A directory (its regular files, recursively, in the order of their relative paths; names
        starting with a dot are left out) or the files themselves, in record order.
    map : bool
        Map each file (zero copy) instead of reading them all into one buffer (default).

    Attributes
    ----------
    paths : tuple of str
        The file of each record.

    Raises
    ------
    ValueError
        Naming the file: missing, unreadable, or empty (a record needs at least 1 byte); or no files.

    Examples
    --------
    >>> import os, tempfile
    >>> d = tempfile.mkdtemp()
    >>> for name, text in [("a.txt", b"one"), ("b.txt", b"three"), ("c.txt", b"xy")]:
    ...     _ = open(os.path.join(d, name), "wb").write(text)
    >>> src = FileRecords(d)
    >>> len(src), src.record_bytes, src.sizes.tolist(), src.view(1).tobytes()
    (3, None, [3, 5, 2], b'three')
    >>> src.gather([2, 0]).tolist()
    [[120, 121, 0, 0, 0], [111, 110, 101, 0, 0]]
    """

    def __init__(self, source: object, *, map: bool = False) -> None:  # noqa: A002 - the option's name
        if not isinstance(map, bool):
            raise TypeError(f"Argument 'map' must be a bool, not {type(map).__name__}.")
        paths = _listing(source)
        sizes = np.empty(len(paths), dtype=np.int64)
        for k, p in enumerate(paths):
            try:
                sizes[k] = os.path.getsize(p)
            except OSError as exc:
                why = exc.strerror or exc
                raise ValueError(f"Argument 'source' must list readable files: {p}: {why}") from None
            if not os.path.isfile(p):
                raise ValueError(f"Argument 'source' must list regular files, not {p}")
            if sizes[k] == 0:
                raise ValueError(f"Argument 'source' must list files of at least 1 byte: {p} is empty")
        if map:
            bufs = [map_file(p) for p in paths]
            self._init_spans(bufs, np.zeros(len(paths), np.int64), sizes, np.arange(len(paths)), "source")
        else:
            starts = np.zeros(len(paths), dtype=np.int64)
            np.cumsum(sizes[:-1], out=starts[1:])
            buf = np.empty(int(sizes.sum()), dtype=np.uint8)
            for p, s, n in zip(paths, starts.tolist(), sizes.tolist(), strict=True):
                with open(p, "rb") as f:
                    got = f.readinto(buf[s : s + n].data)
                if got != n:
                    raise ValueError(f"Argument 'source' must list files that stay put: {p} changed size")
            buf.flags.writeable = False
            self._init_spans([buf], starts, sizes, None, "source")
        self.paths = tuple(paths)

    def __repr__(self) -> str:
        return f"FileRecords(N={len(self)}, width={self.width}, files from {self.paths[0]!r})"
