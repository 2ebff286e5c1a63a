"""Tasks for the random-DAG kill test (issue 15), run by real worker processes.

``node`` appends ``start <n> <job id> <attempt> <time>`` when it starts and ``end <n> <time>``
before it returns to ``$RUNS_FILE`` (O_APPEND: safe across processes).
"""

from __future__ import annotations

import os
import time

import durq

dq = durq.Durq()  # DURQ_URL


def _append(line: str) -> None:
    fd = os.open(os.environ["RUNS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@dq.task(max_attempts=10)
def node(n: int, ms: float, fail: bool = False) -> int:
    """One DAG node: sleeps ``ms`` milliseconds; ``fail`` fails it for good."""
    ctx = durq.context()
    _append(f"start {n} {ctx.job_id} {ctx.attempt} {time.time():.6f}")
    time.sleep(ms / 1000)
    if fail:
        raise durq.Permanent(f"node {n} fails for good")
    _append(f"end {n} {time.time():.6f}")
    return n
