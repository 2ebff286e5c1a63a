"""The dashboard's figures and the cost of per-job events.

- ``dashboard``: a table of ``rows`` jobs (default 1,000,000: 98 % succeeded over the last
  7 days, 1 % failed, the rest queued, on three queues), written by bulk SQL so the fill is
  quick; then the dashboard, served by uvicorn on loopback, answers HTTP requests:
  the jobs page (first page), a page deep in a filter (failed jobs, 50 pages down, through
  the keyset cursor) and the overview. Median and p95 of ``repeats`` requests each.
- ``drain_logs``: one worker process drains the same no-op jobs with events at ``warning``
  and at the default ``info`` (JSON lines to a file), alternating, median of three each.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.cases import Figures, drain_child, fill
from bench.common import case_dir, sqlite_url
from bench.durq_app import make_app

DAY = 86_400.0
PAGE = 50

SQLITE_FILL = """
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < :n)
INSERT INTO jobs (queue, task, payload, priority, run_at, attempts, max_attempts, state,
                  created_at, started_at, finished_at, errors)
SELECT 'q' || (i % 3), 'noop', '{"n": ' || i || '}', 0, :now - :span + i * :step,
       CASE WHEN i % 100 = 99 THEN 0 ELSE 1 END, 3,
       CASE WHEN i % 100 = 7 THEN 'failed' WHEN i % 100 = 99 THEN 'queued' ELSE 'succeeded' END,
       :now - :span + i * :step,
       CASE WHEN i % 100 = 99 THEN NULL ELSE :now - :span + i * :step END,
       CASE WHEN i % 100 = 99 THEN NULL ELSE :now - :span + i * :step + 0.01 END,
       CASE WHEN i % 100 = 7
            THEN '[{"attempt": 1, "at": 0, "type": "ValueError", "message": "bad row", '
                 || '"traceback": "", "kind": "permanent"}]'
            ELSE '[]' END
FROM c
"""

PG_FILL = """
INSERT INTO {s}.jobs (queue, task, payload, priority, run_at, attempts, max_attempts, state,
                      created_at, started_at, finished_at, errors)
SELECT 'q' || mod(i, 3), 'noop', '{{"n": ' || i || '}}', 0, %(now)s - %(span)s + i * %(step)s,
       CASE WHEN mod(i, 100) = 99 THEN 0 ELSE 1 END, 3,
       CASE WHEN mod(i, 100) = 7 THEN 'failed' WHEN mod(i, 100) = 99 THEN 'queued' ELSE 'succeeded' END,
       %(now)s - %(span)s + i * %(step)s,
       CASE WHEN mod(i, 100) = 99 THEN NULL ELSE %(now)s - %(span)s + i * %(step)s END,
       CASE WHEN mod(i, 100) = 99 THEN NULL ELSE %(now)s - %(span)s + i * %(step)s + 0.01 END,
       CASE WHEN mod(i, 100) = 7
            THEN '[{{"attempt": 1, "at": 0, "type": "ValueError", "message": "bad row", '
                 || '"traceback": "", "kind": "permanent"}}]'
            ELSE '[]' END
