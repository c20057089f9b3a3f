"""The coded shuffle across processes: mpi/shuffle.py (the entry of coded_shuffle.mpi_program) under mpiexec.

Every MPI test runs ``mpiexec -n K+1 python -m mpi4py mpi/shuffle.py`` in a subprocess with a
timeout (a deadlocked rank would otherwise hang the suite), with K = 1, 2, 3 workers: more ranks
than cores, so oversubscription is exercised too.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle import cli
from coded_shuffle.codec import FRAME_HEADER_BYTES, encode_plan_arrays, load_dataset
from coded_shuffle.engine import synthetic_dataset
from coded_shuffle.matrix import shuffle_matrix
from coded_shuffle.orders import OrderSpec, epoch_placement, order_placement
from coded_shuffle.plan import plan_delivery, rates
from coded_shuffle.transport import InProcessTransport, TokenBucket

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "mpi" / "shuffle.py"
MPIEXEC = Path(sys.executable).parent / "mpiexec"
TIMEOUT = 120
HAVE_MPI = MPIEXEC.exists() and importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(
    not HAVE_MPI, reason="needs mpiexec beside the interpreter and mpi4py: pip install 'coded_shuffle[mpi]'"
)
ENTRY = 12  # bytes of an entry: fixed-size records, 32-bit ids (docs/wire-format.md)
RUN = 12  # bytes of a row of the receiver index (docs/wire-format.md)


def program(faults: bool) -> list[str]:
    """The program, or with ``faults`` its test-only entry that takes the options of the faults
    (``--fail-rank``, ``--corrupt-worker``: :mod:`coded_shuffle.mpi_faults`)."""
    return ["-m", "coded_shuffle.mpi_faults"] if faults else [str(PROGRAM)]


def run_mpi(
    K: int, *args: str, timeout: float = TIMEOUT, faults: bool = False
) -> subprocess.CompletedProcess[str]:
    cmd = [str(MPIEXEC), "-n", str(K + 1), sys.executable, "-m", "mpi4py", *program(faults), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


def run_peers(
    K: int, *args: str, timeout: float = TIMEOUT, faults: bool = False
) -> subprocess.CompletedProcess[str]:
    """The program on ``K`` ranks and no master: ``--mode exchange`` alone, a job of peers."""
    cmd = [str(MPIEXEC), "-n", str(K), sys.executable, "-m", "mpi4py", *program(faults), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT, check=False)


#: What MPICH's mpiexec (hydra) prints on standard output when it reports a bad termination.
HYDRA_BAD_TERMINATION = "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"


def run_mpi_refused(K: int, *args: str, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run the program on input it must refuse, as ``coded-shuffle run`` does (``--status-file``).

    Every rank exits with 0 and the master writes the job's status to the file. Hydra may still
    kill the last ranks as the first ones leave (status 9 and its "bad termination" report: the
    race of the last exits, docs/mpi.md "Failures"), which ranks that finish in a blink meet
    often; ``coded-shuffle run`` reads the status file and leaves that report out, so it is
    accepted here too, and only then. Returns the process and the status written.
    """
    status = tmp_path / "status"
    status.unlink(missing_ok=True)
    proc = run_mpi(K, *args, "--status-file", str(status), timeout=60)
    assert status.exists(), proc.stdout + proc.stderr  # the master's word on the job, always
    if HYDRA_BAD_TERMINATION in proc.stdout:
        assert proc.returncode == 9 and "Killed (signal 9)" in proc.stdout, proc.stdout
    else:
        assert proc.returncode == 0, proc.stderr
    return proc, status.read_text().strip()


