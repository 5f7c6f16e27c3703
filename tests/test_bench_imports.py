"""Every name the benchmarks import from the project exists, including the imports made
inside functions, which only a real run would reach (a module split once left
`bench/peers.py` importing a name from where it had been)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _project_imports() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] in ("streamproc", "bench"):
                found += [(path.name, node.module, alias.name) for alias in node.names]
    return found


@pytest.mark.parametrize("file, module, name", _project_imports())
def test_a_bench_import_names_what_exists(file, module, name):
    imported = importlib.import_module(module)
    assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}") is not None, (
        f"{file}: from {module} import {name}: no such name")
