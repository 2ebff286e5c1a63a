"""The operator's reads and the worker's self-report on SQLite (migration 0014): keyset pages
of the job list, the overview's per-minute series, worker details, and the stored facts of
"why is this job not running". :class:`SqliteDashboard` is the mixin the store inherits.

Every statement is built from the fixed fragments below; user values are only ever bound
parameters. A state filter is written into the SQL as a literal from
:data:`durq.model.dashboard.LIST_STATES` so that SQLite can use the state's partial index.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from durq.errors import ConfigError
from durq.model import JobRecord
from durq.model.dashboard import (
    LIST_STATES,
    JobFilter,
    WhyFacts,
    WorkerDetail,
    WorkerReport,
    detail_from_row,
    in_hand_json,
)
from durq.store.sqlite.base import SqliteBase
from durq.store.sqlite.connection import translate
from durq.store.sqlite.queries import JOB_COLUMNS

REPORT_WORKER = """
UPDATE workers SET last_seen = :now, pool = :pool, concurrency = :concurrency,
    version = :version, in_hand = :in_hand, done = :done, failed = :failed
WHERE id = :id
"""

SELECT_WORKER_DETAILS = """
SELECT id, host, pid, queues, tasks, started_at, last_seen, lease, pool, concurrency, version,
       in_hand, done, failed, rescue_after, proc
FROM workers WHERE last_seen + lease >= :now ORDER BY host, id
"""

# Per queue and end state, finished jobs per bucket of :step seconds since :start. One
# probe of jobs_finished (state, queue, finished_at) per (state, queue): a range scan.
SERIES = """
SELECT CAST((finished_at - :start) / :step AS INTEGER) AS bucket, count(*)
FROM jobs INDEXED BY jobs_finished
WHERE state = :state AND queue = :queue AND finished_at >= :start AND finished_at IS NOT NULL
GROUP BY bucket
"""


# The newest finished jobs of one (state, queue) in a time range, through jobs_finished.
TIMINGS = """
SELECT started_at - run_at, finished_at - started_at
FROM jobs INDEXED BY jobs_finished
WHERE state = :state AND queue = :queue AND finished_at >= :since AND finished_at IS NOT NULL
  AND started_at IS NOT NULL
