"""Token files: a flat stream of token ids (nanoGPT's ``train.bin``) cut into windows of a block size."""

from __future__ import annotations

import os

import numpy as np

from .._checks import check_int
from .spans import SpanRecords, map_file

__all__ = ["TokenWindows"]

#: The token dtypes a token file may hold.
TOKEN_DTYPES = ("uint16", "uint32")


class TokenWindows(SpanRecords):
    """The non-overlapping windows of ``block_size`` tokens of a flat token file, one record a window.

    A token file is a headerless stream of token ids of one unsigned integer type, as nanoGPT's
    ``prepare.py`` writes ``train.bin`` (``uint16``; ``uint32`` for vocabularies over 65,536).
    Record ``i`` is tokens ``[i * block_size, (i + 1) * block_size)``: records of one size,
    ``block_size * itemsize`` bytes; the tokens after the last whole window (fewer than
    ``block_size``) belong to no record. The file is memory-mapped: a record is a slice of the map
    and the table is the map itself, shaped ``(N, record_bytes)`` (no copy).

    Parameters
    ----------
    path : str or os.PathLike
        The token file.
    block_size : int
        Tokens a window (at least 1).
    dtype : str or numpy.dtype
        The token type, ``"uint16"`` (default) or ``"uint32"``, in the file's byte order
        (little-endian unless given, e.g. ``">u2"``).
    offset : int
        Bytes to skip at the start of the file (a header, e.g. llm.c's 1,024 bytes).

    Attributes
    ----------
    path : str
    block_size : int
    dtype : numpy.dtype
        The token type.
    tokens : int
        Tokens in the file (whole windows or not).

    Raises
    ------
    ValueError
        Naming the file: missing, not a whole number of tokens after the offset, or shorter than
        one window.

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "train.bin")
    >>> np.arange(10, dtype=np.uint16).tofile(path)
    >>> src = TokenWindows(path, block_size=4)
    >>> len(src), src.record_bytes, src.windows().tolist()   # tokens 8 and 9 make no whole window
    (2, 8, [[0, 1, 2, 3], [4, 5, 6, 7]])
    >>> np.shares_memory(src.view(1), src.maps[0])
    True
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        block_size: int,
        dtype: object = "uint16",
        offset: int = 0,
    ) -> None:
        block_size = check_int(block_size, "block_size", minimum=1)
        offset = check_int(offset, "offset", minimum=0)
        try:
            dt = np.dtype(dtype)  # type: ignore[call-overload]
        except TypeError:
            dt = None
        if dt is None or dt.kind != "u" or dt.itemsize not in (2, 4):
            raise ValueError(
                f"Argument 'dtype' must be one of {TOKEN_DTYPES} (any byte order), not {dtype!r}."
            )
        if dt.byteorder == "|" or dt.byteorder == "=":
            dt = dt.newbyteorder("<")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"Argument 'path' must be a str or os.PathLike, not {type(path).__name__}.")
        p = os.fspath(path)
        if not os.path.isfile(p):
            raise ValueError(f"Argument 'path' must name a token file: no such file: {p}")
        size = os.path.getsize(p)
        body = size - offset
        if body < 0 or body % dt.itemsize:
            raise ValueError(
                f"Argument 'path' must name a file of whole {dt.name} tokens after {offset} bytes: "
                f"{p} holds {size} bytes, {body} after the offset, not a multiple of {dt.itemsize}"
            )
        tokens = body // dt.itemsize
        N = tokens // block_size
        if N < 1:
            raise ValueError(
                f"Argument 'path' must name a token file of at least one window of {block_size} tokens: "
                f"{p} holds {tokens}"
            )
        B = block_size * dt.itemsize
        self._init_spans(
            [map_file(p)],
            np.arange(N, dtype=np.int64) * B + offset,
            np.broadcast_to(np.int64(B), (N,)),
            None,
            "path",
        )
        self.path = p
        self.block_size = block_size
        self.dtype = dt
        self.tokens = int(tokens)

    def __repr__(self) -> str:
        return (
            f"TokenWindows({self.path!r}, block_size={self.block_size}, dtype={self.dtype.str!r}: "
            f"N={len(self)}, record_bytes={self.record_bytes})"
        )

    def windows(self) -> np.ndarray:
        """Every window as tokens: the ``(N, block_size)`` array of :attr:`dtype` (a view of the map)."""
        return self.table().view(self.dtype)
