"""The runs file: every run of a proving task appends a ``start`` and an ``end`` line to it,
and the driver reads them back, so its figures come from what really ran.

The driver starts its workers with these variables in the environment:

``DURQ_VERIFY_RUNS`` (:data:`RUNS_ENV`)
    The runs file. Each line is ``<kind> <job id> <attempt> <pid> <epoch seconds>``. The
    file is opened with ``O_APPEND`` and each line is one ``write()``, so lines from several
    processes never interleave, and a process killed with SIGKILL loses no line it already
    wrote.
``DURQ_VERIFY_PARENT`` (:data:`PARENT_ENV`)
    The pid of the driver (``durq verify`` or ``durq soak``). When that process disappears
    (killed before it could clean up), the worker stops itself instead of running on as an
    orphan (:func:`start_parent_watch`).

The worker side is :func:`record` and :func:`start_parent_watch` (called by the task apps);
the driver side is :class:`RunsLog`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from durq.context import context

#: The variable naming the runs file.
RUNS_ENV = "DURQ_VERIFY_RUNS"
#: The variable holding the driver's pid.
PARENT_ENV = "DURQ_VERIFY_PARENT"
#: Seconds between checks that the driver is still alive.
PARENT_CHECK_INTERVAL = 0.5
#: Seconds a worker orphaned by its driver gets to stop gracefully before it exits.
ORPHAN_GRACE = 5.0


# -- the worker side ----------------------------------------------------------------------


def record(kind: str) -> None:
    """Append one ``kind job attempt pid time`` line for the running job to the runs file
    (no-op when :data:`RUNS_ENV` is not set).

    Args:
        kind: ``start`` (before the work) or ``end`` (after it).
    """
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


def _watch_parent(parent: int) -> None:
    """Stop this worker (SIGTERM, then exit) once the driver ``parent`` is gone."""
    while os.getppid() == parent:
        time.sleep(PARENT_CHECK_INTERVAL)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(ORPHAN_GRACE)
    os._exit(1)


def start_parent_watch() -> None:
    """When :data:`PARENT_ENV` names a pid, start a daemon thread that stops this process
    (SIGTERM, then exit after :data:`ORPHAN_GRACE` seconds) once that parent is gone; checks
    every :data:`PARENT_CHECK_INTERVAL` seconds."""
    raw = os.environ.get(PARENT_ENV, "")
    if raw.isdigit():
        threading.Thread(
            target=_watch_parent, args=(int(raw),), name="durq-verify-parent", daemon=True
        ).start()


# -- the driver side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One line of the runs file: ``kind`` is ``start`` or ``end``; ``at`` is epoch seconds."""

    kind: str
    job_id: int
    attempt: int
    pid: int
    at: float


def parse_run(line: bytes) -> Run | None:
    """One ``kind job attempt pid time`` line, or None when it is not one."""
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 5 or parts[0] not in ("start", "end"):
        return None
    try:
        return Run(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), float(parts[4]))
    except ValueError:
        return None


class RunsLog:
    """Reads the runs file incrementally as workers append to it.

    Args:
        path: the runs file (created empty here, so workers only ever append to it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch(mode=0o600)
        self.runs: list[Run] = []
        self.ended: set[int] = set()
        self.running: dict[int, set[tuple[int, int]]] = defaultdict(set)  # pid -> (job, attempt)
        self.bad_lines = 0
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        """Parse the lines appended since the last call (a trailing partial line waits)."""
        with open(self.path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        self._offset += len(data)
        data = self._partial + data
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            run = parse_run(line)
            if run is None:
                self.bad_lines += 1
                continue
            self.runs.append(run)
            if run.kind == "end":
                self.ended.add(run.job_id)
                self.running[run.pid].discard((run.job_id, run.attempt))
            else:
                self.running[run.pid].add((run.job_id, run.attempt))
