"""Deadline hooks: how ``on_expire`` and ``on_slow`` run (docs/features/deadlines.md).

The sweeper (:mod:`durq.worker.sweeper`, on the leader) expires overdue jobs and marks slow
ones in one transaction with the insert of one *hook job* per job and hook: task
``durq.hook:<task>`` on the job's queue, payload ``{"job_id": id, "hook": "expire" | "slow"}``,
idempotency key ``durq.expire:<id>`` / ``durq.slow:<id>``. A hook job is an ordinary job:
leased, heartbeated, retried with backoff (up to :data:`HOOK_MAX_ATTEMPTS` attempts) and
recovered by the reaper after a crash. Every worker that runs task ``T`` also runs
``durq.hook:T`` (:func:`install_hooks`), which calls ``T``'s hook with the job.

So each hook is *enqueued* exactly once per job (the key), and *runs* at least once, like
every durq job: a worker killed while a hook runs runs it again after its lease expires.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

from durq.errors import JobNotFound
from durq.model import HOOK_MAX_ATTEMPTS, HOOK_TASK_PREFIX
from durq.retry import as_backoff
from durq.task import Task

if TYPE_CHECKING:
    from durq.registry import Registry

#: Attempts of one hook job (a hook that raises is retried with the default backoff).

HOOKS = ("expire", "slow", "fail")  # "fail": on_fail (durq.hooks)


def hook_task_name(task: str) -> str:
    """The task name of the hook jobs of ``task``."""
    return HOOK_TASK_PREFIX + task


def install_hooks(app: Registry) -> None:
    """Register ``durq.hook:<T>`` for every task ``T`` of ``app`` (called by the worker).

    A task without hooks gets one too: its hook jobs then finish at once with result None,
    so that they never strand (a producer may set ``deadline=`` on any task).
    """
    for name, task in list(app.tasks.items()):
        if name.startswith(HOOK_TASK_PREFIX) or hook_task_name(name) in app.tasks:
            continue
        app.tasks[hook_task_name(name)] = Task(
            app,
            _runner(app, name),
            name=hook_task_name(name),
            queue=task.hook_queue or task.queue,  # hook_queue: see durq.hooks
            max_attempts=HOOK_MAX_ATTEMPTS,
            backoff=as_backoff(None),
            timeout=None,
            priority=task.priority,
            rules=(),
        )


def _runner(app: Registry, task_name: str) -> Any:
    def run_hook(job_id: int, hook: str) -> Any:
        """Call the task's ``on_<hook>`` with the job (its return value is not kept)."""
        if hook not in HOOKS:
            raise ValueError(f"unknown hook {hook!r}; one of {HOOKS}")
        task = app.tasks[task_name]
        fn = {"expire": task.on_expire, "slow": task.on_slow, "fail": task.on_fail}[hook]
        if fn is None:
            return None
        try:
            job = app.get(job_id)
        except JobNotFound:
            return None  # deleted (purged) since: nothing to tell the hook about
        value = fn(job)
        if inspect.isawaitable(value):
            asyncio.run(_await(value))
        return None

    run_hook.__name__ = f"run_hook_{task_name}"
    return run_hook


async def _await(value: Any) -> Any:
    return await value
