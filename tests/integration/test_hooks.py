"""on_fail hooks, hook queues and will_retry with real worker processes, on both backends.

Every path that ends a job ``failed`` runs its task's ``on_fail`` once: a permanent error,
retries exhausted, the reaper after a SIGKILL, a charged shutdown release after SIGTERM.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import durq
from tests.apps.hooks import app as producer
from tests.support.procs import WorkerProc, wait_for

APP = "tests.apps.hooks:dq"


def lines(path: Path, what: str) -> list[tuple[int, str]]:
    """(job id, state or answer) of the lines starting with ``what``."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[0] == what:
            out.append(
                (
                    int(parts[1]),
                    " ".join(parts[2:-1]) if what != "will_retry" else " ".join(parts[2:]),
                )
            )
    return out


def start(url: str, tmp_path: Path, name: str, *args: str) -> WorkerProc:
    return WorkerProc(
        APP,
        url,
        tmp_path / f"{name}.log",
        args=["--concurrency", "4", "--lease", "1", *args],
        env={"HOOKS_FILE": str(tmp_path / "hooks.txt")},
    )


def test_failures_run_on_fail_once_and_will_retry_matches_the_worker(
    url: str, tmp_path: Path
) -> None:
    dq = producer(url)
    hooks = tmp_path / "hooks.txt"
    proc = start(url, tmp_path, "w")
    try:
        permanent = dq.enqueue("boom", {"message": "permanent: bad input"})
        classified = dq.enqueue("boom", {"message": "gone for good"})  # the app's rule
        flaky = dq.enqueue("boom", {"message": "flaky"})
        ok = dq.enqueue("sleepy", {"seconds": 0})
        wait_for(lambda: len(lines(hooks, "fail")) == 3, 30, what="three on_fail hooks")
        assert dq.get(ok.id).wait(30) == "done"
        assert sorted(lines(hooks, "fail")) == sorted(
            [(permanent.id, "failed"), (classified.id, "failed"), (flaky.id, "failed")]
        )
        # what the task was told matches what the worker did
        assert sorted(lines(hooks, "will_retry")) == sorted(
            [
                (permanent.id, "1 False"),
                (classified.id, "1 False"),
                (flaky.id, "1 True"),
                (flaky.id, "2 True"),
                (flaky.id, "3 False"),
            ]
        )
        assert [dq.get(j.id).attempts for j in (permanent, classified, flaky)] == [1, 1, 3]
        for job in (permanent, classified, flaky):
            hook = dq.find("default", f"durq.fail:{job.id}")
            assert hook is not None and hook.wait(30) is None and hook.state == "succeeded"
        time.sleep(0.5)
        assert len(lines(hooks, "fail")) == 3  # once each
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
        dq.close()


def test_the_reaper_and_a_charged_release_run_on_fail(url: str, tmp_path: Path) -> None:
    """SIGKILL with a job on its last attempt: the next worker's reaper fails it and its hook
    runs. SIGTERM with --free-requeues 0 and no grace: the release fails the job and the
    next worker runs its hook."""
    dq = producer(url)
    hooks = tmp_path / "hooks.txt"
    by_name = durq.Durq(url)  # a producer without the task: no flag; the reaper knows it
    killed = by_name.enqueue("sleepy", {"seconds": 60}, max_attempts=1)
    by_name.close()
    proc = start(url, tmp_path, "w1")
    try:
        wait_for(lambda: dq.get(killed.id).state == "running", 30, what="the job to start")
        proc.kill()
    finally:
        proc.stop()
    released = dq.enqueue("sleepy", {"seconds": 60})
    proc = start(url, tmp_path, "w2", "--free-requeues", "0", "--grace", "0")
    try:
        wait_for(lambda: lines(hooks, "fail") == [(killed.id, "failed")], 30, what="reaped")
        assert dq.get(killed.id).last_error.kind == "lease_lost"  # type: ignore[union-attr]
        wait_for(lambda: dq.get(released.id).state == "running", 30, what="the second job")
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
    assert dq.get(released.id).state == "failed"
    assert dq.find("default", f"durq.fail:{released.id}") is not None  # committed with it
    proc = start(url, tmp_path, "w3")
    try:
        wait_for(lambda: len(lines(hooks, "fail")) == 2, 30, what="the release's hook")
        assert lines(hooks, "fail")[1] == (released.id, "failed")
    finally:
        proc.stop()
        dq.close()


def test_hooks_on_the_hook_queue_run_while_the_task_queue_is_paused(
    url: str, tmp_path: Path
) -> None:
    dq = producer(url)
    hooks = tmp_path / "hooks.txt"
    proc = start(url, tmp_path, "w")
    try:
        # enqueued once the worker is up: on a loaded machine its start can take longer
        # than the job's 2 s deadline, and a job expired before it ran never starts
        wait_for(lambda: any(e.get("event") == "worker_started" for e in proc.events()), 60,
                 what="the worker to start")  # fmt: skip
        running = dq.enqueue("paused_work", {"seconds": 60}, deadline_in=2.0)
        wait_for(lambda: dq.get(running.id).state == "running", 30, what="the job to start")
        dq.pause("work", "maintenance")
        waiting = dq.enqueue("paused_work", {"seconds": 0}, deadline_in=1.0)
        wait_for(lambda: len(lines(hooks, "expire")) == 2, 30, what="both expiry hooks")
        assert sorted(lines(hooks, "expire")) == sorted(
            [(running.id, "expired"), (waiting.id, "expired")]
        )
        assert dq.get(waiting.id).started_at is None  # the queue stayed paused
        assert dq.find("hooks", f"durq.expire:{running.id}") is not None
        assert dq.find("work", f"durq.expire:{running.id}") is None
    finally:
        proc.stop()
        dq.close()
