"""The compiled kernels: the cache check and the warm-up."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from coded_shuffle.warmup import KERNEL_GROUPS, uncompiled, warm_up


def test_a_fresh_cache_holds_nothing(tmp_path):
    # A cache folder of its own: every group is to compile (checked, nothing compiled).
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    code = "import json; from coded_shuffle.warmup import uncompiled; print(json.dumps(uncompiled()))"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == list(KERNEL_GROUPS)


def test_warmed_up_groups_are_cached():
    done: list[int] = []
    warm_up(["packing", "feistel"], progress=done.append)
    assert done == [1, 2]
    assert uncompiled(["packing", "feistel"]) == []


def test_warmup_exceptions():
    with pytest.raises(ValueError, match="Argument 'groups' must name groups among packing"):
        uncompiled(["linking"])
    with pytest.raises(ValueError, match="'groups'"):
        warm_up(["packing", "x"])


def test_warm_up_compiles_every_kernel_it_lists():
    # Each group's warm-up must reach every kernel the group names, or the CLI would announce a
    # compile on every run.
    warm_up()
    assert uncompiled() == []


def test_compile_once_says_so_on_standard_error(monkeypatch, capsys):
    """A library user is told, once, before a compile; nothing is said when all is cached."""
    from coded_shuffle import warmup

    compiled = []
    monkeypatch.setattr(warmup, "uncompiled", lambda groups=None: ["feistel"])
    monkeypatch.setattr(warmup, "warm_up", lambda todo, progress=None: compiled.append(list(todo)))
    assert warmup.compile_once(prog="coded_shuffle.loader") == ["feistel"]
    err = capsys.readouterr().err
    assert err.startswith("coded_shuffle.loader: compiling kernels, once per install") and "warm_up()" in err
    assert compiled == [["feistel"]]
    assert warmup.compile_once(announce=False) == ["feistel"] and capsys.readouterr().err == ""
    monkeypatch.setattr(warmup, "uncompiled", lambda groups=None: [])
    assert warmup.compile_once() == [] and capsys.readouterr().err == ""


def test_every_cached_kernel_is_in_a_group():
    """A kernel compiled on disk but in no group would compile at its first use unannounced (those
    called only from other kernels, the private ones and the Feistel block walk, compile with them)."""
    import importlib
    import pathlib

    from numba.core.registry import CPUDispatcher

    from coded_shuffle import warmup

    root = pathlib.Path(warmup.__file__).parent
    cached = set()
    for path in root.rglob("*.py"):
        if "cache=True" in path.read_text(encoding="utf-8"):
            name = ".".join(("coded_shuffle", *path.relative_to(root).with_suffix("").parts))
            module = importlib.import_module(name)
            cached |= {
                f"{name}.{n}" for n, v in vars(module).items()
                if isinstance(v, CPUDispatcher) and type(v._cache).__name__ != "NullCache"
                and not n.startswith("_") and n != "walk_block"
            }  # fmt: skip
    grouped = {f"{d.py_func.__module__}.{d.__name__}" for g in KERNEL_GROUPS for d in warmup._dispatchers(g)}
    assert cached and cached <= grouped, sorted(cached - grouped)


LIGHT_PROBE = """
import json, sys
import numpy as np
from coded_shuffle import _codec_kernels as k
from coded_shuffle.engine import simulate

rep = simulate(K=4, N=64, record_bytes=32, epochs=2, seed=3)
rng = np.random.default_rng(5)
data = rng.integers(0, 256, (6, 16), dtype=np.uint8)
a, b = np.arange(6), np.array([1, 2, 3, 4, 5, -1])
for x in (data, a, b):
    x.setflags(write=False)  # the types the codec calls it with, which the cache holds
out = np.zeros((6, 16), dtype=np.uint8)
k.encode_rows(out, data, a, b, 0, 6)
want = np.vstack([data[:5] ^ data[1:], data[5:]])
print(json.dumps([bool(rep.verified), out.tolist() == want.tolist(),
                  sorted(m for m in sys.modules if m.startswith("numba.np."))]))
"""


def test_cached_kernels_load_without_the_compiler():
    """A process that runs cached kernels only (a worker rank) loads their machine code without
    numba's compiler registries (``numba.np.arraymath`` and some 200 modules more: about 20 MB of
    private memory a process, coded_shuffle._jit), and the code computes what numpy computes."""
    from coded_shuffle.engine import simulate

    simulate(K=4, N=64, record_bytes=32, epochs=2, seed=3)  # the same calls, cached here if need be
    proc = subprocess.run([sys.executable, "-c", LIGHT_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    verified, same, modules = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verified and same
    assert "numba.np.arraymath" not in modules, modules
