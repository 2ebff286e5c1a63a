"""on_fail hooks on PostgreSQL: the flags set at enqueue and the hook jobs of failed
jobs (SQL in :mod:`.hooks`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.model import HOOK_TASK_PREFIX, Inserted, NewJob
from durq.store.postgres import hooks as hk
from durq.store.postgres.base import PostgresBase


class HookingMixin(PostgresBase):
    """The hook columns of new jobs, and the hook jobs inserted when jobs fail."""

    def _set_hooks(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the on_fail flags and hook queues of the new jobs (same transaction)."""
        rows = [
            (ins.id, job)
            for job, ins in zip(jobs, out, strict=True)
            if ins.created and job.has_hooks
        ]
        if not rows:
            return
        conn.execute(
            hk.sql("SET_HOOKS", self.options.schema),
            {
                "ids": [i for i, _ in rows],
                "flags": [job.on_fail for _, job in rows],
                "queues": [job.hook_queue for _, job in rows],
            },
        )

    def _fail_hooks(
        self,
        conn: psycopg.Connection[Any],
        ids: Sequence[int],
        at: float | None,
        flagged: bool,
        tasks: Sequence[str] = (),
    ) -> None:
        """Insert the on_fail hook jobs of the jobs among ``ids`` that are failed now, inside
        the caller's transaction (the one that failed them), and wake their queues."""
        if not ids:
            return
        from durq.model.jobs import HOOK_MAX_ATTEMPTS

        conn.execute(
            hk.sql("INSERT_FAIL_HOOKS", self.options.schema),
            {
                "ids": [int(i) for i in ids],
                "prefix": HOOK_TASK_PREFIX,
                "at": at,
                "max_attempts": HOOK_MAX_ATTEMPTS,
                "flagged": flagged,
                "tasks": list(tasks),
                "channel": self.channel,
            },
        ).fetchall()
