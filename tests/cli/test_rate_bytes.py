"""``coded-shuffle rate --sizes FILE [--balance count|bytes]``: the loads in bytes beside the counts."""

import json

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.orders import epoch_placement


@pytest.fixture
def sizes_file(tmp_path):
    rng = np.random.default_rng(37)
    sizes = np.clip(rng.lognormal(5, 1, 400), 16, 1024).astype(np.int64) * 2  # uint16 tokens
    path = tmp_path / "sizes.npy"
    np.save(path, sizes)
    return path, sizes


def test_rate_sizes_json_in_bytes_beside_records(sizes_file, capsys):
    path, d = sizes_file
    assert main(["rate", "-K", "4", "--sizes", str(path), "--seed", "3", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    a, b = (epoch_placement(400, 4, seed=3, epoch=e).owner.tolist() for e in (0, 1))
    moved = [int(s) for i, j, s in zip(a, b, d, strict=True) if i != j]
    assert row["N"] == 400 and row["uncoded"] == len(moved) and row["uncoded_bytes"] == sum(moved)
    missing = [sum(int(s) for i, j, s in zip(a, b, d, strict=True) if i != j and j == k) for k in range(4)]
    assert row["download_bound_bytes"] == max(missing)
    assert row["batch_bytes"] == [sum(int(s) for j, s in zip(b, d, strict=True) if j == k) for k in range(4)]
    assert row["lower_bound_bytes"] <= row["coded_bytes"] <= row["uncoded_bytes"]
    assert row["lower_bound_bytes"] <= row["padded_bytes"] and row["balance"] == "count"


def test_rate_balance_bytes(sizes_file, capsys):
    path, d = sizes_file
    assert (
        main(["rate", "-K", "4", "--sizes", str(path), "--balance", "bytes", "--transitions", "2", "--json"])
        == 0
    )
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert sum(r["batch_bytes"]) == int(d.sum())
        assert all(abs(4 * b - int(d.sum())) <= 4 * int(d.max()) for b in r["batch_bytes"])


def test_rate_sizes_table_and_network(sizes_file, capsys):
    path, _ = sizes_file
    assert main(["rate", "-K", "4", "--sizes", str(path), "--network", "up=1000,down=1000"]) == 0
    out = capsys.readouterr().out
    assert "in bytes (" in out and "padded plan" in out and "bound in records x mean size" in out
    assert "on the network up=1000,down=1000, records of 32 to 2048 B" in out


def test_rate_sizes_text_file(tmp_path, capsys):
    path = tmp_path / "sizes.txt"
    path.write_text("10 20\n30,40\n50 60 70 80\n")
    assert main(["rate", "-K", "2", "--sizes", str(path), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["N"] == 8 and row["bytes"] == 360


@pytest.mark.parametrize(
    ("content", "argv", "words"),
    [
        ("1 2 x", [], "--sizes: {f}: 'x' is not a whole number of bytes"),
        ("4 0 2", [], "--sizes: {f}: 'sizes' must hold sizes of at least 1 byte, not 0 (record 1)"),
        ("", [], "--sizes: {f}: no record sizes in it"),
        ("1 2 3 4", ["--points", "5"], "--points must be the 4 records of --sizes, not 5"),
        ("1 2 3", ["-K", "4"], "--sizes: {f}: 3 records, fewer than --workers (4)"),
        ("1 2 3 4", ["--network", "up=1,down=1", "-B", "8"], "--record-bytes cannot go with --sizes"),
        (None, [], "--sizes: {f}: No such file or directory"),
        (None, ["--balance", "bytes"], "--balance bytes needs --sizes FILE"),
    ],
)
def test_rate_sizes_refusals_are_one_line(tmp_path, capsys, content, argv, words):
    f = tmp_path / "s.txt"
    if content is not None:
        f.write_text(content)
    sizes = ["--sizes", str(f)] if content is not None or "--balance" not in argv else []
    assert main(["rate", "-K", "2", *sizes, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words.format(f=f) in err[0]


def test_rate_sizes_refused_with_a_matrix(tmp_path, capsys):
    m = tmp_path / "m.json"
    m.write_text("[[0, 1], [1, 0]]")
    assert main(["rate", "--matrix", str(m), "--sizes", str(m)]) == 2
    assert "--matrix cannot be combined with --sizes" in capsys.readouterr().err


def test_the_documented_command_runs(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    (line,) = [s for s in text.splitlines() if s.startswith("coded-shuffle rate") and "--sizes" in s]
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "sizes.npy", np.arange(1, 201))
    assert main(line.split()[1:]) == 0
    assert "batches balanced by bytes" in capsys.readouterr().out
