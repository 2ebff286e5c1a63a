"""Tasks with deadline hooks, run by real worker processes (tests/integration/test_deadlines.py).

The database comes from DURQ_URL. Hooks append ``<hook> <job id> <state> <pid>`` lines to
``$HOOKS_FILE``; the sweeper runs every 0.1 s here so that the tests stay short.
"""

from __future__ import annotations

import os
import time

import durq
import durq.worker.sweeper

durq.worker.sweeper.SWEEP_INTERVAL = 0.1

dq = durq.Durq()  # DURQ_URL


def _record(hook: str, job: durq.Job) -> None:
    line = f"{hook} {job.id} {job.state} {os.getpid()}\n".encode()
    fd = os.open(os.environ["HOOKS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def on_expire(job: durq.Job) -> None:
    _record("expire", job)


def on_slow(job: durq.Job) -> None:
    _record("slow", job)


@dq.task(max_attempts=1, on_expire=on_expire, on_slow=on_slow)
def generate(seconds: float) -> str:
    """Work for ``seconds``, stopping early once the lease is lost (expired: fenced out)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if durq.context().lease_lost:
            return "lease lost"
        time.sleep(0.02)
    return "done"
