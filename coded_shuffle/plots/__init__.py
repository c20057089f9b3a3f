"""Plots for readers: loads against ``K`` for random shuffles, and the leftover graph with its cycles.

matplotlib is an optional extra (``pip install 'coded_shuffle[plot]'``) imported only when a
plot is drawn; figures are made with :class:`matplotlib.figure.Figure` (no pyplot state) and
written as PNG or SVG according to the file extension. The plot of a run's results is
:mod:`.run`'s.

Notation
--------
==========  ================================================================
``K``       number of workers
``N``       number of points, ``K * points_per_worker``
``S``       shuffle matrix; ``Omega`` its leftover matrix
loads       symbols per transition divided by ``N`` (so that ``K`` values compare)
==========  ================================================================

Reference: M. A. Attia and R. Tandon, "On the Worst-case Communication Overhead for
Distributed Data Shuffling", Allerton 2016, arXiv:1609.09823.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._checks import check_choice, check_int
from ..bounds import lower_bound
from ..matrix import check_shuffle_matrix, leftover_matrix, pair_minima, shuffle_matrix
from ..orders import epoch_placement
from ..plan import STRATEGIES, pack_cycles, rates
from ._figures import _MISSING, FORMATS, _check_path, _figure
from .run import plot_run, read_run_results, run_results

__all__ = [
    "FORMATS", "plot_load_vs_k", "plot_leftovers", "plot_orders", "plot_storage", "load_vs_k",
    "load_vs_storage", "plot_run", "run_results", "read_run_results",
]  # fmt: skip


def _separate(fig: Any, labels: list[Any], *, step: float = 11.0, tries: int = 40) -> None:
    """Move annotations up, a line at a time, until no two of them overlap on the figure (labels
    of different groups that land side by side; deterministic, at most ``tries`` moves each)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()  # the layout first, so that the boxes are where they will be

    def text_box(label: Any) -> Any:  # the words alone: an annotation's own box holds its line
        return Text.get_window_extent(label, renderer)

    placed: list[Any] = []
    for label in sorted(labels, key=lambda a: (a.xy[0], a.xy[1])):
        for _ in range(tries):
            if not any(text_box(label).overlaps(other) for other in placed):
                break
            dx, dy = label.xyann
            label.xyann = (dx, dy + step)
        placed.append(text_box(label))


def load_vs_k(
    *, k_min: int = 2, k_max: int = 10, points_per_worker: int = 100, seeds: int = 5, strategy: str = "greedy"
) -> dict[str, Any]:
    """Return the loads per point of random reshuffles for each ``K``: mean and std over seeds.

    Epochs 0 and 1 of :func:`coded_shuffle.orders.epoch_placement` under seeds ``0..seeds-1``.

    Returns
    -------
    dict
        ``K`` (list of int) and, for each of ``uncoded``, ``paired``, ``coded``, ``bound``,
        ``worst``, a pair of lists ``(mean, std)`` of loads divided by ``N``.

    Examples
    --------
    >>> d = load_vs_k(k_min=2, k_max=3, points_per_worker=10, seeds=2)
    >>> d["K"], d["worst"][0]
    ([2, 3], [0.5, 0.6666666666666666])
    """
    k_min = check_int(k_min, "k_min", minimum=2)
    k_max = check_int(k_max, "k_max", minimum=k_min)
    ppw = check_int(points_per_worker, "points_per_worker", minimum=1)
    seeds = check_int(seeds, "seeds", minimum=1)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    keys = ("uncoded", "paired", "coded", "bound", "worst")
    out: dict[str, Any] = {"K": list(range(k_min, k_max + 1))}
    stats: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in keys}
    for K in out["K"]:
        N = K * ppw
        rows = []
        for seed in range(seeds):
            S = shuffle_matrix(
                epoch_placement(N, K, seed=seed, epoch=0), epoch_placement(N, K, seed=seed, epoch=1)
            )
            r = rates(S, strategy=strategy)
            rows.append((r.uncoded, r.paired, r.coded, lower_bound(S).value, N * (K - 1) / K))
        arr = np.array(rows, dtype=float) / N
        for k, mean, std in zip(keys, arr.mean(axis=0), arr.std(axis=0), strict=True):
            stats[k][0].append(float(mean))
            stats[k][1].append(float(std))
    out.update(stats)
    return out


