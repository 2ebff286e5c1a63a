"""Tasks whose bodies the worker must stop (issue 11): each records in DURQ_MARKS (a
directory) when it started and stopped, and writes ``done-<id>`` only if it ran to its end.
DURQ_URL names the database."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import durq

dq = durq.Durq()  # DURQ_URL
MARKS = Path(os.environ.get("DURQ_MARKS", "."))


def _mark(name: str, text: str = "") -> None:
    (MARKS / name).write_text(text or repr(time.time()))


def _interval(tag: str, start: float) -> None:
    with open(MARKS / "intervals.txt", "a") as out:
        out.write(f"{tag} {start!r} {time.time()!r}\n")


@dq.task(queue="interrupts", timeout=0.3, max_attempts=1, concurrency=1, concurrency_key="one")
def limited() -> None:
    """A concurrency=1 body that would run 5 s: its interval must overlap no other."""
    start = time.time()
    job_id = durq.context().job_id
    try:
        for _ in range(100):
            time.sleep(0.05)
        _mark(f"done-{job_id}")
    finally:
        _interval(str(job_id), start)


@dq.task(queue="interrupts", max_attempts=1)
def spin() -> None:
    """Runs 60 s unless stopped; starts a child process it kills when interrupted."""
    ctx = durq.context()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ctx.on_interrupt(lambda _reason: child.kill())
    _mark(f"child-{ctx.job_id}", str(child.pid))
    _mark(f"started-{ctx.job_id}")
    try:
        for _ in range(1200):
            time.sleep(0.05)
        _mark(f"done-{ctx.job_id}")
    finally:
        _mark(f"stopped-{ctx.job_id}")
        child.wait(5)


@dq.task(queue="interrupts", max_attempts=1)
async def spin_async() -> None:
    """Runs 60 s unless cancelled."""
    job_id = durq.context().job_id
    _mark(f"started-{job_id}")
    try:
        await asyncio.sleep(60)
        _mark(f"done-{job_id}")
    finally:
        _mark(f"stopped-{job_id}")


@dq.task(queue="interrupts", max_attempts=1)
def quick() -> str:
    """Returns at once: shows a worker (or its pool) still runs jobs after a stop."""
    return "ok"


@dq.task(queue="interrupts", max_attempts=1, concurrency=1, concurrency_key="held")
def held(seconds: float) -> None:
    """A concurrency=1 body in a blocking C call (``time.sleep``, which an interruption
    cannot cut short) for ``seconds``: cancelled or expired meanwhile, it keeps its slot
    until the call returns, so no other body of the key may start before its interval ends."""
    start = time.time()
    job_id = durq.context().job_id
    _mark(f"started-{job_id}")
    try:
        time.sleep(seconds)
        _mark(f"done-{job_id}")
    finally:
        _interval(str(job_id), start)


@dq.task(queue="interrupts", timeout=0.3, max_attempts=1, concurrency=1, concurrency_key="stub")
async def stubborn_async() -> None:
    """A concurrency=1 async body that swallows its timeout's cancel and runs on (2 s)."""
    start = time.time()
    job_id = durq.context().job_id
    try:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(2.0)  # not stopping: its slot must stay taken meanwhile
    finally:
        _interval(str(job_id), start)


@dq.task(queue="interrupts", max_attempts=3)
def replayed(seconds: float) -> None:
    """One ``time.sleep`` of ``seconds``; cancelled and replayed at once meanwhile, its
    replay must not start before this body has returned. Each run appends (job id,
    attempt, start, end, why it was stopped or "-") to ``runs.txt``."""
    ctx = durq.context()
    start = time.time()
    _mark(f"started-{ctx.job_id}")
    try:
        time.sleep(seconds)
    finally:
        with open(MARKS / "runs.txt", "a") as out:
            stopped = ctx.interrupted or "-"
            out.write(f"{ctx.job_id} {ctx.attempt} {start!r} {time.time()!r} {stopped}\n")
