"""Deadlines (issue 4, item 3): expiry, slow notices and their hooks, on both backends.

Every time here is the injected clock, i.e. stored times: the sweeper never keeps a timer.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

import durq
from durq.model import Outcome
from tests.conftest import Clock

LEASE = 30.0
NOTICE, DEADLINE = 300.0, 900.0  # the generation bot's 5-minute notice, 15-minute failure


def register(app: durq.Durq, calls: list[tuple[str, int, str]] | None = None) -> None:
    def on_expire(job: durq.Job) -> None:
        if calls is not None:
            calls.append(("expire", job.id, str(job.state)))

    def on_slow(job: durq.Job) -> None:
        if calls is not None:
            calls.append(("slow", job.id, str(job.state)))

    @app.task(deadline_in=DEADLINE, notice_after=NOTICE, on_expire=on_expire, on_slow=on_slow)
    def generate(n: int = 0) -> int:
        return n

    @app.task
    def plain(n: int = 0) -> int:
        return n


def hooks(app: durq.Durq) -> list[tuple[str | None, dict[str, object]]]:
    found = app.jobs(task="durq.hook:generate", limit=1000) + app.jobs(
        task="durq.hook:plain", limit=1000
    )
    return sorted((j.key, j.payload) for j in found)


def test_deadline_and_notice_come_from_created_at(app: durq.Durq) -> None:
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    assert job.deadline == pytest.approx(job.created_at + DEADLINE)
    assert job.notice_at == pytest.approx(job.created_at + NOTICE)
    stored = app.get(job.id)
    assert (stored.deadline, stored.notice_at, stored.noticed_at) == (
        job.deadline,
        job.notice_at,
        None,
    )
    none = app.tasks["plain"].enqueue(n=1)
    assert (none.deadline, none.notice_at, app.get(none.id).deadline) == (None, None, None)


def test_notice_at_5_minutes_then_expiry_at_15(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    clock.advance(NOTICE - 1)
    assert app.sweep().noticed == ()
    clock.advance(2)
    summary = app.sweep()
    assert (summary.expired, summary.noticed) == ((), (job.id,))
    assert app.get(job.id).noticed_at == pytest.approx(clock.now)
    assert app.sweep().noticed == ()  # once
    clock.advance(DEADLINE - NOTICE)
    summary = app.sweep()
    assert (summary.expired, summary.noticed) == ((job.id,), ())
    expired = app.get(job.id)
    assert expired.state == "expired" and expired.last_error is not None
    assert expired.last_error.type == "Expired" and "deadline" in expired.last_error.message
    assert hooks(app) == [
        (f"durq.expire:{job.id}", {"job_id": job.id, "hook": "expire"}),
        (f"durq.slow:{job.id}", {"job_id": job.id, "hook": "slow"}),
    ]
    with pytest.raises(durq.JobFailed):
        expired.wait(timeout=1)


def test_after_an_outage_longer_than_both_only_the_expiry_fires(
    app: durq.Durq, clock: Clock
) -> None:
    """Nobody swept for 20 minutes: the first pass expires, and sends no slow notice first."""
    register(app)
    overdue = app.tasks["generate"].enqueue(n=1)
    clock.advance(600)
    only_slow = app.tasks["generate"].enqueue(n=2)  # 10 minutes younger
    clock.advance(600)
    summary = app.sweep()
    assert (summary.expired, summary.noticed) == ((overdue.id,), (only_slow.id,))
    assert app.get(overdue.id).noticed_at is None
    assert hooks(app) == [
        (f"durq.expire:{overdue.id}", {"job_id": overdue.id, "hook": "expire"}),
        (f"durq.slow:{only_slow.id}", {"job_id": only_slow.id, "hook": "slow"}),
    ]


def test_finished_jobs_never_expire_or_get_noticed(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    (c,) = app.store.claim("default", ["generate"], 1, LEASE, "w1")
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")]) == [True]
    cancelled = app.tasks["generate"].enqueue(n=2)
    app.cancel(cancelled.id)
    clock.advance(DEADLINE * 2)
    summary = app.sweep()
    assert (summary.expired, summary.noticed) == ((), ())
    assert app.get(job.id).state == "succeeded" and hooks(app) == []


def test_a_running_job_past_its_deadline_is_fenced_out(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["generate"].options(deadline_in=60, notice_after=None).enqueue(n=1)
    (c,) = app.store.claim("default", ["generate"], 1, 3600, "w1")
    clock.advance(61)
    assert app.sweep().expired == (job.id,)
    assert app.store.extend_leases([(c.id, c.lease_token)], LEASE) == [(job.id, c.lease_token)]
    assert app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")]) == [False]
    expired = app.get(job.id)
    assert expired.state == "expired"
    [entry] = expired.errors  # the attempt it ended keeps its start and lease holder
    assert entry.kind == "expired" and entry.worker_id == "w1"
    assert entry.started_at == pytest.approx(clock.now - 61, abs=0.01)


def test_parked_and_scheduled_jobs_expire_too(app: durq.Durq, clock: Clock) -> None:
    register(app)
    g = app.tasks["generate"]
    parked = g.options(park=True).enqueue(n=1)
    scheduled = g.options(delay=DEADLINE - 1).enqueue(n=2)  # not due yet at the enqueue
    clock.advance(DEADLINE + 1)
    assert app.sweep().expired == (parked.id, scheduled.id)
    [entry] = app.get(parked.id).errors  # never ran: no start, no worker
    assert entry.started_at is None and entry.worker_id is None
    with pytest.raises(durq.JobGone):
        app.adopt(parked.id)


def test_absolute_deadlines_and_per_enqueue_overrides(app: durq.Durq, clock: Clock) -> None:
    register(app)
    g = app.tasks["generate"]
    at = clock.now + 50
    by_epoch = g.options(deadline=at).enqueue(n=1)
    by_datetime = g.options(deadline=datetime.fromtimestamp(at, UTC)).enqueue(n=2)
    by_name = app.enqueue("plain", {"n": 3}, deadline_in=50, notice_after=10)
    unknown = app.enqueue("elsewhere", {}, deadline=at)  # a task this producer lacks
    assert by_epoch.deadline == by_datetime.deadline == pytest.approx(at)
    assert by_name.deadline == pytest.approx(by_name.created_at + 50)
    assert by_name.notice_at == pytest.approx(by_name.created_at + 10)
    clock.advance(51)
    ids = {by_epoch.id, by_datetime.id, by_name.id, unknown.id}
    assert set(app.sweep().expired) == ids
    assert app.get(unknown.id).state == "expired"


def test_bad_deadline_options_are_refused(app: durq.Durq) -> None:
    register(app)
    g = app.tasks["generate"]
    with pytest.raises(durq.ConfigError, match="not both"):
        g.options(deadline=2_000_000_000, deadline_in=5).enqueue(n=1)
    with pytest.raises(durq.ConfigError, match="timezone-aware"):
        g.options(deadline=datetime(2030, 1, 1)).enqueue(n=1)
    for bad in (-1, 0, float("nan"), "5"):
        with pytest.raises(durq.ConfigError):
            g.options(notice_after=bad).enqueue(n=1)
        with pytest.raises(durq.ConfigError):
            g.options(deadline_in=bad).enqueue(n=1)
    with pytest.raises(durq.ConfigError, match="callable"):
        app.task(name="x", on_expire=42)(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(durq.ConfigError):
        app.task(name="y", deadline_in=-5)(lambda: None)
    assert app.jobs() == []


def test_concurrent_sweeps_enqueue_each_hook_once(
    app: durq.Durq, make: Callable[[], durq.Durq], clock: Clock
) -> None:
    register(app)
    jobs = app.tasks["generate"].enqueue_many([{"n": i} for i in range(30)])
    clock.advance(DEADLINE + 1)
    import threading

    others = [make() for _ in range(3)]
    results: list[tuple[int, ...]] = []
    threads = [
        threading.Thread(target=lambda d=d: results.append(d.sweep().expired)) for d in others
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    expired = [i for r in results for i in r]
    assert sorted(expired) == sorted(j.id for j in jobs)  # each expired by exactly one pass
    assert len(hooks(app)) == 30


def test_a_small_limit_takes_several_passes(app: durq.Durq, clock: Clock) -> None:
    register(app)
    app.tasks["generate"].enqueue_many([{"n": i} for i in range(7)])
    clock.advance(DEADLINE + 1)
    assert [len(app.sweep(limit=3).expired) for _ in range(4)] == [3, 3, 1, 0]


def test_retrying_an_expired_job_clears_its_passed_deadline(app: durq.Durq, clock: Clock) -> None:
    register(app)
    job = app.tasks["generate"].enqueue(n=1)
    clock.advance(DEADLINE + 1)
    app.sweep()
    retried = app.retry(job.id)
    assert retried.state == "queued" and retried.deadline is None
    assert app.sweep().expired == ()


def test_a_worker_runs_each_hook_once_with_the_job(app: durq.Durq, clock: Clock) -> None:
    calls: list[tuple[str, int, str]] = []
    register(app, calls)
    slow = app.tasks["generate"].enqueue(n=1)
    clock.advance(NOTICE + 1)
    app.sweep()
    expired = app.tasks["generate"].options(deadline_in=10, notice_after=None).enqueue(n=2)
    no_hooks = app.tasks["plain"].options(deadline_in=10).enqueue(n=3)
    clock.advance(11)
    app.sweep()
    worker = app.worker(concurrency=2)
    (c,) = app.store.claim("default", ["generate"], 1, LEASE, "w0")  # slow finishes first
    app.store.finish([Outcome(c.id, c.lease_token, "succeeded", result="1")])
    assert worker.run(install_signals=False, stop_when_idle=True) == 0
    assert sorted(calls) == [("expire", expired.id, "expired"), ("slow", slow.id, "succeeded")]
    assert all(h.state == "succeeded" for h in app.jobs(task="durq.hook:generate"))
    (plain_hook,) = app.jobs(task="durq.hook:plain")  # a task without hooks: a no-op
    assert plain_hook.state == "succeeded" and plain_hook.payload["job_id"] == no_hooks.id