def json_rows(proc: subprocess.CompletedProcess[str]) -> list[dict]:
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def framing(symbols_per_frame: list[int], runs_per_frame: list[int] | None = None) -> int:
    """Framing bytes of frames of these many symbols and receiver-index rows, by the wire format:
    header + entries + index, padded to 8."""
    runs = runs_per_frame or [0] * len(symbols_per_frame)
    return sum(
        -(-(FRAME_HEADER_BYTES + ENTRY * n + RUN * r) // 8) * 8
        for n, r in zip(symbols_per_frame, runs, strict=True)
    )


def split(n: int, per: int) -> list[int]:
    return [min(per, n - lo) for lo in range(0, n, per)]


def expected_digests(dataset, N: int, K: int, seed: int, epoch: int) -> list[str]:
    """What each worker must hold after ``epoch``, computed in one process from the master's records."""
    p = epoch_placement(N, K, seed=seed, epoch=epoch)
    out = []
    for k in range(K):
        ids = p.batch(k)
        h = hashlib.blake2b(digest_size=16)
        h.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
        h.update(np.ascontiguousarray(dataset.data[ids]).data)
        out.append(h.hexdigest())
    return out


# --------------------------------------------------------------------------- pacing (no MPI)


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.now += s


def test_token_bucket_holds_the_rate():
    t = FakeTime()
    bucket = TokenBucket(1000.0, burst=100, clock=t.clock, sleep=t.sleep)
    assert bucket.consume(100) == 0.0  # the bucket starts full
    for _ in range(10):
        bucket.consume(250)
    # 2500 bytes beyond the burst at 1000 B/s: 2.5 s, however the requests are cut.
    assert t.now == pytest.approx(2.5)
    t.now += 10.0  # idle: the bucket refills only up to its depth
    assert bucket.consume(100) == 0.0
    assert bucket.consume(1) == pytest.approx(0.001)
    assert bucket.waited == pytest.approx(2.501)


def test_token_bucket_brute_force_bound(rng):
    """Never more than burst + rate * elapsed bytes out by any time (checked at every request)."""
    t = FakeTime()
    bucket = TokenBucket(5000.0, burst=700, clock=t.clock, sleep=t.sleep)
    sent = 0
    for n in rng.integers(0, 3000, 200).tolist():
        if rng.random() < 0.3:
            t.now += float(rng.random())
        bucket.consume(n)
        sent += n
        assert sent <= 700 + 5000.0 * t.now + 1e-6


def test_token_bucket_exceptions():
    with pytest.raises(ValueError, match="'rate'"):
        TokenBucket(0)
    with pytest.raises(ValueError, match="'rate'"):
        TokenBucket(float("inf"))
    with pytest.raises(TypeError, match="'rate'"):
        TokenBucket("1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'burst'"):
        TokenBucket(1.0, burst=0)
    with pytest.raises(ValueError, match="'mbps'"):
        TokenBucket.from_mbps(-1)
    with pytest.raises(ValueError, match="'n'"):
        TokenBucket(1.0).consume(-1)
    with pytest.raises(TypeError, match="'pace'"):
        InProcessTransport(2, pace=3)  # type: ignore[arg-type]


def test_in_process_transport_paced():
    t = FakeTime()
    ds = load_dataset(np.zeros((100, 100), dtype=np.uint8))
    frame = encode_plan_arrays(ds, np.arange(50), np.full(50, -1), epoch=1)
    link = InProcessTransport(2, pace=TokenBucket(1000.0, burst=1, clock=t.clock, sleep=t.sleep))
    link.send([frame, frame])
    assert t.now == pytest.approx((2 * frame.size - 1) / 1000.0)
    assert link.stats.bytes == 2 * frame.size


def test_transport_imports_without_mpi4py():
    code = "import sys; sys.modules['mpi4py'] = None; import coded_shuffle.transport, coded_shuffle.cli"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_run_without_mpiexec_is_a_one_line_error(monkeypatch, capsys):
    import coded_shuffle.cli.run

    monkeypatch.setattr(coded_shuffle.cli.run, "find_mpiexec", lambda: None)
    assert cli.main(["run", "--workers", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # A hint that works without the package on an index: the extra's two packages by name.
    assert len(err) == 1 and "pip install 'mpi4py>=4' mpich" in err[0]


def test_run_accepts_every_option_of_the_program():
    # One specification: every option docs/mpi.md lists for the program is one of run's, and run
    # passes each one given on to the program's command line.
    doc = (Path(__file__).parents[2] / "docs" / "mpi.md").read_text(encoding="utf-8")
    listed = set()
    for line in doc.splitlines():
        if line.startswith("| `--"):
            listed |= set(re.findall(r"`(--[a-z-]+)", line.split("|")[1]))
    assert {"--points", "--data", "--mode", "--count-links", "--max-frame-bytes", "--timeout"} <= listed
    run_help = cli.build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    assert all(opt in run_help for opt in listed), sorted(o for o in listed if o not in run_help)
    given = ["run", "-K", "2", "--points", "90", "--record-bytes", "16", "--transitions", "2",
             "--start-epoch", "1", "--seed", "4", "--mode", "both", "--strategy", "exact",
             "--order", "feistel", "--link-mbps", "5.0", "--max-frame-bytes", "4096",
             "--max-repair-rounds", "1", "--timeout", "9.0", "--count-links",
             "--network", "master=100,down=100", "--json", "rows.jsonl"]  # fmt: skip
    cmd = cli.run_command(cli.build_parser().parse_args(given), "mpiexec")
    assert cmd[8:] == given[3:]


def test_the_faults_of_the_tests_are_no_option_of_the_program_or_the_job(monkeypatch):
    """A rank that fails, a corrupted frame, dropped datagrams: only the test-only entry
    (coded_shuffle.mpi_faults) takes them, and installs them as hooks, not as the job's options."""
    import dataclasses

    from coded_shuffle import mpi_program
    from coded_shuffle.cli.runner import hooks
    from coded_shuffle.cli.runner.options import JobOptions

    def refused(self, message):  # the program's own refusal ends the process (every rank's)
        raise ValueError(message)

    monkeypatch.setattr(mpi_program._Parser, "error", refused)
    faults = [
        "--fail-rank",
        "--fail-epoch",
        "--fail-at",
        "--fail-how",
        "--corrupt-worker",
        "--multicast-drop",
    ]
    for opt in faults:
        with pytest.raises(ValueError, match=f"unrecognized arguments: {opt} 1"):
            mpi_program.parse_args(["--points", "90", opt, "1"])
    fields = {f.name for f in dataclasses.fields(JobOptions)}
    assert not fields & {o[2:].replace("-", "_") for o in faults}
    assert type(hooks.hooks()) is hooks.Hooks  # nothing installed in this process


def test_run_command_line():
    args = cli.build_parser().parse_args(["run", "-K", "3", "--points", "90", "--json", "--link-mbps", "50"])
    cmd = cli.run_command(args, "mpiexec")
    assert cmd[:3] == ["mpiexec", "-n", "4"]
    assert cmd[4:8] == ["-m", "mpi4py", "-m", "coded_shuffle.mpi_program"]
    assert cmd[-2:] == ["--json", "-"] and "--link-mbps" in cmd
    assert "--strategy" not in cmd  # not given: the program's default, and no complaint in other modes


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def bad_data_files(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """Bad --data files and a word the error must hold."""
    (tmp_path / "text.npy").write_text("not numpy\n")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}, None], dtype=object))
    np.save(tmp_path / "empty.npy", np.zeros((0, 4), dtype=np.uint8))
    np.save(tmp_path / "one.npy", np.zeros((1, 4), dtype=np.uint8))
    np.save(tmp_path / "zero-width.npy", np.zeros((100, 0), dtype=np.uint8))
    return {
        "missing": (str(tmp_path / "missing.npy"), "no such file"),
        "directory": (str(tmp_path), "not a file"),
        "not npy": (str(tmp_path / "text.npy"), "not a .npy file"),
        "objects": (str(tmp_path / "objects.npy"), "Python objects"),
        "empty": (str(tmp_path / "empty.npy"), "no records"),
        "fewer records than workers": (str(tmp_path / "one.npy"), "fewer than the 2 workers"),
        "zero-width rows": (str(tmp_path / "zero-width.npy"), "records of 0 bytes"),
    }


