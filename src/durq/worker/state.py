"""The worker's table of attempts in flight, shared by its services under one lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from durq.context import JobContext
from durq.model import Claimed


@dataclass(eq=False)
class Attempt:
    """One claimed job on this worker.

    Its slot is taken while its code runs (a timed-out thread keeps its slot until it
    returns). The attempt stays in the table, and its lease is heartbeated, until its
    outcome is settled: committed, fenced out, or dropped.
    """

    job: Claimed
    ctx: JobContext
    started: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    settled: bool = False  # the outcome was handed on or dropped; no more heartbeats
    returned: bool = False  # the thread / coroutine is done
    abandoned: bool = False  # given back at shutdown or timed out: drop its late outcome


class InFlight:
    """Attempts in flight. ``freed`` is notified whenever an attempt leaves the table;
    ``on_free`` is called whenever a slot frees (code returned)."""

    def __init__(self, slots: int, on_free: Callable[[], None] = lambda: None) -> None:
        self.slots = slots
        self.lock = threading.Lock()
        self.freed = threading.Condition(self.lock)
        self.attempts: dict[int, Attempt] = {}
        self.busy = 0  # attempts whose code has not returned
        self._on_free = on_free

    def free_slots(self) -> int:
        with self.lock:
            return self.slots - self.busy

    def add(self, attempt: Attempt) -> None:
        with self.lock:
            self.attempts[attempt.job.id] = attempt
            self.busy += 1

    def leases(self) -> list[tuple[int, int]]:
        """(job id, token) of attempts whose lease must be kept alive."""
        with self.lock:
            return [
                (a.job.id, a.job.lease_token)
                for a in self.attempts.values()
                if not a.settled and not a.ctx.lease_lost
            ]

    def _maybe_free(self, attempt: Attempt) -> None:
        if attempt.settled and attempt.returned and self.attempts.get(attempt.job.id) is attempt:
            del self.attempts[attempt.job.id]
            self.freed.notify_all()

    def settle(self, attempt: Attempt) -> None:
        with self.lock:
            attempt.settled = True
            self._maybe_free(attempt)

    def returned(self, attempt: Attempt) -> bool:
        """Mark the code as returned; False when its outcome must be dropped (abandoned)."""
        with self.lock:
            attempt.returned = True
            self.busy -= 1
            if not attempt.abandoned:
                return True  # the caller hands on the outcome, which wakes the claimer
            attempt.settled = True
            self._maybe_free(attempt)
        self._on_free()
        return False

    def abandon_unreturned(self) -> list[Attempt]:
        """At shutdown: take every attempt whose code is still running; their outcomes drop."""
        with self.lock:
            taken = [a for a in self.attempts.values() if not a.returned and not a.abandoned]
            for attempt in taken:
                attempt.abandoned = True
            return taken

    def overdue(self, now: float) -> list[Attempt]:
        """Attempts past their timeout, marked abandoned (their late outcome drops)."""
        with self.lock:
            late = [
                a
                for a in self.attempts.values()
                if a.deadline is not None
                and now >= a.deadline
                and not a.returned
                and not a.abandoned
            ]
            for attempt in late:
                attempt.abandoned = True
            return late

    def wedged(self, now: float) -> int:
        """Slots held by task bodies past their timeout (``now``: ``time.monotonic()``):
        attempts whose code has not returned although their deadline has passed."""
        with self.lock:
            return sum(
                1
                for a in self.attempts.values()
                if a.deadline is not None and now >= a.deadline and not a.returned
            )

    def __len__(self) -> int:
        with self.lock:
            return len(self.attempts)
