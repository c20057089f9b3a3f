import json
import re
import subprocess
import sys
from fractions import Fraction

import pytest

from coded_shuffle.cli import main
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import epoch_placement
from tests.cases import EXAMPLE_1, EXAMPLE_1_VALUES, OMEGA_GAP_K7, OMEGA_GAP_K7_VALUES


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_rate_matrix_json_example1(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(EXAMPLE_1))
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    assert code == 0 and err == ""
    (row,) = [json.loads(line) for line in out.splitlines()]
    # Attia and Tandon 2016, Example 1.
    known = ("K", "N", "uncoded", "paired", "coded", "lower_bound", "worst_case")
    assert row["epoch"] is None
    assert {k: row[k] for k in known} == {k: EXAMPLE_1_VALUES[k] for k in known}
    assert row["lower_bound_exact"] is True and row["strategy"] == "greedy"


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
        "gap",
        "optimal",
        "worst",
        "gain",
    ]
    # Example 1: coded 6 meets the bound 6 (the paper's figures), so the gap is 0.
    assert row.split()[:11] == ["-", "3", "15", "-", "exact", "11", "7", "6", "6", "0.00%", "yes"]
    assert "note: optimal yes: coded == bound" in out


def test_rate_certificate_and_exact_bound(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(EXAMPLE_1))
    _, out, _ = run(capsys, "rate", "--matrix", str(f), "--json")
    (row,) = [json.loads(line) for line in out.splitlines()]
    # greedy proves nothing by itself; coded == bound proves its packing maximum
    assert row["strategy"] == "greedy" and row["optimal"] is True and row["packing_optimal"] is True
    # The K = 7 gap matrix (best packing 4 cycles, least feedback arc set 5) with 15 idle workers
    # added: K = 22.
    S = [[0] * 22 for _ in range(22)]
    for i in range(7):
        S[i][:7] = OMEGA_GAP_K7[i]
    f.write_text(json.dumps(S))
    rows = {}
    for flag in ([], ["--exact-bound"]):
        _, out, _ = run(capsys, "rate", "--matrix", str(f), "--strategy", "exact", "--json", *flag)
        (rows[bool(flag)],) = [json.loads(line) for line in out.splitlines()]
    v = OMEGA_GAP_K7_VALUES
    for row in rows.values():
        assert row["uncoded"] == v["uncoded"] and row["coded"] == v["coded"]
        assert row["packing_optimal"] is True and row["optimal"] is False
    assert rows[False]["lower_bound_exact"] is False
    assert rows[True]["lower_bound_exact"] is True and rows[True]["lower_bound"] == v["lower_bound"]


