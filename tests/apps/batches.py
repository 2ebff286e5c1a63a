"""Tasks for the batch tests run by real worker processes. The database comes from DURQ_URL.

``member`` appends ``member <job id> <pid>`` and ``on_done`` appends one JSON line per
invocation to ``$RUNS_FILE`` (O_APPEND: safe across processes).
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import durq

dq = durq.Durq()  # DURQ_URL


def _append(line: str) -> None:
    path = os.environ.get("RUNS_FILE")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@dq.task(max_attempts=5)
def member(n: int, ms: float = 0.0, fail: bool = False, fail_while: str = "") -> int:
    """One batch member: sleeps ``ms`` milliseconds; ``fail`` fails it for good, and so
    does ``fail_while`` (a path) while that file exists."""
    _append(f"member {durq.context().job_id} {os.getpid()}")
    if ms:
        time.sleep(ms / 1000)
    if fail or (fail_while and os.path.exists(fail_while)):
        raise durq.Permanent(f"member {n} fails for good")
    return n


@dq.task(queue="default", max_attempts=5)
def on_done(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
    """The batch callback: records each invocation."""
    record = {"batch_id": batch_id, "outcome": outcome, "counts": counts, "meta": meta}
    if os.environ.get("DIE_IN_CALLBACK") and durq.context().attempt == 1:
        _append("callback-died")
        os._exit(3)  # the worker running the callback is killed halfway (case 14, step 3)
    _append("callback " + json.dumps(record, sort_keys=True))