def test_run_bad_data_is_one_line(tmp_path, capsys):
    for path, word in bad_data_files(tmp_path).values():
        assert cli.main(["run", "--workers", "2", "--data", path]) == 2
        line = one_line_error(capsys.readouterr().err)
        assert line.startswith("coded-shuffle: error: --data: ") and word in line
        assert "pickle" not in line and "allow_pickle" not in line


@pytest.mark.parametrize(
    ("options", "word"),
    [
        (["--mode", "uncoded", "--strategy", "exact"], "--strategy"),
        (["--mode", "exchange", "--strategy", "greedy"], "--strategy"),
        (["--data", "x.npy", "--points", "100"], "--points"),
        (["--data", "x.npy", "-B", "8"], "--record-bytes"),
    ],
)
def test_run_refuses_options_the_mode_ignores(options, word, capsys):
    assert cli.main(["run", "--workers", "2", *options]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert line.startswith("coded-shuffle: error: ") and word in line


def test_program_refuses_options_the_mode_ignores():
    from coded_shuffle.mpi_program import ignored_options

    assert ignored_options("alltoallv", ["--max-frame-bytes"]) is not None
    assert ignored_options("all", ["--strategy", "--max-frame-bytes", "--max-repair-rounds"]) is None
    assert ignored_options("both", ["--link-mbps"]) is None
    assert ignored_options("exchange", ["--link-mbps"]) is None  # the workers' uplinks paced too


# --------------------------------------------------------------------------- under mpiexec


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize("K", [1, 2, 3])
def test_coded_and_uncoded_verified_with_exact_byte_counts(K, tmp_path, receiver_runs_reference):
    N, B, seed, epochs, max_frame = 600, 64, 7, 2, 2048
    out = tmp_path / "rows.jsonl"
    proc = run_mpi(
        K, "--points", str(N), "--record-bytes", str(B), "--transitions", str(epochs), "--seed", str(seed),
        "--mode", "both", "--max-frame-bytes", str(max_frame), "--json", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "verified" in proc.stdout  # the table went to standard output
    # The start-up (kernels loaded, links opened) is one warm-up line apart, above the table's rows.
    lines = proc.stdout.splitlines()
    assert lines[1].startswith(f"warm-up: one transition of {4 * K} records a mode, ")
    assert lines[2].split()[:2] == ["epoch", "mode"] and "warm-up" not in "".join(lines[2:])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["epoch"], r["mode"]) for r in rows] == [
        (e, m) for e in range(1, epochs + 1) for m in ("coded", "uncoded")
    ]
    dataset = synthetic_dataset(N, B, seed=seed)
    per = max_frame // B
    for r in rows:
        assert r["verified"] and r["records_checked"] == N and r["repairs"] == 0
        assert (r["K"], r["N"], r["record_bytes"]) == (K, N, B)
        p0, p1 = (epoch_placement(N, K, seed=seed, epoch=t) for t in (r["epoch"] - 1, r["epoch"]))
        load = rates(shuffle_matrix(p0, p1))
        assert r["lower_bound"] <= r["coded_symbols"] == load.coded <= r["uncoded_symbols"] == load.uncoded
        if r["mode"] == "coded":
            assert r["planned_symbols"] == load.coded
            frames = split(load.coded, per) or [0]  # an empty plan still sends one empty frame
            plan = plan_delivery(p0, p1)
            starts = np.cumsum([0] + frames)
            runs = [
                len(receiver_runs_reference(plan, lo, lo + n))
                for lo, n in zip(starts[:-1], frames, strict=True)
            ]
        else:
            assert r["planned_symbols"] == load.uncoded
            moved = p0.owner != p1.owner
            frames = [n for j in range(K) for n in split(int((moved & (p1.owner == j)).sum()), per)]
            runs = None  # points sent alone, in frames to each worker: no receiver index
        # What left the master: the planned load of records plus the documented framing, exactly.
        assert r["wire_symbols"] == r["planned_symbols"]
        assert r["wire_bytes"] == r["planned_symbols"] * B + framing(frames, runs)
        assert r["header_bytes"] == framing(frames, runs) and r["frames"] == len(frames)
        assert r["digests"] == expected_digests(dataset, N, K, seed, r["epoch"])


