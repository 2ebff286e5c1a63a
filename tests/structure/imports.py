"""The import graph of ``src/durq``, read with :mod:`ast` (no module is imported).

Every ``import`` / ``from ... import`` counts: at module level, inside functions, and under
``if TYPE_CHECKING:``, because each of them is a dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "src" / "durq"


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. durq.store.base
    path: Path
    lines: int


def modules(root: Path = PACKAGE_ROOT) -> dict[str, Module]:
    """Every module under ``root`` by dotted name (a package by its ``__init__``)."""
    found: dict[str, Module] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = Module(
            ".".join(parts), path, len(path.read_text(encoding="utf-8").splitlines())
        )
    return found


def _targets(name: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = name.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        prefix = ".".join([*base, *([node.module] if node.module else [])])
    else:
        prefix = node.module or ""
    # `from durq.worker import state` names the module durq.worker.state.
    return [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]


def graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """Module -> the durq modules it imports (the nearest existing module of each name)."""
    mods = modules(root)
    edges: dict[str, set[str]] = {}
    for name, mod in mods.items():
        tree = ast.parse(mod.path.read_text(encoding="utf-8"), str(mod.path))
        deps: set[str] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _targets(name, mod.path.name == "__init__.py", node)
            if isinstance(node, ast.ImportFrom):
                # `from a.b import c`: a.b.c when it is a module, else a.b itself.
                *members, prefix = names
                hits = [m for m in members if m in mods]
                names = hits if len(hits) == len(members) else [*hits, prefix]
            for target in names:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target.startswith("durq") and target != name:
                    deps.add(target)
        edges[name] = deps
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found
