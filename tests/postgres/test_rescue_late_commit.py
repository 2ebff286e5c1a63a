"""A dead worker's claim that commits after its rescue (PostgreSQL only).

A statement the worker's process sent just before it died goes on in its server session
without it. When the rescue reads the jobs before that statement commits, the jobs it
claimed are running under a worker whose row the rescue deleted: no later pass found
them, and they waited for their leases (30 s by default; seen once in ``make bench``'s
recovery case, 34 s instead of 1 s). SQLite cannot get there: a dead process's transaction
never commits.
"""

from __future__ import annotations

import psycopg

import durq
from durq.model import WorkerInfo

LEASE = 30.0


def test_jobs_a_dead_workers_statement_claims_after_the_rescue_come_back_at_the_next_pass(
    pg_url: str,
) -> None:
    app = durq.Durq(pg_url)

    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    jobs = work.enqueue_many([{"n": i} for i in range(4)])
    store = app.store
    store.register_worker(WorkerInfo("gone", "here", 1, ("default",), ("work",), 0.0, 0.0, LEASE))
    assert store.beat_worker("gone", 5.0, None) == 0
    held = store.finish_and_claim([], ["default"], ["work"], 1, LEASE, "gone")[1]
    assert len(held) == 1
    params = {"queue": "default", "at": None, "tasks": ["work"], "limit": 3,
              "lease": LEASE, "worker_id": "gone"}  # fmt: skip
    with psycopg.connect(pg_url.split("?")[0]) as late:  # the dead process's session
        late.execute(store._sql["CLAIM"], params)  # three jobs, not committed yet
        first = store.rescue(dead=["gone"])  # its process is gone: rescued and forgotten
        assert first.job_ids == (held[0].id,)
        late.commit()  # the statement ends after the rescue read the jobs
    running = [j.id for j in jobs if app.get(j.id).state == "running"]
    assert len(running) == 3 and held[0].id not in running
    assert {app.get(i).worker_id for i in running} == {"gone"}  # a worker with no row
    second = store.rescue()  # the leader's next pass (the pid check no longer lists it)
    assert second.workers == ("gone",)
    assert sorted(second.job_ids) == sorted(running)
    for job_id in running:
        job = app.get(job_id)
        assert (job.state, job.attempts) == ("queued", 1)
        assert job.errors[-1].type == "WorkerLost" and "process is gone" in job.errors[-1].message
    assert store.rescue().workers == ()  # nothing more to return: one read again
    app.close()
