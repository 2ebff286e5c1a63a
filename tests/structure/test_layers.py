"""The shape of ``src/durq``: layers that only point down, no import circle, small modules.

docs/architecture.md ("Layers") draws the same table. A new module needs a row in LAYERS;
a module that has to import one above it means a type should move down (into
``durq.model`` or a protocol in the lower layer), not that the table should change.
"""

from __future__ import annotations

import pytest

from tests.structure.imports import cycles, graph, modules

#: From the bottom. A module belongs to the first row one of whose prefixes it equals or
#: starts with (``durq.store`` covers ``durq.store.sqlite.jobs``).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("durq.errors", "durq.failpoints", "durq.observability.events", "durq.shield")),
    ("model", ("durq.model",)),
    (
        "parsing",
        (
            "durq.payload",
            "durq.retry",
            "durq.classify",
            "durq.periodic",
            "durq.checks",
            "durq.codecs",
            "durq.typed",
        ),
    ),
    ("store", ("durq.store",)),
    (
        "features",
        (
            "durq.observability",
            "durq.steps",
            "durq.context",
            "durq.alerts",
            "durq.pause",
            "durq.retention",
            "durq.limits",
            "durq.job",
            "durq.task",
            "durq.registry",
            "durq.batches",
            "durq.blobs",
            "durq.hooks",
            "durq.deadlines",
            "durq.dependencies",
        ),
    ),
    ("worker", ("durq.worker",)),
    ("app", ("durq.facade", "durq.app")),
    (
        "tools",
        (
            "durq.cli",
            "durq.proving",
            "durq.dashboard",
            "durq.testing",
            "durq.contrib",
            "durq.__main__",
            "durq",
        ),
    ),
]

#: The most lines a module may have.
MAX_LINES = 700


def layer_of(module: str) -> int:
    """The index in LAYERS of ``module`` (the most specific prefix wins)."""
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or module.startswith(prefix + ".")
            if matches and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    if best is None:
        raise LookupError(module)
    return best[1]


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for name in modules():
        try:
            layer_of(name)
        except LookupError:
            unplaced.append(name)
    assert not unplaced, f"modules with no row in LAYERS: {unplaced}"


def test_no_import_circle() -> None:
    found = cycles(graph())
    assert not found, "import circles (each line is one strongly connected set):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_imports_only_point_down() -> None:
    upward = []
    for name, deps in sorted(graph().items()):
        mine = layer_of(name)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs > mine:
                upward.append(f"{name} ({LAYERS[mine][0]}) imports {dep} ({LAYERS[theirs][0]})")
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def test_no_module_over_the_line_limit() -> None:
    big = {m.name: m.lines for m in modules().values() if m.lines > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


@pytest.mark.parametrize(
    ("module", "layer"),
    [("durq.errors", "foundation"), ("durq.store.sqlite.connection", "store"), ("durq", "tools")],
)
def test_layer_table_places_modules_by_their_most_specific_prefix(module: str, layer: str) -> None:
    assert LAYERS[layer_of(module)][0] == layer


def test_the_checker_sees_a_circle_and_type_checking_imports(tmp_path: object) -> None:
    """The graph counts imports under TYPE_CHECKING and inside functions, and finds a circle."""
    from pathlib import Path

    root = Path(str(tmp_path)) / "durq"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from durq.b import B\n"
    )
    (root / "b.py").write_text("def f():\n    from durq import a\n")
    edges = graph(root)
    assert edges["durq.a"] == {"durq.b"}
    assert edges["durq.b"] == {"durq.a"}
    assert cycles(edges) == [["durq.a", "durq.b"]]