@needs_mpi
@pytest.mark.mpi
def test_same_seed_same_bytes_and_resume():
    common = ["--points", "500", "--record-bytes", "32", "--seed", "3", "--json", "-"]
    full = json_rows(run_mpi(3, *common, "--transitions", "3"))
    resumed = json_rows(run_mpi(3, *common, "--transitions", "1", "--start-epoch", "2"))
    assert [r["epoch"] for r in full] == [1, 2, 3] and [r["epoch"] for r in resumed] == [3]
    assert resumed[0]["digests"] == full[2]["digests"]
    assert resumed[0]["wire_bytes"] == full[2]["wire_bytes"]
    dataset = synthetic_dataset(500, 32, seed=3)
    assert full[2]["digests"] == expected_digests(dataset, 500, 3, 3, 3)


@needs_mpi
@pytest.mark.mpi
def test_npy_dataset(tmp_path):
    data = np.random.default_rng(5).standard_normal((300, 6)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    rows = json_rows(
        run_mpi(2, "--data", str(tmp_path / "x.npy"), "--transitions", "2", "--mode", "both", "--json", "-")
    )
    assert len(rows) == 4 and all(r["verified"] and r["record_bytes"] == 24 for r in rows)
    assert rows[-1]["digests"] == expected_digests(load_dataset(data), 300, 2, 0, 2)


@needs_mpi
@pytest.mark.mpi
def test_corrupted_symbol_is_repaired():
    rows = json_rows(
        run_mpi(
            2,
            "--points",
            "400",
            "--record-bytes",
            "64",
            "--transitions",
            "2",
            "--corrupt-worker",
            "1",
            "--json",
            "-",
            faults=True,
        )
    )
    assert rows[0]["repairs"] >= 1 and rows[0]["repair_bytes"] > 0 and rows[0]["verified"]
    assert rows[1]["repairs"] == 0 and rows[1]["verified"]


@needs_mpi
@pytest.mark.mpi
def test_paced_link_time_follows_bytes():
    """The master's link and, in the exchange, each worker's uplink paced at the same rate: each
    delivery takes at least its busiest sender's bytes over the rate."""
    mbps = 8.0  # 1 MB/s
    rows = json_rows(
        run_mpi(2, "--points", "4000", "--record-bytes", "256", "--transitions", "2", "--mode", "all",
                "--link-mbps", str(mbps), "--json", "-")
    )  # fmt: skip
    rate = mbps * 1e6 / 8
    burst = 1 << 16  # the bucket's depth at this rate
    assert [r["mode"] for r in rows] == ["coded", "uncoded", "exchange"] * 2
    for r in rows:
        assert r["verified"] and r["link_mbps"] == mbps
        sent = r["max_sent_bytes"] if r["mode"] == "exchange" else r["wire_bytes"]
        assert sent > 3 * burst and r["seconds"] >= (sent - burst) / rate
    coded, uncoded, _ = rows[3:]
    assert uncoded["wire_bytes"] > 1.9 * coded["wire_bytes"]
    # Unpaced, the exchange's 0.25 MB a worker takes milliseconds on one host, not a quarter second.
    # The pace bounds each delivery's time from below by its bytes (checked above, whatever the
    # load); how closely time follows bytes is measured by benchmarks/mpi_link.py, not here.


@needs_mpi
@pytest.mark.mpi
@pytest.mark.parametrize(("rank", "how"), [(2, "raise"), (0, "raise"), (1, "exit")])
def test_failing_rank_aborts_the_job(rank, how):
    proc = run_mpi(
        3, "--points", "300", "--transitions", "3", "--fail-rank", str(rank), "--fail-epoch", "2",
        "--fail-how", how, timeout=60, faults=True,
    )  # fmt: skip
    assert proc.returncode != 0
    assert f"rank {rank}: deliberate" in proc.stderr
    if how == "raise":
        assert "RuntimeError" in proc.stderr


@needs_mpi
@pytest.mark.mpi
def test_bad_arguments_exit_2_with_one_message():
    proc = run_mpi(2, "--mode", "sideways", timeout=60)
    assert proc.returncode != 0
    assert proc.stderr.count("error: argument --mode") == 1


@needs_mpi
@pytest.mark.mpi
def test_cli_run_prints_json_lines():
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", "2", "--points", "200", "-B", "16"]
    proc = subprocess.run(
        [*cmd, "--transitions", "1", "--mode", "both", "--json"],
        capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, check=False,
    )  # fmt: skip
    rows = json_rows(proc)
    keys = {"epoch", "mode", "K", "N", "record_bytes", "planned_symbols", "wire_symbols", "wire_bytes",
            "lower_bound", "seconds", "repairs", "verified"}  # fmt: skip
    assert [r["mode"] for r in rows] == ["coded", "uncoded"]
    assert all(keys <= set(r) and r["verified"] for r in rows)


@needs_mpi
@pytest.mark.mpi
def test_cli_run_changes_the_number_of_workers_between_epochs():
    """``run --workers 3,2,3``: four ranks, epoch t's batches on its first K_t workers; every
    transition verified in every mode, its bound the genie bound of the rectangular K_t x K_{t+1}
    shuffle (zero rows and columns for the workers that hold or want nothing), and the coded load
    that of the same transitions in one process (a leaving worker's records go uncoded either way)."""
    from coded_shuffle.bounds import lower_bound
    from coded_shuffle.engine.elastic import elastic_run
    from coded_shuffle.matrix import elastic_matrix

    N, Ks = 60, (3, 2, 3)
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "--workers", "3,2,3", "--points", str(N), "-B", "16",
           "--transitions", "2", "--mode", "all", "--json", "-"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, check=False)
    rows = json_rows(proc)
    assert [(r["epoch"], r["mode"]) for r in rows] == [
        (t, m) for t in (1, 2) for m in ("coded", "uncoded", "exchange")
    ]
    here = elastic_run(synthetic_dataset(N, 16, seed=0), workers=Ks, seed=0)
    for t in (1, 2):
        was, now = (np.asarray(order_placement(N, Ks[e], seed=0, epoch=e).owner) for e in (t - 1, t))
        S = np.zeros((Ks[t - 1], Ks[t]), dtype=np.int64)
        np.add.at(S, (was, now), 1)  # the rectangular shuffle, record by record
        bound = int(lower_bound(elastic_matrix(S)).value)
        moved = int((was != now).sum())
        for r in (r for r in rows if r["epoch"] == t):
            assert (
                r["verified"] and r["K"] == 3 and r["lower_bound"] == bound and r["uncoded_symbols"] == moved
            )
            assert r["coded_symbols"] == here[t - 1].symbols >= bound


