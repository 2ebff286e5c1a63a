"""The periodic scheduler: enqueues each slot of every stored periodic schedule once.

Schedules live in the database (issue 13): every worker whose app registers ``@dq.periodic``
schedules stores their definitions (name, cron, time zone, task, the rest as JSON, its code
version; :meth:`Store.define_schedules`) when its scheduler starts, and touches them every
:data:`TOUCH_INTERVAL` seconds while it lives. The leader fires **every stored schedule by
name**, whether or not its own code defines it: during a rolling deploy an older leader
fires the schedule only newer workers know, and the job waits (shown as stranded) for a
worker that knows the task. A schedule no live worker has touched for
:data:`ORPHAN_AFTER` seconds is *orphaned*: reported (event ``periodic_orphaned``,
``durq periodic list``), not fired for ever. When workers disagree on a definition, the
last one to start wins (its registration overwrites the row).

:func:`tick` is the whole algorithm: it reads the stored schedules, computes the slots due
(:meth:`durq.periodic.Periodic.due`) and enqueues each through
:meth:`Store.enqueue_periodic`, which advances the stored last slot with a conditional
update in the same transaction as the insert, and gives the job the unique key
``periodic:<name>:<slot>``. So any number of schedulers may tick at once (two workers, a
stand-in leader and a frozen one that resumes, a restart inside a slot): each slot is
enqueued at most once, and the stored slot never goes back, even after retention has
deleted old jobs and their keys.

:class:`Scheduler` runs :func:`tick` in the worker while the worker leads the duty
``"scheduler"`` (``store.lead``; every SQLite worker does) at least once a second and at
each slot; when it does not lead, it only touches its own schedules.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from durq.checks import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE
from durq.errors import ConfigError, PayloadError
from durq.model import ScheduleDefinition
from durq.observability import events
from durq.periodic import Periodic, code_version, definition_of, from_record, key_for
from durq.task import EnqueueOptions
from durq.worker.service import Service, passing, store_waiting

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.worker.host import WorkerHost

PERIODIC_ENQUEUED = "periodic_enqueued"
PERIODIC_FAILED = "periodic_failed"
PERIODIC_ORPHANED = "periodic_orphaned"

#: The longest the scheduler sleeps between ticks, in seconds (it also wakes at each slot).
MAX_SLEEP = 1.0
#: Seconds between a worker's touches of the stored schedules its code defines.
TOUCH_INTERVAL = 10.0
#: Seconds without a touch after which a stored schedule is orphaned (six missed touches:
#: a worker restarting or a short database outage does not orphan it).
ORPHAN_AFTER = 6 * TOUCH_INTERVAL


@dataclass(frozen=True, slots=True)
class Fired:
    """One slot this tick enqueued: the schedule, the slot (epoch seconds), the job id, and
    whether the job is new (False: a job with the slot's key already existed)."""

    name: str
    slot: float
    job_id: int
    created: bool


@dataclass
class SchedulerState:
    """What one scheduler remembers between ticks.

    Attributes:
        worker_id: recorded as ``defined_by`` with the definitions.
        version: the code version recorded with them (:func:`durq.periodic.code_version`).
        defined: whether this scheduler has stored its app's definitions yet (once; later
            only touches, so that two code versions running side by side do not overwrite
            each other's definition every second).
        touched_at: store time of the last touch.
        reported: orphaned schedules already reported (once each until they come back).
        live: the schedules the last tick fired from (for :func:`seconds_to_next`).
    """

    worker_id: str
    version: str
    defined: bool = False
    touched_at: float = -math.inf
    reported: set[str] = field(default_factory=set)
    live: list[Periodic] = field(default_factory=list)


def own_definitions(app: Registry) -> list[ScheduleDefinition]:
    """The app's schedules as stored, with queue, priority and attempts resolved from
    their task (a schedule's own options first)."""
    out = []
    for p in app.periodics.values():
        task = app.tasks.get(p.task)
        queue = p.queue or (task.queue if task else DEFAULT_QUEUE)
        priority = p.priority if p.priority is not None else (task.priority if task else 0)
        attempts = p.max_attempts or (task.max_attempts if task else DEFAULT_MAX_ATTEMPTS)
        out.append(definition_of(p, queue, priority, attempts))
    return out


def register(app: Registry, state: SchedulerState, now: float) -> None:
    """Store the app's schedules on the first call for ``state``, then touch them every
    :data:`TOUCH_INTERVAL` seconds (``now``: store time)."""
    if not app.periodics:
        return
    if not state.defined:
        app.store.define_schedules(
            own_definitions(app), state.version, state.worker_id, fresh=TOUCH_INTERVAL
        )
        state.defined, state.touched_at = True, now
    elif now - state.touched_at >= TOUCH_INTERVAL or now < state.touched_at:
        app.store.touch_schedules(sorted(app.periodics))
        state.touched_at = now


def tick(app: Registry, state: SchedulerState | None = None) -> list[Fired]:
    """Enqueue the due slots of every stored periodic schedule, once each.

    The app's own schedules are stored first (see :func:`register`; without ``state``
    on every call, which writes only when a definition changed or went stale). A schedule
    stored for the first time is anchored at the current time: its first slot is the next
    one, none before. Returns what this call enqueued (a slot another scheduler enqueued
    first is not listed).

    Raises:
        StoreBusy, StoreUnavailable, StoreError: the store could not be read or written;
            the slots not yet enqueued are enqueued by the next tick.
    """
    st = state or SchedulerState("tick", code_version())
    store = app.store
    now = store.now()
    register(app, st, now)
    fired: list[Fired] = []
    live: list[Periodic] = []
    for r in store.schedules():
        if r.definition is None:  # a row from before stored schedules: nobody defines it
            continue
        if r.seen_at is None or now - r.seen_at > ORPHAN_AFTER:
            if r.name not in st.reported:
                st.reported.add(r.name)
                events.emit(
                    PERIODIC_ORPHANED, logging.WARNING, name=r.name, task=r.task,
                    seen_at=r.seen_at, defined_by=r.defined_by, code_version=r.code_version,
                )  # fmt: skip
            continue
        st.reported.discard(r.name)
        try:
            p = from_record(r)
        except ConfigError as exc:
            events.emit(PERIODIC_FAILED, logging.ERROR, name=r.name, slot=None, error=str(exc))
            continue
        live.append(p)
        for slot in p.due(r.last_slot, now):
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
    st.live = live
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


def seconds_to_next(app: Registry, schedules: list[Periodic] | None = None) -> float:
    """Seconds from now until the next slot of any of ``schedules`` (default: the app's
    own; at most :data:`MAX_SLEEP`)."""
    now = app.store.now()
    fired = list(app.periodics.values()) if schedules is None else schedules
    soonest = min((p.next_slot(now) for p in fired), default=now + MAX_SLEEP)
    return max(0.01, min(MAX_SLEEP, soonest - now))


class Scheduler(Service):
    """The worker's periodic scheduler: :func:`tick` at start, at each slot and at least
    every :data:`MAX_SLEEP` seconds while this process leads the duty ``"scheduler"``;
    otherwise it keeps its app's schedules touched (:func:`register`)."""

    name = "scheduler"

    def __init__(self, worker: WorkerHost) -> None:
        super().__init__(worker)
        self.worker = worker

    def run(self) -> None:

        app = self.worker.app
        state = SchedulerState(self.worker.id, code_version())
        while True:
            wait = MAX_SLEEP
            try:
                if app.store.lead("scheduler", stale_after=5 * MAX_SLEEP):
                    tick(app, state)
                    wait = seconds_to_next(app, state.live)
                else:
                    register(app, state, app.store.now())
            except Exception as exc:
                if not passing(exc):
                    raise
                store_waiting(self.name, exc)
            if self.sleep(wait):
                return
