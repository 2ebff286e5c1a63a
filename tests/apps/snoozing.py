"""Tasks that snooze, for the snooze and replay tests with real workers (DURQ_URL)."""

from __future__ import annotations

import os

import durq

dq = durq.Durq()  # DURQ_URL


@dq.task(max_attempts=2, max_snoozes=5)
def wait_for_file(path: str, seconds: float) -> str:
    """Snooze ``seconds`` until ``path`` exists, then succeed."""
    if not os.path.exists(path):
        raise durq.Snooze(seconds)
    return "found"


@dq.task(max_attempts=2, max_snoozes=3)
def never_ready() -> None:
    """Snooze for ever (through the context): the task's max_snoozes fails it."""
    durq.context().snooze(0.05)


@dq.task(max_attempts=2)
def fails_unless(path: str) -> str:
    """Fail for good until ``path`` exists."""
    if not os.path.exists(path):
        raise durq.Permanent(f"{path} is missing")
    return "ok"
