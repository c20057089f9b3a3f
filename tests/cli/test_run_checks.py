"""What the command line refuses, and where: every option named in its own refusal, and ``run``'s
refusals made before any process starts."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coded_shuffle import cli
from coded_shuffle.cli.job import MULTICAST_DEFAULT
from coded_shuffle.transport.multicast import parse_group, scope_groups

ROOT = Path(__file__).resolve().parents[2]


def _options(command: str) -> list[argparse.Action]:
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        a
        for a in sub.choices[command]._actions
        if a.option_strings and a.nargs != 0 and a.help != argparse.SUPPRESS
    ]


#: Small jobs, so that a value taken does not start a long computation.
BASE = {
    "run": ["-K", "2", "--points", "40"],
    "rate": ["--points", "40"],
    "simulate": ["--points", "40"],
    "orders": ["--orders", "py1s", "--shards", "10", "--shard-size", "10", "-K", "2"],
    "quality": ["--order", "py1s", "--shards", "10", "--shard-size", "10"],
}


@pytest.mark.parametrize("command", list(BASE))
def test_every_option_names_itself_when_it_refuses_a_value(command, capsys, no_launch):
    """``--multicast 239.1.1.1:²`` answered ``invalid literal for int() with base 10`` ("²" is a
    digit to ``str.isdigit``, not to ``int``): each refusal names its option."""
    refused = 0
    for action in _options(command):
        flag = action.option_strings[0]
        for value in ("²", "239.1.1.1:²", "1,²", "-1"):
            code = cli.main([command, *BASE[command], flag, value])
            err = capsys.readouterr().err
            if code == 0:
                continue
            refused += 1
            assert code == 2 and len(err.strip().splitlines()) == 1, (flag, value, err)
            assert any(o in err for o in action.option_strings), (flag, value, err)
    assert refused > 2 * len(_options(command))


def test_a_port_of_digits_python_reads_as_numbers_is_refused():
    for port in ("²", "٣", "５000"):  # a superscript, an Arabic-Indic and a full-width digit
        with pytest.raises(ValueError, match=f"--multicast: the port must be 1 to 65535, not '{port}'"):
            parse_group(f"239.1.2.3:{port}")


def test_bare_multicast_takes_the_documented_group_and_port(no_launch):
    group, port = parse_group(MULTICAST_DEFAULT)
    assert group.startswith("239.") and 1 <= port < 65536
    assert len(scope_groups(group, 64)) == 1 + 64 * 63 // 2 + 64  # room for the scoped groups of K = 64
    args = cli.build_parser("run").parse_args(["run", "--multicast", "-K", "3"])
    assert args.multicast == MULTICAST_DEFAULT
    assert cli.main(["run", "-K", "3", "--points", "40", "--multicast"]) == 0
    (cmd,) = no_launch
    assert cmd[cmd.index("--multicast") + 1] == MULTICAST_DEFAULT
    from coded_shuffle.mpi_program import parse_args

    assert parse_args(["--multicast"]).multicast == MULTICAST_DEFAULT  # the program's default too
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    run_help = cli.build_parser("run")._subparsers._group_actions[0].choices["run"].format_help()
    assert MULTICAST_DEFAULT in docs and MULTICAST_DEFAULT in " ".join(run_help.split())


@pytest.fixture
def npy_files(tmp_path):
    np.save(tmp_path / "rows.npy", np.zeros((100, 16), dtype=np.uint8))
    np.save(tmp_path / "wide.npy", np.zeros((10, 9000), dtype=np.uint8))
    np.save(tmp_path / "short.npy", np.zeros((100, 16), dtype=np.uint8))
    os.truncate(tmp_path / "short.npy", 300)
    return {name: str(tmp_path / f"{name}.npy") for name in ("rows", "wide", "short")}


SWITCH = "master=1000,up=1000,down=1000"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # fewer records than workers
        (["--data", "{rows}", "--mode", "exchange", "-K", "128"], "100 records, fewer than the 128 workers"),
        (["--mode", "auto", "--network", SWITCH, "-K", "80", "--points", "60"], "--points must be at least"),
        # the records against the frames, memory and epochs, from the options or the file's header
        (
            ["--record-bytes", "8192", "--max-frame-bytes", "4096"],
            "--max-frame-bytes must be at least the record",
        ),
        (["--data", "{wide}", "--max-frame-bytes", "4096"], "record width, 9000 bytes"),
        (
            ["--points", "20000000", "--record-bytes", "1000"],
            "--points x --record-bytes must be at most 16 GiB",
        ),
        (
            ["--start-epoch", str(2**64 - 1), "--points", "40"],
            "--start-epoch + --transitions must be at most 2**64",
        ),
        (
            ["--data", "{rows}", "--order", "py1s", "--canonical-nodes", "200"],
            "--canonical-nodes must be at most",
        ),
        (
            ["--data", "{rows}", "--order", "py1e", "--shard-size", "0"],
            "--shard-size must be at least 1, not 0",
        ),
        (
            ["--data", "{rows}", "--order", "py1b", "--block-size", "-1"],
            "--block-size must be at least 1, not -1",
        ),
        (["--data", "{short}"], "short.npy is cut short: its header promises 1728 bytes, the file holds 300"),
        (["--data", "{rows}", "-K", "4", "--storage", "5"], "--storage must be at most K = 4 batches, not 5"),
        # the workers of each epoch: one an epoch, one batch a worker, a mode with a master or the exchange
        (["-K", "3,2"], "--workers must give 1 or --transitions + 1 = 4 worker counts, not 2"),
        (["-K", "3,2,3,2", "--storage", "2"], "(--workers 3,2,3,2) cannot run with --storage 2"),
        (
            ["-K", "3,2", "--transitions", "1", "--data", "{rows}", "--network", SWITCH],
            "cannot run with --network",
        ),
        (["-K", "0,2"], "argument --workers/-K: expected a positive integer, not 0"),
        # --mode auto: the checks of the mode it chooses; without a master only the exchange runs
        (
            ["--mode", "auto", "--network", "up=1000,down=1000", "-K", "3", "--points", "90", "--multicast"],
            "--mode auto chose exchange: --multicast carries the master's coded broadcast",
        ),
    ],
)
def test_run_refuses_before_launch_what_the_ranks_would(argv, message, npy_files, capsys, no_launch):
    """What the ranks would refuse once they know the records is refused before launch."""
    argv = [a.format(**npy_files) for a in argv]
    assert cli.main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coded-shuffle: error: ") and message in err and len(err.strip().splitlines()) == 1
    assert no_launch == []


@pytest.mark.parametrize(
    ("argv", "chosen", "left_out"),
    [  # the exchange is the fastest on a switch
        (["--multicast"], "coded", "--multicast carries the master's coded broadcast"),
        (["--link-mbps", "100"], "exchange", None),  # the workers' uplinks are paced too
        ([], "exchange", None),
    ],
)
def test_run_auto_chooses_among_the_modes_the_options_can_run(argv, chosen, left_out, capsys, no_launch):
    """``--mode auto`` chose the exchange on a switch, then refused it for ``--multicast``; it now
    runs the fastest mode the options allow, and says which it left out and why (``--link-mbps``
    paces the exchange too, so it leaves nothing out)."""
    assert cli.main(["run", "--mode", "auto", "--network", SWITCH, "-K", "3", "--points", "90", *argv]) == 0
    (cmd,) = no_launch
    assert (cmd[cmd.index("--mode") + 1] if "--mode" in cmd else "coded") == chosen
    assert cmd[2] == ("3" if chosen == "exchange" else "4")  # a job of peers, or a master and 3 workers
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"coded-shuffle: mode auto chose {chosen}: predicted ")
    assert ("; not exchange (" in line and left_out in line) if left_out else "; not " not in line


@pytest.mark.parametrize(
    "argv",
    [
        ["--mode", "exchange", "-K", "64", "--points", "640"],
        ["--start-epoch", str(2**64 - 2), "--transitions", "1", "--points", "40"],
        ["--data", "{rows}", "-K", "4", "--storage", "4"],
        ["--data", "{wide}", "--max-frame-bytes", "9000"],
    ],
)
def test_run_launches_what_is_just_inside_the_limits(argv, npy_files, capsys, no_launch):
    assert cli.main(["run", "-K", "2", *(a.format(**npy_files) for a in argv)]) == 0
    assert len(no_launch) == 1 and capsys.readouterr().err == ""


def test_the_ranks_refuse_by_the_check_run_makes():
    """One check, made by the ranks and by run: the engine's refusal is run's message."""
    from coded_shuffle.cli.runner.mpi_job import job_refusal
    from coded_shuffle.cli.runner.options import JobOptions

    refused = "the dataset has 100 records, fewer than the 128 workers"
    assert job_refusal(JobOptions(mode="exchange"), 128, 100, 1024, peers=True) == refused
    assert job_refusal(JobOptions(max_frame_bytes=4096), 4, 100, 8192) is not None
    assert job_refusal(JobOptions(max_frame_bytes=4096), 4, 100, 8192, peers=True) is None  # no frames


#: ``coded-shuffle run`` in a process of its own, its mpiexec a script that leaves a mark.
LAUNCHER = """
import os, stat, sys
from coded_shuffle import cli
import coded_shuffle.cli.run as run_cli
mark, fake = sys.argv[1], sys.argv[1] + ".sh"
with open(fake, "w") as f:
    f.write(f"#!/bin/sh\\ntouch {mark}\\n")
