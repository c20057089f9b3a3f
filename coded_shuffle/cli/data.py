"""``--data PATH`` in any of the record formats: ``--format``, its inference from the path, and
the options of token files; the source opened and checked before any process starts.

The formats, their suffixes and their options are those of :data:`coded_shuffle.records.formats.FORMATS`."""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..records.formats import FORMATS, format_of, open_format
from ._parser import UsageError

#: The formats ``--format`` names, beside ``auto`` (the format told from the path).
DATA_FORMATS = tuple(FORMATS)

#: Each format option of the command line: its flag, and its name among the formats' options.
_OPTIONS = {"token_window": ("--token-window", "window"), "token_dtype": ("--token-dtype", "dtype"),
            "field": ("--field", "field")}  # fmt: skip


def add_data_arguments(parser: argparse.ArgumentParser, *, data: bool = True) -> None:
    """``--format``, ``--token-window``, ``--token-dtype`` and ``--field``; ``data``: ``--data`` too
    (``run`` has it from the job's options)."""
    if data:
        parser.add_argument(
            "--data", metavar="PATH", help="the records, in the format of --format (instead of random ones)"
        )
    parser.add_argument(
        "--format",
        choices=("auto", *DATA_FORMATS),
        default="auto",
        help=f"the format of --data: {_formats_help()}; auto: told from the path (a suffix, a marker, a "
        "directory of one of them, else of files) (default auto)",
    )
    parser.add_argument(
        "--token-window", type=int, metavar="T", help="tokens a record, --format tokens (required there)"
    )
    parser.add_argument(
        "--token-dtype",
        choices=("uint16", "uint32"),
        help="the token type of a token file, --format tokens (default uint16)",
    )
    parser.add_argument(
        "--field",
        metavar="NAME",
        help="the part of a sample a record is: a column (arrow) or a member's extension "
        "(webdataset) (default: arrow's one column; webdataset's whole sample)",
    )


def _formats_help() -> str:
    return ", ".join(f"{f.name} ({f.what})" for f in FORMATS.values())


def data_format(path: str, given: str) -> str:
    """The format of ``path``: ``given`` unless ``auto``, else the one its name or contents say
    (:func:`~coded_shuffle.records.formats.format_of`); a UsageError when they say none.

    Examples
    --------
    >>> data_format("train.bin", "auto"), data_format("x.dat", "tokens")
    ('tokens', 'tokens')
    """
    if given != "auto":
        return given
    fmt = format_of(path)
    if fmt is not None:
        return fmt
    if not os.path.exists(path):
        raise UsageError(f"--data: no such file or directory: {path}")
    raise UsageError(f"--data: cannot tell the format of {path} from its name: give --format")


def refuse_format_options(args: argparse.Namespace) -> None:
    """Refuse, naming it, a format option given without ``--data``."""
    if args.format != "auto":
        raise UsageError("--format applies with --data only")
    for dest, (flag, _) in _OPTIONS.items():
        if getattr(args, dest) is not None:
            raise UsageError(f"{flag} applies with --data only")


def write_npy(source: Any, path: str, *, rows: int = 1 << 14) -> None:
    """Write the records of ``source`` (of one size) to the ``.npy`` file ``path``, one a row,
    ``rows`` at a time (never the whole table in memory)."""
    import numpy as np

    N, B = len(source), int(source.record_bytes)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(N, B))
    for start in range(0, N, rows):
        stop = min(N, start + rows)
        source.gather(np.arange(start, stop, dtype=np.int64), out=out[start:stop])
    out.flush()
    del out


def _check_format_options(args: argparse.Namespace, fmt: str) -> None:
    """Refuse, naming it, an option of one format given for another, or a required one missing."""
    for dest, (flag, name) in _OPTIONS.items():
        formats = [f.name for f in FORMATS.values() if name in f.options]
        if getattr(args, dest) is not None and fmt not in formats:
            raise UsageError(f"{flag} applies to --format {' or '.join(formats)} only, not {fmt}")
    if fmt == "tokens":
        if args.token_window is None:
            raise UsageError("--format tokens needs --token-window T: the tokens of a record")
        if args.token_window < 1:
            raise UsageError(f"--token-window must be at least 1, not {args.token_window}")


def open_data(args: argparse.Namespace, *, workers: int) -> tuple[Any, str]:
    """The record source of ``--data`` and its format, checked: records of one size, at least one
    a worker; else a UsageError naming the option or the file.

    The formats other than ``npy`` are read through :mod:`coded_shuffle.records`; the engine codes
    records of one size only (:func:`~coded_shuffle.records.fixed_record_bytes`), and so sources
    whose records differ in size are refused here, before any process starts.
    """
    path = args.data
    if not path:
        raise UsageError("--data must name a file or directory, not ''")
    fmt = data_format(path, args.format)
    _check_format_options(args, fmt)
    options = {name: getattr(args, dest) for dest, (_, name) in _OPTIONS.items()}
    try:
        source = open_format(path, fmt, **options)
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UsageError(f"--data {path} (--format {fmt}): {_one_line(exc)}") from None
    if source.record_bytes is None:
        sizes = source.sizes
        raise UsageError(
            f"--data {path}: records of one size only, and its record sizes differ "
            f"({int(sizes.min())} to {int(sizes.max())} bytes)"
        )
    if len(source) < workers:
        raise UsageError(f"--data: {path} holds {len(source)} records, fewer than the {workers} workers")
    return source, fmt


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
