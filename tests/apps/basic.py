"""Tasks run by real worker processes in the tests. The database comes from DURQ_URL.

Each run appends ``start``/``end`` lines (job id, attempt, pid) to ``$RUNS_FILE`` when set,
so tests can prove which runs happened where.
"""

from __future__ import annotations

import os
import time

import durq

dq = durq.Durq()  # DURQ_URL


def _record(kind: str) -> None:
    path = os.environ.get("RUNS_FILE")
    if not path:
        return
    ctx = durq.context()
    line = f"{kind} {ctx.job_id} {ctx.attempt} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@dq.task(max_attempts=10)
def sleepy(ms: float) -> float:
    """Sleep ``ms`` milliseconds, recording the run."""
    _record("start")
    time.sleep(ms / 1000)
    _record("end")
    return ms


@dq.task(max_attempts=3)
def long(seconds: float) -> str:
    """Sleep in small steps; stop early when the lease is lost."""
    _record("start")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
    _record("end")
    return "done"


@dq.task(max_attempts=3, backoff=durq.constant(0.05))
def echo(value: object) -> object:
    return value


@dq.task(max_attempts=3)
def die() -> None:
    """Kill the worker process outright (a poison job)."""
    _record("start")
    os._exit(3)


@dq.task(max_attempts=3)
def whoami(ms: float) -> str | None:
    """Sleep ``ms`` milliseconds and return this worker's WORKER_NAME."""
    _record("start")
    time.sleep(ms / 1000)
    _record("end")
    return os.environ.get("WORKER_NAME")


@dq.task(max_attempts=3, backoff=durq.constant(1.0))
def fail_once() -> int:
    """Fail the first attempt (transient), succeed on the next; retried after 1 s."""
    if durq.context().attempt == 1:
        raise durq.Transient("first attempt fails")
    return durq.context().attempt
