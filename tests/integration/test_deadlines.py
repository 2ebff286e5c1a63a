"""Deadline hooks with real worker processes, on both backends: a slow notice and then an
expiry while the worker runs the job; and a worker that was down for longer than both."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import durq
from tests.support.procs import WorkerProc, wait_for

APP = "tests.apps.deadlines:dq"


def hook_lines(path: Path) -> list[tuple[str, int, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        hook, job_id, state, _pid = line.split()
        out.append((hook, int(job_id), state))
    return out


def start(url: str, tmp_path: Path, name: str) -> WorkerProc:
    return WorkerProc(
        APP,
        url,
        tmp_path / f"{name}.log",
        args=["--concurrency", "4", "--lease", "2"],
        env={"HOOKS_FILE": str(tmp_path / "hooks.txt")},
    )


def test_a_running_job_gets_its_slow_notice_then_expires(url: str, tmp_path: Path) -> None:
    dq = durq.Durq(url)
    hooks = tmp_path / "hooks.txt"
    proc = start(url, tmp_path, "w")
    try:
        # enqueued once the worker is up: a job past its deadline before any worker ran it
        # gets only the expiry (the next test), and a loaded machine may take seconds to
        # start the worker's process
        wait_for(lambda: any(e.get("event") == "worker_started" for e in proc.events()), 60,
                 what="the worker to start")  # fmt: skip
        job = dq.enqueue("generate", {"seconds": 60}, notice_after=1.0, deadline_in=3.0)
        wait_for(lambda: len(hook_lines(hooks)) == 2, 30, what="both hooks")
        slow, expire = hook_lines(hooks)
        assert slow == ("slow", job.id, "running")  # noticed while it ran
        assert expire == ("expire", job.id, "expired")
        # the worker stopped the body (issue 11: interrupted as expired, or as lease_lost
        # when its heartbeat met the expiry first), or the body saw its lease revoked
        # and stopped on its own; either way nothing was recorded
        wait_for(
            lambda: any(
                (
                    e.get("event") == "job_interrupted"
                    and e.get("reason") in ("expired", "lease_lost")
                )
                or e.get("event") == "stale_outcome"
                for e in proc.events()
            ),
            30,
            what="the body stopped and its outcome dropped",
        )
        assert dq.get(job.id).state == "expired"
        time.sleep(0.5)  # more sweeps: nothing fires twice
        assert len(hook_lines(hooks)) == 2
        proc.signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        proc.stop()
        dq.close()


def test_a_worker_down_for_longer_than_both_fires_only_the_expiry(url: str, tmp_path: Path) -> None:
    """Like the generation bot after a 20-minute outage: overdue jobs fail on the first
    sweep, without a slow notice first; jobs only past their notice get the notice."""
    dq = durq.Durq(url)
    hooks = tmp_path / "hooks.txt"
    overdue = dq.enqueue("generate", {"seconds": 0}, notice_after=0.5, deadline_in=1.0)
    late = dq.enqueue("generate", {"seconds": 0.2}, notice_after=0.5, deadline_in=120.0)
    time.sleep(1.5)  # no worker runs: the outage
    proc = start(url, tmp_path, "w")
    try:
        wait_for(lambda: len(hook_lines(hooks)) >= 2, 30, what="the hooks")
        assert dq.get(late.id).wait(30) == "done"  # it still runs, after its notice
        time.sleep(0.5)
        got = hook_lines(hooks)
        assert sorted((hook, job_id) for hook, job_id, _ in got) == [
            ("expire", overdue.id),
            ("slow", late.id),
        ]
        assert ("expire", overdue.id, "expired") in got  # and no slow notice for it
        assert dq.get(overdue.id).state == "expired"
        assert dq.get(overdue.id).started_at is None  # expired before any claim
        assert dq.get(overdue.id).noticed_at is None
    finally:
        proc.stop()
        dq.close()


def test_hooks_enqueued_while_no_worker_runs_are_not_lost(url: str, tmp_path: Path) -> None:
    """The expiry commits its hook job with it; a worker started later runs the hook."""
    clock_app = durq.Durq(url)
    hooks = tmp_path / "hooks.txt"
    job = clock_app.enqueue("generate", {"seconds": 0}, deadline_in=0.2)
    time.sleep(0.3)
    assert clock_app.sweep().expired == (job.id,)  # a sweep by a process without the task
    proc = start(url, tmp_path, "w")
    try:
        wait_for(lambda: hook_lines(hooks) == [("expire", job.id, "expired")], 30, what="hook")
    finally:
        proc.stop()
        clock_app.close()


def test_cli_lists_parked_jobs_adopts_them_and_shows_deadlines(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    from tests.support.procs import ROOT

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "durq", *args, "--db", str(tmp_path / "jobs.db")],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=dict(os.environ),
            timeout=60,
        )

    dq = durq.Durq(f"sqlite:///{tmp_path / 'jobs.db'}")
    parked = dq.enqueue("generate", {"seconds": 0}, park=True, deadline_in=900, notice_after=300)
    other = dq.enqueue("generate", {"seconds": 0}, park=True)
    dq.cancel(other.id)
    dq.close()
    out = run("jobs", "list", "--state", "parked", "--json")
    assert out.returncode == 0, out.stderr
    assert [j["id"] for j in json.loads(out.stdout)] == [parked.id]
    shown = json.loads(run("jobs", "show", str(parked.id), "--json").stdout)
    assert shown["deadline"] == parked.deadline and shown["notice_at"] == parked.notice_at
    text = run("jobs", "show", str(parked.id)).stdout
    assert "deadline" in text and "notice at" in text
    out = run("adopt", str(parked.id), str(other.id), "--json")
    assert out.returncode == 1  # the cancelled one is gone
    results = json.loads(out.stdout)
    assert results[0] == {"id": parked.id, "ok": True, "state": "queued"}
    assert results[1]["ok"] is False and "cancelled" in results[1]["error"]