def plot_load_vs_k(
    path: str | os.PathLike[str],
    *,
    k_min: int = 2,
    k_max: int = 10,
    points_per_worker: int = 100,
    seeds: int = 5,
    strategy: str = "greedy",
) -> str:
    """Plot uncoded, paired, coded, lower bound and worst case against ``K`` for random shuffles.

    Each load is divided by ``N`` and drawn as the mean over ``seeds`` seeds with error bars of
    one standard deviation; the worst case ``(K - 1) / K`` is the same for every seed.

    Parameters
    ----------
    path : str or os.PathLike
        Output file, ``.png`` or ``.svg``.
    k_min, k_max : int
        Range of ``K`` (``2 <= k_min <= k_max``).
    points_per_worker : int
        Batch size; ``N = K * points_per_worker``.
    seeds : int
        Number of seeds.
    strategy : str
        Cycle packing strategy for the coded load.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    ImportError
        If matplotlib is not installed.

    Examples
    --------
    >>> import os, tempfile
    >>> out = plot_load_vs_k(os.path.join(tempfile.mkdtemp(), "load.svg"), k_max=3, seeds=2)
    >>> out.endswith("load.svg") and os.path.getsize(out) > 0
    True
    """
    out = _check_path(path)
    data = load_vs_k(
        k_min=k_min, k_max=k_max, points_per_worker=points_per_worker, seeds=seeds, strategy=strategy
    )
    fig = _figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    K = np.array(data["K"])
    styles = {
        "uncoded": ("uncoded", "tab:gray", "o", "-"),
        "paired": ("paired (order-2 only)", "tab:orange", "s", "-"),
        "coded": (f"coded (pairs + cycles, {strategy})", "tab:blue", "D", "-"),
        "bound": ("lower bound", "black", "x", ":"),
        "worst": ("worst case (K-1)/K", "tab:red", None, "--"),
    }
    for key, (label, color, marker, ls) in styles.items():
        mean, std = data[key]
        ax.errorbar(K, mean, yerr=std, label=label, color=color, marker=marker, linestyle=ls, capsize=3, ms=5)
    ax.set_xlabel("workers K")
    ax.set_ylabel("load per point (symbols / N)")
    ax.set_title(
        f"Random reshuffles: {points_per_worker} points a worker (N = {points_per_worker} x K)\n"
        f"mean and std over {seeds} seeds",
        fontsize=11,
    )
    ax.set_xticks(K)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=9)
    fig.savefig(out)
    return out


def load_vs_storage(*, K: int = 8, points_per_worker: int = 1000, seeds: int = 3) -> dict[str, Any]:
    """Return the loads per record of random reshuffles for each storage ``M = 1 .. K``.

    Epochs 0 and 1 of :func:`coded_shuffle.orders.epoch_placement` under seeds ``0..seeds-1``,
    ``N = K * points_per_worker``; loads of :func:`coded_shuffle.storage.storage_rates` and
    :func:`coded_shuffle.storage.storage_lower_bound`, divided by ``N``.

    Returns
    -------
    dict
        ``M`` (list of int), ``worst`` (``R(t) / N``, which the cyclic batch shift costs) and, for
        each of ``uncoded``, ``coded``, ``bound``, a pair of lists ``(mean, std)``.

    Examples
    --------
    >>> d = load_vs_storage(K=3, points_per_worker=10, seeds=1)
    >>> d["M"], d["worst"]
    ([1, 2, 3], [0.6666666666666666, 0.16666666666666666, 0.0])
    """
    from ..storage import storage_lower_bound, storage_rates, storage_worst_case

    K = check_int(K, "K", minimum=2, maximum=16)
    ppw = check_int(points_per_worker, "points_per_worker", minimum=1)
    seeds = check_int(seeds, "seeds", minimum=1)
    N = K * ppw
    shuffles = [
        shuffle_matrix(epoch_placement(N, K, seed=s, epoch=0), epoch_placement(N, K, seed=s, epoch=1))
        for s in range(seeds)
    ]
    out: dict[str, Any] = {"M": list(range(1, K + 1)), "K": K, "N": N}
    out["worst"] = [float(storage_worst_case(N, K, M) / N) for M in out["M"]]
    for key in ("uncoded", "coded", "bound"):
        out[key] = ([], [])
    for M in out["M"]:
        rows = []
        for S in shuffles:
            r = storage_rates(S, M=M)
            rows.append((r.uncoded, r.coded, storage_lower_bound(S, M=M).value))
        arr = np.array([[float(x) for x in row] for row in rows]) / N
        for key, mean, std in zip(
            ("uncoded", "coded", "bound"), arr.mean(axis=0), arr.std(axis=0), strict=True
        ):
            out[key][0].append(float(mean))
            out[key][1].append(float(std))
    return out


