"""``coded-shuffle run``: launch the MPI program under ``mpiexec``, forward signals, relay results."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from typing import Any

from .._progress import say
from ..engine.schemes import ranks
from ._parser import COMMANDS
from .common import (
    PROG,
    UsageError,
    auto_mode,
    compile_kernels,
    network_option,
    order_spec,
)
from .data import check_format
from .job import MODES, add_job_arguments, check_job, data_records, job_arguments

MPI_INSTALL_HINT = "pip install 'mpi4py>=4' mpich (what the extra [mpi] installs)"


def find_mpiexec() -> str | None:
    """Return the ``mpiexec`` beside the running Python (the MPI extra's), else the one on PATH."""
    import shutil

    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


#: ``coded-shuffle run`` launches ``mpiexec -n K+1 python -m mpi4py -m MPI_PROGRAM ...`` (``-n K``
#: for a scheme that runs among peers alone, the exchange: a job of peers).
MPI_PROGRAM = "coded_shuffle.mpi_program"


def run_command(args: argparse.Namespace, mpiexec: str) -> list[str]:
    """Return the ``mpiexec`` command line that ``coded-shuffle run`` launches.

    Options left at their defaults are not passed on, so the program sees what the user gave.
    The schemes of ``--mode`` say how many ranks (:func:`~coded_shuffle.engine.schemes.ranks`):
    ``--mode exchange`` alone is a job of ``K`` peers, every rank a worker (no master rank).
    """
    n = ranks(MODES[args.mode or "coded"], args.workers)
    return [mpiexec, "-n", str(n), sys.executable, "-m", "mpi4py", "-m", MPI_PROGRAM,
            *job_arguments(args)]  # fmt: skip


def _cmd_run(args: argparse.Namespace) -> int:
    """``run``: ``--data`` in any format is opened and checked here, before any process starts (its
    format resolved from the path, passed on to the ranks with its options); the ranks open it
    themselves, through its record source."""
    if args.data is not None and not (args.points or args.record_bytes):
        fmt = check_format(args)
        if fmt != "npy":  # the ranks are told the format, not left to tell it again
            args.format = fmt
        data_records(args, args.workers)  # opened once here (kept in args.records) and checked
    return _launch_checked(args)


def _launch_checked(args: argparse.Namespace) -> int:
    """Check the job's options, choose its mode (``--mode auto``), compile the kernels and launch it."""
    import importlib.util

    filled = check_job(args, workers=args.workers)
    if args.mode == "auto":
        args = _auto(args, filled)
    mpiexec = find_mpiexec()
    if mpiexec is None or importlib.util.find_spec("mpi4py") is None:
        what = "mpiexec" if mpiexec is None else "mpi4py"
        raise UsageError(f"{what} not found; install the MPI extra: {MPI_INSTALL_HINT}")
    from ..warmup import KERNEL_GROUPS

    compile_kernels(KERNEL_GROUPS)  # once here, not in every rank
    sys.stdout.flush()
    return launch(run_command(args, mpiexec))


def _auto(args: argparse.Namespace, filled: argparse.Namespace) -> argparse.Namespace:
    """``--mode auto``: ``args`` with the mode of least predicted time of the job's first transition
    on its ``--network`` (the records' number and size read from ``--data``'s header) among those
    the options given can run (the checks of each mode, as if it had been given), said in one line
    on standard error."""
    if filled.data is not None:
        N, B, sizes = data_records(filled, args.workers)  # sizes: None where the records have one
    else:
        N, B, sizes = filled.points, filled.record_bytes, None

    def refusal(mode: str) -> str | None:
        try:
            check_job(argparse.Namespace(**{**vars(args), "mode": mode}), workers=args.workers)
        except UsageError as exc:
            return str(exc)
        return None

    network = network_option(filled, stored=True)
    mode, line = auto_mode(N, args.workers, filled.seed, order_spec(args, N), B, network, filled.strategy,
                           epoch=filled.start_epoch, refusal=refusal, sizes=sizes,
                           storage=filled.storage)  # fmt: skip
    say(f"{PROG}: {line}")
    return argparse.Namespace(**{**vars(args), "mode": mode})


#: The signals ``coded-shuffle run`` passes on to its MPI job before it ends.
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _copy_new(path: str, offset: int) -> int:
    """Copy to standard output the whole lines added to ``path`` after ``offset``; return the new offset."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return offset
    end = data.rfind(b"\n") + 1
    if end:
        sys.stdout.buffer.write(data[:end])
        sys.stdout.flush()
    return offset + end


def _end_job(proc: Any, grace: float) -> None:
    """End the job's process group: SIGTERM, and SIGKILL to whatever is left after ``grace`` s."""
    import subprocess

    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)


