"""Tests of coded_shuffle.plots: files are written in both formats, bad inputs raise."""

from __future__ import annotations

import builtins
import json

import pytest

pytest.importorskip("matplotlib")

from coded_shuffle import plots  # noqa: E402
from tests.cases import EXAMPLE_1  # noqa: E402


@pytest.mark.parametrize("ext", [".png", ".svg"])
def test_load_vs_k_writes_file(tmp_path, ext):
    out = plots.plot_load_vs_k(tmp_path / f"load{ext}", k_min=2, k_max=4, points_per_worker=12, seeds=2)
    assert out.endswith(ext)
    data = open(out, "rb").read()
    assert data.startswith(b"\x89PNG") if ext == ".png" else b"<svg" in data


@pytest.mark.parametrize("ext", [".png", ".svg"])
def test_leftovers_writes_file(tmp_path, ext):
    out = plots.plot_leftovers(EXAMPLE_1, tmp_path / f"omega{ext}", strategy="greedy")
    assert (tmp_path / f"omega{ext}").stat().st_size > 0 and out.endswith(ext)
    plots.plot_leftovers([[0, 2], [1, 0]], tmp_path / f"unequal{ext}")  # an uncovered arc


def test_load_vs_k_values():
    d = plots.load_vs_k(k_min=2, k_max=3, points_per_worker=20, seeds=3)
    assert d["K"] == [2, 3]
    for i in range(2):
        assert d["bound"][0][i] <= d["coded"][0][i] <= d["paired"][0][i] <= d["uncoded"][0][i]
    assert d["worst"] == ([0.5, 2 / 3], [0.0, 0.0])


def test_plots_exceptions(tmp_path):
    with pytest.raises(ValueError, match="'path'"):
        plots.plot_load_vs_k(tmp_path / "x.pdf", k_max=3)
    with pytest.raises(ValueError, match="'path'"):
        plots.plot_leftovers(EXAMPLE_1, tmp_path / "noext")
    with pytest.raises(TypeError, match="'path'"):
        plots.plot_leftovers(EXAMPLE_1, 3)
    with pytest.raises(ValueError, match="'k_min'"):
        plots.plot_load_vs_k(tmp_path / "x.png", k_min=1)
    with pytest.raises(ValueError, match="'k_max'"):
        plots.plot_load_vs_k(tmp_path / "x.png", k_min=4, k_max=3)
    with pytest.raises(ValueError, match="'seeds'"):
        plots.plot_load_vs_k(tmp_path / "x.png", seeds=0)
    with pytest.raises(ValueError, match="'strategy'"):
        plots.plot_leftovers(EXAMPLE_1, tmp_path / "x.png", strategy="best")
    with pytest.raises(ValueError, match="'S'"):
        plots.plot_leftovers([[1, 2, 3]], tmp_path / "x.png")
    with pytest.raises(TypeError, match="'title'"):
        plots.plot_leftovers(EXAMPLE_1, tmp_path / "x.png", title=5)