ORDER BY finished_at DESC LIMIT :limit
"""

LIMIT_OF = "SELECT limit_key, limit_concurrency, limit_rate, limit_per FROM jobs WHERE id = :id"
LIMIT_RUNNING = (
    "SELECT id FROM jobs INDEXED BY jobs_limited_running "
    "WHERE state = 'running' AND limit_key = :key ORDER BY id LIMIT 10"
)
LIMIT_RUNNING_COUNT = (
    "SELECT count(*) FROM jobs INDEXED BY jobs_limited_running "
    "WHERE state = 'running' AND limit_key = :key"
)
LIMIT_HOLDS = "SELECT count(*) FROM limit_holds WHERE name = :key AND expires_at > :now"
LIMIT_STARTS = "SELECT count(*), min(at) FROM limit_starts WHERE name = :key AND at > :since"
QUEUE_PAUSE = "SELECT reason, source, paused_at FROM queues WHERE name = :queue AND paused"
RECENT_BATCHES = "SELECT id FROM batches WHERE id < :before ORDER BY id DESC LIMIT :limit"
ENQUEUED_TOTAL = "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0)"
# Live as durq.observability.processes.live judges (without its check of the pid): beaten
# within the lease, or within rescue_after when that is shorter.
LIVE_WORKERS = """
SELECT id, queues, tasks FROM workers
WHERE last_seen + min(lease, coalesce(rescue_after, lease)) >= :now
"""


def page_sql(f: JobFilter) -> tuple[str, dict[str, Any]]:
    """The statement and parameters of one keyset page of the job list, newest first.

    Raises:
        ConfigError: an unknown state or a limit outside 1..500.
    """
    if not 1 <= f.limit <= 500:
        raise ConfigError(f"a page holds 1 to 500 jobs, not {f.limit}")
    where: list[str] = []
    params: dict[str, Any] = {"limit": f.limit}
    if f.state is not None:
        if f.state not in LIST_STATES:
            raise ConfigError(f"unknown state {f.state!r} (known: {', '.join(LIST_STATES)})")
        stored = "queued" if f.state == "scheduled" else f.state
        where.append(f"state = '{stored}'")  # a literal from LIST_STATES: the partial index
        if f.state in ("scheduled", "queued"):
            where.append("run_at > :now" if f.state == "scheduled" else "run_at <= :now")
    for column in ("queue", "task", "key"):
        value = getattr(f, column)
        if value is not None:
            where.append(f"{column} = :{column}")
            params[column] = value
    if f.tag is not None:  # LIST_JOBS's probe of job_tags (tag, job_id)
        where.append("id IN (SELECT job_id FROM job_tags WHERE tag = :tag)")
        params["tag"] = f.tag
    if f.text:
        where.append(
            "(instr(payload, :text) > 0 OR instr(coalesce(meta, ''), :text) > 0"
            " OR instr(errors, :text) > 0 OR instr(coalesce(result, ''), :text) > 0)"
        )
        params["text"] = f.text
    if f.since is not None:
        where.append("created_at >= :since")
        params["since"] = f.since
    if f.until is not None:
        where.append("created_at < :until")
        params["until"] = f.until
    if f.before is not None:
        where.append("id < :before")
        params["before"] = f.before
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {JOB_COLUMNS} FROM jobs {clause} ORDER BY id DESC LIMIT :limit", params


def count_sql(f: JobFilter, cap: int) -> tuple[str, dict[str, Any]]:
    """The statement counting the jobs matching ``f`` (its cursor too), up to ``cap``: the
    page's WHERE on the same indexes, no row read past the cap.

    Raises:
        ConfigError: an unknown state.
    """
    sql, params = page_sql(replace(f, limit=1))
    where = sql[sql.index(" FROM jobs ") : sql.index(" ORDER BY ")]
    params["limit"] = cap
    return f"SELECT count(*) FROM (SELECT 1{where} LIMIT :limit)", params


class SqliteDashboard(SqliteBase):
    """The dashboard's reads and the worker report, mixed into :class:`SqliteStore`."""

    def report_worker(self, worker_id: str, report: WorkerReport) -> None:
        """Mark the worker seen now and store its report (one statement)."""
        params = {
            "id": worker_id, "now": self.now(), "pool": report.pool,
            "concurrency": report.concurrency, "version": report.version,
            "in_hand": in_hand_json(report), "done": report.done, "failed": report.failed,
        }  # fmt: skip
        conn = self._conn()
        with self._write(urgent=True):  # part of the heartbeat: not behind a flood
            conn.execute(REPORT_WORKER, params)

    def worker_details(self) -> list[WorkerDetail]:
        """Workers seen within their lease with their last report, by host and id."""
        return [detail_from_row(r) for r in self._read(SELECT_WORKER_DETAILS, {"now": self.now()})]

    def recent_batches(self, before: int | None, limit: int) -> list[int]:
        """Ids of up to ``limit`` batches below ``before`` (None: the newest), newest first."""
        params = {"before": before if before is not None else 2**63 - 1, "limit": limit}
        return [int(r[0]) for r in self._read(RECENT_BATCHES, params)]

    def enqueued_total(self) -> int:
        """Jobs ever inserted: the id sequence (AUTOINCREMENT never reuses an id)."""
        return int(self._read(ENQUEUED_TOTAL)[0][0])

    def job_page(self, f: JobFilter) -> list[JobRecord]:
        """One page of jobs matching ``f``, newest first (keyset on id; no OFFSET, no count).

        Raises:
            ConfigError: a bad filter (see :func:`page_sql`).
        """
        sql, params = page_sql(f)
        params["now"] = self.now()
        return [JobRecord(*r) for r in self._read(sql, params)]

    def count_jobs(self, f: JobFilter, cap: int) -> int:
        """How many jobs match ``f``, counted up to ``cap`` (the dashboard's confirmations).

        Raises:
            ConfigError: a bad filter.
        """
        sql, params = count_sql(f, cap)
        params["now"] = self.now()
        return int(self._read(sql, params)[0][0])

    def finished_series(
        self,
        start: float,
        step: float,
        queues: Sequence[str],
        states: Sequence[str] = ("succeeded", "failed"),
    ) -> dict[tuple[str, str], dict[int, int]]:
        """Jobs of ``queues`` finished since ``start`` (epoch s) per (queue, state):
        {bucket: count}, the bucket being ``(finished_at - start) // step``."""
        out: dict[tuple[str, str], dict[int, int]] = {}
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            try:
                for queue in queues:
                    for state in states:
                        p = {"start": start, "step": step, "state": state, "queue": queue}
                        rows = conn.execute(SERIES, p).fetchall()
                        if rows:
                            out[(queue, state)] = {int(b): int(n) for b, n in rows}
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return out

    def finished_timings(
        self, since: float, queues: Sequence[str], limit: int = 10_000
    ) -> list[tuple[str, float, float]]:
        """``(queue, wait, run)`` seconds of jobs finished since ``since`` (the newest
        ``limit`` per queue and state); see :meth:`durq.store.base.Store.finished_timings`."""
        out: list[tuple[str, float, float]] = []
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            try:
                for queue in queues:
                    for state in ("succeeded", "failed"):
                        p = {"since": since, "state": state, "queue": queue, "limit": limit}
                        for wait, run in conn.execute(TIMINGS, p):
                            out.append((queue, max(0.0, float(wait)), max(0.0, float(run))))
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        return out

    def why_facts(self, job: JobRecord) -> WhyFacts:
        """The stored facts :func:`durq.observability.why.why_not_running` reads for ``job``."""
        now = self.now()
        conn = self._conn()
        try:
            conn.execute("BEGIN")
            try:
                row = conn.execute(LIMIT_OF, {"id": job.id}).fetchone()
                key, cap, rate, per = row if row else (None, None, None, None)
                running: tuple[int, ...] = ()
                busy = starts = 0
                oldest = None
                if key is not None:
                    running = tuple(r[0] for r in conn.execute(LIMIT_RUNNING, {"key": key}))
                    busy = conn.execute(LIMIT_RUNNING_COUNT, {"key": key}).fetchone()[0]
                    busy += conn.execute(LIMIT_HOLDS, {"key": key, "now": now}).fetchone()[0]
                    if rate is not None and per is not None:
                        n, oldest = conn.execute(
                            LIMIT_STARTS, {"key": key, "since": now - per}
                        ).fetchone()
                        starts = int(n)
                pause = conn.execute(QUEUE_PAUSE, {"queue": job.queue}).fetchone()
                live = conn.execute(LIVE_WORKERS, {"now": now}).fetchall()
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise translate(exc, self.path) from exc
        served = any(job.queue in json.loads(q) and job.task in json.loads(t) for _i, q, t in live)
        return WhyFacts(
            now=now, limit_key=key, limit_concurrency=cap, limit_rate=rate, limit_per=per,
            limit_running=running, limit_busy=int(busy), limit_starts=starts,
            limit_oldest_start=oldest,
            paused=(
                {"reason": pause[0], "source": pause[1], "at": pause[2]} if pause else None
            ),
            served=served, holder_alive=any(i == job.worker_id for i, _q, _t in live),
        )  # fmt: skip
