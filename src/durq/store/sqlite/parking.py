"""Parked jobs and deadlines on SQLite: the insert's extra columns, adopt, and the sweep
(SQL in :mod:`.deadlines`)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any

from durq.model import HOOK_TASK_PREFIX, Inserted, NewJob, SweepSummary
from durq.store.sqlite import batches as sb
from durq.store.sqlite import deadlines as dl
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite.base import SqliteBase


class ParkingMixin(SqliteBase):
    """Parked state, adoption, and the sweep of deadlines, park TTLs and slow notices."""

    @staticmethod
    def _set_extras(
        conn: sqlite3.Connection, jobs: Sequence[NewJob], inserted: list[Inserted]
    ) -> list[Inserted]:
        """Parked state and deadline columns of the rows just inserted (same transaction)."""
        for job, ins in zip(jobs, inserted, strict=True):
            if ins.created and job.has_extras:
                conn.execute(
                    dl.SET_EXTRAS,
                    {
                        "id": ins.id,
                        "park": 1 if job.park else 0,
                        "park_ttl": job.park_ttl,
                        "deadline": job.deadline,
                        "deadline_in": job.deadline_in,
                        "notice_after": job.notice_after,
                    },
                )
        return inserted

    def adopt(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():
            cur = conn.execute(dl.ADOPT, {"id": job_id, "now": self.now()})
        return cur.rowcount == 1

    def cancel_parked(self, job_id: int) -> bool:
        conn = self._conn()
        with self._write():  # the cancel and its batch's close commit together
            now = self.now()
            if conn.execute(dl.CANCEL_PARKED, {"id": job_id, "now": now}).rowcount != 1:
                return False
            sb.close_for_jobs(conn, [job_id], now)
            deps.settle(conn, [job_id], now, self.codec, self.payload_limit)
        return True

    def sweep(self, hook_max_attempts: int, limit: int = 500) -> SweepSummary:
        conn = self._conn()
        if not self._read(dl.ANY_DUE, {"now": self.now()})[0][0]:
            return SweepSummary(at=self.now())  # nothing due: no write lock taken
        with self._write():
            now = self.now()
            params: dict[str, Any] = {"now": now, "limit": limit}
            expired: list[int] = []
            conn.execute(dl.HOLD_EXPIRING, params)  # their slots stay held: limits.md
            for statement, message in (
                (dl.EXPIRE_PAST_DEADLINE, "deadline passed before the job finished"),
                (dl.EXPIRE_PARKED, "park TTL passed before the job was adopted"),
            ):
                rows = conn.execute(statement, {**params, "message": message}).fetchall()
                self._insert_hooks(conn, rows, "expire", now, hook_max_attempts)
                expired.extend(r[0] for r in rows)
            sb.close_for_jobs(conn, expired, now)  # same transaction
            deps.settle(conn, expired, now, self.codec, self.payload_limit)
            rows = conn.execute(dl.NOTICE_SLOW, params).fetchall()
            self._insert_hooks(conn, rows, "slow", now, hook_max_attempts)
            noticed = [r[0] for r in rows]
        return SweepSummary(at=now, expired=tuple(sorted(expired)), noticed=tuple(sorted(noticed)))

    @staticmethod
    def _insert_hooks(
        conn: sqlite3.Connection, rows: list[Any], hook: str, now: float, max_attempts: int
    ) -> None:
        conn.executemany(
            dl.INSERT_HOOK,
            [
                {
                    "queue": queue,
                    "task": HOOK_TASK_PREFIX + task,
                    "payload": json.dumps({"job_id": job_id, "hook": hook}),
                    "priority": priority,
                    "now": now,
                    "max_attempts": max_attempts,
                    "key": f"durq.{hook}:{job_id}",
                }
                for job_id, queue, task, priority in rows
            ],
        )