def test_missing_matplotlib_message(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install 'coded_shuffle\[plot\]'"):
        plots.plot_leftovers(EXAMPLE_1, tmp_path / "x.png")


def test_cli_plot(tmp_path, capsys):
    from coded_shuffle.cli import main

    matrix = tmp_path / "s.json"
    matrix.write_text(json.dumps(EXAMPLE_1))
    assert main(["plot", "leftovers", "--matrix", str(matrix), "--output", str(tmp_path / "o.svg")]) == 0
    assert (tmp_path / "o.svg").stat().st_size > 0
    args = ["plot", "load-vs-k", "--k-max", "3", "--seeds", "2", "--points-per-worker", "10"]
    assert main([*args, "--output", str(tmp_path / "l.png")]) == 0
    assert main([*args, "--output", str(tmp_path / "l.pdf")]) == 2
    assert main(["plot", "load-vs-k", "--k-min", "4", "--k-max", "3", "-o", str(tmp_path / "x.png")]) == 2
    assert main(["plot", "leftovers", "--output", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err
    assert err.count("coded-shuffle: error:") == 3


def test_output_in_a_missing_folder(tmp_path, capsys):
    from coded_shuffle.cli import main

    target = tmp_path / "missing" / "o.png"
    with pytest.raises(ValueError, match="Argument 'path' must be in an existing folder"):
        plots.plot_leftovers(EXAMPLE_1, target)
    matrix = tmp_path / "s.json"
    matrix.write_text(json.dumps(EXAMPLE_1))
    for argv in (["leftovers", "--matrix", str(matrix)], ["load-vs-k", "--k-max", "3"]):
        assert main(["plot", *argv, "-o", str(target)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and not target.parent.exists()
        assert err == (
            f"coded-shuffle: error: --output must be in an existing folder, not {str(target)!r} "
            f"(no folder {str(target.parent)!r})\n"
        )


def test_load_vs_storage_values_and_the_cli_plot(tmp_path, capsys):
    from fractions import Fraction

    from coded_shuffle.cli import main
    from coded_shuffle.plots import load_vs_storage

    K, ppw = 4, 30
    d = load_vs_storage(K=K, points_per_worker=ppw, seeds=2)
    # R(t) = (N / K)(K - 1 - t) / (t + 1), per record (Elmahdy and Mohajer 2020)
    assert d["worst"] == [float(Fraction(K - 1 - t, K * (t + 1))) for t in range(K)]
    for M in d["M"]:
        i = M - 1
        assert d["bound"][0][i] <= d["coded"][0][i] + 1e-12 <= d["uncoded"][0][i] + 1e-12
    assert d["coded"][0][-1] == d["uncoded"][0][-1] == 0.0  # M = K: every worker holds everything
    out = tmp_path / "s.svg"
    small = ["-K", "3", "--points-per-worker", "10", "--seeds", "1"]
    assert main(["plot", "storage", *small, "-o", str(out)]) == 0
    assert out.stat().st_size > 0
    assert main(["plot", "storage", "-K", "17", "-o", str(tmp_path / "x.png")]) == 2
    assert "--workers must be from 2 to 16" in capsys.readouterr().err


def _figures(monkeypatch) -> list:
    """The figures the plots make, kept for a look at their layout."""
    made: list = []
    real = plots._figure

    def keep(**kwargs):
        made.append(real(**kwargs))
        return made[-1]

    monkeypatch.setattr(plots, "_figure", keep)
    return made


def _inside(fig, artist) -> bool:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box = artist.get_window_extent(FigureCanvasAgg(fig).get_renderer())
    page = fig.bbox
    return page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_load_vs_k_title_is_not_cut_off(tmp_path, monkeypatch):
    made = _figures(monkeypatch)
    plots.plot_load_vs_k(str(tmp_path / "l.png"), k_min=2, k_max=4, points_per_worker=10, seeds=5)
    fig = made[0]
    fig.canvas.draw()
    assert _inside(fig, fig.axes[0].title)


def test_order_labels_never_overlap(tmp_path, monkeypatch):
    """Labels of orders whose points land side by side (different groups) were drawn over each
    other; every label's words now have a box of their own."""
    from itertools import combinations

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    made = _figures(monkeypatch)
    plots.plot_orders(str(tmp_path / "o.png"), K=4, shards=100, shard_size=100)
    fig = made[0]
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw_without_rendering()
    labels = list(fig.axes[0].texts)
    assert len(labels) == 8
    boxes = [Text.get_window_extent(t, renderer) for t in labels]
    pairs = combinations(zip(labels, boxes, strict=True), 2)
    assert not [(a.get_text(), b.get_text()) for (a, x), (b, y) in pairs if x.overlaps(y)]


def test_plot_orders_says_what_it_is_doing(tmp_path, capsys):
    from coded_shuffle.cli import main

    out = tmp_path / "o.png"
    assert main(["plot", "orders", "-K", "4", "--shards", "20", "--shard-size", "50", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert err.startswith("generating and measuring 8 orders of 1,000 samples for the plot ...")
    assert out.stat().st_size > 0


def test_plot_of_run_results_from_reports(tmp_path, capsys):
    """``plot run``: the reports as ``simulate --json`` / ``run --json`` write them, one a line."""
    from coded_shuffle.cli import main
    from coded_shuffle.engine import simulate
    from coded_shuffle.network import Network
    from coded_shuffle.orders import epoch_placement

    N, K, B, seed = 90, 3, 16, 2
    net = Network.parse("master=100,up=100,down=100")
    lines = [json.dumps({"probe": {"seconds": 1}})]  # run --probe's first line, skipped
    lines += [json.dumps({"held_start": {"storage": 1, "source_records": 0}})]  # run --cache-dir's too
    for mode in ("coded", "uncoded", "exchange"):
        rep = simulate(K=K, N=N, record_bytes=B, epochs=1, seed=seed, mode=mode, network=net)
        lines += [json.dumps(t.to_dict()) for t in rep.transitions]
    results = tmp_path / "rows.jsonl"
    results.write_text("\n".join(lines) + "\n")
    d = plots.run_results(plots.read_run_results(results))
    p0, p1 = (epoch_placement(N, K, seed=seed, epoch=e) for e in (0, 1))
    moved = p0.owner != p1.owner
    down = max(int((moved & (p1.owner == j)).sum()) for j in range(K)) * B  # record by record
    up = max(int((moved & (p0.owner == i)).sum()) for i in range(K)) * B
    assert d["modes"] == ["coded", "uncoded", "exchange"] and d["transitions"] == 1
    assert d["uncoded"]["up"] == d["uncoded"]["up_bound"] == int(moved.sum()) * B
    assert d["exchange"]["down"] == d["exchange"]["down_bound"] == down
    assert d["exchange"]["up"] == d["exchange"]["up_bound"] == up
    assert all(d[m]["predicted"] > 0 and d[m]["time_bound"] <= d[m]["predicted"] for m in d["modes"])
    out = tmp_path / "run.png"
    assert main(["plot", "run", "--results", str(results), "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out) and out.read_bytes().startswith(b"\x89PNG")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"mode": "coded"}\n')
    assert main(["plot", "run", "--results", str(bad), "-o", str(out)]) == 2
    assert main(["plot", "run", "--results", str(tmp_path / "none.jsonl"), "-o", str(out)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"coded-shuffle: error: --results {bad}: line 1 is not a transition report of run --json"
    assert err[1].startswith("coded-shuffle: error: --results: cannot read ")
