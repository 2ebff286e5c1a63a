"""The CLI as a user runs it: real subprocesses, --db and DURQ_URL, --json output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import durq
from tests.support.procs import ROOT


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def test_enqueue_list_show_cancel_retry_status(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    assert run("migrate", "--db", db).returncode == 0
    out = run("enqueue", "echo", "value=41", "name=ada", "--db", db, "--json")
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert job["payload"] == {"value": 41, "name": "ada"} and job["state"] == "queued"
    out = run(
        "enqueue",
        "echo",
        "--payload",
        '{"value": [1, 2]}',
        "--key",
        "k1",
        "--json",
        env={"DURQ_URL": db},
    )
    second = json.loads(out.stdout)
    again = json.loads(
        run("enqueue", "echo", "--payload", "{}", "--key", "k1", "--json", "--db", db).stdout
    )
    assert again["id"] == second["id"]
    listed = json.loads(run("jobs", "list", "--db", db, "--json").stdout)
    assert [j["id"] for j in listed] == [second["id"], job["id"]]
    shown = json.loads(run("jobs", "show", str(job["id"]), "--db", db, "--json").stdout)
    assert shown["payload"]["name"] == "ada"
    cancelled = run("cancel", str(job["id"]), "--db", db, "--json")
    assert json.loads(cancelled.stdout) == [{"id": job["id"], "ok": True, "state": "cancelled"}]
    assert run("cancel", str(job["id"]), "--db", db).returncode == 1
    assert (
        json.loads(run("retry", str(job["id"]), "--db", db, "--json").stdout)[0]["state"]
        == "queued"
    )
    snap = json.loads(run("status", "--db", db, "--json").stdout)
    assert snap["queues"]["default"]["counts"]["queued"] == 2
    assert {s["task"] for s in snap["stranded"]} == {"echo"}
    table = run("status", "--db", db)
    assert table.returncode == 0 and "default" in table.stdout and "stranded" in table.stdout
    human = run("jobs", "show", str(job["id"]), "--db", db)
    assert "echo on default" in human.stdout


def test_bad_arguments_give_usage_errors(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    assert run("status", "--db", db).returncode == 1  # no database there: never created by a read
    assert not Path(db).exists()
    assert run("enqueue", "t", "--payload", "[1]", "--db", db).returncode == 2
    assert run("enqueue", "t", "--payload", "{bad", "--db", db).returncode == 2
    assert run("enqueue", "t", "novalue", "--db", db).returncode == 2
    assert run("worker", "no_such_module:dq").returncode == 2
    assert run("worker", "tests.apps.basic:nothing").returncode == 2
    assert run("jobs", "show", "abc", "--db", db).returncode == 2


def test_worker_runs_jobs_from_the_cli(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = durq.Durq(db)
    job = app.enqueue("echo", {"value": "hi"})
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durq",
            "worker",
            "tests.apps.basic:dq",
            "--db",
            db,
            "--concurrency",
            "2",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert job.wait(15) == "hi"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0
    events = [json.loads(line)["event"] for line in err.splitlines() if line.startswith("{")]
    assert events[0] == "worker_started"
    assert "job_succeeded" in events and events[-1] == "worker_stopped"


def test_enqueue_with_app_takes_the_tasks_settings(tmp_path: Path) -> None:
    db = str(tmp_path / "jobs.db")
    plain = json.loads(run("enqueue", "fail_once", "--db", db, "--json").stdout)
    assert (plain["queue"], plain["max_attempts"]) == ("default", 3)
    out = run("enqueue", "sleepy", "ms=1", "--db", db, "--json", "--app", "tests.apps.basic:dq")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["max_attempts"] == 10  # the task's own setting
    bad = run("enqueue", "sleepy", "seconds=1", "--db", db, "--app", "tests.apps.basic:dq")
    assert bad.returncode == 1 and "does not fit sleepy()" in bad.stderr
    unknown = run("enqueue", "nope", "--db", db, "--app", "tests.apps.basic:dq")
    assert unknown.returncode == 2 and "no task named 'nope'" in unknown.stderr
    human = run("enqueue", "fail_once", "--db", db)
    assert f"in sqlite:///{db}" in human.stdout  # the absolute path, as a URL


def test_module_attr_mistakes_say_what_is_wrong() -> None:
    missing = run("worker", "tests.apps.basic:dqq")
    assert missing.returncode == 2 and "has no attribute 'dqq'" in missing.stderr
    dotted = run("worker", "tests.apps.basic.dq")
    assert dotted.returncode == 2 and "did you mean tests.apps.basic:dq" in dotted.stderr


def test_purge_deletes_finished_jobs_and_guards_unfinished_ones(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'jobs.db'}"
    app = durq.Durq(db)
    done = app.enqueue("t", {}, queue="q")
    app.cancel(done.id)
    waiting = app.enqueue("t", {}, queue="q")
    other = app.enqueue("t", {}, queue="elsewhere")
    app.cancel(other.id)
    out = run("purge", "q", "--db", db, "--json")
    assert json.loads(out.stdout)["deleted"] == 1
    assert [j.id for j in app.jobs(queue="q")] == [waiting.id]
    refused = run("purge", "q", "--state", "queued", "--db", db)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    assert run("purge", "q", "--state", "queued", "--yes", "--db", db).returncode == 0
    assert app.jobs(queue="q") == []
    assert [j.id for j in app.jobs()] == [other.id]
