"""Dependencies, tags, uniqueness while active and fair keys on SQLite: what the insert adds
to its rows, and the reads of edges, parents' results and tags (SQL in
:mod:`.dependencies` and here)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from durq.model import Edge, Inserted, NewJob, ParentResult
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite.base import SqliteBase

SET_WORKFLOW = """
UPDATE jobs SET unique_key = :unique_key,
                unique_until = CASE WHEN :period IS NULL THEN NULL ELSE created_at + :period END,
                fair_key = :fair_key
WHERE id = :id
"""

INSERT_TAG = "INSERT OR IGNORE INTO job_tags (tag, job_id) VALUES (?, ?)"

# The job holding a unique key: while active (unique_until NULL: queued, scheduled, running,
# waiting, parked), or for a period (unique_until ahead of now, whatever its state).
UNIQUE_HOLDER = """
SELECT id, run_at, created_at FROM jobs
WHERE queue = :queue AND unique_key = :key AND (
      (:period IS NULL AND unique_until IS NULL
       AND state IN ('queued', 'running', 'waiting', 'parked'))
   OR (:period IS NOT NULL AND unique_until IS NOT NULL AND unique_until > :now))
ORDER BY id DESC LIMIT 1
"""

TAGS_OF = "SELECT tag FROM job_tags WHERE job_id = :id ORDER BY tag"


class WorkflowsMixin(SqliteBase):
    """Insert-time workflow columns and the reads behind Job.parents / children / tags."""

    @staticmethod
    def _unique_holder(conn: sqlite3.Connection, job: NewJob, now: float) -> Inserted | None:
        """The live job holding ``job``'s unique key, if any (under the write lock: two
        enqueuers take turns, so exactly one inserts)."""
        row = conn.execute(
            UNIQUE_HOLDER,
            {"queue": job.queue, "key": job.unique_key, "period": job.unique_period, "now": now},
        ).fetchone()
        return None if row is None else Inserted(int(row[0]), False, row[1], row[2])

    def _set_workflow(
        self, conn: sqlite3.Connection, jobs: Sequence[NewJob], out: Sequence[Inserted]
    ) -> None:
        """Unique key, fair key, tags and dependency edges of the rows just inserted."""
        if not any(job.has_workflow for job in jobs):
            return
        tags: list[tuple[str, int]] = []
        for job, ins in zip(jobs, out, strict=True):
            if not ins.created:
                continue
            if job.unique_key is not None or job.fair_key is not None:
                conn.execute(
                    SET_WORKFLOW,
                    {
                        "id": ins.id,
                        "unique_key": job.unique_key,
                        "period": job.unique_period,
                        "fair_key": job.fair_key,
                    },
                )
            tags.extend((tag, ins.id) for tag in job.tags)
        if tags:
            conn.executemany(INSERT_TAG, tags)
        if any(job.parents for job in jobs):
            deps.add_parents(conn, jobs, out, self.now(), self.codec)

    def edges(self, job_ids: Sequence[int]) -> list[Edge]:
        rows = self._read(deps.EDGES_OF, {"ids": json.dumps(list(job_ids))})
        return [Edge(*r) for r in rows]

    def parent_results(self, job_id: int) -> list[ParentResult]:
        return [ParentResult(*r) for r in self._read(deps.PARENT_RESULTS, {"id": job_id})]

    def tags_of(self, job_id: int) -> list[str]:
        return [r[0] for r in self._read(TAGS_OF, {"id": job_id})]

    def stuck_waiting(self) -> list[int]:
        return [r[0] for r in self._read(deps.STUCK_WAITING)]
