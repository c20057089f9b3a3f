"""The package layers (see coded_shuffle/__init__.py): a module imports only modules below it."""

import ast
from pathlib import Path

import coded_shuffle

PACKAGE = Path(coded_shuffle.__file__).parent

# Lowest first. A module may import from its own rank or below, never above.
RANK = {
    "errors": 0,
    "_checks": 0,
    "_kernels": 0,
    "_codec_kernels": 0,
    "_progress": 0,
    "orders": 1,
    "matrix": 2,
    "plan": 3,
    "bounds": 3,
    "certificates": 4,
    "tradeoff": 4,
    "storage": 4,
    "codec": 4,
    "transport": 5,
    "engine": 6,
    "loader": 7,
    "plots": 7,
    "warmup": 7,
    "mpi_program": 9,
    "cli": 8,
    "__main__": 9,
    "__init__": 9,
}
MPI_ALLOWED = {"transport"}


def module_key(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0].removesuffix(".py")


def imported_modules(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    depth = len(path.relative_to(PACKAGE).parts) - 1
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                up = node.level - depth
                base = (node.module or "").split(".")[0] if up <= 1 else ""
                if node.level <= depth:
                    continue  # inside the same subpackage
                if base:
                    out.append((base, node.lineno))
                else:
                    out += [(alias.name, node.lineno) for alias in node.names]
            elif node.module:
                out.append((node.module, node.lineno))
        elif isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
    return out


def test_no_upward_imports():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = module_key(path)
        if me not in RANK:
            problems.append(f"{path.name}: module {me!r} has no layer in this test")
            continue
        for name, line in imported_modules(path):
            if name.startswith("coded_shuffle."):
                name = name.split(".")[1]
            if name in RANK and RANK[name] > RANK[me]:
                problems.append(f"{path.relative_to(PACKAGE)}:{line} imports {name} from a lower layer")
            if name.split(".")[0] == "mpi4py" and me not in MPI_ALLOWED:
                problems.append(f"{path.relative_to(PACKAGE)}:{line} imports mpi4py outside the transport")
            if name.split(".")[0] == "torch":
                problems.append(f"{path.relative_to(PACKAGE)}:{line} imports torch")
    assert not problems, "\n".join(problems)


def test_bounds_never_depends_on_plan():
    text = (PACKAGE / "bounds.py").read_text(encoding="utf-8")
    assert "from .plan" not in text and "import plan" not in text
