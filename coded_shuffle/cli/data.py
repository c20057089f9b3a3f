"""``--data PATH`` in any of the record formats: ``--format``, its inference from the path, and
the options of token files; the source opened and checked before any process starts, and what
cannot run on records of different sizes refused, naming its option.

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


def format_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``--data``'s format given in ``args``, by their names among the formats' options."""
    return {name: getattr(args, dest, None) for dest, (_, name) in _OPTIONS.items()}


def format_arguments(args: argparse.Namespace) -> list[str]:
    """The format options given in ``args`` as the command line gives them (``--field jpg``)."""
    out: list[str] = []
    for dest, (flag, _) in _OPTIONS.items():
        if getattr(args, dest, None) is not None:
            out += [flag, str(getattr(args, dest))]
    return out


def open_data(args: argparse.Namespace, *, workers: int) -> tuple[Any, str]:
    """The record source of ``--data`` and its format, checked: at least one record a worker;
    else a UsageError naming the option or the file.

    Its records may differ in size (:attr:`~coded_shuffle.records.RecordSource.record_bytes` is
    then None): what cannot run on such records refuses them, naming its option
    (:func:`sizes_refusal`).
    """
    path = args.data
    if not path:
        raise UsageError("--data must name a file or directory, not ''")
    fmt = data_format(path, args.format)
    _check_format_options(args, fmt)
    try:
        source = open_format(path, fmt, **format_options(args))
    except (ValueError, TypeError, OSError, ImportError) as exc:
        raise UsageError(f"--data {path} (--format {fmt}): {_one_line(exc)}") from None
    if len(source) < workers:
        raise UsageError(f"--data: {path} holds {len(source)} records, fewer than the {workers} workers")
    return source, fmt


def sizes_text(sizes: Any) -> str:
    """``10 to 200 B, mean 104.7 B``: the sizes of records that differ in size.

    >>> import numpy as np
    >>> sizes_text(np.array([10, 200, 104])), sizes_text(np.array([2053, 20479]))
    ('10 to 200 B, mean 104.7 B', '2,053 to 20,479 B, mean 11,266.0 B')
    """
    return f"{int(sizes.min()):,} to {int(sizes.max()):,} B, mean {float(sizes.mean()):,.1f} B"


def sizes_refusal(path: str, sizes: Any, given: dict[str, bool]) -> str | None:
    """Why the options ``given`` (each flag, and whether it was given) cannot run on the records of
    ``--data path`` whose sizes differ (``sizes``), naming the first; None when none is given.

    >>> import numpy as np
    >>> sizes_refusal("d/", np.array([3, 5]), {"--subpackets 2": True})
    '--subpackets 2 needs records of one size: those of --data d/ are 3 to 5 B, mean 4.0 B'
    """
    flag = next((f for f, on in given.items() if on), None)
    if flag is None:
        return None
    return f"{flag} needs records of one size: those of --data {path} are {sizes_text(sizes)}"


def check_format(args: argparse.Namespace) -> str:
    """The format of ``--data`` (``--format``, else told from the path) and its options, checked
    without opening the data; a UsageError naming the option otherwise."""
    fmt = data_format(args.data, args.format)
    _check_format_options(args, fmt)
    return fmt


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
