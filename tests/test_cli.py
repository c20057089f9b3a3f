import json
import re
import subprocess
import sys

import pytest

from coded_shuffle.cli import main

EXAMPLE1 = [[2, 1, 2], [2, 1, 2], [1, 3, 1]]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_rate_matrix_json_example1(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(EXAMPLE1))
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    assert code == 0 and err == ""
    (row,) = [json.loads(line) for line in out.splitlines()]
    # Attia and Tandon 2016, Example 1.
    assert row["epoch"] is None
    assert (row["K"], row["N"], row["uncoded"], row["paired"], row["coded"]) == (3, 15, 11, 7, 6)
    assert row["lower_bound"] == 6 and row["lower_bound_exact"] is True
    assert row["worst_case"] == 10 and row["strategy"] == "greedy"


def test_rate_matrix_csv_table(tmp_path, capsys):
    f = tmp_path / "s.csv"
    f.write_text("2,1,2\n2,1,2\n1,3,1\n")
    code, out, _ = run(capsys, "rate", "--matrix", str(f), "--strategy", "exact")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split() == [
        "epoch",
        "K",
        "N",
        "order",
        "strategy",
        "uncoded",
        "paired",
        "coded",
        "bound",
        "optimal",
        "worst",
        "gain",
    ]
    assert row.split()[:10] == ["-", "3", "15", "-", "exact", "11", "7", "6", "6", "yes"]
    assert "note: optimal yes: coded == bound" in out


# A 7-worker leftover matrix whose best packing has 4 cycles against a minimum feedback arc set
# of 5 (proofs/claim_5_optimality.py, OMEGA_GAP_K7), with 15 idle workers added: K = 22.
GAP_K7 = [
    [0, 0, 0, 0, 1, 0, 1],
    [1, 0, 0, 1, 0, 0, 0],
    [0, 1, 0, 0, 0, 0, 1],
    [0, 0, 0, 0, 0, 1, 1],
    [0, 0, 1, 1, 0, 0, 0],
    [1, 0, 1, 0, 0, 0, 0],
    [0, 1, 0, 0, 1, 1, 0],
]


