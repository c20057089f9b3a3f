"""The plot of a run's results (``coded-shuffle plot run``): the reports of ``run --json`` read
(:func:`read_run_results`), each mode's bytes and seconds beside its bounds (:func:`run_results`),
and the figure (:func:`plot_run`)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ._figures import _check_path, _figure

__all__ = ["plot_run", "run_results", "read_run_results"]


#: The modes of a run in the order the plot of its results shows them.
_RUN_MODES = ("coded", "uncoded", "exchange", "split")


def read_run_results(source: Any) -> list[dict[str, Any]]:
    """The transition reports of ``run --json`` (or ``simulate --json``): one JSON object a line,
    read from a path or an open text file; the ``{"probe": ...}`` line of ``--probe`` and the
    ``{"held_start": ...}`` line of ``--cache-dir`` are left out.

    Raises ValueError naming the line that is not a report.
    """
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8") as f:
            return read_run_results(f)
    import json

    rows = []
    for i, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise ValueError(f"line {i} is not JSON: {line.strip()[:40]!r}") from None
        if isinstance(row, dict) and len(row) == 1 and ("probe" in row or "held_start" in row):
            continue
        if not isinstance(row, dict) or not {"mode", "epoch", "seconds", "wire_bytes"} <= set(row):
            raise ValueError(f"line {i} is not a transition report of run --json")
        rows.append(row)
    if not rows:
        raise ValueError("no transition report in the results (run --json writes one a line)")
    return rows


def run_results(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each mode's bytes and seconds in transition reports
    (:meth:`~coded_shuffle.engine.TransitionReport.to_dict`), the mean over its transitions, beside
    its bounds and its predicted time.

    Bytes are payload, as the bounds count them: ``down``, the most one worker received;
    ``up``, the most one uplink sent (the master's symbols, repairs included, or the busiest
    worker's); ``down_bound``, the most a worker misses; ``up_bound``, the mode's own bound on
    its sending uplink (coded: the genie lower bound; uncoded: every moved unit; exchange: the
    least busiest upload; split: ``split_uplink_bound``), as in ``run``'s table. ``predicted`` and
    ``time_bound`` are None without a network.

    Examples
    --------
    >>> from coded_shuffle.engine import simulate
    >>> rows = [t.to_dict() for t in simulate(K=3, N=30, record_bytes=8, epochs=2, seed=0).transitions]
    >>> d = run_results(rows)
    >>> d["modes"], d["transitions"], d["coded"]["up"] >= d["coded"]["up_bound"]
    (['coded'], 2, True)
    """
    from ..engine.report import unit_of

    out: dict[str, Any] = {"modes": [], "transitions": len({r["epoch"] for r in rows})}
    first = rows[0]
    out.update(K=first["K"], N=first["N"], record_bytes=first["record_bytes"], network=first.get("network"))

    def mean(values: list[Any]) -> float | None:
        return None if any(v is None for v in values) else float(np.mean(values))

    def up_bound(r: dict[str, Any], width: int) -> int | None:
        """The mode's own bound on its sending uplink, in bytes (``run``'s table)."""
        mode = r["mode"]
        if mode == "coded":
            return int(r["lower_bound"]) * width
        if mode == "uncoded":
            return int(r["uncoded_symbols"]) * width
        if mode == "split":
            return None if r.get("split_uplink_bound") is None else int(r["split_uplink_bound"]) * width
        return int(r["upload_bound_bytes"]) if mode == "exchange" else None

    for mode in sorted({r["mode"] for r in rows}, key=lambda m: (_RUN_MODES + (m,)).index(m)):
        mine = [r for r in rows if r["mode"] == mode]
        _, width = unit_of(mine[0])
        out["modes"].append(mode)
        out[mode] = {
            "transitions": len(mine),
            "down": mean([r["max_received_bytes"] for r in mine]),
            "up": mean([max(r["wire_symbols"] * width, r["max_sent_bytes"]) for r in mine]),
            "down_bound": mean([r["download_bound_bytes"] for r in mine]),
            "up_bound": mean([up_bound(r, width) for r in mine]),
            "seconds": mean([r["seconds"] for r in mine]),
            "predicted": mean([(r.get("predicted_seconds") or {}).get(mode) for r in mine]),
            "time_bound": mean([r.get("time_bound_seconds") for r in mine]),
        }
    return out