@needs_mpi
@pytest.mark.mpi
def test_cli_run_on_a_network_reports_its_time_gap_and_auto_runs_the_fastest_mode():
    base = [sys.executable, "-m", "coded_shuffle", "run", "-K", "3", "--points", "300", "-B", "64",
            "--transitions", "1", "--json"]  # fmt: skip
    switch = "master=1000,up=1000,down=1000"
    proc = subprocess.run([*base, "--mode", "auto", "--network", switch], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith("coded-shuffle: mode auto chose exchange: predicted ")
    (row,) = json_rows(proc)
    assert row["mode"] == "exchange" and row["verified"] and row["network"] == switch
    assert row["time_gap"] == pytest.approx(row["seconds"] / row["time_bound_seconds"] - 1, rel=1e-12)
    p = {m: v for m, v in row["predicted_seconds"].items() if v is not None}  # None: not on this network
    assert row["choice"] == "exchange" == min(p, key=p.get) and row["predicted_seconds"]["split"] is None
    proc = subprocess.run([*base, "--mode", "all", "--network", switch], capture_output=True, text=True,
                          timeout=TIMEOUT, cwd=ROOT, check=False)  # fmt: skip
    rows = json_rows(proc)
    assert [r["mode"] for r in rows] == ["coded", "uncoded", "exchange"]
    assert len({r["time_bound_seconds"] for r in rows}) == 1 and all(r["time_gap"] is not None for r in rows)
    # --mode auto with --multicast, which the exchange refuses, runs the coded broadcast instead
    # (tests/cli/test_run_checks.py, without a launch)


@needs_mpi
@pytest.mark.mpi
def test_unpaced_table_of_several_modes_says_where_the_gain_shows(tmp_path):
    """The table of every mode: each row in its own units against its own bounds, a legend, what is
    known of the link, and one verdict a transition on the network."""
    from coded_shuffle.cli.runner.mpi_job import UNPACED_NOTE

    N, K = 200, 2
    cmd = [sys.executable, "-m", "coded_shuffle", "run", "-K", str(K), "--points", str(N), "-B", "16"]
    cmd += ["--transitions", "1"]
    out = tmp_path / "rows.jsonl"
    switch = ["--network", "master=1000,up=1000,down=1000", "--json", str(out)]
    every = subprocess.run([*cmd, "--mode", "all", *switch], capture_output=True, text=True, timeout=TIMEOUT,
                           cwd=ROOT, check=True)  # fmt: skip
    lines = every.stdout.splitlines()
    assert "link = not paced by the engine; shaping unknown" in lines[0]
    header = lines[2].split()
    assert header[:5] == ["epoch", "mode", "unit", "sent", "planned"]
    rows = {line.split()[1]: line.split() for line in lines[3:6]}
    # record by record: W moved, the most a worker misses, the most one worker gives (one holder each)
    p0, p1 = (epoch_placement(N, K, seed=0, epoch=e) for e in (0, 1))
    moved = p0.owner != p1.owner
    W = int(moved.sum())
    down = max(int((moved & (p1.owner == j)).sum()) for j in range(K))
    up = max(int((moved & (p0.owner == i)).sum()) for i in range(K))
    coded = json.loads(out.read_text().splitlines()[0])["coded_symbols"]
    assert rows["coded"][2:7] == ["symbols", str(coded), str(coded), f"{coded}/{coded}", f"{down}/{coded}"]
    assert rows["uncoded"][2:7] == ["records", str(W), str(W), f"{down}/{W}", f"{down}/{W}"]
    assert rows["exchange"][2:7] == ["records", str(W), str(W), f"{down}/{up}", f"{down}/{up}"]
    assert lines[6].startswith("unit: ") and any(line.startswith("  exchange: ") for line in lines)
    assert UNPACED_NOTE in lines
    (verdict,) = [line for line in lines if line.startswith("  epoch ")]
    measured = sorted((json.loads(r) for r in out.read_text().splitlines()), key=lambda r: r["seconds"])
    assert verdict.startswith(f"  epoch 1: measured fastest {measured[0]['mode']} ")
    assert "predicted fastest exchange" in verdict and all(r["binding_links"] for r in measured)
    detail = lines[lines.index(verdict) + 1]
    assert "exchange" in detail and "(downlink=uplink)" in detail and "measured / predicted: coded " in detail
    if importlib.util.find_spec("matplotlib") is not None:  # the plot of these results (the plot extra)
        assert cli.main(["plot", "run", "--results", str(out), "-o", str(tmp_path / "run.svg")]) == 0
        assert b"<svg" in (tmp_path / "run.svg").read_bytes()
    paced = subprocess.run([*cmd, "--mode", "both", "--link-mbps", "400"], capture_output=True, text=True,
                           timeout=TIMEOUT, cwd=ROOT, check=True)  # fmt: skip
    assert "note: the engine does not pace" not in paced.stdout
    assert "link = paced at 400 Mbit/s by the engine" in paced.stdout.splitlines()[0]


@needs_mpi
@pytest.mark.mpi
def test_shard_aware_order_verified():
    args = ["--points", "400", "--record-bytes", "64", "--transitions", "2", "--mode", "both", "--json", "-"]
    rows = json_rows(run_mpi(2, *args, "--order", "py1br", "--shard-size", "20", "--block-size", "40"))
    assert len(rows) == 4 and all(r["verified"] for r in rows)
    # The same order computed in one process gives the planned load.
    spec = OrderSpec("py1br", shard_size=20, block_size=40)
    for r in rows:
        S = shuffle_matrix(
            order_placement(400, 2, seed=0, epoch=r["epoch"] - 1, spec=spec),
            order_placement(400, 2, seed=0, epoch=r["epoch"], spec=spec),
        )
        expected = rates(S).coded if r["mode"] == "coded" else int(S.sum() - np.trace(S))
        assert r["planned_symbols"] == expected


@needs_mpi
@pytest.mark.mpi
def test_exchange_verified_with_exact_bytes():
    N, B, seed, K = 900, 48, 5, 3
    rows = json_rows(
        run_mpi(K, "--points", str(N), "--record-bytes", str(B), "--seed", str(seed), "--transitions", "2",
                "--mode", "all", "--json", "-")
    )  # fmt: skip
    assert [(r["epoch"], r["mode"]) for r in rows] == [
        (e, m) for e in (1, 2) for m in ("coded", "uncoded", "exchange")
    ]
    dataset = synthetic_dataset(N, B, seed=seed)
    for r in rows:
        assert r["verified"] and r["digests"] == expected_digests(dataset, N, K, seed, r["epoch"])
        p0, p1 = (epoch_placement(N, K, seed=seed, epoch=t) for t in (r["epoch"] - 1, r["epoch"]))
        moved = p0.owner != p1.owner
        into = np.bincount(p1.owner[moved], minlength=K) * B  # what each worker misses, counted here
        out_of = np.bincount(p0.owner[moved], minlength=K) * B  # one holder a record: forced senders
        assert r["download_bound_bytes"] == into.max() and r["upload_bound_bytes"] == out_of.max()
        if r["mode"] == "exchange":
            # Each moved record leaves its old holder once, straight to its new one; none from the master.
            assert r["exchange_bytes"] == moved.sum() * B and r["planned_symbols"] == moved.sum()
            assert r["max_sent_bytes"] == out_of.max() and r["max_received_bytes"] == into.max()
            assert r["wire_bytes"] == 0 and r["wire_symbols"] == 0 and r["exchange_header_bytes"] > 0
        else:
            assert r["exchange_bytes"] == 0


@needs_mpi
@pytest.mark.mpi
def test_run_refusal_seen_by_the_program_is_status_2_and_one_line(tmp_path):
    # A .npy file cut short: its header is sound, its records are not all there. run refuses it
    # before launch (tests/cli/test_run_checks.py); launched all the same, here past run's checks,
    # the master refuses it: the status reaches run through the status file, never as hydra's
    # status 9, and nothing reaches standard output.
    path = tmp_path / "short.npy"
    np.save(path, np.zeros((100, 16), dtype=np.uint8))
    os.truncate(path, 300)
    unchecked = (
        "import sys; from coded_shuffle.cli import build_parser; from coded_shuffle.cli.run import "
        "find_mpiexec, launch, run_command; args = build_parser('run').parse_args(sys.argv[1:]); "
        "sys.exit(launch(run_command(args, find_mpiexec())))"
    )
    cmd = [sys.executable, "-c", unchecked, "run", "-K", "2", "--data", str(path)]
    for _ in range(3):
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT, check=False)
        assert proc.returncode == 2 and proc.stdout == "", proc.stdout
        line = one_line_error(proc.stderr)
        assert line.startswith("coded-shuffle run: error: ") and "is cut short: its header promises" in line


