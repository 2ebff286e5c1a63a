"""Parked jobs (issue 4, item 1): park, adopt, cancel, park TTL, on both backends."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

import durq
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n


def claim(app: durq.Durq, limit: int = 500) -> list[int]:
    return [c.id for c in app.store.claim("default", ["work"], limit, LEASE, "w1")]


def test_a_parked_job_does_not_run_until_adopted(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].options(park=True).enqueue(n=1)
    assert job.state == "parked" and app.get(job.id).state == "parked"
    assert claim(app) == []
    assert [j.id for j in app.jobs(state="parked")] == [job.id]
    assert not app.store.has_pending(["default"], ["work"])
    adopted = app.adopt(job.id)
    assert adopted.state == "queued"
    assert claim(app) == [job.id]


def test_enqueue_by_name_can_park_and_adopt_keeps_a_later_run_at(
    app: durq.Durq, clock: Clock
) -> None:
    job = app.enqueue("work", {"n": 2}, park=True, delay=100)
    assert job.state == "parked"
    assert app.adopt(job.id).state == "scheduled"
    clock.advance(101)
    assert app.get(job.id).state == "queued"


def test_adopt_and_cancel_tell_the_loser_the_job_is_gone(app: durq.Durq) -> None:
    register(app)
    w = app.tasks["work"]
    a, b, c = (w.options(park=True).enqueue(n=i) for i in range(3))
    app.adopt(a.id)
    with pytest.raises(durq.JobGone, match="not parked"):
        app.adopt(a.id)
    with pytest.raises(durq.JobGone, match="not parked"):
        app.cancel(a.id, parked_only=True)
    assert app.get(a.id).state == "queued"
    assert app.cancel(b.id, parked_only=True).state == "cancelled"
    with pytest.raises(durq.JobGone, match="cancelled"):
        app.adopt(b.id)
    assert app.cancel(c.id).state == "cancelled"  # plain cancel takes parked jobs too
    with pytest.raises(durq.JobNotFound):
        app.adopt(10_000)
    # a queued job that was never parked cannot be adopted
    plain = w.enqueue(n=9)
    with pytest.raises(durq.JobGone, match="queued"):
        app.adopt(plain.id)


def test_two_threads_racing_adopt_and_cancel_have_exactly_one_winner_per_job(
    app: durq.Durq, make: Callable[[], durq.Durq]
) -> None:
    register(app)
    jobs = app.tasks["work"].options(park=True).enqueue_many([{"n": i} for i in range(200)])
    ids = [j.id for j in jobs]
    adopter, canceller = make(), make()
    won: dict[str, set[int]] = {"adopt": set(), "cancel": set()}
    gone: dict[str, set[int]] = {"adopt": set(), "cancel": set()}
    errors: list[BaseException] = []
    barrier = threading.Barrier(2)

    def race(name: str, act: Callable[[int], durq.Job]) -> None:
        try:
            for job_id in ids:
                barrier.wait(30)  # both threads go at each job together
                try:
                    act(job_id)
                    won[name].add(job_id)
                except durq.JobGone:
                    gone[name].add(job_id)
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [
        threading.Thread(target=race, args=("adopt", adopter.adopt)),
        threading.Thread(
            target=race, args=("cancel", lambda i: canceller.cancel(i, parked_only=True))
        ),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert won["adopt"].isdisjoint(won["cancel"])
    assert won["adopt"] | won["cancel"] == set(ids)  # exactly one winner per job
    assert gone["adopt"] == won["cancel"] and gone["cancel"] == won["adopt"]
    states = {j.id: j.state for j in app.jobs(limit=1000)}
    assert {i for i, s in states.items() if s == "queued"} == won["adopt"]
    assert {i for i, s in states.items() if s == "cancelled"} == won["cancel"]
    assert sorted(claim(app)) == sorted(won["adopt"])  # adopted jobs really run


def test_a_parked_job_past_its_ttl_expires_and_cannot_be_adopted(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    job = app.tasks["work"].options(park=True, park_ttl=60).enqueue(n=1)
    kept = app.tasks["work"].options(park=True).enqueue(n=2)  # no TTL: parked for good
    assert job.park_expires_at == pytest.approx(job.created_at + 60)
    clock.advance(61)
    with pytest.raises(durq.JobGone, match="park TTL"):
        app.adopt(job.id)  # not adopted once the TTL passed, even before the sweep
    summary = app.sweep()
    assert summary.expired == (job.id,) and summary.noticed == ()
    expired = app.get(job.id)
    assert expired.state == "expired" and expired.finished_at is not None
    assert expired.last_error is not None and expired.last_error.kind == "expired"
    with pytest.raises(durq.JobGone, match="expired"):
        app.adopt(job.id)
    with pytest.raises(durq.JobGone):
        app.cancel(job.id)
    # its on_expire hook job, once
    (hook,) = app.jobs(task="durq.hook:work")
    assert (hook.key, hook.payload) == (
        f"durq.expire:{job.id}",
        {"job_id": job.id, "hook": "expire"},
    )
    assert app.sweep().expired == ()
    assert app.get(kept.id).state == "parked"
    assert app.adopt(kept.id).state == "queued"


def test_bad_park_options_are_refused(app: durq.Durq) -> None:
    register(app)
    w = app.tasks["work"]
    with pytest.raises(durq.ConfigError, match="park=True"):
        w.options(park_ttl=10).enqueue(n=1)
    with pytest.raises(durq.ConfigError, match="park_ttl"):
        w.options(park=True, park_ttl=-1).enqueue(n=1)
    with pytest.raises(durq.ConfigError, match="park must be"):
        app.enqueue("work", {}, park="yes")  # type: ignore[arg-type]
    assert app.jobs() == []


def test_parked_jobs_are_written_in_the_callers_transaction(app: durq.Durq) -> None:
    """enqueue_many and keyed enqueues park too; a repeated key returns the parked job."""
    register(app)
    w = app.tasks["work"].options(park=True)
    first = w.options(key="k1").enqueue(n=1)
    again = w.options(key="k1").enqueue(n=1)
    assert again.id == first.id and again.state == "parked"
    many = w.enqueue_many([{"n": 1}, {"n": 2}], keys=["k2", None])
    assert [app.get(j.id).state for j in many] == ["parked", "parked"]
    assert json.loads(json.dumps(app.get(first.id).to_dict()))["state"] == "parked"


def test_status_counts_parked_jobs(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].options(park=True).enqueue_many([{"n": 1}, {"n": 2}])
    app.tasks["work"].enqueue(n=3)
    counts = app.status()["queues"]["default"]["counts"]
    assert (counts["parked"], counts["queued"]) == (2, 1)
