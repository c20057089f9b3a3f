"""The command line: ``coded-shuffle`` (also ``python -m coded_shuffle``).

Every command validates its input and reports a bad one as a single line on standard error,
``coded-shuffle: error: ...``, with exit status 2; a failure of the domain exits with 1. Tables go
to standard output; ``--json`` prints one JSON object a line instead.

Layout
------
One module a command (:mod:`.rate`, :mod:`.simulate`, :mod:`.run`, :mod:`.orders`,
:mod:`.quality`, :mod:`.plot`), each with its ``add_parser``; :mod:`.common` holds what they
share, :mod:`.matrices` the matrix files, and :mod:`.job` the options of an MPI job, one
specification for ``coded-shuffle run`` and the MPI program.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from ..errors import CodedShuffleError
from . import orders, plot, quality, rate, run, simulate
from .common import PROG, UsageError, _Parser, compile_kernels
from .matrices import read_matrix
from .rate import rate_rows
from .run import launch, run_command

__all__ = ["PROG", "UsageError", "build_parser", "main", "read_matrix", "rate_rows", "run_command",
           "launch", "compile_kernels"]  # fmt: skip


def build_parser() -> _Parser:
    """Return the argument parser of ``coded-shuffle``."""
    from .. import __version__

    parser = _Parser(
        prog=PROG,
        description="Coded data shuffling: loads, plans and simulations of epoch reshuffles.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in (rate, quality, orders, plot, simulate, run):
        command.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``coded-shuffle`` with ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if getattr(args, "func", None) is None:
            parser.print_help(sys.stderr)
            return 2
        return int(args.func(args))
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except CodedShuffleError as exc:
        print(f"{PROG}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except MemoryError:
        print(f"{PROG}: error: out of memory", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
