"""Replay (``dq.retry``) of every finished state, and ``retry_where`` (``durq retry
--state``): a fresh attempt budget, the history kept, one chunked transaction at a time."""

from __future__ import annotations

import pytest

import durq
from durq.model import AttemptError, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=2)
    def work(n: int = 0) -> int:
        return n

    @app.task(max_attempts=2, deadline_in=60.0)
    def timed(n: int = 0) -> int:
        return n

    @app.task(max_attempts=2, queue="other")
    def elsewhere(n: int = 0) -> int:
        return n


def claim(app: durq.Durq, task: str = "work", queue: str = "default") -> durq.model.Claimed:
    (c,) = app.store.claim(queue, [task], 1, LEASE, "w1")
    return c


def fail(app: durq.Durq, c: durq.model.Claimed, kind: str = "failed") -> None:
    error = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "permanent")
    assert app.store.finish([Outcome(c.id, c.lease_token, kind, error=error)]) == [True]


def test_a_succeeded_job_runs_again_and_keeps_its_history(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=3)
    c = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "retry", error=AttemptError(1, 0.0, "E", "x"))])
    c = claim(app)
    assert c.attempt == 2
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="3")])
    assert app.get(job.id).result == 3
    again = app.retry(job.id)
    assert (again.state, again.attempts, again.result) == ("queued", 0, None)
    # the old attempt's entry stays; one 'replayed' entry records the run that succeeded
    assert [(e.attempt, e.kind) for e in again.errors] == [(1, "transient"), (2, "replayed")]
    assert "succeeded after 2 attempt(s)" in again.errors[-1].message
    c = claim(app)
    assert c.attempt == 1 and c.max_attempts == 2  # a fresh budget
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="4")])
    assert app.get(job.id).result == 4


@pytest.mark.parametrize("end", ["failed", "cancelled", "expired"])
def test_every_finished_state_can_be_replayed(app: durq.Durq, clock: Clock, end: str) -> None:
    register(app)
    task = "timed" if end == "expired" else "work"
    job = app.tasks[task].enqueue()
    c = claim(app, task)
    if end == "failed":
        fail(app, c)
    elif end == "cancelled":
        app.cancel(job.id)
    else:
        clock.advance(61)
        assert app.sweep().expired == (job.id,)
    before = app.get(job.id)
    assert before.state == end
    again = app.retry(job.id)
    assert again.state == "queued" and again.attempts == 0
    assert again.errors[: len(before.errors)] == before.errors
    assert (
        again.errors[-1].kind == "replayed"
        and f"the job ended {end} after 1" in again.errors[-1].message
    )
    assert claim(app, task).attempt == 1


@pytest.mark.parametrize("state", ["queued", "running"])
def test_an_unfinished_job_is_a_clear_error(app: durq.Durq, state: str) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    if state == "running":
        claim(app)
    with pytest.raises(durq.JobGone, match=f"job {job.id} is {state}; only a finished job"):
        app.retry(job.id)
    assert app.get(job.id).state == state and app.get(job.id).errors == []


def test_retry_where_replays_every_match_once_in_chunks(app: durq.Durq) -> None:
    register(app)
    failed = []
    for i in range(7):
        job = app.tasks["work"].enqueue(n=i)
        fail(app, claim(app))
        failed.append(job.id)
    other = app.tasks["elsewhere"].enqueue()
    fail(app, claim(app, "elsewhere", "other"))
    ok = app.tasks["work"].enqueue()
    app.store.finish([Outcome(ok.id, claim(app).lease_token, "succeeded", result="0")])
    assert app.retry_where("failed", queue="default", chunk=3) == 7
    assert all(app.get(i).state == "queued" for i in failed)
    assert app.get(other.id).state == "failed" and app.get(ok.id).state == "succeeded"
    assert app.retry_where("failed", task="nope") == 0
    assert app.retry_where("failed", task="elsewhere") == 1
    assert app.retry_where("succeeded") == 1
    assert app.retry_where("failed") == 0
    with pytest.raises(durq.ConfigError):
        app.retry_where("running")


def test_retry_where_leaves_jobs_newer_than_the_call_alone(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    fail(app, claim(app))
    upto = job.id
    newer = app.tasks["work"].enqueue()
    fail(app, claim(app))
    assert app.store.retry_matching("failed", None, None, 0, upto, 10) == ([job.id], job.id)
    assert app.store.retry_matching("failed", None, None, job.id, upto, 10) == ([], None)
    assert app.get(newer.id).state == "failed"


def test_a_job_whose_unique_key_is_held_again_is_not_replayed(app: durq.Durq) -> None:
    register(app)
    first = app.tasks["work"].options(unique="active", key="k").enqueue()
    c = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="0")])
    holder = app.tasks["work"].options(unique="active", key="k").enqueue()
    assert holder.id != first.id
    with pytest.raises(durq.JobGone, match="holds its unique key"):
        app.retry(first.id)
    assert app.get(first.id).state == "succeeded"
    assert app.retry_where("succeeded") == 0  # skipped, not an error
    c = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="0")])
    assert app.retry_where("succeeded", chunk=1) == 1  # one of the two: then the key is held
    assert sorted(str(app.get(j.id).state) for j in (first, holder)) == ["queued", "succeeded"]
    c = claim(app)
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="0")])
    # both in one chunk, sharing the key: the first is replayed, the second skipped
    assert app.retry_where("succeeded") == 1
    assert [str(app.get(j.id).state) for j in (first, holder)] == ["queued", "succeeded"]