def launch(cmd: list[str]) -> int:
    """Run the MPI job ``cmd`` (``mpiexec ...``) to its end and return ``coded-shuffle run``'s status.

    The master writes its results to a file that is copied to standard output line by line as
    the job runs, and its status to another; the ranks write to standard error, and what
    ``mpiexec`` prints on its standard output is relayed to standard error when it ends
    (:func:`_relay`), so that MPICH's reports never reach standard output. The job runs in a process group
    of its own; SIGTERM, SIGINT and SIGHUP to this process end it (SIGTERM, then SIGKILL after
    3 s), and the ranks watch this process, so that none outlives it by more than a few seconds
    even after a SIGKILL (:mod:`coded_shuffle.engine.mpi`). Status: the master's (0, 1 for a
    failed verification, 2 for bad input), 1 for a job that failed otherwise, 128 + N after
    signal N.
    """
    import subprocess
    import tempfile

    from ..engine.mpi import LAUNCHER_ENV

    got: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        got.append(signum)

    peers = _is_peers(cmd)
    started = time.time() - 1.0  # a segment's time is that of its file system's clock

    with tempfile.TemporaryDirectory(prefix="coded-shuffle-run-") as tmp:
        results, status = os.path.join(tmp, "results"), os.path.join(tmp, "status")
        hydra = open(os.path.join(tmp, "mpiexec.out"), "w+b")  # noqa: SIM115 (closed below)
        env = dict(os.environ, **{LAUNCHER_ENV: str(os.getpid())})
        previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
        offset = 0
        watch = _RankWatch(tmp, _ranks_of(cmd))
        try:
            proc = subprocess.Popen(
                [*cmd, "--results", results, "--status-file", status],
                stdout=hydra,
                env=env,
                start_new_session=True,
            )
            while not got:  # copy the results as they come, until mpiexec ends or a signal comes
                offset = _copy_new(results, offset)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(0.1)
                if proc.returncode is not None:
                    break
            # After a signal: end the job. Otherwise mpiexec has ended, and so have the ranks; a
            # rank that has not is ended too.
            _end_job(proc, grace=3.0 if got else 0.5)
            _copy_new(results, offset)
        finally:
            watch.close()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            report = _relay(hydra, ended_by_the_program=_read_status(status) is not None and not got)
        if got or proc.returncode != 0:  # an abort leaves MPICH's shared memory behind
            clear_segments(started)
        if got:
            name = signal.Signals(got[0]).name
            say(f"{PROG}: error: stopped by {name}; the MPI job was ended")
            return 128 + got[0]
        code = _read_status(status)
        who = _who_ended(report, watch, peers) if code is None else ""
    if code is None:
        status_line = f"(mpiexec exit status {proc.returncode})"
        say(f"{PROG}: error: the MPI job failed{who} {status_line}")
        return 1
    return code


#: Where MPICH keeps the shared memory of the ranks of a host, and its segments' prefix.
SHM_DIR, SHM_PREFIX = "/dev/shm", "mpich_shm_"


def clear_segments(since: float, directory: str = SHM_DIR) -> list[str]:
    """Remove MPICH's shared-memory segments that a job which did not end cleanly left behind.

    MPICH removes a host's segment when its ranks finalize; after an abort, a rank killed or the
    job stopped by a signal it stays in ``directory`` (memory of the host, about 3 to 270 MB a job
    by its ranks) until the host restarts. A segment goes if it is this user's, was last changed
    at ``since`` (the job's start) or later, and no process of this host has it open or mapped
    (``/proc/*/fd`` and ``/proc/*/maps``): a job running beside this one keeps its own, the
    process that creates one holding it open from the start. Returns the paths removed.
    """
    try:
        names = sorted(n for n in os.listdir(directory) if n.startswith(SHM_PREFIX))
    except OSError:
        return []
    left = []
    for name in names:
        path = os.path.join(directory, name)
        with contextlib.suppress(OSError):
            st = os.stat(path)
            if st.st_uid == os.getuid() and st.st_mtime >= since:
                left.append(path)
    if not left:
        return []
    used = _in_use(directory)
    gone = []
    for path in left:
        if path not in used:
            with contextlib.suppress(OSError):
                os.unlink(path)
                gone.append(path)
    return gone


def _in_use(directory: str) -> set[str]:
    """The files of ``directory`` that a process of this host has open or mapped."""
    used: set[str] = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/maps") as maps:
                used.update(line.split(maxsplit=5)[5].strip() for line in maps if directory in line)
            fds = f"/proc/{pid}/fd"
            for fd in os.listdir(fds):
                with contextlib.suppress(OSError):
                    target = os.readlink(os.path.join(fds, fd))
                    if target.startswith(directory):
                        used.add(target)
    return {u.removesuffix(" (deleted)") for u in used}


