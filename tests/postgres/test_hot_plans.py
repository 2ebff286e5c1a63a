"""The worker's hot statement on PostgreSQL (``FINISH_AND_CLAIM``: a batch's outcomes and
the next claim) on an analysed table where another worker holds running jobs, as in any
drain once autovacuum has analysed the table:

* its prepared statement runs its generic plan: the claim's UPDATE used to join the picked
  rows, the generic plan (which cannot know ``LIMIT %(limit)s`` and guesses a tenth of the
  ready rows) hashed a sequential scan of the whole table for that join, so the server
  kept planning the statement afresh at every execution (~1 ms of its CPU each time);
* a plan made for the batch at hand (a custom plan) finds the outcomes' rows by primary
  key: it used to read every running row of every worker through the partial indexes on
  running rows (``jobs_leases``, ``jobs_worker_running``) to hash-join the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import durq
from durq.model import Claimed, Outcome

BATCH = 40
ROUNDS = 30


@pytest.fixture
def store_and_tasks(pg_url: str) -> Iterator[tuple[Any, list[str]]]:
    dq = durq.Durq(pg_url)

    @dq.task
    def noop() -> None:
        return None

    store = dq.store
    noop.enqueue_many([{}] * 15_000)  # a backlog: the generic plan guesses a tenth of it
    tasks = sorted(dq.tasks)
    store.finish_and_claim([], ["default"], tasks, 500, 30.0, "other-worker")
    with store._pool.connection() as conn:
        conn.execute(f'ANALYZE "{store.options.schema}".jobs')
    try:
        yield store, tasks
    finally:
        dq.close()


def rounds(store: Any, tasks: list[str], conn_setup: str | None = None) -> None:
    """ROUNDS batches of BATCH outcomes, each with the claim of the next BATCH."""
    if conn_setup is not None:
        with store._pool.connection() as conn:
            conn.execute(conn_setup)
    claimed: list[Claimed]
    _, claimed = store.finish_and_claim([], ["default"], tasks, BATCH, 30.0, "w")
    for _ in range(ROUNDS):
        outcomes = [Outcome(c.id, c.lease_token, "succeeded") for c in claimed]
        applied, claimed = store.finish_and_claim(outcomes, ["default"], tasks, BATCH, 30.0, "w")
        assert applied == [True] * BATCH
        assert len(claimed) == BATCH


def test_the_hot_statement_runs_its_generic_plan(store_and_tasks: tuple[Any, list[str]]) -> None:
    store, tasks = store_and_tasks
    rounds(store, tasks)
    with store._pool.connection() as conn:  # one thread: the one session of the rounds
        rows = conn.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE 'WITH fin AS%'"
        ).fetchall()
    assert len(rows) == 1, rows
    generic, custom = rows[0]
    # psycopg prepares it at its 5th execution; the server plans the first 5 of those
    # for their parameters, then keeps the generic plan if it is no dearer
    assert custom <= 5 and generic >= ROUNDS - 10, rows


def test_a_custom_plan_reads_no_running_rows_of_other_workers(
    store_and_tasks: tuple[Any, list[str]],
) -> None:
    store, tasks = store_and_tasks
    schema = store.options.schema
    reads = (
        "SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes"
        " WHERE schemaname = %s AND indexrelname IN ('jobs_leases', 'jobs_worker_running')"
    )

    def running_index_reads() -> int:
        with store._pool.connection() as conn:
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.execute("SELECT 1")  # the flush happens at this statement's end
            conn.execute("SELECT pg_stat_clear_snapshot()")
            return int(conn.execute(reads, (schema,)).fetchone()[0])

    before = running_index_reads()
    rounds(store, tasks, conn_setup="SET plan_cache_mode = force_custom_plan")
    after = running_index_reads()
    # 500 running rows of the other worker: reading them once per batch is 15,000 reads
    assert after - before < ROUNDS * BATCH, (before, after)
