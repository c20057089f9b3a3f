"""Coded data shuffling across processes: the MPI program behind ``coded-shuffle run``.

    mpiexec -n K+1 python -m mpi4py -m coded_shuffle.mpi_program --points N --record-bytes B \\
        --transitions E --seed S --mode coded|uncoded|exchange|split|both|all [--strategy greedy|lp|exact] \\
        [--link-mbps R] [--json [FILE]] ...

(``mpi/shuffle.py`` in the source tree is a thin entry to the same program.) A thin entry itself:
it parses the options of an MPI job (:mod:`coded_shuffle.cli.job`, the specification that
``coded-shuffle run`` shares), sets MPICH's environment, and runs the job's master on rank 0 and
its workers on ranks ``1..K`` (:mod:`coded_shuffle.cli.runner.mpi_job`). Run with ``python -m
mpi4py`` so that an exception on any rank aborts the whole job. Nothing here imports ``mpi4py``
at import time: :func:`main` initializes MPI through :func:`coded_shuffle.transport.mpi_start`.
See docs/mpi.md for the options and the report.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from .cli.common import UsageError
from .cli.job import (
    add_job_arguments,
    check_data_file,
    check_job,
    ignored_options,
    job_options,
    multicast_scope,
)
from .cli.runner.hooks import hooks
from .cli.runner.mpi_job import (
    MODES,
    PROG,
    master,
    start_watchdog,
    startup_timeout,
    worker,
)
from .cli.runner.options import JobOptions
from .engine.mpi import Watchdog, setup_step
from .engine.schemes import runs_among_peers
from .errors import TransportError
from .network import Network
from .transport import (
    FramedLink,
    MPITransport,
    MulticastLink,
    TokenBucket,
    launch_rank,
    mpi_exit,
    mpi_refuse,
    mpi_start,
)
from .transport.multicast import parse_group

__all__ = ["MODES", "check_data_file", "ignored_options", "main", "parse_args"]


class _Parser(argparse.ArgumentParser):
    """Every rank parses the same arguments; only rank 0 prints the error, all exit with 2."""

    def error(self, message: str) -> NoReturn:
        mpi_refuse(f"{PROG}: error: {message}", status_file=_status_file(sys.argv[1:]))


def _status_file(argv: list[str]) -> str | None:
    """The ``--status-file`` of ``argv`` (read before the arguments are parsed), or None."""
    for i, a in enumerate(argv):
        if a.startswith("--status-file="):
            return a.partition("=")[2]
        if a == "--status-file" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The job's options from ``argv`` (default ``sys.argv[1:]``), checked, defaults filled in."""
    argv = sys.argv[1:] if argv is None else list(argv)
    p = _Parser(
        prog=PROG,
        description="Coded data shuffling with MPI: rank 0 master, ranks 1..K workers.",
        allow_abbrev=False,
    )
    add_job_arguments(p, launcher=False)
    # For coded-shuffle run: where the master writes its results and the job's status.
    p.add_argument("--results", metavar="FILE", help=argparse.SUPPRESS)
    p.add_argument("--status-file", metavar="FILE", help=argparse.SUPPRESS)
    # For benchmarks (the faults of the tests are hooks: coded_shuffle.mpi_faults).
    p.add_argument("--bcast-baseline", action="store_true", help=argparse.SUPPRESS)
    # The workers' exchange in rounds of matchings or all at once (the default; for benchmarks).
    p.add_argument(
        "--exchange-schedule", choices=("rounds", "alltoall"), default="alltoall", help=argparse.SUPPRESS
    )
    args = p.parse_args(argv)
    try:
        args = check_job(args)
    except UsageError as exc:
        p.error(str(exc))
    if args.bcast_baseline and "coded" not in MODES[args.mode]:
        p.error("--bcast-baseline needs the coded mode")
    return args


def _uplink_pace(job: JobOptions) -> TokenBucket | None:
    """With ``--link-mbps``, the bucket pacing a worker's sends of the exchange: at the uplink of
    ``--network`` (``up=R``) when given, else at ``--link-mbps``; else None (unpaced)."""
    if not job.link_mbps:
        return None
    up = None if job.network is None else Network.parse(job.network).up
    return TokenBucket.from_mbps(up or job.link_mbps)


def _master_link(comm: Any, job: JobOptions, dog: Watchdog) -> FramedLink:
    """The link of a job with a master: MPI, its broadcasts multicast with ``--multicast`` (every
    rank refuses the job, naming the first rank that cannot join the group)."""
    pace = TokenBucket.from_mbps(job.link_mbps) if job.link_mbps else None
    link = MPITransport(comm, pace=pace)
    link.exchange_schedule = job.exchange_schedule
    link.exchange_pace = _uplink_pace(job)
    if job.multicast is None:
        return link
    group, port = parse_group(job.multicast)
    net = None if job.network is None else Network.parse(job.network)
    with setup_step(link, dog, "multicast"):
        try:
            return MulticastLink(
                link, group, port, datagram_bytes=job.datagram_bytes, drop=hooks().multicast_drop,
                scope=multicast_scope(job.multicast_scope, net), down_mbit=None if net is None else net.down,
                snooping=net is not None and net.snooping,
            )  # fmt: skip
        except TransportError as exc:
            problem = str(exc)
    mpi_refuse(f"{PROG}: error: --multicast: {problem}", status_file=job.status_file)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    job = job_options(args)
    # More ranks than cores on this node (tests and benchmarks on a laptop): let MPICH's busy-wait
    # loops yield the core (nanosleep), or waiting ranks starve the ones that compute. Set before
    # MPI starts.
    if int(os.environ.get("MPI_LOCALNRANKS", "1")) > (os.cpu_count() or 1):
        os.environ.setdefault("MPIR_CVAR_ENABLE_HEAVY_YIELD", "1")
    rank = launch_rank()
    hooks().fail(at="start", rank=-1 if rank is None else rank)
    # MPI's start waits for every rank: bounded as every later step is. Under coded-shuffle run the
    # ranks mark the launcher's directory (the status file's), which then names the missing ones.
    markers = os.path.dirname(os.path.abspath(job.status_file)) if job.status_file else None
    comm = mpi_start(startup_timeout(job), prog=PROG, markers=markers)
    dog = start_watchdog(job, comm.Get_rank())
    if runs_among_peers(MODES[job.mode]):  # no master: every rank a worker
        from .cli.runner.peers_job import peers

        link = MPITransport(comm, peers=True)
        link.exchange_schedule = job.exchange_schedule
        link.exchange_pace = _uplink_pace(job)
        code = peers(job, link, dog)
        if code or job.status_file:
            mpi_exit(code, status_file=job.status_file)
        return 0
    if comm.Get_size() < 2:
        mpi_refuse(
            f"{PROG}: error: needs a master and at least one worker: mpiexec -n K+1",
            status_file=job.status_file,
        )
    shared = _master_link(comm, job, dog)
    code = master(job, shared, dog) if shared.is_master else worker(job, shared, dog)
    if code or job.status_file:  # every rank has the master's code: a clean end, no MPI_Abort
        mpi_exit(code, status_file=job.status_file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
