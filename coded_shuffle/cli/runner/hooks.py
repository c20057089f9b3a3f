"""The hooks of a job's tests: what they make happen on a rank, and nothing in production.

A job calls the installed :class:`Hooks` at each start-up step and transition, asks it for a
tamper of a worker's frames, and for the share of multicast datagrams to drop. The hooks a job
runs with are these, which do nothing: only a test-only entry (:mod:`coded_shuffle.mpi_faults`)
installs others (:func:`install`), so no option of ``coded-shuffle run`` or of the MPI program
makes a rank crash, freeze, corrupt or drop anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Hooks", "hooks", "install"]


class Hooks:
    """What a job's tests make happen: here, nothing. A test's hooks override these methods.

    Examples
    --------
    >>> h = Hooks()
    >>> h.fail(2), h.tamper(None, np.arange(3), worker=0, epoch=1, first=1), h.multicast_drop
    (None, None, 0.0)
    """

    #: The share of the master's multicast datagrams each receiver drops (to exercise repairs).
    multicast_drop: float = 0.0

    def fail(self, epoch: int | None = None, *, at: str | None = None, rank: int | None = None) -> None:
        """Called at the start of transition ``epoch``, or at the start-up step ``at``
        (:data:`~coded_shuffle.cli.runner.mpi_job.STARTUP_STEPS` or ``"probe"``); ``rank``: this
        rank, where MPI has not started."""

    def tamper(
        self, cache: Any, units: np.ndarray, *, worker: int | None, epoch: int, first: int
    ) -> Callable[..., Any] | None:
        """A change of the frames ``worker`` receives at transition ``epoch`` (its ``cache`` and
        the ``units`` it needs; ``first``, the job's first transition), or None."""
        return None


_installed: list[Hooks] = [Hooks()]


def hooks() -> Hooks:
    """The hooks installed in this process."""
    return _installed[0]


def install(new: Hooks) -> None:
    """Install ``new`` as this process's hooks (a test-only entry does, before the job starts)."""
    if not isinstance(new, Hooks):
        raise TypeError(f"Argument 'new' must be a Hooks, not {type(new).__name__}.")
    _installed[0] = new
