"""What the command line refuses, and where: every option named in its own refusal, and ``run``'s
refusals made before any process starts."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from coded_shuffle import cli
from coded_shuffle.cli.job import MULTICAST_DEFAULT
from coded_shuffle.transport.multicast import parse_group, scope_groups

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_launch(monkeypatch):
    """``run`` with every launch recorded instead of made (no kernels compiled, no mpiexec)."""
    import coded_shuffle.cli.run as run_cli

    launched: list[list[str]] = []
    monkeypatch.setattr(run_cli, "launch", lambda cmd: launched.append(cmd) or 0)
    monkeypatch.setattr(run_cli, "compile_kernels", lambda groups: None)
    monkeypatch.setattr(run_cli, "find_mpiexec", lambda: "mpiexec")
    return launched


def _options(command: str) -> list[argparse.Action]:
    parser = cli.build_parser(command)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [
        a
        for a in sub.choices[command]._actions
        if a.option_strings and a.nargs != 0 and a.help != argparse.SUPPRESS
    ]


#: Small jobs, so that a value taken does not start a long computation.
BASE = {"run": ["-K", "2", "--points", "40"], "rate": ["--points", "40"], "simulate": ["--points", "40"]}


@pytest.mark.parametrize("command", ["run", "rate", "simulate"])
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
