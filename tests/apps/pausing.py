"""Tasks for the pause tests, run by real worker processes. The database comes from DURQ_URL.

- ``RUNS_FILE``: each run appends ``start <job> <attempt> <pid>`` / ``end ...`` lines.
- ``ALERTS_FILE``: the app's ``on_alert`` hook appends one JSON line per alert delivered.
- ``QUOTA_OK``: a path; while it does not exist, ``quota`` raises ``durq.PauseQueue`` once
  ``QUOTA_TOGETHER`` runs have started (so that they all hit it at the same moment).
"""

from __future__ import annotations

import json
import os
import time

import durq

dq = durq.Durq()  # DURQ_URL


def _append(env: str, line: str) -> None:
    path = os.environ.get(env)
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _record(kind: str) -> None:
    ctx = durq.context()
    _append("RUNS_FILE", f"{kind} {ctx.job_id} {ctx.attempt} {os.getpid()}\n")


def _starts() -> int:
    path = os.environ.get("RUNS_FILE", "")
    try:
        with open(path) as f:
            return sum(1 for line in f if line.startswith("start "))
    except OSError:
        return 0


@dq.on_alert
def to_file(alert: durq.Alert) -> None:
    _append(
        "ALERTS_FILE",
        json.dumps({"key": alert.key, "message": alert.message, "suppressed": alert.suppressed})
        + "\n",
    )


@dq.task(queue="api", max_attempts=3)
def quota(n: int) -> int:
    """Pause the queue while QUOTA_OK does not exist; else succeed."""
    _record("start")
    if not os.path.exists(os.environ["QUOTA_OK"]):
        together = int(os.environ.get("QUOTA_TOGETHER", "1"))
        deadline = time.monotonic() + 10
        while _starts() < together and time.monotonic() < deadline:
            time.sleep(0.01)
        raise durq.PauseQueue("API quota exhausted")
    _record("end")
    return n


@dq.task(queue="slow", max_attempts=3)
def slow(seconds: float) -> str:
    _record("start")
    time.sleep(seconds)
    _record("end")
    return "done"


@dq.task(queue="slow", max_attempts=3)
def quick(n: int) -> int:
    _record("start")
    return n
