"""A ``def`` task that never returns (issue 13, defect 7): its timeout settles the job, but
its thread keeps the slot for good. DURQ_URL names the database."""

from __future__ import annotations

import threading

import durq

dq = durq.Durq()  # DURQ_URL

_never = threading.Event()


@dq.task(queue="wedge", timeout=0.5, max_attempts=1)
def hang() -> None:
    _never.wait()  # a body that ignores its timeout and never returns
