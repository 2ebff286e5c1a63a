"""Dependencies, tags, uniqueness while active and fair keys on PostgreSQL: what the insert
adds to its rows, and the reads of edges, parents' results and tags (SQL here and in
:mod:`.dependencies`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from durq.model import Edge, Inserted, NewJob, ParentResult
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render

SET_WORKFLOW = """
UPDATE {s}.jobs AS j
SET unique_key = x.unique_key,
    unique_until = CASE WHEN x.period IS NULL THEN NULL ELSE j.created_at + x.period END,
    fair_key = x.fair_key
FROM unnest(%(ids)s::bigint[], %(keys)s::text[], %(periods)s::float8[], %(fairs)s::text[])
     AS x(id, unique_key, period, fair_key)
WHERE j.id = x.id
"""

INSERT_TAGS = """
INSERT INTO {s}.job_tags (tag, job_id)
SELECT * FROM unnest(%(tags)s::text[], %(ids)s::bigint[]) ON CONFLICT DO NOTHING
"""

# Two enqueuers of one unique key take turns on this lock (until their commits), so the
# second sees the first's job; the partial unique index jobs_unique_active backs it up.
UNIQUE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%(name)s, 0))"

UNIQUE_HOLDER = """
SELECT id, run_at, created_at FROM {s}.jobs
WHERE queue = %(queue)s AND unique_key = %(key)s AND (
      (%(period)s::float8 IS NULL AND unique_until IS NULL
       AND state IN ('queued', 'running', 'waiting', 'parked'))
   OR (%(period)s::float8 IS NOT NULL AND unique_until IS NOT NULL
       AND unique_until > {s}.epoch(%(at)s)))
ORDER BY id DESC LIMIT 1
"""

TAGS_OF = "SELECT tag FROM {s}.job_tags WHERE job_id = %(id)s ORDER BY tag"

# Re-encryption (dq.reencrypt): values not stored under the active key's prefix.
STALE_JOBS = """
SELECT id, payload, result FROM {s}.jobs
WHERE id > %(after)s AND (left(payload, length(%(prefix)s)) <> %(prefix)s
      OR (result IS NOT NULL AND left(result, length(%(prefix)s)) <> %(prefix)s))
ORDER BY id LIMIT %(limit)s
"""
REWRITE_JOB = """
UPDATE {s}.jobs SET payload = %(payload)s, result = %(result)s
WHERE id = %(id)s AND payload = %(old_payload)s AND result IS NOT DISTINCT FROM %(old_result)s
"""
STALE_STEPS = """
SELECT job_id, name, result FROM {s}.steps WHERE left(result, length(%(prefix)s)) <> %(prefix)s
ORDER BY job_id, name LIMIT %(limit)s
"""
REWRITE_STEP = """
UPDATE {s}.steps SET result = %(result)s
WHERE job_id = %(job_id)s AND name = %(name)s AND result = %(old)s
"""


class WorkflowsMixin(PostgresBase):
    """Insert-time workflow columns and the reads behind Job.parents / children / tags."""

    def _wsql(self, statement: str) -> Any:
        return render(statement, self.options.schema)

    def _unique_holder(
        self, conn: psycopg.Connection[Any], job: NewJob, at: float | None
    ) -> Inserted | None:
        """Take the key's advisory lock (till commit), then the live job holding it, if any."""
        name = f"durq.unique:{self.options.schema}:{job.queue}:{job.unique_key}"
        conn.execute(UNIQUE_LOCK, {"name": name})
        row = conn.execute(
            self._wsql(UNIQUE_HOLDER),
            {"queue": job.queue, "key": job.unique_key, "period": job.unique_period, "at": at},
        ).fetchone()
        return None if row is None else Inserted(int(row[0]), False, float(row[1]), float(row[2]))

    def _set_workflow(
        self,
        conn: psycopg.Connection[Any],
        jobs: Sequence[NewJob],
        out: Sequence[Inserted],
        at: float | None,
    ) -> None:
        """Unique key, fair key, tags and dependency edges of the rows just inserted."""
        if not any(job.has_workflow for job in jobs):
            return
        marked = [
            (ins.id, job)
            for job, ins in zip(jobs, out, strict=True)
            if ins.created and (job.unique_key is not None or job.fair_key is not None)
        ]
        if marked:
            conn.execute(
                self._wsql(SET_WORKFLOW),
                {
                    "ids": [i for i, _ in marked],
                    "keys": [j.unique_key for _, j in marked],
                    "periods": [j.unique_period for _, j in marked],
                    "fairs": [j.fair_key for _, j in marked],
                },
            )
            # the fair keys' turn rows, made or held till commit, so that a fair claim finds
            # the keys in turn order and a sweep cannot drop them (store/postgres/fairness.py)
            turns = [(j.queue, j.fair_key) for _, j in marked if j.fair_key is not None]
            if turns:
                self._hold_turns(conn, turns)
        tags = [
            (tag, ins.id)
            for job, ins in zip(jobs, out, strict=True)
            if ins.created
            for tag in job.tags
        ]
        if tags:
            conn.execute(
                self._wsql(INSERT_TAGS),
                {"tags": [t for t, _ in tags], "ids": [i for _, i in tags]},
            )
        if any(job.parents for job in jobs):
            self._deps.add_parents(conn, jobs, out, at)

    def edges(self, job_ids: Sequence[int]) -> list[Edge]:
        with self._tx(transaction=False) as conn:
            return self._deps.edges(conn, job_ids)

    def parent_results(self, job_id: int) -> list[ParentResult]:
        with self._tx(transaction=False) as conn:
            return self._deps.parent_results(conn, job_id)

    def tags_of(self, job_id: int) -> list[str]:
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._wsql(TAGS_OF), {"id": job_id}).fetchall()
        return [r[0] for r in rows]

    def reseal(self, prefix: str, seal: Callable[[str], str], chunk: int) -> int:
        """Rewrite every payload, result and step not stored under ``prefix`` with ``seal``,
        ``chunk`` rows per transaction; a row that changed meanwhile is left for the next
        pass. Returns the number of rows rewritten."""
        done, after = 0, 0
        while True:
            with self._tx() as conn:
                rows = conn.execute(
                    self._wsql(STALE_JOBS), {"prefix": prefix, "after": after, "limit": chunk}
                ).fetchall()
                for job_id, payload, result in rows:
                    new = {
                        "id": job_id, "old_payload": payload, "old_result": result,
                        "payload": payload if payload.startswith(prefix) else seal(payload),
                        "result": result
                        if result is None or result.startswith(prefix)
                        else seal(result),
                    }  # fmt: skip
                    done += conn.execute(self._wsql(REWRITE_JOB), new).rowcount
            if len(rows) < chunk:
                break
            after = int(rows[-1][0])
        while True:
            with self._tx() as conn:
                steps = conn.execute(
                    self._wsql(STALE_STEPS), {"prefix": prefix, "limit": chunk}
                ).fetchall()
                for job_id, name, result in steps:
                    params = {"job_id": job_id, "name": name, "old": result, "result": seal(result)}
                    done += conn.execute(self._wsql(REWRITE_STEP), params).rowcount
            if len(steps) < chunk:
                break
        return done

    def stuck_waiting(self) -> list[int]:
        with self._tx(transaction=False) as conn:
            return self._deps.stuck_waiting(conn)
