"""Reports: one :class:`TransitionReport` a transition, for every driver and every JSON output.

The in-process engine, the MPI program behind ``coded-shuffle run`` and both loaders report a
transition with the same object and the same names; ``simulate --json`` and ``run --json`` print
its :meth:`TransitionReport.to_dict`.

A report is a small core (what every transition has: its epoch and sizes, the shuffle's loads and
bounds, the bytes sent, the verdict and the times) and sections beside it, each a frozen
dataclass: the frames on the wire (:class:`Wire`), the units the counts are in
(:class:`Units`), and, where they apply, what the
workers sent each other (:class:`Exchange`), the split's bound (:class:`Split`), the times on a
network (:class:`OnNetwork`) and the MPI program's counters (:class:`Job`). The master's role
(:func:`coded_shuffle.engine.protocol.master_transition`) makes it once, at the end of the
transition, from everything it gathered; nothing changes it afterwards. :meth:`~TransitionReport.to_dict`
gives one flat JSON object, the keys :data:`KEYS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

from ..bounds import optimality_gap
from ..network import Network, TransitionTimes, transition_times
from .table import TABLE_COLUMNS, table_cells, table_legend, time_lines, unit_of

__all__ = [
    "TransitionReport", "Wire", "Units", "Exchange", "Split", "OnNetwork", "Job", "LinkCounts", "KEYS",
    "on_network", "RunReport", "time_lines", "unit_of", "TABLE_COLUMNS", "table_cells", "table_legend",
]  # fmt: skip


@dataclass(frozen=True)
class Wire:
    """The frames of the mode's delivery, as they went on the link, and their repairs.

    Attributes
    ----------
    xor_symbols, lone_symbols : int
        The planned symbols that XOR two records, and those that carry one alone.
    payload_bytes, header_bytes : int
        Payload and framing bytes (headers, entries, receiver index, padding) of the delivery's
        frames, repairs left out.
    frames : int
        Frames of the delivery.
    frames_rejected : int
        Frames a worker rejected (malformed, wrong header), summed over workers.
    repair_bytes : int
        The wire bytes of the frames re-sent in the repairs, and of multicast datagrams lost, sent
        again to the workers that lacked them.
    max_received_bytes : int
        The most payload bytes one worker received in the delivery (a broadcast: all of it), its
        framing and the repairs apart.
    control_bytes : int
        Bytes of the MPI transport's control messages (frame sizes), apart from ``wire_bytes``.
    link_mbps : float or None
        The paced speed of the master's link, if it was paced.
    """

    xor_symbols: int = 0
    lone_symbols: int = 0
    payload_bytes: int = 0
    header_bytes: int = 0
    frames: int = 0
    frames_rejected: int = 0
    repair_bytes: int = 0
    max_received_bytes: int = 0
    control_bytes: int = 0
    link_mbps: float | None = None

    @property
    def framing_overhead(self) -> float:
        """``header_bytes / payload_bytes`` (0 without payload)."""
        return float(self.header_bytes / self.payload_bytes) if self.payload_bytes else 0.0


@dataclass(frozen=True)
class Units:
    """What the counts of a report are in: whole records, sub-packets, or a storage's pieces.

    With ``subpackets = q > 1`` every count of symbols or points is in pieces of
    ``record_bytes / q`` bytes; with ``storage = M > 1`` records are cut into ``subpackets``
    pieces of ``piece_bytes`` bytes (zero-padded). Bytes are bytes.

    Attributes
    ----------
    subpackets : int
        Pieces a record, ``q`` (1: whole records).
    storage : int
        Batches each worker stores, ``M`` (1: its batch alone).
    piece_bytes : int or None
        Bytes of a piece of a storage (``storage > 1``).
    """

    subpackets: int = 1
    storage: int = 1
    piece_bytes: int | None = None


@dataclass(frozen=True)
class Exchange:
    """What the workers sent each other (``exchange``, and a split's exchanged half).

    Attributes
    ----------
    exchange_bytes, exchange_header_bytes : int
        Payload bytes the workers sent each other, and their framing (frame headers and entries).
    max_sent_bytes : int
        The most payload bytes one worker sent.
    """

    exchange_bytes: int = 0
    exchange_header_bytes: int = 0
    max_sent_bytes: int = 0


@dataclass(frozen=True)
class Split:
    """``split``'s own figure.

    Attributes
    ----------
    split_uplink_bound : int or None
        Its bound on its busiest sending uplink, in symbols: the larger of its coded half's genie
        lower bound (the master's uplink) and its exchanged half's least busiest upload (a
        worker's).
    """

    split_uplink_bound: int | None = None


@dataclass(frozen=True)
class OnNetwork:
    """The transition's times on a network (:func:`on_network`).

    Attributes
    ----------
    network : str or None
        The network (its SPEC).
    time_bound_seconds : float or None
        No scheme the network allows delivers this transition faster
        (:func:`~coded_shuffle.network.transition_times`).
    predicted_seconds : mapping or None
        Each mode's predicted time on the network; None for a mode it cannot run.
    choice : str or None
        The mode of the least predicted time.
    time_gap : float or None
        ``seconds / time_bound_seconds - 1``, where the transition ran on that network (``run``);
        None in process, where no network carries the bytes.
    split_seconds, split_coded_share : float or None
        The predicted time of the best split of the moved records between the master's coded
        broadcast and the workers' exchange, and the share coded, where it beats both alone
        (:func:`~coded_shuffle.network.split_time`; ``--mode split`` runs it); None otherwise.
    binding_links : mapping or None
        Each mode's binding link on the network, the link whose time its prediction is:
        ``master``, ``downlink``, ``uplink`` or ``relays``, ties joined by ``=``
        (:attr:`~coded_shuffle.network.TransitionTimes.binding_links`); None for a mode it
        cannot run.
    rack_loads : mapping or None
        The exchange on a network with racks: what its senders put on each link
        (:func:`~coded_shuffle.engine.schedule.exchange_rack_loads`), in units (``uploads``,
        ``downloads`` a worker, ``rack_up``, ``rack_down`` a rack, ``cross`` between racks in
        all) and in bytes beside them (the same names ending in ``_bytes``); None otherwise.
    """

    network: str | None = None
    time_bound_seconds: float | None = None
    predicted_seconds: Mapping[str, float | None] | None = None
    choice: str | None = None
    time_gap: float | None = None
    split_seconds: float | None = None
    split_coded_share: float | None = None
    binding_links: Mapping[str, str | None] | None = None
    rack_loads: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        _read_only(self, "predicted_seconds", "binding_links", "rack_loads")


@dataclass(frozen=True)
class Job:
    """What the MPI program measures besides the transition.

    Attributes
    ----------
    digests : tuple of str or None
        A digest of each worker's ids and bytes after the transition.
    bcast_bytes : int or None
        ``--bcast-baseline``: bytes of one plain broadcast of as many bytes as the delivery.
    bcast_seconds : float or None
        Seconds of that broadcast.
    """

    digests: tuple[str, ...] | None = None
    bcast_bytes: int | None = None
    bcast_seconds: float | None = None

    def __post_init__(self) -> None:
        _read_only(self, "digests")


@dataclass(frozen=True)
class LinkCounts:
    """Bytes each rank's network interfaces sent (``tx``) and received (``rx``) in a transition
    (``run --count-links``): read beside the protocol and gathered after the report is made, so
    not a part of it; :meth:`TransitionReport.to_dict` writes them beside its fields."""

    tx: tuple[int, ...]
    rx: tuple[int, ...]


def on_network(
    S: object, network: Network, *, record_bytes: int, coded_bytes: int, lower_bound: int, seconds: float,
    measured: bool, units: Units = Units(),
) -> OnNetwork:  # fmt: skip
    """A transition's time bound and each mode's predicted time on ``network`` (``S`` its shuffle
    matrix, in records; the coded plan's ``coded_bytes``, the genie ``lower_bound`` in records);
    ``measured``: the transition ran on that network in ``seconds``, so that ``time_gap``
    compares them with the bound. One batch a worker, whole records (ValueError otherwise: the
    bound counts records).

    Examples
    --------
    >>> net = Network.parse("up=1,down=1")
    >>> on = on_network([[0, 1], [1, 0]], net, record_bytes=125_000, coded_bytes=125_000,
    ...                 lower_bound=1, seconds=1.5, measured=True)
    >>> on.time_bound_seconds, on.choice, on.time_gap
    (1.0, 'exchange', 0.5)
    """
    if units.storage != 1 or units.subpackets != 1:
        raise ValueError(
            "Argument 'network' applies to one batch a worker of whole records, not "
            f"storage = {units.storage}, subpackets = {units.subpackets}."
        )
    times = transition_times(
        S, record_bytes=record_bytes, network=network, coded_symbols=coded_bytes / record_bytes,
        lower_bound_symbols=lower_bound,
    )  # fmt: skip
    return network_times(times, network, seconds=seconds, measured=measured)


def network_times(times: TransitionTimes, network: Network, *, seconds: float, measured: bool) -> OnNetwork:
    """The report's section of a transition's ``times`` on ``network`` (those of records of one size,
    :func:`on_network`, or of records of many sizes, :func:`~coded_shuffle.network.predict_bytes`);
    ``measured``: the transition ran on that network in ``seconds``."""
    d = times.to_dict()
    bound = times.bound_seconds
    return OnNetwork(
        network=str(network), time_bound_seconds=bound, predicted_seconds=d["predicted_seconds"],  # type: ignore[arg-type]
        choice=times.choice, time_gap=seconds / bound - 1 if measured and bound > 0 else None,
        split_seconds=times.split_seconds, split_coded_share=times.split_coded_share,
        binding_links=dict(times.binding_links),
    )  # fmt: skip


@dataclass(frozen=True)
class TransitionReport:
    """One transition ``t -> t + 1``: its inputs beside what was sent, repaired and checked.

    The core below is every transition's; the sections beside it (``wire``, ``units``,
    ``exchange``, ``split``, ``on_network``, ``job``) hold what one scheme, network or driver
    adds, None where it does not apply. Counts of symbols or points are in the units of
    ``units`` (:class:`Units`: records, or pieces of them); bytes are bytes.

    Attributes
    ----------
    epoch : int
        The epoch ``t + 1`` whose batches were delivered.
    mode : str
        The delivery: ``coded`` (the coded scheme, broadcast), ``uncoded`` (every moved record
        from the master to its new holder alone), ``exchange`` (the workers send each other what
        each misses, the master taking no part) or ``split`` (both, a share each).
    K, N, record_bytes : int
        Workers, records, record width ``B`` (the longest length for variable records).
    seed : int or None
        Seed of the epoch orders, where the driver knows it.
    strategy : str
        Cycle packing strategy of the coded plan.
    coded_symbols : int or None
        The coded scheme's load: order-2 and cycle XORs plus lone leftovers. None where the coded
        plan cannot be made: an ``exchange`` with a storage above one batch beyond
        :data:`~coded_shuffle.storage.STORAGE_MAX_K` workers (so too ``coded_bytes``,
        ``lower_bound``, ``lower_bound_exact``, ``optimal`` and ``optimality_gap``).
    uncoded_symbols : int
        The uncoded load ``W``: one symbol per record that changes worker.
    coded_bytes, uncoded_bytes : int
        Payload bytes of the coded scheme and of the uncoded scheme for this shuffle (the coded
        plan is made whatever the mode: every mode is compared with it; an ``exchange`` makes it
        after its delivery, for the report).
    planned_symbols : int
        Symbols this mode's scheme planned to send (``coded_symbols`` or ``uncoded_symbols``).
    wire_symbols, wire_bytes : int
        Symbols and bytes that left the master: the delivery's frames and the repairs' (0 for
        ``exchange``).
    lower_bound : int or None
        Genie lower bound on the load, in symbols (:func:`coded_shuffle.bounds.lower_bound`).
    lower_bound_exact : bool or None
        Whether the bound is the exact best ordering.
    download_bound_bytes : int
        The most bytes a worker misses: no delivery, coded or not, gives the busiest downlink less.
    upload_bound_bytes : int
        The least busiest upload of any exchange between the workers, fractional optimum rounded
        up (:func:`~coded_shuffle.plan.upload_bound`).
    repairs, repair_rounds : int
        Points re-sent alone after a failed decode or check, and the rounds needed (0 when
        nothing failed).
    records_checked : int
        Records compared with the master's checksums after the transition (``N`` when complete).
    verified : bool
        True only when every record of every worker was checked, matched, and the records are
        conserved.
    seconds : float
        Wall time on the master from the start of the delivery (a barrier of all parties) to the
        last worker's result after the repairs; the final check is ``timings["check"]``.
    timings : mapping
        Seconds per stage: ``plan``, ``encode``, ``send`` (on the master), ``deliver`` and
        ``decode`` (the slowest worker's), ``repair``, ``check``, and ``paced_wait`` (the master's
        wait on a paced link).
    wire : Wire
        The delivery's frames and repairs on the link.
    units : Units
        What the counts are in.
    exchange : Exchange or None
        What the workers sent each other; None where they sent nothing.
    split : Split or None
        ``split``'s bound on its busiest uplink; None for the other modes.
    on_network : OnNetwork or None
        The times on a network (``network=``, ``--network``); None without one.
    job : Job or None
        The MPI program's digests and counters; None in process.
    """

    epoch: int
    mode: str
    K: int
    N: int
    record_bytes: int
    strategy: str
    coded_symbols: int | None
    uncoded_symbols: int
    coded_bytes: int | None
    uncoded_bytes: int
    planned_symbols: int
    wire_symbols: int
    wire_bytes: int
    lower_bound: int | None
    lower_bound_exact: bool | None
    repairs: int
    repair_rounds: int
    records_checked: int
    verified: bool
    seconds: float
    timings: Mapping[str, float] = field(default_factory=dict)
    seed: int | None = None
    download_bound_bytes: int = 0
    upload_bound_bytes: int = 0
    wire: Wire = Wire()
    units: Units = Units()
    exchange: Exchange | None = None
    split: Split | None = None
    on_network: OnNetwork | None = None
    job: Job | None = None

    def __post_init__(self) -> None:
        _read_only(self, "timings")

    @property
    def optimal(self) -> bool | None:
        """The certificate ``coded_symbols == lower_bound``: no scheme can send fewer symbols
        (None without the coded plan)."""
        if self.coded_symbols is None or self.lower_bound is None:
            return None
        return self.coded_symbols == self.lower_bound

    @property
    def optimality_gap(self) -> float | None:
        """``coded_symbols / lower_bound - 1``: at most how far the coded load is from the best
        possible (:func:`coded_shuffle.bounds.optimality_gap`); 0 exactly when ``optimal``
        (None without the coded plan)."""
        if self.coded_symbols is None or self.lower_bound is None:
            return None
        return optimality_gap(self.coded_symbols, self.lower_bound)

    @property
    def sent_bytes(self) -> int:
        """Bytes this transition put on the links, framing and repairs included: what left the
        master (``wire_bytes``) and what the workers sent each other (the ``exchange`` section's
        bytes and framing), whatever the mode: the bytes of the epoch it delivered.

        Examples
        --------
        >>> from coded_shuffle.engine import simulate
        >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0, mode="exchange").transitions[0]
        >>> x = rep.exchange
        >>> rep.sent_bytes == x.exchange_bytes + x.exchange_header_bytes > rep.uncoded_bytes
        True
        """
        x = self.exchange or Exchange()
        return int(self.wire_bytes) + int(x.exchange_bytes) + int(x.exchange_header_bytes)

    def to_dict(self, links: LinkCounts | None = None) -> dict[str, Any]:
        """Return the report as one flat JSON-ready dict of plain Python values: the keys
        :data:`KEYS`, the core's and every section's (a section that does not apply gives its
        defaults: zeros, or None), with ``optimal``, ``optimality_gap``, ``framing_overhead`` and
        ``sent_bytes``; and ``link_tx_bytes``, ``link_rx_bytes`` from ``links`` (None without).

        Examples
        --------
        >>> from coded_shuffle.engine import simulate
        >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0).transitions[0]
        >>> d = rep.to_dict()
        >>> d["K"], d["N"], d["verified"], d["coded_symbols"] <= d["uncoded_symbols"], d["network"]
        (3, 30, True, True, None)
        """
        flat: dict[str, Any] = {
            "optimal": self.optimal, "optimality_gap": self.optimality_gap, "sent_bytes": self.sent_bytes,
            "framing_overhead": self.wire.framing_overhead,
            "link_tx_bytes": None if links is None else list(links.tx),
            "link_rx_bytes": None if links is None else list(links.rx),
        }  # fmt: skip
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _SECTIONS:
                section = value if value is not None else _SECTIONS[f.name]()
                flat.update((g.name, _plain(getattr(section, g.name))) for g in fields(section))
            else:
                flat[f.name] = _plain(value)
        return {key: flat[key] for key in KEYS}


_SECTIONS: dict[str, type] = {
    "wire": Wire, "units": Units, "exchange": Exchange, "split": Split,
    "on_network": OnNetwork, "job": Job,
}  # fmt: skip

#: The keys of :meth:`TransitionReport.to_dict`, in its order (docs/cli.md's table of the
#: transition report says what each means).
KEYS = (
    "epoch", "mode", "K", "N", "record_bytes", "strategy", "coded_symbols", "uncoded_symbols",
    "lower_bound", "lower_bound_exact", "optimal", "planned_symbols", "xor_symbols", "lone_symbols",
    "wire_symbols", "wire_bytes", "payload_bytes", "header_bytes", "framing_overhead", "coded_bytes",
    "uncoded_bytes", "frames", "frames_rejected", "repairs", "repair_bytes", "repair_rounds",
    "records_checked", "verified", "seconds", "timings", "subpackets", "storage", "piece_bytes", "seed",
    "link_mbps", "control_bytes", "exchange_bytes", "exchange_header_bytes", "max_sent_bytes",
    "max_received_bytes", "download_bound_bytes", "upload_bound_bytes", "digests", "link_tx_bytes",
    "link_rx_bytes", "bcast_bytes", "bcast_seconds", "network", "time_bound_seconds", "predicted_seconds",
    "choice", "time_gap", "split_seconds", "split_coded_share", "split_uplink_bound", "binding_links",
    "rack_loads", "optimality_gap", "sent_bytes",
)  # fmt: skip


def _read_only(obj: object, *names: str) -> None:
    """Make the mappings and sequences ``names`` of the frozen ``obj`` read-only copies (a report
    is not changed after it is made, inside either)."""
    for name in names:
        value = getattr(obj, name)
        if isinstance(value, Mapping):
            object.__setattr__(obj, name, MappingProxyType(dict(value)))
        elif isinstance(value, list | tuple):
            object.__setattr__(obj, name, tuple(value))


def _plain(value: Any) -> Any:
    """``value`` as JSON takes it: mappings as dicts, sequences as lists, copied."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True)
class RunReport:
    """A run of several transitions, with its inputs.

    Attributes
    ----------
    K, N, record_bytes, epochs, seed : int
        The inputs.
    strategy : str
        Cycle packing strategy.
    transitions : tuple of TransitionReport
        One report per transition, in order.
    subpackets : int
        Pieces a record, ``q``.
    storage : int
        Batches each worker stores, ``M``.
    """

    K: int
    N: int
    record_bytes: int
    epochs: int
    seed: int
    strategy: str
    transitions: tuple[TransitionReport, ...]
    subpackets: int = 1
    storage: int = 1

    @property
    def verified(self) -> bool:
        """Whether every transition was verified."""
        return all(t.verified for t in self.transitions)

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict.

        Examples
        --------
        >>> from coded_shuffle.engine import simulate
        >>> simulate(K=2, N=10, record_bytes=4, epochs=2, seed=1).to_dict()["epochs"]
        2
        """
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["transitions"] = [t.to_dict() for t in self.transitions]
        d["verified"] = self.verified
        return d
