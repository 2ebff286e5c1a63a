"""Snooze and replay with real worker processes, on both backends: a snooze spends no
attempt and survives a worker restart; max_snoozes bounds a job that never gets ready;
a replayed job runs again on a worker with its old attempts kept in its history."""

from __future__ import annotations

import signal
from pathlib import Path

import durq
from tests.support.procs import WorkerProc, wait_for

APP = "tests.apps.snoozing:dq"


def test_a_snooze_spends_no_attempt_and_survives_a_restart(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    marker = tmp_path / "ready"
    job = app.enqueue("wait_for_file", {"path": str(marker), "seconds": 3.0})
    first = WorkerProc(APP, url, tmp_path / "first.log")
    try:
        wait_for(lambda: app.get(job.id).snoozes == 1, 30, 0.05, "the first snooze")
        first.signal(signal.SIGTERM)
        assert first.wait(30) == 0
    finally:
        first.stop()
    snoozed = app.get(job.id)
    assert (snoozed.state, snoozed.attempts) == ("scheduled", 0)  # no attempt spent
    marker.touch()
    second = WorkerProc(APP, url, tmp_path / "second.log")
    try:
        wait_for(lambda: app.get(job.id).state == "succeeded", 60, 0.05, "the job to succeed")
    finally:
        second.stop()
    done = app.get(job.id)
    assert (done.result, done.attempts, done.snoozes) == ("found", 1, 1)
    assert [e.kind for e in done.errors] == ["snoozed"]
    assert any(e.get("event") == "job_snoozed" for e in first.events())
    app.close()


def test_max_snoozes_fails_a_job_that_never_gets_ready(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    job = app.enqueue("never_ready", {})
    proc = WorkerProc(APP, url, tmp_path / "w.log")
    try:
        wait_for(lambda: app.get(job.id).state == "failed", 60, 0.05, "the job to fail")
    finally:
        proc.stop()
    failed = app.get(job.id)
    assert (failed.snoozes, failed.attempts) == (3, 1)  # 3 snoozes, then the 4th failed it
    assert [e.kind for e in failed.errors] == ["snoozed"] * 3 + ["snooze_limit"]
    assert "max_snoozes=3" in failed.errors[-1].message
    app.close()


def test_replay_of_a_failed_and_a_succeeded_job_keeps_the_old_attempts(
    tmp_path: Path, url: str
) -> None:
    app = durq.Durq(url)
    marker = tmp_path / "fixed"
    broken = app.enqueue("fails_unless", {"path": str(marker)})
    proc = WorkerProc(APP, url, tmp_path / "w.log")
    try:
        wait_for(lambda: app.get(broken.id).state == "failed", 60, 0.05, "the first failure")
        marker.touch()  # the bug is fixed: replay the failed job, then the succeeded one
        app.retry(broken.id)
        wait_for(lambda: app.get(broken.id).state == "succeeded", 60, 0.05, "the replay")
        app.retry(broken.id)
        wait_for(lambda: app.get(broken.id).state == "succeeded", 60, 0.05, "the second replay")
        wait_for(lambda: app.get(broken.id).finished_at is not None, 10, 0.05, "its end")
    finally:
        proc.stop()
    job = app.get(broken.id)
    assert job.attempts == 1  # attempt numbers start again at each replay
    kinds = [(e.attempt, e.kind.split(":")[0]) for e in job.errors]
    assert kinds == [(1, "permanent"), (1, "replayed"), (1, "replayed")]
    assert "the job ended failed after 1 attempt" in job.errors[1].message
    assert "the job ended succeeded after 1 attempt" in job.errors[2].message
    app.close()
