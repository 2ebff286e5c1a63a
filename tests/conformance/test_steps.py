"""Steps (issue 4 item 8): ``ctx.step`` memoises results per (job, name), fenced by the
lease token; run against every backend through the store, as a worker would use it."""

from __future__ import annotations

from typing import Any

import pytest

import durq
from durq.classify import PERMANENT, classify
from durq.context import JobContext
from durq.errors import ConfigError, JobGone, JobNotFound, LeaseLost, StepResultError
from durq.model import AttemptError, Claimed, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=5)
    def work(n: int = 0) -> int:
        return n


def claim_one(app: durq.Durq) -> Claimed:
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    return c


def ctx_for(app: durq.Durq, c: Claimed) -> JobContext:
    """The context a worker builds for a claimed attempt."""
    return JobContext(
        c.id,
        c.task,
        c.queue,
        c.attempt,
        c.max_attempts,
        c.lease_token,
        app.store.set_progress,
        _steps=app.store,
    )


class Calls:
    """A step function that counts its calls."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, value: Any = "ok", *, extra: Any = None) -> Any:
        self.n += 1
        return value if extra is None else [value, extra]


def retry_now(app: durq.Durq, c: Claimed) -> None:
    err = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "transient")
    assert app.store.finish([Outcome(c.id, c.lease_token, "retry", error=err, delay=0.0)]) == [True]


def test_a_later_attempt_gets_stored_results_without_calling_fn(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    one, two, three = Calls(), Calls(), Calls()

    c1 = claim_one(app)
    ctx = ctx_for(app, c1)
    assert ctx.step("one", one, 1) == 1
    assert ctx.step("two", two, "b", extra={"k": (1, 2)}) == ["b", {"k": [1, 2]}]
    retry_now(app, c1)  # "fails after step 2 of 3"

    c2 = claim_one(app)
    assert c2.attempt == 2
    ctx2 = ctx_for(app, c2)
    assert ctx2.step("one", one, 1) == 1
    assert ctx2.step("two", two, "b", extra={"k": (1, 2)}) == ["b", {"k": [1, 2]}]
    assert ctx2.step("three", three, 3) == 3
    assert (one.n, two.n, three.n) == (1, 1, 1)

    steps = {s.name: s for s in app.steps(job.id)}
    assert {n: s.attempt for n, s in steps.items()} == {"one": 1, "two": 1, "three": 2}
    assert {n: s.to_dict()["result"] for n, s in steps.items()} == {
        "one": 1,
        "two": ["b", {"k": [1, 2]}],
        "three": 3,
    }


def test_steps_are_per_job(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].enqueue(n=1)
    app.tasks["work"].enqueue(n=2)
    calls = Calls()
    a, b = app.store.claim("default", ["work"], 2, LEASE, "w1")
    assert ctx_for(app, a).step("s", calls, "a") == "a"
    assert ctx_for(app, b).step("s", calls, "b") == "b"
    assert calls.n == 2


def test_a_step_whose_fn_raises_records_nothing(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    ctx = ctx_for(app, claim_one(app))

    def boom() -> None:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        ctx.step("s", boom)
    assert app.steps(job.id) == []
    calls = Calls()
    assert ctx.step("s", calls, 5) == 5 and calls.n == 1


def test_lost_lease_before_the_step_runs_nothing(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    c = claim_one(app)
    ctx = ctx_for(app, c)
    clock.advance(LEASE + 1)
    app.store.reap()  # the lease expired: the job is queued again
    calls = Calls()
    with pytest.raises(LeaseLost):
        ctx.step("s", calls)
    assert calls.n == 0 and ctx.lease_lost
    assert app.store.list_steps(job.id) == []
    # the next attempt runs the step
    c2 = claim_one(app)
    assert ctx_for(app, c2).step("s", calls, 7) == 7 and calls.n == 1


def test_lease_lost_while_the_step_ran_records_nothing(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    ctx = ctx_for(app, claim_one(app))
    ran = []

    def cancelled_meanwhile() -> str:
        ran.append(1)
        app.cancel(job.id)  # another actor revokes the lease while fn runs
        return "late"

    with pytest.raises(LeaseLost, match="not recorded"):
        ctx.step("s", cancelled_meanwhile)
    assert ran == [1] and ctx.lease_lost
    assert app.store.list_steps(job.id) == []


def test_a_stale_token_cannot_record_even_when_the_job_runs_again(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    c1 = claim_one(app)
    stale = ctx_for(app, c1)
    retry_now(app, c1)
    c2 = claim_one(app)  # the job runs again under a new token
    assert not app.store.save_step(job.id, c1.lease_token, "s", '"stale"')
    with pytest.raises(LeaseLost):
        stale.step("s", Calls())
    assert app.store.save_step(job.id, c2.lease_token, "s", '"fresh"')
    assert [s.result for s in app.steps(job.id)] == ['"fresh"']
    # the first write wins: a second save of the same name keeps the stored row
    assert not app.store.save_step(job.id, c2.lease_token, "s", '"again"')
    assert ctx_for(app, c2).step("s", Calls(), "x") == "fresh"


def test_an_unserialisable_result_raises_before_anything_is_recorded(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    ctx = ctx_for(app, claim_one(app))
    calls = Calls()
    with pytest.raises(StepResultError, match="not recorded") as info:
        ctx.step("s", calls, object())
    assert calls.n == 1  # fn ran; its result could not be stored
    assert isinstance(info.value, durq.PayloadError) and isinstance(info.value, durq.Permanent)
    assert classify(info.value).kind == PERMANENT  # an uncaught one fails the job, no retry
    assert app.store.list_steps(job.id) == []
    with pytest.raises(StepResultError):
        ctx.step("nan", calls, float("nan"))


def test_bad_step_names_are_refused(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].enqueue()
    ctx = ctx_for(app, claim_one(app))
    for name in ("", "x" * 201, 3, None):
        with pytest.raises(ConfigError):
            ctx.step(name, Calls())  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        ctx.step("s", "not callable")  # type: ignore[arg-type]


def test_retry_of_a_failed_job_keeps_its_steps_and_resumes(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue()
    c1 = claim_one(app)
    calls = Calls()
    ctx_for(app, c1).step("charge", calls, "paid")
    err = AttemptError(1, 0.0, "ValueError", "boom", "", "permanent")
    assert app.store.finish([Outcome(c1.id, c1.lease_token, "failed", error=err)]) == [True]
    assert app.get(job.id).state == "failed"
    app.retry(job.id)
    c2 = claim_one(app)
    assert ctx_for(app, c2).step("charge", calls, "paid") == "paid"
    assert calls.n == 1
    # a running job's steps cannot be cleared
    with pytest.raises(JobGone):
        app.clear_steps(job.id)
    assert app.store.finish([Outcome(c2.id, c2.lease_token, "failed", error=err)]) == [True]
    assert app.clear_steps(job.id) == 1
    app.retry(job.id)
    c3 = claim_one(app)
    assert ctx_for(app, c3).step("charge", calls, "paid") == "paid"
    assert calls.n == 2  # cleared: the step ran again


def test_steps_of_unknown_jobs(app: durq.Durq) -> None:
    with pytest.raises(JobNotFound):
        app.steps(424242)
    with pytest.raises(JobNotFound):
        app.clear_steps(424242)


def test_deleting_a_job_deletes_its_steps(app: durq.Durq, clock: Clock) -> None:
    register(app)

    def finished_with_a_step(queue: str) -> int:
        job = app.tasks["work"].options(queue=queue).enqueue()
        (c,) = app.store.claim(queue, ["work"], 1, LEASE, "w1")
        ctx_for(app, c).step("s", Calls(), c.id)
        assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
        assert len(app.steps(job.id)) == 1
        return job.id

    purged, pruned, kept = finished_with_a_step("a"), finished_with_a_step("b"), 0
    clock.advance(10)
    kept = finished_with_a_step("c")  # finished just now: younger than the cutoff
    assert app.purge("a") == 1
    assert app.store.list_steps(purged) == []
    assert app.prune(older_than=5) == 1
    assert app.store.list_steps(pruned) == []
    with pytest.raises(JobNotFound):
        app.steps(pruned)
    assert len(app.steps(kept)) == 1
