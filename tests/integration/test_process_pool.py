"""The process pool (issue 11, item 1, and the pool's part of items 2 and 3) with real
``durq worker --pool processes`` processes: a child that dies (SIGKILL, segfault,
``os._exit``, over its memory limit) retries or fails only its own job and is replaced;
timeouts stop the body and its process group; recycling; shutdown leaves no process.

Tasks: tests/apps/pool.py. Each test stops its worker even when it fails (``workers``).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import durq
from tests.support.procs import wait_for, workers

APP = "tests.apps.pool:dq"


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def group_empty(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def pool_worker(url: str, tmp_path: Path, *args: str) -> dict[str, object]:
    marks = tmp_path / "marks"
    marks.mkdir(exist_ok=True)
    return {
        "app": APP,
        "url": url,
        "log": tmp_path / "worker.log",
        "args": ["--pool", "processes", "--lease", "5", "--grace", "5", *args],
        "env": {"POOL_MARKS": str(marks)},
    }


def app_for(url: str) -> durq.Durq:
    from tests.apps import pool

    pool.dq.url = url
    pool.dq.close()
    return pool.dq


@pytest.fixture
def pool_app(url: str) -> durq.Durq:
    return app_for(url)


def wait_done(app: durq.Durq, ids: list[int], timeout: float) -> None:
    finished = ("succeeded", "failed", "cancelled", "expired")
    wait_for(
        lambda: all(app.get(i).state in finished for i in ids),
        timeout,
        interval=0.1,
        what=f"jobs {ids} to finish",
    )


def test_dead_children_retry_only_their_own_job(
    url: str, pool_app: durq.Durq, tmp_path: Path
) -> None:
    """SIGKILL mid-job, a segfault and os._exit: each job is retried with a clear error,
    every other job succeeds once, the pool is back to 2 children, the worker runs on."""
    from tests.apps import pool

    marks = tmp_path / "marks"
    held = pool.hold.enqueue(n=0, seconds=3).id
    crashed = pool.segfault_once.enqueue(n=1).id
    exited = pool.exit_hard.enqueue(n=2).id
    others = [pool.whoami.enqueue(n=i).id for i in range(20)]
    with workers(pool_worker(url, tmp_path, "-c", "2")) as (w,):
        wait_for(lambda: (marks / "start-0").exists(), 60, what="the held job to start")
        victim = int((marks / "start-0").read_text())
        assert victim in children_of(w.pid)
        os.kill(victim, signal.SIGKILL)
        wait_done(pool_app, [held, crashed, exited, *others], 90)
        for job_id, how in ((held, "signal 9"), (crashed, "signal 11"), (exited, "exit code 3")):
            job = pool_app.get(job_id)
            assert job.state == "succeeded", (job_id, job.errors)
            assert job.attempts == 2
            assert len(job.errors) == 1
            assert f"worker child died: {how}" in job.errors[0].message
        for job_id in others:
            job = pool_app.get(job_id)
            assert (job.state, job.attempts, job.errors) == ("succeeded", 1, [])
            assert job.result != w.pid  # ran in a child, not in the worker
        wait_for(lambda: len(children_of(w.pid)) == 2, 60, what="the pool back to 2 children")
        assert victim not in children_of(w.pid)
        assert w.proc.poll() is None  # the worker keeps running
        late = pool.whoami.enqueue(n=99).id
        wait_done(pool_app, [late], 60)
        assert pool_app.get(late).state == "succeeded"


def test_memory_past_the_limit_fails_only_that_job(
    url: str, pool_app: durq.Durq, tmp_path: Path
) -> None:
    from tests.apps import pool

    big = pool.balloon.enqueue(n=0, mb=400).id
    others = [pool.whoami.enqueue(n=i).id for i in range(10)]
    with workers(pool_worker(url, tmp_path, "-c", "2", "--max-memory-per-child", "150")) as (w,):
        wait_done(pool_app, [big, *others], 90)
        job = pool_app.get(big)
        assert job.state == "failed"  # max_attempts=1
        assert "over max_memory_per_child 150 MB" in job.errors[-1].message
        assert all(pool_app.get(i).state == "succeeded" for i in others)
        wait_for(lambda: len(children_of(w.pid)) == 2, 60, what="the pool back to 2 children")
        assert w.proc.poll() is None


def test_timeouts_stop_the_body_and_free_the_slot(
    url: str, pool_app: durq.Durq, tmp_path: Path
) -> None:
    """20 jobs of timeout=0.3 sleeping 5 s then writing a marker: no marker is ever
    written, and each job ends (its slot free) before its body's 5 s sleep would have
    (about 0.3 s plus the child's stop on an idle machine; the bound leaves room for a
    loaded one)."""
    from tests.apps import pool

    marks = tmp_path / "marks"
    ids = [pool.overrun.enqueue(n=i).id for i in range(20)]
    with workers(pool_worker(url, tmp_path, "-c", "4")) as (w,):
        wait_done(pool_app, ids, 120)
        for job_id in ids:
            job = pool_app.get(job_id)
            assert job.state == "failed"
            assert job.errors[-1].kind == "timeout"
            assert "timeout of 0.3 s" in job.errors[-1].message
            assert job.started_at is not None and job.finished_at is not None
            assert job.finished_at - job.started_at < 4.5
        time.sleep(5.5)  # past the bodies' 5 s sleep
        assert not list(marks.glob("late-*"))
        assert w.proc.poll() is None
        wait_for(lambda: len(children_of(w.pid)) == 4, 60, what="the pool back to 4 children")


def test_a_timed_out_body_leaves_no_subprocess(db_url: str, tmp_path: Path) -> None:
    from tests.apps import pool

    app = app_for(db_url)
    marks = tmp_path / "marks"
    job_id = pool.spawn_sleeper.enqueue(n=0).id
    with workers(pool_worker(db_url, tmp_path, "-c", "1")):
        wait_for(lambda: (marks / "sleeper-0").exists(), 60, what="the subprocess to start")
        sleeper = int((marks / "sleeper-0").read_text())
        wait_done(app, [job_id], 60)
        assert app.get(job_id).errors[-1].kind == "timeout"
        wait_for(lambda: not alive(sleeper), 10, what=f"sleep 60 (pid {sleeper}) to be gone")


def test_max_jobs_per_child_recycles(db_url: str, tmp_path: Path) -> None:
    from tests.apps import pool

    app = app_for(db_url)
    ids = [pool.whoami.enqueue(n=i).id for i in range(10)]
    with workers(pool_worker(db_url, tmp_path, "-c", "1", "--max-jobs-per-child", "2")) as (w,):
        wait_done(app, ids, 120)
        pids = [app.get(i).result for i in ids]
        # no child ran more than 2 jobs (one may run fewer: a job queued behind a body can
        # be handed to the next child), so 10 jobs took at least 5 children
        assert max(pids.count(p) for p in pids) <= 2 and len(set(pids)) >= 5, pids
        assert w.pid not in pids
        wait_for(lambda: len(children_of(w.pid)) == 1, 60, what="one child")


def test_ctx_and_async_tasks_under_the_pool(db_url: str, tmp_path: Path) -> None:
    """Progress and steps written from a child land in the store; async tasks stay on
    the worker's own event loop."""
    from tests.apps import pool

    app = app_for(db_url)
    stepped = pool.progress_in_child.enqueue(n=21).id
    looped = pool.async_pid.enqueue(n=0).id
    with workers(pool_worker(db_url, tmp_path, "-c", "2")) as (w,):
        wait_done(app, [stepped, looped], 60)
        job = app.get(stepped)
        assert (job.state, job.result) == ("succeeded", 42)
        assert job.progress is not None and job.progress["message"] == "half"
        assert app.get(looped).result == w.pid


