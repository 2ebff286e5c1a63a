"""The operator's reads and the worker's self-report on PostgreSQL (migration 0013): the
same transitions as :mod:`durq.store.sqlite.dashboard`, in PostgreSQL's SQL. ``{s}`` is the
schema; every time is ``{s}.epoch(%(at)s)``, the database clock.

:class:`PostgresDashboard` is the mixin the store inherits. User values are only ever bound
parameters; a state filter is a literal from :data:`LIST_STATES` (the partial indexes).
"""

from __future__ import annotations

import json
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
from durq.store.postgres.base import PostgresBase
from durq.store.postgres.connection import render
from durq.store.postgres.queries import JOB_COLUMNS

REPORT_WORKER = """
UPDATE {s}.workers SET last_seen = {s}.epoch(%(at)s), pool = %(pool)s,
    concurrency = %(concurrency)s, version = %(version)s, in_hand = %(in_hand)s,
    done = %(done)s, failed = %(failed)s
WHERE id = %(id)s
"""

SELECT_WORKER_DETAILS = """
SELECT id, host, pid, queues, tasks, started_at, last_seen, lease, pool, concurrency, version,
       in_hand, done, failed, rescue_after, proc
FROM {s}.workers WHERE last_seen + lease >= {s}.epoch(%(at)s) ORDER BY host, id
"""

# One range scan of jobs_finished (state, queue, finished_at) per (state, queue).
SERIES = """
SELECT q.name, st.state, b.bucket, b.n
FROM unnest(%(queues)s::text[]) AS q(name)
CROSS JOIN unnest(%(states)s::text[]) AS st(state)
CROSS JOIN LATERAL (
    SELECT floor((finished_at - %(start)s) / %(step)s)::bigint AS bucket, count(*) AS n
    FROM {s}.jobs
    WHERE state = st.state AND queue = q.name AND finished_at >= %(start)s
      AND finished_at IS NOT NULL
    GROUP BY 1) b
"""

# The newest finished jobs of each (queue, state) in a time range: a range scan of
# jobs_finished per pair, newest first.
TIMINGS = """
SELECT q.name, t.wait, t.run
FROM unnest(%(queues)s::text[]) AS q(name)
CROSS JOIN unnest(ARRAY['succeeded', 'failed']) AS st(state)
CROSS JOIN LATERAL (
    SELECT started_at - run_at AS wait, finished_at - started_at AS run
    FROM {s}.jobs
    WHERE state = st.state AND queue = q.name AND finished_at >= %(since)s
      AND finished_at IS NOT NULL AND started_at IS NOT NULL
    ORDER BY finished_at DESC LIMIT %(limit)s) t
"""

RECENT_BATCHES = "SELECT id FROM {s}.batches WHERE id < %(before)s ORDER BY id DESC LIMIT %(limit)s"

ENQUEUED_TOTAL = """
SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence('{s}.jobs', 'id')), 0)
"""

WHY = """
SELECT {s}.epoch(%(at)s), j.limit_key, j.limit_concurrency, j.limit_rate, j.limit_per,
    (SELECT coalesce(array_agg(id ORDER BY id), ARRAY[]::bigint[]) FROM (
        SELECT id FROM {s}.jobs r WHERE r.state = 'running' AND r.limit_key = j.limit_key
        ORDER BY id LIMIT 10) x),
    (SELECT count(*) FROM {s}.jobs r WHERE r.state = 'running' AND r.limit_key = j.limit_key)
    + (SELECT count(*) FROM {s}.limit_holds h
       WHERE h.name = j.limit_key AND h.expires_at > {s}.epoch(%(at)s)),
    (SELECT count(*) FROM {s}.limit_starts t WHERE t.name = j.limit_key
       AND t.at > {s}.epoch(%(at)s) - coalesce(j.limit_per, 0)),
    (SELECT min(at) FROM {s}.limit_starts t WHERE t.name = j.limit_key
       AND t.at > {s}.epoch(%(at)s) - coalesce(j.limit_per, 0)),
    (SELECT json_build_array(reason, source, paused_at)::text FROM {s}.queues
       WHERE name = j.queue AND paused),
    (SELECT coalesce(json_agg(json_build_array(w.id, w.queues, w.tasks)), '[]')::text
       FROM {s}.workers w
       WHERE w.last_seen + least(w.lease, coalesce(w.rescue_after, w.lease)) >= {s}.epoch(%(at)s))
FROM {s}.jobs j WHERE j.id = %(id)s
"""


