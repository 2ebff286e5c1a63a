"""Pause with real worker processes (issue 4 item 4): paused queues are not claimed, running
jobs finish, and tasks raising PauseQueue put their jobs back without spending an attempt,
pause the queue (source auto) and raise one alert however many jobs hit it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import durq
from tests.support.procs import ROOT, WorkerProc, wait_for

APP = "tests.apps.pausing:dq"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_paused_queue_is_not_claimed_and_running_jobs_finish(
    make_any: Callable[..., durq.Durq], url: str, tmp_path: Path
) -> None:
    dq = make_any()
    runs = tmp_path / "runs.txt"
    env = {"RUNS_FILE": str(runs), "QUOTA_OK": str(tmp_path / "ok")}
    running = dq.enqueue("slow", {"seconds": 1.5}, queue="slow")
    proc = WorkerProc(APP, url, tmp_path / "w.log", ["--queues", "slow"], env=env)
    try:
        wait_for(lambda: dq.get(running.id).state == "running", 20, what="slow job to start")
        assert dq.pause("slow", "maintenance") is True
        waiting = [dq.enqueue("quick", {"n": i}, queue="slow") for i in range(3)]
        wait_for(lambda: dq.get(running.id).state == "succeeded", 20, what="running job to end")
        time.sleep(1.0)  # several idle claims: none may take a job of the paused queue
        for job in waiting:
            j = dq.get(job.id)
            assert (j.state, j.attempts) == ("queued", 0)
        assert sum(1 for line in _lines(runs) if line.startswith("start")) == 1
        assert dq.resume("slow") is True
        wait_for(
            lambda: all(dq.get(j.id).state == "succeeded" for j in waiting),
            20,
            what="jobs to run after resume",
        )
    finally:
        proc.stop()


def test_pause_queue_from_five_jobs_at_once_requeues_them_and_alerts_once(
    make_any: Callable[..., durq.Durq], url: str, tmp_path: Path
) -> None:
    dq = make_any()
    runs, alerts, ok = tmp_path / "runs.txt", tmp_path / "alerts.txt", tmp_path / "ok"
    env = {
        "RUNS_FILE": str(runs),
        "ALERTS_FILE": str(alerts),
        "QUOTA_OK": str(ok),
        "QUOTA_TOGETHER": "5",
    }
    jobs = [dq.enqueue("quota", {"n": i}, queue="api") for i in range(5)]
    proc = WorkerProc(APP, url, tmp_path / "w.log", ["--queues", "api", "-c", "5"], env=env)
    try:
        wait_for(
            lambda: (
                all(dq.get(j.id).state == "queued" for j in jobs)
                and len(_lines(runs)) >= 5
                and len(_lines(alerts)) >= 1
            ),
            30,
            what="the five jobs to be put back",
        )
        time.sleep(0.5)  # let any stragglers (a second alert, a re-claim) show themselves
        starts = [line for line in _lines(runs) if line.startswith("start")]
        assert len(starts) == 5 and all(line.split()[2] == "1" for line in starts)
        for job in jobs:
            j = dq.get(job.id)
            assert (j.state, j.attempts, j.errors) == ("queued", 0, [])
        info = dq.paused("api")
        assert info is not None
        assert (info.source, info.reason) == ("auto", "API quota exhausted")
        sent = [json.loads(line) for line in _lines(alerts)]
        assert len(sent) == 1 and sent[0]["key"] == "pause:api"
        assert "API quota exhausted" in sent[0]["message"]

        ok.write_text("quota restored")
        assert dq.resume("api") is True
        wait_for(
            lambda: all(dq.get(j.id).state == "succeeded" for j in jobs),
            30,
            what="the jobs to run after resume",
        )
        for job in jobs:
            j = dq.get(job.id)
            assert (j.attempts, j.result) == (1, j.payload["n"])
        assert len(_lines(alerts)) == 1
        events = [e.get("event") for e in proc.events()]
        assert events.count("job_requeued_paused") == 5
        assert events.count("queue_paused") == 1
    finally:
        proc.stop()


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args, "--db", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_pause_status_resume(make_any: Callable[..., durq.Durq], url: str) -> None:
    dq = make_any()
    dq.paused("api")  # create the schema
    done = _cli(url, "pause", "api", "--reason", "vendor outage")
    assert done.returncode == 0, done.stderr
    assert "paused" in done.stdout
    again = _cli(url, "pause", "api", "--reason", "twice", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["paused"] is False
    status = _cli(url, "status", "--json")
    assert json.loads(status.stdout)["queues"]["api"]["paused"]["reason"] == "vendor outage"
    table = _cli(url, "status")
    assert "vendor outage" in table.stdout
    wrong = _cli(url, "resume", "api", "--source", "env")
    assert wrong.returncode == 1 and "admin" in wrong.stderr
    resumed = _cli(url, "resume", "api")
    assert resumed.returncode == 0, resumed.stderr
    assert dq.paused("api") is None
    assert _cli(url, "resume", "api").returncode == 1  # not paused: says so


def test_async_task_raising_pause_queue_in_process(make_any: Callable[..., durq.Durq]) -> None:
    """The same path for ``async def`` tasks, with the app's hooks in this process."""
    import threading

    dq = make_any()
    got: list[durq.Alert] = []
    dq.on_alert(got.append)
    hold = {"on": True}

    @dq.task(queue="net", max_attempts=2)
    async def fetch(n: int) -> int:
        if hold["on"]:
            raise durq.PauseQueue("upstream down")
        return n

    jobs = [fetch.enqueue(n=i) for i in range(3)]
    w = dq.worker(lease=5.0, concurrency=3)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        wait_for(lambda: dq.paused("net") is not None, 20, what="the queue to pause")
        wait_for(
            lambda: all(dq.get(j.id).state == "queued" for j in jobs), 20, what="jobs put back"
        )
        assert all(dq.get(j.id).attempts == 0 for j in jobs)
        assert [a.key for a in got] == ["pause:net"]
        hold["on"] = False
        dq.resume("net")
        wait_for(
            lambda: all(dq.get(j.id).state == "succeeded" for j in jobs), 20, what="jobs to run"
        )
        assert [dq.get(j.id).attempts for j in jobs] == [1, 1, 1]
    finally:
        w.request_stop()
        t.join(30)
