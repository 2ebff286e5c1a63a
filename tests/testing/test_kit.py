"""durq.testing: drain, eager mode, assertions, and a task called directly (issue 16 §1)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

import pytest

import durq
from durq.store.sqlite.connection import parse_url
from durq.testing import assert_enqueued, assert_not_enqueued, drain, eager, enqueued
from tests.conftest import Clock


def test_drain_runs_retries_steps_and_context_in_the_test(make_any) -> None:
    dq = make_any()
    calls: list[int] = []

    @dq.task(max_attempts=3)
    def flaky(x: int) -> int:
        ctx = durq.context()
        calls.append(ctx.attempt)
        ctx.step("fetch", lambda: calls.append(-1))  # runs once, remembered across attempts
        ctx.progress(0.5, "half")
        if ctx.attempt < 3:
            raise ConnectionError("flaky network")
        return x * 2

    job = flaky.enqueue(x=21)
    result = drain(dq)
    assert calls == [1, -1, 2, 3]
    assert result.ran == [job.id] * 3
    assert result.retried == [job.id, job.id] and result.succeeded == [job.id]
    done = dq.get(job.id)
    assert (done.state, done.result, done.attempts) == ("succeeded", 42, 3)
    assert [e.type for e in done.errors] == ["ConnectionError", "ConnectionError"]
    assert dq.run_until_idle().ran == []  # nothing left


def test_without_skip_backoff_a_retry_waits_for_the_injected_clock(db_url: str) -> None:
    clock = Clock()
    dq = durq.Durq(db_url, clock=clock)

    @dq.task(max_attempts=2, backoff=durq.retry.constant(60))
    def once_bad() -> str:
        if durq.context().attempt == 1:
            raise ConnectionError("down")
        return "ok"

    job = once_bad.enqueue()
    assert drain(dq, skip_backoff=False).retried == [job.id]
    assert dq.get(job.id).state == "scheduled"
    assert drain(dq, skip_backoff=False).ran == []  # not due yet
    clock.advance(61)
    assert drain(dq, skip_backoff=False).succeeded == [job.id]


def test_drain_fires_batch_callbacks_and_failure_hooks(make_any) -> None:
    dq = make_any()
    seen: dict[str, Any] = {}

    @dq.task
    def done(batch_id: int, outcome: str, counts: dict[str, int], meta: dict[str, Any]) -> None:
        seen["batch"] = (outcome, counts)

    def on_fail(job: durq.Job) -> None:
        seen["failed"] = job.id

    @dq.task(on_fail=on_fail)
    def member(n: int) -> int:
        if n == 2:
            raise durq.Permanent("bad member")
        return n

    with dq.batch(on_complete=done):
        member.enqueue(n=1)
        bad = member.enqueue(n=2)
    result = drain(dq)
    assert bad.id in result.failed
    assert seen == {"batch": ("partial", {"succeeded": 1, "failed": 1}), "failed": bad.id}


def test_drain_runs_async_tasks_also_from_inside_an_event_loop(make_app) -> None:
    dq = make_app()

    @dq.task
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return durq.context().attempt * x * 2

    job = double.enqueue(x=4)

    async def in_a_test() -> Any:
        return drain(dq)

    assert asyncio.run(in_a_test()).succeeded == [job.id]
    assert dq.get(job.id).result == 8


def test_assert_enqueued_matches_a_payload_subset_and_says_what_is_there(make_any) -> None:
    dq = make_any()

    @dq.task
    def send_mail(to: str, subject: str) -> None: ...

    send_mail.enqueue(to="ada@example.org", subject="hi")
    job = assert_enqueued(send_mail, to="ada@example.org")
    assert job.payload == {"to": "ada@example.org", "subject": "hi"}
    assert_enqueued("send_mail", dq=dq, count=1)
    assert_not_enqueued(send_mail, to="bob@example.org")
    with pytest.raises(AssertionError, match=r"found 0\. Jobs of that task:\n  job \d+ queued"):
        assert_enqueued(send_mail, to="bob@example.org")
    with pytest.raises(AssertionError, match="found jobs"):
        assert_not_enqueued(send_mail, subject="hi")
    drain(dq)
    assert enqueued(send_mail) == []
    assert [j.state for j in enqueued(send_mail, states=("succeeded",))] == ["succeeded"]


def test_eager_mode_runs_at_enqueue_and_a_worker_refuses_it(make_app) -> None:
    dq = make_app(eager=True)
    order: list[str] = []

    @dq.task
    def child(n: int) -> int:
        order.append(f"child {n}")
        return n

    @dq.task
    def parent() -> str:
        order.append("parent")
        child.enqueue(n=1)  # picked up by the same drain, not a nested one
        order.append("parent done")
        return "ok"

    job = parent.enqueue()
    assert (job.state, job.result) == ("succeeded", "ok")
    assert order == ["parent", "parent done", "child 1"]
    many = child.enqueue_many([{"n": 2}, {"n": 3}])
    assert [j.state for j in many] == ["succeeded", "succeeded"]
    with pytest.raises(durq.ConfigError, match="eager mode"):
        dq.worker().run(install_signals=False)


def test_the_eager_block_and_an_uncommitted_outbox_enqueue(make_app) -> None:
    dq = make_app()

    @dq.task
    def ship(order: int) -> int:
        return order

    dq.store.migrate()
    with eager(dq):
        assert ship.enqueue(order=1).state == "succeeded"
        conn = sqlite3.connect(parse_url(dq.url).path)
        try:
            ship.options(connection=conn).enqueue(order=2)
            conn.rollback()  # never committed: never run, never there
        finally:
            conn.close()
    assert not dq.eager
    assert ship.enqueue(order=3).state == "queued"
    assert [j.id for j in dq.jobs(state="succeeded")] == [1]
    assert sorted(j.payload["order"] for j in dq.jobs()) == [1, 3]


def test_a_task_called_directly_has_a_context(make_app) -> None:
    dq = make_app()
    ran: list[str] = []

    @dq.task(queue="mail", max_attempts=4)
    def report(x: int) -> dict[str, Any]:
        ctx = durq.context()
        value = ctx.step("compute", lambda: ran.append("compute") or x + 1)
        again = ctx.step("compute", lambda: ran.append("twice") or 0)
        ctx.progress(1.0, "done")
        return {
            "job": ctx.job_id, "queue": ctx.queue, "attempt": ctx.attempt,
            "max": ctx.max_attempts, "value": value, "again": again,
            "retry": ctx.will_retry(ConnectionError()), "log": len(ctx.progress_log),
        }  # fmt: skip

    assert report(x=1) == {
        "job": 0, "queue": "mail", "attempt": 1, "max": 4, "value": 2, "again": 2,
        "retry": False, "log": 1,
    }  # fmt: skip
    assert ran == ["compute"]

    @dq.task
    async def atask() -> str:
        return durq.context().task

    assert asyncio.run(atask()) == "atask"
    with pytest.raises(LookupError):
        durq.context()  # still an error outside any task
