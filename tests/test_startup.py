"""Start-up: importing the package and asking the command line for help load no heavy library.

The CPU time itself is measured side by side with ``import numpy`` in benchmarks/startup.py; here
the cause is checked, which does not depend on the machine's load: which modules a fresh
interpreter has loaded after each entry point.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("numba", "llvmlite", "scipy", "networkx", "galois", "matplotlib", "mpi4py", "torch")

PROBE = """
import json, sys
{code}
print(json.dumps(sorted(sys.modules)))
"""


def loaded_after(code: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    probe = [sys.executable, "-c", PROBE.format(code=code)]
    out = subprocess.run(probe, capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import coded_shuffle",
        "import coded_shuffle.cli",
        "from coded_shuffle.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass",
        "from coded_shuffle.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass",
        "from coded_shuffle.cli import main\nmain(['no-such-command'])",
        "import coded_shuffle.mpi_program",
    ],
    ids=["import", "import-cli", "help", "version", "bad-command", "mpi-program"],
)
def test_start_up_loads_no_heavy_library(code):
    heavy = {m.split(".")[0] for m in loaded_after(code)} & set(HEAVY)
    assert not heavy, f"{code!r} loaded {sorted(heavy)}"


def test_import_coded_shuffle_loads_no_module_of_the_library():
    """The public names are loaded on first use: the bare import loads none of the layers (not
    even numpy)."""
    loaded = loaded_after("import coded_shuffle")
    assert {m for m in loaded if m.startswith("coded_shuffle")} == {"coded_shuffle"}
    assert "numpy" not in loaded


def test_public_names_load_on_first_use():
    """Every name of ``__all__`` resolves (and is the object of its module), and the submodules
    are reachable as attributes as after an eager import."""
    import coded_shuffle
    from coded_shuffle import engine, plan

    for name in coded_shuffle.__all__:
        assert getattr(coded_shuffle, name) is not None, name
    assert coded_shuffle.rates is plan.rates and coded_shuffle.simulate is engine.simulate
    assert coded_shuffle.storage.__name__ == "coded_shuffle.storage"
    assert set(coded_shuffle.__all__) <= set(dir(coded_shuffle))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        coded_shuffle.nope  # noqa: B018


def test_dir_lists_the_public_names_alone():
    """``dir(coded_shuffle)`` (PEP 562) is ``__all__``, the layers as submodules and the dunders:
    not the module's own imports (it listed ``Any``, ``TYPE_CHECKING``, ``annotations``,
    ``importlib``), nor the private modules an import binds in the package (``_kernels``)."""
    import coded_shuffle
    import coded_shuffle.engine  # noqa: F401  (binds private modules such as _kernels in the package)

    package = Path(coded_shuffle.__file__).parent
    modules = {p.stem for p in package.glob("*.py")} | {p.parent.name for p in package.glob("*/__init__.py")}
    public = {m for m in modules if not m.startswith("_")}
    optional = {"torch", "mpi_program", "mpi_faults"}  # reachable once imported (torch, mpi4py), not before
    names = {n for n in dir(coded_shuffle) if not n.startswith("__")}
    assert set(coded_shuffle.__all__) | (public - optional) <= names
    assert names <= set(coded_shuffle.__all__) | public, names - set(coded_shuffle.__all__) - public
    bound = {n for n in vars(coded_shuffle) if not n.startswith("_")}
    assert bound <= set(coded_shuffle.__all__) | public, bound - set(coded_shuffle.__all__) - public
    assert coded_shuffle.network.__name__ == "coded_shuffle.network"


def test_a_command_loads_only_its_own_module():
    """``coded-shuffle rate`` builds the parser of ``rate`` alone: ``run``'s module (and the MPI
    job it describes) stays unloaded."""
    code = (
        "from coded_shuffle.cli import main\n"
        "main(['rate', '--matrix', '-'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('coded_shuffle.cli'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json, sys\n" + code],
        input="[[2,1,2],[2,1,2],[1,3,1]]", capture_output=True, text=True, timeout=300, check=True,
    )
    modules = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert "coded_shuffle.cli.rate" in modules
    assert not modules & {"coded_shuffle.cli.run", "coded_shuffle.cli.simulate", "coded_shuffle.cli.job"}
