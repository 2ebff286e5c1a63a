"""A task that reports any text as its progress, then runs until cancelled or ``seconds``
pass (tests/integration/test_stored_text_shown.py). The database comes from DURQ_URL."""

from __future__ import annotations

import time

import durq

dq = durq.Durq()  # DURQ_URL


@dq.task(max_attempts=1)
def report(message: str, seconds: float) -> None:
    durq.context().progress(0.5, message)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.02)
