"""``durq jobs tree``: read the dependency graph around a job and draw it with rich."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.markup import escape
from rich.tree import Tree

from durq.model import Edge
from durq.store.base import Store

#: The most jobs one tree reads (a larger graph is cut, and says so).
MAX_NODES = 2000


@dataclass
class Graph:
    """Jobs (id -> (task, state)) and edges (parent -> children) of one connected graph."""

    nodes: dict[int, tuple[str, str]] = field(default_factory=dict)
    children: dict[int, list[int]] = field(default_factory=dict)
    parents: dict[int, list[int]] = field(default_factory=dict)
    cut: bool = False

    def roots(self) -> list[int]:
        return sorted(n for n in self.nodes if not self.parents.get(n))

    def to_dict(self) -> dict[str, Any]:
        return {
            "jobs": [{"id": i, "task": t, "state": s} for i, (t, s) in sorted(self.nodes.items())],
            "edges": [
                {"parent": p, "child": c} for p, cs in sorted(self.children.items()) for c in cs
            ],
            "cut": self.cut,
        }


def read_graph(store: Store, job_id: int) -> Graph:
    """The connected dependency graph of ``job_id`` (up to :data:`MAX_NODES` jobs)."""
    graph = Graph()
    record = store.get(job_id)
    if record is not None:
        graph.nodes[job_id] = (record.task, str(record.state))
    frontier = [job_id]
    seen = {job_id}
    while frontier:
        edges: list[Edge] = store.edges(frontier)
        frontier = []
        for e in edges:
            graph.nodes.setdefault(e.parent_id, (e.parent_task, e.parent_state))
            graph.nodes.setdefault(e.child_id, (e.child_task, e.child_state))
            kids = graph.children.setdefault(e.parent_id, [])
            if e.child_id not in kids:
                kids.append(e.child_id)
                graph.parents.setdefault(e.child_id, []).append(e.parent_id)
            for n in (e.parent_id, e.child_id):
                if n not in seen:
                    if len(seen) >= MAX_NODES:
                        graph.cut = True
                        continue
                    seen.add(n)
                    frontier.append(n)
    for kids in graph.children.values():
        kids.sort()
    return graph


def draw_graph(graph: Graph, focus: int) -> Tree:
    """A rich Tree from the roots down; ``focus`` is bold, a job already drawn is "(above)"."""
    top = Tree(f"dependency graph of job {focus}" + (" (cut)" if graph.cut else ""))
    drawn: set[int] = set()

    def label(n: int) -> str:
        task, state = graph.nodes.get(n, ("?", "?"))
        text = escape(f"{n} {task} ({state})")
        return f"[bold]{text}[/]" if n == focus else text

    stack: list[tuple[Tree, int]] = [(top, root) for root in reversed(graph.roots())]
    while stack:  # depth first, without recursion: a 10,000-job chain is 10,000 deep
        branch, n = stack.pop()
        if n in drawn:
            branch.add(label(n) + " (above)")
            continue
        drawn.add(n)
        node = branch.add(label(n))
        stack.extend((node, child) for child in reversed(graph.children.get(n, [])))
    return top
