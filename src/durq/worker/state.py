"""The worker's table of attempts in flight, shared by its services under one lock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from durq.context import JobContext
from durq.model import Claimed
from durq.worker.interrupt import BodyGuard

#: Seconds an interrupted body may take to stop before its slot counts as wedged.
WEDGED_AFTER = 1.0
#: Interruptions whose job the store ended (or took) already: a limited job's slot is
#: then kept as a hold until the body is gone (docs/features/limits.md).
ENDED_ELSEWHERE = ("cancelled", "expired", "lease_lost")


@dataclass(eq=False)
class Attempt:
    """One claimed job on this worker.

    Its slot is taken while its code runs (an interrupted body keeps its slot until it has
    stopped). The attempt stays in the table, and its lease is heartbeated, until its
    outcome is settled: committed, fenced out, or dropped. ``deadline`` (monotonic) is set
    when the body really starts (for ``async def`` on the loop, not at hand-off).
    """

    job: Claimed
    ctx: JobContext
    started: float = field(default_factory=time.monotonic)
    deadline: float | None = None
    settled: bool = False  # the outcome was handed on or dropped; no more heartbeats
    returned: bool = False  # the thread / coroutine is done
    abandoned: bool = False  # given back at shutdown, cancelled or expired: drop its outcome
    is_async: bool = False
    in_pool: bool = False  # its body runs in a process-pool child (which enforces timeouts)
    timeout: float | None = None  # the task's timeout, seconds
    guard: BodyGuard = field(default_factory=BodyGuard)  # def bodies: where to raise
    task: Any = None  # async bodies: the asyncio.Task running it, once started on the loop
    interrupted: str | None = None  # "timeout" | "cancelled" | "expired": asked to stop
    interrupted_at: float | None = None  # monotonic time of the first interrupt
    raised_at: float = 0.0  # monotonic time of the last raise into the body

    @property
    def key(self) -> tuple[int, int]:
        """(job id, lease token): the attempt's key in :class:`InFlight`. A job replayed
        (or reaped and claimed again) while an earlier body of it still runs here has two
        attempts in the table, told apart by their tokens."""
        return (self.job.id, self.job.lease_token)


class InFlight:
    """Attempts in flight, keyed by (job id, lease token): two attempts of one job (the
    body of a cancelled job still running when its replay is claimed) are two entries.
    ``bodies`` maps a job id to its attempt whose code has not returned (the worker starts
    no second one beside it: see ``Prefetch.start``). ``freed`` is notified whenever an
    attempt leaves the table; ``on_free`` is called whenever a slot frees (code returned)."""

    def __init__(self, slots: int, on_free: Callable[[], None] = lambda: None) -> None:
        self.slots = slots
        self.lock = threading.Lock()
        self.freed = threading.Condition(self.lock)
        self.attempts: dict[tuple[int, int], Attempt] = {}
        #: job id -> its (oldest) attempt whose code runs or is about to; read without the
        #: lock by ``Prefetch.start`` (a dict lookup is atomic), written under it
        self.bodies: dict[int, Attempt] = {}
        self._more_bodies: dict[int, list[Attempt]] = {}  # later ones of a job (never, in a Worker)
        self.busy = 0  # attempts whose code has not returned
        self._on_free = on_free
        # (job id, token) of stopped bodies now gone, whose limit holds the cancels service
        # deletes (a cancel or an expiry keeps a limited job's slot until then)
        self._unheld: list[tuple[int, int]] = []

    def free_slots(self) -> int:
        with self.lock:
            return self.slots - self.busy

    def add(self, attempt: Attempt) -> None:
        with self.lock:
            self.attempts[attempt.key] = attempt
            if self.bodies.setdefault(attempt.job.id, attempt) is not attempt:
                self._more_bodies.setdefault(attempt.job.id, []).append(attempt)
            self.busy += 1

    def get(self, job_id: int, token: int) -> Attempt | None:
        """The attempt of ``job_id`` under lease ``token``, if it is in the table."""
        with self.lock:
            return self.attempts.get((job_id, token))

    def body_of(self, job_id: int) -> Attempt | None:
        """The attempt of ``job_id`` whose code has not returned, if any."""
        with self.lock:
            return self.bodies.get(job_id)

    def start(self, attempt: Attempt, now: float, slack: float = 0.0) -> bool:
        """The body is about to start (``now``: monotonic): set its deadline (timeout plus
        ``slack`` seconds from now). False, and the attempt is dropped, when it must not
        start: settled, given back, cancelled, or its lease lost meanwhile."""
        with self.lock:
            if attempt.settled or attempt.abandoned or attempt.ctx.lease_lost:
                attempt.abandoned = True
                return False
            attempt.started = now
            if attempt.timeout is not None:
                attempt.deadline = now + attempt.timeout + slack
            return True

    def mark_interrupted(self, attempt: Attempt, reason: str, now: float) -> bool:
        """Record that the worker stops ``attempt``'s body for ``reason``; False when the
        body has returned already. A cancel or an expiry also drops its outcome."""
        with self.lock:
            if attempt.returned:
                return False
            if attempt.interrupted is None:
                attempt.interrupted_at = now
            if attempt.interrupted is None or reason != "timeout":
                attempt.interrupted = reason
            if reason != "timeout":
                attempt.abandoned = True
            attempt.raised_at = now
            return True

    def leases(self) -> list[tuple[int, int]]:
        """(job id, token) of attempts whose lease must be kept alive."""
        with self.lock:
            return [
                (a.job.id, a.job.lease_token)
                for a in self.attempts.values()
                if not a.settled and not a.ctx.lease_lost
            ]

    def _maybe_free(self, attempt: Attempt) -> None:
        key = attempt.key
        if attempt.settled and attempt.returned and self.attempts.get(key) is attempt:
            del self.attempts[key]
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
            self._body_gone(attempt)
            if not attempt.abandoned:
                return True  # the caller hands on the outcome, which wakes the claimer
            attempt.settled = True
            if attempt.interrupted in ENDED_ELSEWHERE:
                self._unheld.append((attempt.job.id, attempt.job.lease_token))
            self._maybe_free(attempt)
        self._on_free()
        return False

    def _body_gone(self, attempt: Attempt) -> None:
        """Take ``attempt`` out of :attr:`bodies` (under :attr:`lock`)."""
        job_id = attempt.job.id
        more = self._more_bodies.get(job_id) if self._more_bodies else None
        if self.bodies.get(job_id) is attempt:
            if more:
                self.bodies[job_id] = more.pop(0)
            else:
                del self.bodies[job_id]
        elif more and attempt in more:
            more.remove(attempt)
        if more is not None and not more:
            del self._more_bodies[job_id]

    def unhold(self, job_id: int, token: int) -> None:
        """The body of (``job_id``, ``token``) is gone and its outcome was refused (the
        job was cancelled or expired before the worker saw it): free its limit hold."""
        with self.lock:
            self._unheld.append((job_id, token))

    def take_unheld(self) -> list[tuple[int, int]]:
        """The (job id, token) pairs whose limit holds are to be deleted, taken from the
        table (put them back with :meth:`unhold` when the delete failed)."""
        with self.lock:
            taken, self._unheld = self._unheld, []
            return taken

    def holding(self) -> list[tuple[int, int]]:
        """(job id, token) of bodies stopped for a cancel, an expiry or a lost lease that
        still run: their limit holds (if any) are extended with the heartbeat."""
        with self.lock:
            return [
                (a.job.id, a.job.lease_token)
                for a in self.attempts.values()
                if not a.returned and a.interrupted in ENDED_ELSEWHERE
            ]

    def abandon_unreturned(self) -> list[Attempt]:
        """At shutdown: take every attempt whose code is still running; their outcomes drop."""
        with self.lock:
            taken = [a for a in self.attempts.values() if not a.returned and not a.abandoned]
            for attempt in taken:
                attempt.abandoned = True
            return taken

    def overdue(self, now: float) -> list[Attempt]:
        """Running attempts past their deadline not yet asked to stop (``now``: monotonic)."""
        with self.lock:
            return [
                a
                for a in self.attempts.values()
                if a.deadline is not None
                and now >= a.deadline
                and not a.returned
                and a.interrupted is None
            ]

    def stopping(self) -> list[Attempt]:
        """Attempts asked to stop whose body has not returned yet."""
        with self.lock:
            return [
                a for a in self.attempts.values() if a.interrupted is not None and not a.returned
            ]

    def running(self) -> list[Attempt]:
        """Attempts whose body runs (or waits to start) and whose outcome still counts."""
        with self.lock:
            return [a for a in self.attempts.values() if not a.returned and not a.abandoned]

    def wedged(self, now: float) -> int:
        """Slots held by task bodies that would not stop (``now``: ``time.monotonic()``):
        bodies interrupted more than :data:`WEDGED_AFTER` seconds ago, or past their
        deadline by as much, that have not returned."""
        with self.lock:
            return sum(
                1
                for a in self.attempts.values()
                if not a.returned
                and (
                    (a.interrupted_at is not None and now >= a.interrupted_at + WEDGED_AFTER)
                    or (a.deadline is not None and now >= a.deadline + WEDGED_AFTER)
                )
            )

    def __len__(self) -> int:
        with self.lock:
            return len(self.attempts)
