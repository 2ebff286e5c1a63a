"""Store time on SQLite that never goes back when the wall clock does.

On SQLite every time (``run_at``, leases, backoff) is the writing process's wall clock
(``time.time()``); PostgreSQL takes them from the server's ``now()``. A backward step of
the wall clock (a manual fix, a VM resumed, NTP stepping instead of slewing) used to hold
back every job that was ready: after a -3,600 s step three ready jobs, and the jobs the
reaper recovered, waited about an hour (issue 13, defect 5).

:class:`SteadyClock` keeps a **high-water mark** of the store time it has handed out and
of the store-wide mark kept in the database (``meta`` key :data:`MARK_KEY`, raised by every
heartbeat, registration and reaper pass, and read when a store opens, with the
``created_at`` of the newest job). When the wall clock reads more than
:data:`STEP_TOLERANCE` seconds below the mark, it logs ``clock_stepped_back`` (with the
step) and from then on adds the step to the wall clock: store time goes on from the mark at
the wall clock's rate. So a job that was ready before the step stays ready, leases expire
after their length of real time, and a delayed job runs at most the step later by the new
wall clock (on time by elapsed time). A step back smaller than the tolerance only holds
store time still until the wall clock has caught up. Forward steps are not undone (they
cannot be told from a long pause).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

from durq.observability import events

#: The ``meta`` key of the store-wide high-water mark (epoch seconds, as text).
MARK_KEY = "clock_high_water"
#: Seconds the wall clock may read below the mark before it counts as a backward step.
STEP_TOLERANCE = 1.0
#: Event logged once per step: ``{"step": seconds, "wall": ..., "mark": ...}``.
CLOCK_STEPPED_BACK = "clock_stepped_back"

log = logging.getLogger("durq.store")


class SteadyClock:
    """A clock (epoch seconds) that never returns less than it returned before, nor less
    than any mark :meth:`observe` was given.

    Args:
        wall: the wall clock (default ``time.time``).
        tolerance: seconds of backward step held still instead of counted as a step.
    """

    def __init__(
        self, wall: Callable[[], float] = time.time, tolerance: float = STEP_TOLERANCE
    ) -> None:
        self.wall = wall
        self.tolerance = tolerance
        self.offset = 0.0
        self.mark = -math.inf
        self.steps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        wall = self.wall()
        with self._lock:
            t = wall + self.offset
            if t < self.mark - self.tolerance:
                step = self.mark - t
                self.offset += step
                self.steps.append(step)
                events.emit(
                    CLOCK_STEPPED_BACK, logging.WARNING, step=round(step, 3), wall=wall,
                    mark=self.mark, offset=round(self.offset, 3),
                )  # fmt: skip
                t = self.mark
            if t > self.mark:
                self.mark = t
            return self.mark

    def observe(self, mark: float | None) -> None:
        """Take in a store-wide mark read from the database (None: there is none yet)."""
        if mark is None or not math.isfinite(mark):
            return
        with self._lock:
            if mark > self.mark:
                self.mark = mark