@needs_mpi
@pytest.mark.mpi
def test_program_bad_input_is_one_line_without_abort(tmp_path):
    files = bad_data_files(tmp_path)
    cases = [
        (["--data", files["objects"][0]], "Python objects"),
        (["--data", files["not npy"][0]], "not a .npy file"),
        (["--mode", "alltoallv", "--max-frame-bytes", "4096"], "--max-frame-bytes"),
        # options an order that is not shard-aware would ignore
        (["--order", "permutation", "--shard-size", "20"], "applies only to the shard-aware orders"),
    ]
    for options, word in cases:
        proc, status = run_mpi_refused(2, *options, tmp_path=tmp_path)
        assert status == "2", proc.stdout
        line = one_line_error(proc.stderr)
        assert line.startswith("coded-shuffle run: error: ") and word in line


def _borrow_compiled_kernels(tree: Path, installed: Path) -> None:
    """Numba's cache of ``tree``'s kernels, where it has one, given to the ``installed`` copy of
    the package: the cache files beside each module's, and each module's mtime set to its
    original's (numba's index is keyed by a source file's mtime and size). A fresh install
    compiles its kernels itself (some 30 s, what ``test_warmup`` covers); this test is of the
    wheel's contents."""
    for index in tree.rglob("__pycache__/*.nbi"):
        module = index.name.partition(".")[0] + ".py"
        source = index.parent.parent / module
        copy = installed / index.parent.parent.relative_to(tree)
        if not source.exists() or not (copy / module).exists():
            continue
        (copy / "__pycache__").mkdir(exist_ok=True)
        stem = index.name[: -len(".nbi")]
        for cached in index.parent.glob(f"{stem}.*"):
            (copy / "__pycache__" / cached.name).write_bytes(cached.read_bytes())
        info = source.stat()
        os.utime(copy / module, ns=(info.st_atime_ns, info.st_mtime_ns))


