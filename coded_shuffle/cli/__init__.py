"""The command line: ``coded-shuffle`` (also ``python -m coded_shuffle``).

Every command validates its input and reports a bad one as a single line on standard error,
``coded-shuffle: error: ...``, with exit status 2; a failure of the domain exits with 1. Tables go
to standard output; ``--json`` prints one JSON object a line instead.

Layout
------
One module a command (:mod:`.rate`, :mod:`.simulate`, :mod:`.run`, :mod:`.orders`,
:mod:`.quality`, :mod:`.plot`), each with its ``add_parser``; :mod:`.common` holds what they
share, :mod:`.matrices` the matrix files, and :mod:`.job` the options of an MPI job, one
specification for ``coded-shuffle run`` and the MPI program; :mod:`.runner` is the MPI
experiment runner that program runs on every rank.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from .._progress import say
from ..errors import CodedShuffleError
from ._parser import COMMANDS, PROG, UsageError, _Parser

__all__ = ["PROG", "UsageError", "build_parser", "main", "read_matrix", "rate_rows", "run_command",
           "launch", "compile_kernels"]  # fmt: skip

#: Names of the package that live in a command's module, imported on first use.
_LAZY = {"read_matrix": "matrices", "rate_rows": "rate", "run_command": "run", "launch": "run",
         "compile_kernels": "common"}  # fmt: skip


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY`, or a module of the command line (``cli.rate``), on first use."""
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in COMMANDS or name in ("common", "job", "matrices"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_parser(command: str | None = None) -> _Parser:
    """Return the argument parser of ``coded-shuffle``.

    With ``command``, only that command's parser is complete: the others are listed with their
    line of help, and their modules (with the library they import) are not loaded. The help of
    ``coded-shuffle`` itself needs no command's module at all (``command="-"``).
    """
    from .. import __version__

    parser = _Parser(
        prog=PROG,
        description="Coded data shuffling: loads, plans and simulations of epoch reshuffles.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, line in COMMANDS.items():
        if command is None or name == command:
            importlib.import_module(f".{name}", __name__).add_parser(sub)
        else:
            sub.add_parser(name, help=line)
    return parser


def _command_of(argv: Sequence[str]) -> str:
    """The command ``argv`` names (its first word that is not an option), or ``"-"`` for none."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else "-"
    return "-"


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coded-shuffle`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_command_of(argv))
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_usage(sys.stderr)
            commands = ", ".join(COMMANDS)
            say(f"{PROG}: error: a command is needed ({commands}); {PROG} --help says more")
            return 2
        return int(args.func(args))
    except UsageError as exc:
        say(f"{PROG}: error: {exc}")
        return 2
    except (ValueError, TypeError) as exc:
        say(f"{PROG}: error: {exc}")
        return 2
    except CodedShuffleError as exc:
        say(f"{PROG}: {type(exc).__name__}: {exc}")
        return 1
    except MemoryError:
        say(f"{PROG}: error: out of memory")
        return 1
    except KeyboardInterrupt:
        say(f"{PROG}: interrupted")
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
