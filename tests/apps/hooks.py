"""Tasks with on_fail hooks and a hook queue, run by real worker processes
(tests/integration/test_hooks.py).

The database comes from DURQ_URL. Hooks append ``<hook> <job id> <state> <pid>`` lines to
``$HOOKS_FILE``; tasks append ``will_retry <job id> <attempt> <answer>`` before they raise.
The sweeper runs every 0.1 s here so that the tests stay short.
"""

from __future__ import annotations

import os
import time

import durq
import durq.worker.sweeper
from durq.classify import PERMANENT, rule

durq.worker.sweeper.SWEEP_INTERVAL = 0.1


def app(url: str | None = None) -> durq.Durq:
    """The app with its tasks (the worker's; tests use it as a producer that knows them)."""
    dq = durq.Durq(url, classify=[rule(PERMANENT, pattern="gone for good")])
    dq.task(max_attempts=3, backoff=durq.constant(0.05), on_fail=on_fail)(boom)
    dq.task(max_attempts=1, on_fail=on_fail)(sleepy)
    dq.task(queue="work", hook_queue="hooks", max_attempts=1, on_fail=on_fail,
            on_expire=on_expire)(paused_work)  # fmt: skip
    return dq


def _record(line: str) -> None:
    fd = os.open(os.environ["HOOKS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def on_fail(job: durq.Job) -> None:
    _record(f"fail {job.id} {job.state} {os.getpid()}")


def on_expire(job: durq.Job) -> None:
    _record(f"expire {job.id} {job.state} {os.getpid()}")


class Flaky(Exception):
    """Unclassified: retried (retry_unclassified is the default)."""


def boom(message: str) -> None:
    """Raise ``message`` (as durq.Permanent when it starts with "permanent"), after writing
    what ``durq.context().will_retry`` says about it."""
    ctx = durq.context()
    exc: Exception = durq.Permanent(message) if message.startswith("permanent") else Flaky(message)
    _record(f"will_retry {ctx.job_id} {ctx.attempt} {ctx.will_retry(exc)}")
    raise exc


def sleepy(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def paused_work(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


dq = app()  # DURQ_URL