def plot_storage(
    path: str | os.PathLike[str], *, K: int = 8, points_per_worker: int = 1000, seeds: int = 3
) -> str:
    """Plot the loads of random reshuffles against the storage ``M``, with ``R(t)`` beside them.

    The data are :func:`load_vs_storage`'s: uncoded (every missing piece alone), coded and the
    lower bound, each the mean over ``seeds`` seeds with error bars of one standard deviation,
    and the worst case ``R(t) = (N / K)(K - 1 - t) / (t + 1)``, per record.

    Examples
    --------
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "storage.svg")
    >>> out = plot_storage(path, K=3, points_per_worker=10, seeds=1)
    >>> os.path.getsize(out) > 0
    True
    """
    out = _check_path(path)
    data = load_vs_storage(K=K, points_per_worker=points_per_worker, seeds=seeds)
    fig = _figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    M = np.array(data["M"])
    styles = {
        "uncoded": ("uncoded (missing pieces alone)", "tab:gray", "o", "-"),
        "coded": ("coded (group symbols, chains, rounds)", "tab:blue", "D", "-"),
        "bound": ("lower bound (genie, on pieces)", "black", "x", ":"),
    }
    for key, (label, color, marker, ls) in styles.items():
        mean, std = data[key]
        ax.errorbar(M, mean, yerr=std, label=label, color=color, marker=marker, linestyle=ls, capsize=3, ms=5)
    ax.plot(M, data["worst"], label="worst case R(t), the cyclic shift", color="tab:red", linestyle="--")
    ax.set_xlabel("storage M = 1 + t (batches a worker)")
    ax.set_ylabel("load per record (records / N)")
    ax.set_title(f"Random reshuffles, K = {data['K']}, N = {data['N']}: mean and std over {seeds} seeds")
    ax.set_xticks(M)
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=9)
    fig.savefig(out)
    return out


def _draw_cycles(ax: Any, graph: Any, pos: Any, packing: Any, cmap: Any, omega: np.ndarray) -> np.ndarray:
    """Draw each cycle of ``packing`` in its colour, listed beside the graph; return the arcs' uses."""
    import networkx as nx
    from matplotlib.lines import Line2D

    used = np.zeros_like(omega)
    handles: list[Any] = []
    names: list[str] = []
    layer: dict[tuple[int, int], int] = {}  # how many cycles already drawn on each arc
    for c, (cyc, count) in enumerate(zip(packing.cycles, packing.counts, strict=True)):
        color = cmap(c % 10)
        for k in range(len(cyc)):
            u, v = cyc[k], cyc[(k + 1) % len(cyc)]
            n = layer.get((u, v), 0)
            layer[(u, v)] = n + 1
            used[u, v] += count
            nx.draw_networkx_edges(
                graph,
                pos,
                edgelist=[(u, v)],
                ax=ax,
                edge_color=[color],
                width=1.5 + min(count, 6),
                arrows=True,
                arrowsize=18,
                connectionstyle=f"arc3,rad={0.15 * n}",
                node_size=900,
            )
        handles.append(Line2D([], [], color=color, lw=1.5 + min(count, 6)))
        names.append(f"cycle {c + 1}: {' > '.join(f'w{w}' for w in cyc)}  x{count}")
    if handles:  # beside the graph, never over a node
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=9, frameon=False)
    return used


