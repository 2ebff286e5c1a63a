"""``durq retry`` as a user runs it (real subprocesses, both backends): replay of one
succeeded job by id, and ``--state failed [--queue] [--task]`` with its count and --yes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import durq
from durq.model import AttemptError, Outcome
from tests.support.procs import ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durq", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=dict(os.environ),
        timeout=120,
    )


def failed_jobs(app: durq.Durq, task: str, queue: str, n: int) -> list[int]:
    ids = []
    for _ in range(n):
        ids.append(app.enqueue(task, {}, queue=queue).id)
    while claimed := app.store.claim(queue, [task], 100, 30.0, "w1"):
        error = AttemptError(1, 0.0, "ValueError", "boom", "", "permanent")
        app.store.finish([Outcome(c.id, c.lease_token, "failed", error=error) for c in claimed])
    return ids


def test_durq_retry_by_id_and_by_state(url: str) -> None:
    app = durq.Durq(url)
    many = failed_jobs(app, "a", "default", 150)
    few = failed_jobs(app, "b", "other", 3)
    ok = app.enqueue("a", {})
    (c,) = app.store.claim("default", ["a"], 1, 30.0, "w1")
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])

    out = run("retry", str(ok.id), "--db", url, "--json")  # a succeeded job: replayed
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [{"id": ok.id, "ok": True, "state": "queued"}]
    again = run("retry", str(ok.id), "--db", url)  # now queued: a clear error
    assert again.returncode == 1 and "only a finished job" in again.stderr

    refused = run("retry", "--state", "failed", "--db", url)
    assert refused.returncode == 2
    assert "more than 100 failed jobs match; nothing was retried (add --yes" in refused.stderr
    assert all(app.get(i).state == "failed" for i in many + few)

    small = run("retry", "--state", "failed", "--queue", "other", "--db", url)
    assert small.returncode == 0, small.stderr
    assert small.stdout.strip() == "retried 3 failed jobs"
    assert all(app.get(i).state == "queued" for i in few)

    none = run("retry", "--state", "failed", "--task", "b", "--db", url, "--json")
    assert json.loads(none.stdout)["retried"] == 0

    done = run("retry", "--state", "failed", "--task", "a", "--yes", "--db", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "retried 150 failed jobs"
    replayed = [app.get(i) for i in many]
    assert all(j.state == "queued" and j.attempts == 0 for j in replayed)
    assert all([e.kind for e in j.errors] == ["permanent", "replayed"] for j in replayed)

    usage = run("retry", "1", "--state", "failed", "--db", url)
    assert usage.returncode == 2 and "not both" in usage.stderr
    app.close()


def test_jobs_show_tells_the_runs_of_a_replayed_job_apart(url: str) -> None:
    """Each replay starts the attempts from 1 again: `jobs show` listed five entries all
    called "attempt 1" after two replays (found by the new-user pass)."""
    app = durq.Durq(url)
    [job_id] = failed_jobs(app, "a", "default", 1)
    for _ in range(2):
        assert run("retry", str(job_id), "--db", url).returncode == 0
        failed_jobs(app, "a", "default", 0)  # the worker fails it again
    shown = run("jobs", "show", str(job_id), "--db", url)
    assert shown.returncode == 0, shown.stderr
    labels = [
        line.strip().split(":")[0].split(" 20")[0]
        for line in shown.stdout.splitlines()
        if line.startswith("  attempt") or line.startswith("  run ") or "replayed" in line
    ]
    assert labels[0] == "attempt 1" and labels[2] == "run 2, attempt 1", shown.stdout
    assert labels[4] == "run 3, attempt 1", shown.stdout
    rows = json.loads(run("jobs", "show", str(job_id), "--db", url, "--json").stdout)["attempts"]
    assert [(r["run"], r["label"]) for r in rows] == [
        (1, "attempt 1"), (1, "replayed"), (2, "run 2, attempt 1"), (2, "replayed"),
        (3, "run 3, attempt 1"),
    ]  # fmt: skip
    app.close()


def test_jobs_list_shows_the_current_runs_error_not_the_replay(url: str) -> None:
    """Found by a new-user pass: after a replay, `jobs list` showed "Replayed: the job was
    succeeded after 1 attempt(s)" in the last-error column of a job that then succeeded."""
    app = durq.Durq(url)
    [healed, again] = failed_jobs(app, "a", "default", 2)
    assert run("retry", str(healed), str(again), "--db", url).returncode == 0
    for job_id, outcome in ((healed, "succeeded"), (again, "failed")):
        (c,) = app.store.claim("default", ["a"], 1, 30.0, "w1")
        assert c.id == job_id
        error = (
            None
            if outcome == "succeeded"
            else AttemptError(1, 0.0, "KeyError", "late", "", "permanent")
        )
        app.store.finish([Outcome(c.id, c.lease_token, outcome, result="1", error=error)])
    listed = run("jobs", "list", "--db", url)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[1]: line for line in listed.stdout.splitlines() if line.startswith("│ ")}
    assert "Replayed" not in rows[str(healed)] and "boom" not in rows[str(healed)]
    assert "KeyError: late" in rows[str(again)]
    assert app.get(healed).errors[-1].message.startswith("the job ended failed after 1 attempt")
    app.close()
