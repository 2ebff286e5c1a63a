"""Periodic jobs: a cron expression in a time zone, turned into slots (instants) to enqueue.

A *slot* is one occurrence of a schedule, as whole seconds since the epoch. The scheduler
(:mod:`durq.worker.scheduler`) enqueues each slot once; this module only does the arithmetic,
with no I/O, so that every scheduler (and the tests) computes the same slots.

Daylight saving (the policy, tested in ``tests/conformance/test_periodic.py``):

- **Clocks go forward** (a wall time that does not exist, e.g. 02:30 in Europe/Berlin on
  the last Sunday of March): croniter moves such an occurrence to the first instant after
  the gap (03:00 local); durq keeps that, so a daily 02:30 job fires once that day, at
  03:00 local, and is not skipped. Schedules that name no hour (``*/15 * * * *``,
  ``0 * * * *``) fire once per real slot, so an hourly job fires 23 times that day.
- **Clocks go back** (a wall time that happens twice): a schedule that names its hours
  (``30 2 * * *``, ``0 1-3 * * *``) fires at the *first* occurrence only; croniter alone
  would fire it twice. A schedule whose hour field is ``*`` fires in both passes, because
  each is a real elapsed slot: an hourly job fires 25 times that day. This is Vixie cron's
  rule for "fixed-time" and "wildcard" jobs.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from durq.errors import ConfigError
from durq.model import ScheduleDefinition, ScheduleRecord

#: Seconds a slot may be late and still count as on time (not missed); see ``grace``.
DEFAULT_GRACE = 60.0

#: The most slots one look-back examines: a bound for absurd catch_up values.
MAX_SCAN = 100_000

#: The variable a deployment sets to name its code version (a git sha, a release); stored
#: with each schedule a worker registers, and shown by ``durq periodic list``.
CODE_VERSION_ENV = "DURQ_CODE_VERSION"


def code_version() -> str:
    """This process's code version: ``$DURQ_CODE_VERSION``, else ``durq <version>``."""
    given = os.environ.get(CODE_VERSION_ENV, "").strip()
    if given:
        return given[:200]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"durq {version('durq')}"
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "durq (unknown version)"


def key_for(name: str, slot: float) -> str:
    """The idempotency key of one slot's job: ``periodic:<name>:<slot epoch seconds>``."""
    return f"periodic:{name}:{int(slot)}"