def test_rate_certificate_and_exact_bound(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(EXAMPLE1))
    _, out, _ = run(capsys, "rate", "--matrix", str(f), "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    # greedy proves nothing by itself; coded == bound proves its packing maximum
    assert row["strategy"] == "greedy" and row["optimal"] is True and row["packing_optimal"] is True
    S = [[0] * 22 for _ in range(22)]
    for i in range(7):
        S[i][:7] = GAP_K7[i]
    f.write_text(json.dumps(S))
    rows = {}
    for flag in ([], ["--exact-bound"]):
        _, out, _ = run(capsys, "rate", "--matrix", str(f), "--strategy", "exact", "--json", *flag)
        (rows[bool(flag)],) = [json.loads(line) for line in out.splitlines()]
    for row in rows.values():
        assert row["uncoded"] == 15 and row["coded"] == 11 and row["packing_optimal"] is True
        assert row["optimal"] is False
    assert rows[False]["lower_bound_exact"] is False
    assert rows[True]["lower_bound_exact"] is True and rows[True]["lower_bound"] == 10


def test_rate_epochs_json(capsys):
    code, out, _ = run(
        capsys, "rate", "--workers", "5", "--points", "503", "--seed", "3", "--epochs", "3", "--json"
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["epoch"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["optimal"] == (r["coded"] == r["lower_bound"])
        assert not r["optimal"] or (r["packing_optimal"] and r["lower_bound_exact"])
        assert r["lower_bound"] <= r["coded"] <= r["paired"] <= r["uncoded"]
        assert r["coded"] <= r["worst_case"] == pytest.approx(503 * 4 / 5)
        assert r["uncoded_leftovers"] == 0 or not r["conserved"]
    code, again, _ = run(
        capsys, "rate", "-K", "5", "-N", "503", "--seed", "3", "--epochs", "1", "--start-epoch", "2", "--json"
    )
    assert json.loads(again) == rows[2]


@pytest.mark.parametrize(
    "content, message",
    [
        ("[[1, 2], [3]]", "not square"),
        ("[[1, -2], [3, 1]]", "negative"),
        ("[[1, 2.5], [3, 1]]", "not an integer"),
        ('[[1, "a"], [3, 1]]', "not an integer"),
        ("[[1, 2], [3, 1]", "not valid JSON"),
        ("", "empty"),
        ("1,x\n2,3\n", "not an integer"),
        ("{}", "not valid JSON|list of lists"),
    ],
)
def test_rate_matrix_bad_files(tmp_path, capsys, content, message):
    f = tmp_path / "bad.json"
    f.write_text(content)
    code, out, err = run(capsys, "rate", "--matrix", str(f))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("coded-shuffle: error:")
    assert re.search(message, err)


def test_cli_exceptions(tmp_path, capsys):
    cases = [
        (["rate", "--workers", "0"], "--workers"),
        (["rate", "--workers", "5", "--points", "3"], "--points"),
        (["rate", "--strategy", "best"], "--strategy"),
        (["rate", "--matrix", str(tmp_path / "missing.json")], "cannot read"),
        (["rate", "--matrix", "x", "--workers", "3"], "cannot be combined"),
        (["rate", "--epochs", "0"], "--epochs"),
        (["rate", "--seed", "-1"], "--seed"),
        (["rate", "--workers", "two"], "--workers"),
        (["frobnicate"], "invalid choice"),
    ]
    for argv, needle in cases:
        code, out, err = run(capsys, *argv)
        assert code == 2, argv
        assert needle in err, (argv, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_module_entry_point_and_pipe():
    proc = subprocess.run(
        [sys.executable, "-m", "coded_shuffle", "rate", "-K", "3", "-N", "30", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["K"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "coded_shuffle", "rate", "--matrix", "-"],
        input="[[0, 1], [1]]",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "not square" in bad.stderr


def test_rate_elastic_schedule_and_orders(capsys):
    code, out, _ = run(capsys, "rate", "-K", "4,6,3", "-N", "600", "--epochs", "2", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(r["K_t"], r["K_t1"], r["K"]) for r in rows] == [(4, 6, 6), (6, 3, 6)]
    for r in rows:
        assert r["worst_case"] is None and r["order"] == "permutation"
        assert r["lower_bound"] <= r["coded"] <= r["paired"] <= r["uncoded"]
    for order in ("feistel", "py1e", "py1br", "naive"):
        code, out, _ = run(
            capsys,
            "rate",
            "-K",
            "4",
            "-N",
            "800",
            "--order",
            order,
            "--shard-size",
            "50",
            "--block-size",
            "100",
            "--json",
        )
        row = json.loads(out)
        assert code == 0 and row["order"] == order and row["lower_bound"] <= row["coded"]


def test_rate_order_exceptions(capsys):
    for argv, needle in [
        (["rate", "-K", "4,5,6"], "worker counts"),
        (["rate", "-K", "4,x"], "comma-separated"),
        (["rate", "-K", "4,0", "--epochs", "1"], "at least 1"),
        (["rate", "--order", "sorted"], "--order"),
        (["rate", "--order", "py1s", "--shard-size", "0"], "--shard-size"),
        (["rate", "-K", "2", "-N", "4", "--order", "py1s", "--canonical-nodes", "5"], "--canonical-nodes"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.parametrize("order", ["py1s", "feistel", "py1br"])
def test_simulate_with_orders(capsys, order):
    argv = ["simulate", "-K", "3", "-N", "300", "-B", "64", "--epochs", "2", "--order", order]
    code = main([*argv, "--shard-size", "25", "--block-size", "50", "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and len(rows) == 2 and all(r["verified"] for r in rows)
    assert all(r["lower_bound"] <= r["coded_symbols"] <= r["uncoded_symbols"] for r in rows)
