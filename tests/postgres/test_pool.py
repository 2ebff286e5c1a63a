"""The PostgreSQL store's connection pool: what a producer holds on the server, and the
replacement of a session the server dropped while it sat idle in the pool."""

from __future__ import annotations

import os
import time
import uuid

import durq
from durq.store.postgres.connection import CHECK_AFTER_IDLE
from tests.postgres.test_postgres import admin


def sessions(name: str) -> int:
    rows = admin(f"SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}'")
    return int(str(rows[0][0]))


def test_one_threads_enqueues_run_on_one_session(pg_url: str) -> None:
    # a connection is back in the pool when the call returns (no hand-off to the pool's
    # worker thread), so the next enqueue of the same thread takes it again: a web process
    # enqueueing one job per request holds one session, not one per pool slot, and each
    # statement stays prepared on it
    name = f"durq-pool-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    dq = durq.Durq(f"{pg_url}&application_name={name}")
    try:
        task = dq.task(name="noop")(lambda: None)
        for _ in range(300):
            task.enqueue()
        assert sessions(name) == 1
        assert len(dq.jobs(state="queued", limit=500)) == 300
    finally:
        dq.close()


def test_a_session_dropped_while_idle_is_replaced_at_the_next_enqueue(pg_url: str) -> None:
    name = f"durq-idle-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    dq = durq.Durq(f"{pg_url}&application_name={name}")
    try:
        task = dq.task(name="noop")(lambda: None)
        first = task.enqueue()
        admin(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '{name}'"
        )
        # the condition is the idleness itself: past CHECK_AFTER_IDLE the checkout pings
        time.sleep(CHECK_AFTER_IDLE + 0.2)
        second = task.enqueue()  # no StoreUnavailable: the dead session is replaced
        assert second.id > first.id
        assert dq.get(second.id).state == "queued"
    finally:
        dq.close()
