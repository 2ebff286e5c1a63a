"""Tasks for the process-pool tests (tests/integration/test_process_pool.py).

DURQ_URL names the database; POOL_MARKS a directory where bodies leave marker files.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import time
from pathlib import Path

import durq

dq = durq.Durq()  # DURQ_URL

MARKS = Path(os.environ.get("POOL_MARKS", "."))


def _mark(name: str, text: str = "") -> None:
    (MARKS / name).write_text(text or str(os.getpid()))


@dq.task(queue="pool", max_attempts=2)
def whoami(n: int) -> int:
    """Returns the pid of the process that ran the body."""
    return os.getpid()


@dq.task(queue="pool", max_attempts=2)
def hold(n: int, seconds: float) -> int:
    """Leaves ``start-N`` (its pid), sleeps, leaves ``end-N``."""
    _mark(f"start-{n}")
    time.sleep(seconds)
    _mark(f"end-{n}")
    return os.getpid()


@dq.task(queue="pool", max_attempts=2)
def segfault_once(n: int) -> str:
    """Segfaults on its first attempt (``ctypes.string_at(0)``), succeeds on the second."""
    ctx = durq.context()
    if ctx.attempt == 1:
        _mark(f"start-{n}")
        ctypes.string_at(0)
    return "ok"


@dq.task(queue="pool", max_attempts=2)
def exit_hard(n: int) -> str:
    """``os._exit(3)`` on its first attempt."""
    if durq.context().attempt == 1:
        os._exit(3)
    return "ok"


@dq.task(queue="pool", max_attempts=1)
def balloon(n: int, mb: int) -> int:
    """Allocates ``mb`` MB and keeps it while it sleeps 5 s."""
    block = bytearray(mb * 1024 * 1024)
    for i in range(0, len(block), 4096):
        block[i] = 1
    time.sleep(5)
    return len(block)


@dq.task(queue="pool", timeout=0.3, max_attempts=1)
def overrun(n: int) -> None:
    """Sleeps 5 s past its 0.3 s timeout, then would leave ``late-N``."""
    time.sleep(5)
    _mark(f"late-{n}")


@dq.task(queue="pool", timeout=0.5, max_attempts=1)
def spawn_sleeper(n: int) -> None:
    """Starts ``sleep 60`` (its pid in ``sleeper-N``) and waits for it past its timeout."""
    proc = subprocess.Popen(["sleep", "60"])
    _mark(f"sleeper-{n}", str(proc.pid))
    proc.wait()


@dq.task(queue="pool")
def noop() -> None:
    return None


@dq.task(queue="pool")
def progress_in_child(n: int) -> int:
    """Writes progress and a step from the child (the child opens the store for them)."""
    ctx = durq.context()
    ctx.progress(0.5, "half")
    return int(ctx.step("double", lambda: n * 2))


@dq.task(queue="pool")
async def async_pid(n: int) -> int:
    """An async task: runs on the worker's own loop, in the worker process."""
    return os.getpid()


@dq.task(queue="pool", max_attempts=1)
def spawn_group(n: int, count: int) -> None:
    """Starts ``count`` ``sleep 300`` in its process group (their pids in ``group-N``) and
    waits for them."""
    procs = [subprocess.Popen(["sleep", "300"]) for _ in range(count)]
    _mark(f"group-{n}", " ".join(str(p.pid) for p in procs))
    for proc in procs:
        proc.wait()


@dq.task(queue="pool")
def stamp(n: int) -> None:
    """Leaves ``stamp-N`` holding the time its body started."""
    _mark(f"stamp-{n}", repr(time.time()))