@pytest.mark.parametrize("seconds", [1.0, 60.0])
def test_shutdown_finishes_or_kills_and_leaves_no_process(
    db_url: str, tmp_path: Path, seconds: float
) -> None:
    """SIGTERM to the worker: a body that ends within the grace finishes (its job
    succeeds); one that does not is killed and its job given back; either way no
    process of the pool is left."""
    from tests.apps import pool

    app = app_for(db_url)
    marks = tmp_path / "marks"
    job_id = pool.hold.enqueue(n=0, seconds=seconds).id
    spec = pool_worker(db_url, tmp_path, "-c", "2")
    spec["args"] = [*spec["args"], "--grace", "3"]  # type: ignore[misc]
    with workers(spec) as (w,):
        wait_for(lambda: (marks / "start-0").exists(), 60, what="the job to start")
        kids = children_of(w.pid)
        assert len(kids) == 2
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0
        for kid in kids:
            wait_for(lambda kid=kid: group_empty(kid), 10, what=f"group {kid} to be empty")
    job = app.get(job_id)
    if seconds < 3:
        assert job.state == "succeeded"
        assert (marks / "end-0").exists()
    else:
        assert job.state == "queued"  # given back (a free requeue), never run to its end
        assert not (marks / "end-0").exists()


def test_worker_options_are_checked(db_url: str) -> None:
    app = app_for(db_url)
    with pytest.raises(durq.ConfigError, match="pool must be"):
        app.worker(pool="forks")
    with pytest.raises(durq.ConfigError, match="need pool='processes'"):
        app.worker(max_jobs_per_child=3)