@needs_mpi
@pytest.mark.mpi
def test_installed_wheel_runs(tmp_path):
    """A wheel built from the package alone runs `coded-shuffle run`, outside any source tree.

    The wheel goes into a fresh venv without dependencies, which borrows the test environment's
    (numpy, mpi4py, mpich: a .pth file, and MPI4PY_LIBMPI for the MPI library, which mpi4py looks
    for under its own prefix); the program it runs must be the installed one.
    """
    import sysconfig

    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    subprocess.run(
        ["cp", "-r", str(ROOT / "coded_shuffle"), str(src / "coded_shuffle")], check=True, timeout=60
    )
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "wheel", "--quiet", "--no-deps", str(src), "-w", str(tmp_path / "dist")],
        check=True, timeout=300, capture_output=True,
    )  # fmt: skip
    wheel = next((tmp_path / "dist").glob("coded_shuffle-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    install = [*pip, "--python", str(py), "install", "--quiet", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, timeout=120)
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, timeout=60, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    Path(site, "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _borrow_compiled_kernels(ROOT / "coded_shuffle", Path(site) / "coded_shuffle")
    libmpi = Path(sys.prefix) / "lib" / "libmpi.so.12"
    env = {
        "PATH": f"{MPIEXEC.parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        **({"MPI4PY_LIBMPI": str(libmpi)} if libmpi.exists() else {}),
    }
    where = subprocess.run(
        [str(py), "-c", "import coded_shuffle.mpi_program as m; print(m.__file__)"],
        cwd=tmp_path, env=env, check=True, timeout=60, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    assert Path(where).is_relative_to(venv)
    proc = subprocess.run(
        [str(venv / "bin" / "coded-shuffle"), "run", "-K", "2", "--points", "300", "-B", "16",
         "--transitions", "1", "--mode", "all", "--json"],
        # a fresh install compiles its kernels first (once; about 30 s): a longer bound than a run's
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=5 * TIMEOUT, check=False,
    )  # fmt: skip
    rows = json_rows(proc)
    assert [r["mode"] for r in rows] == ["coded", "uncoded", "exchange"] and all(r["verified"] for r in rows)


def test_run_relays_mpiexec_output_and_drops_hydras_report_only_after_the_programs_status(tmp_path, capsys):
    # Hydra's report of killed ranks (its text as MPICH 5 prints it) after the master wrote the
    # job's status is the race of the last exits: left out. Without a status it is the outcome:
    # copied whole, like every other line mpiexec printed.
    from coded_shuffle.cli.run import _relay

    report = (
        "\n"
        + "=" * 83
        + "\n=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n=   EXIT CODE: 9\n"
        + "=" * 83
        + "\nYOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)\n"
    )
    for ended, expected in ((True, "a rank's line\n"), (False, "a rank's line\n" + report)):
        out = open(tmp_path / f"out{ended}", "w+b")  # noqa: SIM115 (_relay closes it)
        out.write(("a rank's line\n" + report).encode())
        _relay(out, ended_by_the_program=ended)
        assert capsys.readouterr().err == expected and out.closed


@needs_mpi
@pytest.mark.mpi
def test_storage_over_mpi_sends_the_bytes_of_the_plan_and_repairs_pieces():
    from coded_shuffle.codec.table import TABLE_HEAD_BYTES, table_bytes, table_widths
    from coded_shuffle.engine.schemes import scheme_for
    from coded_shuffle.engine.state import storage_dataset
    from coded_shuffle.storage import piece_placement, update_storage

    K, N, B, M = 3, 240, 2048, 2
    rows = json_rows(
        run_mpi(K, "--points", str(N), "--record-bytes", str(B), "--storage", str(M), "--transitions", "2",
                "--corrupt-worker", "1", "--json", "-", faults=True)
    )  # fmt: skip
    assert [r["epoch"] for r in rows] == [1, 2]
    assert all(r["verified"] and r["records_checked"] == N and r["storage"] == M for r in rows)
    assert rows[0]["repairs"] >= 1 and rows[1]["repairs"] == 0
    # the same deliveries encoded in this process: the master's link carried exactly those bytes
    work = storage_dataset(synthetic_dataset(N, B, seed=0), K, M)
    pp = piece_placement(epoch_placement(N, K, seed=0, epoch=0), M=M)
    scheme = scheme_for("coded", K=K, storage=M)
    for r in rows:
        nxt = update_storage(pp, epoch_placement(N, K, seed=0, epoch=r["epoch"]))
        planned = scheme.plan(pp, nxt, work, strategy="greedy", exact_bound=None)
        sent = scheme.encode(planned.plan, work, epoch=r["epoch"], max_frame_bytes=1 << 26)
        n, terms = planned.coded_symbols, sum(len(x) for x in planned.plan.transmissions)
        assert r["coded_symbols"] == n and r["piece_bytes"] == work.record_bytes == B // 2
        assert r["wire_bytes"] - r["repair_bytes"] == sum(int(f.size) for f in sent.frames)
        assert r["payload_bytes"] == n * work.record_bytes
        # wire format version 5: the header, the table's head, the counts and ids at their widths
        widths = table_widths(np.diff(planned.plan.offsets), planned.plan.terms)
        runs = r["header_bytes"] - (FRAME_HEADER_BYTES + TABLE_HEAD_BYTES + table_bytes(n, terms, *widths))
        assert 0 <= runs and (runs // RUN) <= K * (n + 1)
        pp = nxt


@needs_mpi
@pytest.mark.mpi
def test_the_exchange_with_storage_among_peers_moves_only_the_missing_pieces_and_repairs_them():
    """In rounds of matchings (``--exchange-schedule rounds``): the same bytes as all at once."""
    K, N, B, M = 4, 240, 3072, 2
    rows = json_rows(
        run_peers(K, "--points", str(N), "--record-bytes", str(B), "--storage", str(M), "--transitions", "2",
                  "--mode", "exchange", "--corrupt-worker", "1", "--exchange-schedule", "rounds",
                  "--json", "-", faults=True)
    )  # fmt: skip
    assert all(r["K"] == K and len(r["digests"]) == K for r in rows)  # K ranks, every one a worker
    assert [r["epoch"] for r in rows] == [1, 2] and all(r["mode"] == "exchange" for r in rows)
    assert all(r["verified"] and r["records_checked"] == N and r["storage"] == M for r in rows)
    assert rows[0]["repairs"] >= 1 and rows[1]["repairs"] == 0
    width = B // 3  # C(3, 1) = 3 pieces a record
    for r in rows:
        p0, p1 = (epoch_placement(N, K, seed=0, epoch=t) for t in (r["epoch"] - 1, r["epoch"]))
        moved = p0.owner != p1.owner
        # the new owner misses C(K-2, 1) = 2 of the 3 pieces of each record that comes to it
        into = np.bincount(p1.owner[moved], minlength=K) * 2 * width
        assert r["max_received_bytes"] == r["download_bound_bytes"] == into.max()
        assert r["exchange_bytes"] == into.sum() and r["wire_bytes"] == 0  # no master, no frame from it
        assert r["upload_bound_bytes"] <= r["max_sent_bytes"] < r["upload_bound_bytes"] + width


@needs_mpi
@pytest.mark.mpi
def test_every_rank_of_a_job_of_peers_ends_with_its_batch(tmp_path):
    N, B, seed, K = 500, 40, 3, 3
    records = np.random.default_rng(1).integers(0, 256, (N, B), dtype=np.uint8)
    np.save(tmp_path / "rows.npy", records)
    for source in (["--points", str(N), "--record-bytes", str(B)], ["--data", str(tmp_path / "rows.npy")]):
        rows = json_rows(run_peers(K, *source, "--seed", str(seed), "--mode", "exchange", "--json", "-"))
        dataset = synthetic_dataset(N, B, seed=seed) if source[0] == "--points" else load_dataset(records)
        assert [r["epoch"] for r in rows] == [1, 2, 3]
        for r in rows:
            assert r["verified"] and r["repairs"] == 0 and r["wire_bytes"] == 0
            assert r["digests"] == expected_digests(dataset, N, K, seed, r["epoch"])


@needs_mpi
@pytest.mark.mpi
def test_a_job_of_peers_names_the_rank_that_cannot_read_the_file(tmp_path):
    # A header that promises more rows than the file holds: run finds it in the file's size before
    # any rank starts (the ranks' own finding, past run's checks, is the master's test above).
    path = tmp_path / "cut.npy"
    np.save(path, np.zeros((400, 16), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-1000])
    proc = run_peers(2, "--data", str(path), "--mode", "exchange", timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = one_line_error(proc.stderr)
    assert line.startswith("coded-shuffle run: error: --data: ") and "cut.npy is cut short" in line


@needs_mpi
@pytest.mark.mpi
def test_a_frozen_peer_ends_the_job_of_peers_with_one_line_naming_it():
    job = ["--mode", "exchange", "--points", "3000", "--record-bytes", "256", "--transitions", "4"]
    proc = run_peers(3, *job, "--fail-rank", "1", "--fail-epoch", "2", "--fail-how", "stop", "--timeout", "3",
                     timeout=60, faults=True)  # fmt: skip
    assert proc.returncode != 0
    named = [line for line in proc.stderr.splitlines() if line.startswith("coded-shuffle run: error: ")]
    assert named == ["coded-shuffle run: error: rank 0: no answer from worker 1 (rank 1) within 3 s, "
                     "at the 'ready' round"], proc.stderr  # fmt: skip
