"""Results and progress across processes (issue 4 item 7): a real worker process runs the
job; another process waits for its result or its failure; progress shows in the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import durq
from tests.support.procs import ROOT, WorkerProc, wait_for

APP = "tests.apps.steps_results:dq"
ARGS = ["--concurrency", "2", "--lease", "2", "--grace", "1"]

WAITER = """
import json, sys
import durq
try:
    print(json.dumps({"result": durq.Durq(sys.argv[1]).get(int(sys.argv[2])).wait(60)}))
except durq.JobFailed as exc:
    e = exc.error  # the last recorded error; None for a job cancelled before it ran
    print(json.dumps({"failed": exc.job.state, "type": e and e.type, "message": e and e.message}))
"""


def wait_elsewhere(url: str, job_id: int) -> dict[str, object]:
    """``job.wait()`` in a third process (neither the producer nor the worker)."""
    out = subprocess.run(
        [sys.executable, "-c", WAITER, url, str(job_id)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    parsed: dict[str, object] = json.loads(out.stdout)
    return parsed


def cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "durq", *args, "--db", url],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=ROOT,
    )


def test_wait_in_other_processes_returns_the_result_or_raises_the_failure(
    tmp_path: Path, url: str
) -> None:
    producer = durq.Durq(url)
    ok = producer.enqueue("add", {"a": 2, "b": 40})
    bad = producer.enqueue("explode", {"message": "bad input"}, max_attempts=1)
    w = WorkerProc(APP, url, tmp_path / "w.log", ARGS)
    try:
        assert wait_elsewhere(url, ok.id) == {"result": {"sum": 42, "pid": w.pid}}
        assert wait_elsewhere(url, bad.id) == {
            "failed": "failed",
            "type": "ValueError",
            "message": "bad input",
        }
        # and in this process, through another Durq instance than the producer's
        other = durq.Durq(url)
        assert other.get(ok.id).wait(timeout=10) == {"sum": 42, "pid": w.pid}
        with pytest.raises(durq.JobFailed) as info:
            other.get(bad.id).wait(timeout=10)
        assert isinstance(info.value, durq.DurqError)
        assert info.value.error.type == "ValueError" and info.value.job.state == "failed"
        assert "ended failed: ValueError: bad input" in str(info.value)
    finally:
        w.stop()


def test_wait_raises_for_cancelled_jobs_and_times_out(tmp_path: Path, url: str) -> None:
    producer = durq.Durq(url)
    nobody = producer.enqueue("add", {"a": 1, "b": 1}, queue="nobody-serves-this")
    with pytest.raises(TimeoutError, match="still queued"):
        durq.Durq(url).get(nobody.id).wait(timeout=0.3)
    producer.cancel(nobody.id)
    assert wait_elsewhere(url, nobody.id) == {"failed": "cancelled", "type": None, "message": None}
    with pytest.raises(durq.JobFailed) as info:
        durq.Durq(url).get(nobody.id).wait(timeout=5)
    assert info.value.error is None and "ended cancelled" in str(info.value)


def test_progress_is_persisted_and_shown_by_status_and_jobs_show(tmp_path: Path, url: str) -> None:
    gate = tmp_path / "gate"
    app = durq.Durq(url)
    job = app.enqueue("halfway", {"gate": str(gate)})
    w = WorkerProc(APP, url, tmp_path / "w.log", ARGS)
    try:
        wait_for(lambda: app.get(job.id).progress is not None, 60, what="progress")
        want = {"fraction": 0.5, "message": "halfway there", "stage": "copy"}
        assert app.get(job.id).progress == want

        shown = cli(url, "jobs", "show", str(job.id), "--json")
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["progress"] == want
        text = cli(url, "jobs", "show", str(job.id))
        assert "halfway there" in text.stdout

        status = cli(url, "status", "--json")
        assert status.returncode == 0, status.stderr
        (running,) = json.loads(status.stdout)["running"]
        assert (running["id"], running["task"], running["progress"]) == (job.id, "halfway", want)
        text = cli(url, "status")
        assert f"{job.id} default/halfway attempt 1: 50% halfway there" in text.stdout

        gate.touch()
        assert app.get(job.id).wait(timeout=30) == "finished"
    finally:
        w.stop()
    assert app.get(job.id).progress == {"fraction": 1.0, "message": "done"}  # kept after
    assert json.loads(cli(url, "status", "--json").stdout)["running"] == []


def test_prune_cli(tmp_path: Path, url: str) -> None:
    app = durq.Durq(url)
    job = app.enqueue("add", {"a": 1, "b": 2})
    queued = app.enqueue("add", {"a": 1, "b": 2}, queue="elsewhere")
    w = WorkerProc(APP, url, tmp_path / "w.log", [*ARGS, "--no-prune"])
    try:
        app.get(job.id).wait(timeout=60)
    finally:
        w.stop()
    kept = cli(url, "prune", "--older-than", "1h", "--json")
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["deleted"] == 0
    bad = cli(url, "prune", "--state", "queued")
    assert bad.returncode == 2
    gone = cli(url, "prune", "--older-than", "0s", "--state", "succeeded", "--queue", "default")
    assert gone.returncode == 0, gone.stderr
    assert "deleted 1 finished job(s) of queue 'default'" in gone.stdout
    assert app.store.get(job.id) is None and app.get(queued.id).state == "queued"