FROM generate_series(1, %(n)s) AS i
"""


def _fill_sqlite(path: str, n: int) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        span = 7 * DAY
        conn.execute(SQLITE_FILL, {"n": n, "now": time.time(), "span": span, "step": span / n})
        conn.commit()
        conn.execute("ANALYZE")
        conn.commit()
    finally:
        conn.close()


def _fill_pg(url: str, schema: str, n: int) -> None:
    import psycopg

    base = url.split("?")[0]
    with psycopg.connect(base, autocommit=True) as conn:
        span = 7 * DAY
        sql = PG_FILL.replace("{s}", f'"{schema}"')
        conn.execute(sql, {"n": n, "now": time.time(), "span": span, "step": span / n})
        conn.execute(f'ANALYZE "{schema}".jobs')


def _timings(base: str, path: str, repeats: int) -> dict[str, float]:
    import requests

    session = requests.Session()
    session.get(base + path, timeout=60)  # warm: templates, statements, caches
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        r = session.get(base + path, timeout=60)
        samples.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    samples.sort()
    return {
        "median_ms": statistics.median(samples),
        "p95_ms": samples[int(0.95 * (len(samples) - 1))],
    }


def measure_pages(dq: Any, repeats: int) -> Figures:
    """Median request times of the jobs page, a deep filtered page and the overview."""
    from tests.support.serve import serving

    from durq.dashboard.app import create_app
    from durq.model import JobFilter

    # the cursor 50 pages down the failed set, found by walking it the way a user would
    f = JobFilter(state="failed", limit=PAGE)
    cursor = None
    for _ in range(50):
        page = dq.store.job_page(f)
        if len(page) < PAGE:
            break
        cursor = page[-1].id
        f = JobFilter(state="failed", limit=PAGE, before=cursor)
    with serving(create_app(dq)) as base:
        first = _timings(base, "/jobs", repeats)
        deep = _timings(base, f"/jobs?state=failed&before={cursor}", repeats)
        overview = _timings(base, "/", repeats)
    return {
        "jobs_first_ms": first["median_ms"], "jobs_first_p95_ms": first["p95_ms"],
        "jobs_deep_ms": deep["median_ms"], "jobs_deep_p95_ms": deep["p95_ms"],
        "overview_ms": overview["median_ms"], "overview_p95_ms": overview["p95_ms"],
        "deep_cursor": cursor, "repeats": repeats,
    }  # fmt: skip


def sqlite_dashboard(base: str, rows: int, repeats: int) -> Figures:
    import durq

    with case_dir(base, "dashboard") as d:
        path = d / "jobs.db"
        url = sqlite_url(path)
        created = durq.Durq(url)
        _ = created.store  # create the schema
        created.close()
        t = time.perf_counter()
        _fill_sqlite(str(path), rows)
        filled = time.perf_counter() - t
        dq = durq.Durq(url)
        try:
            figures = measure_pages(dq, repeats)
        finally:
            dq.close()
    return {**figures, "rows": rows, "fill_seconds": filled}


def pg_dashboard(pg_url: str, rows: int, repeats: int) -> Figures:
    import durq
    from bench.pg import durq_schema

    with durq_schema(pg_url) as url:
        dq = durq.Durq(url)
        try:
            schema = dq.store.options.schema  # type: ignore[attr-defined]
            t = time.perf_counter()
            _fill_pg(url, schema, rows)
            filled = time.perf_counter() - t
            figures = measure_pages(dq, repeats)
        finally:
            dq.close()
    return {**figures, "rows": rows, "fill_seconds": filled}


def drain_logs(base: str, n: int, chunk: int, concurrency: int, rounds: int = 3) -> Figures:
    """Drain ``n`` no-ops with events at ``warning`` and at ``info``, alternating."""
    rates: dict[str, list[float]] = {"warning": [], "info": []}
    cpu: dict[str, list[float]] = {"warning": [], "info": []}
    for _ in range(rounds):
        for level in ("warning", "info"):
            with case_dir(base, f"drain-logs-{level}") as d:
                url = sqlite_url(d / "jobs.db")
                app = make_app(url)
                try:
                    fill(app, n, chunk)
                finally:
                    app.dq.close()
                out = drain_child(d, url, concurrency, n, "worker", log_level=level)
                rates[level].append(out["rate"])
                cpu[level].append(out["cpu_us_per_job"])
    warning, info = statistics.median(rates["warning"]), statistics.median(rates["info"])
    cpu_w, cpu_i = statistics.median(cpu["warning"]), statistics.median(cpu["info"])
    return {
        "warning_rate": warning, "info_rate": info, "info_cost": 1 - info / warning,
        # CPU time per job is what the events add, and it holds up on a loaded machine
        "warning_cpu_us": cpu_w, "info_cpu_us": cpu_i, "info_cpu_cost": cpu_i / cpu_w - 1,
        "rounds": rounds, "jobs": n, "concurrency": concurrency, "all": rates,
    }  # fmt: skip
