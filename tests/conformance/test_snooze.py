"""Snooze (store side): a snooze outcome puts the job back after its delay with the attempt
handed back and one more snooze counted, under the lease token; past ``max_snoozes`` the
job fails with a clear entry. And the executor's side: Snooze, ctx.snooze, bad delays and
the Retry-After cap as a task option."""

from __future__ import annotations

import math

import pytest

import durq
from durq.context import JobContext
from durq.model import AttemptError, Claimed, Outcome
from durq.worker.executor import Executor
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n


def claim(app: durq.Durq) -> Claimed:
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    return c


def snooze(c: Claimed, seconds: float, cap: int = 100) -> Outcome:
    error = AttemptError(c.attempt, 0.0, "Snooze", f"snoozed for {seconds:g} s", "", "snoozed")
    return Outcome(c.id, c.lease_token, "snooze", error=error, delay=seconds, max_snoozes=cap)


def test_a_snooze_spends_no_attempt_and_runs_after_its_delay(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    c = claim(app)
    fail = AttemptError(1, 0.0, "E", "x")
    app.store.finish([Outcome(c.id, c.lease_token, "retry", error=fail, delay=0)])
    c = claim(app)
    assert c.attempt == 2
    assert app.store.finish([snooze(c, 86400)]) == [True]  # a day: no cap on what was asked
    got = app.get(job.id)
    assert (got.state, got.attempts, got.snoozes) == ("scheduled", 1, 1)
    assert got.run_at == pytest.approx(clock.now + 86400)
    assert [e.kind for e in got.errors] == ["transient", "snoozed"]
    # the snoozed attempt keeps its start and lease holder in the history, as a retry does
    assert [(e.worker_id, e.started_at is not None) for e in got.errors] == [("w1", True)] * 2
    clock.advance(86399)
    assert app.store.claim("default", ["work"], 1, LEASE, "w1") == []
    clock.advance(2)
    again = claim(app)
    assert again.attempt == 2 and again.max_attempts == 3  # the same attempt, not a new one
    # the old token is fenced out: a late snooze of the earlier claim changes nothing
    assert app.store.finish([snooze(c, 5)]) == [False]
    assert app.get(job.id).snoozes == 1


def test_max_snoozes_bounds_the_loop(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    for n in range(2):
        assert app.store.finish([snooze(claim(app), 0, cap=2)]) == [True]
        assert app.get(job.id).snoozes == n + 1
    assert app.store.finish([snooze(claim(app), 0, cap=2)]) == [True]
    failed = app.get(job.id)
    assert (failed.state, failed.snoozes, failed.attempts) == ("failed", 2, 1)
    last = failed.errors[-1]
    assert last.kind == "snooze_limit" and "max_snoozes=2" in last.message
    # a replay starts the count again
    assert app.retry(job.id).snoozes == 0


def test_a_parent_job_snoozes_too(app: durq.Durq) -> None:
    """Jobs with children finish through their own statement on PostgreSQL."""
    register(app)
    parent = app.tasks["work"].enqueue()
    child = app.tasks["work"].options(after=[parent]).enqueue()
    assert app.store.finish([snooze(claim(app), 0)]) == [True]
    assert app.get(parent.id).snoozes == 1 and app.get(parent.id).state == "queued"
    assert app.get(child.id).state == "waiting"


def test_snooze_and_its_errors(app: durq.Durq) -> None:
    assert durq.Snooze(1.5).seconds == 1.5
    for bad in (-1, math.inf, math.nan, 31 * 86400, "5", True):
        with pytest.raises(durq.SnoozeError):
            durq.Snooze(bad)  # type: ignore[arg-type]
    assert issubclass(durq.SnoozeError, durq.Permanent)  # raised in a body: fails the job
    with pytest.raises(durq.ConfigError):
        app.task(max_snoozes=-1)(lambda: None)


def test_the_executor_snoozes_and_caps_retry_after_as_told(app: durq.Durq) -> None:
    @app.task(max_snoozes=7)
    def later() -> None:
        raise durq.Snooze(120)

    @app.task(name="ctx_later")
    def ctx_later() -> None:
        durq.context().snooze(30)

    @app.task(max_attempts=3)
    def limited() -> None:
        raise durq.Transient("busy", retry_after=86400)

    @app.task(max_attempts=3, max_retry_after=None)
    def unlimited() -> None:
        raise durq.Transient("busy", retry_after=86400)

    @app.task(max_attempts=3)
    def too_long() -> None:
        durq.context().snooze(10**9)

    ex = Executor(app)
    jobs = {
        name: Claimed(i, "default", name, "{}", 1, 3, 99)
        for i, name in enumerate(["later", "ctx_later", "limited", "unlimited", "too_long"])
    }

    def run(name: str) -> Outcome:
        job = jobs[name]
        ctx = JobContext(
            job.id, job.task, job.queue, job.attempt, job.max_attempts, job.lease_token,
            lambda *_: True,
        )  # fmt: skip
        return ex.run_sync(job, ctx)

    out = run("later")
    assert (out.kind, out.delay, out.max_snoozes) == ("snooze", 120.0, 7)
    assert out.error is not None and out.error.kind == "snoozed"
    assert (run("ctx_later").kind, run("ctx_later").max_snoozes) == ("snooze", 100)
    capped = run("limited")
    assert (capped.kind, capped.delay) == ("retry", 3600.0)
    assert capped.error is not None and "cut to max_retry_after=3600 s" in capped.error.message
    assert run("unlimited").delay == 86400.0
    bad = run("too_long")
    assert bad.kind == "failed" and bad.error is not None
    assert "not between 0 and 2592000 s" in bad.error.message


def test_drain_runs_snoozes_that_are_due_and_leaves_later_ones(app: durq.Durq) -> None:
    """durq.testing.drain (and eager mode): a snooze is not skipped like a backoff."""
    from durq.testing import drain

    @app.task(max_snoozes=2)
    def again() -> None:
        raise durq.Snooze(0)

    @app.task
    def later() -> None:
        durq.context().snooze(60)

    a, b = again.enqueue(), later.enqueue()
    result = drain(app)
    assert result.failed == [a.id] and result.retried.count(a.id) == 2
    assert (app.get(a.id).state, app.get(a.id).snoozes) == ("failed", 2)
    assert (app.get(b.id).state, app.get(b.id).snoozes) == ("scheduled", 1)
