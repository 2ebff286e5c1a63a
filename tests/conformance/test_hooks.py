"""on_fail hooks, hook queues and dq.find, on both backends (docs/features/hooks.md).

Each path that ends a job ``failed`` inserts its hook job (task ``durq.hook:<task>``, key
``durq.fail:<id>``) in the same transaction: a failure outcome, a retry the store turns into
a failure, the reaper, a charged shutdown release. Jobs of tasks without ``on_fail`` get
none. The running of the hook is tested with real workers in tests/integration/test_hooks.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

import durq
from durq.hooks import mark_outcome
from durq.model import AttemptError, Outcome
from tests.conftest import Clock

LEASE = 30.0
ERROR = AttemptError(1, 0.0, "ValueError", "boom", "", "permanent")


def register(app: durq.Durq, calls: list[tuple[str, int, str]] | None = None) -> None:
    def on_fail(job: durq.Job) -> None:
        if calls is not None:
            calls.append(("fail", job.id, str(job.state)))

    def on_expire(job: durq.Job) -> None:
        if calls is not None:
            calls.append(("expire", job.id, str(job.state)))

    @app.task(max_attempts=2, on_fail=on_fail)
    def render(n: int = 0) -> int:
        return n

    @app.task(queue="generation", hook_queue="notify", on_fail=on_fail, on_expire=on_expire,
              on_slow=on_expire, max_attempts=1)  # fmt: skip
    def generate(n: int = 0) -> int:
        return n

    @app.task(max_attempts=1)
    def plain(n: int = 0) -> int:
        return n


def hook_jobs(app: durq.Durq) -> list[tuple[str, str | None, dict[str, object]]]:
    found = [j for j in app.jobs(limit=1000) if j.task.startswith("durq.hook:")]
    return sorted((j.queue, j.key, j.payload) for j in found)


def claim(app: durq.Durq, queue: str = "default", task: str = "render") -> durq.model.Claimed:
    (c,) = app.store.claim(queue, [task], 1, LEASE, "w1")
    return c


def marked(app: durq.Durq, task: str, outcome: Outcome) -> Outcome:
    return mark_outcome(app, task, outcome)


def test_a_failure_outcome_inserts_the_hook_job_once(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["render"].enqueue(n=1)
    c = claim(app)
    out = marked(app, "render", Outcome(c.id, c.lease_token, "failed", error=ERROR))
    assert out.on_fail
    assert app.store.finish([out]) == [True]
    assert app.get(job.id).state == "failed"
    assert hook_jobs(app) == [
        ("default", f"durq.fail:{job.id}", {"job_id": job.id, "hook": "fail"})
    ]
    hook = app.find("default", f"durq.fail:{job.id}")
    assert hook is not None and hook.task == "durq.hook:render" and hook.state == "queued"
    assert app.store.finish([out]) == [False]  # a stale repeat writes nothing
    assert len(hook_jobs(app)) == 1


def test_tasks_without_on_fail_are_not_marked_and_get_no_hook(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["plain"].enqueue(n=1)
    c = claim(app, task="plain")
    out = marked(app, "plain", Outcome(c.id, c.lease_token, "failed", error=ERROR))
    assert not out.on_fail
    app.store.finish([out])
    assert app.get(job.id).state == "failed" and hook_jobs(app) == []
    ok = marked(app, "render", Outcome(1, 1, "succeeded", result="1"))
    assert not ok.on_fail  # successes are never marked


def test_a_retry_with_attempts_left_inserts_nothing_the_last_one_fails_with_its_hook(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    job = app.tasks["render"].enqueue(n=1)
    c = claim(app)
    retry = marked(app, "render", Outcome(c.id, c.lease_token, "retry", error=ERROR))
    assert app.store.finish([retry]) == [True]
    assert app.get(job.id).state == "queued" and hook_jobs(app) == []
    c = claim(app)
    assert c.attempt == 2 == c.max_attempts
    # the worker would have sent "failed"; the store bounds attempts itself and fails it
    retry = marked(app, "render", Outcome(c.id, c.lease_token, "retry", error=ERROR))
    assert app.store.finish([retry]) == [True]
    assert app.get(job.id).state == "failed"
    assert [k for _, k, _ in hook_jobs(app)] == [f"durq.fail:{job.id}"]


def test_the_reaper_fails_a_lost_lease_with_no_attempts_left_and_inserts_the_hook(
    app: durq.Durq, clock: Clock
) -> None:
    register(app)
    flagged = app.tasks["generate"].enqueue(n=1)
    plain = app.tasks["plain"].enqueue(n=2)
    by_name = app.enqueue("render", {"n": 3}, max_attempts=1)  # the producer has the task
    claim(app, "generation", "generate")
    claim(app, "default", "plain")
    claim(app, "default", "render")
    clock.advance(LEASE + 1)
    summary = app.store.reap()
    assert summary.failed == 3
    assert hook_jobs(app) == [
        ("default", f"durq.fail:{by_name.id}", {"job_id": by_name.id, "hook": "fail"}),
        ("notify", f"durq.fail:{flagged.id}", {"job_id": flagged.id, "hook": "fail"}),
    ]
    assert app.get(plain.id).state == "failed"  # no on_fail: no hook job
    app.store.reap()
    assert len(hook_jobs(app)) == 2


def test_a_charged_shutdown_release_that_fails_the_job_inserts_the_hook(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    c = claim(app, "generation", "generate")
    error = json.dumps({"attempt": 1, "at": 0, "type": "Shutdown", "message": "bye",
                        "traceback": "", "kind": "shutdown"})  # fmt: skip
    assert app.store.release(c.id, c.lease_token, 1, error) == ("queued", 0)  # free
    assert hook_jobs(app) == []
    c = claim(app, "generation", "generate")
    assert app.store.release(c.id, c.lease_token, 1, error) == ("failed", 1)  # charged
    assert [k for _, k, _ in hook_jobs(app)] == [f"durq.fail:{job.id}"]


def test_hook_queue_carries_every_hook_of_the_task(app: durq.Durq, clock: Clock) -> None:
    register(app)
    slow = app.tasks["generate"].options(notice_after=10).enqueue(n=1)
    late = app.tasks["generate"].options(deadline_in=10).enqueue(n=2)
    parked = app.tasks["generate"].options(park=True, park_ttl=10).enqueue(n=3)
    app.pause("generation", "maintenance")
    clock.advance(11)
    summary = app.sweep()
    assert set(summary.expired) == {late.id, parked.id} and summary.noticed == (slow.id,)
    assert [(q, k) for q, k, _ in hook_jobs(app)] == [
        ("notify", f"durq.expire:{late.id}"),
        ("notify", f"durq.expire:{parked.id}"),
        ("notify", f"durq.slow:{slow.id}"),
    ]
    # the hook task is registered on the hook queue, so a worker serves it
    from durq.deadlines import install_hooks

    install_hooks(app)
    assert app.tasks["durq.hook:generate"].queue == "notify"
    assert app.tasks["durq.hook:render"].queue == "default"


def test_hooks_are_stored_by_every_kind_of_enqueue(app: durq.Durq, clock: Clock) -> None:
    register(app)
    many = app.tasks["generate"].enqueue_many([{"n": 1}, {"n": 2}], keys=["a", None])
    with app.batch():
        member = app.tasks["generate"].enqueue(n=3)
    keyed = app.tasks["generate"].options(key="k").enqueue(n=4)
    again = app.tasks["generate"].options(key="k").enqueue(n=4)
    assert again.id == keyed.id
    ids = [j.id for j in many] + [member.id, keyed.id]
    for _ in ids:
        claim(app, "generation", "generate")
    clock.advance(LEASE + 1)
    assert app.store.reap().failed == len(ids)
    assert [(q, k) for q, k, _ in hook_jobs(app)] == sorted(
        ("notify", f"durq.fail:{i}") for i in ids
    )


def test_a_job_retried_by_hand_that_fails_again_keeps_its_one_hook_job(app: durq.Durq) -> None:
    """Like on_expire: one hook job per job (its key), also after dq.retry."""
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    for _ in range(2):
        c = claim(app, "generation", "generate")
        app.store.finish(
            [marked(app, "generate", Outcome(c.id, c.lease_token, "failed", error=ERROR))]
        )
        assert app.get(job.id).state == "failed"
        if _ == 0:
            app.retry(job.id)
    assert [k for _, k, _ in hook_jobs(app)] == [f"durq.fail:{job.id}"]


def test_concurrent_reapers_insert_one_hook_job(
    make: Callable[[], durq.Durq], clock: Clock
) -> None:
    apps = [make() for _ in range(3)]
    register(apps[0])
    jobs = [apps[0].tasks["generate"].enqueue(n=i) for i in range(20)]
    for _ in jobs:
        claim(apps[0], "generation", "generate")
    clock.advance(LEASE + 1)
    barrier = threading.Barrier(3)
    failed: list[int] = []

    def reap(dq: durq.Durq) -> None:
        barrier.wait()
        failed.append(dq.store.reap().failed)

    threads = [threading.Thread(target=reap, args=(dq,)) for dq in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(failed) == 20
    assert len(hook_jobs(apps[0])) == 20


def test_find_returns_the_job_holding_a_key(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["render"].options(key="photo:1").enqueue(n=1)
    other = app.tasks["render"].options(key="photo:1", queue="other").enqueue(n=2)
    found = app.find("default", "photo:1")
    assert found is not None and (found.id, found.payload) == (job.id, {"n": 1})
    assert app.find("other", "photo:1").id == other.id  # type: ignore[union-attr]
    assert app.find("default", "photo:2") is None
    assert app.find("nowhere", "photo:1") is None
    with pytest.raises(durq.ConfigError):
        app.find("default", "")
    with pytest.raises(durq.ConfigError):
        app.find("", "photo:1")


def test_jobs_enqueued_by_name_get_their_hook_from_the_reaper_and_release_that_know_the_task(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    """A producer without the task stores no flag; the worker's reaper passes its tasks with
    on_fail, and its release says so itself."""
    register(app)
    producer = make()  # no tasks registered
    reaped = producer.enqueue("render", {"n": 1}, max_attempts=1)
    released = producer.enqueue("render", {"n": 2}, max_attempts=1)
    plain = producer.enqueue("plain", {"n": 3}, max_attempts=1)
    c1, c2 = app.store.claim("default", ["render"], 2, LEASE, "w1")
    claim(app, task="plain")
    error = json.dumps({"attempt": 1, "at": 0, "type": "Shutdown", "message": "bye",
                        "traceback": "", "kind": "shutdown"})  # fmt: skip
    released_claim = c1 if c1.id == released.id else c2
    assert app.store.release(
        released_claim.id, released_claim.lease_token, 0, error, on_fail=True
    ) == ("failed", 1)
    clock.advance(LEASE + 1)
    assert app.store.reap(fail_tasks=["render"]).failed == 2
    assert app.get(plain.id).state == "failed"
    assert [k for _, k, _ in hook_jobs(app)] == sorted(
        [f"durq.fail:{reaped.id}", f"durq.fail:{released.id}"]
    )
