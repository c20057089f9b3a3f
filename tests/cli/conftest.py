"""Fixtures of the command-line tests."""

import pytest


@pytest.fixture
def no_launch(monkeypatch):
    """``run`` with every launch recorded instead of made (no kernels compiled, no mpiexec)."""
    import coded_shuffle.cli.run as run_cli

    launched: list[list[str]] = []
    monkeypatch.setattr(run_cli, "launch", lambda cmd: launched.append(cmd) or 0)
    monkeypatch.setattr(run_cli, "compile_kernels", lambda groups: None)
    monkeypatch.setattr(run_cli, "find_mpiexec", lambda: "mpiexec")
    return launched
