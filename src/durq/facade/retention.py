"""RetentionFacade: results, retention and steps (``dq.running_progress()``, ``dq.prune()``,
``dq.steps()``, ``dq.clear_steps()``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from durq.checks import _as_id, _check_name
from durq.errors import JobGone
from durq.facade.base import FacadeBase
from durq.job import Job
from durq.model.steps import StepRecord


class RetentionFacade(FacadeBase):
    """Results, retention and steps: a mixin of :class:`durq.Durq`."""

    def running_progress(self, limit: int = 20) -> list[dict[str, Any]]:
        """The running jobs (newest first, at most ``limit``) with the progress their
        tasks last reported: ``[{"id", "queue", "task", "attempt", "started_at",
        "worker_id", "progress"}]`` where ``progress`` is ``{"fraction", "message", ...}``
        or None. Part of :meth:`status` (key ``running``)."""
        return [
            {
                "id": j.id,
                "queue": j.queue,
                "task": j.task,
                "attempt": j.attempts,
                "started_at": j.started_at,
                "worker_id": j.worker_id,
                "progress": j.progress,
            }
            for j in (Job(self.store, r) for r in self.store.running_jobs(limit))
        ]

    def prune(
        self,
        older_than: float | str | Mapping[str, float | str | None] | None = None,
        *,
        states: Sequence[str] | None = None,
        queue: str | None = None,
        chunk: int = 1000,
    ) -> int:
        """Delete finished jobs (succeeded, failed, cancelled, expired) whose
        ``finished_at`` is older than a cutoff, with their steps. Returns how many. Then
        forget the fair-claim turns of fair keys (of ``queue``, or of every queue) that have
        no live job left (``chunk`` rows looked at per transaction; a key used again later
        starts as a new key: docs/features/fairness.md).

        Queued, scheduled and running jobs are never deleted, whatever the arguments: the
        store's delete statement itself only matches the four terminal states. Deletion
        goes ``chunk`` rows per transaction, so a big prune does not hold SQLite's write
        lock for long. Ages are measured on the store's clock (PostgreSQL: the database's).

        Args:
            older_than: seconds (or ``"7d"``-style text: s, m, h, d, w) for every chosen
                state; or a dict ``{state: seconds | None}`` (None keeps that state); or
                None for the worker's defaults (succeeded 7 days, failed, cancelled and
                expired 30 days: :data:`durq.retention.DEFAULT_RETENTION`).
            states: only these terminal states (default: all that ``older_than`` covers).
            queue: only this queue (default: every queue).
            chunk: rows deleted per transaction (>= 1).

        Raises:
            ConfigError: a state that is not terminal or unknown, a bad age or chunk.
            StoreBusy, StoreError: the database could not be written; chunks already
                deleted stay deleted.
        """
        from durq.retention import policy, prune, prune_fair_turns

        if queue is not None:
            _check_name("queue", queue)
        counts = prune(self.store, policy(older_than, states), queue, chunk)
        prune_fair_turns(self.store, queue, chunk)
        return sum(counts.values())

    def steps(self, job_id: int) -> list[StepRecord]:
        """The steps a job recorded with ``ctx.step``, oldest first
        (:class:`durq.steps.StepRecord`: name, result JSON, attempt, created_at).

        Raises:
            JobNotFound: no such job.
        """
        found = self.store.list_steps(_as_id("job id", job_id))
        if not found:
            self.get(job_id)  # JobNotFound when the job does not exist
        return found

    def clear_steps(self, job_id: int) -> int:
        """Forget a job's recorded steps, so that its next run (e.g. after :meth:`retry`,
        which keeps them and resumes) runs every step again. Returns how many.

        Raises:
            JobNotFound: no such job.
            JobGone: the job is running (its attempt may be using them); nothing changed.
        """
        n = self.store.clear_steps(_as_id("job id", job_id))
        if n == 0:
            job = self.get(job_id)
            if job.state == "running":
                raise JobGone(f"job {job_id} is running; its steps cannot be cleared now")
        return n
