"""Dependencies, tags, uniqueness while active and fair keys on SQLite: what the insert adds
to its rows, and the reads of edges, parents' results and tags (SQL in
:mod:`.dependencies` and here)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence

from durq.model import Edge, Inserted, NewJob, ParentResult
from durq.store.sqlite import dependencies as deps
from durq.store.sqlite.base import SqliteBase

# A fair key's turn row, made by the enqueue (turn 0: a new key is served first), so that a
# fair claim finds the keys in turn order (store/sqlite/fairness.py).
ADD_TURN = "INSERT OR IGNORE INTO fair_turns (queue, fair_key, turn) VALUES (?, ?, 0)"

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

# Re-encryption (dq.reencrypt): values not stored under the active key's prefix.
NOT_UNDER = "(substr({col}, 1, length(:prefix)) <> :prefix)"
STALE_JOBS = f"""
SELECT id, payload, result FROM jobs
WHERE id > :after AND ({NOT_UNDER.format(col="payload")}
                       OR (result IS NOT NULL AND {NOT_UNDER.format(col="result")}))
ORDER BY id LIMIT :limit
"""
REWRITE_JOB = """
UPDATE jobs SET payload = :payload, result = :result
WHERE id = :id AND payload = :old_payload AND result IS :old_result
"""
STALE_STEPS = f"""
SELECT job_id, name, result FROM steps WHERE {NOT_UNDER.format(col="result")}
ORDER BY job_id, name LIMIT :limit
"""
REWRITE_STEP = """
UPDATE steps SET result = :result WHERE job_id = :job_id AND name = :name AND result = :old
"""


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
        turns: set[tuple[str, str]] = set()  # the fair keys' turn rows (store/sqlite/fairness.py)
        for job, ins in zip(jobs, out, strict=True):
            if not ins.created:
                continue
            if job.fair_key is not None:
                turns.add((job.queue, job.fair_key))
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
        if turns:
            conn.executemany(ADD_TURN, sorted(turns))
        if any(job.parents for job in jobs):
            deps.add_parents(conn, jobs, out, self.now(), self.codec, self.payload_limit)

    def edges(self, job_ids: Sequence[int]) -> list[Edge]:
        rows = self._read(deps.EDGES_OF, {"ids": json.dumps(list(job_ids))})
        return [Edge(*r) for r in rows]

    def parent_results(self, job_id: int) -> list[ParentResult]:
        return [ParentResult(*r) for r in self._read(deps.PARENT_RESULTS, {"id": job_id})]

    def tags_of(self, job_id: int) -> list[str]:
        return [r[0] for r in self._read(TAGS_OF, {"id": job_id})]

    def reseal(self, prefix: str, seal: Callable[[str], str], chunk: int) -> int:
        """Rewrite every payload, result and step not stored under ``prefix`` with ``seal``
        (old text -> new text), ``chunk`` rows per transaction; a row that changed meanwhile
        is left for the next pass. Returns the number of rows rewritten."""
        conn = self._conn()
        done, after = 0, 0
        while True:
            with self._write():
                rows = conn.execute(
                    STALE_JOBS, {"prefix": prefix, "after": after, "limit": chunk}
                ).fetchall()
                for job_id, payload, result in rows:
                    new = {
                        "id": job_id, "old_payload": payload, "old_result": result,
                        "payload": payload if payload.startswith(prefix) else seal(payload),
                        "result": result
                        if result is None or result.startswith(prefix)
                        else seal(result),
                    }  # fmt: skip
                    done += conn.execute(REWRITE_JOB, new).rowcount
            if len(rows) < chunk:
                break
            after = rows[-1][0]
        while True:
            with self._write():
                steps = conn.execute(STALE_STEPS, {"prefix": prefix, "limit": chunk}).fetchall()
                for job_id, name, result in steps:
                    params = {"job_id": job_id, "name": name, "old": result, "result": seal(result)}
                    done += conn.execute(REWRITE_STEP, params).rowcount
            if len(steps) < chunk:
                break
        return done

    def stuck_waiting(self) -> list[int]:
        return [r[0] for r in self._read(deps.STUCK_WAITING)]
