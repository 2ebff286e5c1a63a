"""What a worker counts about itself since it started, and the report it writes at each beat.

The claimer (the one thread that records outcomes) bumps the counters after each commit:
plain integer increments, so counting costs the hot path nothing measurable. Observers
(``durq worker --metrics-port``) are called only when one is attached.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from importlib import metadata

from durq.model import SNOOZE_KIND, InHand, Outcome, WorkerReport
from durq.worker.state import Attempt, InFlight

#: Called after each committed outcome: (attempt, outcome, applied, run seconds).
Observer = Callable[[Attempt, Outcome, bool, float], None]


def durq_version() -> str:
    """The installed durq's version ('' when it is not installed as a distribution)."""
    try:
        return metadata.version("durq")
    except metadata.PackageNotFoundError:
        return ""


class WorkerStats:
    """Counters since start: ``done`` (succeeded), ``failed`` (every failed attempt: a retry
    or for good), ``retried`` (of those, the ones that will run again), ``stale`` (outcomes
    whose lease token no longer held), ``rescued`` (leases its reaper returned)."""

    def __init__(self) -> None:
        self.done = 0
        self.failed = 0
        self.retried = 0
        self.stale = 0
        self.rescued = 0  # expired leases this worker's reaper returned to the queue
        self.observers: list[Observer] = []

    def record(self, attempt: Attempt, outcome: Outcome, applied: bool) -> None:
        if not applied:
            self.stale += 1
        elif outcome.kind == "succeeded":
            self.done += 1
        elif outcome.kind == SNOOZE_KIND:
            pass  # put back without spending an attempt: neither done nor failed
        else:
            self.failed += 1
            if outcome.kind == "retry":
                self.retried += 1
        if self.observers:
            ran = time.monotonic() - attempt.started
            for observer in self.observers:
                observer(attempt, outcome, applied, ran)

    def report(
        self, inflight: InFlight, concurrency: int, now: float, pool: str = "threads"
    ) -> WorkerReport:
        """The report for the store: the pool (``"threads"`` or ``"processes"``), the jobs
        in hand (their start on the store's clock ``now``, epoch seconds), concurrency,
        version and the counters."""
        mono = time.monotonic()
        with inflight.lock:
            held = [
                InHand(a.job.id, a.job.task, now - (mono - a.started))
                for a in inflight.attempts.values()
                if not a.settled
            ]
        held.sort(key=lambda h: h.started_at)
        return WorkerReport(pool, concurrency, VERSION, tuple(held), self.done, self.failed)


VERSION = durq_version()
