"""The worker in process: running, retrying, classifying, timing out, fencing."""

from __future__ import annotations

import asyncio
import email.message
import threading
import time
import urllib.error
from collections.abc import Callable

import pytest

import durq
from tests.support.db import execute


def test_sync_and_async_tasks_run_and_store_results(
    make_any: Callable[..., durq.Durq], drain
) -> None:
    app = make_any()

    @app.task
    def add(a: int, b: int) -> int:
        return a + b

    @app.task
    async def mul(a: int, b: int) -> int:
        await asyncio.sleep(0.01)
        return a * b

    j1, j2 = add.enqueue(a=2, b=3), mul.enqueue(a=2, b=3)
    drain(app, concurrency=4)
    assert (j1.wait(1), j2.wait(1)) == (5, 6)
    assert j1.refresh().attempts == 1


def test_transient_errors_retry_with_backoff_then_succeed(make_any, drain) -> None:
    app = make_any()
    calls: list[float] = []

    @app.task(max_attempts=4, backoff=durq.tiers([0.05, 0.1]))
    def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise ConnectionResetError("peer reset")
        return "ok"

    job = flaky.enqueue()
    drain(app)
    assert job.wait(1) == "ok"
    assert job.refresh().attempts == 3
    assert [e.type for e in job.errors] == ["ConnectionResetError"] * 2
    assert calls[1] - calls[0] >= 0.05 and calls[2] - calls[1] >= 0.1


def test_permanent_error_fails_at_once_and_exhausted_attempts_fail(make_any, drain) -> None:
    app = make_any()

    @app.task(max_attempts=5)
    def perm() -> None:
        raise durq.Permanent("bad request")

    @app.task(max_attempts=2, backoff=durq.constant(0.01))
    def always() -> None:
        raise ValueError("still broken")

    p, a = perm.enqueue(), always.enqueue()
    drain(app)
    with pytest.raises(durq.JobFailed, match="bad request"):
        p.wait(1)
    assert p.refresh().attempts == 1
    with pytest.raises(durq.JobFailed) as info:
        a.wait(1)
    assert info.value.job.attempts == 2 and len(info.value.job.errors) == 2
    assert info.value.error.message == "still broken"


def test_http_404_fails_for_good_and_429_honours_retry_after(make_any, drain) -> None:
    app = make_any()
    seen: list[int] = []

    def http_error(code: int, retry_after: str | None = None) -> urllib.error.HTTPError:
        headers = email.message.Message()
        if retry_after is not None:
            headers["Retry-After"] = retry_after
        return urllib.error.HTTPError("http://x/", code, "err", headers, None)

    @app.task(max_attempts=3, backoff=durq.constant(0))
    def gone() -> None:
        raise http_error(404)

    @app.task(max_attempts=3, backoff=durq.constant(0))
    def limited() -> str:
        seen.append(1)
        if len(seen) == 1:
            raise http_error(429, "1")
        return "ok"

    g, lim = gone.enqueue(), limited.enqueue()
    started = time.time()
    drain(app)
    with pytest.raises(durq.JobFailed):
        g.wait(1)
    assert g.refresh().attempts == 1
    assert lim.wait(1) == "ok"
    lim.refresh()
    assert lim.attempts == 2
    assert lim.finished_at is not None and lim.finished_at - started >= 1.0


def test_sync_timeout_interrupts_the_body_then_records_the_timeout(make_any, drain) -> None:
    app = make_any()
    seen: list[tuple[str | None, bool]] = []
    after: list[bool] = []

    @app.task(max_attempts=2, timeout=0.2, backoff=durq.constant(0))
    def slow() -> str:
        try:
            for _ in range(60):  # 3 s in short sleeps: each returns to Python bytecode
                time.sleep(0.05)
            after.append(True)
            return "late"
        finally:
            ctx = durq.context()
            seen.append((ctx.interrupted, ctx.lease_lost))

    job = slow.enqueue()
    started = time.monotonic()
    drain(app)
    with pytest.raises(durq.JobFailed):
        job.wait(1)
    job.refresh()
    assert job.attempts == 2 and job.result is None
    assert [e.kind for e in job.errors] == ["timeout", "timeout"]
    assert after == []  # nothing after the interruption ran
    # interrupted, not fenced: the lease was kept until the body had stopped
    assert seen == [("timeout", False), ("timeout", False)]
    assert time.monotonic() - started < 2.5  # far less than the 2 x 3 s of the bodies
    assert job.refresh().state == "failed"


def test_async_timeout_cancels_the_task(make_any, drain) -> None:
    app = make_any()
    cancelled: list[bool] = []

    @app.task(max_attempts=1, timeout=0.1)
    async def hang() -> None:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    job = hang.enqueue()
    drain(app)
    with pytest.raises(durq.JobFailed):
        job.wait(1)
    assert job.refresh().errors[0].kind == "timeout"
    assert cancelled == [True]


