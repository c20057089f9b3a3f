"""The MPI program with faults, for tests and benchmarks only: a rank that fails, a corrupted
frame, dropped multicast datagrams.

    mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_faults [--fail-rank R [--fail-epoch T |
        --fail-at STEP] [--fail-how raise|exit|kill|stop]] [--corrupt-worker k]
        [--multicast-drop P] PROGRAM-OPTIONS...

It installs these faults as the job's hooks (:mod:`coded_shuffle.cli.runner.hooks`) and runs
:mod:`coded_shuffle.mpi_program` with the other options: rank ``R`` fails at the start of
transition ``T`` (of every one without it) or at the start-up step ``STEP``, by raising, exiting,
dying as under ``kill -9`` or stopping as under ``kill -STOP``; the first transition flips a byte
of a symbol worker ``k`` decodes; each receiver drops a share ``P`` of the master's multicast
datagrams. Neither ``coded-shuffle run`` nor the program has these options.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ._progress import say
from .cli.common import _non_negative, _positive
from .cli.runner.hooks import Hooks, install
from .cli.runner.mpi_job import PROG, STARTUP_STEPS
from .codec import Cache, parse_frame
from .mpi_program import _status_file
from .mpi_program import main as program_main
from .transport import mpi_refuse, mpi_world

__all__ = ["Faults", "main"]


class Faults(Hooks):
    """The faults of one job (the options above, parsed)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rank: int | None = args.fail_rank
        self.epoch: int | None = args.fail_epoch
        self.at: str | None = args.fail_at
        self.how: str = args.fail_how
        self.corrupt_worker: int | None = args.corrupt_worker
        self.multicast_drop = args.multicast_drop

    def fail(self, epoch: int | None = None, *, at: str | None = None, rank: int | None = None) -> None:
        if self.rank is None or self.at != at:
            return
        if at is None and self.epoch is not None and self.epoch != epoch:
            return
        if self.rank != (mpi_world().Get_rank() if rank is None else rank):
            return
        when = f"at epoch {epoch}" if at is None else f"at the {at!r} step"
        if self.how == "exit":
            say(f"rank {self.rank}: deliberate exit {when} (--fail-rank)")
            os._exit(3)
        if self.how == "kill":  # this rank dies at once, as under kill -9
            say(f"rank {self.rank}: deliberate SIGKILL {when} (--fail-rank)")
            os.kill(os.getpid(), signal.SIGKILL)
        if self.how == "stop":  # this rank stops answering, as under kill -STOP
            say(f"rank {self.rank}: deliberate stop {when} (--fail-rank)")
            os.kill(os.getpid(), signal.SIGSTOP)
            return
        raise RuntimeError(f"rank {self.rank}: deliberate failure {when} (--fail-rank)")

    def tamper(
        self, cache: Any, units: np.ndarray, *, worker: int | None, epoch: int, first: int
    ) -> Callable[..., Any] | None:
        if self.corrupt_worker is None or self.corrupt_worker != worker or epoch != first:
            return None
        return _corrupter(cache, units)


def _corrupter(cache: Cache, need: np.ndarray) -> Any:
    """Flip one payload byte of a symbol this worker decodes (to exercise repairs)."""
    want = np.setdiff1d(need, cache.ids)

    def tamper(frames: list[np.ndarray]) -> list[np.ndarray]:
        for q, raw in enumerate(frames):
            f = parse_frame(raw)
            if f.offsets is not None and f.terms is not None:  # symbols of many terms (storage)
                sym = np.repeat(np.arange(f.n_symbols), np.diff(f.offsets))
                hit = np.unique(sym[np.isin(f.terms, want)])
            else:
                hit = np.flatnonzero(np.isin(f.a, want) | np.isin(f.b, want))
            if hit.size:
                buf = raw.copy()
                buf[f.header_bytes + int(hit[0]) * f.record_bytes] ^= 0xFF
                frames[q] = buf
                break
        return frames

    return tamper


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        mpi_refuse(f"{PROG}: error: {message}", status_file=_status_file(sys.argv[1:]))


def main(argv: list[str] | None = None) -> int:
    """Install the faults of ``argv`` (default ``sys.argv[1:]``) and run the program with the rest."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = _Parser(prog=PROG, allow_abbrev=False, add_help=False)
    p.add_argument("--fail-rank", type=_non_negative)
    p.add_argument("--fail-epoch", type=_positive)
    p.add_argument("--fail-at", choices=(*STARTUP_STEPS, "probe"))
    p.add_argument("--fail-how", choices=("raise", "exit", "kill", "stop"), default="raise")
    p.add_argument("--corrupt-worker", type=_non_negative)
    p.add_argument("--multicast-drop", type=float, default=0.0)
    args, rest = p.parse_known_args(argv)
    install(Faults(args))
    return program_main(rest)


if __name__ == "__main__":
    sys.exit(main())