os.chmod(fake, stat.S_IRWXU)
run_cli.find_mpiexec = lambda: fake
run_cli.compile_kernels = lambda groups: None
for argv in (sys.argv[2:], ["run", "-K", "2", "--points", "40"]):  # then a job it launches
    print(cli.main(argv), os.path.exists(mark), flush=True)
"""


REFUSED_128 = "--points must be at least --workers (128), not 100"


def test_a_refused_run_is_one_line_and_no_launch(tmp_path):
    argv = ["run", "--mode", "exchange", "--workers", "128", "--points", "100"]
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, str(tmp_path / "launched"), *argv],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    refused, control = proc.stdout.split("\n")[:2]
    assert refused == "2 False"  # status 2, and mpiexec never ran
    assert control == "1 True"  # the fake mpiexec ran for a job within the limits (and wrote no status)
    first = proc.stderr.splitlines()[0]
    assert first == f"coded-shuffle: error: {REFUSED_128}"


def test_run_launches_a_storage_beyond_64_workers(capsys, no_launch):
    """The exchange's plan and the coded one take holder sets of several words."""
    assert cli.main(["run", "--mode", "exchange", "-K", "65", "--points", "6500", "--storage", "2"]) == 0
    assert cli.main(["run", "--mode", "coded", "-K", "65", "--points", "6500", "--storage", "2"]) == 0
    (peers, master) = no_launch
    assert peers[2] == "65" and master[2] == "66"  # a job of peers, one with a master


