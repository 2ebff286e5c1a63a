"""The stored periodic schedule: what a worker registered, and where its slots stand."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """One schedule as a worker registers it in the store.

    Attributes:
        name: the schedule's unique name.
        cron: the cron expression (croniter syntax).
        tz: the IANA time zone it is read in.
        task: the task's routing name.
        definition: JSON text of the rest (payload, queue, priority, max_attempts,
            catch_up, grace, slot_arg); see :func:`durq.periodic.to_definition`.
    """

    name: str
    cron: str
    tz: str
    task: str
    definition: str


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """One row of the ``periodic`` table.

    Attributes:
        name: the schedule's name.
        last_slot: the last slot enqueued (epoch seconds; the anchor before the first).
        job_id: the job of the last slot, or None.
        cron, tz, task, definition: as last registered, or None for a row written by a
            durq older than stored schedules (not fired until registered again).
        code_version: the registering worker's code version, or None.
        defined_by: the registering worker's id, or None.
        seen_at: the last time (store clock, epoch seconds) a worker that defines it
            touched it, or None.
    """

    name: str
    last_slot: float
    job_id: int | None
    cron: str | None
    tz: str | None
    task: str | None
    definition: str | None
    code_version: str | None
    defined_by: str | None
    seen_at: float | None
