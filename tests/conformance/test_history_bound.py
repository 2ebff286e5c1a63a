"""A job's error history is bounded (defects item 2) and the entries of a job that never
ran do not read as attempts (item 3), on every backend: in the store, in
:func:`durq.observability.views.attempts` (the dashboard's rows) and in ``durq jobs show``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import durq
from durq.model import AttemptError, Outcome
from durq.observability import views
from tests.conftest import Clock
from tests.support.db import execute
from tests.support.procs import ROOT

LEASE = 30.0
HISTORY_KEPT = 20  # durq.model.jobs.HISTORY_KEPT (a literal: the test runs on old code too)


def show(url: str, job_id: int) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "durq", "jobs", "show", str(job_id), "--db", url],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ), timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def raw_history(app: durq.Durq, job_id: int) -> list[dict[str, object]]:
    history = json.loads(app.store.get(job_id).errors or "[]")  # type: ignore[union-attr]
    assert isinstance(history, list)
    return history


def test_the_history_keeps_the_first_and_the_last_entries_and_counts_the_rest(
    app: durq.Durq, clock: Clock, backend_url: str
) -> None:
    @app.task(max_attempts=100)
    def flaky() -> None:
        raise ValueError("boom")

    job = flaky.enqueue()
    attempts = 0
    for n in range(1, 41):  # 40 retries (the finish's statement)
        (c,) = app.store.claim("default", ["flaky"], 1, LEASE, "w1")
        error = AttemptError(c.attempt, clock(), "ValueError", f"boom {n}", "", "transient")
        assert app.store.finish([Outcome(c.id, c.lease_token, "retry", error=error)]) == [True]
        attempts += 1
        assert len(raw_history(app, job.id)) <= HISTORY_KEPT + 2
    for _ in range(3):  # 3 lost leases (the reaper's statement)
        app.store.claim("default", ["flaky"], 1, LEASE, "w1")
        clock.advance(LEASE + 1)
        assert app.store.reap().recovered == 1
        attempts += 1
    found = app.get(job.id)
    errors = found.errors
    assert len(errors) == 1 + HISTORY_KEPT
    assert errors[0].message == "boom 1"  # the first is kept
    assert [e.attempt for e in errors[1:]] == list(range(attempts - HISTORY_KEPT + 1, attempts + 1))
    assert [e.kind for e in errors[-3:]] == ["lease_lost"] * 3
    assert found.errors_dropped == attempts - 1 - HISTORY_KEPT == 22
    assert found.to_dict()["errors_dropped"] == 22
    marker = raw_history(app, job.id)[1]
    assert marker["kind"] == "history_trimmed" and marker["dropped"] == 22

    rows = views.attempts(found)
    assert rows[0]["attempt"] == 1
    assert rows[1]["attempt"] is None and rows[1]["label"] == "22 earlier attempts not kept"
    assert [r["attempt"] for r in rows[2:]] == [e.attempt for e in errors[1:]]
    text = show(backend_url, job.id)
    assert "22 earlier attempts not kept" in text and "attempt 0" not in text


def test_a_short_history_is_kept_whole(app: durq.Durq, clock: Clock) -> None:
    @app.task(max_attempts=100)
    def flaky() -> None:
        raise ValueError("boom")

    job = flaky.enqueue()
    for _ in range(HISTORY_KEPT + 1):
        (c,) = app.store.claim("default", ["flaky"], 1, LEASE, "w1")
        error = AttemptError(c.attempt, clock(), "ValueError", "boom", "", "transient")
        app.store.finish([Outcome(c.id, c.lease_token, "retry", error=error)])
    found = app.get(job.id)
    assert [e.attempt for e in found.errors] == list(range(1, HISTORY_KEPT + 2))
    assert found.errors_dropped == 0
    assert all(r["attempt"] is not None for r in views.attempts(found))


def test_a_child_cancelled_by_its_parent_reads_as_cancelled_not_as_an_attempt(
    app: durq.Durq, backend_url: str
) -> None:
    @app.task
    def boom() -> None:
        raise ValueError("boom")

    @app.task
    def after() -> None:
        pass

    parent = boom.enqueue()
    child = after.options(after=[parent]).enqueue()
    (c,) = app.store.claim("default", ["boom"], 1, LEASE, "w1")
    error = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "permanent")
    app.store.finish([Outcome(c.id, c.lease_token, "failed", error=error)])
    found = app.get(child.id)
    assert found.state == "cancelled"
    (row,) = views.attempts(found)
    assert row["attempt"] is None and row["label"] == "cancelled"
    assert row["error"] == f"parent job {parent.id} (boom) ended failed"
    text = show(backend_url, child.id)
    assert "attempt 0" not in text
    assert f"cancelled {text.split('cancelled ')[-1].split(':')[0]}" in text
    assert f": parent job {parent.id} (boom) ended failed" in text


def test_a_child_not_run_for_its_payload_reads_as_not_run(backend_url: str, clock: Clock) -> None:
    dq = durq.Durq(backend_url, clock=clock, payload_limit=100)
    try:

        @dq.task
        def make() -> str:
            return "x"

        @dq.task
        def join(values: list[str]) -> None:
            pass

        jobs = dq.group([make.s()]).then(join.s())
        (c,) = dq.store.claim("default", ["make"], 1, LEASE, "w1")
        dq.store.finish([Outcome(c.id, c.lease_token, "succeeded", result=json.dumps("x" * 200))])
        found = dq.get(jobs[-1].id)
        (row,) = views.attempts(found)
        assert row["attempt"] is None and row["label"] == "not run"
        assert "over the payload_limit of 100 bytes" in row["error"]
        text = show(backend_url, found.id)
        assert "attempt 0" not in text and "not run" in text and "payload_limit" in text
    finally:
        dq.close()


def test_a_long_history_written_before_the_bound_shrinks_at_its_next_entry(
    app: durq.Durq, clock: Clock, backend_url: str
) -> None:
    @app.task(max_attempts=1000)
    def flaky() -> None:
        raise ValueError("boom")

    job = flaky.enqueue()
    (c,) = app.store.claim("default", ["flaky"], 1, LEASE, "w1")
    old = [AttemptError(n, float(n), "E", f"m{n}").to_dict() for n in range(1, 101)]
    execute(backend_url, "UPDATE jobs SET errors = ? WHERE id = ?", (json.dumps(old), job.id))
    error = AttemptError(101, clock(), "ValueError", "m101", "", "transient")
    assert app.store.finish([Outcome(c.id, c.lease_token, "retry", error=error)]) == [True]
    found = app.get(job.id)
    assert [e.message for e in found.errors] == ["m1"] + [f"m{n}" for n in range(82, 102)]
    assert found.errors_dropped == 80


def test_a_damaged_history_is_still_appended_to(app: durq.Durq, backend_url: str) -> None:
    @app.task(max_attempts=5)
    def flaky() -> None:
        raise ValueError("boom")

    job = flaky.enqueue()
    (c,) = app.store.claim("default", ["flaky"], 1, LEASE, "w1")
    damaged = '[{"attempt": 1}' * 30  # 30 entry starts, not JSON
    execute(backend_url, "UPDATE jobs SET errors = ? WHERE id = ?", (damaged, job.id))
    error = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "transient")
    assert app.store.finish([Outcome(c.id, c.lease_token, "retry", error=error)]) == [True]
    assert app.get(job.id).state == "queued"
