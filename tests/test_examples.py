"""Run every program of ``examples/``: each prints its result and ends with an assert."""

from __future__ import annotations

import ast
import json
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
LAUNCHED = {"torch_ddp", "torch_token_documents"}
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


#: Runs each program given as ``python PATH`` would, in a process of its own forked from one
#: interpreter that imported the modules the programs import (once, not once a program), the
#: programs side by side; prints each program's exit status as JSON. The program's own output
#: goes to ``OUT/<stem>.out`` and ``.err``.
FORK_RUNNER = r"""
import ast, importlib, json, os, runpy, sys, traceback
out, paths = sys.argv[1], sys.argv[2:]
sys.path[0] = os.path.dirname(os.path.abspath(paths[0]))  # where python PATH looks first (not '')
for path in paths:
    for node in ast.walk(ast.parse(open(path).read())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:
                pass  # the program's own run says why
children = {}
for path in paths:
    stem = os.path.splitext(os.path.basename(path))[0]
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the program's process: it ends as python PATH would, by its exit status
        for fd, suffix in ((1, ".out"), (2, ".err")):
            f = os.open(os.path.join(out, stem + suffix), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(f, fd)
            os.close(f)
        sys.argv, sys.path[0] = [path], os.path.dirname(os.path.abspath(path))
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.exit(1)
        sys.exit(0)
    children[stem] = pid
print(json.dumps({stem: os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for stem, pid in children.items()}))
"""


@pytest.fixture(scope="module")
def example_runs(tmp_path_factory) -> dict[str, tuple[int, str, str]]:
    """Every program of ``EXAMPLES`` run once: its exit status, standard output and standard error.

    One interpreter imports what the programs import, then forks a process for each program, which
    runs it as ``__main__`` (``sys.argv`` and ``sys.path[0]`` as ``python PATH`` sets them): each
    program runs in a process of its own, and the imports are paid once, not once a program."""
    out = tmp_path_factory.mktemp("examples")
    done = subprocess.run([sys.executable, "-c", FORK_RUNNER, str(out), *map(str, EXAMPLES)],
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout.splitlines()[-1])
    return {
        stem: (code, (out / f"{stem}.out").read_text(), (out / f"{stem}.err").read_text())
        for stem, code in status.items()
    }


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(path, example_runs):
    returncode, stdout, stderr = example_runs[path.stem]
    assert returncode == 0, stderr
    assert stdout.strip()
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