def plot_leftovers(
    S: object, path: str | os.PathLike[str], *, strategy: str = "exact", title: str | None = None
) -> str:
    """Draw the leftover graph of ``S``: workers on a circle, arcs weighted by ``Omega``, cycles coloured.

    Each cycle of the packing gets one colour (listed top left with how many times it is used);
    an arc shared by several cycles is drawn once per cycle, bent apart; arcs are labelled with
    their weight in ``Omega``; arcs no cycle covers (possible only without conservation) are grey
    and dashed.

    Parameters
    ----------
    S : array_like
        Square shuffle matrix.
    path : str or os.PathLike
        Output file, ``.png`` or ``.svg``.
    strategy : str
        Cycle packing strategy.
    title : str, optional
        Title; by default the loads.

    Returns
    -------
    str
        The path written.

    Examples
    --------
    >>> import os, tempfile
    >>> out = plot_leftovers([[2, 1, 2], [2, 1, 2], [1, 3, 1]], os.path.join(tempfile.mkdtemp(), "o.png"))
    >>> os.path.getsize(out) > 0
    True
    """
    import networkx as nx

    S = check_shuffle_matrix(S)
    out = _check_path(path)
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"Argument 'title' must be a str or None, not {type(title).__name__}.")
    K = S.shape[0]
    omega = leftover_matrix(S)
    packing = pack_cycles(omega, strategy=strategy)
    r = rates(S, strategy=strategy)
    fig = _figure(figsize=(9, 6.5), layout="constrained")
    ax = fig.add_subplot()
    graph = nx.DiGraph()
    graph.add_nodes_from(range(K))
    pos = nx.circular_layout(graph)
    try:
        from matplotlib import colormaps

        cmap = colormaps["tab10"]
    except ImportError:  # pragma: no cover - matplotlib present if _figure succeeded
        raise ImportError(_MISSING) from None
    used = _draw_cycles(ax, graph, pos, packing, cmap, omega)
    rest = [(int(u), int(v)) for u, v in zip(*np.nonzero(omega - used), strict=True)]
    if rest:
        nx.draw_networkx_edges(
            graph,
            pos,
            edgelist=rest,
            ax=ax,
            edge_color="0.6",
            style="dashed",
            arrows=True,
            arrowsize=14,
            node_size=900,
        )
    labels = {(int(u), int(v)): str(int(omega[u, v])) for u, v in zip(*np.nonzero(omega), strict=True)}
    nx.draw_networkx_edge_labels(graph, pos, edge_labels=labels, ax=ax, font_size=9, label_pos=0.5)
    nx.draw_networkx_nodes(graph, pos, ax=ax, node_color="white", edgecolors="black", node_size=900)
    nx.draw_networkx_labels(graph, pos, labels={k: f"w{k}" for k in range(K)}, ax=ax, font_size=11)
    pairs = int(np.triu(pair_minima(S), 1).sum())
    ax.set_title(
        title
        or f"Leftover graph (K = {K}): uncoded {r.uncoded}, paired {r.paired} ({pairs} pairs), "
        f"coded {r.coded}; {packing.cycles_used} cycles ({strategy})",
        fontsize=10,
    )
    ax.set_axis_off()
    ax.margins(0.12)
    fig.savefig(out)
    return out


def plot_orders(path: str | os.PathLike[str], **options: Any) -> str:
    """Plot each epoch order's link load against how badly it mixes: the randomness-cost trade-off.

    One point per order of :func:`coded_shuffle.tradeoff.order_tradeoff` (``options`` are passed
    to it): the whole-epoch mean deviation of the A share from 50 % on the x axis (log scale),
    the uncoded and coded loads of one transition per point on the y axis.

    Examples
    --------
    >>> import os, tempfile
    >>> out = plot_orders(os.path.join(tempfile.mkdtemp(), "orders.svg"), orders=["naive", "py1s"],
    ...                   K=2, shards=4, shard_size=20, batches=2, batch_size=10)
    >>> os.path.getsize(out) > 0
    True
    """
    from ..tradeoff import order_tradeoff

    out = _check_path(path)
    rows = order_tradeoff(options.pop("orders", None), **options)
    fig = _figure(figsize=(7, 4.5), layout="constrained")
    ax = fig.add_subplot()
    # Orders that land on (nearly) the same point are labelled as a group, each label on its own line.
    groups: dict[tuple[float, float], list[tuple[float, float, str]]] = {}
    for row in rows:
        x = max(row["epoch_mean_deviation_pct"], 1e-3)
        N = row["N"]
        ax.plot([x, x], [row["coded"] / N, row["uncoded"] / N], color="0.75", zorder=1)
        ax.scatter([x], [row["uncoded"] / N], color="tab:gray", marker="o", zorder=2)
        ax.scatter([x], [row["coded"] / N], color="tab:blue", marker="D", zorder=2)
        key = (float(np.floor(np.log10(x) / 0.2)), round(row["uncoded"] / N, 1))
        groups.setdefault(key, []).append((x, row["uncoded"] / N, row["order"]))
    labels = []
    for members in groups.values():  # one label an order, stacked above its group, a line to its point
        for i, (x, y, name) in enumerate(sorted(members)):
            labels.append(ax.annotate(
                name, (x, y), textcoords="offset points", xytext=(6, 10 + 11 * i), fontsize=8,
                arrowprops={"arrowstyle": "-", "color": "0.55", "lw": 0.6, "shrinkA": 0, "shrinkB": 3},
            ))  # fmt: skip
    _separate(fig, labels)
    ax.scatter([], [], color="tab:gray", marker="o", label="uncoded")
    ax.scatter([], [], color="tab:blue", marker="D", label="coded")
    first = rows[0]
    ax.set_xscale("log")
    ax.set_xlabel("mean deviation of the A share from 50 % over the epoch (%), lower is better mixed")
    ax.set_ylabel("link load per point (records / N)")
    ax.set_title(
        f"How random, at what link cost: K = {first['K']}, {first['shards']} shards x {first['shard_size']}"
    )
    ax.set_ylim(0, 1.15)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=9)
    fig.savefig(out)
    return out
