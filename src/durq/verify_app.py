"""The tasks that ``durq verify`` runs on real worker processes.

``durq verify`` starts ``durq worker durq.verify_app:dq --db URL ...`` with these variables
in the environment:

``DURQ_VERIFY_RUNS``
    A file each run appends two lines to, ``start`` before the work and ``end`` after it:
    ``<kind> <job id> <attempt> <pid> <epoch seconds>``. The file is opened with
    ``O_APPEND`` and each line is one ``write()``, so lines from several processes never
    interleave, and a process killed with SIGKILL loses no line it already wrote.
``DURQ_VERIFY_PARENT``
    The pid of the ``durq verify`` process. When that process disappears (killed before it
    could clean up), the worker stops itself instead of running on as an orphan.
"""

from __future__ import annotations

import os
import signal
import threading
import time

from durq.app import Durq
from durq.context import context
from durq.task import Task

RUNS_ENV = "DURQ_VERIFY_RUNS"
PARENT_ENV = "DURQ_VERIFY_PARENT"
TASK_NAME = "durq-verify-sleep"
DEFAULT_QUEUE = "durq-verify"

#: Seconds between checks that the ``durq verify`` parent is still alive.
PARENT_CHECK_INTERVAL = 0.5
#: Seconds a worker orphaned by its ``durq verify`` gets to stop gracefully before it exits.
ORPHAN_GRACE = 5.0


def _record(kind: str) -> None:
    """Append one ``kind job attempt pid time`` line to the runs file (no-op without one)."""
    path = os.environ.get(RUNS_ENV)
    if not path:
        return
    ctx = context()
    line = f"{kind} {ctx.job_id} {ctx.attempt} {os.getpid()} {time.time():.6f}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def verify_sleep(ms: float) -> None:
    """Sleep ``ms`` milliseconds, recording the start and the end of this run.

    Args:
        ms: how long the job works, in milliseconds.
    """
    _record("start")
    time.sleep(ms / 1000)
    _record("end")


def register(app: Durq) -> Task[..., None]:
    """Register the verify task on ``app`` (the producer side uses its own app).

    Returns:
        The registered task (routing name :data:`TASK_NAME`).

    Raises:
        ConfigError: another function is already registered under :data:`TASK_NAME`.
    """
    return app.task(name=TASK_NAME, queue=DEFAULT_QUEUE)(verify_sleep)


def _watch_parent(parent: int) -> None:
    """Stop this worker (SIGTERM, then exit) once the ``durq verify`` parent is gone."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_INTERVAL)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE)
    os._exit(1)


def _start_parent_watch() -> None:
    raw = os.environ.get(PARENT_ENV, "")
    if raw.isdigit():
        threading.Thread(
            target=_watch_parent, args=(int(raw),), name="durq-verify-parent", daemon=True
        ).start()


#: The app ``durq worker durq.verify_app:dq`` runs; its URL comes from ``--db``/``DURQ_URL``.
dq = Durq()
register(dq)
_start_parent_watch()
