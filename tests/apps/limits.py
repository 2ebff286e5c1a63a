"""Limited tasks run by real worker processes in the limits tests (DURQ_URL, RUNS_FILE).

Each run appends ``<task> <job id> <start> <end> <pid>`` (wall-clock seconds) to
``$RUNS_FILE`` once it ends, so a test can compute how many ran at once.
"""

from __future__ import annotations

import os
import time
from urllib.parse import urlparse

import durq

dq = durq.Durq()  # DURQ_URL


def _record(task: str, start: float, end: float) -> None:
    path = os.environ["RUNS_FILE"]
    line = f"{task} {durq.context().job_id} {start:.6f} {end:.6f} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@dq.task(
    queue="downloads",
    concurrency=4,
    concurrency_key=lambda payload: urlparse(payload["url"]).hostname,
)
def download(url: str, ms: float) -> str:
    """Pretend to download ``url`` for ``ms`` milliseconds."""
    start = time.time()
    time.sleep(ms / 1000)
    _record("download", start, time.time())
    return url


@dq.task(queue="pings", rate_limit="5/s")
def ping(n: int) -> int:
    """Record the start of a rate-limited job."""
    start = time.time()
    _record("ping", start, time.time())
    return n


@dq.task(queue="downloads")
def quick(n: int) -> int:
    """An unlimited job in the same queue as the limited ones."""
    start = time.time()
    _record("quick", start, time.time())
    return n
