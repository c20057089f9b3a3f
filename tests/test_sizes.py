"""The package stays readable: no module over 600 lines outside the compiled kernels, no function
over 60 lines of code (its docstring, blank lines and comments aside)."""

from __future__ import annotations

import ast
from pathlib import Path

import coded_shuffle

PACKAGE = Path(coded_shuffle.__file__).parent
#: The compiled kernels: loops written out for numba, each stating the numpy expression it equals.
KERNELS = {"_kernels.py", "_codec_kernels.py", "_feistel_kernels.py"}


def code_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of code of ``node``'s body after its docstring: neither blank nor a comment."""
    body = node.body
    first = body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        if len(body) == 1:
            return 0
        first = body[1]
    text = lines[first.lineno - 1 : node.end_lineno]
    return sum(1 for line in text if line.strip() and not line.strip().startswith("#"))


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name not in KERNELS)


def test_no_module_over_600_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}


def test_no_function_over_60_lines_of_code():
    long = {}
    for p in modules():
        src = p.read_text()
        lines = src.splitlines()
        for node in ast.walk(ast.parse(src)):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and (n := code_lines(lines, node)) > 60
            ):
                long[f"{p.relative_to(PACKAGE)}:{node.name}"] = n
    assert long == {}


def test_the_count_skips_the_docstring_and_comments():
    src = 'def f():\n    """Doc.\n\n    More.\n    """\n    # a comment\n\n    x = 1\n    return x\n'
    (node,) = ast.parse(src).body
    assert isinstance(node, ast.FunctionDef) and code_lines(src.splitlines(), node) == 2
