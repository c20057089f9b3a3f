"""The ranks of an MPI job as processes: MPI's start (:func:`mpi_world`, bounded in time by
:func:`mpi_start`), the rank a launcher gives a process (:func:`launch_rank`), the markers by
which a launcher learns which process is which rank (:func:`mark_rank`, :func:`rank_markers`,
:func:`ended_ranks`), and the ends of a rank and of the job (:func:`mpi_exit`,
:func:`mpi_refuse`, :func:`mpi_abort`). ``mpi4py`` is imported inside the functions alone.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, NoReturn

from .._progress import say

__all__ = [
    "mpi_world", "mpi_start", "launch_rank", "mark_rank", "rank_markers", "ended_ranks", "mpi_exit",
    "mpi_refuse", "mpi_abort",
]  # fmt: skip


def mpi_world() -> Any:
    """Return ``MPI.COMM_WORLD``, initializing MPI on the first call.

    The package's only import of ``mpi4py``: programs call it once their environment (MPICH's
    settings) is in place, since importing ``mpi4py.MPI`` initializes MPI.
    """
    from mpi4py import MPI

    return MPI.COMM_WORLD


#: Where a launcher gives a process its rank before MPI starts (MPICH's hydra, Open MPI, Slurm).
_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID")
#: And the number of ranks.
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS")


def _launch_number(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def launch_rank() -> int | None:
    """This process's rank as its launcher set it in the environment (before MPI starts), or None.

    Examples
    --------
    >>> rank = launch_rank()
    >>> rank is None or rank >= 0
    True
    """
    return _launch_number(_RANK_VARIABLES)


#: The prefix of the file each rank keeps open while it lives (:func:`mark_rank`).
ALIVE = "alive."


def _marker(directory: str, rank: int) -> str:
    return os.path.join(directory, f"rank.{rank}")


#: This process's ``alive.R`` (:func:`mark_rank`), open for writing until the process ends.
_ALIVE: list[int] = []


def mark_rank(directory: str, rank: int) -> None:
    """Write ``rank.R`` in ``directory``: this process's pid and host (see :func:`rank_markers`);
    and open ``alive.R`` there for writing, for as long as this process lives.

    The kernel closes ``alive.R`` as the process ends, and a launcher that watches the directory
    (inotify) reads those closes in the order the ranks ended, however late it looks. The file is
    kept at a high descriptor: Linux finishes the closes of an ending process's files highest
    descriptor first, so that this close comes before those of its pipes and sockets, through
    which ``mpiexec`` and the other ranks learn that it died (and end theirs).
    """
    import socket

    path = _marker(directory, rank)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{os.getpid()} {socket.gethostname()}\n")
    os.replace(path + ".tmp", path)
    fd = os.open(os.path.join(directory, f"{ALIVE}{rank}"), os.O_WRONLY | os.O_CREAT, 0o600)
    _ALIVE.append(_high(fd))


def _high(fd: int) -> int:
    """``fd`` moved to the lowest free descriptor from 64 under the process's limit (at most
    4096), above those a process opens, or left where it is if it cannot move."""
    import fcntl
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    floor = (4096 if soft == resource.RLIM_INFINITY else min(soft, 4096)) - 64
    if floor <= fd:
        return fd
    try:
        high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor)
    except OSError:
        return fd
    os.close(fd)
    return high


def rank_markers(directory: str) -> dict[int, tuple[int, str]]:
    """The ranks that marked ``directory`` (:func:`mark_rank`): rank to ``(pid, host)``.

    A launcher that gives its job a directory of its own (``coded-shuffle run``) learns from them
    which process is which rank: which ranks never started, which one died.
    """
    out: dict[int, tuple[int, str]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return out
    for name in names:
        rank = name.partition(".")[2]
        if not name.startswith("rank.") or not rank.isdigit():
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                pid, host = f.read().split()
            out[int(rank)] = (int(pid), host)
        except (OSError, ValueError):
            continue
    return out


def ended_ranks(directory: str) -> set[int]:
    """The ranks whose guard ended them and the job (:func:`mpi_start`), as they marked ``directory``."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {int(n[6:]) for n in names if n.startswith("ended.") and n[6:].isdigit()}


