"""The procrastinate app the benchmark uses, in the parent (to defer) and in its worker
child. The task is registered under a fixed name, so both sides agree on it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import procrastinate


@dataclass
class ProcrastinateApp:
    app: procrastinate.App
    noop: Any  # procrastinate.tasks.Task[..., ...]: its type parameters are not public


def make_procrastinate(url: str) -> ProcrastinateApp:
    """An app on ``url`` (psycopg 3 connector, every option at procrastinate's default)
    with one ``async`` no-op task named ``noop``."""
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=url))

    async def noop() -> None:
        return None

    task = app.task(name="noop")(noop)
    return ProcrastinateApp(app, task)
