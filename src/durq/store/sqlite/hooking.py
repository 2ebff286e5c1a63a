"""on_fail hooks on SQLite: the flags set at enqueue and the hook jobs of failed jobs (SQL in
:mod:`.hooks`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from durq.model import HOOK_TASK_PREFIX, Inserted, NewJob, Outcome
from durq.store.sqlite import hooks as hk
from durq.store.sqlite.base import SqliteBase


class HookingMixin(SqliteBase):
    """The hook columns of new jobs, and the hook jobs inserted when jobs fail."""

    @staticmethod
    def _set_hooks(
        conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Store the on_fail flag and hook queue of the new jobs (same transaction)."""
        rows = [
            {"id": ins.id, "on_fail": 1 if job.on_fail else 0, "hook_queue": job.hook_queue}
            for job, ins in zip(jobs, out, strict=True)
            if ins.created and job.has_hooks
        ]
        if rows:
            conn.executemany(hk.SET_HOOKS, rows)

    @staticmethod
    def _fail_hooks(
        conn: sqlite3.Connection,
        ids: Sequence[int],
        now: float,
        flagged: bool,
        tasks: Sequence[str] = (),
    ) -> None:
        """Insert the on_fail hook jobs of the jobs among ``ids`` that are failed now, inside
        the caller's write transaction (the one that failed them)."""
        if not ids:
            return
        from durq.model.jobs import HOOK_MAX_ATTEMPTS

        conn.execute(
            hk.INSERT_FAIL_HOOKS,
            {
                "ids": json.dumps(list(ids)),
                "prefix": HOOK_TASK_PREFIX,
                "now": now,
                "max_attempts": HOOK_MAX_ATTEMPTS,
                "flagged": 1 if flagged else 0,
                "tasks": json.dumps(list(tasks)),
            },
        )

    def _fail_hooks_of(
        self,
        conn: sqlite3.Connection,
        outcomes: Sequence[Outcome],
        applied: Sequence[bool],
        now: float,
    ) -> None:
        """The finish hook: on_fail hook jobs of the marked outcomes that left their job
        failed (a failure, or a retry the store turned into one)."""
        ids = [o.job_id for o, ok in zip(outcomes, applied, strict=True) if ok and o.on_fail]
        self._fail_hooks(conn, ids, now, flagged=False)
