"""The public surface of durq as text: what the API snapshot test compares.

``python -m tests.structure.api > tests/structure/api_snapshot.txt`` writes a new snapshot;
do that only for a change that means to alter the public API, and say so in the commit.
"""

from __future__ import annotations

import inspect
from typing import Any

import durq


def _members(cls: type) -> list[str]:
    lines = []
    for name in sorted(dir(cls)):
        if name.startswith("_") and name not in ("__init__", "__enter__", "__exit__"):
            continue
        member = inspect.getattr_static(cls, name)
        kind = type(member).__name__
        if isinstance(member, property):
            lines.append(f"  {name}: property")
            continue
        func: Any = member
        if isinstance(member, (staticmethod, classmethod)):
            func = member.__func__
        if callable(func):
            try:
                sig = str(inspect.signature(func))
            except (TypeError, ValueError):
                sig = "(?)"
            lines.append(f"  {name}{sig} [{kind}]")
        else:
            lines.append(f"  {name}: {kind}")
    return lines


def surface() -> str:
    """Every name in ``durq.__all__`` and the public members of the main classes."""
    out = ["durq.__all__:"]
    out += [f"  {name}: {type(getattr(durq, name)).__name__}" for name in sorted(durq.__all__)]
    for cls in (durq.Durq, durq.Task, durq.Job, durq.JobContext, durq.Worker):
        out.append(f"{cls.__name__}:")
        out += _members(cls)
    from durq.task import BoundTask

    out.append("BoundTask:")
    out += _members(BoundTask)
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(surface(), end="")
