"""``--data PATH --format ...`` of ``simulate`` and ``run``: every record format, the format told
from the path, and the refusals (one line, status 2, before any process starts)."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle.cli import main
from coded_shuffle.cli.data import data_format
from coded_shuffle.orders import epoch_placement
from tests.oracles import brute_bound
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
    # records of different sizes run with a storage (coded or exchanged, in process and over MPI,
    # the exchange on racks too: its senders chosen in bytes), and into run's cache files
    # (tests/cli/test_run_cache.py)
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


def test_run_passes_the_path_and_its_format_to_the_ranks(tmp_path, capsys, monkeypatch):
    """No copy: the ranks open ``--data`` themselves, told its format (resolved from the path) and
    its options; the launcher opened it once to check it."""
    import coded_shuffle.cli.run as run_cli

    seen = []
    monkeypatch.setattr(run_cli, "launch", lambda cmd: seen.append(cmd) or 0)
    monkeypatch.setattr(run_cli, "compile_kernels", lambda groups: None)
    monkeypatch.setattr(run_cli, "find_mpiexec", lambda: "mpiexec")
    tokens, _ = _tokens(tmp_path)
    files, _ = _variable_files(tmp_path)
    assert main(["run", "-K", str(K), "--data", tokens, "--token-window", "24"]) == 0
    assert main(["run", "-K", str(K), "--data", files, "--mode", "exchange"]) == 0
    args = [cmd[cmd.index("coded_shuffle.mpi_program") + 1 :] for cmd in seen]
    assert args[0] == ["--data", tokens, "--format", "tokens", "--token-window", "24"]
    assert args[1] == ["--data", files, "--format", "files", "--mode", "exchange"]
    assert seen[1][:3] == ["mpiexec", "-n", str(K)]  # a job of peers, each rank reads its own records
    assert capsys.readouterr().err == ""  # nothing copied, nothing to say
    # --mode auto with a storage on records of different sizes: the coded broadcast or the exchange
    # (the only modes a storage has times of), the one of least predicted time of the pieces
    # (:func:`test_simulate_times_a_storage_of_records_of_different_sizes` counts them), said in one line
    big = _big_files(tmp_path)
    stored = ["run", "-K", str(K), "--seed", "4", "--data", big, "--storage", "2", "--mode", "auto"]
    stored.append("--network")
    slow_master = "master=10,up=50,down=100"
    for net, mode, ranks in ((slow_master, "exchange", K), (NET + ",multicast", "coded", K + 1)):
        assert main([*stored, net]) == 0
        cmd = seen[-1]
        given = cmd[cmd.index("--mode") + 1] if "--mode" in cmd else "coded"  # the default, not passed on
        assert cmd[:3] == ["mpiexec", "-n", str(ranks)] and given == mode
        assert capsys.readouterr().err.startswith(f"coded-shuffle: mode auto chose {mode}: predicted ")
    assert "--mode auto needs --network SPEC" in _refusal(stored[:-1], capsys)  # nothing to choose on


def _variable_files(tmp_path, n: int = 40) -> tuple[str, list[bytes]]:
    """A directory of ``n`` files of 10 to 200 random bytes (one record a file, in name order)."""
    rng = np.random.default_rng(7)
    records = [rng.bytes(int(rng.integers(10, 201))) for _ in range(n)]
    os.mkdir(tmp_path / "docs")
    for i, r in enumerate(records):
        (tmp_path / "docs" / f"{i:03d}.bin").write_bytes(r)
    return str(tmp_path / "docs"), records


def _big_files(tmp_path) -> str:
    """A directory of 30 files of 2 to 6 KiB of random bytes (cut into 2 pieces by a storage of 2)."""
    rng = np.random.default_rng(8)
    os.mkdir(tmp_path / "big")
    for i in range(30):
        (tmp_path / "big" / f"{i:03d}.bin").write_bytes(rng.bytes(int(rng.integers(2048, 6145))))
    return str(tmp_path / "big")


def _byte_matrix(sizes: np.ndarray, K: int, seed: int, epoch: int) -> np.ndarray:
    """``S_B``: the bytes of the records worker ``i`` holds at ``epoch - 1`` and ``j`` needs at ``epoch``."""
    p0, p1 = (epoch_placement(sizes.size, K, seed=seed, epoch=t) for t in (epoch - 1, epoch))
    S_B = np.zeros((K, K), dtype=np.int64)
    np.add.at(S_B, (p0.owner, p1.owner), sizes)
    return S_B


def _check_bytes(r: dict, sizes: np.ndarray, K: int, seed: int) -> None:
    """A report on records of different sizes against the bytes counted here from the records
    written: the uncoded load, the bound weighted by size (brute force over every order of the
    workers), the download bound, and what the mode sent."""
    S_B = _byte_matrix(sizes, K, seed, r["epoch"])
    moved = S_B.sum() - np.trace(S_B)
    assert r["verified"] and r["records_checked"] == sizes.size and r["record_bytes"] == sizes.max()
    assert r["uncoded_bytes"] == moved
    assert r["lower_bound_bytes"] == brute_bound(S_B) and r["lower_bound_bytes_exact"]
    assert r["download_bound_bytes"] == max(S_B[:, j].sum() - S_B[j, j] for j in range(K))
    if r["mode"] == "split":  # the master's pairs of its half, the workers' records of the rest
        assert 0 < r["exchange_bytes"] < moved and r["payload_bytes"] > 0
        return
    sent = {"coded": r["payload_bytes"], "uncoded": r["payload_bytes"], "exchange": r["exchange_bytes"]}
    assert sent[r["mode"]] == (r["coded_bytes"] if r["mode"] == "coded" else moved)
    assert brute_bound(S_B) <= r["coded_bytes"] < moved  # pairs pad to the longer record, and still gain


#: The network of the times of records of different sizes: 1 Mbit/s is 125,000 bytes a second.
NET, RATES = "master=100,up=50,down=100", {"master": 100 * 125_000, "up": 50 * 125_000, "down": 100 * 125_000}


def _check_times(r: dict, sizes: np.ndarray, K: int, seed: int, *, measured: bool) -> None:
    """A report's times on :data:`NET` against each link's bytes counted here from the records
    written (what the busiest worker misses, what only one holds, what moves); the coded
    broadcast's symbols (the report's coded bytes) cross the master's link, every downlink and,
    without multicast, the relays' uplinks."""
    S_B = _byte_matrix(sizes, K, seed, r["epoch"])
    off = S_B - np.diag(np.diag(S_B))
    down, only, moved = off.sum(axis=0).max(), off.sum(axis=1).max(), off.sum()
    p = r["predicted_seconds"]
    multicast = r["network"] == NET + ",multicast"  # the coded symbols cross no worker's uplink
    assert r["network"] == NET or multicast
    assert (p["split"] is None) != (multicast and r["mode"] == "split")
    assert p["exchange"] == pytest.approx(max(down / RATES["down"], only / RATES["up"]))
    assert p["uncoded"] == pytest.approx(max(moved / RATES["master"], down / RATES["down"]))
    assert p["coded"] == pytest.approx(r["coded_bytes"] / min(RATES.values() if not multicast else
                                                              (RATES["master"], RATES["down"])))
    bound = max(down / RATES["down"], only / (RATES["up"] + RATES["master"]))
    assert r["time_bound_seconds"] == pytest.approx(bound)
    assert r["time_gap"] == (pytest.approx(r["seconds"] / bound - 1) if measured else None)