def _is_peers(cmd: list[str]) -> bool:
    """Whether the job ``cmd`` launches is one of peers (``--mode exchange`` alone: no master)."""
    for i, arg in enumerate(cmd):
        mode = arg.partition("=")[2] if arg.startswith("--mode=") else cmd[i + 1] if arg == "--mode" else None
        if mode is not None and mode in MODES:
            return MODES[mode] == ("exchange",)
    return False


def _ranks_of(cmd: list[str]) -> int | None:
    """The number of ranks ``mpiexec -n N ...`` starts (None if not said so)."""
    for flag, value in zip(cmd, cmd[1:], strict=False):
        if flag in ("-n", "-np") and value.isdigit():
            return int(value)
    return None


def _rank_name(rank: int, peers: bool) -> str:
    """``rank 2 (worker 1)``: a rank and its role (rank 0 is the master, or among peers the leader)."""
    if peers:
        return f"rank {rank} (worker {rank}{', the leader' if rank == 0 else ''})"
    return f"rank {rank} ({'the master' if rank == 0 else f'worker {rank - 1}'})"


class _RankWatch:
    """Which rank of the job ended first, seen from the launcher.

    The ranks mark ``directory`` as they start (:func:`coded_shuffle.transport.mark_rank`): their
    pid and host, and a file each keeps open while it lives, which the kernel closes as the rank
    ends. A thread here reads those closes (inotify), in the order the kernel made them, however
    late it is scheduled on a host whose cores the ranks keep busy, and waits on each rank of this
    host (a pidfd) to read how it ended while it is a zombie, before its parent reaps it.

    ``mpiexec``'s own report names a process that ended badly, but at times one it ended itself
    after the first had died (each then killed by SIGKILL): the order seen here decides.
    """

    def __init__(self, directory: str, size: int | None = None) -> None:
        import socket
        import threading

        self.directory = directory
        self.size = size
        self.host = socket.gethostname()
        self.ranks: dict[int, tuple[int, str]] = {}
        self._fds: dict[int, int] = {}
        #: The ranks of this host in the order they ended (read from the kernel's closes).
        self.order: list[int] = []
        #: Without inotify: the ranks seen ended, in batches, each batch ended between two looks.
        self.ended: list[list[int]] = []
        #: The wait status of a rank read while it was a zombie, before its parent reaped it.
        self.status: dict[int, int] = {}
        self._closes = _watch_closes(directory)
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="coded-shuffle rank watch", daemon=True)
        self._thread.start()

    def _look(self) -> None:
        """Open a pidfd for each rank of this host newly marked (a rank gone already has ended)."""
        from ..transport import rank_markers

        seen = {r for batch in self.ended for r in batch}
        for rank, (pid, host) in rank_markers(self.directory).items():
            if rank in self.ranks or host != self.host:
                continue
            self.ranks[rank] = (pid, host)
            try:
                self._fds[rank] = os.pidfd_open(pid)
            except (OSError, AttributeError):  # gone already, or no pidfd here
                if not _running(pid) and rank not in seen:
                    self.ended.append([rank])

    def _run(self) -> None:
        import select

        while not self._stopping:
            self._look()
            marked = self.size is not None and len(self.ranks) >= self.size
            poller = select.poll()
            for fd in (self._wake_r, self._closes, *self._fds.values()):
                if fd is not None:
                    poller.register(fd, select.POLLIN)
            ready = {fd for fd, _ in poller.poll(None if marked else 50)}
            if self._closes in ready:
                self.order += [r for r in _closed_ranks(self._closes) if r not in self.order]
            batch = sorted(r for r, fd in self._fds.items() if fd in ready)
            for r in batch:
                status = _exit_status(self.ranks[r][0])
                os.close(self._fds.pop(r))
                if status is not None:
                    self.status[r] = status
            if batch:
                self.ended.append(batch)

    def close(self) -> None:
        """Stop the thread (at most one look after the last) and close every descriptor."""
        self._stopping = True
        os.write(self._wake_w, b"x")
        self._thread.join(5.0)
        for fd in (*self._fds.values(), self._wake_r, self._wake_w, self._closes):
            if fd is not None:
                os.close(fd)
        self._fds.clear()

    def first(self) -> int | None:
        """The one rank that ended before any other (None if none, or several at once)."""
        if self.order:
            return self.order[0]
        return self.ended[0][0] if self.ended and len(self.ended[0]) == 1 else None


#: inotify's event for the close of a file open for writing (``<sys/inotify.h>``).
_IN_CLOSE_WRITE = 0x8


