"""The import graph of a package, read from its source (nothing is imported): which module
imports which, and the cycles in it. Imports made only for type checking
(`if TYPE_CHECKING:`) and under `if __name__ == "__main__":` are not edges: they never
run when the module is imported."""

from __future__ import annotations

import ast
from pathlib import Path


def _module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_or_main_guard(node: ast.If) -> bool:
    test = ast.unparse(node.test)
    return test in ("TYPE_CHECKING", "typing.TYPE_CHECKING") or test.startswith("__name__ ==")


def _imported_names(tree: ast.AST) -> list[tuple[str, list[str]]]:
    """(module, names) of every import statement that runs at import or call time."""
    found: list[tuple[str, list[str]]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_or_main_guard(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(tree)
    return found


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports (`from p import m` of a
    submodule `m` is an edge to `p.m` only)."""
    paths = {_module_name(package_dir, p): p for p in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        for module, names in _imported_names(ast.parse(path.read_text())):
            submodules = [f"{module}.{n}" for n in names if f"{module}.{n}" in paths]
            targets = submodules if submodules and len(submodules) == len(names) else [module, *submodules]
            graph[name] |= {t for t in targets if t in paths and t != name}
    return graph


def external_imports(package_dir: Path) -> dict[str, set[str]]:
    """Module → the top-level names of everything it imports (`confluent_kafka`, `streamproc`)."""
    return {_module_name(package_dir, p): {m.split(".")[0] for m, _ in _imported_names(ast.parse(p.read_text()))}
            for p in package_dir.rglob("*.py")}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found
