"""The task the power-cut loop's workers run (a no-op: what counts is what was committed)."""

from __future__ import annotations

import durq

dq = durq.Durq()  # DURQ_URL or --db


@dq.task(queue="cut", max_attempts=1000)
def noop(n: int) -> int:
    return n
