"""Tasks for tests/integration/test_workflow_hardening.py (DURQ_URL, RUNS_FILE, MARKS_DIR).

``fetch`` is limited (2 at once per host), is used as a batch member, and raises
``durq.PauseQueue`` on the first run of every job whose payload asks for it (a marker
file per job makes that once). Each completed run appends
``fetch <job id> <start> <end> <pid> <host>`` to ``$RUNS_FILE``; each callback appends
``batch <batch id> <outcome>``; each periodic slot job appends ``slot <slot>``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import durq

dq = durq.Durq()  # DURQ_URL


def _append(line: str) -> None:
    fd = os.open(os.environ["RUNS_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


@dq.task(queue="fetch", concurrency=2, concurrency_key=lambda p: str(p["host"]), max_attempts=50)
def fetch(host: str, ms: float, pause_once: bool = False) -> str:
    job_id = durq.context().job_id
    if pause_once:
        marker = os.path.join(os.environ["MARKS_DIR"], str(job_id))
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            pass
        else:
            raise durq.PauseQueue(f"job {job_id} pauses the queue once")
    start = time.time()
    time.sleep(ms / 1000)
    _append(f"fetch {job_id} {start:.6f} {time.time():.6f} {os.getpid()} {host}")
    return host


@dq.task(queue="callbacks", max_attempts=50)
def fetched(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
    _append(f"batch {batch_id} {outcome}")


@dq.periodic("* * * * * *", slot_arg="slot", name="tick")
@dq.task(queue="cron", max_attempts=50)
def tick(slot: int) -> int:
    _append(f"slot {slot}")
    return slot
