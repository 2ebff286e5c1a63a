"""DeadlinesFacade: parked jobs and deadlines (``dq.adopt()``, ``dq.sweep()``, and the
checks of the task and enqueue options they add)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from durq.checks import _as_id, _check_seconds, _point_in_time
from durq.errors import ConfigError, JobGone
from durq.facade.base import FacadeBase
from durq.job import Job
from durq.model import Inserted, JobRecord, NewJob, SweepSummary
from durq.task import EnqueueOptions, Task


class DeadlinesFacade(FacadeBase):
    """Parked jobs and deadlines: a mixin of :class:`durq.Durq`."""

    def adopt(self, job_id: int) -> Job:
        """Move a parked job to the queue: it runs now (or at its ``run_at`` if that is
        later). Of ``adopt(id)`` and ``cancel(id, parked_only=True)`` racing on one parked job
        exactly one wins (each is one conditional UPDATE on ``state = 'parked'``); the other
        raises :class:`durq.JobGone`.

        Returns:
            The job as stored after the change (``queued`` or ``scheduled``).

        Raises:
            JobNotFound: no such job.
            JobGone: the job is not parked (adopted, cancelled or expired already), or its
                park TTL or deadline has passed (the sweeper expires it); nothing changed.
        """
        if not self.store.adopt(_as_id("job id", job_id)):
            job = self.get(job_id)
            if job.state == "parked":
                raise JobGone(f"job {job_id} is past its park TTL or deadline; it is expiring")
            raise JobGone(f"job {job_id} is {job.state}, not parked; it cannot be adopted")
        return self.get(job_id)

    def sweep(self, limit: int = 500) -> SweepSummary:
        """Run one deadline sweeper pass now (workers run it on the leader every
        ``sweep_interval``); see :meth:`durq.store.base.Store.sweep` for what it does.

        Args:
            limit: at most this many jobs per step (expire, expire parked, notice).

        Returns:
            A :class:`durq.model.SweepSummary` with the expired and noticed job ids.

        Raises:
            StoreBusy, StoreError: the database could not be written.
        """
        from durq.model.jobs import HOOK_MAX_ATTEMPTS

        return self.store.sweep(HOOK_MAX_ATTEMPTS, limit)

    @staticmethod
    def _deadline_defaults(
        deadline_in: float | None,
        notice_after: float | None,
        on_expire: Callable[[Job], Any] | None,
        on_slow: Callable[[Job], Any] | None,
    ) -> dict[str, Any]:
        """Checked task defaults for deadlines (keyword arguments of :class:`Task`)."""
        for what, value in (("deadline_in", deadline_in), ("notice_after", notice_after)):
            _check_seconds(what, value)
        for what, hook in (("on_expire", on_expire), ("on_slow", on_slow)):
            if hook is not None and not callable(hook):
                raise ConfigError(f"{what} must be a callable fn(job), not {hook!r}")
        return {
            "deadline_in": None if deadline_in is None else float(deadline_in),
            "notice_after": None if notice_after is None else float(notice_after),
            "on_expire": on_expire,
            "on_slow": on_slow,
        }

    @staticmethod
    def _parked_deadline_fields(
        opts: EnqueueOptions, task: Task[Any, Any] | None
    ) -> dict[str, Any]:
        """Checked parked / deadline options of one enqueue (fields of :class:`NewJob`);
        empty when there are none."""
        if not isinstance(opts.park, bool):
            raise ConfigError(f"park must be True or False, not {opts.park!r}")
        _check_seconds("park_ttl", opts.park_ttl)
        if opts.park_ttl is not None and not opts.park:
            raise ConfigError("park_ttl is only for parked jobs (give park=True)")
        _check_seconds("deadline_in", opts.deadline_in)
        _check_seconds("notice_after", opts.notice_after)
        if opts.deadline is not None and opts.deadline_in is not None:
            raise ConfigError("give deadline (a point in time) or deadline_in (seconds), not both")
        deadline = _point_in_time("deadline", opts.deadline)
        deadline_in = opts.deadline_in
        if deadline is None and deadline_in is None and task is not None:
            deadline_in = task.deadline_in
        notice_after = opts.notice_after
        if notice_after is None and task is not None:
            notice_after = task.notice_after
        if not opts.park and deadline is None and deadline_in is None and notice_after is None:
            return {}
        return {
            "park": opts.park,
            "park_ttl": None if opts.park_ttl is None else float(opts.park_ttl),
            "deadline": deadline,
            "deadline_in": None if deadline_in is None else float(deadline_in),
            "notice_after": None if notice_after is None else float(notice_after),
        }

    @staticmethod
    def _record_extras(record: JobRecord, new: NewJob, ins: Inserted) -> JobRecord:
        """The row as the store wrote it: the same arithmetic as its SET_EXTRAS statement."""
        created = ins.created_at
        if new.park:
            record.state = "parked"
        if new.park_ttl is not None:
            record.park_expires_at = created + new.park_ttl
        if new.deadline is not None:
            record.deadline = new.deadline
        elif new.deadline_in is not None:
            record.deadline = created + new.deadline_in
        if new.notice_after is not None:
            record.notice_at = created + new.notice_after
        return record


def check_due_before_expiry(
    now: Callable[[], float], delay: float, run_at: float | None, fields: Mapping[str, Any]
) -> None:
    """Refuse a job scheduled to become due only at or after its own deadline: it would
    expire without ever running. ``delay`` (seconds) or ``run_at`` (epoch seconds) is when
    it is due; ``fields`` are :meth:`DeadlinesFacade._parked_deadline_fields`'s; ``now``
    the store's clock (read only when the job has a deadline and a run time). A job due
    now is not checked (one enqueued past its deadline expires at once, as documented in
    docs/features/deadlines.md).

    Raises:
        ConfigError: the job would be due at or after its deadline.
    """
    deadline, deadline_in = fields.get("deadline"), fields.get("deadline_in")
    if deadline is None and deadline_in is None:
        return
    if run_at is None and delay <= 0:
        return
    at = now()
    due = at + delay if run_at is None else run_at
    if due <= at:
        return
    if deadline_in is not None:
        expires, said = at + deadline_in, f"deadline_in={deadline_in:g} s after it is enqueued"
    else:
        expires, said = deadline, f"deadline at {deadline:.3f} (epoch seconds)"
    if due >= expires:
        when = f"delay={delay:g} s" if run_at is None else f"run_at {run_at:.3f} (epoch seconds)"
        raise ConfigError(
            f"the job would expire before it is due: it is due at {when}, and its {said}; "
            "nothing was enqueued (give a later deadline or an earlier run time)"
        )
