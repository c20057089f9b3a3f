"""Long commands announce themselves on standard error and, on a terminal, draw a bar there.

Off a terminal the only thing written to standard error is one announcement line per step, and
standard output stays exactly what it is without progress (JSON lines stay parseable).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from coded_shuffle import cli, warmup
from coded_shuffle.cli import main
from coded_shuffle.orders.quality import REPORT_STEPS
from coded_shuffle.tradeoff import LINK_COST_STEPS


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def compiled():
    """The kernels these commands use, compiled beforehand: no compile announcement."""
    warmup.warm_up()


def last_draw(text: str) -> str:
    return text.rstrip("\n").split("\r")[-1]


def test_rate_large_off_a_terminal_one_line(capsys, monkeypatch, compiled):
    monkeypatch.setattr(cli.rate, "LONG_POINTS", 5000)
    argv = ["rate", "-K", "4", "-N", "5000", "--order", "feistel", "--transitions", "2", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == (
        "counting S of epoch 0 -> 1 over 5,000 points (feistel order) ...\n"
        "counting S of epoch 1 -> 2 over 5,000 points (feistel order) ...\n"
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    # Below the threshold: silent, the same rows.
    monkeypatch.setattr(cli.rate, "LONG_POINTS", 5001)
    assert main(argv) == 0
    again, err = capsys.readouterr()
    assert err == "" and again == out


def test_rate_announces_the_programs_that_run_for_seconds(capsys, monkeypatch, compiled):
    # --strategy exact and --exact-bound can run for a minute of HiGHS each: never silently.
    # The thresholds are lowered so that a small case shows the lines (the same code path).
    monkeypatch.setattr(cli.rate, "ANNOUNCE_EXACT_K", 4)
    monkeypatch.setattr(cli.rate, "EXACT_BOUND_MAX_K", 3)
    argv = ["rate", "-K", "4", "-N", "400", "--strategy", "exact", "--exact-bound", "--json"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == (
        "exact cycle packing, K = 4: integer programs (HiGHS, at most 20000 nodes each) ...\n"
        "proving the lower bound, K = 4: the linear ordering program (HiGHS, at most 20000 nodes) ...\n"
    )
    assert json.loads(out)["strategy"] == "exact"
    monkeypatch.setattr(cli.rate, "ANNOUNCE_EXACT_K", 5)
    monkeypatch.setattr(cli.rate, "EXACT_BOUND_MAX_K", 4)
    assert main(argv) == 0
    again, err = capsys.readouterr()
    assert err == "" and again == out


@pytest.mark.parametrize("order", ["feistel", "permutation"])
def test_rate_large_on_a_terminal_a_bar(capsys, monkeypatch, compiled, order):
    monkeypatch.setattr(cli.rate, "LONG_POINTS", 5000)
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["rate", "-K", "4", "-N", "6000", "--order", order, "--transitions", "2"]) == 0
    out = capsys.readouterr().out
    bars = err.getvalue().split("\n")[:-1]  # each transition's bar ends its own line, full
    assert len(bars) == 2
    for t, text in enumerate(bars):
        assert text.startswith(f"\rcounting S of epoch {t} -> {t + 1} over 6,000 points ({order} order): [")
        assert "6000/6000 points 100%" in last_draw(text)
    header, *rows = [line for line in out.splitlines() if not line.startswith("note:")]
    assert header.split()[0] == "epoch" and [r.split()[0] for r in rows] == ["1", "2"]


def test_compile_announced_before_it_starts(capsys, monkeypatch):
    calls = []

    def fake_warm_up(groups, *, progress=None):
        calls.append((list(groups), capsys.readouterr().err))  # what was said before compiling
        for k in range(len(groups)):
            progress(k + 1)

    monkeypatch.setattr(warmup, "uncompiled", lambda groups: list(groups))
    monkeypatch.setattr(warmup, "warm_up", fake_warm_up)
    assert main(["simulate", "-K", "2", "-N", "20", "-B", "8", "--transitions", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    said = "compiling kernels (once per install) ...\n"
    assert calls == [(["packing", "planning", "ordering", "decoding"], said)]
    assert err == "" and json.loads(out)["verified"] is True
    assert main(["rate", "-K", "3", "-N", "30", "--order", "feistel", "--json"]) == 0
    out, _ = capsys.readouterr()
    assert calls[1] == (["packing", "ordering", "feistel"], "compiling kernels (once per install) ...\n")
    assert json.loads(out)["order"] == "feistel"
    # On a terminal: a bar that ends full.
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["rate", "-K", "3", "-N", "30", "--json"]) == 0
    assert last_draw(err.getvalue()).startswith("compiling kernels (once per install): [")
    assert "2/2 groups 100%" in last_draw(err.getvalue())


def test_nothing_said_when_compiled(capsys, compiled):
    assert main(["rate", "-K", "3", "-N", "30", "--order", "feistel", "--json"]) == 0
    assert capsys.readouterr().err == ""


def test_quality_announced_and_a_bar_on_a_terminal(capsys, monkeypatch):
    argv = ["quality", "--order", "py1s", "--shards", "10", "--shard-size", "30", "--batch-size", "20"]
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "measuring py1s on 10 shards x 30 samples ...\n"
    assert json.loads(out)["algo"] == "py1s"
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main([*argv, "--seeds", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["over_seeds"]["seeds"] == [0, 1]  # seeds from the default 0
    total = 2 * REPORT_STEPS
    assert f"{total}/{total} steps 100%" in last_draw(err.getvalue())


def test_orders_announced_and_a_bar_on_a_terminal(capsys, monkeypatch, compiled):
    small = "-K 3 --shards 10 --shard-size 30 --block-size 60 --batch-size 20 --batches 3".split()
    assert main(["orders", "--orders", "naive,py1s", *small, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "generating and measuring 2 orders of 300 samples ...\n"
    assert [json.loads(line)["order"] for line in out.splitlines()] == ["naive", "py1s"]
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["orders", "--orders", "naive,py1s,feistel", *small]) == 0
    out = capsys.readouterr().out
    total = 3 * LINK_COST_STEPS
    assert f"{total}/{total} steps 100%" in last_draw(err.getvalue())
    assert [line.split()[0] for line in out.splitlines()[2:5]] == ["naive", "py1s", "feistel"]


def test_simulate_bar_on_a_terminal_only(capsys, monkeypatch, compiled):
    argv = ["simulate", "-K", "3", "-N", "60", "-B", "8", "--transitions", "3"]
    assert main(argv) == 0
    assert capsys.readouterr().err == "simulating 3 transitions of 60 records ...\n"
    assert main([*argv, "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    assert main(argv) == 0
    assert "3/3 transitions 100%" in last_draw(err.getvalue())
    assert capsys.readouterr().out.count(" yes ") == 3


def test_a_real_terminal(compiled):
    """On a pseudo-terminal the bar is drawn in place; standard output (a pipe) is untouched."""
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    argv = ["quality", "--order", "py1e", "--shards", "10", "--shard-size", "30", "--batch-size", "20"]
    proc = subprocess.run(
        [sys.executable, "-m", "coded_shuffle", *argv, "--json"],
        stdout=subprocess.PIPE,
        stderr=follower,
        timeout=120,
    )
    os.close(follower)
    err = os.read(leader, 1 << 16).decode()
    os.close(leader)
    assert proc.returncode == 0 and json.loads(proc.stdout)["algo"] == "py1e"
    assert err.startswith("\rmeasuring py1e on 10 shards x 30 samples: [")
    assert f"{REPORT_STEPS}/{REPORT_STEPS} steps 100%" in err and " ..." not in err