def page_sql(f: JobFilter) -> tuple[str, dict[str, Any]]:
    """The statement (``{s}`` not yet rendered) and parameters of one keyset page.

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
        where.append(f"state = '{stored}'")
        if f.state == "scheduled":
            where.append("run_at > {s}.epoch(%(at)s)")
        elif f.state == "queued":
            where.append("run_at <= {s}.epoch(%(at)s)")
    for column in ("queue", "task", "key"):
        value = getattr(f, column)
        if value is not None:
            where.append(f"{column} = %({column})s")
            params[column] = value
    if f.tag is not None:  # LIST_JOBS's probe of job_tags (tag, job_id)
        where.append("id IN (SELECT job_id FROM {s}.job_tags WHERE tag = %(tag)s)")
        params["tag"] = f.tag
    if f.text:
        where.append(
            "(strpos(payload, %(text)s) > 0 OR strpos(coalesce(meta, ''), %(text)s) > 0"
            " OR strpos(errors, %(text)s) > 0 OR strpos(coalesce(result, ''), %(text)s) > 0)"
        )
        params["text"] = f.text
    if f.since is not None:
        where.append("created_at >= %(since)s")
        params["since"] = f.since
    if f.until is not None:
        where.append("created_at < %(until)s")
        params["until"] = f.until
    if f.before is not None:
        where.append("id < %(before)s")
        params["before"] = f.before
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    sql = f"SELECT {JOB_COLUMNS} FROM {{s}}.jobs {clause} ORDER BY id DESC LIMIT %(limit)s"
    return sql, params


def count_sql(f: JobFilter, cap: int) -> tuple[str, dict[str, Any]]:
    """The statement (``{s}`` not yet rendered) counting the jobs matching ``f`` (its cursor
    too), up to ``cap``: the page's WHERE on the same indexes, no row read past the cap.

    Raises:
        ConfigError: an unknown state.
    """
    sql, params = page_sql(replace(f, limit=1))
    where = sql[sql.index(" FROM {s}.jobs ") : sql.index(" ORDER BY ")]
    params["limit"] = cap
    return f"SELECT count(*) FROM (SELECT 1{where} LIMIT %(limit)s) x", params


class PostgresDashboard(PostgresBase):
    """The dashboard's reads and the worker report, mixed into :class:`PostgresStore`."""

    def _dq(self, statement: str) -> Any:
        cache: dict[str, Any] = self.__dict__.setdefault("_dash_sql", {})
        if statement not in cache:
            cache[statement] = render(statement, self.options.schema)
        return cache[statement]

    def report_worker(self, worker_id: str, report: WorkerReport) -> None:
        """Mark the worker seen now and store its report (one statement)."""
        params = {
            "at": self._at(), "id": worker_id, "pool": report.pool,
            "concurrency": report.concurrency, "version": report.version,
            "in_hand": in_hand_json(report), "done": report.done, "failed": report.failed,
        }  # fmt: skip
        with self._tx(transaction=False) as conn:
            conn.execute(self._dq(REPORT_WORKER), params)

    def worker_details(self) -> list[WorkerDetail]:
        """Workers seen within their lease with their last report, by host and id."""
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._dq(SELECT_WORKER_DETAILS), {"at": self._at()}).fetchall()
        return [detail_from_row(r) for r in rows]

    def recent_batches(self, before: int | None, limit: int) -> list[int]:
        """Ids of up to ``limit`` batches below ``before`` (None: the newest), newest first."""
        params = {"before": before if before is not None else 2**63 - 1, "limit": limit}
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._dq(RECENT_BATCHES), params).fetchall()
        return [int(r[0]) for r in rows]

    def enqueued_total(self) -> int:
        """Jobs ever inserted: the id sequence's last value (ids are never reused)."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._dq(ENQUEUED_TOTAL)).fetchone()
        return int(row[0]) if row else 0

    def job_page(self, f: JobFilter) -> list[JobRecord]:
        """One page of jobs matching ``f``, newest first (keyset on id; no OFFSET, no count).

        Raises:
            ConfigError: a bad filter.
        """
        sql, params = page_sql(f)
        params["at"] = self._at()
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._dq(sql), params).fetchall()
        return [JobRecord(*r) for r in rows]

    def count_jobs(self, f: JobFilter, cap: int) -> int:
        """How many jobs match ``f``, counted up to ``cap`` (the dashboard's confirmations).

        Raises:
            ConfigError: a bad filter.
        """
        sql, params = count_sql(f, cap)
        params["at"] = self._at()
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._dq(sql), params).fetchone()
        return int(row[0]) if row else 0

    def finished_series(
        self,
        start: float,
        step: float,
        queues: Sequence[str],
        states: Sequence[str] = ("succeeded", "failed"),
    ) -> dict[tuple[str, str], dict[int, int]]:
        """Jobs of ``queues`` finished since ``start`` per (queue, state): {bucket: count}."""
        out: dict[tuple[str, str], dict[int, int]] = {}
        params = {"start": start, "step": step, "states": list(states), "queues": list(queues)}
        with self._tx(transaction=False) as conn:
            for queue, state, bucket, n in conn.execute(self._dq(SERIES), params):
                out.setdefault((queue, state), {})[int(bucket)] = int(n)
        return out

    def finished_timings(
        self, since: float, queues: Sequence[str], limit: int = 10_000
    ) -> list[tuple[str, float, float]]:
        """``(queue, wait, run)`` seconds of jobs finished since ``since`` (the newest
        ``limit`` per queue and state); see :meth:`durq.store.base.Store.finished_timings`."""
        params = {"since": since, "queues": list(queues), "limit": limit}
        with self._tx(transaction=False) as conn:
            rows = conn.execute(self._dq(TIMINGS), params).fetchall()
        return [(q, max(0.0, float(w)), max(0.0, float(r))) for q, w, r in rows]

    def why_facts(self, job: JobRecord) -> WhyFacts:
        """The stored facts :func:`durq.observability.why.why_not_running` reads for ``job``."""
        with self._tx(transaction=False) as conn:
            row = conn.execute(self._dq(WHY), {"at": self._at(), "id": job.id}).fetchone()
        if row is None:
            return WhyFacts(now=0.0)
        now, key, cap, rate, per, running, busy, starts, oldest, pause, live = row
        workers = json.loads(live)
        served = any(
            job.queue in json.loads(q) and job.task in json.loads(t) for _i, q, t in workers
        )
        p = json.loads(pause) if pause else None
        return WhyFacts(
            now=float(now), limit_key=key, limit_concurrency=cap, limit_rate=rate,
            limit_per=per, limit_running=tuple(running) if key else (),
            limit_busy=int(busy) if key else 0, limit_starts=int(starts) if rate else 0,
            limit_oldest_start=float(oldest) if rate and oldest is not None else None,
            paused={"reason": p[0], "source": p[1], "at": p[2]} if p else None,
            served=served, holder_alive=any(i == job.worker_id for i, _q, _t in workers),
        )  # fmt: skip
