"""Shuffle matrices for the command line: :func:`coded_shuffle.matrix.read_shuffle_matrix` with
one-line errors, and ``-`` for standard input."""

from __future__ import annotations

import sys

import numpy as np

from ..matrix import MAX_MATRIX_FILE_BYTES, read_shuffle_matrix
from .common import UsageError

#: Largest matrix file read (:data:`coded_shuffle.matrix.MAX_MATRIX_FILE_BYTES`).
MAX_MATRIX_BYTES = MAX_MATRIX_FILE_BYTES


def read_matrix(path: str, *, square: bool = False) -> np.ndarray:
    """Read a shuffle matrix as :func:`coded_shuffle.matrix.read_shuffle_matrix` does (``-`` reads
    standard input), refusing anything else with one line (:class:`~coded_shuffle.cli.UsageError`);
    ``K_t x K_{t+1}`` unless ``square``.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "S.csv")
    ...     with open(path, "w") as fh:
    ...         _ = fh.write("2,0,1\\n0,2,1\\n")
    ...     read_matrix(path).tolist()
    [[2, 0, 1], [0, 2, 1]]
    """
    try:
        S = read_shuffle_matrix(sys.stdin if path == "-" else path)
    except OSError as exc:
        raise UsageError(f"cannot read matrix file {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(str(exc).replace("'<stdin>'", "'-'")) from None
    if square and S.shape[0] != S.shape[1]:
        raise UsageError(f"matrix in {path!r} must be square here, not {S.shape[0]} x {S.shape[1]}")
    return S
