"""The parser that reports bad input as one line, and the list of commands.

Nothing here imports the library: ``coded-shuffle --help`` (and a bad command) is answered from
this module alone, and a command's module, with the library it needs, is imported only when that
command is named.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from .._progress import say

PROG = "coded-shuffle"

#: The commands in the order of ``--help``, each with the line it shows there (its module's
#: ``add_parser`` gives the same line to its own parser).
COMMANDS: dict[str, str] = {
    "rate": "uncoded, paired and coded loads with the lower bound, per epoch transition",
    "quality": "quality and locality of one shard-aware epoch order (mixture experiment)",
    "orders": "each epoch order's quality next to its coded and uncoded link load",
    "plot": "draw loads against K, or a leftover graph, as PNG or SVG (needs matplotlib)",
    "simulate": "run the in-process engine end to end on random records, epoch after epoch",
    "run": "run the coded shuffle across processes with MPI (rank 0 master, ranks 1..K workers)",
}


class UsageError(Exception):
    """Bad input from the command line: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


class _Deprecated(argparse.Action):
    """The old spelling of an option, kept for one release: it stores what the new spelling
    stores (its ``type`` and ``dest``), hidden from ``--help``, with one line on standard error."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        say(f"{PROG}: warning: {option_string} is deprecated and will be removed; say {self.new}")
        setattr(namespace, self.dest, values)


def add_deprecated(parser: argparse.ArgumentParser, old: str, new: str, *, dest: str, **kwargs: Any) -> None:
    """Accept ``old`` as a deprecated spelling of the option ``new`` (stored in ``dest``)."""
    parser.add_argument(old, action=_Deprecated, new=new, dest=dest, help=argparse.SUPPRESS, **kwargs)
