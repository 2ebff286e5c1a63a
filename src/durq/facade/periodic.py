"""PeriodicFacade: cron schedules (``@dq.periodic(...)``, ``dq.periodics``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

from durq.checks import DEFAULT_QUEUE, _as_dict, _check_name, _is_number
from durq.errors import ConfigError, PayloadError
from durq.facade.base import FacadeBase
from durq.periodic import DEFAULT_GRACE, Periodic
from durq.task import EnqueueOptions, Task


class PeriodicFacade(FacadeBase):
    """Periodic schedules: a mixin of :class:`durq.Durq`."""

    @property
    def periodics(self) -> dict[str, Periodic]:
        """The periodic schedules registered with :meth:`periodic`, by name."""
        registry: dict[str, Periodic] = self.__dict__.setdefault("_periodics", {})
        return registry

    def periodic(
        self,
        cron: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        payload: Mapping[str, Any] | None = None,
        queue: str | None = None,
        priority: int | None = None,
        max_attempts: int | None = None,
        catch_up: int = 1,
        grace: float = DEFAULT_GRACE,
        slot_arg: str | None = None,
    ) -> Callable[[Callable[..., Any] | Task[Any, Any]], Task[Any, Any]]:
        """Run a task on a cron schedule: ``@dq.periodic("*/5 * * * *", tz="Europe/Berlin")``.

        Put it above ``@dq.task(...)`` to schedule a task with its own options, or use it
        alone on a plain function, which is then registered as a task with the defaults
        (and ``queue``). It returns the :class:`Task`, so both forms can still be enqueued
        by hand. A task may carry several schedules (give each a ``name``).

        Each *slot* (occurrence) is enqueued once, by the scheduler in the worker (the
        elected leader; on SQLite every worker, harmlessly), as a job with ``run_at`` = the
        slot, the key ``periodic:<name>:<slot epoch seconds>`` and
        ``meta={"periodic": name, "slot": epoch}``. The last slot enqueued is stored per
        schedule and only moves forward, in the same transaction as the job. A schedule seen
        for the first time starts with the next slot. For daylight-saving changes see
        :mod:`durq.periodic`.

        Args:
            cron: croniter syntax, ``minute hour day month weekday``, an optional 6th field
                for seconds, or an alias such as ``@hourly``.
            tz: the IANA time zone the expression is read in (default ``UTC``).
            name: the schedule's unique name (default: the task name). Renaming a schedule
                starts it afresh.
            payload: the task's keyword arguments for every job (JSON).
            queue, priority, max_attempts: job options (default: the task's).
            catch_up: after the scheduler was down, enqueue at most this many missed slots,
                the latest ones (default 1; 0 skips missed slots).
            grace: seconds a slot may be late and still count as on time rather than
                missed (default 60).
            slot_arg: when given, each job also receives its slot's epoch seconds (an int)
                as this keyword argument.

        Raises:
            ConfigError: an invalid cron expression or time zone, a bad option, or another
                schedule already registered under ``name``.
            PayloadError: ``payload`` is not JSON or does not fit the task's signature.
        """

        def register(target: Callable[..., Any] | Task[Any, Any]) -> Task[Any, Any]:
            if payload is not None and not isinstance(payload, Mapping):
                raise PayloadError(f"payload must be a dict, not {type(payload).__name__}")
            known = set(self.tasks)
            task = (
                target
                if isinstance(target, Task)
                else self.task(queue=queue or DEFAULT_QUEUE)(target)
            )
            try:
                return self._add_periodic(
                    task,
                    cron,
                    tz,
                    name,
                    payload,
                    queue,
                    priority,
                    max_attempts,
                    catch_up,
                    grace,
                    slot_arg,
                )
            except BaseException:
                if task.name not in known:  # a refused schedule leaves no task behind
                    self.tasks.pop(task.name, None)
                raise

        return register

    def _add_periodic(
        self,
        task: Task[Any, Any],
        cron: str,
        tz: str,
        name: str | None,
        payload: Mapping[str, Any] | None,
        queue: str | None,
        priority: int | None,
        max_attempts: int | None,
        catch_up: int,
        grace: float,
        slot_arg: str | None,
    ) -> Task[Any, Any]:
        """Check and record one schedule of :meth:`periodic` (see there for the arguments)."""
        if task.app is not cast(object, self):
            raise ConfigError(f"task {task.name!r} is registered with another Durq app")
        schedule = Periodic(
            name=_check_name("periodic name", name or task.name),
            cron=cron,
            tz=tz,
            task=task.name,
            payload=_as_dict(payload or {}, "payload"),
            queue=queue,
            priority=priority,
            max_attempts=max_attempts,
            catch_up=catch_up,
            grace=float(grace) if _is_number(grace) else grace,
            slot_arg=slot_arg,
        )
        # the jobs it will make must be valid now, not at the first slot
        key = f"periodic:{schedule.name}:0"
        opts = EnqueueOptions(queue, None, 0.0, priority, key, max_attempts, None, None)
        self._with_payload(self._template(task.name, opts, task), schedule.job_payload(0), key)
        existing = self.periodics.get(schedule.name)
        if existing is not None and existing != schedule:
            raise ConfigError(f"a periodic schedule named {schedule.name!r} already exists")
        self.periodics[schedule.name] = schedule
        return task