def plot_run(rows: Any, path: str | os.PathLike[str]) -> str:
    """Plot the results of ``run --json``: each mode's busiest links in bytes against their bounds,
    and its seconds against its predicted time and the time bound on the network.

    ``rows``: the reports (dicts, :func:`read_run_results`), or a path to read them from. The data
    are :func:`run_results`'s, means over the transitions.

    Examples
    --------
    >>> import os, tempfile
    >>> from coded_shuffle.engine import simulate
    >>> rows = [t.to_dict() for t in simulate(K=3, N=30, record_bytes=8, epochs=1, seed=0).transitions]
    >>> out = plot_run(rows, os.path.join(tempfile.mkdtemp(), "run.svg"))
    >>> os.path.getsize(out) > 0
    True
    """
    out = _check_path(path)
    data = run_results(read_run_results(rows) if isinstance(rows, (str, os.PathLike)) else list(rows))
    modes = data["modes"]
    fig = _figure(figsize=(9, 4.2), layout="constrained")
    ax_b, ax_s = fig.subplots(1, 2)
    x = np.arange(len(modes))
    w = 0.38
    for dx, key, color, label in ((-w / 2, "down", "tab:blue", "busiest downlink"),
                                  (w / 2, "up", "tab:orange", "busiest uplink")):  # fmt: skip
        ax_b.bar(x + dx, [data[m][key] / 1e6 for m in modes], w, color=color, label=label)
        bounds = [(i + dx, data[m][f"{key}_bound"]) for i, m in enumerate(modes) if data[m][f"{key}_bound"]]
        if bounds:
            bx, by = zip(*bounds, strict=True)
            ax_b.scatter(bx, np.array(by) / 1e6, marker="_", s=900, color="black", zorder=3,
                         label="its bound" if key == "down" else None)  # fmt: skip
    tops = [v for m in modes for v in (data[m]["down"], data[m]["up"], data[m]["up_bound"]) if v]
    ax_b.set_ylim(0, 1.35 * max(tops, default=1) / 1e6)  # room for the legend above the bars
    ax_b.set_xticks(x, modes)
    ax_b.set_ylabel("MB of payload (mean over the transitions)")
    ax_b.set_title("Bytes on the busiest links")
    ax_b.grid(axis="y", alpha=0.3)
    ax_b.legend(fontsize=8, loc="upper left", markerscale=0.4)
    seconds = [data[m]["seconds"] for m in modes]
    ax_s.bar(x, seconds, 0.5, color="tab:green", label="measured")
    predicted = [(i, data[m]["predicted"]) for i, m in enumerate(modes) if data[m]["predicted"]]
    if predicted:
        px, py = zip(*predicted, strict=True)
        ax_s.scatter(px, py, marker="D", color="black", zorder=3, label=f"predicted on {data['network']}")
    bound = next((data[m]["time_bound"] for m in modes if data[m]["time_bound"]), None)
    if bound:
        ax_s.axhline(bound, color="tab:red", linestyle="--", label="time bound (no scheme is faster)")
    shown = [v for v in [*seconds, *(v for _, v in predicted), bound or 0] if v]
    if shown and max(shown) / min(shown) > 50:
        ax_s.set_yscale("log")
        ax_s.set_ylim(top=max(shown) * 10)
    else:
        ax_s.set_ylim(0, 1.35 * max(shown, default=1))
    ax_s.set_xticks(x, modes)
    ax_s.set_ylabel("seconds of a transition (mean)")
    ax_s.set_title("Time" + ("" if predicted else " (no --network: nothing predicted)"))
    ax_s.grid(axis="y", alpha=0.3)
    ax_s.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"K = {data['K']}, N = {data['N']}, records of {data['record_bytes']} B, "
                 f"{data['transitions']} transition{'s' if data['transitions'] > 1 else ''}")  # fmt: skip
    fig.savefig(out)
    return out
