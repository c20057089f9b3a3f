"""Run every program of ``examples/``: each prints its result and ends with an assert."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

ALL = sorted((pathlib.Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
# Run under a launcher (torchrun or mpiexec) by their own tests (tests/test_torch.py).
LAUNCHED = {"torch_ddp"}
EXAMPLES = [p for p in ALL if p.stem not in LAUNCHED]


def test_examples_are_present():
    names = {p.stem for p in ALL}
    expected = {
        "paper_example1",
        "two_worker_swap",
        "cyclic_worst_case",
        "random_shuffles",
        "sorted_shards",
        "train_loop",
        "torch_ddp",
    }
    assert expected <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    head = path.read_text().split('"""')[1]
    assert "Source:" in head or "source" in head  # each example names its source
