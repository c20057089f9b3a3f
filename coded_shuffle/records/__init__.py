"""Record sources: where the records of a job are read, behind one interface.

Notation
--------
=========  ==========================================================================
``N``      number of records, numbered ``0..N-1``
``B``      size of a record in bytes, when every record has one size (``record_bytes``)
width      size of the widest record: the row width of a gather
=========  ==========================================================================

A record source (:class:`RecordSource`, a ``typing.Protocol``) says how many records there are,
the size of each, gives one record as a view of its storage, and gathers many into rows of one
buffer (the caller's, or a new one). Every layer above reads records through one (the codec's
:func:`~coded_shuffle.codec.load_dataset`, the loaders, the command line's jobs); nothing else
opens a data file. :class:`NpyRecords` is the rows of arrays: one ``.npy`` file memory-mapped (a
record is a slice of the map), an array in memory, or several joined row by row.
:func:`open_records` takes a source as it is, or makes the ``.npy`` one of paths and arrays.

The file formats training jobs keep their data in are sources of the same interface, each an
index over memory-mapped files (:class:`SpanRecords`: a record is a span of a map):
:class:`TokenWindows` (a flat token file cut into windows of a block size), :class:`FileRecords`
(one record a file), :class:`MDSRecords` (MosaicML MDS shards, one record a sample),
:class:`WebDatasetRecords` (WebDataset ``.tar`` shards, one record a sample or one member of it),
:class:`ArrowRecords` (Arrow files, as Hugging Face ``datasets`` keeps them, one record a row of a
column; pyarrow, the ``arrow`` extra). :data:`FORMATS` names them: :func:`open_format` opens a
path in one, :func:`format_of` tells one from a path's name.
"""

from __future__ import annotations

import os

import numpy as np

from .arrow import ArrowRecords
from .base import RecordSource, fixed_record_bytes
from .files import FileRecords
from .formats import FORMATS, RecordFormat, format_of, open_format
from .mds import MDSRecords
from .npy import NpyRecords, npy_header, npy_problem
from .spans import SpanRecords
from .tokens import TokenWindows
from .webdataset import WebDatasetRecords

__all__ = [
    "RecordSource",
    "NpyRecords",
    "open_records",
    "fixed_record_bytes",
    "npy_header",
    "npy_problem",
    "SpanRecords",
    "TokenWindows",
    "FileRecords",
    "MDSRecords",
    "WebDatasetRecords",
    "ArrowRecords",
    "RecordFormat",
    "FORMATS",
    "format_of",
    "open_format",
]


def open_records(source: object, name: str = "source") -> RecordSource:
    """``source`` as a record source: a :class:`RecordSource` as it is, else :class:`NpyRecords` of it.

    Examples
    --------
    >>> import numpy as np
    >>> src = open_records(np.zeros((4, 2), dtype=np.float64))
    >>> open_records(src) is src, len(src), src.record_bytes
    (True, 4, 16)
    """
    if isinstance(source, NpyRecords):
        return source
    if not isinstance(source, (str, os.PathLike, np.ndarray)) and isinstance(source, RecordSource):
        return source  # (an array is not asked: the protocol's check reads every member)
    return NpyRecords(source, name=name)
