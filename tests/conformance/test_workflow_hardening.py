"""Hardening of the workflow features where they meet each other, on every backend.

Each test here reproduces a defect found by using two features together (or by feeding an
API input it should refuse); the fix is in the commit that added the test.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

import durq
from durq.model import Claimed, Outcome
from durq.worker.scheduler import seconds_to_next, tick
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(queue="callbacks")
    def done(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
        return None


def claim(app: durq.Durq, queue: str = "default", task: str = "work") -> list[Claimed]:
    return app.store.claim(queue, [task], 100, LEASE, "w1")


def ok(c: Claimed) -> Outcome:
    return Outcome(c.id, c.lease_token, "succeeded", result="null", batch_id=c.batch_id)


def callbacks(app: durq.Durq) -> list[dict[str, Any]]:
    return [j.payload for j in reversed(app.jobs(task="done", limit=1000))]


def count_rows(app: durq.Durq) -> int:
    return len(app.jobs(limit=100_000))


# -- batches x parked / deadlines ---------------------------------------------------------


def test_a_parked_batch_member_is_stored_parked_and_its_park_ttl_expires_it(
    app: durq.Durq, clock: Clock
) -> None:
    """Found: inside `with dq.batch()` the enqueue took the batch path, which skipped the
    parked / deadline columns: a park=True member was stored `queued` and ran at once."""
    register(app)
    work = app.tasks["work"]
    with app.batch(on_complete=app.tasks["done"]) as batch:
        job = work.options(park=True, park_ttl=60).enqueue(n=1)
        many = work.options(park=True).enqueue_many([{"n": 2}])
    assert job.state == "parked"
    assert app.get(job.id).state == "parked"
    assert app.get(many[0].id).state == "parked"
    assert app.get(job.id).park_expires_at == pytest.approx(job.created_at + 60)
    assert claim(app) == []  # parked members are not runnable
    assert app.batch_status(batch.id).state == "open"

    app.cancel(many[0].id, parked_only=True)
    clock.advance(61)
    assert app.sweep().expired == (job.id,)
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.counts) == (
        "done",
        1,
        {"cancelled": 1, "expired": 1},
    )
    assert callbacks(app)[0]["outcome"] == "failed"


def test_a_batch_member_with_a_deadline_expires_and_its_batch_fires_once(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    work = app.tasks["work"]
    with app.batch(on_complete=app.tasks["done"]) as batch:
        late = work.options(deadline_in=10, notice_after=5).enqueue(n=1)
        on_time = work.enqueue(n=2)
    assert app.get(late.id).deadline == pytest.approx(late.created_at + 10)
    assert app.get(late.id).notice_at == pytest.approx(late.created_at + 5)
    (first,) = [c for c in claim(app) if c.id == on_time.id] or [None]
    assert first is not None
    app.store.finish([ok(first)])
    clock.advance(11)
    assert app.sweep().expired == (late.id,)
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.outcome) == ("done", 1, "partial")
    assert callbacks(app) == [
        {
            "batch_id": batch.id,
            "outcome": "partial",
            "counts": {"expired": 1, "succeeded": 1},
            "meta": {},
        }
    ]
    assert app.sweep().expired == ()  # no second expiry, no second firing
    assert app.batch_status(batch.id).fired == 1

    # retried after the batch fired: the batch reopens, the stale deadline is cleared,
    # and it fires again (completed) when the member lands
    app.retry(late.id)
    assert app.get(late.id).deadline is None
    assert app.batch_status(batch.id).state == "open"
    (again,) = claim(app)
    app.store.finish([ok(again)])
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.outcome) == ("done", 2, "completed")


# -- periodic x deadlines -----------------------------------------------------------------


def test_a_periodic_job_of_a_task_with_a_deadline_gets_its_deadline_and_notice(
    app: durq.Durq, clock: Clock
) -> None:
    """Found: the scheduler's insert (Store.enqueue_periodic) skipped the deadline columns,
    so a periodic task's deadline_in / notice_after never applied to its slots' jobs."""

    @app.periodic("* * * * *")
    @app.task(deadline_in=30, notice_after=10)
    def report() -> None:
        return None

    clock.now = 1_800_000_000.0 - (1_800_000_000.0 % 60) + 1  # just after a minute
    tick(app)  # anchors the schedule
    clock.advance(60)
    (fired,) = tick(app)
    job = app.get(fired.job_id)
    assert job.deadline == pytest.approx(job.created_at + 30)
    assert job.notice_at == pytest.approx(job.created_at + 10)
    clock.advance(31)
    assert app.sweep().expired == (job.id,)


# -- batches x purge ----------------------------------------------------------------------


def test_purging_the_last_unfinished_members_fires_the_batch_as_aborted(app: durq.Durq) -> None:
    """Found: `dq.purge(queue, states=["queued"])` deleted a sealed batch's last unfinished
    members and nothing closed the batch: it stayed open for ever, its callback never
    fired (case 14's failure). Now the purge closes it in its own transaction, marked
    aborted (so its outcome cannot be `completed`)."""
    register(app)
    work = app.tasks["work"]
    with app.batch(on_complete=app.tasks["done"]) as batch:
        first = work.enqueue(n=1)
        work.enqueue(n=2)
        work.enqueue(n=3)
    (claimed,) = app.store.claim("default", ["work"], 1, LEASE, "w1")
    assert claimed.id == first.id
    app.store.finish([ok(claimed)])
    assert app.batch_status(batch.id).state == "open"
    assert app.purge("default", states=["queued"]) == 2
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.outcome) == ("done", 1, "partial")
    assert status.aborted is not None and "purge" in status.aborted
    assert callbacks(app) == [
        {"batch_id": batch.id, "outcome": "partial", "counts": {"succeeded": 1}, "meta": {}}
    ]


def test_purging_finished_members_of_an_open_batch_does_not_fire_it(app: durq.Durq) -> None:
    register(app)
    work = app.tasks["work"]
    with app.batch(on_complete=app.tasks["done"]) as batch:
        first = work.enqueue(n=1)
        second = work.enqueue(n=2)
    app.cancel(first.id)
    assert app.purge("default") == 1  # the finished states: the cancelled member only
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.aborted) == ("open", 0, None)
    app.cancel(second.id)
    status = app.batch_status(batch.id)
    assert (status.state, status.fired, status.outcome) == ("done", 1, "failed")
    assert app.purge("callbacks", states=["queued"]) == 1  # the callback job itself
    assert app.batch_status(batch.id).fired == 1


# -- periodic: cron strings croniter accepts but that never fire ----------------------------


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4,6,9,11 *"])
def test_a_cron_that_never_fires_is_refused_at_registration(app: durq.Durq, cron: str) -> None:
    """Found: croniter.is_valid accepts February 31st, but get_next/get_prev raise
    CroniterBadDateError; the scheduler hit it on its first tick and the worker crashed
    (worker_crashed, exit 1) - every worker of the app, at every start."""
    register(app)
    with pytest.raises(durq.ConfigError, match="never"):
        app.periodic(cron, name="never")(app.tasks["work"])
    assert "never" not in app.periodics
    assert tick(app) == []
    assert math.isfinite(seconds_to_next(app))


def test_a_periodic_payload_that_is_not_a_dict_is_a_payload_error(app: durq.Durq) -> None:
    register(app)
    with pytest.raises(durq.PayloadError):
        app.periodic("* * * * *", payload=[1])(app.tasks["work"])  # type: ignore[arg-type]
    assert app.periodics == {}


# -- bad input to the new APIs ------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, "x", 1.5, True, None])
def test_a_job_or_batch_id_that_is_not_an_int_is_a_config_error(
    app: durq.Durq, bad: object
) -> None:
    """Found: adopt/cancel/retry/steps/clear_steps/batch_status/seal_batch with NaN or
    "x" raised a bare ValueError (TypeError for None), not a durq error."""
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    calls = [app.adopt, app.cancel, app.retry, app.steps, app.clear_steps, app.get]
    for call in calls:
        with pytest.raises(durq.ConfigError):
            call(bad)  # type: ignore[arg-type]
    for call in (app.batch_status, app.seal_batch):
        with pytest.raises(durq.ConfigError):
            call(bad)  # type: ignore[operator]
    assert app.get(job.id).state == "queued"
    assert count_rows(app) == 1


def test_an_id_beyond_64_bits_is_not_found(app: durq.Durq) -> None:
    """Found: on SQLite an id of 2**70 raised OverflowError from the driver."""
    for call in (app.adopt, app.cancel, app.retry, app.get, app.steps, app.clear_steps):
        with pytest.raises(durq.JobNotFound):
            call(2**70)
    with pytest.raises(durq.BatchNotFound):
        app.batch_status(2**70)


def test_a_concurrency_key_with_a_lone_surrogate_is_a_payload_error(app: durq.Durq) -> None:
    """Found: a key function returning "\\ud800" raised UnicodeEncodeError at enqueue."""

    @app.task(concurrency=2, concurrency_key=lambda payload: "\ud800")
    def fetch(n: int = 0) -> None:
        return None

    with pytest.raises(durq.PayloadError, match="surrogate"):
        fetch.enqueue(n=1)
    with pytest.raises(durq.ConfigError, match="surrogate"):
        app.limit("\udfff", 1)
    assert count_rows(app) == 0


def test_a_nul_in_a_queue_or_source_name_is_refused_on_every_backend(app: durq.Durq) -> None:
    @app.task
    def nul_task() -> None:
        pass

    with pytest.raises(durq.ConfigError, match="NUL"):
        nul_task.options(queue="a\x00b").enqueue()
    with pytest.raises(durq.ConfigError, match="NUL"):
        app.pause("q", "why", source="ad\x00min")
    assert app.jobs() == []


def test_a_refused_schedule_on_a_plain_function_registers_no_task(app: durq.Durq) -> None:
    def never() -> None:
        pass

    with pytest.raises(durq.ConfigError):
        app.periodic("0 0 31 2 *")(never)  # February 31st never comes
    assert "never" not in app.tasks
