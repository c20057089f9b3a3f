"""The run table: the rows ``coded-shuffle run`` prints, one a transition
(:data:`TABLE_COLUMNS`, :func:`table_cells`), the legend under it (:func:`table_legend`), and the
lines on a network's times that follow a table of transitions (:func:`time_lines`), each made from
a report's :meth:`~coded_shuffle.engine.report.TransitionReport.to_dict`.
"""

from __future__ import annotations

from typing import Any

from ..network import explain

__all__ = ["time_lines", "unit_of", "TABLE_COLUMNS", "table_cells", "sent_cells", "table_legend"]


def time_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The lines that follow a table of transitions on a network (:meth:`~.report.TransitionReport.to_dict`
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
    """``(name, bytes)`` of the unit a report's counts are in (:meth:`~.report.TransitionReport.to_dict`):
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
    """One row of ``coded-shuffle run``'s table for a report (:meth:`~.report.TransitionReport.to_dict`),
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
    return [
        str(r["epoch"]),
        mode,
        {"coded": "symbols", "split": "sym+rec"}.get(mode, unit),
        str(sent),
        str(planned),
        f"{_whole(r['max_received_bytes'], width)}/{busiest_up}",
        f"{down_bound}/{up_bound}",
        *sent_cells(r),
    ]


def sent_cells(r: dict[str, Any]) -> list[str]:
    """The cells of a row of ``run``'s table from ``MB`` on, in every unit: what was sent (by the
    master, by the workers to each other, or both; framing and repairs included), the framing's
    share of the payload, the seconds, the throughput, the repairs, the verdict, and the links'
    counts (``--count-links``)."""
    payload = int(r["payload_bytes"]) + int(r["exchange_bytes"])
    header = int(r["header_bytes"]) + int(r["exchange_header_bytes"])
    mb = (r["wire_bytes"] + r["exchange_bytes"] + r["exchange_header_bytes"]) / 1e6
    return [
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
