"""PostgreSQL's status counts on a big table: a finished (state, queue) is counted exactly up
to FINISHED_EXACT_UP_TO rows and above that shows the planner's estimate, marked as such in
the snapshot, in ``durq status`` (``~N``) and on the dashboard's overview (``≈N``)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import durq
from durq.cli.render import status_table
from durq.store.postgres.workers import FINISHED_EXACT_UP_TO
from tests.conftest import PG_URL

FILL = """
INSERT INTO "{s}".jobs (queue, task, payload, priority, run_at, attempts, max_attempts, state,
                        created_at, started_at, finished_at, errors)
SELECT %(queue)s, 'noop', '{{}}', 0, 0, 1, 3, %(state)s, 0, 0, 1, '[]'
FROM generate_series(1, %(n)s)
"""


def fill(url: str, queue: str, state: str, n: int) -> None:
    import psycopg

    schema = dict(parse_qsl(urlsplit(url).query))["schema"]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(FILL.format(s=schema), {"queue": queue, "state": state, "n": n})
        conn.execute(f'ANALYZE "{schema}".jobs')


def test_big_finished_states_are_estimated_and_marked(pg_url: str, capsys: object) -> None:
    dq = durq.Durq(pg_url)
    try:
        _ = dq.store
        big = FINISHED_EXACT_UP_TO * 3
        fill(pg_url, "bulk", "succeeded", big)
        fill(pg_url, "bulk", "failed", 17)
        fill(pg_url, "small", "succeeded", FINISHED_EXACT_UP_TO - 1)
        snap = dq.status()
        bulk, small = snap["queues"]["bulk"], snap["queues"]["small"]
        assert bulk["estimated"] == ["succeeded"]
        assert abs(bulk["counts"]["succeeded"] - big) <= big * 0.1  # the planner's figure
        assert bulk["counts"]["succeeded"] >= FINISHED_EXACT_UP_TO
        assert bulk["counts"]["failed"] == 17  # under the cap: counted
        assert small["estimated"] == [] and small["counts"]["succeeded"] == FINISHED_EXACT_UP_TO - 1
        status_table(snap, wide=True)
        status_table(snap)
    finally:
        dq.close()


def test_the_overview_marks_an_estimate(pg_url: str) -> None:
    from starlette.testclient import TestClient

    from durq.dashboard.app import create_app

    dq = durq.Durq(pg_url)
    try:
        _ = dq.store
        fill(pg_url, "bulk", "succeeded", FINISHED_EXACT_UP_TO + 500)
        with TestClient(create_app(dq)) as client:
            page = client.get("/").text
        assert "≈" in page and "an estimate" in page
    finally:
        dq.close()
