"""Steps and retention on PostgreSQL: ``ctx.step`` records, pruning, running jobs (SQL
in :mod:`.steps`)."""

from __future__ import annotations

from typing import Any

from durq.model import JobRecord
from durq.model.steps import StepRecord
from durq.store.postgres import steps as steps_sql
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render


class SteppingMixin(PostgresBase):
    """Step records of a job, and the retention deletes."""

    def _steps_sql(self, name: str) -> Any:
        key = f"steps.{name}"  # rendered once, like queries.py's statements
        if key not in self._sql:
            self._sql[key] = render(getattr(steps_sql, name), self.options.schema)
        return self._sql[key]

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        """A step's stored result (JSON text, or None) and whether ``token`` holds the lease."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(
                self._steps_sql("STEP_STATE"), {"job_id": job_id, "token": token, "name": name}
            ).fetchone()
        assert row is not None
        return row[0], bool(row[1])

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        """Record a step under the lease ``token``; False when the lease is not held or
        the name is already recorded (the stored row is kept)."""
        params = {"at": self._at(), "job_id": job_id, "token": token, "name": name}
        params["result"] = result
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("SAVE_STEP"), params).rowcount == 1

    def list_steps(self, job_id: int) -> list[StepRecord]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._steps_sql("LIST_STEPS"), {"job_id": job_id}).fetchall()
        return [StepRecord(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    def clear_steps(self, job_id: int) -> int:
        """Delete a job's steps unless it is running; the count deleted."""
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("CLEAR_STEPS"), {"job_id": job_id}).rowcount

    def prune_jobs(self, state: str, older_than: float, queue: str | None, limit: int) -> int:
        """Delete up to ``limit`` jobs in terminal ``state`` finished more than
        ``older_than`` seconds ago on the database clock (one statement); the count."""
        params = {
            "at": self._at(),
            "state": state,
            "older_than": float(older_than),
            "queue": queue,
            "limit": int(limit),
        }
        with self._tx(transaction=False) as conn:
            return conn.execute(self._steps_sql("PRUNE_JOBS"), params).rowcount

    def running_jobs(self, limit: int) -> list[JobRecord]:
        """Up to ``limit`` running jobs, newest first (for status: their progress)."""
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._steps_sql("RUNNING_JOBS"), {"limit": int(limit)}).fetchall()
        return [JobRecord(*r) for r in rows]
