"""``--data PATH --format ...`` of ``simulate`` and ``run``: every record format, the format told
from the path, and the refusals (one line, status 2, before any process starts)."""

from __future__ import annotations

import io
import json
import os
import tarfile

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.cli.data import data_format
from tests.records.writers import write_mds

K = 3


def _tokens(tmp_path):
    path = tmp_path / "train.bin"
    tokens = np.random.default_rng(0).integers(0, 50_000, 24 * 40 + 5, dtype=np.uint16)
    tokens.tofile(path)
    return str(path), tokens[: 24 * 40].reshape(40, 24).astype("<u2").view(np.uint8)  # 40 windows


def _dataset(kind: str, tmp_path) -> tuple[list[str], int, int]:
    """A dataset of records of one size in the format ``kind``, its ``--data`` options, ``N``, ``B``
    (counted here from what was written, not by the readers)."""
    rng = np.random.default_rng(1)
    if kind == "tokens":
        path, rows = _tokens(tmp_path)
        return ["--data", path, "--token-window", "24"], 40, 48
    if kind == "npy":
        np.save(tmp_path / "rows.npy", rng.random((30, 5)))
        return ["--data", str(tmp_path / "rows.npy")], 30, 40
    if kind == "files":
        os.mkdir(tmp_path / "imgs")
        for i in range(25):
            (tmp_path / "imgs" / f"{i:03d}.jpg").write_bytes(rng.bytes(64))
        return ["--data", str(tmp_path / "imgs")], 25, 64
    if kind == "mds":
        samples = [{"id": i, "x": float(i)} for i in range(22)]
        write_mds(tmp_path / "mds", {"id": "int64", "x": "float32"}, samples, per_shard=8)
        return ["--data", str(tmp_path / "mds")], 22, 12
    if kind == "webdataset":
        with tarfile.open(tmp_path / "shard-0.tar", "w") as tar:
            for i in range(20):
                for ext, n in (("cls", 4), ("jpg", 10 + i)):  # samples of differing sizes ...
                    info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                    info.size = n
                    tar.addfile(info, fileobj=io.BytesIO(rng.bytes(n)))
        return ["--data", str(tmp_path / "shard-0.tar"), "--field", "cls"], 20, 4  # ... of one size here
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"v": pa.array([rng.bytes(16) for _ in range(18)], type=pa.binary(16))})
    with pa.OSFile(str(tmp_path / "data.arrow"), "wb") as f, pa.ipc.new_stream(f, table.schema) as w:
        w.write_table(table)
    return ["--data", str(tmp_path / "data.arrow")], 18, 16


@pytest.mark.parametrize("kind", ["tokens", "npy", "files", "mds", "webdataset", "arrow"])
def test_simulate_runs_every_format_verified(kind, tmp_path, capsys):
    data, N, B = _dataset(kind, tmp_path)
    argv = ["simulate", "-K", str(K), "--transitions", "1", *data, "--json"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    r = rows[0]
    assert (r["N"], r["record_bytes"], r["verified"], r["records_checked"]) == (N, B, True, N)
    assert r["coded_bytes"] == B * r["coded_symbols"]
    # the same records named by --format as by the path
    assert main([*argv, "--format", kind]) == 0


def test_format_told_from_the_path(tmp_path):
    os.mkdir(tmp_path / "tars")
    (tmp_path / "tars" / "a.tar").write_bytes(b"")
    os.mkdir(tmp_path / "mds")
    (tmp_path / "mds" / "index.json").write_text("{}")
    os.mkdir(tmp_path / "imgs")
    (tmp_path / "imgs" / "a.png").write_bytes(b"x")
    got = [data_format(str(p), "auto") for p in ("x.npy", "train.bin", "a.tar", "d.arrow", "mds/index.json")]
    assert got == ["npy", "tokens", "webdataset", "arrow", "mds"]
    os.mkdir(tmp_path / "arrays")
    (tmp_path / "arrays" / "a.npy").write_bytes(b"x")
    dirs = [data_format(str(tmp_path / d), "auto") for d in ("tars", "mds", "imgs", "arrays")]
    assert dirs == ["webdataset", "mds", "files", "npy"]
    assert data_format("x.npy", "tokens") == "tokens"


def _refusal(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_refusals_name_the_option_or_file(command, tmp_path, capsys, monkeypatch):
    import coded_shuffle.cli.run as run_cli

    monkeypatch.setattr(run_cli, "launch", lambda cmd: pytest.fail("launched"))
    os.mkdir(tmp_path / "var")
    for i in range(6):
        (tmp_path / "var" / f"{i}.bin").write_bytes(b"x" * (10 + i))
    tokens, _ = _tokens(tmp_path)
    (tmp_path / "data.xyz").write_bytes(b"abc")
    base = [command, "-K", str(K), "--transitions", "1"]
    var = _refusal([*base, "--data", str(tmp_path / "var")], capsys)
    assert str(tmp_path / "var") in var and "sizes differ (10 to 15 bytes)" in var
    assert "--token-window" in _refusal([*base, "--data", tokens], capsys)
    assert "--field applies" in _refusal(
        [*base, "--data", tokens, "--token-window", "4", "--field", "a"], capsys
    )
    assert "give --format" in _refusal([*base, "--data", str(tmp_path / "data.xyz")], capsys)
    short = _refusal([*base, "--data", tokens, "--token-window", "1000"], capsys)
    assert short.startswith("coded-shuffle: error: --data " + tokens) and "one window" in short
    few = _refusal([*base, "-K", "50", "--data", tokens, "--token-window", "24"], capsys)
    assert "40 records, fewer than the 50 workers" in few
    assert "--format applies with --data only" in _refusal([*base, "--format", "npy"], capsys)
    assert "--data cannot be combined with --points" in _refusal([*base, "-N", "9", "--data", tokens], capsys)


def test_run_copies_the_records_of_a_format_to_the_npy_file_the_job_reads(tmp_path, capsys, monkeypatch):
    import coded_shuffle.cli.run as run_cli

    seen = []

    def launch(cmd):
        path = cmd[cmd.index("--data") + 1]
        seen.append((path, np.load(path)))
        return 0

    monkeypatch.setattr(run_cli, "launch", launch)
    monkeypatch.setattr(run_cli, "compile_kernels", lambda groups: None)
    monkeypatch.setattr(run_cli, "find_mpiexec", lambda: "mpiexec")
    tokens, rows = _tokens(tmp_path)
    assert main(["run", "-K", str(K), "--data", tokens, "--token-window", "24"]) == 0
    [(path, got)] = seen
    assert np.array_equal(got, rows)  # the windows' bytes, row by row
    assert not os.path.exists(path)  # removed after the job
    assert "40 records of 48 B copied once" in capsys.readouterr().err
