"""Rescue in seconds with real worker processes: a worker killed with SIGKILL has its jobs
restarted by the other worker within seconds (not after its 30 s leases), and a worker
frozen with SIGSTOP and resumed cannot finish the jobs that were taken from it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

import durq
from tests.support.procs import WorkerProc, wait_for

pytestmark = pytest.mark.slow

APP = "tests.apps.basic:dq"


def test_kill_9_of_a_worker_restarts_its_jobs_within_seconds(tmp_path: Path, url: str) -> None:
    """2,000 jobs of 5 ms, two workers; one is killed at 1 s: nothing is lost, and the jobs
    it held start again within 5 s of the kill (bounded at 15 s here: the machine is
    shared). The leases are 30 s, so only the rescue can have returned them."""
    app = durq.Durq(url)

    @app.task(max_attempts=10)
    def sleepy(ms: float) -> float:  # the worker's is tests.apps.basic.sleepy
        return ms

    jobs = sleepy.enqueue_many([{"ms": 5.0} for _ in range(2000)])
    args = ["--concurrency", "2", "--lease", "30", "--worker-id"]
    survivor = WorkerProc(APP, url, tmp_path / "survivor.log", [*args, "survivor"])
    victim = WorkerProc(APP, url, tmp_path / "victim.log", [*args, "victim"])
    try:
        wait_for(
            lambda: any(j.worker_id == "victim" for j in app.jobs(state="running", limit=100)),
            30,
            0.01,
            "the victim to hold jobs",
        )
        time.sleep(1.0)
        held = {j.id for j in app.jobs(state="running", limit=1000) if j.worker_id == "victim"}
        killed_at = time.time()
        victim.kill()
        wait_for(
            lambda: len(app.jobs(state="succeeded", limit=3000)) == 2000,
            120,
            0.1,
            "all 2,000 jobs to succeed",
        )
    finally:
        victim.stop()
        survivor.stop()
    done = app.jobs(state="succeeded", limit=3000)
    assert {j.id for j in done} == {j.id for j in jobs}  # none lost
    rescued = [j for j in done if any(e.type == "WorkerLost" for e in j.errors)]
    assert rescued, f"no job of the victim was rescued (it held {len(held)} jobs)"
    assert not any(e.type == "LeaseExpired" for j in done for e in j.errors)
    returned = max(e.at for j in rescued for e in j.errors if e.type == "WorkerLost")
    restarted = max(float(j.started_at or 0.0) for j in rescued)
    print(
        f"\nrescue: {len(rescued)} jobs of the killed worker returned "
        f"{returned - killed_at:.2f} s and restarted {restarted - killed_at:.2f} s after the kill"
    )
    assert restarted - killed_at < 15.0
    assert all(j.worker_id == "survivor" for j in rescued)


def test_a_frozen_worker_resumed_after_10_s_cannot_finish_the_jobs_taken_from_it(
    tmp_path: Path, url: str
) -> None:
    app = durq.Durq(url)
    # bodies of 12 s (monotonic time, which runs on while the process is stopped): after the
    # 10 s freeze they still run for about 2 s, so the worker must notice it lost them
    jobs = [app.enqueue("long", {"seconds": 12.0}) for _ in range(3)]
    frozen = WorkerProc(
        APP, url, tmp_path / "frozen.log", ["--concurrency", "3", "--worker-id", "frozen"]
    )
    other: WorkerProc | None = None
    try:
        wait_for(
            lambda: all(app.get(j.id).state == "running" for j in jobs),
            30,
            0.02,
            "the frozen worker to start the jobs",
        )
        frozen.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        other = WorkerProc(
            APP, url, tmp_path / "other.log", ["--concurrency", "3", "--worker-id", "other"]
        )
        time.sleep(max(0.0, 10.0 - (time.monotonic() - stopped_at)))
        frozen.signal(signal.SIGCONT)
        wait_for(
            lambda: all(app.get(j.id).state == "succeeded" for j in jobs),
            60,
            0.1,
            "the jobs to succeed",
        )
        time.sleep(3.0)  # the frozen worker's bodies end ~2 s after it resumed
        for j in jobs:
            job = app.get(j.id)
            # finished by the other worker, in the attempt after the rescue: the frozen
            # worker's late outcome was refused (its token was cleared by the rescue)
            assert job.worker_id == "other" and job.attempts == 2, job
            assert job.errors[-1].type == "WorkerLost"
        frozen.signal(signal.SIGTERM)  # a clean stop flushes its buffered event lines
        assert frozen.wait(60) == 0
    finally:
        frozen.signal(signal.SIGCONT)
        frozen.stop()
        if other is not None:
            other.stop()
    names = [e.get("event") for e in frozen.events()]
    assert "worker_fenced" in names  # it noticed at its first beat that it was rescued
    # each taken attempt's body was stopped as lease_lost (by its heartbeat, which also logs
    # lease_lost, or first by its cancel watch, which sees the rescue), or, had its body
    # returned first, its outcome was refused (stale_outcome); none counted (above)
    lost = {e.get("id") for e in frozen.events() if e.get("event") == "lease_lost"}
    stale = {e.get("id") for e in frozen.events() if e.get("event") == "stale_outcome"}
    interrupted = {
        e.get("id")
        for e in frozen.events()
        if e.get("event") == "job_interrupted" and e.get("reason") == "lease_lost"
    }
    assert interrupted and interrupted | stale == {j.id for j in jobs}, (interrupted, stale)
    assert lost <= interrupted, (lost, interrupted)
