"""Retention (issue 4 item 7): ``dq.prune`` and the worker's pruner delete finished jobs
past their state's age, in chunks, and never a queued, scheduled or running one."""

from __future__ import annotations

import json

import pytest

import durq
from durq.errors import ConfigError
from durq.model import AttemptError, Outcome
from durq.retention import DAY, DEFAULT_RETENTION, parse_duration, policy
from tests.conftest import Clock
from tests.support.db import execute

LEASE = 30.0
ERR = AttemptError(1, 0.0, "ValueError", "boom", "", "permanent")


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n


def finished(app: durq.Durq, state: str, queue: str = "default", url: str = "") -> int:
    """A job that ends in ``state`` now (store clock); returns its id."""
    job = app.tasks["work"].options(queue=queue).enqueue()
    if state == "cancelled":
        app.cancel(job.id)
        return job.id
    (c,) = app.store.claim(queue, ["work"], 1, LEASE, "w1")
    assert c.id == job.id
    if state == "succeeded":
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    elif state == "failed":
        app.store.finish([Outcome(c.id, c.lease_token, "failed", error=ERR)])
    elif state == "expired":  # no transition of this branch makes expired jobs: set it
        app.store.finish([Outcome(c.id, c.lease_token, "failed", error=ERR)])
        execute(url, "UPDATE jobs SET state = 'expired' WHERE id = ?", (job.id,))
    assert app.get(job.id).state == state
    return job.id


def exists(app: durq.Durq, job_id: int) -> bool:
    return app.store.get(job_id) is not None


def test_prune_never_touches_queued_scheduled_or_running_jobs(
    app: durq.Durq, clock: Clock, backend_url: str
) -> None:
    register(app)
    w = app.tasks["work"]
    queued = w.enqueue()
    scheduled = w.options(delay=400 * DAY).enqueue()
    running = w.options(queue="r").enqueue()
    (c,) = app.store.claim("r", ["work"], 1, 1000 * DAY, "w1")
    # a job that failed, was finished, then retried: queued again with its history
    retried = finished(app, "failed", queue="x")
    app.retry(retried)
    # a job that went back to the queue after a failed attempt (backoff)
    backoff = w.options(queue="y").enqueue()
    (cb,) = app.store.claim("y", ["work"], 1, LEASE, "w1")
    app.store.finish([Outcome(cb.id, cb.lease_token, "retry", error=ERR, delay=500 * DAY)])
    done = finished(app, "succeeded", queue="z")

    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 1
    assert not exists(app, done)
    for job_id in (queued.id, scheduled.id, running.id, retried, backoff.id):
        assert exists(app, job_id), job_id
    assert app.get(running.id).state == "running"
    assert app.get(scheduled.id).state == "scheduled"
    # even a stray finished_at on a non-terminal row does not make it prunable
    execute(backend_url, "UPDATE jobs SET finished_at = 1 WHERE id = ?", (queued.id,))
    for state in ("succeeded", "failed", "cancelled", "expired"):
        assert app.store.prune_jobs(state, 0, None, 100) == 0
    assert exists(app, queued.id)
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="2")]) == [True]


@pytest.mark.parametrize("bad", ["queued", "running", "scheduled", "parked", "nonsense"])
def test_non_terminal_states_are_refused(app: durq.Durq, bad: str) -> None:
    with pytest.raises(ConfigError, match="only finished jobs"):
        app.prune(older_than=0, states=[bad])
    with pytest.raises(ConfigError):
        app.prune(older_than={bad: 0})