def test_context_progress_and_lease_lost_after_cancel(make_any) -> None:
    app = make_any()
    started = threading.Event()
    seen: dict[str, object] = {}

    @app.task
    def watcher() -> None:
        ctx = durq.context()
        seen["written"] = ctx.progress(0.25, "quarter")
        started.set()
        deadline = time.monotonic() + 5
        try:
            while time.monotonic() < deadline:
                time.sleep(0.01)
        except durq.Interrupted as exc:  # the cancel stops the body...
            seen["reason"] = exc.reason
            seen["lost"] = ctx.lease_lost
            # ...and a write it makes anyway is fenced out (on a thread of its own, which
            # the worker's raises, again every 0.1 s into the body, do not reach)
            late = threading.Thread(target=lambda: seen.update(late_write=ctx.progress(0.5)))
            late.start()
            late.join()

    job = watcher.enqueue()
    w = app.worker(lease=0.6)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        assert started.wait(5)
        assert job.refresh().progress == {"fraction": 0.25, "message": "quarter"}
        app.cancel(job.id)
        deadline = time.monotonic() + 3
        while "late_write" not in seen and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.request_stop()
        t.join(10)
    assert seen == {"written": True, "reason": "cancelled", "lost": True, "late_write": False}
    assert job.refresh().state == "cancelled"
    assert job.progress == {"fraction": 0.25, "message": "quarter"}


def test_a_heartbeat_that_finds_the_job_cancelled_stops_its_body_as_cancelled(make_any) -> None:
    """The heartbeat can see a cancel before the cancel watch does (its lease went with the
    cancel): the body must still be told ``cancelled``, not ``lease_lost``. The cancel watch
    is stopped here so that the heartbeat is the only one to see it."""
    app = make_any()
    started = threading.Event()
    seen: dict[str, object] = {}

    @app.task
    def watcher() -> None:
        started.set()
        deadline = time.monotonic() + 10
        try:
            while time.monotonic() < deadline:
                time.sleep(0.01)
        except durq.Interrupted as exc:
            seen["reason"] = exc.reason

    job = watcher.enqueue()
    w = app.worker(lease=30)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        assert started.wait(5)
        w.cancels.stop()
        app.cancel(job.id)
        w.heartbeat.beat()
        deadline = time.monotonic() + 3
        while "reason" not in seen and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        w.request_stop()
        t.join(10)
    assert seen == {"reason": "cancelled"}
    assert job.refresh().state == "cancelled"


def test_worker_claims_only_its_tasks_and_others_show_stranded(make_any, drain) -> None:
    producer = make_any()
    producer.enqueue("resize_image", {"path": "a.png"})
    app = make_any()

    @app.task
    def known() -> int:
        return 1

    k = known.enqueue()
    w = app.worker(lease=5)
    t = threading.Thread(target=lambda: w.run(install_signals=False), daemon=True)
    t.start()
    try:
        assert k.wait(5) == 1
        snap = app.status()
        assert snap["stranded"] == [{"queue": "default", "task": "resize_image", "jobs": 1}]
        assert snap["queues"]["default"]["stranded"] == 1
        # every worker also runs its tasks' deadline hook jobs (docs/features/deadlines.md)
        assert snap["workers"][0]["tasks"] == ["durq.hook:known", "known"]
    finally:
        w.request_stop()
        t.join(10)
    assert producer.jobs(task="resize_image")[0].state == "queued"


def test_corrupt_payload_fails_that_job_and_the_worker_keeps_running(
    make_any, drain, url: str
) -> None:
    app = make_any()

    @app.task
    def echo(x: int) -> int:
        return x

    bad = echo.enqueue(x=1)
    good = echo.enqueue(x=2)
    execute(url, "UPDATE jobs SET payload = ? WHERE id = ?", ("{not json", bad.id))
    drain(app)
    with pytest.raises(durq.JobFailed):
        bad.wait(1)
    assert bad.refresh().errors[0].kind == "undecodable_payload"
    assert bad.attempts == 1
    assert good.wait(1) == 2


def test_payload_that_does_not_fit_the_signature_fails_for_good(make_any, drain) -> None:
    app = make_any()

    @app.task(max_attempts=5)
    def needs_x(x: int) -> int:
        return x

    with pytest.raises(TypeError, match="does not fit needs_x"):
        app.enqueue("needs_x", {"y": 1})  # the producer knows the task: refused at once
    producer = make_any()  # one that does not import the task cannot check
    job = producer.enqueue("needs_x", {"y": 1})
    drain(app)
    with pytest.raises(durq.JobFailed, match="does not fit"):
        job.wait(1)
    assert job.refresh().attempts == 1 and job.errors[0].kind == "bad_payload"


def test_retries_and_failures_are_logged_when_the_app_logs_only_warnings(make_any, drain) -> None:
    import io
    import json
    import logging

    from durq.observability.events import configure_json_logging

    app = make_any()

    @app.task(max_attempts=2, backoff=durq.constant(0))
    def flaky() -> None:
        raise durq.Transient("try later")

    stream = io.StringIO()
    configure_json_logging(stream, level=logging.WARNING)
    try:
        job = flaky.enqueue()
        drain(app)
    finally:
        logging.getLogger("durq").handlers.clear()
        logging.getLogger("durq").propagate = True
    seen = [json.loads(line)["event"] for line in stream.getvalue().splitlines()]
    assert seen.count("job_retry_scheduled") == 1 and seen.count("job_failed") == 1
    assert "job_succeeded" not in seen and "job_started" not in seen
    assert job.refresh().state == "failed"