def zone(tz: str) -> ZoneInfo:
    """The IANA time zone ``tz`` (e.g. ``"Europe/Berlin"``).

    Raises:
        ConfigError: no such zone (on Windows, install ``tzdata``: durq depends on it there).
    """
    if not isinstance(tz, str) or not tz:
        raise ConfigError(f"tz must be an IANA time zone name such as 'Europe/Berlin', not {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(f"unknown time zone {tz!r}: {exc}") from None


def check_cron(cron: str) -> None:
    """Raise ConfigError unless ``cron`` is a croniter expression (5 fields, or 6 with
    seconds last, or an alias such as ``@hourly``)."""
    if not isinstance(cron, str) or not cron.strip() or not croniter.is_valid(cron):
        raise ConfigError(
            f"invalid cron expression {cron!r} (minute hour day month weekday [second])"
        )
    # croniter accepts dates that do not exist (``0 0 31 2 *``) and only fails when asked
    # for a slot: in the worker's scheduler, which then crashed the worker at every start.
    start = datetime.now(UTC)
    try:
        croniter(cron, start).get_next(datetime)
        croniter(cron, start).get_prev(datetime)
    except CroniterBadDateError:
        raise ConfigError(f"cron expression {cron!r} never matches a date") from None


@dataclass(frozen=True)
class Periodic:
    """One periodic schedule: which task to enqueue, when, and how to treat missed slots.

    Attributes:
        name: unique per app; part of every slot's idempotency key and of the stored
            last-slot row, so renaming a schedule starts it afresh.
        cron: the cron expression (croniter syntax; a 6th field is seconds).
        tz: the IANA time zone the expression is read in.
        task: the task's routing name.
        payload: the keyword arguments of each job (JSON).
        queue, priority, max_attempts: per-job options; None means the task's default.
        catch_up: how many missed slots to enqueue when the scheduler was down (the latest
            ones); 0 enqueues none.
        grace: seconds a slot may be late and still count as on time rather than missed.
        slot_arg: when set, each job gets the slot's epoch seconds as this keyword argument.
    """

    name: str
    cron: str
    tz: str
    task: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    max_attempts: int | None = None
    catch_up: int = 1
    grace: float = DEFAULT_GRACE
    slot_arg: str | None = None

    def __post_init__(self) -> None:
        check_cron(self.cron)
        zone(self.tz)
        if not isinstance(self.catch_up, int) or isinstance(self.catch_up, bool):
            raise ConfigError(f"catch_up must be an int >= 0, not {self.catch_up!r}")
        if self.catch_up < 0:
            raise ConfigError(f"catch_up must be >= 0, not {self.catch_up}")
        if not (isinstance(self.grace, int | float) and math.isfinite(self.grace)) or (
            self.grace < 0
        ):
            raise ConfigError(f"grace must be a number of seconds >= 0, not {self.grace!r}")

    @cached_property
    def tzinfo(self) -> ZoneInfo:
        return zone(self.tz)

    @cached_property
    def fixed_hours(self) -> bool:
        """True when the hour field names hours (not ``*``): such a schedule fires only at
        the first of two identical wall times when clocks go back."""
        hours = croniter(self.cron).expanded[1]
        return not (hours == ["*"] or set(hours) >= set(range(24)))

    def job_payload(self, slot: float) -> dict[str, Any]:
        """The payload of the job for ``slot``."""
        body = dict(self.payload)
        if self.slot_arg is not None:
            body[self.slot_arg] = int(slot)
        return body

    def counts(self, slot: float) -> bool:
        """False for the second pass of a repeated wall time when the hours are fixed."""
        if not self.fixed_hours:
            return True
        tz = self.tzinfo
        wall = datetime.fromtimestamp(slot, tz).replace(tzinfo=None)
        first = wall.replace(tzinfo=tz, fold=0).timestamp()
        second = wall.replace(tzinfo=tz, fold=1).timestamp()
        return not (first < second and abs(slot - second) < 0.5)

    def next_slot(self, after: float) -> float:
        """The first slot strictly after ``after`` (epoch seconds)."""
        it = croniter(self.cron, datetime.fromtimestamp(math.floor(after), self.tzinfo))
        for _ in range(MAX_SCAN):
            slot = float(it.get_next(datetime).timestamp())
            if slot > after and self.counts(slot):
                return slot
        raise ConfigError(f"{self.cron!r} has no slot after {after}")  # pragma: no cover

    def due(self, last: float, now: float) -> list[float]:
        """The slots to enqueue now, in order, given the last slot already enqueued.

        Every slot in ``(last, now]`` is *on time* when at most ``grace`` seconds old, else
        *missed*. All on-time slots are returned, plus the latest ``catch_up`` missed ones.
        The look-back walks backwards from ``now``, so a scheduler that was down for a year
        costs ``catch_up`` steps, not a year of slots.

        Args:
            last: the stored last slot (epoch seconds); slots at or before it are done.
            now: the current time (epoch seconds).
        """
        it = croniter(self.cron, datetime.fromtimestamp(math.floor(now) + 1, self.tzinfo))
        on_time: list[float] = []
        missed: list[float] = []
        previous = math.inf
        for _ in range(MAX_SCAN):
            slot = float(it.get_prev(datetime).timestamp())
            if slot <= last or slot >= previous:
                break
            previous = slot
            if not self.counts(slot):
                continue
            if now - slot <= self.grace:
                on_time.append(slot)
            elif len(missed) < self.catch_up:
                missed.append(slot)
            else:
                break
        return sorted(on_time + missed)


def definition_of(p: Periodic, queue: str, priority: int, max_attempts: int) -> ScheduleDefinition:
    """What a worker stores of ``p``: its cron, zone and task, and the rest as JSON, with
    the queue, priority and attempts resolved from the defining worker's task, so that a
    leader that does not know the task makes the same job."""
    rest = {
        "payload": dict(p.payload),
        "queue": queue,
        "priority": priority,
        "max_attempts": max_attempts,
        "catch_up": p.catch_up,
        "grace": p.grace,
        "slot_arg": p.slot_arg,
    }
    return ScheduleDefinition(p.name, p.cron, p.tz, p.task, json.dumps(rest, sort_keys=True))


def from_record(r: ScheduleRecord) -> Periodic:
    """The schedule a stored row defines.

    Raises:
        ConfigError: a row with no definition (written by an older durq), or one this
            durq cannot read (a bad cron or zone, a malformed definition).
    """
    if r.definition is None or r.cron is None or r.tz is None or r.task is None:
        raise ConfigError(f"periodic schedule {r.name!r} has no stored definition")
    try:
        rest = json.loads(r.definition)
        return Periodic(
            name=r.name,
            cron=r.cron,
            tz=r.tz,
            task=r.task,
            payload=dict(rest.get("payload") or {}),
            queue=rest.get("queue"),
            priority=rest.get("priority"),
            max_attempts=rest.get("max_attempts"),
            catch_up=int(rest.get("catch_up", 1)),
            grace=float(rest.get("grace", DEFAULT_GRACE)),
            slot_arg=rest.get("slot_arg"),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise ConfigError(f"periodic schedule {r.name!r}: unreadable definition: {exc}") from None