def test_interrupt_stops_the_body_before_its_outcome(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ProcessPool.interrupt (what a cancel reaches): the child's group is killed, the
    outcome is recorded only after the reap, the body never reaches its end, and a new
    child takes its place. An in-process worker, so the test holds the pool itself."""
    import threading

    from tests.apps import pool

    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("POOL_MARKS", str(marks))  # read by the children at import
    app = app_for(db_url)
    job_id = pool.hold.enqueue(n=0, seconds=30).id
    w = app.worker(concurrency=1, pool="processes", lease=5, grace=5)
    runner = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    runner.start()
    try:
        wait_for(lambda: (marks / "start-0").exists(), 60, what="the body to start")
        victim = int((marks / "start-0").read_text())
        assert w._pool is not None
        asked = time.monotonic()
        token = app.store.get(job_id).lease_token
        assert token is not None
        assert not w._pool.interrupt(job_id, token ^ 1, "cancelled")  # not this attempt
        assert w._pool.interrupt(job_id, token, "cancelled")
        assert not w._pool.interrupt(10_000, token, "cancelled")  # a job it does not hold
        wait_for(lambda: app.get(job_id).state == "failed", 10, what="the outcome")
        assert time.monotonic() - asked < 5
        assert not alive(victim)  # reaped before the outcome was written
        assert app.get(job_id).errors[-1].kind == "cancelled"
        wait_for(lambda: len(w._pool.pids()) == 1, 30, what="a new child")
        assert victim not in w._pool.pids()
        assert not (marks / "end-0").exists()
    finally:
        w.request_stop()
        runner.join(30)
    assert not runner.is_alive()


def test_children_die_with_a_killed_worker(db_url: str, tmp_path: Path) -> None:
    """kill -9 of the worker: its children go too (Linux: PR_SET_PDEATHSIG), even one in
    the middle of a job; the job comes back after its lease like any other."""
    from tests.apps import pool

    app = app_for(db_url)
    marks = tmp_path / "marks"
    job_id = pool.hold.enqueue(n=0, seconds=60).id
    with workers(pool_worker(db_url, tmp_path, "-c", "2")) as (w,):
        wait_for(lambda: (marks / "start-0").exists(), 60, what="the job to start")
        kids = children_of(w.pid)
        assert len(kids) == 2
        w.kill()
        for kid in kids:
            wait_for(lambda kid=kid: not alive(kid), 10, what=f"child {kid} to be gone")
    assert app.get(job_id).state == "running"  # until its lease runs out; nothing lost


SCRIPT = """
import os, sys
import durq

dq = durq.Durq(sys.argv[1])

@dq.task
def pid() -> int:
    return os.getpid()

if __name__ == "__main__":
    ids = [pid.enqueue().id for _ in range(4)]
    dq.worker(concurrency=2, pool="processes", lease=5).run(
        install_signals=False, stop_when_idle=True
    )
    print(os.getpid(), *[dq.get(i).result for i in ids])
"""


def test_an_app_defined_in_the_script_that_runs_the_worker(db_url: str, tmp_path: Path) -> None:
    """The children import a script's own app from its file (it lives in __main__)."""
    import subprocess
    import sys

    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [sys.executable, str(script), db_url], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    me, *pids = (int(x) for x in done.stdout.split())
    assert len(pids) == 4 and me not in pids
