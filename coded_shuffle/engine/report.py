"""Reports: one :class:`TransitionReport` a transition, for every driver and every JSON output.

The in-process engine, the MPI program behind ``coded-shuffle run`` and both loaders report a
transition with the same object and the same names; ``simulate --json`` and ``run --json`` print
its :meth:`TransitionReport.to_dict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ..bounds import optimality_gap
from ..network import Network, explain, transition_times

__all__ = [
    "TransitionReport", "RunReport", "time_lines", "unit_of", "TABLE_COLUMNS", "table_cells", "table_legend",
]  # fmt: skip


@dataclass(frozen=True)
class TransitionReport:
    """One transition ``t -> t + 1``: its inputs beside what was sent, repaired and checked.

    With ``subpackets = q > 1`` every count of symbols or points (``coded_symbols``,
    ``uncoded_symbols``, ``planned_symbols``, ``wire_symbols``, ``xor_symbols``, ``lone_symbols``,
    ``lower_bound``, ``repairs``) is in pieces of ``record_bytes / q`` bytes: divide by ``q`` for
    records. With ``storage = M > 1`` records are cut into ``subpackets = C(K - 1, M - 1)`` pieces
    of ``piece_bytes`` bytes (zero-padded) and the counts are in pieces too. Bytes are bytes.

    Attributes
    ----------
    epoch : int
        The epoch ``t + 1`` whose batches were delivered.
    mode : str
        The delivery: ``coded`` (the coded scheme, broadcast), ``uncoded`` (every moved record
        from the master to its new holder alone) or ``exchange`` (the workers send each other what
        each misses, the master taking no part).
    K, N, record_bytes : int
        Workers, records, record width ``B`` (the longest length for variable records).
    strategy : str
        Cycle packing strategy of the coded plan.
    coded_symbols : int
        The coded scheme's load: order-2 and cycle XORs plus lone leftovers.
    uncoded_symbols : int
        The uncoded load ``W``: one symbol per record that changes worker.
    lower_bound : int
        Genie lower bound on the load, in symbols (:func:`coded_shuffle.bounds.lower_bound`).
    lower_bound_exact : bool
        Whether the bound is the exact best ordering.
    optimal : bool
        The certificate ``coded_symbols == lower_bound``: no scheme can send fewer symbols.
    planned_symbols : int
        Symbols this mode's scheme planned to send (``coded_symbols`` or ``uncoded_symbols``).
    xor_symbols, lone_symbols : int
        The planned symbols that XOR two records, and those that carry one alone.
    wire_symbols, wire_bytes : int
        Symbols and bytes that left the master: the delivery's frames and the repairs' (0 for
        ``exchange``).
    payload_bytes, header_bytes : int
        Payload and framing bytes (headers, entries, receiver index, padding) of the delivery's
        frames, repairs left out.
    framing_overhead : float
        ``header_bytes / payload_bytes``.
    coded_bytes, uncoded_bytes : int
        Payload bytes of the coded scheme and of the uncoded scheme for this shuffle.
    frames : int
        Frames of the delivery.
    frames_rejected : int
        Frames a worker rejected (malformed, wrong header), summed over workers.
    repairs, repair_bytes, repair_rounds : int
        Points re-sent alone after a failed decode or check, the wire bytes of those frames (and
        of multicast datagrams lost, sent again to the workers that lacked them), and the rounds
        needed (0 when nothing failed).
    records_checked : int
        Records compared with the master's checksums after the transition (``N`` when complete).
    verified : bool
        True only when every record of every worker was checked, matched, and the records are
        conserved.
    seconds : float
        Wall time on the master from the start of the delivery (a barrier of all parties) to the
        last worker's result after the repairs; the final check is ``timings["check"]``.
    timings : dict
        Seconds per stage: ``plan``, ``encode``, ``send`` (on the master), ``deliver`` and
        ``decode`` (the slowest worker's), ``repair``, ``check``, and ``paced_wait`` (the master's
        wait on a paced link).
    subpackets : int
        Pieces a record, ``q`` (1: whole records).
    storage : int
        Batches each worker stores, ``M`` (1: its batch alone).
    piece_bytes : int or None
        Bytes of a piece when records are cut (``subpackets > 1``).
    seed : int or None
        Seed of the epoch orders, where the driver knows it.
    link_mbps : float or None
        The paced speed of the master's link, if it was paced.
    control_bytes : int
        Bytes of the MPI transport's control messages (frame sizes), apart from ``wire_bytes``.
    exchange_bytes : int
        Payload bytes the workers sent each other (``exchange``); 0 for the master's schemes.
    exchange_header_bytes : int
        Framing of those bytes (frame headers and entries).
    max_sent_bytes : int
        The most payload bytes one worker sent (``exchange``; the master's are ``wire_bytes``).
    max_received_bytes : int
        The most payload bytes one worker received in the delivery (a broadcast: all of it), its
        framing and the repairs apart.
    download_bound_bytes : int
        The most bytes a worker misses: no delivery, coded or not, gives the busiest downlink less.
    upload_bound_bytes : int
        The least busiest upload of any exchange between the workers, fractional optimum rounded
        up (:func:`~coded_shuffle.plan.upload_bound`).
    digests : list of str or None
        A digest of each worker's ids and bytes after the transition (the MPI program).
    link_tx_bytes, link_rx_bytes : list of int or None
        Bytes each rank's network interfaces sent and received (``run --count-links``).
    bcast_bytes : int or None
        ``--bcast-baseline``: bytes of one plain broadcast of as many bytes as the delivery.
    bcast_seconds : float or None
        Seconds of that broadcast.
    network : str or None
        The network the times below are for (``--network SPEC``), or None.
    time_bound_seconds : float or None
        No scheme the network allows delivers this transition faster
        (:func:`~coded_shuffle.network.transition_times`).
    predicted_seconds : dict or None
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
    split_uplink_bound : int or None
        ``split``: its own bound on its busiest sending uplink, in symbols: the larger of its coded
        half's genie lower bound (the master's uplink) and its exchanged half's least busiest
        upload (a worker's); None for the other modes.
    binding_links : dict or None
        Each mode's binding link on the network, the link whose time its prediction is:
        ``master``, ``downlink``, ``uplink`` or ``relays``, ties joined by ``=``
        (:attr:`~coded_shuffle.network.TransitionTimes.binding_links`); None for a mode it
        cannot run, and without a network.
    """

    epoch: int
    mode: str
    K: int
    N: int
    record_bytes: int
    strategy: str
    coded_symbols: int
    uncoded_symbols: int
    lower_bound: int
    lower_bound_exact: bool
    optimal: bool
    planned_symbols: int
    xor_symbols: int
    lone_symbols: int
    wire_symbols: int
    wire_bytes: int
    payload_bytes: int
    header_bytes: int
    framing_overhead: float
    coded_bytes: int
    uncoded_bytes: int
    frames: int
    frames_rejected: int
    repairs: int
    repair_bytes: int
    repair_rounds: int
    records_checked: int
    verified: bool
    seconds: float
    timings: dict[str, float] = field(default_factory=dict)
    subpackets: int = 1
    storage: int = 1
    piece_bytes: int | None = None
    seed: int | None = None
    link_mbps: float | None = None
    control_bytes: int = 0
    exchange_bytes: int = 0
    exchange_header_bytes: int = 0
    max_sent_bytes: int = 0
    max_received_bytes: int = 0
    download_bound_bytes: int = 0
    upload_bound_bytes: int = 0
    digests: list[str] | None = None
    link_tx_bytes: list[int] | None = None
    link_rx_bytes: list[int] | None = None
    bcast_bytes: int | None = None
    bcast_seconds: float | None = None
    network: str | None = None
    time_bound_seconds: float | None = None
    predicted_seconds: dict[str, float | None] | None = None
    choice: str | None = None
    time_gap: float | None = None
    split_seconds: float | None = None
    split_coded_share: float | None = None
    split_uplink_bound: int | None = None
    binding_links: dict[str, str | None] | None = None

    def on_network(self, S: object, network: Network, *, measured: bool) -> TransitionReport:
        """This report with its transition's time bound and each mode's predicted time on
        ``network`` (``S`` its shuffle matrix, in records); ``measured``: the transition ran on
        that network, so that ``time_gap`` compares its seconds with the bound. One batch a
        worker, whole records (ValueError otherwise: the bound counts records)."""
        if self.storage != 1 or self.subpackets != 1:
            raise ValueError(
                "Argument 'network' applies to one batch a worker of whole records, not "
                f"storage = {self.storage}, subpackets = {self.subpackets}."
            )
        times = transition_times(
            S, record_bytes=self.record_bytes, network=network,
            coded_symbols=self.coded_bytes / self.record_bytes, lower_bound_symbols=self.lower_bound,
        )  # fmt: skip
        d = times.to_dict()
        bound = times.bound_seconds
        gap = self.seconds / bound - 1 if measured and bound > 0 else None
        return replace(
            self, network=str(network), time_bound_seconds=bound, predicted_seconds=d["predicted_seconds"],  # type: ignore[arg-type]
            choice=times.choice, time_gap=gap, split_seconds=times.split_seconds,
            split_coded_share=times.split_coded_share, binding_links=dict(times.binding_links),
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Return the report as a JSON-ready dict of plain Python values.

        Examples
        --------
        >>> from coded_shuffle.engine import simulate
        >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0).transitions[0]
        >>> d = rep.to_dict()
        >>> d["K"], d["N"], d["verified"], d["coded_symbols"] <= d["uncoded_symbols"]
        (3, 30, True, True)
        """
        return {**asdict(self), "optimality_gap": self.optimality_gap, "sent_bytes": self.sent_bytes}

    @property
    def sent_bytes(self) -> int:
        """Bytes this transition put on the links, framing and repairs included: what left the
        master (``wire_bytes``) and what the workers sent each other (``exchange_bytes`` and its
        framing), whatever the mode: the bytes of the epoch it delivered.

        Examples
        --------
        >>> from coded_shuffle.engine import simulate
        >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0, mode="exchange").transitions[0]
        >>> rep.sent_bytes == rep.exchange_bytes + rep.exchange_header_bytes > rep.uncoded_bytes
        True
        """
        return int(self.wire_bytes) + int(self.exchange_bytes) + int(self.exchange_header_bytes)

    @property
    def optimality_gap(self) -> float:
        """``coded_symbols / lower_bound - 1``: at most how far the coded load is from the best
        possible (:func:`coded_shuffle.bounds.optimality_gap`); 0 exactly when ``optimal``."""
        return optimality_gap(self.coded_symbols, self.lower_bound)


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
        d = asdict(self)
        d["verified"] = self.verified
        return d


def time_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The lines that follow a table of transitions on a network (:meth:`TransitionReport.to_dict`
    or ``rate`` rows), one verdict a transition.

    Where the transition only was predicted: its time bound, each mode's predicted time and
    binding link, and the choice and why. Where it ran on that network (``time_gap`` set, the
    rows of its modes together): the mode measured fastest beside the predicted choice, then the
    predictions with their binding links and each mode's measured time over its prediction.

    Examples
    --------
    >>> row = {"network": "up=1,down=1", "record_bytes": 8, "epoch": 1, "time_bound_seconds": 1.0,
    ...        "predicted_seconds": {"exchange": 1.0, "coded": None}, "choice": "exchange",
    ...        "binding_links": {"exchange": "downlink", "coded": None}}
    >>> time_lines([row])[1]
    '  epoch 1: bound 1; predicted exchange 1 (downlink), coded -; choice exchange: predicted 1 s'
    """
    out = [
        f"on the network {rows[0]['network']}, records of {rows[0]['record_bytes']} B "
        "(seconds of one transition's delivery; bound: no scheme is faster):"
    ]
    groups: list[list[dict[str, Any]]] = []
    for r in rows:  # the rows of one transition's modes come together
        if groups and r["epoch"] is not None and groups[-1][0]["epoch"] == r["epoch"]:
            groups[-1].append(r)
        else:
            groups.append([r])
    for group in groups:
        r = group[0]
        p, choice = r["predicted_seconds"], r["choice"]
        links = r.get("binding_links") or {}
        shown = ", ".join(
            f"{m} -" if p[m] is None else f"{m} {p[m]:.4g}" + (f" ({links[m]})" if links.get(m) else "")
            for m in p
        )
        epoch = "-" if r["epoch"] is None else r["epoch"]
        split = r.get("split_seconds")
        share = "" if split is None else f"; the split {r['split_coded_share']:.0%} coded"
        ran = _ran(group)
        if not ran:
            out.append(f"  epoch {epoch}: bound {r['time_bound_seconds']:.4g}; predicted {shown}; "
                       f"choice {explain(p, choice)}{share}")  # fmt: skip
            continue
        ran.sort(key=lambda g: g["seconds"])
        first = ran[0]
        if len(ran) > 1:
            rest = ", ".join(f"{g['mode']} {g['seconds']:.4g}" for g in ran[1:])
            agree = "agrees" if first["mode"] == choice else "differs"
            measured = f"measured fastest {first['mode']} {first['seconds']:.4g} s (then {rest}); "
            predicted = f"predicted fastest {choice} {p[choice]:.4g} s: {agree}"
        else:
            measured = f"measured {first['mode']} {first['seconds']:.4g} s; "
            predicted = f"predicted fastest {choice} {p[choice]:.4g} s"
        out.append(f"  epoch {epoch}: {measured}{predicted}; bound {r['time_bound_seconds']:.4g} s")
        over = ", ".join(f"{g['mode']} {_times(g['seconds'], p.get(g['mode']))}" for g in _ran(group))
        out.append(f"    predicted (binding link): {shown}{share}; measured / predicted: {over}")
    return out


def _ran(group: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows of ``group`` that ran on the network, in their order."""
    return [g for g in group if g.get("time_gap") is not None]


def _times(seconds: float, predicted: float | None) -> str:
    """``seconds`` as a multiple of ``predicted`` (``-`` without one)."""
    if not predicted:
        return "-"
    x = seconds / predicted
    return f"{x:,.0f}x" if x >= 100 else f"{x:.3g}x"


def unit_of(r: dict[str, Any]) -> tuple[str, int]:
    """``(name, bytes)`` of the unit a report's counts are in (:meth:`TransitionReport.to_dict`):
    ``records`` of ``record_bytes``, or ``pieces`` (a storage's, or sub-packets) of their width.

    Examples
    --------
    >>> unit_of({"record_bytes": 1024, "subpackets": 1, "piece_bytes": None})
    ('records', 1024)
    >>> unit_of({"record_bytes": 1024, "subpackets": 7, "piece_bytes": 147})
    ('pieces', 147)
    """
    if r.get("piece_bytes"):
        return "pieces", int(r["piece_bytes"])
    q = int(r.get("subpackets") or 1)
    return ("pieces", int(r["record_bytes"]) // q) if q > 1 else ("records", int(r["record_bytes"]))


#: The columns of ``coded-shuffle run``'s table (:func:`table_cells`; :func:`table_legend` says what
#: each means).
TABLE_COLUMNS = (
    "epoch", "mode", "unit", "sent", "planned", "busiest d/u", "bound d/u", "sent MB", "framing",
    "seconds", "MB/s", "repairs", "verified",
)  # fmt: skip


def _whole(n: int, width: int) -> int:
    return -(-int(n) // width) if width else 0


def table_cells(r: dict[str, Any]) -> list[str]:
    """One row of ``coded-shuffle run``'s table for a report (:meth:`TransitionReport.to_dict`),
    each count in the units of its own mode and each bound its own mode's (:func:`table_legend`).

    Examples
    --------
    >>> from coded_shuffle.engine import simulate
    >>> rep = simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0, mode="exchange").transitions[0]
    >>> cells = dict(zip(TABLE_COLUMNS, table_cells(rep.to_dict())))
    >>> cells["unit"], cells["sent"] == cells["planned"] == str(rep.uncoded_symbols)
    ('records', True)
    """
    unit, width = unit_of(r)
    mode = r["mode"]
    exchanged = _whole(r["exchange_bytes"], width)  # the units the workers sent each other
    sent = int(r["wire_symbols"]) + exchanged
    planned = int(r["planned_symbols"]) + (exchanged if mode == "split" else 0)
    busiest_up = max(int(r["wire_symbols"]), _whole(r["max_sent_bytes"], width))
    down_bound = _whole(r["download_bound_bytes"], width)
    up_bound = {
        "coded": f"{r['lower_bound']}{'' if r['lower_bound_exact'] else '*'}",
        "uncoded": str(r["uncoded_symbols"]),
        "exchange": str(_whole(r["upload_bound_bytes"], width)),
        "split": "-" if r.get("split_uplink_bound") is None else str(r["split_uplink_bound"]),
    }.get(mode, "-")
    payload = int(r["payload_bytes"]) + int(r["exchange_bytes"])
    header = int(r["header_bytes"]) + int(r["exchange_header_bytes"])
    # What was sent: by the master (coded, uncoded), by the workers to each other (exchange), or both
    # (split), framing and repairs included.
    mb = (r["wire_bytes"] + r["exchange_bytes"] + r["exchange_header_bytes"]) / 1e6
    return [
        str(r["epoch"]),
        mode,
        {"coded": "symbols", "split": "sym+rec"}.get(mode, unit),
        str(sent),
        str(planned),
        f"{_whole(r['max_received_bytes'], width)}/{busiest_up}",
        f"{down_bound}/{up_bound}",
        f"{mb:.3f}",
        f"{header / payload:.2%}" if payload else "-",
        f"{r['seconds']:.3f}",
        f"{mb / r['seconds']:.1f}" if r["seconds"] > 0 else "-",
        str(r["repairs"]),
        "yes" if r["verified"] else "NO",
        *(
            [f"{r['link_tx_bytes'][0] / 1e6:.3f}", f"{max(r['link_rx_bytes'][1:]) / 1e6:.3f}"]
            if r.get("link_tx_bytes")
            else []
        ),
    ]


def table_legend(rows: list[dict[str, Any]]) -> list[str]:
    """What the columns of ``coded-shuffle run``'s table mean (:func:`table_cells`), for its rows:
    the lines printed under it."""
    if not rows:
        return []
    unit, width = unit_of(rows[0])
    modes = {r["mode"] for r in rows}
    B = rows[0]["record_bytes"]
    if unit == "pieces":
        what = f"pieces of {width} B, {rows[0]['subpackets']} a record of {B} B (a symbol: a piece wide)"
    else:
        what = f"records of {B} B (a symbol: a record wide)"
    out = [f"unit: what sent, planned and the d/u figures count: {what}."]
    if modes & {"coded", "split"}:
        out.append("symbols: the master's coded symbols, an XOR of several units or one alone"
                   + ("; sym+rec: the master's symbols and the units the workers exchange (split)."
                      if "split" in modes else "."))  # fmt: skip
    out += [
        "sent: units that left the master (repairs included) and the workers; planned: the mode's plan.",
        "busiest d/u: the most units one worker received (repairs apart) / the most one link sent",
        "(the master's, or the busiest worker's uplink).",
        "bound d/u: the most units a worker misses, under which no delivery puts the busiest downlink /",
        "the least the sending uplink carries in this mode:",
    ]
    ups = {
        "coded": "  coded: the genie lower bound on the master's symbols (* where not proven exact);",
        "uncoded": "  uncoded: every unit that changes worker, W, which it sends each alone (its load is W);",
        "exchange": "  exchange: the least busiest upload of any exchange between the workers;",
        "split": "  split: the larger of its coded half's genie bound and its exchanged half's least upload.",
    }
    out += [line for m, line in ups.items() if m in modes]
    out += [
        "sent MB: payload and framing bytes the master and the workers sent; MB/s: sent MB / seconds;",
        "framing: frame headers, symbol entries, receiver indexes and padding, as a share of the payload.",
    ]
    return out
