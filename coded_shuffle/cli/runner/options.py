"""The options of an MPI job, as one typed value: what :mod:`coded_shuffle.cli.runner.mpi_job` and
:mod:`coded_shuffle.cli.runner.peers_job` read.

The command line builds it (:func:`coded_shuffle.cli.job.job_options`), after checking every
option and filling in the defaults; docs/mpi.md says what each option does.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...records import RecordSource, format_of, open_format

__all__ = ["JobOptions"]


@dataclass(frozen=True)
class JobOptions:
    """One MPI job's options, checked, defaults filled in.

    ``points`` and ``record_bytes`` are None when the records come from ``data`` (a path in
    ``format``: :meth:`records`); ``bcast_baseline`` is for benchmarks only. What a test makes
    happen in a job (a rank that fails, a corrupted frame, dropped datagrams) is no option: see
    :mod:`.hooks`.

    Examples
    --------
    >>> JobOptions(points=100, record_bytes=64).mode
    'coded'
    """

    data: str | None = None
    #: The format of ``data`` (a name of :data:`~coded_shuffle.records.FORMATS`), ``"auto"``: told
    #: from the path; and the options of that format, None where not given.
    format: str = "auto"
    token_window: int | None = None
    token_dtype: str | None = None
    field: str | None = None
    points: int | None = 6000
    record_bytes: int | None = 1024
    epochs: int = 3
    #: The workers of each epoch (``epochs + 1`` counts, the largest the job's), or None: all of them.
    epoch_workers: tuple[int, ...] | None = None
    start_epoch: int = 0
    seed: int = 0
    mode: str = "coded"
    strategy: str = "greedy"
    storage: int = 1
    order: str = "auto"
    shard_size: int = 10_000
    canonical_nodes: int = 1
    block_size: int = 1 << 18
    link_mbps: float | None = None
    max_frame_bytes: int = 1 << 26
    max_repair_rounds: int = 3
    timeout: float | None = None
    count_links: bool = False
    #: The network the job runs on (``--network SPEC``), for each report's time bound, or None.
    network: str | None = None
    #: ``GROUP:PORT``: the master's broadcasts as UDP multicast datagrams there, or None.
    multicast: str | None = None
    #: UDP payload of a multicast datagram, its header included.
    datagram_bytes: int = 1472
    #: Where the master's datagrams go: ``"receivers"``, each span to the scoped group of its
    #: readers; ``"all"``, every datagram to the one group; ``"auto"``, receivers where the
    #: network's switch snoops (``network`` has ``snooping``), else all.
    multicast_scope: str = "auto"
    #: How the workers' exchange goes: ``"alltoall"``, every pair's flow at once (the default);
    #: ``"rounds"``, rounds of matchings (:func:`~coded_shuffle.plan.exchange_rounds`).
    exchange_schedule: str = "alltoall"
    #: Bytes a phase of a probe of the links at the start (``--probe``), or None: no probe.
    probe: int | None = None
    #: The folder of the workers' cache files on their hosts (``--cache-dir``), from which the job
    #: starts and where each worker keeps its units of every epoch (:mod:`.held`), or None.
    cache_dir: str | None = None
    #: Where the results go: None for a table on standard output, ``"-"`` for JSON lines there,
    #: else the path of a file of JSON lines.
    json: str | None = None
    #: Where the master writes its results and the job's status (for ``coded-shuffle run``).
    results: str | None = None
    status_file: str | None = None
    bcast_baseline: bool = False

    def __post_init__(self) -> None:
        if self.data is None and (self.points is None or self.record_bytes is None):
            raise ValueError("Argument 'points' and 'record_bytes' must be given without 'data'.")

    def records(self) -> RecordSource:
        """The record source of ``data``, opened through the registry of formats (zero copy
        where the format allows: a ``.npy`` file is memory-mapped); ValueError, OSError or
        ImportError where it cannot be opened."""
        assert self.data is not None
        fmt = (format_of(self.data) or "npy") if self.format == "auto" else self.format
        opts = {"window": self.token_window, "dtype": self.token_dtype, "field": self.field}
        return open_format(self.data, fmt, **opts)

    def synthetic(self) -> tuple[int, int] | str:
        """``(points, record_bytes)`` of the random records the job draws (no ``data``), or why
        they cannot be drawn."""
        assert self.points is not None and self.record_bytes is not None
        if self.points * self.record_bytes > 1 << 34:
            return "--points x --record-bytes must be at most 16 GiB"
        return self.points, self.record_bytes
