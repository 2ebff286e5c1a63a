"""Queue pauses (issue 4 item 4) on every backend: pause/resume, sources, the claim skipping
paused queues, and the PauseQueue requeue that hands the attempt back."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

import durq
from durq.model import Outcome
from tests.conftest import Clock

LEASE = 30.0


def register(app: durq.Durq) -> None:
    @app.task(max_attempts=3)
    def work(n: int = 0) -> int:
        return n

    @app.task(queue="other", max_attempts=3)
    def elsewhere(n: int = 0) -> int:
        return n


def claim(app: durq.Durq, queue: str = "default", limit: int = 10) -> list[durq.model.Claimed]:
    return app.store.claim(queue, ["work", "elsewhere"], limit, LEASE, "w1")


def test_pause_resume_round_trip(app: durq.Durq, clock: Clock) -> None:
    assert app.paused("default") is None
    assert app.pause("default", "deploy in progress") is True
    info = app.paused("default")
    assert info is not None
    assert (info.queue, info.reason, info.source, info.paused_at) == (
        "default",
        "deploy in progress",
        "admin",
        clock.now,
    )
    assert app.resume("default") is True
    assert app.paused("default") is None
    assert app.resume("default") is False  # nothing to clear


def test_paused_queue_is_not_claimed_and_resume_releases_it(app: durq.Durq) -> None:
    register(app)
    jobs = [app.tasks["work"].enqueue(n=i) for i in range(3)]
    other = app.tasks["elsewhere"].enqueue(n=9)
    app.pause("default", "hold")
    assert claim(app) == []
    # finish_and_claim over several queues skips only the paused one
    _, got = app.store.finish_and_claim(
        [], ["default", "other"], ["work", "elsewhere"], 10, 30, "w"
    )
    assert [c.id for c in got] == [other.id]
    for job in jobs:  # enqueues still go in and stay queued, attempts untouched
        j = app.get(job.id)
        assert (j.state, j.attempts) == ("queued", 0)
    assert app.tasks["work"].enqueue(n=5).state == "queued"
    app.resume("default")
    assert len(claim(app)) == 4


def test_running_jobs_finish_on_a_paused_queue(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    (c,) = claim(app)
    app.pause("default", "hold")
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")]) == [True]
    assert app.get(job.id).state == "succeeded"


def test_first_pause_wins_and_keeps_its_source(app: durq.Durq) -> None:
    assert app.pause("default", "from the environment", source="env") is True
    assert app.pause("default", "admin too") is False
    info = app.paused("default")
    assert info is not None and (info.source, info.reason) == ("env", "from the environment")


def test_resume_with_source_clears_only_that_source(app: durq.Durq) -> None:
    app.pause("default", "maintenance window", source="env")
    # an admin endpoint resumes with source="admin": the env pause must survive it
    assert app.resume("default", source="admin") is False
    info = app.paused("default")
    assert info is not None and info.source == "env"
    assert app.resume("default", source="env") is True
    assert app.paused("default") is None
    app.pause("default", "by hand")
    assert app.resume("default", source="admin") is True


def test_pause_survives_a_restart(make: Callable[[], durq.Durq]) -> None:
    first = make()
    first.pause("default", "kept", source="ops")
    first.close()
    second = make()
    info = second.paused("default")
    assert info is not None and (info.reason, info.source) == ("kept", "ops")


def test_status_shows_paused_queues(app: durq.Durq) -> None:
    app.pause("empty-queue", "nothing in it", source="ops")
    queues = app.status()["queues"]
    assert queues["empty-queue"]["paused"]["reason"] == "nothing in it"
    assert queues["empty-queue"]["paused"]["source"] == "ops"
    app.resume("empty-queue")
    assert app.status()["queues"].get("empty-queue", {"paused": None})["paused"] is None


@pytest.mark.parametrize(
    "args",
    [("", "r"), ("q", 5), ("x" * 201, "r")],
)
def test_pause_refuses_bad_input(app: durq.Durq, args: tuple[object, object]) -> None:
    with pytest.raises(durq.ConfigError):
        app.pause(*args)  # type: ignore[arg-type]
    with pytest.raises(durq.ConfigError):
        app.pause("q", "r", source="")


def test_concurrent_pauses_one_wins(make: Callable[[], durq.Durq]) -> None:
    apps = [make() for _ in range(4)]
    apps[0].paused("default")  # migrate once before the race
    results: list[bool] = []
    barrier = threading.Barrier(len(apps))

    def go(i: int, dq: durq.Durq) -> None:
        barrier.wait()
        results.append(dq.pause("default", f"pauser {i}", source=f"s{i}"))

    threads = [threading.Thread(target=go, args=(i, a)) for i, a in enumerate(apps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False, False, False, True]
    info = apps[0].paused("default")
    assert info is not None and info.reason == f"pauser {info.source[1:]}"


# -- the PauseQueue transition ----------------------------------------------------------


def test_requeue_paused_hands_the_attempt_back_and_pauses(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    (c,) = claim(app)
    assert app.get(job.id).attempts == 1
    assert app.store.requeue_paused(c.id, c.lease_token, "default", "quota") == (True, True)
    j = app.get(job.id)
    assert (j.state, j.attempts, j.errors) == ("queued", 0, [])
    info = app.paused("default")
    assert info is not None and (info.source, info.reason) == ("auto", "quota")
    # the same token again: fenced out; the queue stays paused by the first
    assert app.store.requeue_paused(c.id, c.lease_token, "default", "again") == (False, False)
    assert claim(app) == []
    app.resume("default")
    (again,) = claim(app)
    assert again.id == job.id and again.attempt == 1  # the first attempt, once more


def test_requeue_paused_keeps_an_existing_pause(app: durq.Durq) -> None:
    register(app)
    app.tasks["work"].enqueue(n=1)
    (c,) = claim(app)
    app.pause("default", "admin hold")
    assert app.store.requeue_paused(c.id, c.lease_token, "default", "quota") == (True, False)
    info = app.paused("default")
    assert info is not None and info.source == "admin"


def test_requeue_paused_after_cancel_is_fenced(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    (c,) = claim(app)
    app.cancel(job.id)
    requeued, paused = app.store.requeue_paused(c.id, c.lease_token, "default", "quota")
    assert (requeued, paused) == (False, True)
    assert app.get(job.id).state == "cancelled"


def test_requeue_paused_never_goes_below_zero(app: durq.Durq, clock: Clock) -> None:
    """Many pauses of one job never make its attempt count negative or spend one."""
    register(app)
    job = app.tasks["work"].enqueue(n=1)
    for _ in range(5):
        app.resume("default")
        (c,) = claim(app)
        assert c.attempt == 1
        assert app.store.requeue_paused(c.id, c.lease_token, "default", "q")[0]
    assert app.get(job.id).attempts == 0
