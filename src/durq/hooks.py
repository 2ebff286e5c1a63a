"""``on_fail`` hooks, hook queues and key lookups (docs/features/hooks.md).

A task registered with ``@dq.task(on_fail=fn)`` gets ``fn(job)`` run once a job of it ends
``failed``, by any path. Like the deadline hooks (:mod:`durq.deadlines`) it runs as a *hook
job*: task ``durq.hook:<task>``, payload ``{"job_id": id, "hook": "fail"}``, idempotency key
``durq.fail:<id>``, inserted **in the transaction that fails the job**:

- the worker's finish (a permanent error, retries exhausted, a timeout on the last attempt,
  and a retry the store turns into a failure because no attempts are left): the worker
  marks the outcomes of its tasks that have ``on_fail`` (:func:`mark_outcome`), and the store
  inserts the hook job for each marked outcome that left its job ``failed``. Outcomes of
  other tasks are not marked and cost nothing;
- the reaper (a lease lost with no attempts left) and a charged shutdown release, rare
  paths: a job gets its hook job when the ``on_fail`` flag was stored on it at enqueue
  (:func:`with_hooks`: the producer had the task registered) or when the worker running the
  reaper / the release has the task with ``on_fail`` (:func:`fail_tasks`). A job enqueued
  by name by a producer without the task, and reaped by a process without it either (a
  PostgreSQL leader of another app), gets no hook job.

``hook_queue=`` on the task (stored on the job as ``hook_queue``) is the queue of all its hook
jobs (``on_expire``, ``on_slow``, ``on_fail``), so hooks still run while the task's queue is
paused. The worker serves it (the hook task is registered on it).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from durq.model import NewJob, Outcome

if TYPE_CHECKING:
    from durq.registry import Registry
    from durq.task import Task

#: The hook name in a hook job's payload.
FAIL = "fail"


def fail_key(job_id: int) -> str:
    """The idempotency key of the ``on_fail`` hook job of job ``job_id`` (on its hook queue)."""
    return f"durq.{FAIL}:{int(job_id)}"


def with_hooks(new: NewJob, task: Task[Any, Any] | None) -> NewJob:
    """``new`` with its task's ``on_fail`` flag and ``hook_queue`` (unchanged without them).

    A producer that does not have the task registered stores neither: its job's hook jobs go
    to the job's own queue, and only the worker's finish path (not the reaper) knows that
    the task has ``on_fail``."""
    if task is None or (task.on_fail is None and task.hook_queue is None):
        return new
    return replace(new, on_fail=task.on_fail is not None, hook_queue=task.hook_queue)


def fail_tasks(app: Registry) -> list[str]:
    """The names of ``app``'s tasks that have ``on_fail`` (the reaper's hook: jobs of these
    tasks that it fails get their hook job even when their producer did not know the task)."""
    return sorted(name for name, task in app.tasks.items() if task.on_fail is not None)


def mark_outcome(app: Registry, task_name: str, outcome: Outcome) -> Outcome:
    """The worker's hook: mark a failure or a retry of a task with ``on_fail`` so that the
    store inserts its hook job when the outcome leaves the job ``failed``. Successes and
    tasks without ``on_fail`` pass unchanged."""
    if outcome.kind == "succeeded" or outcome.on_fail:
        return outcome
    task = app.tasks.get(task_name)
    if task is None or task.on_fail is None:
        return outcome
    return replace(outcome, on_fail=True)
