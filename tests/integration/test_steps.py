"""Steps with real worker processes (issue 4 item 8): a job that fails after step 2 of 3
and runs again (retry, a killed worker, ``dq.retry``) runs steps 1 and 2 zero more times."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import durq
from tests.support.procs import WorkerProc, wait_for

APP = "tests.apps.steps_results:dq"
ARGS = ["--concurrency", "2", "--lease", "2", "--grace", "1"]


def calls(path: Path, job_id: int) -> Counter[str]:
    """How often each step's side effect ran for this job."""
    if not path.exists():
        return Counter()
    out: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        name, job, _attempt, _pid = line.split()
        if int(job) == job_id:
            out[name] += 1
    return out


def test_a_retried_job_does_not_repeat_its_recorded_steps(tmp_path: Path, url: str) -> None:
    calls_file = tmp_path / "calls.txt"
    app = durq.Durq(url)
    jobs = [app.enqueue("three_steps", {"mode": "transient"}) for _ in range(5)]
    w = WorkerProc(APP, url, tmp_path / "w.log", ARGS, {"CALLS_FILE": str(calls_file)})
    try:
        results = [durq.Durq(url).get(j.id).wait(timeout=60) for j in jobs]
    finally:
        w.stop()
    assert results == [["one-done", "two-done", "three-done"]] * 5
    for j in jobs:
        done = app.get(j.id)
        assert done.state == "succeeded" and done.attempts == 2
        assert [e.message for e in done.errors] == ["fails after step 2 of 3"]
        assert calls(calls_file, j.id) == {"one": 1, "two": 1, "three": 1}
        steps = {s.name: s.attempt for s in app.steps(j.id)}
        assert steps == {"one": 1, "two": 1, "three": 2}


def test_a_worker_killed_after_step_two_loses_no_step(tmp_path: Path, url: str) -> None:
    """The first attempt's process dies (os._exit) after recording steps 1 and 2; the
    reaper recovers the job and the next worker runs only step 3."""
    calls_file = tmp_path / "calls.txt"
    env = {"CALLS_FILE": str(calls_file)}
    app = durq.Durq(url)
    job = app.enqueue("three_steps", {"mode": "kill"})
    first = WorkerProc(
        APP, url, tmp_path / "first.log", ["--concurrency", "1", "--lease", "1"], env
    )
    try:
        assert first.wait(60) == 3  # the task killed its own worker
    finally:
        first.stop()
    assert calls(calls_file, job.id) == {"one": 1, "two": 1}
    assert app.get(job.id).state == "running"  # until its lease expires
    second = WorkerProc(
        APP, url, tmp_path / "second.log", ["--concurrency", "1", "--lease", "1"], env
    )
    try:
        result = app.get(job.id).wait(timeout=60)
    finally:
        second.stop()
    assert result == ["one-done", "two-done", "three-done"]
    done = app.get(job.id)
    assert done.attempts == 2 and [e.kind for e in done.errors] == ["lease_lost"]
    assert calls(calls_file, job.id) == {"one": 1, "two": 1, "three": 1}


def test_dq_retry_of_a_failed_job_resumes_after_its_steps(tmp_path: Path, url: str) -> None:
    calls_file = tmp_path / "calls.txt"
    gate = tmp_path / "gate"
    app = durq.Durq(url)
    job = app.enqueue("three_steps", {"mode": "permanent", "gate": str(gate)})
    w = WorkerProc(APP, url, tmp_path / "w.log", ARGS, {"CALLS_FILE": str(calls_file)})
    try:
        try:
            app.get(job.id).wait(timeout=60)
            raise AssertionError("the job should have failed")
        except durq.JobFailed as exc:
            assert exc.job.state == "failed" and exc.error.kind.startswith("permanent")
        assert calls(calls_file, job.id) == {"one": 1, "two": 1}
        gate.touch()
        app.retry(job.id)  # keeps the steps: the job resumes after step 2
        assert app.get(job.id).wait(timeout=60) == ["one-done", "two-done", "three-done"]
    finally:
        w.stop()
    assert calls(calls_file, job.id) == {"one": 1, "two": 1, "three": 1}


def test_the_worker_pruner_deletes_old_finished_jobs_and_their_steps(
    tmp_path: Path, url: str
) -> None:
    calls_file = tmp_path / "calls.txt"
    gate = tmp_path / "gate"
    app = durq.Durq(url)
    done = app.enqueue("three_steps", {"mode": "none"})
    stranded = app.enqueue("no_such_task", {}, queue="default")  # queued for ever
    later = app.enqueue("add", {"a": 1, "b": 2}, delay=3600)  # scheduled
    running = app.enqueue("halfway", {"gate": str(gate)})
    args = [*ARGS, "--retain", "succeeded=1s", "--prune-interval", "0.2"]
    w = WorkerProc(APP, url, tmp_path / "w.log", args, {"CALLS_FILE": str(calls_file)})
    try:
        wait_for(lambda: app.store.get(done.id) is None, 60, what="the pruner to delete the job")
        assert app.store.list_steps(done.id) == []
        assert app.get(running.id).state == "running"
        assert app.get(stranded.id).state == "queued"
        assert app.get(later.id).state == "scheduled"
        gate.touch()
        assert app.get(running.id).wait(timeout=30) == "finished"
    finally:
        w.stop()
    pruned = [e for e in w.events() if e.get("event") == "jobs_pruned"]
    assert pruned and pruned[0]["states"]["succeeded"] >= 1
