"""The periodic scheduler: enqueues each slot of every ``@dq.periodic`` schedule once.

:func:`tick` is the whole algorithm and has no state of its own: it reads the stored last
slot of each schedule, computes the slots due (:meth:`durq.periodic.Periodic.due`) and
enqueues each through :meth:`Store.enqueue_periodic`, which advances the stored last slot
with a conditional update in the same transaction as the insert, and gives the job the
unique key ``periodic:<name>:<slot>``. So any number of schedulers may tick at once (two
workers, a stand-in leader and a frozen one that resumes, a restart inside a slot): each
slot is enqueued at most once, and the stored slot never goes back, even after retention
has deleted old jobs and their keys.

:class:`Scheduler` runs :func:`tick` in the worker while the worker leads
(``store.lead("periodic")``; every SQLite worker does) at least once a second and at each
slot.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from durq.errors import ConfigError, PayloadError
from durq.observability import events
from durq.periodic import Periodic, key_for
from durq.task import EnqueueOptions
from durq.worker.service import Service, passing

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.host import WorkerHost

PERIODIC_ENQUEUED = "periodic_enqueued"
PERIODIC_FAILED = "periodic_failed"

#: The longest the scheduler sleeps between ticks, in seconds (it also wakes at each slot).
MAX_SLEEP = 1.0


@dataclass(frozen=True, slots=True)
class Fired:
    """One slot this tick enqueued: the schedule, the slot (epoch seconds), the job id, and
    whether the job is new (False: a job with the slot's key already existed)."""

    name: str
    slot: float
    job_id: int
    created: bool


def tick(app: Registry) -> list[Fired]:
    """Enqueue the due slots of every periodic schedule of ``app``, once each.

    A schedule seen for the first time is anchored at the current time: its first slot is
    the next one, none before. Returns what this call enqueued (a slot another scheduler
    enqueued first is not listed).

    Raises:
        StoreBusy, StoreUnavailable, StoreError: the store could not be read or written;
            the slots not yet enqueued are enqueued by the next tick.
    """
    schedules = app.periodics
    if not schedules:
        return []
    store = app.store
    now = store.now()
    stored = store.periodic_slots()
    missing = [name for name in schedules if name not in stored]
    if missing:
        store.periodic_anchor(missing, now)
        stored = store.periodic_slots()
    fired: list[Fired] = []
    for p in schedules.values():
        last = stored[p.name][0] if p.name in stored else now
        for slot in p.due(last, now):
            try:
                done = _enqueue_slot(app, p, slot)
            except (ConfigError, PayloadError) as exc:
                # the schedule cannot make a valid job (e.g. its task's signature changed):
                # say so, and go on with the other schedules
                events.emit(PERIODIC_FAILED, logging.ERROR, name=p.name, slot=slot, error=str(exc))
                break
            if done is None:
                continue
            fired.append(done)
            events.emit(
                PERIODIC_ENQUEUED, name=p.name, slot=slot, id=done.job_id, created=done.created
            )
    return fired


def _enqueue_slot(app: Registry, p: Periodic, slot: float) -> Fired | None:
    key = key_for(p.name, slot)
    opts = EnqueueOptions(
        queue=p.queue,
        run_at=slot,
        priority=p.priority,
        key=key,
        max_attempts=p.max_attempts,
        meta={"periodic": p.name, "slot": int(slot)},
    )
    task = app.tasks.get(p.task)
    new = app._with_payload(app._template(p.task, opts, task), p.job_payload(slot), key)
    inserted = app.store.enqueue_periodic(p.name, slot, new)
    if inserted is None:
        return None
    return Fired(p.name, slot, inserted.id, inserted.created)


def seconds_to_next(app: Registry) -> float:
    """Seconds from now until the next slot of any schedule (at most :data:`MAX_SLEEP`)."""
    now = app.store.now()
    soonest = min((p.next_slot(now) for p in app.periodics.values()), default=now + MAX_SLEEP)
    return max(0.01, min(MAX_SLEEP, soonest - now))


class Scheduler(Service):
    """The worker's periodic scheduler: :func:`tick` at start, at each slot and at least
    every :data:`MAX_SLEEP` seconds, while this process leads."""

    name = "scheduler"

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:

        app = self.worker.app
        while True:
            wait = MAX_SLEEP
            try:
                if app.store.lead("periodic", stale_after=5 * MAX_SLEEP):
                    tick(app)
                    wait = seconds_to_next(app)
            except Exception as exc:
                if not passing(exc):
                    raise
                events.emit(events.STORE_BUSY, logging.WARNING, loop=self.name, error=str(exc))
            if self.sleep(wait):
                return