def test_the_epochs_of_a_job_of_the_exchange_beyond_64_workers_hold_its_pieces():
    from coded_shuffle.cli.runner.mpi_job import Epochs
    from coded_shuffle.cli.runner.options import JobOptions

    ep = Epochs(JobOptions(mode="exchange", storage=2), 650, 2048, 65, peers=True)
    assert ep.scheme.name == "exchange" and ep.scheme.M == 2 and ep.scheme.pieces == 2  # 2 KiB: 2 pieces
    ep = Epochs(JobOptions(mode="coded", storage=2), 650, 2048, 65)
    assert ep.scheme.name == "coded" and ep.scheme.M == 2 and ep.scheme.pieces == 2


def test_segments_left_by_an_aborted_job_are_cleared_and_none_in_use(tmp_path):
    """``clear_segments`` removes this user's segments changed since the job's start that no
    process holds; a segment open (as its creator holds it), one mapped, and an older one stay."""
    import mmap
    import time

    from coded_shuffle.cli.run import SHM_PREFIX, clear_segments

    def segment(name: str) -> Path:
        path = tmp_path / f"{SHM_PREFIX}{name}"
        path.write_bytes(b"\0" * 4096)
        return path

    old = segment("old")
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    since = time.time() - 1.0
    left, held, other = segment("left"), segment("held"), tmp_path / "not_mpich"
    other.write_bytes(b"x")
    mapped = segment("mapped")
    with open(held, "rb"), open(mapped, "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
        f.close()  # only the mapping holds it now
        gone = clear_segments(since, str(tmp_path))
        assert m[:1] == b"\0"
    assert gone == [str(left)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (old, held, mapped, other))
    assert clear_segments(since, str(tmp_path / "absent")) == []
