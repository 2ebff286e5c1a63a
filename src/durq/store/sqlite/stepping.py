"""Steps and retention on SQLite: ``ctx.step`` records, pruning, running jobs (SQL in
:mod:`.steps`)."""

from __future__ import annotations

from typing import Any

from durq.model import JobRecord
from durq.model.steps import StepRecord
from durq.store.sqlite import steps as s
from durq.store.sqlite.base import SqliteBase


class SteppingMixin(SqliteBase):
    """Step records of a job, and the retention deletes."""

    def step_state(self, job_id: int, token: int, name: str) -> tuple[str | None, bool]:
        """A step's stored result (JSON text, or None) and whether ``token`` holds the lease."""
        row = self._read(s.STEP_STATE, {"job_id": job_id, "token": token, "name": name})[0]
        return row[0], bool(row[1])

    def save_step(self, job_id: int, token: int, name: str, result: str) -> bool:
        """Record a step under the lease ``token``; False when the lease is not held or
        the name is already recorded (the stored row is kept)."""
        conn = self._conn()
        params = {"job_id": job_id, "token": token, "name": name, "result": result}
        with self._write():
            params["now"] = self.now()
            cur = conn.execute(s.SAVE_STEP, params)
        return cur.rowcount == 1

    def list_steps(self, job_id: int) -> list[StepRecord]:
        rows = self._read(s.LIST_STEPS, {"job_id": job_id})
        return [StepRecord(r[0], r[1], int(r[2]), float(r[3])) for r in rows]

    def clear_steps(self, job_id: int) -> int:
        """Delete a job's steps unless it is running; the count deleted."""
        conn = self._conn()
        with self._write():
            cur = conn.execute(s.CLEAR_STEPS, {"job_id": job_id})
        return cur.rowcount

    def prune_jobs(self, state: str, older_than: float, queue: str | None, limit: int) -> int:
        """Delete up to ``limit`` jobs in terminal ``state`` finished more than
        ``older_than`` seconds ago (one write transaction); the count deleted."""
        conn = self._conn()
        params: dict[str, Any] = {
            "state": state,
            "older_than": float(older_than),
            "queue": queue,
            "limit": int(limit),
        }
        with self._write():
            params["now"] = self.now()
            cur = conn.execute(s.PRUNE_JOBS, params)
        return cur.rowcount

    def running_jobs(self, limit: int) -> list[JobRecord]:
        """Up to ``limit`` running jobs, newest first (for status: their progress)."""
        return [JobRecord(*r) for r in self._read(s.RUNNING_JOBS, {"limit": int(limit)})]
