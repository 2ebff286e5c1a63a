"""Tasks whose bodies are interrupted while they are inside durq's store (issue 11
hardening, durq/shield.py): each loops for ever on a store call — ``ctx.progress``,
``ctx.step``, an enqueue — so a timeout lands there nearly every time. DURQ_URL names the
database; DURQ_MARKS (a directory) gets ``started-<id>`` when a looping body starts."""

from __future__ import annotations

import os
import time
from pathlib import Path

import durq

dq = durq.Durq()  # DURQ_URL
MARKS = Path(os.environ.get("DURQ_MARKS", "."))


@dq.task(queue="shield", max_attempts=1)
def trivial(n: int) -> int:
    return n


@dq.task(queue="shield-side", max_attempts=1)
def side(n: int) -> int:
    """Enqueued by :func:`enqueue_loop` on a queue no worker of the test runs."""
    return n


@dq.task(queue="shield", timeout=0.2, max_attempts=1)
def progress_loop() -> None:
    ctx = durq.context()
    i = 0
    while True:
        ctx.progress((i % 100) / 100, "x")
        i += 1


@dq.task(queue="shield", timeout=0.2, max_attempts=1)
def step_loop() -> None:
    ctx = durq.context()
    i = 0
    while True:
        ctx.step(f"s{i}", lambda: None)
        i += 1


@dq.task(queue="shield", timeout=0.2, max_attempts=1)
def enqueue_loop() -> None:
    i = 0
    while True:
        side.enqueue(n=i)
        i += 1


@dq.task(queue="shield-forever", max_attempts=1)
def progress_forever() -> None:
    """No timeout: runs until the worker stops (a SIGTERM's grace runs out)."""
    ctx = durq.context()
    (MARKS / f"started-{ctx.job_id}").write_text(repr(time.time()))
    i = 0
    while True:
        ctx.progress((i % 100) / 100, "x")
        i += 1