def mpi_start(timeout: float, *, prog: str, markers: str | None = None) -> Any:
    """:func:`mpi_world`, within ``timeout`` seconds: MPI's start waits for every rank, and a rank
    that never reaches it (frozen, stopped) would hold the others there for ever.

    The start holds the interpreter (no Python thread runs meanwhile), so a guard process forked
    here watches it: if MPI has not started within ``timeout`` seconds, the guard prints one line
    on standard error, ``prog: error: rank R: ...``, and ends this rank (SIGKILL), and the
    launcher (``mpiexec``) then ends the others. With ``markers`` (a directory of the launcher's
    own) each rank first writes there its pid and host (:func:`mark_rank`): the line then names
    the ranks that never started, and only the lowest rank that did prints it (the other guards
    end their ranks only after a second ``timeout``, should that rank's guard not), and marks
    that it ended the job (:func:`ended_ranks`).
    """
    import select
    import signal

    if "mpi4py.MPI" in sys.modules:
        return mpi_world()
    rank, size = launch_rank(), _launch_number(_SIZE_VARIABLES)
    if markers is not None and rank is not None:
        mark_rank(markers, rank)
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the guard: a closed pipe says the rank has started MPI (or has ended)
        try:
            os.close(w)
            for fd in _ALIVE:  # the rank's alone: closed when the rank ends, not its guard
                os.close(fd)
            if select.select([r], [], [], timeout)[0]:
                os._exit(0)
            started = rank_markers(markers) if markers is not None and rank is not None else None
            if started is None or rank == min(started, default=rank):
                missing = [q for q in range(size or 0) if started is not None and q not in started]
                why = (
                    f"{'rank' if len(missing) == 1 else 'ranks'} {', '.join(map(str, missing))} did not start"
                    if missing else "MPI did not start"
                )  # fmt: skip
                me = "a rank" if rank is None else f"rank {rank}"
                os.write(2, f"{prog}: error: {me}: {why} within {timeout:g} s; ending the job\n".encode())
                if started is not None:
                    open(os.path.join(str(markers), f"ended.{rank}"), "w").close()
                time.sleep(0.25)  # the line reaches the launcher before the rank's end
            elif select.select([r], [], [], timeout)[0]:
                os._exit(0)
            os.kill(parent, signal.SIGKILL)
        finally:
            os._exit(0)
    os.close(r)
    try:
        return mpi_world()
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def mpi_exit(status: int, *, status_file: str | None = None) -> NoReturn:
    """End this rank with ``status``: flush, finalize MPI, exit.

    For an end every rank reaches with the same status (bad input, a failed check), where an
    exception or a non-zero ``sys.exit`` under ``python -m mpi4py`` aborts the job
    (``MPI_Abort``) and MPICH reports the abort. When ranks exit with a non-zero status, hydra
    (MPICH's ``mpiexec``) ends those still running, and its own status is then 9 at times instead
    of theirs. With ``status_file``, rank 0 writes ``status`` there and every rank exits with 0,
    so the launcher (``coded-shuffle run``) reads the job's status without that race.
    """
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    if status_file is not None and MPI.COMM_WORLD.Get_rank() == 0:
        with open(status_file, "w", encoding="ascii") as f:
            f.write(f"{status}\n")
    MPI.Finalize()
    os._exit(0 if status_file is not None else status)


def mpi_refuse(message: str, *, status_file: str | None = None) -> NoReturn:
    """End every rank for bad input: rank 0 prints ``message``, then all exit with status 2.

    Every rank reaches this with the same arguments; the others wait (``MPI_Barrier``) until rank
    0 has printed, or one rank's exit could abort the job before the message is out.
    """
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == 0:
        say(message)
    MPI.COMM_WORLD.Barrier()
    mpi_exit(2, status_file=status_file)


def mpi_abort(status: int) -> NoReturn:
    """End the whole job now, from any rank and any thread: ``MPI_Abort`` on ``COMM_WORLD``."""
    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    MPI.COMM_WORLD.Abort(status)
    os._exit(status)  # pragma: no cover - Abort does not return
