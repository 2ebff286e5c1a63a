"""Tasks for the steps, results and retention tests, run by real worker processes.

The database comes from DURQ_URL. Every step function call appends ``name job attempt pid``
to ``$CALLS_FILE``, so tests can count how often each step's side effect happened.
"""

from __future__ import annotations

import os
import time

import durq

dq = durq.Durq()  # DURQ_URL


def _side_effect(name: str) -> str:
    ctx = durq.context()
    line = f"{name} {ctx.job_id} {ctx.attempt} {os.getpid()}\n".encode()
    fd = os.open(os.environ["CALLS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)
    return f"{name}-done"


@dq.task(max_attempts=3, backoff=durq.constant(0.05))
def three_steps(mode: str = "transient", gate: str = "") -> list[str]:
    """Three steps; on its first attempt the job fails after step 2 (``mode``: a transient
    error, or ``kill``: the worker process dies). ``permanent``: fails for good after step 2
    while the file ``gate`` does not exist."""
    ctx = durq.context()
    one = ctx.step("one", _side_effect, "one")
    two = ctx.step("two", _side_effect, "two")
    if ctx.attempt == 1 and mode == "transient":
        raise durq.Transient("fails after step 2 of 3")
    if ctx.attempt == 1 and mode == "kill":
        os._exit(3)
    if mode == "permanent" and not os.path.exists(gate):
        raise durq.Permanent("fails after step 2 of 3 until the gate opens")
    three = ctx.step("three", _side_effect, "three")
    return [one, two, three]


@dq.task(max_attempts=3)
def add(a: int, b: int) -> dict[str, object]:
    return {"sum": a + b, "pid": os.getpid()}


@dq.task(max_attempts=1)
def explode(message: str) -> None:
    raise ValueError(message)


@dq.task(max_attempts=1)
def halfway(gate: str) -> str:
    """Report progress, then wait for the file ``gate`` (at most 60 s)."""
    durq.context().progress(0.5, "halfway there", stage="copy")
    end = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < end:
        time.sleep(0.02)
    durq.context().progress(1.0, "done")
    return "finished"
