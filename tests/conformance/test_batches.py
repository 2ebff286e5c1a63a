"""Batches (issue 4 item 2, case 14), run against every backend.

The callback is enqueued exactly once per completion, in the same transaction as the last
member's terminal state change; retrying members reopens the batch; concurrent finishes of
the last two members fire once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import durq
from durq.model import AttemptError, Claimed, NewJob, Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(queue="callbacks")
    def done(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
        return None


def claim(app: durq.Durq, limit: int = 1000, worker: str = "w1") -> list[Claimed]:
    return app.store.claim("default", ["work"], limit, LEASE, worker)


def ok(c: Claimed) -> Outcome:
    return Outcome(c.id, c.lease_token, "succeeded", result="null", batch_id=c.batch_id)


def bad(c: Claimed, kind: str = "failed") -> Outcome:
    error = AttemptError(c.attempt, 0.0, "ValueError", "boom", "", "permanent")
    return Outcome(c.id, c.lease_token, kind, error=error, batch_id=c.batch_id)


def callbacks(app: durq.Durq) -> list[dict[str, Any]]:
    """The callback jobs' payloads, oldest first."""
    return [j.payload for j in reversed(app.jobs(task="done", limit=1000))]


def test_batch_of_50_with_3_failures_fires_partial_once_then_completed_after_retry(
    app: durq.Durq,
) -> None:
    register(app)
    work = app.tasks["work"]
    with app.batch(on_complete=app.tasks["done"], meta={"import": "podcast-7"}) as batch:
        jobs = [work.enqueue(n=i) for i in range(48)]
        # the last two go in one enqueue_many, and one of them gets a single attempt
        jobs += work.enqueue_many([{"n": 48}])
        jobs += [work.options(max_attempts=1).enqueue(n=49)]
        assert app.batch_status(batch.id).state == "building"
    status = app.batch_status(batch.id)
    assert (status.state, status.size, status.fired, status.outcome) == ("open", 50, 0, None)
    assert status.counts == {"queued": 50}
    assert status.meta == {"import": "podcast-7"}

    claimed = claim(app)
    assert len(claimed) == 50 and all(c.batch_id == batch.id for c in claimed)
    failing = {jobs[3].id, jobs[17].id}
    outcomes = []
    for c in claimed:
        if c.id in failing:
            outcomes.append(bad(c))
        elif c.id == jobs[49].id:
            outcomes.append(bad(c, "retry"))  # a retry with no attempts left fails the job
        else:
            outcomes.append(ok(c))
    # finish in three transactions; the callback appears only with the last one
    assert all(app.store.finish(outcomes[:30]))
    assert callbacks(app) == []
    assert all(app.store.finish(outcomes[30:49]))
    assert callbacks(app) == []
    assert all(app.store.finish(outcomes[49:]))
    (fired,) = callbacks(app)
    assert fired == {
        "batch_id": batch.id,
        "outcome": "partial",
        "counts": {"failed": 3, "succeeded": 47},
        "meta": {"import": "podcast-7"},
    }
    status = app.batch_status(batch.id)
    assert (status.state, status.outcome, status.fired) == ("done", "partial", 1)
    assert app.jobs(task="done")[0].queue == "callbacks"

    # retry the three until they succeed: the batch reopens and fires once more
    for job_id in sorted(failing | {jobs[49].id}):
        app.retry(job_id)
        assert app.batch_status(batch.id).state == "open"
    first = claim(app, limit=1)
    assert app.store.finish([bad(first[0])]) == [True]  # fails again for good ...
    assert app.batch_status(batch.id).state == "open"  # ... two are still queued: no fire
    assert len(callbacks(app)) == 1
    app.retry(first[0].id)  # ... and is retried again
    rest = claim(app)
    assert len(rest) == 3
    assert app.store.finish([ok(c) for c in rest]) == [True] * 3
    assert callbacks(app)[1:] == [
        {
            "batch_id": batch.id,
            "outcome": "completed",
            "counts": {"succeeded": 50},
            "meta": {"import": "podcast-7"},
        }
    ]
    status = app.batch_status(batch.id)
    assert (status.state, status.outcome, status.fired) == ("done", "completed", 2)
    assert status.counts == {"succeeded": 50}


def test_none_succeeded_is_failed_and_all_succeeded_is_completed(app: durq.Durq) -> None:
    register(app)
    with app.batch(on_complete="done") as failed_batch:
        app.enqueue("work", {"n": 1})
        app.enqueue("work", {"n": 2})
    assert app.store.finish([bad(c) for c in claim(app)]) == [True, True]
    with app.batch(on_complete="done") as good_batch:
        app.enqueue("work", {"n": 3})
    app.store.finish([ok(c) for c in claim(app)])
    outcomes = {p["batch_id"]: (p["outcome"], p["counts"]) for p in callbacks(app)}
    assert outcomes == {
        failed_batch.id: ("failed", {"failed": 2}),
        good_batch.id: ("completed", {"succeeded": 1}),
    }


