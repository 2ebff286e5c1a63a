"""Crashes around a batch's completion (issue 4 item 2, case 14), on both backends.

1. The worker dies at the ``batch_complete`` failpoint: the last member's state change and
   the callback job are in one transaction, so the crash rolls both back; after a restart
   the member is recovered and re-run, and the callback runs exactly once.
2. The worker dies while running the callback itself: the callback job is recovered and
   retried; it completes once, and the batch does not fire a second time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import durq
from tests.integration.test_batches import runs
from tests.support.procs import WorkerProc, wait_for

pytestmark = pytest.mark.slow

APP = "tests.apps.batches:dq"
ARGS = ["--concurrency", "4", "--lease", "1", "--heartbeat", "0.2", "--grace", "1"]


def test_a_crash_between_the_last_member_and_its_callback_loses_no_callback(
    tmp_path: Path, url: str
) -> None:
    app = durq.Durq(url)
    out = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(out)}
    with app.batch(on_complete="on_done", meta={"run": 1}) as batch:
        for i in range(12):
            app.enqueue("member", {"n": i, "fail": i == 4})
    crashing = WorkerProc(
        APP, url, tmp_path / "crash.log", ARGS, {**env, "DURQ_FAILPOINTS": "batch_complete=exit"}
    )
    try:
        assert crashing.wait(30) == 137, "the batch_complete failpoint did not fire"
    finally:
        crashing.stop()
    status = app.batch_status(batch.id)
    assert (status.state, status.fired) == ("open", 0)  # rolled back with the member
    assert runs(out)[1] == []
    restarted = WorkerProc(APP, url, tmp_path / "after.log", ARGS, env)
    try:
        wait_for(lambda: app.batch_status(batch.id).state == "done", 60, 0.1, "the batch")
        wait_for(lambda: len(runs(out)[1]) >= 1, 30, 0.1, "the callback to run")
    finally:
        restarted.stop()
    members, calls = runs(out)
    assert calls == [
        {
            "batch_id": batch.id,
            "outcome": "partial",
            "counts": {"failed": 1, "succeeded": 11},
            "meta": {"run": 1},
        }
    ]
    assert app.batch_status(batch.id).fired == 1
    assert len(app.jobs(task="on_done")) == 1
    assert len(set(members)) == 12  # every member ran; the rolled-back one ran again
    assert len(members) > 12


def test_a_worker_killed_inside_the_callback_runs_it_to_completion_once(
    tmp_path: Path, url: str
) -> None:
    app = durq.Durq(url)
    out = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(out)}
    with app.batch(on_complete="on_done") as batch:
        for i in range(6):
            app.enqueue("member", {"n": i})
    dying = WorkerProc(APP, url, tmp_path / "dying.log", ARGS, {**env, "DIE_IN_CALLBACK": "1"})
    try:
        assert dying.wait(30) == 3, "the callback did not kill its worker"
    finally:
        dying.stop()
    restarted = WorkerProc(APP, url, tmp_path / "after.log", ARGS, env)
    try:
        wait_for(lambda: len(runs(out)[1]) == 1, 30, 0.1, "the callback to complete")
        (callback,) = app.jobs(task="on_done")
        wait_for(lambda: callback.refresh().state == "succeeded", 30, 0.1, "its job")
    finally:
        restarted.stop()
    assert "callback-died" in out.read_text()
    (call,) = runs(out)[1]
    assert (call["outcome"], call["counts"]) == ("completed", {"succeeded": 6})
    status = app.batch_status(batch.id)
    assert (status.fired, status.state) == (1, "done")
