"""Shuffle matrices read from JSON or CSV files, or standard input, with one-line errors."""

from __future__ import annotations

import csv
import json
import sys
from typing import Any

import numpy as np

from ..matrix import check_shuffle_matrix
from .common import (
    UsageError,
)

#: Largest matrix file read (64 MiB: a K of several thousand); a larger one is refused unread.
MAX_MATRIX_BYTES = 64 << 20


def read_matrix(path: str) -> np.ndarray:
    """Read a shuffle matrix from a JSON or CSV file (``-`` reads standard input).

    JSON: a list of ``K`` lists of ``K`` non-negative ints, ``S[i][j]`` the points held by worker
    ``i`` and needed by worker ``j``. CSV: ``K`` lines of ``K`` such ints, separated by commas,
    semicolons (when any line has one) or blanks, optionally under one header line of labels
    (no cell of it an integer). The format is taken from the content: JSON if it starts with
    ``[`` or ``{``. A UTF-8 byte order mark is skipped. Anything else is refused, naming the
    line and column at fault.
    """
    try:
        if path == "-":
            raw = getattr(sys.stdin, "buffer", None)
            data = raw.read(MAX_MATRIX_BYTES + 1) if raw is not None else sys.stdin.read(MAX_MATRIX_BYTES + 1)
        else:
            with open(path, "rb") as fh:
                data = fh.read(MAX_MATRIX_BYTES + 1)
        if len(data) > MAX_MATRIX_BYTES:
            raise UsageError(f"matrix file {path!r} is larger than {MAX_MATRIX_BYTES >> 20} MiB")
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except OSError as exc:
        raise UsageError(f"cannot read matrix file {path!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"matrix file {path!r} is not UTF-8 text") from None
    text = text.removeprefix("\ufeff")
    stripped = text.strip()
    if not stripped:
        raise UsageError(f"matrix file {path!r} is empty")
    if stripped[0] in "[{":
        return _json_matrix(stripped, path)
    try:
        scalar = json.loads(stripped)
    except ValueError:
        return _csv_matrix(text, path)
    raise UsageError(
        f"matrix file {path!r} must hold a JSON list of lists (or CSV rows), not the JSON "
        f"{type(scalar).__name__} {stripped[:20]!r}; a 1 x 1 matrix is [[{stripped[:20]}]]"
    )


def _json_matrix(text: str, path: str) -> np.ndarray:
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"matrix file {path!r} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        raise UsageError(f"matrix file {path!r} must hold a JSON list of lists")
    K = len(rows)
    for i, row in enumerate(rows):
        if len(row) != K:
            raise UsageError(
                f"matrix in {path!r} is not square: row {i + 1} has {len(row)} entries, expected {K}"
            )
    values = [[_json_entry(v, f"matrix in {path!r}, row {i + 1}, column {j + 1}") for j, v in enumerate(row)]
              for i, row in enumerate(rows)]  # fmt: skip
    return _checked(values, path)


def _csv_matrix(text: str, path: str) -> np.ndarray:
    """Read CSV: the separator is ``;`` if any line has one, else ``,`` if any has one, else blanks.

    A separator ending a line (as some spreadsheets write) ends it; it adds no empty entry.
    """
    sep = ";" if ";" in text else "," if "," in text else None
    lines: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        cells = [c.strip() for c in next(csv.reader([line], delimiter=sep))] if sep else line.split()
        if len(cells) > 1 and not cells[-1]:
            cells.pop()
        lines.append((number, cells))
    first = lines[0][1]
    if len(lines) > 1 and not any(_is_int(c) for c in first):
        lines = lines[1:]  # a header of labels
    K = len(lines)
    for number, cells in lines:
        if len(cells) != K:
            raise UsageError(
                f"matrix in {path!r} is not square: line {number} has {len(cells)} entries, expected {K}"
            )
    values = [[_entry(c, f"matrix in {path!r}, line {number}, column {j + 1}") for j, c in enumerate(cells)]
              for number, cells in lines]  # fmt: skip
    return _checked(values, path)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _checked(values: list[list[int]], path: str) -> np.ndarray:
    K = len(values)
    out = np.zeros((K, K), dtype=np.int64)
    for i, row in enumerate(values):
        out[i, :] = row
    try:
        return check_shuffle_matrix(out)
    except ValueError as exc:
        raise UsageError(f"matrix in {path!r}: {exc}") from None


def _json_entry(v: Any, where: str) -> int:
    """A JSON entry: a JSON integer only (no string, float or boolean)."""
    if isinstance(v, bool) or not isinstance(v, int):
        kind = {str: "a string", float: "a float", bool: "a boolean"}.get(type(v), "not a number")
        raise UsageError(f"{where}: {v!r} is {kind}, not an integer")
    return _entry(v, where)


def _entry(v: Any, where: str) -> int:
    if isinstance(v, bool):
        raise UsageError(f"{where}: {v!r} is not an integer")
    if isinstance(v, int):
        out = v
    elif isinstance(v, float) and v.is_integer():
        out = int(v)
    elif isinstance(v, str):
        if not v:
            raise UsageError(f"{where}: the entry is empty")
        try:
            out = int(v)
        except ValueError:
            raise UsageError(f"{where}: {v!r} is not an integer") from None
    else:
        raise UsageError(f"{where}: {v!r} is not an integer")
    if out < 0:
        raise UsageError(f"{where}: {out} is negative")
    if out >= 2**62:
        raise UsageError(f"{where}: {out} is too large")
    return out