@pytest.mark.parametrize("mode", ["coded", "uncoded", "exchange", "split"])
def test_simulate_runs_records_of_different_sizes_in_bytes(mode, tmp_path, capsys):
    path, records = _variable_files(tmp_path)
    sizes = np.array([len(r) for r in records])
    argv = ["simulate", "-K", str(K), "--transitions", "2", "--seed", "4", "--data", path, "--mode", mode]
    assert main([*argv, "--json", "--network", NET + (",multicast" if mode == "split" else "")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        _check_bytes(r, sizes, K, 4)
        _check_times(r, sizes, K, 4, measured=False)
    if mode == "coded":  # the table has the bound weighted by size beside the one in records
        assert main([*argv, "--no-progress"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0].startswith(f"K = 3, N = 40, records of {sizes.min()} to {sizes.max()} B, mean ")
        head = out[1].strip().split("  ")
        assert head[head.index("uncoded MB") + 1].strip() == "bound MB"
        # --mode auto chooses on the times in bytes: the one of least predicted time, said so
        assert main([*argv[:-1], "auto", "--network", NET, "--json"]) == 0
        got = capsys.readouterr()
        auto = [json.loads(line) for line in got.out.splitlines()]
        first = min(auto[0]["predicted_seconds"].items(), key=lambda kv: kv[1] or float("inf"))[0]
        assert got.err.startswith(f"coded-shuffle: mode auto chose {first}: predicted ")
        assert {r["mode"] for r in auto} == {first}
        # workers that come and go, on the same records: the bound of the rectangular shuffle in bytes
        # (a leaving worker's records, from the source, one more holder that wants nothing)
        assert main(["simulate", "-K", "3,2,3", "--data", path, "--mode", mode, "--json"]) == 0
        elastic = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [(d["K"], d["verified"]) for d in elastic] == [(2, True), (3, True)]
        owners = [epoch_placement(sizes.size, k, seed=0, epoch=t).owner for t, k in enumerate([3, 2, 3])]
        for t, d in enumerate(elastic, start=1):
            S_B = np.zeros((3, 3), dtype=np.int64)
            np.add.at(S_B, (owners[t - 1], owners[t]), sizes)
            assert d["bound_bytes"] == brute_bound(S_B) <= d["load_bytes"] == d["transition"]["coded_bytes"]
            assert d["transition"]["uncoded_bytes"] == S_B.sum() - np.trace(S_B)
        assert main(["simulate", "-K", "3,2,3", "--data", path, "--mode", mode]) == 0
        assert "load MB  bound MB  load/bound  uncoded MB" in capsys.readouterr().out


def test_simulate_times_a_storage_of_records_of_different_sizes(tmp_path, capsys):
    """With a storage of 2 batches on files of 2 to 6 KiB (each cut into 2 pieces by its own
    length, ``[p L // 2, (p + 1) L // 2)``), each row's times on :data:`NET` against the bytes
    counted here: what each worker misses (the pieces of its next batch it does not hold), the
    busiest upload the exchange measured, the coded bytes the master sent; where the workers cannot
    send, the genie bound of the pieces by brute force over every order of the workers; and
    ``--mode auto`` runs the mode of least predicted time."""
    import itertools

    from coded_shuffle.engine import scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.orders import OrderSpec

    rng = np.random.default_rng(8)
    records = [rng.bytes(int(rng.integers(2048, 6145))) for _ in range(30)]
    os.mkdir(tmp_path / "big")
    for i, r in enumerate(records):
        (tmp_path / "big" / f"{i:03d}.bin").write_bytes(r)
    sizes = np.array([len(r) for r in records])
    piece = {(i, p): (p + 1) * L // 2 - p * L // 2 for i, L in enumerate(sizes) for p in (0, 1)}
    scheme = scheme_for("coded", K=K, storage=2, sizes=sizes)  # which worker holds each piece
    schedule = EpochSchedule(N=sizes.size, K=K, seed=4, spec=OrderSpec(), scheme=scheme)
    held, epochs = [], schedule.epoch(0)
    for _ in range(3):
        held.append([{(int(u) // 2, int(u) % 2) for u in scheme.held(epochs.held, k)} for k in range(K)])
        epochs = schedule.epoch(epochs.t + 1, epochs)
    argv = ["simulate", "-K", str(K), "--seed", "4", "--data", str(tmp_path / "big"), "--storage", "2"]
    argv.append("--json")
    for mode, net in (("coded", NET), ("exchange", NET), ("coded", "master=100,down=100,multicast")):
        assert main([*argv, "--mode", mode, "--network", net]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        for r in rows:
            t, owner = r["epoch"], epoch_placement(sizes.size, K, seed=4, epoch=r["epoch"]).owner
            lack = [(j, (i, p)) for i, j in enumerate(owner) for p in (0, 1) if (i, p) not in held[t - 1][j]]
            d = max(sum(piece[x] for j, x in lack if j == k) for k in range(K))
            holders = {x: {k for k in range(K) if x in held[t - 1][k]} for _, x in lack}
            genie = max(
                sum(piece[x] for j, x in lack if all(order.index(h) > order.index(j) for h in holders[x]))
                for order in itertools.permutations(range(K))
            )
            p, rates = r["predicted_seconds"], RATES
            assert r["verified"] and r["network"] == net and p["uncoded"] is p["split"] is None
            if net == NET:
                assert r["time_bound_seconds"] == pytest.approx(d / rates["down"])
                sent = r["payload_bytes"] if mode == "coded" else r["max_sent_bytes"]
                # the coded broadcast's bytes on the slowest link (a chain of relays without multicast)
                exchange = max(d / rates["down"], sent / rates["up"])
                assert p[mode] == pytest.approx(sent / min(rates.values()) if mode == "coded" else exchange)
            else:  # no worker uplinks: the master's broadcast alone, its bytes against the genie bound
                assert p["exchange"] is None and r["lower_bound_bytes"] == genie
                assert r["time_bound_seconds"] == pytest.approx(max(d, genie) / rates["master"])
                assert p["coded"] == pytest.approx(r["payload_bytes"] / rates["master"])
    assert main([*argv, "--mode", "auto", "--network", NET]) == 0
    got = capsys.readouterr()
    auto = [json.loads(line) for line in got.out.splitlines()]
    first = min(auto[0]["predicted_seconds"].items(), key=lambda kv: kv[1] or float("inf"))[0]
    assert got.err.startswith(f"coded-shuffle: mode auto chose {first}: predicted ")
    assert {r["mode"] for r in auto} == {first}


def _digests(records: list[bytes], K: int, seed: int, epoch: int) -> list[str]:
    """What each worker holds after ``epoch``, from the records written: its ids in increasing
    order and their bytes, each zero-padded to the longest record (as a worker keeps them)."""
    import hashlib

    width = max(len(r) for r in records)
    p = epoch_placement(len(records), K, seed=seed, epoch=epoch)
    out = []
    for k in range(K):
        ids = np.sort(p.batch(k)).astype("<i8")
        h = hashlib.blake2b(digest_size=16)
        h.update(ids.tobytes())
        h.update(b"".join(records[i].ljust(width, b"\0") for i in ids))
        out.append(h.hexdigest())
    return out


MPIEXEC = os.path.join(os.path.dirname(sys.executable), "mpiexec")


@pytest.mark.mpi
@pytest.mark.skipif(
    not os.path.exists(MPIEXEC) or importlib.util.find_spec("mpi4py") is None,
    reason="needs mpiexec beside the interpreter and mpi4py: pip install 'coded_shuffle[mpi]'",
)
def test_run_delivers_records_of_different_sizes_each_rank_opening_the_source(tmp_path):
    """Over MPI, from a directory of files (the master opens it) and from WebDataset samples of
    different sizes (every peer opens it): every transition verified record by record, each
    worker's holdings equal to the records written, the bytes as counted here; and files of 2 to
    6 KiB with a storage of 2 batches (:func:`_check_stored`)."""
    path, records = _variable_files(tmp_path)
    rng = np.random.default_rng(8)
    samples = [rng.bytes(int(rng.integers(10, 201))) for _ in range(30)]
    with tarfile.open(tmp_path / "shard-0.tar", "w") as tar:
        for i, sample in enumerate(samples):
            for ext, data in (("cls", b"%d" % i), ("jpg", sample)):
                info = tarfile.TarInfo(f"s{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, fileobj=io.BytesIO(data))
    jobs = [
        (records, 2, ["--data", path, "--mode", "all", "--transitions", "2", "--network", NET]),
        (samples, K, ["--data", str(tmp_path / "shard-0.tar"), "--field", "jpg", "--mode", "exchange",
                      "--network", NET]),
        (records, K, ["--data", path, "--mode", "split", "--network", NET + ",multicast", "--multicast"]),
    ]  # fmt: skip
    big = [rng.bytes(int(rng.integers(2048, 6145))) for _ in range(30)]
    os.mkdir(tmp_path / "big")
    for i, r in enumerate(big):
        (tmp_path / "big" / f"{i:03d}.bin").write_bytes(r)
    # with a storage, --mode auto on a network that multicasts: the coded broadcast, by the master
    # (the exchange among peers: tests/loader/test_peers.py); the table on standard output
    stored = NET + ",multicast"
    jobs.append((big, K, ["--data", str(tmp_path / "big"), "--storage", "2", "--transitions", "2",
                          "--mode", "auto", "--network", stored]))  # fmt: skip
    # workers that come and go (a worker joins from an empty slot, then one leaves), every mode
    jobs.append((records, "2,3,2", ["--data", path, "--mode", "all", "--transitions", "2"]))
    for written, workers, options in jobs:
        cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", str(workers), "--seed", "4", *options]
        to = str(tmp_path / "rows.json") if "--storage" in options else "-"  # the table, and JSON lines
        cmd += ["--json", to]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)
        assert proc.returncode == 0, proc.stderr
        out = proc.stdout if to == "-" else Path(to).read_text()
        rows = [json.loads(line) for line in out.splitlines()]
        if "--storage" in options:
            assert "coded-shuffle: mode auto chose coded: predicted " in proc.stderr
            _check_stored(rows, big, K, 4, stored)
            # the time lines after the table name the records' sizes, not the widest alone
            sizes = np.array([len(r) for r in big])
            said = f"records of {sizes.min():,} to {sizes.max():,} B, mean {sizes.mean():,.1f} B "
            assert f"on the network {stored}, {said}" in proc.stdout, proc.stdout
            continue
        if isinstance(workers, str):
            _check_elastic(rows, written, [int(k) for k in workers.split(",")], 4)
            continue
        sizes = np.array([len(r) for r in written])
        modes = ["coded", "uncoded", "exchange"] if workers == 2 else [options[options.index("--mode") + 1]]
        assert [r["mode"] for r in rows] == modes * (len(rows) // len(modes)) and rows
        for r in rows:
            _check_bytes(r, sizes, workers, 4)
            _check_times(r, sizes, workers, 4, measured=True)
            assert r["digests"] == _digests(written, workers, 4, r["epoch"])


def _check_elastic(rows: list[dict], records: list[bytes], counts: list[int], seed: int) -> None:
    """A job of ``counts[t]`` workers at epoch ``t`` on ``records`` of different sizes, in every
    mode, against the bytes counted here from the records written: epoch ``t``'s batches those of
    ``order_placement(N, K_t)`` on the first ``K_t`` of the job's slots, the others empty; the byte
    matrix of the rectangular ``K_t x K_{t+1}`` shuffle padded with zero rows and columns; its
    genie bound by brute force over every order of the slots; and each slot's digest."""
    import hashlib

    from coded_shuffle.orders import order_placement

    sizes, K = np.array([len(r) for r in records]), max(counts)
    width = int(sizes.max())
    owners = [
        np.asarray(order_placement(sizes.size, k, seed=seed, epoch=t).owner) for t, k in enumerate(counts)
    ]
    modes = ("coded", "uncoded", "exchange")
    assert [(r["epoch"], r["mode"]) for r in rows] == [(t, m) for t in range(1, len(counts)) for m in modes]
    for r in rows:
        t = r["epoch"]
        S_B = np.zeros((K, K), dtype=np.int64)
        np.add.at(S_B, (owners[t - 1], owners[t]), sizes)
        moved = S_B.sum() - np.trace(S_B)
        down = max(S_B[:, j].sum() - S_B[j, j] for j in range(K))
        assert r["verified"] and r["records_checked"] == sizes.size and r["K"] == K
        assert r["uncoded_bytes"] == moved and r["download_bound_bytes"] == down
        assert r["lower_bound_bytes"] == brute_bound(S_B) and r["lower_bound_bytes_exact"]
        assert brute_bound(S_B) <= r["coded_bytes"] <= moved
        sent = {"coded": r["coded_bytes"], "uncoded": moved, "exchange": moved}[r["mode"]]
        assert r["payload_bytes"] + r["exchange_bytes"] == sent
        if r["mode"] == "exchange":  # each worker receives exactly what it misses
            assert r["max_received_bytes"] == down
        digests = []
        for k in range(K):
            ids = np.flatnonzero(owners[t] == k).astype("<i8")  # none on a slot past K_t
            h = hashlib.blake2b(digest_size=16)
            h.update(ids.tobytes())
            h.update(b"".join(records[i].ljust(width, b"\0") for i in ids))
            digests.append(h.hexdigest())
        assert r["digests"] == digests


def _check_stored(rows: list[dict], records: list[bytes], K: int, seed: int, spec: str) -> None:
    """A job's reports with a storage of 2 batches on ``records`` (2 to 6 KiB, so each is cut into
    2 pieces), in the mode of least predicted time of the first transition: every transition
    verified and equal in bytes to the in-process engine's on the same records and seed, and each
    worker's pieces, by their digest, the bytes of the records written, piece ``p`` of a record of
    ``L`` bytes being its bytes ``[p L // 2, (p + 1) L // 2)``, each zero-padded to the widest
    piece; on the network ``spec``, the times of those pieces the in-process engine gives
    (``test_simulate_times_a_storage_...`` checks them against the bytes counted from the
    records), measured against their bound."""
    import hashlib

    from coded_shuffle.codec import load_dataset
    from coded_shuffle.engine import run, scheme_for
    from coded_shuffle.engine.schedule import EpochSchedule
    from coded_shuffle.network import Network
    from coded_shuffle.orders import OrderSpec

    sizes = np.array([len(r) for r in records])
    width = -(-int(sizes.max()) // 2)
    pieces = [r[p * len(r) // 2 : (p + 1) * len(r) // 2].ljust(width, b"\0") for r in records for p in (0, 1)]
    net = Network.parse(spec)
    first = {m: v for m, v in rows[0]["predicted_seconds"].items() if v is not None}
    mode = min(first, key=first.get)
    assert {r["mode"] for r in rows} == {mode}
    engine = run(load_dataset(records), K=K, epochs=len(rows), seed=seed, storage=2, mode=mode, network=net)
    engine = engine.transitions
    scheme = scheme_for("coded", K=K, storage=2, sizes=sizes)  # which worker holds each piece
    schedule = EpochSchedule(N=sizes.size, K=K, seed=seed, spec=OrderSpec(), scheme=scheme)
    now = schedule.epoch(0)
    assert [r["epoch"] for r in rows] == [1, 2]
    for r, ref in zip(rows, engine, strict=True):
        assert r["verified"] and r["records_checked"] == sizes.size
        assert (r["storage"], r["subpackets"]) == (2, 2)
        want = ref.to_dict()
        for key in ("coded_bytes", "uncoded_bytes", "wire_bytes", "exchange_bytes", "coded_symbols"):
            assert r[key] == want[key], key
        assert r["network"] == spec and r["predicted_seconds"] == pytest.approx(want["predicted_seconds"])
        assert r["time_bound_seconds"] == pytest.approx(want["time_bound_seconds"])
        assert r["time_gap"] == pytest.approx(r["seconds"] / r["time_bound_seconds"] - 1)
        assert r["lower_bound_bytes"] <= r["coded_bytes"] < r["uncoded_bytes"]
        if mode == "exchange":  # each worker receives exactly the pieces it misses
            assert r["exchange_bytes"] == r["uncoded_bytes"]
            assert r["max_received_bytes"] == r["download_bound_bytes"]
        now = schedule.epoch(r["epoch"], now)
        for k in range(K):
            ids = np.sort(scheme.held(now.held, k)).astype("<i8")
            h = hashlib.blake2b(digest_size=16)
            h.update(ids.tobytes())
            h.update(b"".join(pieces[i] for i in ids))
            assert r["digests"][k] == h.hexdigest()


def test_the_mpi_master_reads_the_records_where_they_lie(tmp_path):
    """The master of ``run`` opens ``--data`` itself: a token file's windows are rows of the file's
    map (no copy), records of different sizes zero-padded rows with their lengths."""
    import mmap

    from coded_shuffle.cli.runner.mpi_job import _load
    from coded_shuffle.cli.runner.options import JobOptions

    tokens, rows = _tokens(tmp_path)
    job = JobOptions(data=tokens, format="tokens", token_window=24, points=None, record_bytes=None)
    dataset = _load(job, K)
    assert not isinstance(dataset, str) and np.array_equal(dataset.data, rows)
    base = dataset.data
    while not isinstance(base, mmap.mmap):  # the chain of views ends at the file's map
        assert not base.flags.owndata
        base = base.base
    path, records = _variable_files(tmp_path)
    dataset = _load(JobOptions(data=path, points=None, record_bytes=None), K)
    assert not isinstance(dataset, str) and dataset.lengths.tolist() == [len(r) for r in records]
    assert [dataset.record(i) for i in range(len(records))] == records
    refused = _load(JobOptions(data=path, storage=2, mode="split", points=None, record_bytes=None), K)
    split = "--storage 2 --mode split"  # the split takes no storage; the uncoded one none of these
    assert refused == f"{split} needs records of one size: those of --data {path} differ in size"
