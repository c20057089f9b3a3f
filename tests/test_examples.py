"""Run every program of ``examples/``: each prints its result and ends with an assert."""

from __future__ import annotations

import ast
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.cases import EXAMPLE_1

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALL = sorted((ROOT / "examples").glob("*.py"))
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
        "storage_example",
    }
    assert expected <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path):
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    head = path.read_text().split('"""')[1]
    assert "Source:" in head or "source" in head  # each example names its source


def test_paper_example1_is_the_shared_case():
    # The example is a standalone program and spells its matrix out for the reader; it is the
    # Example 1 of tests/cases.py.
    (path,) = [p for p in EXAMPLES if p.stem == "paper_example1"]
    tree = ast.parse(path.read_text())
    (S,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["S"]
    ]
    assert tuple(map(tuple, S)) == EXAMPLE_1


def test_every_example_is_in_the_readmes_index():
    """The README's table of examples names every program of ``examples/``, and only those."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    index = text.split("## Examples and proofs", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in index.splitlines() if line.startswith("| `")]
    named = [re.match(r"\| `(\w+)\.py` \| \S", row).group(1) for row in rows]
    assert sorted(named) == [p.stem for p in ALL]


def test_a_claim_runs_as_a_script(tmp_path):
    """``python proofs/claim_N_*.py`` runs the claim's checks under pytest from any directory,
    with no PYTHONPATH (``tests.oracles`` imports from the checkout), and passes pytest's options."""
    claim = ROOT / "proofs" / "claim_8_storage_converse.py"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(claim), "-k", "t0_is_claim_3"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"\b1 passed, \d+ deselected", done.stdout), done.stdout
