"""What an adversarial pass broke in the process pool (issue 11 hardening, items 3-5),
with real worker and child processes:

- ``kill -9`` of a ``--pool processes`` worker left its bodies' subprocesses running
  (``PR_SET_PDEATHSIG`` = SIGKILL killed only the child);
- after the worker's stop the pool still started the jobs it held (SIGTERM at 90.03, jobs
  started at 93.48);
- the memory kill said ``killed at 0 MB`` (the size was read after the child died) and
  went through SIGTERM and the kill grace.

Tasks: tests/apps/pool.py. Each test stops what it starts even when it fails.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.integration.test_process_pool import (
    alive,
    app_for,
    children_of,
    pool_worker,
    wait_done,
)
from tests.support.procs import wait_for, workers


def test_kill_9_of_the_worker_leaves_no_subprocess_of_a_body(db_url: str, tmp_path: Path) -> None:
    """The body started 3 ``sleep 300`` in its child's group: when the worker is SIGKILLed
    the child's parent-death signal kills the whole group, the sleepers with it."""
    from tests.apps import pool

    app = app_for(db_url)
    marks = tmp_path / "marks"
    pool.spawn_group.enqueue(n=0, count=3)
    sleepers: list[int] = []
    try:
        with workers(pool_worker(db_url, tmp_path, "-c", "2")) as (w,):
            wait_for(lambda: (marks / "group-0").exists(), 60, what="the sleepers to start")
            sleepers = [int(p) for p in (marks / "group-0").read_text().split()]
            assert len(sleepers) == 3 and all(alive(p) for p in sleepers)
            kids = children_of(w.pid)
            w.kill()
            for pid in [*kids, *sleepers]:
                wait_for(lambda pid=pid: not alive(pid), 15, what=f"pid {pid} to be gone")
    finally:
        for pid in sleepers:  # never leave one behind, even when the test fails
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert app.get(1).state == "running"  # until its lease runs out; nothing lost


def test_memory_kill_reports_the_size_found_and_is_a_sigkill(db_url: str, tmp_path: Path) -> None:
    """Over ``--max-memory-per-child 150`` while the body holds 300 MB: the error gives the
    size read when the limit was found exceeded, and the child ends by SIGKILL at once
    (not SIGTERM and the kill grace)."""
    from tests.apps import pool

    app = app_for(db_url)
    big = pool.balloon.enqueue(n=0, mb=300).id
    spec = pool_worker(db_url, tmp_path, "-c", "1", "--max-memory-per-child", "150")
    with workers(spec) as (w,):
        wait_done(app, [big], 90)
        wait_for(lambda: len(children_of(w.pid)) == 1, 60, what="the pool back to 1 child")
        log = w.log.read_text(errors="replace")
    message = app.get(big).errors[-1].message
    assert "over max_memory_per_child 150 MB" in message
    killed_at = int(message.split("killed at ")[1].split(" MB")[0])
    assert 150 < killed_at <= 400, message
    replaced = [line for line in log.splitlines() if "pool_child_replaced" in line]
    assert len(replaced) == 1, replaced
    assert '"reason": "memory"' in replaced[0] and '"exit": "signal 9 (SIGKILL)"' in replaced[0]


@pytest.mark.parametrize("grow", ["while_it_runs", "before_the_start"])
def test_no_job_held_by_the_pool_starts_after_the_stop(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grow: str
) -> None:
    """The pool holds 10 jobs behind a running body (its slots grown for short jobs) when
    the worker is asked to stop: the body finishes within the grace, none of the 10 starts
    (before, the pool sent them to the child as it freed), and they are back in the queue
    with no attempt spent. Grown while the body runs, the pool holds them unsent; grown
    before the start, they went to the child behind the body in the same write (and are
    asked back, at once or at the stop). An in-process worker, so the test can see the
    pool hold them."""
    from tests.apps import pool

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("POOL_MARKS", str(marks))  # read by the children at import
    app = app_for(db_url)
    held = pool.hold.enqueue(n=0, seconds=2).id
    waiting = [pool.stamp.enqueue(n=i).id for i in range(10)]
    w = app.worker(concurrency=1, pool="processes", lease=10, grace=10)
    if grow == "before_the_start":
        w._pool_short(True)  # as after a run of short bodies: 16 slots for the one child
    runner = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    runner.start()
    try:
        wait_for(lambda: (marks / "start-0").exists(), 60, what="the long body to start")
        assert w._pool is not None
        if grow == "while_it_runs":
            w._pool_short(True)
        wait_for(lambda: len(w._pool._held) == 11, 30, what="the pool to hold the 10 jobs")
        stopped = time.time()
        stopping = threading.Thread(target=w.request_stop)
        stopping.start()
        stopping.join(10)
        runner.join(60)
        assert not runner.is_alive()
    finally:
        w.request_stop()
        runner.join(60)
    assert (marks / "end-0").exists()  # the running body had its grace
    assert app.get(held).state == "succeeded"
    started = {p.name: float(p.read_text()) - stopped for p in marks.glob("stamp-*")}
    assert not started, f"started (seconds after the stop): {started}"
    for job_id in waiting:
        job = app.get(job_id)
        assert (job.state, job.attempts, job.errors) == ("queued", 0, []), job_id
    assert sorted(j.id for j in app.jobs(state="queued", limit=100)) == waiting