def test_bad_ages_and_chunks_are_refused(app: durq.Durq) -> None:
    for bad in (-1, "soon", "7 days", float("inf"), float("nan")):
        with pytest.raises(ConfigError):
            app.prune(older_than=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        app.prune(older_than=0, chunk=0)


def test_durations() -> None:
    assert parse_duration("90") == 90 == parse_duration(90)
    assert parse_duration("15m") == 900
    assert parse_duration("12h") == 12 * 3600
    assert parse_duration("7d") == 7 * DAY
    assert parse_duration("2w") == 14 * DAY
    assert parse_duration("1.5h") == 5400
    assert policy() == DEFAULT_RETENTION
    assert policy("1d", states=["failed"]) == {"failed": DAY}
    assert policy({"succeeded": "1h", "failed": None}) == {"succeeded": 3600}


def test_default_per_state_retention(app: durq.Durq, clock: Clock, backend_url: str) -> None:
    register(app)
    old = {s: finished(app, s, url=backend_url) for s in DEFAULT_RETENTION}
    clock.advance(8 * DAY)
    mid = {s: finished(app, s, url=backend_url) for s in DEFAULT_RETENTION}
    clock.advance(23 * DAY)
    young = {s: finished(app, s, url=backend_url) for s in DEFAULT_RETENTION}
    # now: old ones are 31 days old, mid ones 23 days, young ones 0
    assert app.prune() == 5  # defaults: succeeded 7 days (old, mid); the rest 30 days (old)
    gone = {j for j in [*old.values(), *mid.values(), *young.values()] if not exists(app, j)}
    assert gone == {*old.values(), mid["succeeded"]}


def test_states_and_queue_filters(app: durq.Durq, clock: Clock) -> None:
    register(app)
    a_ok = finished(app, "succeeded", queue="a")
    a_bad = finished(app, "failed", queue="a")
    b_ok = finished(app, "succeeded", queue="b")
    clock.advance(100)
    assert app.prune(older_than=50, states=["succeeded"], queue="a") == 1
    assert not exists(app, a_ok) and exists(app, a_bad) and exists(app, b_ok)
    assert app.prune(older_than={"failed": 200, "succeeded": 50}) == 1
    assert exists(app, a_bad) and not exists(app, b_ok)
    assert app.prune(older_than="1m", states="failed") == 1  # type: ignore[arg-type]
    assert not exists(app, a_bad)


def test_prune_goes_in_bounded_chunks(app: durq.Durq, clock: Clock) -> None:
    register(app)
    w = app.tasks["work"]
    w.enqueue_many([{"n": i} for i in range(25)])
    for c in app.store.claim("default", ["work"], 25, LEASE, "w1"):
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    clock.advance(10)
    # one store call is one transaction of at most `limit` rows
    assert [app.store.prune_jobs("succeeded", 5, None, 10) for _ in range(4)] == [10, 10, 5, 0]
    w.enqueue_many([{"n": i} for i in range(23)])
    for c in app.store.claim("default", ["work"], 23, LEASE, "w1"):
        app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    clock.advance(10)
    assert app.prune(older_than=5, chunk=4) == 23
    assert app.jobs(limit=100) == []


def test_the_worker_pruner_applies_its_per_state_retention(app: durq.Durq, clock: Clock) -> None:
    register(app)
    ok = finished(app, "succeeded")
    bad = finished(app, "failed")
    gone = finished(app, "cancelled")
    queued = app.tasks["work"].enqueue()
    clock.advance(2 * DAY)
    w = app.worker(retention={"succeeded": "1d", "cancelled": 3600, "failed": None})
    assert w.pruner is not None
    assert w.pruner.prune_once() == {"succeeded": 1, "cancelled": 1, "expired": 0}
    assert not exists(app, ok) and not exists(app, gone)
    assert exists(app, bad) and exists(app, queued.id)
    assert app.worker(prune_interval=None).pruner is None
    assert app.worker(prune_interval=0).pruner is None
    keep_all = app.worker(retention={s: None for s in DEFAULT_RETENTION}).pruner
    assert keep_all is not None  # it deletes no job, but sweeps the fair turns
    assert keep_all.prune_once() == {} and exists(app, bad) and exists(app, queued.id)
    with pytest.raises(ConfigError):
        app.worker(retention={"running": 1})
    with pytest.raises(ConfigError):
        app.worker(prune_interval=-1)


def test_status_lists_running_jobs_with_their_progress(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].enqueue()
    app.tasks["work"].enqueue(n=1)
    idle = app.tasks["work"].options(queue="q").enqueue()
    a, b = app.store.claim("default", ["work"], 2, LEASE, "w1")
    assert app.store.set_progress(b.id, b.lease_token, '{"fraction":0.25,"message":"m"}')
    running = app.status()["running"]
    assert [r["id"] for r in running] == [b.id, a.id]
    assert running[0]["progress"] == {"fraction": 0.25, "message": "m"}
    assert running[1]["progress"] is None and running[0]["attempt"] == 1
    assert idle.id not in [r["id"] for r in running]
    assert [r["id"] for r in app.running_progress(limit=1)] == [b.id]


def test_members_of_a_batch_that_has_not_fired_are_kept(app: durq.Durq, clock: Clock) -> None:
    """Pruning a finished member of an open batch would change its counts (or, for a
    member the batch still waits on, keep it from ever firing): such members stay until
    the batch has fired, then go like any other finished job."""
    register(app)
    w = app.tasks["work"]
    with app.batch() as batch:
        first = w.enqueue(n=1)
        second = w.enqueue(n=2)
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    assert c.id == first.id
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1", batch_id=batch.id)])
    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 0  # the batch is open: its finished member stays
    assert exists(app, first.id)
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="2", batch_id=batch.id)])
    assert app.batch_status(batch.id).state == "done"
    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 2
    assert not exists(app, first.id) and not exists(app, second.id)


def test_parents_of_a_fan_in_are_kept_until_it_has_ended(app: durq.Durq, clock: Clock) -> None:
    """A fan-in's child gets its parents' results when its last parent ends. Before, a
    member that ended early and was pruned while another still ran was left out of that
    list: ``[1, 2, 3]`` reached the child as ``[3]`` (and ``ctx.parent_results()`` missed
    it). Such parents stay until their child has ended, then go like any finished job."""
    register(app)

    @app.task
    def total(results: list[int | None]) -> int:
        return 0

    w = app.tasks["work"]
    *members, child = app.group([w.s(n=1), w.s(n=2), w.s(n=3)]).then(
        total.s(), on_parent_failure="run"
    )
    other = finished(app, "succeeded", queue="elsewhere")
    outcomes = {members[0].id: ("succeeded", "1"), members[1].id: ("failed", None)}
    for c in app.store.claim("default", ["work"], 2, LEASE, "w1"):
        kind, result = outcomes[c.id]
        error = ERR if kind == "failed" else None
        app.store.finish([Outcome(c.id, c.lease_token, kind, result=result, error=error)])
    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 1  # the unrelated job only
    assert not exists(app, other)
    assert exists(app, members[0].id) and exists(app, members[1].id)
    assert app.get(child.id).state == "waiting"
    (c,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="3")])
    assert app.get(child.id).state == "queued"
    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 0  # queued: ctx.parent_results() will read them
    (c,) = app.store.claim("default", ["total"], 1, LEASE, "w1")
    assert c.id == child.id
    assert json.loads(c.payload) == {"results": [1, None, 3]}
    parents = app.store.parent_results(child.id)
    assert [(p.id, p.state) for p in parents] == [
        (members[0].id, "succeeded"), (members[1].id, "failed"), (members[2].id, "succeeded")
    ]  # fmt: skip
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="4")])
    clock.advance(365 * DAY)
    assert app.prune(older_than=0) == 4  # the child ended: it and its parents go