def _watch_closes(directory: str) -> int | None:
    """An inotify descriptor that reports each close of a file written in ``directory``, or None
    where there is no inotify (not Linux)."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = int(libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    if libc.inotify_add_watch(fd, os.fsencode(directory), _IN_CLOSE_WRITE) < 0:
        os.close(fd)
        return None
    return fd


def _closed_ranks(fd: int) -> list[int]:
    """The ranks whose ``alive.R`` was closed, in the order of the events read from ``fd``."""
    import struct

    from ..transport.mpi import ALIVE

    out: list[int] = []
    while True:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return out
        at = 0
        while at + 16 <= len(data):
            length = struct.unpack_from("iIII", data, at)[3]
            name = data[at + 16 : at + 16 + length].rstrip(b"\0").decode(errors="replace")
            at += 16 + length
            if name.startswith(ALIVE) and name[len(ALIVE) :].isdigit():
                out.append(int(name[len(ALIVE) :]))


def _exit_status(pid: int) -> int | None:
    """The wait status of the zombie ``pid`` (``/proc/PID/stat``'s ``exit_code``), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        return int(fields[49]) if fields[0] == b"Z" else None
    except (OSError, IndexError, ValueError):
        return None


def _running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _who_ended(report: bytes, watch: _RankWatch, peers: bool) -> str:
    """``": rank 2 (worker 1) was killed by SIGKILL"``: which rank ended a failed job, and how,
    for the closing line (empty if unknown).

    The rank is the one the launcher saw end first (:class:`_RankWatch`), else the process that
    hydra's report (:data:`_HYDRA_REPORT`) names; how it ended is the report's (its exit code or
    signal) where the report names that rank.
    """
    import re

    from ..transport.mpi import ended_ranks

    ranks = {v: r for r, v in watch.ranks.items()}
    pid = re.search(rb"PID (\d+) RUNNING AT (\S+)", report)
    named = None if pid is None else ranks.get((int(pid.group(1)), pid.group(2).decode(errors="replace")))
    first = watch.first()
    rank = named if first is None else first
    if rank is None:
        return ""
    if rank in ended_ranks(watch.directory):  # its guard ended the job, and said why
        return f": {_rank_name(rank, peers)} ended it"
    how = "ended first"
    if rank in watch.status:
        status = watch.status[rank]
        killed = status & 0x7F
        how = f"was killed by {_signal_name(killed)}" if killed else f"exited with status {status >> 8}"
    elif rank == named:
        sig = re.search(rb"EXIT STRING: [^\n]*\(signal (\d+)\)", report)
        code = re.search(rb"EXIT CODE: (\d+)", report)
        if sig is not None:
            how = f"was killed by {_signal_name(int(sig.group(1)))}"
        elif code is not None:
            how = f"exited with status {int(code.group(1))}"
    return f": {_rank_name(rank, peers)} {how}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


#: First line of the report hydra (MPICH's mpiexec) prints when it kills ranks.
_HYDRA_REPORT = b"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"


def _relay(out: Any, *, ended_by_the_program: bool) -> bytes:
    """Copy what ``mpiexec`` printed on its standard output to standard error, and close it.

    When the master wrote the job's status (every rank then exits 0), a report of hydra's that it
    killed ranks is the race of the last ranks' exits (docs/mpi.md, "Failures"), not the job's
    outcome: it is left out, and the status's own line is the only one. Otherwise (no status: the
    job failed) everything is copied, the report included. Returns what ``mpiexec`` printed.
    """
    out.seek(0)
    text = whole = out.read()
    out.close()
    at = text.find(_HYDRA_REPORT)
    if ended_by_the_program and at >= 0:
        rule = text.rfind(b"=====", 0, at)  # the report starts at the rule above its first line
        text = text[: text.rfind(b"\n", 0, rule) + 1] if rule >= 0 else text[: text.rfind(b"\n", 0, at) + 1]
        text = text.rstrip(b"\n") + b"\n" if text.strip() else b""
    if text:
        sys.stderr.flush()
        sys.stderr.write(text.decode("utf-8", errors="replace"))
        sys.stderr.flush()
    return bytes(whole)


def _read_status(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def add_parser(sub: Any) -> None:
    """Add the ``run`` command to the subcommands ``sub``."""
    run = sub.add_parser(
        "run",
        help=COMMANDS["run"],
        description=(
            "Launch mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_program: the master holds the "
            "dataset, each worker only its batch; each transition is delivered coded (one broadcast), "
            "uncoded (each moved record from the master to its new holder) and/or exchange (the workers "
            "send each other what each misses), decoded and verified against the master's checksums. "
            f"Needs the MPI extra: {MPI_INSTALL_HINT}. The options are those of the program (docs/mpi.md)."
        ),
    )
    add_job_arguments(run, launcher=True)
    run.set_defaults(func=_cmd_run)