def test_rate_epochs_json(capsys):
    code, out, _ = run(
        capsys, "rate", "--workers", "5", "--points", "503", "--seed", "3", "--transitions", "3", "--json"
    )
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["epoch"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert r["optimal"] == (r["coded"] == r["lower_bound"])
        assert not r["optimal"] or (r["packing_optimal"] and r["lower_bound_exact"])
        assert r["lower_bound"] <= r["coded"] <= r["paired"] <= r["uncoded"]
        assert r["worst_case"] is None  # 5 does not divide 503: unequal batches
        assert r["uncoded_leftovers"] == 0 or not r["conserved"]
    code, again, _ = run(
        capsys,
        "rate",
        "-K",
        "5",
        "-N",
        "503",
        "--seed",
        "3",
        "--transitions",
        "1",
        "--start-epoch",
        "2",
        "--json",
    )
    assert json.loads(again) == rows[2]


@pytest.mark.parametrize(
    "content, message",
    [
        ("[[1, 2], [3]]", "not rectangular: row 2 has 1 entries, expected 2"),
        ("[[1, -2], [3, 1]]", "negative"),
        ("[[1, 2.5], [3, 1]]", "not an integer"),
        ('[[1, "a"], [3, 1]]', "not an integer"),
        ("[[1, 2], [3, 1]", "not valid JSON"),
        ("", "empty"),
        ("1,x\n2,3\n", "not an integer"),
        ("{}", "not valid JSON|list of lists"),
        ("5", "JSON list of lists .* not the JSON int"),  # a JSON scalar
        ('"[[1]]"', "not the JSON str"),
        ('[[1, "2"], [3, 1]]', "'2' is a string, not an integer"),
        ("[[1, 2.0], [3, 1]]", "2.0 is a float, not an integer"),
        ("[[1, 1e3], [3, 1]]", "1000.0 is a float, not an integer"),
        ("[[1, true], [3, 1]]", "True is a boolean"),
        ("1,1e3\n2,3\n", "'1e3' is not an integer"),
        ("[[0, 9223372036854775807], [9223372036854775807, 0]]", "too large|at most 2\\*\\*53"),
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


def test_rate_matrix_file_read_is_bounded(tmp_path, capsys):
    # /dev/zero (or any endless input) must not fill memory: the read stops past 64 MiB.
    from coded_shuffle.cli.matrices import MAX_MATRIX_BYTES

    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(MAX_MATRIX_BYTES + 1)  # sparse: no disk used
    code, out, err = run(capsys, "rate", "--matrix", str(big))
    assert code == 2 and out == "" and "larger than 64 MiB" in err
    assert len(err.strip().splitlines()) == 1


def test_rate_points_past_the_exact_range_names_the_option(capsys):
    code, out, err = run(capsys, "rate", "--points", str(10**30))
    assert code == 2 and out == ""
    assert err.strip() == f"coded-shuffle: error: --points must be at most 2**53 = {2**53}, not {10**30}"


def test_cli_exceptions(tmp_path, capsys):
    cases = [
        (["rate", "--workers", "0"], "--workers"),
        (["rate", "--workers", "5", "--points", "3"], "--points"),
        (["rate", "--strategy", "best"], "--strategy"),
        (["rate", "--matrix", str(tmp_path / "missing.json")], "cannot read"),
        (["rate", "--matrix", "x", "--workers", "3"], "cannot be combined"),
        (["rate", "--transitions", "0"], "--transitions"),
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
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "not rectangular" in bad.stderr


def test_rate_elastic_schedule_and_orders(capsys):
    code, out, _ = run(capsys, "rate", "-K", "4,6,3", "-N", "600", "--transitions", "2", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [(r["K_t"], r["K_t1"], r["K"]) for r in rows] == [(4, 6, 6), (6, 3, 6)]
    for r in rows:
        assert r["worst_case"] is None and r["order"] == "permutation"
        assert r["lower_bound"] <= r["coded"] <= r["paired"] <= r["uncoded"]
    for order in ("feistel", "py1e", "py1br", "naive"):
        shard = ["--shard-size", "50", "--block-size", "100"] if order != "feistel" else []
        code, out, _ = run(capsys, "rate", "-K", "4", "-N", "800", "--order", order, *shard, "--json")
        row = json.loads(out)
        assert code == 0 and row["order"] == order and row["lower_bound"] <= row["coded"]


def test_rate_order_exceptions(capsys):
    for argv, needle in [
        (["rate", "-K", "4,5,6"], "worker counts"),
        (["rate", "-K", "4,x"], "comma-separated"),
        (["rate", "-K", "4,0", "--transitions", "1"], "at least 1"),
        (["rate", "--order", "sorted"], "--order"),
        (["rate", "--order", "py1s", "--shard-size", "0"], "--shard-size"),
        (["rate", "-K", "2", "-N", "4", "--order", "py1s", "--canonical-nodes", "5"], "--canonical-nodes"),
        # the shard options would be ignored by an order that is not shard-aware: refused
        (["rate", "--shard-size", "50"], "--shard-size applies only to the shard-aware orders"),
        (["rate", "--order", "feistel", "--block-size", "9"], "not to --order feistel"),
        (["simulate", "--order", "permutation", "--canonical-nodes", "2"], "shard-aware orders"),
        (["rate", "--matrix", "-", "--shard-size", "50"], "--matrix cannot be combined with --shard-size"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, (argv, err)


@pytest.mark.parametrize("order", ["py1s", "feistel", "py1br"])
def test_simulate_with_orders(capsys, order):
    argv = ["simulate", "-K", "3", "-N", "300", "-B", "64", "--transitions", "2", "--order", order]
    shard = ["--shard-size", "25", "--block-size", "50"] if order != "feistel" else []
    code = main([*argv, *shard, "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 0 and len(rows) == 2 and all(r["verified"] for r in rows)
    assert all(r["lower_bound"] <= r["coded_symbols"] <= r["uncoded_symbols"] for r in rows)


@pytest.mark.parametrize(
    "content",
    [
        "w0,w1,w2\n2,1,2\n2,1,2\n1,3,1\n",  # a header of labels
        "2;1;2\n2;1;2\n1;3;1\n",  # semicolons
        "\ufeff2,1,2\n2,1,2\n1,3,1\n",  # a UTF-8 byte order mark
        "\ufeff[[2, 1, 2], [2, 1, 2], [1, 3, 1]]",
        "2 1 2\n2\t1 2\n\n1 3 1\n",  # blanks
        '"a";"b";"c"\r\n2;1;2\r\n2;1;2\r\n1;3;1\r\n',
        "2,1,2,\n2,1,2,\n1,3,1,\n",  # a separator ending each line
    ],
)
def test_rate_matrix_csv_variants(tmp_path, capsys, content):
    f = tmp_path / "s.csv"
    f.write_bytes(content.encode("utf-8"))
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    assert code == 0 and err == "", err
    row = json.loads(out)
    # Attia and Tandon 2016, Example 1.
    v = EXAMPLE_1_VALUES
    assert (row["K"], row["N"], row["uncoded"], row["coded"]) == (v["K"], v["N"], v["uncoded"], v["coded"])


@pytest.mark.parametrize(
    "content, message",
    [
        ("a,b,c\n2,x,2\n2,1,2\n1,3,1\n", "line 2, column 2: 'x' is not an integer"),
        ("2,1,2\n\n2,1,y\n1,3,1\n", "line 3, column 3: 'y' is not an integer"),
        ("2,5;1;2\n2;1;2\n1;3;1\n", "line 1, column 1: '2,5' is not an integer"),
        (",w0,w1\nw0,2,1\nw1,1,2\n", "line 2, column 1: 'w0' is not an integer"),  # labels of rows
        ("2,1\n1\n", "not rectangular: line 2 has 1 entries, expected 2"),
        ("2,,2\n2,1,2\n1,3,1\n", "line 1, column 2: the entry is empty"),
    ],
)
def test_rate_matrix_csv_refused(tmp_path, capsys, content, message):
    f = tmp_path / "bad.csv"
    f.write_text(content)
    code, out, err = run(capsys, "rate", "--matrix", str(f))
    assert code == 2 and out == ""
    assert err.startswith("coded-shuffle: error:") and len(err.strip().splitlines()) == 1
    assert message in err, err


def test_rate_matrix_of_a_changing_K(tmp_path, capsys):
    # Two workers become three (the example of elastic_matrix): the joining worker holds nothing,
    # so its two points go uncoded; nothing pairs, no cycle: 2 symbols, and the bound is 2.
    f = tmp_path / "grow.csv"
    f.write_text("2,0,1\n0,2,1\n")
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    row = json.loads(out)
    assert code == 0 and (row["K_t"], row["K_t1"], row["K"]) == (2, 3, 3)
    assert (row["uncoded"], row["paired"], row["coded"], row["lower_bound"]) == (2, 2, 2, 2)
    assert "K changes from 2 to 3" in err  # no worst case N(K-1)/K
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--storage", "2")
    assert code == 2 and out == ""
    assert err.strip().endswith("needs a fixed number of workers, not a 2 x 3 --matrix")
    code, out, err = run(capsys, "plot", "leftovers", "--matrix", str(f), "--output", str(tmp_path / "p.png"))
    assert code == 2 and out == "" and "must be square here, not 2 x 3" in err


def test_rate_matrix_stdin_not_utf8():
    proc = subprocess.run(
        [sys.executable, "-m", "coded_shuffle", "rate", "--matrix", "-"],
        input=b"\xff\xfe1,2\n",
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.decode() == "coded-shuffle: error: matrix file '-' is not UTF-8 text\n"


def test_rate_unequal_batches_give_no_worst_case(tmp_path, capsys):
    # Worker 0 holds all 5 points and worker 1 needs them all: 5 uncoded symbols, above
    # N (K - 1) / K = 2.5, which is the worst case of equal batches only.
    f = tmp_path / "s.json"
    f.write_text("[[0, 5], [0, 0]]")
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    row = json.loads(out)
    assert code == 0 and row["coded"] == 5 and row["worst_case"] is None
    assert err.startswith("coded-shuffle: warning: worst_case is null: the batches are unequal")
    assert len(err.splitlines()) == 1
    code, out, err = run(capsys, "rate", "--matrix", str(f))
    header, cells = out.splitlines()[:2]
    assert cells.split()[header.split().index("worst")] == "-"
    assert "worst_case is null" in err
    # K = 7 does not divide N = 10: every transition null, one warning.
    code, out, err = run(capsys, "rate", "-K", "7", "-N", "10", "--transitions", "3", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and len(rows) == 3 and all(r["worst_case"] is None for r in rows)
    assert err.count("warning") == 1 and "unequal" in err
    # A changing K: null, and why.
    code, out, err = run(capsys, "rate", "-K", "3,4", "-N", "12", "--json")
    assert json.loads(out)["worst_case"] is None and "K changes from 3 to 4" in err
    # Equal batches keep it, silently.
    code, out, err = run(capsys, "rate", "-K", "4", "-N", "12", "--transitions", "2", "--json")
    assert err == "" and all(json.loads(line)["worst_case"] == 9 for line in out.splitlines())


def test_epochs_messages_agree(capsys):
    for command in ("rate", "simulate"):
        messages = []
        for value in ("0", "-1", "x"):
            code, _, err = run(capsys, command, f"--transitions={value}")
            assert code == 2
            messages.append(err)
        assert messages == [
            "coded-shuffle: error: argument --transitions: expected a positive integer, not 0\n",
            "coded-shuffle: error: argument --transitions: expected a positive integer, not -1\n",
            "coded-shuffle: error: argument --transitions: expected a positive integer, not 'x'\n",
        ]


def test_rate_matrix_refuses_epoch_options(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(EXAMPLE_1))
    for extra, named in [
        (["--transitions", "3"], "--transitions"),
        (["--transitions", "1"], "--transitions"),
        (["--seed", "0"], "--seed"),
        (["--start-epoch", "2"], "--start-epoch"),
        (["--order", "feistel"], "--order"),
    ]:
        code, out, err = run(capsys, "rate", "--matrix", str(f), *extra)
        assert code == 2 and out == ""
        assert err == f"coded-shuffle: error: --matrix cannot be combined with {named}\n"


def test_quality_help_shows_a_percent_sign(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["quality", "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    assert "50%" in out and "%%" not in out


def test_rate_announces_a_long_packing_on_stderr(tmp_path, capsys):
    """Over 10^6 leftovers: the packing and the bound after it say so on stderr, stdout stays JSON."""
    from coded_shuffle.bounds import cyclic_shift_matrix

    K, N = 21, 21 * 60_000
    f = tmp_path / "shift.json"
    f.write_text(json.dumps(cyclic_shift_matrix(N, K).tolist()))
    code, out, err = run(capsys, "rate", "--matrix", str(f), "--json")
    assert code == 0
    assert err.splitlines() == [
        f"packing leftover cycles, K = {K} ...",
        f"lower bound by ordering, K = {K} ...",
    ]
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert row["coded"] == row["lower_bound"] == N * (K - 1) // K and row["cycles"] == N // K


def test_optimality_gap_in_every_row(tmp_path, capsys):
    # The K = 7 gap matrix (tests/cases.py, claim 5): coded 11 against the bound 10, so the gap
    # is 11 / 10 - 1 = 10 %, and the row is not certified optimal; Example 1 meets its bound.
    from tests.cases import EXAMPLE_1, S_GAP_K7

    for S, gap, optimal in ((S_GAP_K7, 0.1, False), (EXAMPLE_1, 0.0, True)):
        f = tmp_path / "s.json"
        f.write_text(json.dumps([list(r) for r in S]))
        code, out, _ = run(capsys, "rate", "--matrix", str(f), "--strategy", "exact", "--json")
        row = json.loads(out)
        assert code == 0 and row["optimality_gap"] == pytest.approx(gap) and row["optimal"] is optimal
    code, out, _ = run(capsys, "simulate", "-K", "5", "-N", "400", "-B", "8", "--transitions", "2", "--json")
    for row in map(json.loads, out.splitlines()):
        assert row["optimality_gap"] == row["coded_symbols"] / row["lower_bound"] - 1
        assert (row["optimality_gap"] == 0) == row["optimal"]


def test_rate_with_storage(tmp_path, capsys):
    # The cyclic batch shift of K = 4 batches of 2 with M = 2 (t = 1): the worst case
    # R(t) = (N/K)(K-1-t)/(t+1) = 2 records (Elmahdy and Mohajer 2020; Attia and Tandon 2019),
    # which the scheme meets and the bound proves; every moved record misses (K-1-t)/(K-1) = 2/3
    # of its pieces, so uncoded is W 2/3 = 16/3 (docs/storage.md).
    S = [[0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2], [2, 0, 0, 0]]
    f = tmp_path / "shift.json"
    f.write_text(json.dumps(S))
    code, out, _ = run(capsys, "rate", "--matrix", str(f), "--storage", "2", "--json")
    row = json.loads(out)
    assert code == 0 and row["storage"] == 2 and row["pieces"] == 3
    assert (row["coded_fraction"], row["lower_bound_fraction"], row["worst_case"]) == ("2", "2", 2)
    assert row["uncoded"] == pytest.approx(16 / 3) and row["optimal"] and row["optimality_gap"] == 0
    # every load exact beside its number: 16/3 uncoded; the group symbols alone: each of the four
    # 3-sets of workers sends 2 symbols (two of its members want 2 pieces), 8 pieces of 1/3
    exact = (row["uncoded_fraction"], row["paired_fraction"], row["worst_case_fraction"])
    assert exact == ("16/3", "8/3", "2")
    for key in ("uncoded", "paired", "coded", "lower_bound", "worst_case"):
        assert row[key] == pytest.approx(float(Fraction(row[f"{key}_fraction"])))
    code, out, _ = run(capsys, "rate", "--matrix", str(f))
    assert code == 0 and "storage 2" not in out  # M = 1: today's table, unchanged
    for argv, message in (
        (["--storage", "5"], "--storage must be at most K = 4 batches, not 5"),
        (["--storage", "0"], "--storage"),
        (["--storage", "2", "--subpackets", "2"], "--storage cannot be combined with --subpackets"),
        (["--storage", "2", "--exact-bound"], "--exact-bound applies to --storage 1 only"),
    ):
        code, out, err = run(capsys, "rate", "--matrix", str(f), *argv)
        assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1
    code, out, err = run(capsys, "rate", "-K", "4,5", "-N", "80", "--storage", "2")
    assert code == 2 and "--storage above 1 needs a fixed number of workers" in err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["-K", "3", "--storage", "2", "--mode", "both"],
            "--storage above 1 applies to --mode coded and exchange only",
        ),
        (["-K", "3", "--storage", "4"], "--storage must be at most K = 3 batches, not 4"),
    ],
)
def test_run_refuses_a_bad_storage_before_launch(capsys, extra, message):
    assert main(["run", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("where", ["dir", "missing"])
def test_run_refuses_a_json_file_it_cannot_write_before_launch(capsys, monkeypatch, tmp_path, where):
    """``run --json DIR`` and ``--json missing/file`` printed a traceback from the master and
    exited 1; now one line, exit status 2, and no job is launched."""
    import coded_shuffle.cli.run as run_cli

    def launched(*args, **kwargs):
        raise AssertionError("the job was launched")

    monkeypatch.setattr(run_cli, "launch", launched)
    path = tmp_path if where == "dir" else tmp_path / "missing" / "rows.json"
    message = "is a directory" if where == "dir" else f"no such directory: {tmp_path / 'missing'}"
    assert main(["run", "-K", "2", "--points", "40", "--json", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--json {path}: {message}" in err and len(err.strip().splitlines()) == 1


def test_no_command_prints_usage_and_one_line(capsys):
    assert main([]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and lines[0].startswith("usage: coded-shuffle") and len(lines) == 2
    assert lines[1] == (
        "coded-shuffle: error: a command is needed (rate, quality, orders, plot, simulate, run); "
        "coded-shuffle --help says more"
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["rate", "-K", "3", "-N", "30", "--epochs", "2", "--json"],
         ["rate", "-K", "3", "-N", "30", "--transitions", "2", "--json"]),
        (["simulate", "-K", "2", "-N", "20", "-B", "8", "--epochs", "1", "--json"],
         ["simulate", "-K", "2", "-N", "20", "-B", "8", "--transitions", "1", "--json"]),
        (["orders", "--orders", "permutation", "-K", "2", "--shards", "4", "--shard-size", "5",
          "--epoch", "1", "--json"],
         ["orders", "--orders", "permutation", "-K", "2", "--shards", "4", "--shard-size", "5",
          "--start-epoch", "1", "--json"]),
        (["quality", "--algo", "py1s", "--shards", "4", "--shard-size", "50", "--batch-size", "20", "--epoch",
          "1", "--json"],
         ["quality", "--order", "py1s", "--shards", "4", "--shard-size", "50", "--batch-size", "20",
          "--start-epoch", "1", "--json"]),
    ],
    ids=["rate-epochs", "simulate-epochs", "orders-epoch", "quality-algo-epoch"],
)  # fmt: skip
def test_old_spellings_work_for_one_release_with_a_note(capsys, old, new):
    """One name a meaning in every command (--transitions, --order, --start-epoch); the old
    spellings give the same result with one deprecation line each on standard error."""
    assert main(new) == 0
    out_new, err_new = capsys.readouterr()
    assert main(old) == 0
    out_old, err_old = capsys.readouterr()
    strip = ("seconds", "timings", "per_second")

    def same(text):
        rows = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        return [{k: v for k, v in r.items() if not any(s in k for s in strip)} for r in rows]

    assert same(out_old) == same(out_new) and same(out_new)
    spelled = [w for w in old if w in ("--epochs", "--epoch", "--algo")]
    warned = [line for line in err_old.splitlines() if "is deprecated and will be removed" in line]
    assert len(warned) == len(spelled) and "deprecated" not in err_new
    for word in spelled:
        assert any(line.startswith(f"coded-shuffle: warning: {word} is deprecated") for line in warned)


def test_quality_defaults_to_seed_and_epoch_zero_as_the_others(capsys):
    argv = ["quality", "--order", "py1s", "--shards", "4", "--shard-size", "50", "--batch-size", "20"]
    argv += ["--json"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    assert main([*argv, "--seed", "0", "--start-epoch", "0"]) == 0
    explicit = json.loads(capsys.readouterr().out)
    default.pop("seconds")
    explicit.pop("seconds")
    assert default == explicit


def test_rate_with_storage_prints_its_loads_one_way(capsys):
    """``rate --storage`` mixed ``5968.29`` and ``14349/7`` in one row, and showed a strategy
    nobody asked for: the loads now read one way (exact fractions in --json) and the plan the
    storage chose is named in the note."""
    code, out, _ = run(capsys, "rate", "-K", "8", "-N", "8000", "--storage", "2")
    header, row = out.splitlines()[:2]
    cells = dict(zip(header.split(), row.split(), strict=True))
    assert code == 0 and cells["strategy"] == "-"
    for key in ("uncoded", "paired", "coded", "bound"):
        assert re.fullmatch(r"\d+(\.\d\d)?\*?", cells[key]), (key, cells[key])
    assert "plan: groups" in out and "exact in --json" in out
    code, out, _ = run(capsys, "rate", "-K", "8", "-N", "8000", "--storage", "2", "--json")
    row = json.loads(out)
    assert row["strategy"] is None and row["storage_plan"] == "groups"
    assert f"{float(Fraction(row['coded_fraction'])):.2f}" == cells["coded"]


def test_rate_on_a_network_prints_the_bound_and_the_predicted_times(capsys):
    from coded_shuffle.network import Network, transition_times

    spec = "master=1000,up=100,down=1000,multicast"
    assert main(["rate", "-K", "8", "-N", "8000", "--network", spec, "-B", "1024", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    p0, p1 = (epoch_placement(8000, 8, seed=0, epoch=e) for e in (0, 1))
    want = transition_times(shuffle_matrix(p0, p1), record_bytes=1024, network=Network.parse(spec),
                            coded_symbols=row["coded"], lower_bound_symbols=row["lower_bound"])  # fmt: skip
    assert row["predicted_seconds"] == want.predicted_seconds and row["choice"] == "split"
    assert row["time_bound_seconds"] == want.bound_seconds <= min(want.predicted_seconds.values())
    # by the bytes: coded over uncoded about 2x and over the exchange about 2.5x at K = 8 (the edge)
    p = row["predicted_seconds"]
    assert 1.8 < p["uncoded"] / p["coded"] < 2.1 and 2.3 < p["exchange"] / p["coded"] < 2.6
    assert p["split"] == row["split_seconds"] < 0.8 * p["coded"]  # and the split beside it, faster still
    assert main(["rate", "-K", "8", "-N", "8000", "--network", "up=1000,down=1000", "-B", "1024"]) == 0
    assert "choice exchange" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--network", "up=0,down=1", "-B", "8"], "--network: up=0: a rate must be positive"),
        (["--network", "up=1,down=1"], "--network needs --record-bytes B"),
        (["-B", "8"], "--record-bytes applies with --network only"),
        (["--network", "up=1,down=1", "-B", "8", "--storage", "2"], "one batch a worker only"),
    ],
)
def test_rate_network_refusals_are_one_line(argv, words, capsys):
    assert main(["rate", "-K", "4", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0]


def test_the_job_options_are_the_programs_options_typed():
    """Every option the MPI program parses is a field of JobOptions and none is dropped."""
    import dataclasses

    from coded_shuffle import mpi_program
    from coded_shuffle.cli.job import job_options
    from coded_shuffle.cli.runner.options import JobOptions

    given = ["--points", "90", "--storage", "2", "--timeout", "5", "--mode", "exchange"]
    args = mpi_program.parse_args(given)
    assert set(vars(args)) == {f.name for f in dataclasses.fields(JobOptions)}
    job = job_options(args)
    assert (job.points, job.record_bytes, job.storage, job.timeout) == (90, 1024, 2, 5.0)
    assert job.mode == "exchange"
    assert job.data is None and job.strategy == "greedy" and job.epochs == 3
    with pytest.raises(ValueError, match="'points' and 'record_bytes' must be given without 'data'"):
        JobOptions(points=None)