def test_an_empty_batch_fires_completed_with_zero_counts_when_sealed(app: durq.Durq) -> None:
    register(app)
    with app.batch(on_complete="done", meta={"k": 1}) as batch:
        pass
    assert callbacks(app) == [
        {"batch_id": batch.id, "outcome": "completed", "counts": {}, "meta": {"k": 1}}
    ]
    assert app.batch_status(batch.id).state == "done"


def test_members_that_finish_before_the_block_exits_fire_at_the_seal(app: durq.Durq) -> None:
    register(app)
    with app.batch(on_complete="done") as batch:
        app.enqueue("work", {"n": 1})
        app.store.finish([ok(c) for c in claim(app)])
        assert callbacks(app) == []  # still building: more members may come
        app.enqueue("work", {"n": 2})
        app.store.finish([ok(c) for c in claim(app)])
        assert callbacks(app) == []
    ((fired),) = callbacks(app)
    assert (fired["batch_id"], fired["outcome"]) == (batch.id, "completed")


def test_only_enqueues_inside_the_block_on_this_app_and_thread_join(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    register(app)
    other = make()
    before = app.enqueue("work", {"n": 0})
    in_thread: list[int] = []
    with app.batch(on_complete="done") as batch:
        inside = app.enqueue("work", {"n": 1})
        t = threading.Thread(target=lambda: in_thread.append(app.enqueue("work", {"n": 2}).id))
        t.start()
        t.join()
        elsewhere = other.enqueue("work", {"n": 3})  # another Durq instance
    after = app.enqueue("work", {"n": 4})
    assert app.batch_status(batch.id).size == 1
    by_id = {c.id: c.batch_id for c in claim(app)}
    assert by_id[inside.id] == batch.id
    for job_id in (before.id, in_thread[0], elsewhere.id, after.id):
        assert by_id[job_id] is None


def test_a_sealed_batch_takes_no_members(app: durq.Durq) -> None:
    register(app)
    with app.batch(on_complete="done") as batch:
        pass
    new = NewJob("default", "work", "{}", 0, None, 3, batch_id=batch.id)
    with pytest.raises(durq.ConfigError, match="sealed"):
        app.store.enqueue([new])
    assert app.jobs(task="work") == []
    with pytest.raises(durq.ConfigError, match="no batch"):
        app.store.enqueue([NewJob("default", "work", "{}", 0, None, 3, batch_id=10_000)])


def test_two_workers_finishing_the_last_two_members_at_once_fire_once(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    register(app)
    w1, w2 = make(), make()
    rounds = 12
    for _ in range(rounds):
        with app.batch(on_complete="done") as batch:
            for i in range(4):
                app.enqueue("work", {"n": i})
        a, b, c, d = claim(app)
        app.store.finish([ok(a), ok(b)])
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def finish(
            dq: durq.Durq,
            o: Outcome,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                barrier.wait(5)
                assert dq.store.finish([o]) == [True]
            except BaseException as exc:
                errors.append(exc)

        threads = [
            threading.Thread(target=finish, args=(w1, ok(c))),
            threading.Thread(target=finish, args=(w2, bad(d))),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        mine = [p for p in callbacks(app) if p["batch_id"] == batch.id]
        assert [(p["outcome"], p["counts"]) for p in mine] == [
            ("partial", {"failed": 1, "succeeded": 3})
        ]
        assert app.batch_status(batch.id).fired == 1
    assert len(callbacks(app)) == rounds


def test_a_retry_racing_the_last_finish_never_loses_the_second_firing(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    """dq.retry of a failed member while another worker finishes the last running one:
    whichever commits first, the batch fires again once the retried member lands."""
    register(app)
    other = make()
    for _ in range(8):
        with app.batch(on_complete="done") as batch:
            app.enqueue("work", {"n": 1})
            app.enqueue("work", {"n": 2})
        a, b = claim(app)
        app.store.finish([bad(a)])
        barrier = threading.Barrier(2)

        def retry_a(barrier: threading.Barrier = barrier, job_id: int = a.id) -> None:
            barrier.wait(5)
            other.retry(job_id)

        t = threading.Thread(target=retry_a)
        t.start()
        barrier.wait(5)
        app.store.finish([ok(b)])
        t.join(30)
        (again,) = claim(app)
        app.store.finish([ok(again)])
        mine = [p["outcome"] for p in callbacks(app) if p["batch_id"] == batch.id]
        # either the finish fired 'partial' before the retry reopened it, or not at all
        assert mine in (["partial", "completed"], ["completed"])
        assert app.batch_status(batch.id).state == "done"


def test_cancel_and_the_reaper_close_a_batch(app: durq.Durq, clock: Clock) -> None:
    register(app)
    with app.batch(on_complete="done"):
        a = app.enqueue("work", {"n": 1})
        app.enqueue("work", {"n": 2}, max_attempts=1)
        c = app.enqueue("work", {"n": 3})
    app.cancel(c.id)  # a queued member cancelled
    claimed = {x.id: x for x in claim(app)}
    app.store.finish([ok(claimed[a.id])])
    assert callbacks(app) == []
    clock.advance(LEASE + 1)  # the worker holding the other member died
    summary = app.store.reap()
    assert summary.failed == 1
    (fired,) = callbacks(app)
    assert (fired["outcome"], fired["counts"]) == (
        "partial",
        {"cancelled": 1, "failed": 1, "succeeded": 1},
    )
    # cancelling a running member that is the last one fires too
    with app.batch(on_complete="done") as second:
        d = app.enqueue("work", {"n": 4})
    claim(app)
    app.cancel(d.id)
    last = callbacks(app)[-1]
    assert (last["batch_id"], last["outcome"]) == (second.id, "failed")


def test_a_member_run_twice_does_not_change_the_progress_case_14(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """Case 14: member #7 runs twice (its first worker stalls past its lease); the stale
    copy's finish is fenced out, progress counts distinct members, and the callback fires
    once, after all 50, with 49 successes and the permanent failure of #12."""
    register(app)
    with app.batch(on_complete="done") as batch:
        jobs = [app.enqueue("work", {"n": i}) for i in range(50)]
    stalled = make()
    first = {c.id: c for c in stalled.store.claim("default", ["work"], 1000, LEASE, "w1")}
    seven = first.pop(jobs[7].id)
    twelve = first.pop(jobs[12].id)
    app.store.finish([ok(c) for c in first.values()] + [bad(twelve)])
    assert callbacks(app) == []  # #7 is still running
    clock.advance(LEASE + 1)
    assert app.store.reap().recovered == 1  # the stalled copy's lease expired
    (again,) = claim(app, worker="w2")
    assert again.id == seven.id
    assert app.store.finish([ok(again)]) == [True]
    assert stalled.store.finish([ok(seven)]) == [False]  # the late duplicate changes nothing
    (fired,) = callbacks(app)
    assert fired == {
        "batch_id": batch.id,
        "outcome": "partial",
        "counts": {"failed": 1, "succeeded": 49},
        "meta": {},
    }
    assert app.batch_status(batch.id).fired == 1


def test_a_block_that_raises_cancels_unfinished_members_and_never_reports_completed(
    app: durq.Durq,
) -> None:
    register(app)
    batch = app.batch(on_complete="done")
    with pytest.raises(RuntimeError, match="feed went away"), batch:
        app.enqueue("work", {"n": 1})
        app.store.finish([ok(c) for c in claim(app)])  # already done before the error
        app.enqueue("work", {"n": 2})
        raise RuntimeError("feed went away")
    status = app.batch_status(batch.id)
    assert status.aborted == "RuntimeError: feed went away"
    assert status.counts == {"cancelled": 1, "succeeded": 1}
    (fired,) = callbacks(app)
    assert (fired["outcome"], fired["counts"]) == ("partial", {"cancelled": 1, "succeeded": 1})
    # all its members done before the error: still not 'completed'
    with pytest.raises(RuntimeError), app.batch(on_complete="done"):
        app.enqueue("work", {"n": 3})
        app.store.finish([ok(c) for c in claim(app)])
        raise RuntimeError("half an import")
    assert callbacks(app)[-1]["outcome"] == "partial"


def test_bad_batch_arguments_are_refused(app: durq.Durq) -> None:
    register(app)
    with pytest.raises(durq.ConfigError, match="must accept"):
        app.batch(on_complete=app.tasks["work"])
    with pytest.raises(durq.PayloadError):
        app.batch(on_complete="done", meta={"x": object()})
    with pytest.raises(durq.BatchNotFound):
        app.batch_status(12345)
    with (
        app.batch(on_complete="done"),
        pytest.raises(durq.ConfigError, match="nest"),
        app.batch(on_complete="done"),
    ):
        pass
    with pytest.raises(durq.JobGone):
        app.seal_batch(1)


def test_a_producer_that_died_in_its_block_can_be_sealed(app: durq.Durq) -> None:
    register(app)
    batch = app.batch(on_complete="done")
    batch.__enter__()  # the producer dies here: the block never exits
    app.enqueue("work", {"n": 1})
    from durq import batches

    batches._OPEN.set(())  # what a fresh process would have
    status = app.seal_batch(batch.id, aborted="producer died")
    assert (status.state, status.outcome, status.counts) == ("done", "failed", {"cancelled": 1})


def test_a_member_knows_its_batch(app: durq.Durq) -> None:
    @app.task
    def member_of() -> None:
        pass

    with app.batch() as batch:
        inside = member_of.enqueue()
    outside = member_of.enqueue()
    assert inside.batch_id == batch.id and app.get(inside.id).batch_id == batch.id
    assert app.get(inside.id).to_dict()["batch_id"] == batch.id
    assert outside.batch_id is None and app.get(outside.id).batch_id is None
