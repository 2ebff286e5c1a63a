"""Parked jobs and deadlines on PostgreSQL: the insert's extra columns, adopt, and the
sweep (SQL in :mod:`.deadlines`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from durq.model import HOOK_TASK_PREFIX, Inserted, NewJob, SweepSummary
from durq.store.postgres import deadlines as dl
from durq.store.postgres.base import PostgresBase


class ParkingMixin(PostgresBase):
    """Parked state, adoption, and the sweep of deadlines, park TTLs and slow notices."""

    def _set_extras(
        self, conn: psycopg.Connection[Any], jobs: Sequence[NewJob], inserted: list[Inserted]
    ) -> list[Inserted]:
        """Parked state and deadline columns of the rows just inserted (same transaction)."""
        for job, ins in zip(jobs, inserted, strict=True):
            if ins.created and job.has_extras:
                conn.execute(
                    dl.sql("SET_EXTRAS", self.options.schema),
                    {
                        "id": ins.id,
                        "park": job.park,
                        "park_ttl": job.park_ttl,
                        "deadline": job.deadline,
                        "deadline_in": job.deadline_in,
                        "notice_after": job.notice_after,
                    },
                )
        return inserted

    def adopt(self, job_id: int) -> bool:
        with self._tx(transaction=False) as conn:
            cur = conn.execute(
                dl.sql("ADOPT", self.options.schema), {"at": self._at(), "id": job_id}
            )
            return cur.rowcount == 1

    def cancel_parked(self, job_id: int) -> bool:
        at = self._at()
        with self._tx() as conn:  # the cancel and its batch's close commit together
            cur = conn.execute(
                dl.sql("CANCEL_PARKED", self.options.schema), {"at": at, "id": job_id}
            )
            if cur.rowcount != 1:
                return False
            self._batches.close_for_jobs(conn, [job_id], at)
            self._deps.settle(conn, [job_id], at)
            return True

    def sweep(self, hook_max_attempts: int, limit: int = 500) -> SweepSummary:
        schema = self.options.schema
        params: dict[str, Any] = {
            "at": self._at(),
            "limit": limit,
            "prefix": HOOK_TASK_PREFIX,
            "max_attempts": hook_max_attempts,
        }
        expired: list[int] = []
        queues: set[str] = set()
        with self._tx() as conn:
            row = conn.execute(self._sql["CLOCK"], {"at": params["at"]}).fetchone()
            now = float(row[0]) if row else self.now()
            for name, message in (
                ("EXPIRE_PAST_DEADLINE", "deadline passed before the job finished"),
                ("EXPIRE_PARKED", "park TTL passed before the job was adopted"),
            ):
                cur = conn.execute(dl.sql(name, schema), {**params, "message": message})
                for job_id, queue in cur.fetchall():
                    expired.append(int(job_id))
                    queues.add(queue)
            self._batches.close_for_jobs(conn, expired, params["at"])  # same transaction
            self._deps.settle(conn, expired, params["at"])
            rows = conn.execute(dl.sql("NOTICE_SLOW", schema), params).fetchall()
            noticed = [int(r[0]) for r in rows]
            queues.update(r[1] for r in rows)
            for queue in sorted(queues):  # wake idle workers for the hook jobs
                conn.execute(self._sql["NOTIFY"], {"channel": self.channel, "queue": queue})
            if expired:  # a worker running one of them stops its body (durq.worker.stopping)
                payload = {"channel": self.channel, "queue": self._sql["CANCEL_PAYLOAD"]}
                conn.execute(self._sql["NOTIFY"], payload)
        return SweepSummary(at=now, expired=tuple(sorted(expired)), noticed=tuple(sorted(noticed)))
