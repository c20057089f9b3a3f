"""The package layers (see coded_shuffle/__init__.py): a module imports only modules below it."""

import ast
from pathlib import Path

import coded_shuffle

PACKAGE = Path(coded_shuffle.__file__).parent

# Lowest first. A module may import from its own rank or below, never above.
RANK = {
    "errors": 0,
    "_checks": 0,
    "_threads": 0,
    "_gf2": 0,
    "_kernels": 0,
    "_codec_kernels": 0,
    "_jit": 0,
    "_progress": 0,
    "orders": 1,
    "matrix": 2,
    "plan": 3,
    "bounds": 3,
    "certificates": 4,
    "tradeoff": 4,
    "loads": 4,
    "network": 4,
    "_predictions": 4,
    "records": 4,
    "storage": 3,
    "codec": 4,
    "transport": 5,
    "engine": 6,
    "loader": 7,
    "torch": 7,
    "_torch_base": 7,
    "plots": 7,
    "warmup": 7,
    "mpi_program": 9,
    "mpi_faults": 9,
    "cli": 8,
    "__main__": 9,
    "__init__": 9,
}
MPI_ALLOWED = {"transport"}
# PyTorch, an optional extra: imported only by the adapter (coded_shuffle/torch.py) and the transport.
TORCH_ALLOWED = {"transport", "torch", "_torch_base"}


def module_key(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def imported_modules(path: Path) -> list[tuple[str, int, bool]]:
    """``(name, line, internal)`` of each import: ``internal`` for the package's own modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int, bool]] = []
    depth = len(path.relative_to(PACKAGE).parts) - 1
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - depth
                base = (node.module or "").split(".")[0] if up <= 1 else ""
                if node.level <= depth:
                    continue  # inside the same subpackage
                if base:
                    out.append((base, node.lineno, True))
                else:
                    out += [(alias.name, node.lineno, True) for alias in node.names]
            elif node.module:
                out.append((node.module, node.lineno, node.module.startswith("coded_shuffle")))
        elif isinstance(node, ast.Import):
            out += [(alias.name, node.lineno, alias.name.startswith("coded_shuffle")) for alias in node.names]
    return out


def test_no_upward_imports():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_key(path)
        if me not in RANK:
            problems.append(f"{path.name}: module {me!r} has no layer in this test")
            continue
        for name, line, internal in imported_modules(path):
            where = f"{path.relative_to(PACKAGE)}:{line}"
            if internal:
                if name.startswith("coded_shuffle."):
                    name = name.split(".")[1]
                if name in RANK and RANK[name] > RANK[me]:
                    problems.append(f"{where} imports {name} from a lower layer")
                continue
            if name.split(".")[0] == "mpi4py" and me not in MPI_ALLOWED:
                problems.append(f"{where} imports mpi4py outside the transport")
            if name.split(".")[0] == "torch" and me not in TORCH_ALLOWED:
                problems.append(f"{where} imports torch outside the torch adapter and the transport")
    assert not problems, "\n".join(problems)


def test_bounds_never_depends_on_plan():
    text = (PACKAGE / "bounds.py").read_text(encoding="utf-8")
    assert "from .plan" not in text and "import plan" not in text


def test_torch_is_imported_lazily_by_the_transport():
    """The transport imports torch and mpi4py inside functions only, so that the package imports
    without them."""
    modules = sorted((PACKAGE / "transport").glob("*.py"))
    assert {p.stem for p in modules} >= {"__init__", "base", "inprocess", "mpi", "torch_dist"}
    for path in modules:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        names = [a.name for n in top if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in top if isinstance(n, ast.ImportFrom) and not n.level]
        assert not [n for n in names if n.split(".")[0] in ("torch", "mpi4py")], path.name


def test_the_walker_tells_the_adapter_from_the_library():
    """``import torch`` in the adapter is the library (checked as such), ``.loader`` the package's."""
    names = {(n, internal) for n, _, internal in imported_modules(PACKAGE / "torch.py")}
    assert ("torch", False) in names and ("loader", True) in names and ("torch", True) not in names


def test_the_import_graph_has_no_cycle():
    """No two layers import each other, through any path, counting the imports made inside
    functions (``plan`` and ``storage`` once did, hidden by imports inside functions)."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_key(path)
        for name, line, internal in imported_modules(path):
            if not internal:
                continue
            if name.startswith("coded_shuffle."):
                name = name.split(".")[1]
            if name in RANK and name != me:
                edges.setdefault(me, {}).setdefault(name, f"{path.relative_to(PACKAGE)}:{line}")
    # depth-first search for a back edge; the cycle is named with the import of each step
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        stack.append(u)
        for v in sorted(edges.get(u, {})):
            if state.get(v) == 1:
                loop = stack[stack.index(v):] + [v]
                return [f"{a} -> {b} ({edges[a][b]})" for a, b in zip(loop, loop[1:], strict=False)]
            if v not in state:
                found = visit(v)
                if found:
                    return found
        stack.pop()
        state[u] = 2
        return None

    for u in sorted(edges):
        if u not in state:
            cycle = visit(u)
            assert cycle is None, "import cycle: " + "; ".join(cycle)
