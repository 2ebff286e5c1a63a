"""A periodic task run by real worker processes in the tests. The database comes from
DURQ_URL; each run appends ``<slot> <pid>`` to ``$RUNS_FILE`` when set."""

from __future__ import annotations

import os

import durq

dq = durq.Durq()  # DURQ_URL


@dq.periodic("* * * * * *", slot_arg="slot")  # every second (croniter's 6th field)
@dq.task(max_attempts=3)
def every_second(slot: int) -> int:
    path = os.environ.get("RUNS_FILE")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{slot} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
    return slot
