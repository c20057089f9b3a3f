"""The record formats by name: which source reads a path, told from its name where it can be.

One registry (:data:`FORMATS`) of the formats a path of data can be in; the command line's
``--data`` and ``--format`` are derived from it, and :func:`open_format` opens a path in one of
them. A new record source joins every caller with one entry here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .arrow import ArrowRecords
from .base import RecordSource
from .files import FileRecords
from .mds import MDSRecords
from .npy import NpyRecords
from .tokens import TokenWindows
from .webdataset import WebDatasetRecords

__all__ = ["RecordFormat", "FORMATS", "format_of", "open_format"]


@dataclass(frozen=True)
class RecordFormat:
    """A format of record files.

    Attributes
    ----------
    name : str
        Its name (``--format NAME``).
    make : callable
        ``make(path, **keywords)``: the record source of ``path``.
    what : str
        What a path of it is, and what a record of it is, in a few words.
    suffixes : tuple of str
        File suffixes that say the format.
    marker : str or None
        A file name that says the format, itself or in a directory (``index.json``).
    shards : bool
        Whether a directory of files of its suffixes is one source of it.
    options : mapping
        The options it takes, each by its name to the keyword of ``make``.
    required : tuple of str
        Those of ``options`` it cannot go without.
    """

    name: str
    make: Callable[..., RecordSource]
    what: str
    suffixes: tuple[str, ...] = ()
    marker: str | None = None
    shards: bool = False
    options: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()


def _npy(path: str, **_: Any) -> RecordSource:
    return NpyRecords(path, name="data")


#: The formats by name, in the order the command line lists them; the last without suffixes or
#: marker (``files``) is what any other directory is.
FORMATS: dict[str, RecordFormat] = {
    f.name: f
    for f in (
        RecordFormat("npy", _npy, "rows of a .npy file", suffixes=(".npy",), shards=True),
        RecordFormat(
            "tokens",
            TokenWindows,
            "a flat token file cut into windows of --token-window tokens",
            suffixes=(".bin",),
            options={"window": "block_size", "dtype": "dtype"},
            required=("window",),
        ),  # fmt: skip
        RecordFormat("files", FileRecords, "a directory, one record a file"),
        RecordFormat("mds", MDSRecords, "MosaicML MDS: a directory with index.json", marker="index.json"),
        RecordFormat(
            "webdataset",
            WebDatasetRecords,
            ".tar shards, one record a sample",
            suffixes=(".tar",),
            shards=True,
            options={"field": "member"},
        ),  # fmt: skip
        RecordFormat(
            "arrow",
            ArrowRecords,
            "Arrow files",
            suffixes=(".arrow",),
            shards=True,
            options={"field": "column"},
        ),  # fmt: skip
    )
}


def format_of(path: str) -> str | None:
    """The format ``path`` is in by its name (or, a directory, by the names in it); None where
    neither says.

    A directory holding a format's marker is in that format; one of files of one format's
    suffixes only, in that format if its shards make one source; any other directory is a
    directory of files, one record a file.

    Examples
    --------
    >>> format_of("train.bin"), format_of("shards/index.json"), format_of("notes.txt")
    ('tokens', 'mds', None)
    """
    if os.path.isdir(path):
        names = [n for n in os.listdir(path) if not n.startswith(".")]
        for f in FORMATS.values():
            if f.marker is not None and f.marker in names:
                return f.name
        kinds = {_by_suffix(n) for n in names}
        if len(kinds) == 1 and (kind := kinds.pop()) is not None and FORMATS[kind].shards:
            return kind
        return "files"
    base = os.path.basename(path)
    for f in FORMATS.values():
        if f.marker == base:
            return f.name
    return _by_suffix(base)


def _by_suffix(name: str) -> str | None:
    suffix = os.path.splitext(name)[1]
    return next((f.name for f in FORMATS.values() if suffix in f.suffixes), None)


def open_format(path: str, fmt: str, **options: Any) -> RecordSource:
    """The record source of ``path`` in format ``fmt`` (a name of :data:`FORMATS`), given the
    options of that format (by their names in :attr:`RecordFormat.options`; None is not given).

    Raises
    ------
    ValueError
        ``fmt`` is no format, an option is not one of ``fmt``'s or a required one is missing; or
        the source's own error (naming the file) where the path is not in the format.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.bin")
    >>> np.arange(10, dtype=np.uint16).tofile(path)
    >>> src = open_format(path, "tokens", window=4)
    >>> len(src), src.record_bytes
    (2, 8)
    """
    if fmt not in FORMATS:
        raise ValueError(f"Argument 'fmt' must be one of {', '.join(FORMATS)}, not {fmt!r}.")
    f = FORMATS[fmt]
    given = {k: v for k, v in options.items() if v is not None}
    for k in given:
        if k not in f.options:
            raise ValueError(f"Format {fmt} takes no option {k!r}.")
    for k in f.required:
        if k not in given:
            raise ValueError(f"Format {fmt} needs the option {k!r}.")
    return f.make(path, **{f.options[k]: v for k, v in given.items()})
